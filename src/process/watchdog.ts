/**
 * The session's cgroup watchdog: on the cgroup backend, nothing a session
 * started outlives the runtime, even when the runtime is SIGKILLed (a supervisor's `timeout -k`,
 * the OOM killer) while a graceful cancel waits. A tiny `/bin/sh` started with the first contained
 * tree holds the read end of a pipe whose write end only the runtime holds; the kernel closes it
 * when the runtime dies, however it dies. On end of input without the word `done` (the runtime's
 * ordinary close sends it) the watchdog writes `cgroup.kill` of the session's cgroup, which
 * SIGKILLs every process in it and its descendants at once (or, on a kernel without
 * `cgroup.kill`, freezes it and SIGKILLs every member). It kills only the session's cgroup, which
 * holds only processes the session started. It ignores SIGINT, SIGTERM, SIGHUP and SIGQUIT and
 * runs in a session of its own, so a terminal's Ctrl-C or hang-up does not take it first.
 *
 * The process-group backend has no such guarantee: a SIGKILLed runtime leaves its steps' groups
 * running (docs/containment.md); the next run on the machine names them (src/process/leftovers.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';

/** The watchdog's script; `$1` is the session's cgroup directory. */
const SCRIPT = [
  "trap '' INT TERM HUP QUIT",
  'IFS= read -r word',
  '[ "$word" = done ] && exit 0',
  'if [ -e "$1/cgroup.kill" ]; then echo 1 > "$1/cgroup.kill"; else',
  '  echo 1 > "$1/cgroup.freeze" 2>/dev/null',
  '  for procs in $(find "$1" -name cgroup.procs 2>/dev/null); do for pid in $(cat "$procs" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done; done',
  '  echo 0 > "$1/cgroup.freeze" 2>/dev/null',
  'fi',
  // Then the emptied cgroups go too (deepest first), as an ordinary end removes them: up to 5 s
  // for the kernel to report the tree empty. A cgroup still populated then is left for the next
  // run's abandoned-session warning, which names what is in it.
  'n=0; while [ $n -lt 50 ] && ! grep -q "^populated 0" "$1/cgroup.events" 2>/dev/null; do sleep 0.1; n=$((n+1)); done',
  'find "$1" -depth -type d -exec rmdir {} \\; 2>/dev/null',
  // And the shared capsule-runtime parent when no other session is in it (the kernel refuses otherwise).
  'rmdir "${1%/*}" 2>/dev/null',
  'exit 0',
].join('\n');

/** A running watchdog for one session's cgroup. */
export class CgroupWatchdog {
  readonly #child: ChildProcess;
  #released = false;

  private constructor(child: ChildProcess) {
    this.#child = child;
  }

  /**
   * Starts the watchdog of `sessionCgroup`. Null when `/bin/sh` is missing or cannot be started
   * (the session then runs without it, as before).
   */
  static start(sessionCgroup: string): CgroupWatchdog | null {
    if (!existsSync('/bin/sh')) return null;
    let child: ChildProcess;
    try {
      child = spawn('/bin/sh', ['-c', SCRIPT, 'capsule-watchdog', sessionCgroup], {
        stdio: ['pipe', 'ignore', 'ignore'],
        detached: true,
        env: {},
        cwd: '/',
      });
    } catch {
      return null;
    }
    if (child.pid === undefined) return null;
    child.on('error', () => {});
    child.stdin?.on('error', () => {});
    // Neither the watchdog nor its pipe keeps the runtime up.
    child.unref();
    (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    return new CgroupWatchdog(child);
  }

  /** The watchdog's pid (tests). */
  get pid(): number {
    return this.#child.pid as number;
  }

  /** The session closed its containment in order: the watchdog exits without killing anything. Idempotent. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    try {
      this.#child.stdin?.end('done\n');
    } catch {
      // already gone
    }
  }
}
