/**
 * A runaway shell command is stopped by the `capabilities.resources` limit it declared, and its
 * failure names that limit (docs/shell-commands.md#resource-limits), with real processes: a memory
 * hog, a process flood, a CPU spin, a big file and a work-folder filler, each as a plan step on
 * both backends (its limit in the step's error, the command gone after the run), and one as a
 * demoted background command of `capsule serve` (its completion's `resource_limit` and message
 * line, the trace's `shell_completed`).
 *
 * Memory and the process count take their cgroup path (`memory.max`, `pids.max`) only where those
 * cgroup v2 controllers are enabled for the runtime's hierarchy: where they are not, the
 * cgroup-path cases are skipped, saying so, and the rlimit path runs.
 */
import { chmodSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { detectContainment } from '../../src/process/containment.js';
import { removeCgroupTree } from '../../src/process/cgroup-unit.js';
import { unregisterSessionCgroup } from '../../src/process/session-registry.js';
import { manifestSchema, type Manifest } from '../../src/manifest.js';
import type { ResourceLimits } from '../../src/executors/resource-limit.js';
import { runPlan } from '../../src/runtime/run-plan.js';
import { readTrace } from '../../src/records/trace-reader.js';
import { cgroupUnavailable, eachBackend, pidNamespaceUnavailable } from '../support/backends.js';
import { TempDirs } from '../support/plan-harness.js';
import { endServes, startServe } from '../background/serve-client.js';
import { waitFor } from '../support/wait.js';

const dirs = new TempDirs();
afterAll(() => dirs.removeAll());
afterEach(() => endServes());

const isRoot = process.getuid?.() === 0;

/** A token in each command's text, so that the test can look for what it left running. */
const TOKEN = `capsule-limit-${process.pid}`;

/** Where the given cgroup v2 controllers are enabled for our hierarchy (null), or why not. */
function controllersUnavailable(limits: ResourceLimits, need: 'memory' | 'pids'): string | null {
  if (cgroupUnavailable !== null) return cgroupUnavailable;
  const sessionId = `probe-limits-${process.pid}-${Date.now()}`;
  const info = detectContainment({ sessionId, backend: 'cgroup', isolation: 'none', env: process.env, resources: limits, probeOnly: true });
  if (info.cgroup !== null) removeCgroupTree(info.cgroup);
  unregisterSessionCgroup(sessionId);
  return info.resources.enforcedBy[need] === 'cgroup' ? null : `the ${need} cgroup v2 controller is not enabled for the runtime's cgroup here (${info.resources.reason || 'cgroup.controllers lacks it'})`;
}

function manifestWith(resources: ResourceLimits, allow: readonly string[] = ['perl']): Manifest {
  return manifestSchema().parse({ capabilities: { shell: { allow }, resources } });
}

/** The pids of live processes whose command line holds {@link TOKEN}. */
function leftovers(): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(TOKEN)) out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}

/** Runs one perl step under `resources`; returns its result and the trace's step error. */
async function runStep(script: string, resources: ResourceLimits, options: { containment: 'cgroup' | 'process-group'; isolation: 'none' | 'pid-namespace'; runAs?: string }) {
  const workdir = dirs.make('limits');
  // A --run-as user must reach its work folder.
  chmodSync(workdir, 0o777);
  const report = await runPlan({
    plan: { id: 'limits', steps: [{ id: 's', shell: `perl -e '${script} # ${TOKEN}'` }] },
    manifest: manifestWith(resources),
    workdir,
    trace: true,
    containment: options.containment,
    isolation: options.isolation,
    ...(options.runAs !== undefined ? { runAs: options.runAs } : {}),
  });
  return { result: report.results[0], report, workdir };
}

const MEMORY_HOG = '$x = "a" x 400000000; print length $x';
const CPU_SPIN = '1 while 1';
const BIG_FILE = 'open my $f, ">", "big.bin" or die; print $f "a" x 8000000; close $f';
// Writes 1 MB every 20 ms, 300 MB at most: the guard must stop it long before.
const WORKDIR_FILLER = 'open my $f, ">", "fill.bin" or die; $| = 1; for (1..300) { print $f "a" x 1000000; $f->flush; select(undef, undef, undef, 0.02) } print "filled"';
// At most 150 processes whatever happens (each child sleeps, then exits): the hard outer bound.
const PROCESS_FLOOD = 'for (1..150) { my $p = fork; die "fork failed: $!\\n" unless defined $p; if (!$p) { sleep 20; exit 0 } } print "all forked"';

const limitError = (field: string): RegExp => new RegExp(`^shell subprocess '/[^']*perl' was killed for exceeding capabilities\\.resources\\.${field}: `);

eachBackend((backend) => {
  const isolation = pidNamespaceUnavailable === null ? 'pid-namespace' : 'none';
  const base = { containment: backend.containment, isolation } as const;

  it('ends a CPU spin at cpu_secs (SIGXCPU), naming cpu_secs, and leaves nothing behind', async () => {
    const { result } = await runStep(CPU_SPIN, { cpu_secs: 1 }, base);
    expect(result?.status).toBe('failed');
    expect(result?.error).toMatch(limitError('cpu_secs'));
    expect(result?.error).toMatch(/exit code 152$/);
    expect(leftovers()).toEqual([]);
  });

  it('ends a command writing a file past file_size_max_bytes (SIGXFSZ), naming file_size_max_bytes; the file stops at the bound', async () => {
    const { result, workdir } = await runStep(BIG_FILE, { file_size_max_bytes: 1_000_000 }, base);
    expect(result?.status).toBe('failed');
    expect(result?.error).toMatch(limitError('file_size_max_bytes'));
    expect(readFileSync(join(workdir, 'big.bin')).length).toBeLessThanOrEqual(1_000_000);
    expect(leftovers()).toEqual([]);
  });

  it('stops a command that fills the work folder past workdir_max_bytes, naming workdir_max_bytes', async () => {
    const { result, report } = await runStep(WORKDIR_FILLER, { workdir_max_bytes: 5_000_000 }, base);
    expect(result?.status).toBe('failed');
    expect(result?.error).toMatch(limitError('workdir_max_bytes'));
    expect(result?.error).not.toContain('filled');
    const steps = readTrace(join(report.records_dir, 'trace.jsonl')).records.filter((r) => r.event_type === 'plan_step');
    expect(JSON.stringify(steps)).toContain('capabilities.resources.workdir_max_bytes');
    expect(leftovers()).toEqual([]);
  });

  it('ends a memory hog past memory_max_bytes with the limit named (the address-space rlimit without a memory controller)', async () => {
    const { result } = await runStep(MEMORY_HOG, { memory_max_bytes: 100_000_000 }, base);
    expect(result?.status).toBe('failed');
    expect(result?.error).toMatch(limitError('memory_max_bytes'));
    expect(leftovers()).toEqual([]);
  });

  it('leaves a command within every bound alone', async () => {
    const { result } = await runStep('print "small"', { memory_max_bytes: 200_000_000, cpu_secs: 5, file_size_max_bytes: 1_000_000, workdir_max_bytes: 50_000_000 }, base);
    expect(result).toMatchObject({ status: 'success', output: 'small' });
  });
});

describe('the process count', () => {
  const unavailable = !isRoot ? 'not root: --run-as needs it' : null;
  (unavailable === null ? it : it.skip)(
    `ends a process flood under --run-as nobody at pids_max (RLIMIT_NPROC counts the user's processes), naming pids_max${unavailable !== null ? ` (skipped: ${unavailable})` : ''}`,
    async () => {
      // The limit must be in force before the flood runs: otherwise the 150 processes would run.
      const info = detectContainment({ sessionId: `probe-nproc-${process.pid}`, backend: 'process-group', isolation: 'none', env: process.env, runAs: 'nobody', resources: { pids_max: 20 }, probeOnly: true });
      expect(info.resources.enforcedBy.pids).toBe('rlimit');
      const { result } = await runStep(PROCESS_FLOOD, { pids_max: 20 }, { containment: 'process-group', isolation: pidNamespaceUnavailable === null ? 'pid-namespace' : 'none', runAs: 'nobody' });
      expect(result?.status).toBe('failed');
      expect(result?.error).toMatch(limitError('pids_max'));
      expect(result?.error).toContain('Resource temporarily unavailable');
      expect(leftovers()).toEqual([]);
    },
  );

  it('says pids_max is not enforced without a pids controller or --run-as (RLIMIT_NPROC would count every process of the runtime user)', () => {
    const info = detectContainment({ sessionId: `probe-nproc2-${process.pid}`, backend: 'process-group', isolation: 'none', env: process.env, resources: { pids_max: 20 }, probeOnly: true });
    expect(info.resources.enforcedBy.pids).toBeNull();
    expect(info.resources.reason).toMatch(/pids_max is not enforced: .*--run-as/);
  });

  const cgroupSkip = controllersUnavailable({ pids_max: 20 }, 'pids');
  (cgroupSkip === null ? it : it.skip)(`ends a process flood at pids_max through pids.max, naming pids_max${cgroupSkip !== null ? ` (skipped: ${cgroupSkip})` : ''}`, async () => {
    const { result } = await runStep(PROCESS_FLOOD, { pids_max: 20 }, { containment: 'cgroup', isolation: 'none' });
    expect(result?.error).toMatch(limitError('pids_max'));
    expect(leftovers()).toEqual([]);
  });
});

describe('memory through the cgroup', () => {
  const cgroupSkip = controllersUnavailable({ memory_max_bytes: 100_000_000 }, 'memory');
  (cgroupSkip === null ? it : it.skip)(`ends a memory hog at memory.max (oom_kill), naming memory_max_bytes${cgroupSkip !== null ? ` (skipped: ${cgroupSkip})` : ''}`, async () => {
    const { result } = await runStep(MEMORY_HOG, { memory_max_bytes: 100_000_000 }, { containment: 'cgroup', isolation: 'none' });
    expect(result?.error).toMatch(limitError('memory_max_bytes'));
    expect(leftovers()).toEqual([]);
  });
});

describe('a background command', () => {
  it('completes with resource_limit and the limit line in its message when a limit ended it, and the trace records it', async () => {
    const serve = startServe({
      args: ['--allow', 'perl'],
      setup: (W) => writeFileSync(join(W, 'capsule.json'), JSON.stringify({ capabilities: { shell: { allow: ['perl'] }, resources: { cpu_secs: 1 } } })),
    });
    const detached = await serve.call<{ status: string; work_id: string }>('shell.run', { binary: 'perl', command: `-e '${CPU_SPIN} # ${TOKEN}'`, grace_secs: 0 });
    expect(detached.status).toBe('detached');
    const completion = await serve.awaitNotification('completion', (p) => p['work_id'] === detached.work_id, 30_000);
    expect(completion).toMatchObject({ status: 'error', exit_code: 152, resource_limit: 'cpu' });
    expect(String(completion['message']).split('\n')).toContain(
      'resource limit hit: capabilities.resources.cpu_secs stopped this command; raise that declared limit or do less work per command.',
    );
    const completed = (): Record<string, unknown> | undefined => serve.trace().find((r) => r['event_type'] === 'shell_completed' && r['work_id'] === detached.work_id);
    await waitFor(() => completed() !== undefined, 10_000, 'shell_completed in the trace');
    const recorded = completed();
    expect(recorded).toMatchObject({ resource_limit: 'cpu', status: 'error' });
    expect(leftovers()).toEqual([]);
  });
});
