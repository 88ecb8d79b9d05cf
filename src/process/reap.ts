/**
 * Adopting and reaping the process trees a dead session left: the one vetted way
 * for the runtime to end a process it did not start in this life. A trace is not ours to trust, so
 * a recorded tree is believed only as far as the machine proves it:
 *
 * - its **leader** is the same process when its pid exists, is not a zombie and started at the
 *   same clock tick (`/proc/<pid>/stat` field 22): a reused pid has another start time and is never
 *   taken for it;
 * - its **cgroup** is believed only when the recorded path is a cgroup the containment layer makes
 *   for that very session (`<cgroup v2 mount>/…/capsule-runtime/<session id>[/<unit>]`, normalized,
 *   no `..`) and the cgroup exists; then every process in it is the tree's (nothing can leave a
 *   cgroup, and only the runtime puts processes there);
 * - its **process group** (no cgroup) is believed while a process with the leader's pid and start
 *   time exists (alive, or a zombie not yet reaped): a group's number is its leader's pid, which
 *   the kernel does not hand out again while any process holds it, so the group is the leader's.
 *   Once the leader is gone nothing proves it: the old group may have emptied and its number been
 *   taken by a new group (another user's daemon that called `setsid` and exited), whose members
 *   look the same in `/proc`. The members that started no earlier than the leader are then
 *   reported, with why ({@link TreeLiveness.unproven}), and never signalled (docs/resume.md#reap-limits).
 *   When the number names another process now, the old group is provably gone and nothing is found;
 * - and never a tree recorded as starting before the session's runtime did ({@link ProbeOptions}
 *   `notBefore`): a process a session started cannot predate it, so a forged record cannot name a
 *   daemon that was already running (docs/security.md). A leader that led its own group must
 *   still lead its own session (the runtime starts every tree with `setsid`).
 *
 * Reaping ends what is proven alive the way the containment layer ends its own trees (and with
 * its units: {@link CgroupUnit}, {@link ProcessGroupRegistry}): SIGTERM to the whole tree (to a PID
 * namespace's init alone, which forwards it once), SIGKILL after the grace (2 s by default,
 * `docs/background-commands.md#work-ids` `STOP_TERM_GRACE`), and done only once the tree is proven gone (`populated 0`,
 * no live group member, the leader gone). Every tree is signalled before any is waited for.
 *
 * Not guaranteed: between the liveness read and the signal a process could exit and its pid be
 * reused (a window of microseconds; a cgroup is frozen while its members are read and signalled,
 * which closes it there).
 */
import { existsSync, readFileSync } from 'node:fs';
import { normalize, sep } from 'node:path';
import { hasCgroupKill, parseCgroup2Mounts, readCgroupEvents } from './cgroups.js';
import { CgroupSignaller, CgroupUnit, cgroupTreeProcs, removeCgroupTree, settlesWithin } from './cgroup-unit.js';
import { CGROUP_ROOT_NAME } from './containment.js';
import { forEachLiveProcess, forEachProcess, isProvenGroupMember, isSameLiveProcess, processName, readProcStat, type ProcessRef, type ProcStat } from './proc.js';
import { groupMembers, KILL_VERIFY_TIMEOUT_MS, ProcessGroupRegistry } from './process-groups.js';
import { signalProcess, type EndSignal } from './signals.js';

/** Milliseconds between SIGTERM and SIGKILL when reaping (`docs/background-commands.md#work-ids`: `STOP_TERM_GRACE`). */
export const REAP_GRACE_MS = 2000;

/** A process tree as a trace recorded it (`process_start`, or `shell_detached`'s `pid`/`pid_start_time`/`pgid`/`cgroup`). */
export interface RecordedTree {
  /** The leader's pid. */
  readonly pid: number;
  /** The leader's start time, clock ticks after boot; null when not recorded (nothing can be proven from the pid alone). */
  readonly startTime: number | null;
  /** The process group the leader led, or null. */
  readonly pgid: number | null;
  /** The tree's cgroup directory as recorded, or null. */
  readonly cgroup: string | null;
  /** Whether the tree ran in a PID namespace of its own (its init then gets SIGTERM alone). */
  readonly pidNamespace: boolean;
}

/** What the machine proves about one recorded tree now. */
export interface TreeLiveness {
  /** Some process of the tree is alive. */
  readonly alive: boolean;
  /** The leader is the same process (pid and start time match). */
  readonly leaderAlive: boolean;
  /** A process now has the leader's pid but another start time: the pid was reused (never taken for the leader). */
  readonly pidReused: boolean;
  /** How the live processes were found, strongest first. */
  readonly evidence: readonly ('leader' | 'cgroup' | 'group')[];
  /** The live processes of the tree, by pid. */
  readonly processes: readonly LiveProcess[];
  /**
   * Which of `processes` are the runtime's spawn helper, not the command (a tree started in a PID
   * namespace: the recorded leader, and the namespace's init it forks); empty otherwise.
   */
  readonly helperPids: readonly number[];
  /** The vetted cgroup (null when none was recorded, it is gone, or it was not believed). */
  readonly cgroup: string | null;
  /** Why a recorded cgroup was not believed, or null. */
  readonly cgroupRefused: string | null;
  /** Why the record's leader and group were not believed (it predates the session's runtime), or null. */
  readonly recordRefused: string | null;
  /**
   * Why `processes` cannot be proven the tree's ({@link GROUP_LEADER_GONE}): they are the members
   * of its recorded process group, found with its leader gone, and are reported, never signalled;
   * null when they are proven (or none is alive).
   */
  readonly unproven: string | null;
}

/** Why the members of a recorded group whose leader is gone are not the tree's for sure (the cgroup backend proves membership). */
export const GROUP_LEADER_GONE = "its group's leader is gone, so the group number may name another group";

/** What bounds the records of one session. */
export interface ProbeOptions {
  /** The session's runtime start time (clock ticks after boot): a tree recorded as starting earlier is not believed. */
  readonly notBefore?: number | null;
}

/** One live process of a tree. */
export interface LiveProcess {
  readonly pid: number;
  /** Clock ticks after boot. */
  readonly startTime: number;
  /** `/proc/<pid>/comm`. */
  readonly name: string | null;
}

/** What reaping did to one tree. */
export interface ReapResult {
  readonly tree: RecordedTree;
  /** How the tree was addressed: its cgroup, its process group, its leader alone; null when nothing was alive. */
  readonly via: 'cgroup' | 'group' | 'leader' | null;
  /** The strongest signal sent (`SIGKILL` when something outlived the grace); null when nothing was signalled. */
  readonly signal: EndSignal | null;
  /** Pids still alive after SIGKILL and the verify wait (e.g. in uninterruptible sleep); normally empty. */
  readonly survivors: readonly number[];
  /** The tree is proven gone. */
  readonly gone: boolean;
  /** Why what was found alive was left alone, unsignalled (it cannot be proven the tree's: {@link TreeLiveness.unproven}), or null. */
  readonly notSignalled: string | null;
}

const isPid = (value: number | null): value is number => value !== null && Number.isSafeInteger(value) && value > 1;
const isTick = (value: number | null): value is number => value !== null && Number.isSafeInteger(value) && value >= 0;

/** The cgroup v2 mount points of this machine (read from `/proc/self/mountinfo`; none when unreadable). */
function cgroupMountPoints(): string[] {
  try {
    return parseCgroup2Mounts(readFileSync('/proc/self/mountinfo', 'utf8')).map((m) => m.mountPoint);
  } catch {
    return [];
  }
}

/**
 * Whether `recorded` may be believed as a cgroup of session `sessionId` (see the module doc).
 *
 * @returns the cgroup directory and the session's cgroup above it, or why not.
 */
export function vetRecordedCgroup(
  recorded: string,
  sessionId: string,
  mountPoints: readonly string[] = cgroupMountPoints(),
): { ok: true; dir: string; sessionDir: string } | { ok: false; reason: string } {
  if (!/^[A-Za-z0-9_-]+$/.test(sessionId)) return { ok: false, reason: `the session id ${JSON.stringify(sessionId)} cannot name a cgroup` };
  if (!recorded.startsWith('/') || normalize(recorded) !== recorded || recorded.endsWith(sep)) {
    return { ok: false, reason: `${recorded} is not a normalized absolute path` };
  }
  const mount = mountPoints.find((point) => recorded.startsWith(point.endsWith('/') ? point : `${point}/`));
  if (mount === undefined) return { ok: false, reason: `${recorded} is not on a cgroup v2 mount` };
  const parts = recorded.slice(mount.length).split('/').filter((p) => p !== '');
  const at = parts.lastIndexOf(sessionId);
  // `…/capsule-runtime/<session>` or `…/capsule-runtime/<session>/<unit>`: what Containment makes, nothing above it.
  if (at < 1 || parts[at - 1] !== CGROUP_ROOT_NAME || parts.length - at > 2) {
    return { ok: false, reason: `${recorded} is not a cgroup the runtime makes for session ${sessionId} (…/${CGROUP_ROOT_NAME}/${sessionId}/…)` };
  }
  const sessionDir = [mount.replace(/\/$/, ''), ...parts.slice(0, at + 1)].join('/');
  return { ok: true, dir: recorded, sessionDir };
}

/** Trees past which {@link procStats} reads `/proc` once rather than a stat per tree. */
const PROC_SNAPSHOT_TREES = 64;

/**
 * How {@link probeTrees} reads a pid's stat: for a few trees, one read each; for many (a dead
 * session of thousands of steps names thousands of exited pids), one walk of `/proc` first, every
 * process in it (zombies too) — a failed read per exited pid costs far more than the walk.
 */
function procStats(trees: number): (pid: number) => ProcStat | null {
  if (trees <= PROC_SNAPSHOT_TREES) return readProcStat;
  const stats = new Map<number, ProcStat>();
  // Without /proc nothing is found alive, as a read per pid would find.
  forEachProcess((pid, stat) => stats.set(pid, stat));
  return (pid) => stats.get(pid) ?? null;
}

/**
 * What is alive of each recorded tree of session `sessionId` (one `/proc` walk for all of them).
 * Fields are checked before use: a pid ≤ 1, a negative start time or a cgroup that is not the
 * session's prove nothing.
 */
export function probeTrees(trees: readonly RecordedTree[], sessionId: string, options: ProbeOptions = {}): TreeLiveness[] {
  const mounts = cgroupMountPoints();
  const notBefore = isTick(options.notBefore ?? null) ? (options.notBefore as number) : null;
  const statOf = procStats(trees.length);
  // A session's cgroup directory that is gone holds no unit: its trees' cgroups are not read one by one.
  const sessionDirs = new Map<string, boolean>();
  const partial = trees.map((tree) => {
    const leaderStat = isPid(tree.pid) ? statOf(tree.pid) : null;
    const recordRefused =
      notBefore !== null && isTick(tree.startTime) && tree.startTime < notBefore
        ? `pid ${tree.pid} is recorded as starting at tick ${tree.startTime}, before the session's runtime did (tick ${notBefore}): not a process it started`
        : null;
    const sameProcess = recordRefused === null && isPid(tree.pid) && isTick(tree.startTime) && leaderStat !== null && leaderStat.state !== 'Z' && leaderStat.startTime === tree.startTime;
    // The runtime starts every tree with setsid: a leader of its own group still leads its own session.
    const leaderAlive = sameProcess && (tree.pgid !== tree.pid || leaderStat?.session === tree.pid);
    const pidReused = leaderStat !== null && leaderStat.state !== 'Z' && isTick(tree.startTime) && leaderStat.startTime !== tree.startTime;
    let cgroup: string | null = null;
    let cgroupRefused: string | null = null;
    if (tree.cgroup !== null) {
      const vetted = vetRecordedCgroup(tree.cgroup, sessionId, mounts);
      if (!vetted.ok) cgroupRefused = vetted.reason;
      else {
        let present = sessionDirs.get(vetted.sessionDir);
        if (present === undefined) sessionDirs.set(vetted.sessionDir, (present = existsSync(vetted.sessionDir)));
        if (present && readCgroupEvents(vetted.dir) !== null) cgroup = vetted.dir;
      }
    }
    // Without a cgroup the group is the tree. The group's number names another process now (the
    // leader's own stat: pgid is its pid): the old group emptied, nothing of it is left to find.
    const groupNumberReused = tree.pgid !== null && tree.pgid === tree.pid && isTick(tree.startTime) && leaderStat !== null && leaderStat.startTime !== tree.startTime;
    const byGroup = recordRefused === null && cgroup === null && tree.cgroup === null && isPid(tree.pgid) && isTick(tree.startTime) && !groupNumberReused;
    // The leader (alive or a zombie) still holds the number: the group is the one it made. Else the
    // number is held only by members, which a new group of that number would have as well.
    const leaderHoldsNumber = tree.pgid === tree.pid && isTick(tree.startTime) && leaderStat !== null && leaderStat.startTime === tree.startTime;
    return { tree, leaderAlive, pidReused, cgroup, cgroupRefused, recordRefused, byGroup, groupProven: leaderHoldsNumber };
  });
  const groupMembersOf = new Map<number, LiveProcess[]>();
  const wanted = new Map<number, number>(); // pgid → the leader's start time
  for (const p of partial) if (p.byGroup) wanted.set(p.tree.pgid as number, Math.min(wanted.get(p.tree.pgid as number) ?? Infinity, p.tree.startTime as number));
  if (wanted.size > 0) {
    forEachLiveProcess((pid, stat) => {
      const leaderStart = wanted.get(stat.pgrp);
      // A member that started before the leader cannot be one of its descendants (the rule the spawner keeps too).
      if (leaderStart === undefined || !isProvenGroupMember(stat, stat.pgrp, leaderStart)) return;
      const list = groupMembersOf.get(stat.pgrp) ?? [];
      list.push({ pid, startTime: stat.startTime, name: processName(pid) });
      groupMembersOf.set(stat.pgrp, list);
    });
  }
  return partial.map((p) => {
    const found = new Map<number, LiveProcess>();
    const evidence: ('leader' | 'cgroup' | 'group')[] = [];
    if (p.leaderAlive) {
      evidence.push('leader');
      found.set(p.tree.pid, { pid: p.tree.pid, startTime: p.tree.startTime as number, name: processName(p.tree.pid) });
    }
    if (p.cgroup !== null && readCgroupEvents(p.cgroup)?.populated === true) {
      const pids = cgroupTreeProcs(p.cgroup).filter((pid) => pid !== process.pid);
      if (pids.length > 0) evidence.push('cgroup');
      for (const pid of pids) {
        const stat = readProcStat(pid);
        if (stat !== null && stat.state !== 'Z' && !found.has(pid)) found.set(pid, { pid, startTime: stat.startTime, name: processName(pid) });
      }
    }
    if (p.byGroup) {
      const members = groupMembersOf.get(p.tree.pgid as number) ?? [];
      if (members.length > 0) evidence.push('group');
      for (const member of members) if (!found.has(member.pid)) found.set(member.pid, member);
    }
    // In a PID namespace the group is the spawn helper's: the command runs under its namespace
    // init in groups of its own, so its processes are found as the helpers' descendants.
    const helperPids: number[] = [];
    if (p.tree.pidNamespace && found.size > 0) {
      for (const pid of found.keys()) if (pid === p.tree.pid || isNamespaceInit(pid)) helperPids.push(pid);
      for (const child of descendantsOf([...found.keys()], p.tree.startTime)) if (!found.has(child.pid)) found.set(child.pid, child);
    }
    const processes = [...found.values()].sort((a, b) => a.pid - b.pid);
    // Found through the group alone (no leader, no cgroup): reported, not proven.
    const unproven = processes.length > 0 && evidence.length === 1 && evidence[0] === 'group' && !p.groupProven ? GROUP_LEADER_GONE : null;
    return {
      unproven,
      helperPids: helperPids.sort((a, b) => a - b),
      alive: processes.length > 0,
      leaderAlive: p.leaderAlive,
      pidReused: p.pidReused,
      evidence,
      processes,
      cgroup: p.cgroup,
      cgroupRefused: p.cgroupRefused,
      recordRefused: p.recordRefused,
    };
  });
}

/** Whether `pid` is the init (pid 1) of a PID namespace below ours: its `NSpid` ends in 1 there. */
function isNamespaceInit(pid: number): boolean {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return false;
  }
  const ids = /^NSpid:\s*(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/) ?? [];
  return ids.length >= 2 && ids[ids.length - 1] === '1';
}

/** The live (not zombie) descendants of `roots`, none started before tick `notBefore` (a descendant cannot predate its tree). */
function descendantsOf(roots: readonly number[], notBefore: number | null): LiveProcess[] {
  const children = new Map<number, { pid: number; startTime: number }[]>();
  forEachLiveProcess((pid, stat) => {
    if (stat.state === 'Z' || (notBefore !== null && stat.startTime < notBefore)) return;
    const list = children.get(stat.ppid) ?? [];
    list.push({ pid, startTime: stat.startTime });
    children.set(stat.ppid, list);
  });
  const out: LiveProcess[] = [];
  const seen = new Set<number>(roots);
  const queue = [...roots];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of children.get(next) ?? []) {
      if (seen.has(child.pid)) continue;
      seen.add(child.pid);
      queue.push(child.pid);
      out.push({ pid: child.pid, startTime: child.startTime, name: processName(child.pid) });
    }
  }
  return out;
}

/** The init of a PID namespace among `pids` ({@link isNamespaceInit}), with its start time, or null. */
function namespaceInit(pids: readonly number[]): ProcessRef | null {
  for (const pid of pids) {
    if (!isNamespaceInit(pid)) continue;
    const startTime = readProcStat(pid)?.startTime;
    if (startTime !== undefined && startTime >= 0) return { pid, startTime };
  }
  return null;
}

/**
 * Ends what is alive of each recorded tree of session `sessionId` (see the module doc): SIGTERM to
 * every tree first, SIGKILL after `graceMs` to whatever is left, then resolves once each tree is
 * proven gone or, after {@link KILL_VERIFY_TIMEOUT_MS}, with its survivors. A cgroup proven empty
 * is removed, and so is the session's cgroup once nothing is left in it. Never rejects.
 *
 * @param graceMs milliseconds between SIGTERM and SIGKILL (default {@link REAP_GRACE_MS}).
 * @param options `notBefore`: the session's runtime start time ({@link probeTrees}).
 * @returns one result per tree, in the order given.
 */
export async function reap(trees: readonly RecordedTree[], sessionId: string, graceMs: number = REAP_GRACE_MS, options: ProbeOptions = {}): Promise<ReapResult[]> {
  if (!Number.isFinite(graceMs) || graceMs < 0) throw new RangeError(`graceMs must be a finite number of milliseconds ≥ 0, got ${String(graceMs)}`);
  const liveness = probeTrees(trees, sessionId, options);
  const groups = new ProcessGroupRegistry();
  const signallers = new Map<string, CgroupSignaller>();
  const sessionDirs = new Set<string>();
  const adopted = new Set<string>(); // a cgroup or group shared by two records is ended once
  const endings = trees.map((tree, i): Promise<ReapResult> => {
    const live = liveness[i] as TreeLiveness;
    const none: ReapResult = { tree, via: null, signal: null, survivors: [], gone: true, notSignalled: null };
    if (!live.alive) return Promise.resolve(none);
    if (live.unproven !== null) return Promise.resolve({ ...none, gone: false, notSignalled: live.unproven });
    if (live.cgroup !== null && live.evidence.includes('cgroup')) {
      const vetted = vetRecordedCgroup(live.cgroup, sessionId);
      if (!vetted.ok || adopted.has(`c:${vetted.dir}`)) return Promise.resolve({ ...none, via: 'cgroup' });
      adopted.add(`c:${vetted.dir}`);
      sessionDirs.add(vetted.sessionDir);
      const signaller = signallers.get(vetted.sessionDir) ?? new CgroupSignaller(vetted.sessionDir);
      signallers.set(vetted.sessionDir, signaller);
      const unit = new CgroupUnit(vetted.dir, tree.pgid ?? tree.pid, hasCgroupKill(vetted.dir), signaller);
      if (tree.pidNamespace) unit.init = namespaceInit(live.processes.map((p) => p.pid));
      return unit.end(graceMs).then((result) => {
        if (result.survivors.length === 0) unit.release();
        return { tree, via: 'cgroup' as const, signal: result.signal, survivors: result.survivors, gone: result.survivors.length === 0, notSignalled: null };
      });
    }
    if (live.evidence.includes('group') || (live.leaderAlive && isPid(tree.pgid) && tree.pgid === tree.pid)) {
      const pgid = tree.pgid as number;
      if (adopted.has(`g:${pgid}`)) return Promise.resolve({ ...none, via: 'group' });
      adopted.add(`g:${pgid}`);
      const init = tree.pidNamespace ? namespaceInit(live.processes.map((p) => p.pid)) : null;
      try {
        groups.register(pgid, `resume:${sessionId}`, { init: () => init, ...(tree.pgid === tree.pid && tree.startTime !== null ? { leaderStartTime: tree.startTime } : {}) });
      } catch {
        return Promise.resolve({ tree, via: 'group' as const, signal: null, survivors: live.processes.map((p) => p.pid), gone: false, notSignalled: null }); // the runtime's own group: never
      }
      return groups.endGroup(pgid, graceMs).then(
        (result) => ({ tree, via: 'group' as const, signal: result.signal, survivors: result.survivors, gone: result.survivors.length === 0, notSignalled: null }),
        () => ({ tree, via: 'group' as const, signal: null, survivors: groupMembers(pgid), gone: false, notSignalled: null }),
      );
    }
    if (live.leaderAlive) return endLeader(tree, graceMs).then((result) => ({ tree, via: 'leader' as const, ...result, notSignalled: null }));
    return Promise.resolve(none);
  });
  const results = await Promise.all(endings);
  for (const dir of sessionDirs) if (readCgroupEvents(dir)?.populated === false) removeCgroupTree(dir);
  return results;
}

/** A leader with no group or cgroup to address: SIGTERM, SIGKILL after the grace, each only while it is still the same process. */
async function endLeader(tree: RecordedTree, graceMs: number): Promise<Omit<ReapResult, 'tree' | 'via' | 'notSignalled'>> {
  const ref = { pid: tree.pid, startTime: tree.startTime as number };
  const goneWithin = async (ms: number): Promise<boolean> => {
    let stopped = false;
    const gone = new Promise<void>((resolve) => {
      const check = (): void => {
        if (stopped) return;
        if (!isSameLiveProcess(ref)) resolve();
        else setTimeout(check, 20);
      };
      check();
    });
    const settled = await settlesWithin(gone, ms);
    stopped = true;
    return settled;
  };
  if (!isSameLiveProcess(ref) || !signalProcess(ref.pid, 'SIGTERM')) return { signal: null, survivors: [], gone: !isSameLiveProcess(ref) };
  if (await goneWithin(graceMs)) return { signal: 'SIGTERM', survivors: [], gone: true };
  if (isSameLiveProcess(ref)) signalProcess(ref.pid, 'SIGKILL');
  const gone = await goneWithin(KILL_VERIFY_TIMEOUT_MS);
  return { signal: 'SIGKILL', survivors: gone ? [] : [ref.pid], gone };
}
