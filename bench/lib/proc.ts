/** Just enough `/proc` for the bench: live members of process groups, and peak RSS. */
import { readdirSync, readFileSync } from 'node:fs';

interface Stat {
  readonly pid: number;
  readonly state: string;
  readonly ppid: number;
  readonly pgrp: number;
  readonly comm: string;
}

function readStat(pid: number): Stat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  const fields = text.slice(close + 2).split(' ');
  return { pid, comm: text.slice(open + 1, close), state: fields[0] ?? '?', ppid: Number(fields[1]), pgrp: Number(fields[2]) };
}

/** Every live (not zombie) process, one `/proc` scan. */
export function liveProcesses(): Stat[] {
  const out: Stat[] = [];
  for (const entry of readdirSync('/proc')) {
    if (entry.charCodeAt(0) < 48 || entry.charCodeAt(0) > 57) continue;
    const stat = readStat(Number(entry));
    if (stat !== null && stat.state !== 'Z') out.push(stat);
  }
  return out;
}

/** Live members of any of `pgids`, one `/proc` scan. */
export function membersOf(pgids: ReadonlySet<number>): number[] {
  return liveProcesses().filter((p) => pgids.has(p.pgrp)).map((p) => p.pid);
}

/** Those of `pids` still alive in group `pgids` (a pid that exited, turned zombie or was reused elsewhere is gone). */
export function stillAlive(pids: readonly number[], pgids: ReadonlySet<number>): number[] {
  return pids.filter((pid) => {
    const stat = readStat(pid);
    return stat !== null && stat.state !== 'Z' && pgids.has(stat.pgrp);
  });
}

/** Peak resident set size of this process, bytes (`VmHWM`; `process.resourceUsage().maxRSS` as fallback). */
export function peakRssBytes(): number {
  try {
    const status = readFileSync('/proc/self/status', 'utf8');
    const match = /^VmHWM:\s+(\d+) kB/m.exec(status);
    if (match) return Number(match[1]) * 1024;
  } catch {
    // not Linux
  }
  return process.resourceUsage().maxRSS * 1024;
}
