/**
 * Shared setup of the background-command tests: Policy B (allowlist
 * `bash`, a fresh workdir W, a records directory R outside W, a grace per case) on a real session,
 * its test hook, and the cleanup every case ends with (the session's end kills what it started).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { backgroundTestHooks, type BackgroundTestHooks } from '../../src/shell-calls/test-hooks.js';
import type { ShellDetached, ShellRunResult } from '../../src/shell-calls/request.js';
import { Session, type SessionOptions } from '../../src/session/session.js';
import type { Manifest } from '../../src/manifest.js';

export { isProcessAlive, sleep, waitForPid } from '../cli/helpers.js';
export { waitFor } from '../support/wait.js';

/** One Policy B session. */
export interface PolicyB {
  readonly session: Session;
  readonly hooks: BackgroundTestHooks;
  /** The workdir W. */
  readonly W: string;
  /** The records directory R (not inside W). */
  readonly R: string;
  /** Abandonment reports written (instead of stderr). */
  readonly reports: string[];
  /** `shell.run` of `bash -c <script>` with `command` = `<script>`. */
  run(script: string, options?: { graceMs?: number | null }): Promise<ShellRunResult>;
  /** As {@link run}, expecting a demotion. */
  demote(script: string, graceMs?: number): Promise<ShellDetached>;
}

const opened: { session: Session; dirs: string[] }[] = [];

/** Opens a Policy B session (ended by {@link endSessions}). */
export function policyB(options: { graceMs?: number | null; records?: boolean; manifest?: Partial<Manifest>; session?: Partial<SessionOptions> } = {}): PolicyB {
  const W = mkdtempSync(join(tmpdir(), 'capsule-bg-w-'));
  const root = mkdtempSync(join(tmpdir(), 'capsule-bg-r-'));
  const R = join(root, 'records');
  const reports: string[] = [];
  const session = Session.open({
    workdir: W,
    recordsDir: R,
    // Policy B: no cgroup scope; pids the scripts write are the host's (no PID namespace).
    containment: 'process-group',
    isolation: 'none',
    ...(options.records === false ? { records: false } : {}),
    ...(options.manifest !== undefined ? { manifest: { capabilities: { shell: { allow: ['bash'] } }, lifecycle: {}, tools: {}, ...options.manifest } as Manifest } : {}),
    background: {
      allow: ['bash'],
      ...(options.graceMs !== undefined ? { graceMs: options.graceMs } : {}),
      onAbandonmentReport: (text) => reports.push(text),
    },
    ...options.session,
  });
  opened.push({ session, dirs: [W, root] });
  const run = (script: string, o: { graceMs?: number | null } = {}) =>
    session.background.run({ binary: 'bash', command: script, contextId: 'ctx_detached_tests', ...(o.graceMs !== undefined ? { graceMs: o.graceMs } : {}) });
  return {
    session,
    hooks: backgroundTestHooks(session),
    W,
    R,
    reports,
    run,
    demote: async (script, graceMs) => {
      const result = await run(script, graceMs !== undefined ? { graceMs } : {});
      if (result.status !== 'detached') throw new Error(`expected a demotion, got ${JSON.stringify(result)}`);
      return result;
    },
  };
}

/** Ends every session opened by {@link policyB} (killing what they started) and removes their directories. */
export async function endSessions(): Promise<void> {
  for (const { session, dirs } of opened.splice(0)) {
    await session.end('ok');
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}
