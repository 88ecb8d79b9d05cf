/**
 * How a session's `capabilities.resources` are enforced here (docs/shell-commands.md#resource-limits),
 * decided once per session: memory and the process count by the command's own cgroup
 * (`memory.max`, `pids.max`) where those cgroup v2 controllers are enabled for the runtime's
 * hierarchy, else by rlimits the spawn helper sets before exec (RLIMIT_AS; RLIMIT_NPROC only
 * under `--run-as`, since it counts every process of the user); CPU time and file size always by
 * rlimits (RLIMIT_CPU, RLIMIT_FSIZE); the work folder by the session's guard
 * (`src/executors/workdir-guard.ts`).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { BoundBy, ResourceLimitName, ResourceLimits } from '../executors/resource-limit.js';
import { RESOURCE_FIELDS, RESOURCE_LIMIT_NAMES } from '../executors/resource-limit.js';

/** How each declared limit is enforced for this session's commands. */
export interface ResourceBounds {
  /** What the manifest declared (`capabilities.resources`). */
  readonly limits: ResourceLimits;
  /** By whom each declared limit is enforced: `cgroup`, `rlimit`, `guard`; absent: not declared. Null: declared and not enforceable here. */
  readonly enforcedBy: Readonly<Partial<Record<ResourceLimitName, 'cgroup' | 'rlimit' | 'guard' | null>>>;
  /** Why a declared limit is not enforced (one clause each); `''` when every declared one is. */
  readonly reason: string;
}

/** No limit declared. */
export const NO_BOUNDS: ResourceBounds = { limits: {}, enforcedBy: {}, reason: '' };

/** Whether any limit is declared. */
export function hasBounds(bounds: ResourceBounds): boolean {
  return Object.keys(bounds.enforcedBy).length > 0;
}

/** How memory or the process count is bounded, as {@link attributeResourceLimit}'s evidence needs it. */
export function boundBy(bounds: ResourceBounds, limit: 'memory' | 'pids'): BoundBy {
  const by = bounds.enforcedBy[limit];
  return by === 'cgroup' || by === 'rlimit' ? by : null;
}

function readWords(path: string): string[] | null {
  try {
    return readFileSync(path, 'utf8').trim().split(/\s+/).filter((word) => word !== '');
  } catch {
    return null;
  }
}

/**
 * Enables `controller` for the children of the session's cgroup, from the `capsule-runtime`
 * cgroup down (neither holds a process: the kernel allows it), when the runtime's own cgroup
 * already hands it to `capsule-runtime`. The runtime's own cgroup holds the runtime, so it is
 * never changed: a controller not enabled there is not ours to enable.
 */
function enableController(sessionCgroup: string, controller: string, probeOnly: boolean): boolean {
  if (readWords(join(sessionCgroup, 'cgroup.subtree_control'))?.includes(controller) === true) return true;
  const root = dirname(sessionCgroup);
  // A probe (capsule doctor) changes nothing: that it could be enabled is its answer.
  if (probeOnly) return readWords(join(root, 'cgroup.controllers'))?.includes(controller) === true;
  for (const dir of [root, sessionCgroup]) {
    if (readWords(join(dir, 'cgroup.controllers'))?.includes(controller) !== true) return false;
    try {
      writeFileSync(join(dir, 'cgroup.subtree_control'), `+${controller}`);
    } catch {
      return false;
    }
  }
  return readWords(join(sessionCgroup, 'cgroup.subtree_control'))?.includes(controller) === true;
}

/**
 * Decides how `limits` are enforced. `sessionCgroup`: the session's cgroup (cgroup backend), else
 * null; `helper`: the spawn helper can set rlimits before exec; `runAs`: steps run as a user of
 * their own (`--run-as`).
 */
export function decideResourceBounds(input: {
  readonly limits: ResourceLimits | undefined;
  readonly sessionCgroup: string | null;
  readonly helper: string | null;
  readonly runAs: boolean;
  /** Decide without enabling a controller (`capsule doctor`). */
  readonly probeOnly?: boolean;
}): ResourceBounds {
  const limits = input.limits ?? {};
  const enforcedBy: Partial<Record<ResourceLimitName, 'cgroup' | 'rlimit' | 'guard' | null>> = {};
  const missing: string[] = [];
  const controller = (name: 'memory' | 'pids'): boolean => input.sessionCgroup !== null && enableController(input.sessionCgroup, name, input.probeOnly === true);
  for (const name of RESOURCE_LIMIT_NAMES) {
    if (limits[RESOURCE_FIELDS[name]] === undefined) continue;
    const field = `capabilities.resources.${RESOURCE_FIELDS[name]}`;
    if (name === 'workdir') enforcedBy[name] = 'guard';
    else if (name === 'memory' && controller('memory')) enforcedBy[name] = 'cgroup';
    else if (name === 'pids' && controller('pids')) enforcedBy[name] = 'cgroup';
    else if (input.helper === null) {
      enforcedBy[name] = null;
      missing.push(`${field} is not enforced: there is no spawn helper to set rlimits (capsule doctor says why)`);
    } else if (name === 'pids' && !input.runAs) {
      enforcedBy[name] = null;
      missing.push(
        `${field} is not enforced: the pids cgroup controller is not enabled for the runtime's cgroup, and RLIMIT_NPROC counts every process of the user (root is exempt), so it bounds a command only under --run-as`,
      );
    } else enforcedBy[name] = 'rlimit';
  }
  return { limits, enforcedBy, reason: missing.join('; ') };
}

/** The spawn helper's `--rlimit` arguments for one command. */
export function rlimitArgs(bounds: ResourceBounds): string[] {
  const { limits, enforcedBy } = bounds;
  const out: string[] = [];
  if (enforcedBy.memory === 'rlimit' && limits.memory_max_bytes !== undefined) out.push('--rlimit', `as=${limits.memory_max_bytes}`);
  if (enforcedBy.pids === 'rlimit' && limits.pids_max !== undefined) out.push('--rlimit', `nproc=${limits.pids_max}`);
  if (enforcedBy.cpu === 'rlimit' && limits.cpu_secs !== undefined) out.push('--rlimit', `cpu=${limits.cpu_secs}`);
  if (enforcedBy.file_size === 'rlimit' && limits.file_size_max_bytes !== undefined) out.push('--rlimit', `fsize=${limits.file_size_max_bytes}`);
  return out;
}

/**
 * Writes the cgroup bounds of one command's own cgroup before anything joins it: `memory.max`
 * (with no swap beyond it, and the whole tree killed together when it is reached) and `pids.max`.
 * @throws when a bound cannot be written (the command must not start unbounded).
 */
export function applyCgroupBounds(unitCgroup: string, bounds: ResourceBounds): void {
  const { limits, enforcedBy } = bounds;
  if (enforcedBy.memory === 'cgroup' && limits.memory_max_bytes !== undefined) {
    writeFileSync(join(unitCgroup, 'memory.max'), String(limits.memory_max_bytes));
    for (const [file, value] of [
      ['memory.swap.max', '0'],
      ['memory.oom.group', '1'],
    ] as const) {
      try {
        writeFileSync(join(unitCgroup, file), value);
      } catch {
        // absent on this kernel (no swap accounting): memory.max alone bounds it
      }
    }
  }
  if (enforcedBy.pids === 'cgroup' && limits.pids_max !== undefined) writeFileSync(join(unitCgroup, 'pids.max'), String(limits.pids_max));
}

/** One counter of a flat-keyed cgroup file (`memory.events`, `pids.events`), 0 when absent. */
function counter(dir: string, file: string, key: string): number {
  try {
    const line = readFileSync(join(dir, file), 'utf8')
      .split('\n')
      .find((l) => l.startsWith(`${key} `));
    return line === undefined ? 0 : Number(line.slice(key.length + 1)) || 0;
  } catch {
    return 0;
  }
}

/** `memory.events` `oom_kill` and `pids.events` `max` of a command's own cgroup (read before it is removed). */
export function readLimitEvents(unitCgroup: string): { oomKill: number; pidsMax: number } {
  return { oomKill: counter(unitCgroup, 'memory.events', 'oom_kill'), pidsMax: counter(unitCgroup, 'pids.events', 'max') };
}

/** What `session_start.containment.resources` records (docs/trace.md). */
export function resourceTraceFields(bounds: ResourceBounds): { limits: Record<string, number>; enforced_by: ResourceBounds['enforcedBy']; reason: string } {
  const limits: Record<string, number> = {};
  for (const [field, value] of Object.entries(bounds.limits)) if (typeof value === 'number') limits[field] = value;
  return { limits, enforced_by: bounds.enforcedBy, reason: bounds.reason };
}

/** One line for `capsule doctor` and `capsule run --verbose`: each declared limit and how it holds. */
export function describeResourceBounds(bounds: ResourceBounds): string {
  const how: Record<string, string> = {
    cgroup: 'its own cgroup',
    rlimit: 'an rlimit set by the spawn helper',
    guard: "the work folder's guard",
  };
  const rlimitName: Record<string, string> = { memory: 'RLIMIT_AS', pids: 'RLIMIT_NPROC', cpu: 'RLIMIT_CPU', file_size: 'RLIMIT_FSIZE' };
  const cgroupFile: Record<string, string> = { memory: 'memory.max', pids: 'pids.max' };
  const parts = RESOURCE_LIMIT_NAMES.filter((name) => name in bounds.enforcedBy).map((name) => {
    const by = bounds.enforcedBy[name];
    const field = RESOURCE_FIELDS[name];
    if (by === null || by === undefined) return `${field} not enforced`;
    const detail = by === 'rlimit' ? ` (${rlimitName[name] ?? ''})` : by === 'cgroup' ? ` (${cgroupFile[name] ?? ''})` : '';
    return `${field} by ${how[by] ?? by}${detail}`;
  });
  if (parts.length === 0) return 'no capabilities.resources declared: commands are bounded only by the host';
  return `${parts.join('; ')}${bounds.reason !== '' ? ` — ${bounds.reason}` : ''}`;
}

/** Every limit declared (1 each): {@link decideResourceBounds} of it says what this machine could enforce (`capsule doctor`). */
export const EVERY_LIMIT: ResourceLimits = { memory_max_bytes: 1, pids_max: 1, cpu_secs: 1, file_size_max_bytes: 1, workdir_max_bytes: 1 };
