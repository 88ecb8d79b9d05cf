/**
 * A session's network (`capabilities.network`, `--network`; docs/containment.md#network):
 * - `host`: every tree the session starts shares the host's network, as any process does;
 * - `session`: a network namespace of the session's own, with only the loopback interface, up.
 *   It is made once, when the session opens, and kept by a bind mount of its nsfs file under
 *   {@link NETNS_DIR} (as `ip netns add` keeps one: no process has to stay alive to hold it);
 *   every tree the session starts joins it first of all (the spawn helper's `--netns`), so the
 *   session's commands and the steps of every plan submitted in it reach each other on
 *   127.0.0.1, nothing outside reaches them, and they reach nothing outside. The session's end
 *   unmounts it (lazily: a tree that survived its ending keeps the namespace until it ends), and
 *   a session whose runtime died without ending leaves a file the next session's opening drops.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { processStartTime } from './proc.js';

/** What `capabilities.network` and `--network` choose. */
export type NetworkMode = 'host' | 'session';

/** The choices, in the order messages list them. */
export const NETWORK_MODES: readonly NetworkMode[] = ['host', 'session'];

/** Where the sessions' namespaces are bound (root only, as namespaces are). */
export const NETNS_DIR = '/run/capsule-runtime/netns';

/** A session's network as decided. */
export interface SessionNetwork {
  readonly mode: NetworkMode;
  /** The file the session's namespace is bound on (`session`), else null. */
  readonly namespace: string | null;
  /** The namespace's inode (`net:[N]` in /proc/<pid>/ns/net), else null. */
  readonly inode: number | null;
  /** What a step gets, in words. */
  readonly reason: string;
}

/** The host's network: nothing made. */
export const HOST_NETWORK: SessionNetwork = { mode: 'host', namespace: null, inode: null, reason: "the host's network" };

/** Why a `session` network cannot be had. */
export class NetworkUnavailable extends Error {}

/** Runs the helper with `args`; its one line of answer ("netns ok", or "netns <stage> <errno>"). */
function helperSays(helper: string, args: readonly string[]): string {
  try {
    return execFileSync(helper, args, { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch (error) {
    const out = (error as { stdout?: string }).stdout;
    return typeof out === 'string' && out.trim() !== '' ? out.trim() : `netns helper ${(error as Error).message}`;
  }
}

/** The inode of this process's PID namespace (pids mean something only within it), or 0. */
function pidNamespaceInode(): number {
  try {
    return statSync('/proc/self/ns/pid').ino;
  } catch {
    return 0;
  }
}

/**
 * The namespace file of a session of this runtime process: `<session>.<pid namespace>.<pid>.<start
 * time>`, which tell whether its owner still runs (a runtime in another PID namespace — a
 * delegated capsule's — is never judged by pids of this one).
 */
function namespaceFile(sessionId: string): string {
  return join(NETNS_DIR, `${sessionId}.${pidNamespaceInode()}.${process.pid}.${processStartTime(process.pid) ?? 0}`);
}

/**
 * Drops the namespaces that sessions whose runtime is gone left behind (killed before their end):
 * a file names its runtime by pid and start time, so no live session's is touched.
 */
function sweepDeadNamespaces(helper: string): void {
  let names: string[];
  try {
    names = readdirSync(NETNS_DIR);
  } catch {
    return;
  }
  const ours = pidNamespaceInode();
  for (const name of names) {
    const owner = /\.(\d+)\.(\d+)\.(\d+)$/.exec(name);
    if (owner === null || Number(owner[1]) !== ours) continue;
    const pid = Number(owner[2]);
    if (processStartTime(pid) === Number(owner[3])) continue;
    helperSays(helper, ['--netns-drop', join(NETNS_DIR, name)]);
  }
}

/**
 * Decides a session's network, making its namespace for `session` (and, with `probeOnly`, dropping
 * it again at once: `capsule doctor` proves it can be made).
 * @throws {NetworkUnavailable} when `session` was asked for and cannot be had (no helper, not root).
 */
export function openSessionNetwork(mode: NetworkMode, sessionId: string, helper: string | null, probeOnly: boolean): SessionNetwork {
  if (mode === 'host') return HOST_NETWORK;
  if (helper === null) throw new NetworkUnavailable('a network namespace is made and joined by the spawn helper, which is not built here (capsule doctor says why)');
  if (process.getuid?.() !== 0) throw new NetworkUnavailable('making a network namespace needs root (CAP_SYS_ADMIN)');
  try {
    mkdirSync(NETNS_DIR, { recursive: true, mode: 0o755 });
  } catch (error) {
    throw new NetworkUnavailable(`cannot create ${NETNS_DIR} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  if (!probeOnly) sweepDeadNamespaces(helper);
  const file = namespaceFile(sessionId);
  const said = helperSays(helper, ['--netns-make', file]);
  if (said !== 'netns ok') throw new NetworkUnavailable(`the spawn helper could not make a network namespace (${said})`);
  let inode: number | null = null;
  try {
    inode = statSync(file).ino;
  } catch {
    inode = null;
  }
  const network: SessionNetwork = {
    mode: 'session',
    namespace: file,
    inode,
    reason: 'a network namespace of the session with only loopback (127.0.0.1, ::1) up: its commands and plans reach each other there, nothing outside',
  };
  if (probeOnly) closeSessionNetwork(network, helper);
  return network;
}

/** Drops the session's namespace (nothing for `host`). Never throws. */
export function closeSessionNetwork(network: SessionNetwork, helper: string | null): void {
  if (network.namespace === null || helper === null) return;
  helperSays(helper, ['--netns-drop', network.namespace]);
}

/** `session_start.containment.network` (docs/trace.md#containment-records). */
export function networkTraceFields(network: SessionNetwork): { mode: NetworkMode; namespace: string | null; inode: number | null; reason: string } {
  return { mode: network.mode, namespace: network.namespace, inode: network.inode, reason: network.reason };
}
