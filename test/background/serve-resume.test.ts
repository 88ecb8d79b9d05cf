/**
 * `capsule serve --resume DIR [--reap]` (docs/resume.md): a serve session SIGKILLed
 * with a background command still running is accounted for by the next serve, once: its work id
 * is marked `shell_lost` in the dead session's trace and reported as the resuming session's first
 * notification (method `completion`, `kind: "lost"`), before any request is answered; `--reap`
 * leaves nothing of it running. Real processes on both backends.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { groupLedBy, groupMembers, isProcessAlive, killGroups } from '../cli/helpers.js';
import { waitFor } from '../support/wait.js';
import { cgroupUnavailable } from '../support/backends.js';
import { endServes, exitOf, startServe } from './serve-client.js';

afterEach(endServes);

const traceOf = (dir: string): Record<string, unknown>[] =>
  readFileSync(join(dir, 'trace.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });

describe.each([
  ['cgroup', cgroupUnavailable],
  ['process-group', null],
] as const)('capsule serve --resume on the %s backend', (backend, skip) => {
  const test = skip === null ? it : it.skip;
  test(`reports a SIGKILLed session's background command once, as its first notification, and --reap leaves nothing${skip === null ? '' : ` (skipped: ${skip})`}`, async () => {
    const env = { CAPSULE_CONTAINMENT: backend };
    const dead = startServe({ env });
    const demoted = await dead.call<{ status: string; work_id: string; pid?: number }>('shell.run', { binary: 'bash', command: 'sleep 300 & sleep 300', grace_secs: 0 });
    expect(demoted.status).toBe('detached');
    const listed = await dead.call<{ commands: { work_id: string; pid: number; pgid: number }[] }>('backgroundCommand', { operation: 'status' });
    const command = listed.commands.find((c) => c.work_id === demoted.work_id);
    expect(command).toBeDefined();
    const pgid = command?.pgid ?? 0;
    // Its leader's start time, read while it runs: the cleanup kills the group only while it is still this one.
    const group = groupLedBy(pgid);
    try {
      // Killed outright: no sweep, no session_end, no terminal record for the command.
      dead.child.kill('SIGKILL');
      expect(await exitOf(dead)).toEqual({ code: null, signal: 'SIGKILL' });
      expect(traceOf(dead.R).some((r) => r['event_type'] === 'session_end')).toBe(false);

      const resumed = startServe({ env, args: ['--resume', dead.R, '--reap'] });
      const lost = await resumed.awaitNotification('completion', (p) => p['kind'] === 'lost', 30_000);
      // The lost report came before anything else the resuming session said.
      expect(resumed.messages[0]?.method).toBe('completion');
      expect(lost).toMatchObject({ kind: 'lost', origin: 'completion', source: 'detached_lost' });
      const entries = lost['lost'] as { work_id: string; binary: string }[];
      expect(entries.map((e) => e.work_id)).toEqual([demoted.work_id]);
      expect(String(lost['message'])).toContain(demoted.work_id);
      // The dead session's trace now accounts for the work id, once.
      const markers = traceOf(dead.R).filter((r) => r['event_type'] === 'shell_lost');
      expect(markers.map((r) => r['work_id'])).toEqual([demoted.work_id]);
      expect(markers[0]).toMatchObject({ reconciled_task_id: lost['task_id'] });
      // Nothing of the command is left (the watchdog on the cgroup backend, --reap on either).
      await waitFor(() => command !== undefined && !isProcessAlive(command.pid) && groupMembers(pgid).length === 0, 10_000, 'the lost command and its child to be gone');
      expect(resumed.trace().some((r) => r['event_type'] === 'session_resume')).toBe(true);
      // The session serves as usual afterwards, and a second resume of the same records reports nothing.
      expect(await resumed.call('session.stop')).toEqual({ residue: [] });
      expect(await exitOf(resumed)).toEqual({ code: 0, signal: null });
      const again = startServe({ env, args: ['--resume', dead.R] });
      expect(await again.call('session.stop')).toEqual({ residue: [] });
      expect(await exitOf(again)).toEqual({ code: 0, signal: null });
      expect(again.notifications('completion')).toEqual([]);
      expect(traceOf(dead.R).filter((r) => r['event_type'] === 'shell_lost')).toHaveLength(1);
    } finally {
      killGroups([group]);
    }
  });
});

describe('capsule serve --reap', () => {
  it('is refused without --resume (exit 2), before a session opens', async () => {
    const serve = startServe({ args: ['--reap'] });
    expect(await exitOf(serve)).toEqual({ code: 2, signal: null });
    expect(serve.stderr()).toContain('--reap needs --resume');
  });
});
