/**
 * A session's own network (`--network session`, `capabilities.network`;
 * docs/containment.md#network), with real processes: two commands of one `capsule serve` session
 * talk over its loopback while the host reaches neither them nor is reached by them, a plan
 * submitted in the session reaches the session's background server, a `capsule run` plan gets a
 * namespace of its own, and each namespace is gone once its session ended; `host` (the default)
 * is the host's network as before.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { createServer, connect, type Server } from 'node:net';
import { join } from 'node:path';
import { runPlan } from '../../src/runtime/run-plan.js';
import { manifestSchema } from '../../src/manifest.js';
import { readTrace } from '../../src/records/trace-reader.js';
import { endServes, startServe, type ServeClient } from '../background/serve-client.js';
import { TempDirs } from '../support/plan-harness.js';
import { waitFor } from '../support/wait.js';
import { locateSpawnHelper } from '../../src/process/spawn/helper.js';
import { ALLOW_LINK, closeSessionNetwork, NETNS_DIR, openSessionNetwork } from '../../src/process/network.js';
import { detectContainment } from '../../src/process/containment.js';
import { eachBackend, pidNamespaceUnavailable } from '../support/backends.js';
import { execFileSync, spawnSync } from 'node:child_process';

const dirs = new TempDirs();
afterAll(() => dirs.removeAll());
afterEach(() => endServes());

const unavailable = process.getuid?.() !== 0 ? 'not root: a network namespace needs CAP_SYS_ADMIN' : !locateSpawnHelper().ok ? 'no spawn helper' : null;
const suite = unavailable === null ? describe : describe.skip;

/** A listener on the host's loopback; `accepted` counts the connections it got. */
async function hostListener(): Promise<{ server: Server; port: number; accepted: () => number }> {
  let count = 0;
  const server = createServer((socket) => {
    count++;
    socket.end('host\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port, accepted: () => count };
}

/** A port nothing listens on on the host's loopback now. */
async function freeHostPort(): Promise<number> {
  const { server, port } = await hostListener();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Whether the host can open a connection to 127.0.0.1:`port`. */
function hostReaches(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A perl server on 127.0.0.1:`port` answering `pong` to each connection. */
const server = (port: number): string =>
  `-MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => ${port}, Listen => 5, ReuseAddr => 1) or die "listen: $!"; while ($c = $s->accept) { print $c "pong" . chr(10); close $c }'`;

/** A bash script, client of 127.0.0.1:`port`: prints what it read, or `refused` (retrying for 5 s while nothing listens yet). */
const client = (port: number, tries = 50): string =>
  `for i in $(seq ${tries}); do if exec 3<>/dev/tcp/127.0.0.1/${port}; then read -r line <&3; echo "$line"; exit 0; fi 2>/dev/null; sleep 0.1; done; echo refused`;

/** The live processes in the network namespace of inode `inode`. */
function processesIn(inode: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readlinkSync(`/proc/${name}/ns/net`) === `net:[${inode}]`) out.push(Number(name));
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

/** Live processes whose command line names `text`. */
function processesNaming(text: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      if (cmdline.includes(text)) out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}

function sessionNetwork(records: readonly Record<string, unknown>[]): { mode: string; namespace: string | null; inode: number | null } {
  const start = records.find((r) => r['event_type'] === 'session_start') as { containment?: { network?: { mode: string; namespace: string | null; inode: number | null } } } | undefined;
  const network = start?.containment?.network;
  if (network === undefined) throw new Error('session_start records no network');
  return network;
}

async function run(serve: ServeClient, command: string, binary = 'bash'): Promise<string> {
  const result = await serve.call<{ status: string; stdout: string }>('shell.run', { binary, command });
  return result.stdout.trim();
}

suite(`a session's own network${unavailable !== null ? ` (skipped: ${unavailable})` : ''}`, () => {
  it('lets two commands of one serve session talk over loopback, and a plan submitted in it reach its background server; the host reaches neither way; the namespace goes with the session', async () => {
    const port = await freeHostPort();
    const host = await hostListener();
    try {
      const serve = startServe({ args: ['--network', 'session', '--allow', 'perl'] });
      const background = await serve.call<{ status: string; work_id: string }>('shell.run', { binary: 'perl', command: server(port), grace_secs: 0 });
      expect(background.status).toBe('detached');
      expect(await run(serve, client(port))).toBe('pong');
      // The host's loopback is another one: nothing listens on that port there, and the session's commands cannot reach the host's listener.
      expect(await hostReaches(port)).toBe(false);
      expect(await run(serve, client(host.port, 1))).toBe('refused');
      expect(host.accepted()).toBe(0);
      const submitted = await serve.call<{ report: { results: { status: string; output: string | null }[] } }>('plan.submit', {
        plan: { id: 'reach', steps: [{ id: 'c', shell: `bash -c '${client(port)}'` }] },
        wait: true,
      });
      expect(submitted.report.results[0]).toMatchObject({ status: 'success', output: 'pong\n' });
      const network = sessionNetwork(serve.trace());
      expect(network.mode).toBe('session');
      expect(network.namespace).not.toBeNull();
      const inode = network.inode as number;
      expect(processesIn(inode).length).toBeGreaterThan(0);
      serve.closeStdin();
      await serve.exited;
      expect(existsSync(network.namespace as string)).toBe(false);
      expect(processesIn(inode)).toEqual([]);
    } finally {
      host.server.close();
    }
  });

  eachBackend((backend) => {
    it.each(pidNamespaceUnavailable === null ? (['none', 'pid-namespace'] as const) : (['none'] as const))("gives a capsule run plan a namespace of its own (from the manifest's capabilities.network), gone when the run ends (isolation %s)", async (isolation) => {
      const host = await hostListener();
      try {
        const workdir = dirs.make('netrun');
        const report = await runPlan({
          plan: { id: 'own', steps: [{ id: 'c', shell: `bash -c '${client(host.port, 1)}'` }] },
          manifest: manifestSchema().parse({ capabilities: { shell: { allow: ['bash'] }, network: 'session' } }),
          workdir,
          trace: true,
          containment: backend.containment,
          isolation,
        });
        expect(report.results[0]).toMatchObject({ status: 'success', output: 'refused\n' });
        expect(host.accepted()).toBe(0);
        const network = sessionNetwork(readTrace(join(report.records_dir, 'trace.jsonl')).records as unknown as Record<string, unknown>[]);
        expect(network.mode).toBe('session');
        expect(existsSync(network.namespace as string)).toBe(false);
        expect(processesIn(network.inode as number)).toEqual([]);
      } finally {
        host.server.close();
      }
    });
  });

  it("drops the namespace a session whose runtime died left, when the next session's network is made", () => {
    const helper = locateSpawnHelper();
    if (!helper.ok) throw new Error(helper.reason);
    mkdirSync(NETNS_DIR, { recursive: true });
    // pid 2^22 + 1 is above any pid_max: no live runtime has it (in this PID namespace, named second).
    const left = join(NETNS_DIR, `ses_left.${statSync('/proc/self/ns/pid').ino}.${2 ** 22 + 1}.1`);
    expect(execFileSync(helper.path, ['--netns-make', left], { encoding: 'utf8' }).trim()).toBe('netns ok');
    const network = openSessionNetwork('session', `ses_next_${process.pid}`, helper.path, false);
    try {
      expect(existsSync(left)).toBe(false);
    } finally {
      closeSessionNetwork(network, helper.path);
    }
    expect(existsSync(network.namespace as string)).toBe(false);
  });
});

const allowTools = ['pasta', 'nft'].filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0);
const allowUnavailable = unavailable ?? (allowTools.length > 0 ? `${allowTools.join(' and ')} not installed (Debian packages passt, nftables)` : null);

(allowUnavailable === null ? describe : describe.skip)(`an allow-list${allowUnavailable !== null ? ` (skipped: ${allowUnavailable})` : ''}`, () => {
  it("admits the listed host endpoint and refuses another, keeps loopback, and leaves neither namespace nor pasta after the run", async () => {
    const allowed = await hostListener();
    const other = await hostListener();
    try {
      const workdir = dirs.make('netallow');
      const report = await runPlan({
        plan: {
          id: 'allow',
          steps: [
            { id: 'listed', shell: `bash -c '${client(allowed.port, 20).replace(/127\.0\.0\.1/, ALLOW_LINK.hostLoopback)}'` },
            { id: 'unlisted', shell: `bash -c '${client(other.port, 1).replace(/127\.0\.0\.1/, ALLOW_LINK.hostLoopback)}'` },
            { id: 'loopback', shell: `bash -c '${client(other.port, 1)}'` },
          ],
        },
        manifest: manifestSchema().parse({ capabilities: { shell: { allow: ['bash'] }, network: { allow: [`${ALLOW_LINK.hostLoopback}:${allowed.port}`] } } }),
        workdir,
        trace: true,
      });
      expect(report.results.map((r) => r.output)).toEqual(['host\n', 'refused\n', 'refused\n']);
      expect(allowed.accepted()).toBe(1);
      expect(other.accepted()).toBe(0);
      const network = sessionNetwork(readTrace(join(report.records_dir, 'trace.jsonl')).records as unknown as Record<string, unknown>[]) as { namespace: string; inode: number; allow?: string[] };
      expect(network.allow).toEqual([`${ALLOW_LINK.hostLoopback}:${allowed.port}`]);
      expect(existsSync(network.namespace)).toBe(false);
      // pasta quits once the namespace's file is gone.
      await waitFor(() => processesNaming(network.namespace).length === 0, 5000, 'pasta to quit');
      expect(processesIn(network.inode)).toEqual([]);
    } finally {
      allowed.server.close();
      other.server.close();
    }
  });
});

describe('a session network that cannot be had', () => {
  it('refuses the session, naming who asked and why, rather than run its commands on the host network', () => {
    expect(() => detectContainment({ sessionId: `net-refused-${process.pid}`, backend: 'process-group', isolation: 'none', network: 'session', networkBy: '--network session', env: { ...process.env, CAPSULE_SPAWN_HELPER: 'none' } })).toThrow(
      /^--network session asked for a network namespace of the session, but a network namespace is made and joined by the spawn helper, which is not built here/,
    );
  });
});

describe("the host's network (the default)", () => {
  it('lets a command reach a listener on the host, as before, and records mode host', async () => {
    const host = await hostListener();
    try {
      const serve = startServe();
      expect(await run(serve, client(host.port, 20))).toBe('host');
      await waitFor(() => host.accepted() === 1, 5000, 'the host listener to count the connection');
      expect(sessionNetwork(serve.trace())).toMatchObject({ mode: 'host', namespace: null });
    } finally {
      host.server.close();
    }
  });
});

