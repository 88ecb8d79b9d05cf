/**
 * A stop's answer in a PID namespace: `killed` names host pids, and the namespace's init (the
 * spawn helper, pid 1 there) is among them when the tree outlived SIGTERM's grace
 * (docs/serve.md#backgroundcommand).
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { eachBackend, pidNamespaceUnavailable } from '../support/backends.js';
import { endSessions, isProcessAlive, policyB, waitFor } from './helpers.js';

afterEach(endSessions);

/** Each live process's host pid, its pid in its innermost PID namespace, and that namespace. */
function processes(): { pid: number; nsPid: number; ns: string; ppid: number; cmd: string }[] {
  const out: { pid: number; nsPid: number; ns: string; ppid: number; cmd: string }[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = readFileSync(`/proc/${name}/status`, 'utf8');
      const nsPids = (/^NSpid:\s*(.*)$/m.exec(status)?.[1] ?? '').trim().split(/\s+/).map(Number);
      const ppid = Number(/^PPid:\s*(\d+)/m.exec(status)?.[1] ?? '0');
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ').trim();
      out.push({ pid: Number(name), nsPid: nsPids[nsPids.length - 1] ?? 0, ns: readlinkSync(`/proc/${name}/ns/pid`), ppid, cmd });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

(pidNamespaceUnavailable === null ? describe : describe.skip)('in a PID namespace', () => {
  eachBackend(({ containment }) => {
    it("answers SIGKILL with the namespace's init among the pids killed (host pids), and leaves nothing", async () => {
      const b = policyB({ graceMs: 0, session: { containment, isolation: 'pid-namespace' } });
      const detached = await b.demote(`(trap '' TERM; echo $BASHPID > child.pid; exec sleep 300) & wait`);
      await waitFor(() => { try { return readFileSync(join(b.W, 'child.pid'), 'utf8').endsWith('\n'); } catch { return false; } }, 10_000, 'the child to write its pid');
      const nsChild = Number(readFileSync(join(b.W, 'child.pid'), 'utf8'));
      // The pid is written before the child execs sleep: wait until it has.
      const isChild = (p: ReturnType<typeof processes>[number]): boolean => p.nsPid === nsChild && p.ns !== readlinkSync('/proc/self/ns/pid') && p.cmd === 'sleep 300';
      await waitFor(() => processes().some(isChild), 10_000, 'the child to exec sleep');
      const all = processes();
      const child = all.find((p) => p.nsPid === nsChild && p.ns !== readlinkSync('/proc/self/ns/pid') && p.cmd === 'sleep 300');
      expect(child).toBeDefined();
      const init = all.find((p) => p.ns === child?.ns && p.nsPid === 1);
      expect(init).toBeDefined();
      const stop = await b.session.background.operate({ operation: 'stop', work_id: detached.work_id });
      expect(stop).toMatchObject({ ok: true, state: 'stopped', stop: { signal: 'SIGKILL', survivors: [] } });
      const killed = [...(stop.ok && stop.operation === 'stop' ? (stop.stop?.killed ?? []) : [])].sort((x, y) => x - y);
      // The leader (bash) died of SIGTERM, and the helper's process the runtime started with it. On
      // the cgroup backend every process left in the cgroup needed SIGKILL: the init and the child;
      // on the process-group backend only the init is in the helper's group (the command runs in a
      // session of its own inside the namespace) and the child dies with it.
      expect(killed).toEqual(containment === 'cgroup' ? [init?.pid, child?.pid].sort((x, y) => (x ?? 0) - (y ?? 0)) : [init?.pid]);
      expect(isProcessAlive(child?.pid ?? 0)).toBe(false);
      expect(isProcessAlive(init?.pid ?? 0)).toBe(false);
    });
  });
});
