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
import { mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { parseAllowEntry, type AllowEntry } from '../manifest.js';
import { processStartTime } from './proc.js';
import { resolveExecutable, trustedPath } from './resolve-binary.js';
import { heldHelperPath } from './spawner/early.js';

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
  /**
   * With an allow-list: the destinations its commands may reach outside the namespace, resolved
   * (`IP`, `IP:PORT`, `IP/PREFIX`); null without one (loopback only, or the host's network).
   */
  readonly allow: readonly string[] | null;
}

/** The host's network: nothing made. */
export const HOST_NETWORK: SessionNetwork = { mode: 'host', namespace: null, inode: null, reason: "the host's network", allow: null };

/**
 * The namespace's side of the link `pasta` gives an allow-listed session: its address, and the
 * gateway, which pasta maps to the host's loopback. TEST-NET-1 (RFC 5737): routed nowhere, so it
 * never hides a destination the allow-list names.
 */
export const ALLOW_LINK = { address: '192.0.2.2', prefixLength: 24, hostLoopback: '192.0.2.1' } as const;

/** Why a `session` network cannot be had. */
export class NetworkUnavailable extends Error {}

/**
 * Runs the helper with `args`; its one line of answer ("netns ok", or "netns <stage> <errno>").
 * From the descriptor the session holds, as every tree's helper (spawn/held-helper.ts): the drop
 * at the session's end runs after its steps, which may have put a file at the helper's path.
 */
function helperSays(helper: string, args: readonly string[]): string {
  try {
    return execFileSync(heldHelperPath(helper), args, { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] }).trim();
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
    rmSync(join(NETNS_DIR, `${name}.pasta`), { force: true });
  }
}

/** `pasta` and `nft` on the trusted PATH, or why an allow-list cannot be had here. */
function allowTools(): { pasta: string; nft: string } {
  const path = trustedPath(process.env['PATH']);
  const pasta = resolveExecutable('pasta', path, '/');
  const nft = resolveExecutable('nft', path, '/');
  if (!pasta.ok || !nft.ok) {
    const missing = [!pasta.ok ? 'pasta (Debian package passt)' : null, !nft.ok ? 'nft (Debian package nftables)' : null].filter((m) => m !== null);
    throw new NetworkUnavailable(`an allow-list needs ${missing.join(' and ')} on PATH`);
  }
  return { pasta: pasta.path, nft: nft.path };
}

/** The addresses of a host name, looked up once (`getent ahosts`: the host's resolver, as a command would use it). */
function lookUp(name: string): string[] {
  let text = '';
  try {
    text = execFileSync('getent', ['ahosts', name], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    throw new NetworkUnavailable(`the allow-list's ${name} does not resolve`);
  }
  const addresses = [...new Set(text.split('\n').map((line) => line.split(/\s+/)[0] ?? '').filter((address) => isIP(address) !== 0))];
  if (addresses.length === 0) throw new NetworkUnavailable(`the allow-list's ${name} does not resolve`);
  return addresses;
}

/** The allow-list's entries, host names resolved, as `IP`, `IP:PORT` or `IP/PREFIX` (IPv6 in brackets with a port). */
export function resolveAllowList(entries: readonly string[]): { entry: AllowEntry; text: string }[] {
  const out: { entry: AllowEntry; text: string }[] = [];
  for (const raw of entries) {
    const parsed = parseAllowEntry(raw);
    if (parsed === null) throw new NetworkUnavailable(`the allow-list entry ${JSON.stringify(raw)} is not a destination`);
    const hosts = parsed.kind === 'name' ? lookUp(parsed.host) : [parsed.host];
    for (const host of hosts) {
      const kind = isIP(host) === 6 ? 'ip6' : 'ip4';
      const entry: AllowEntry = { host, kind, prefix: parsed.prefix, port: parsed.port };
      const address = kind === 'ip6' && parsed.port !== null ? `[${host}]` : host;
      out.push({ entry, text: parsed.prefix !== null ? `${host}/${parsed.prefix}` : parsed.port !== null ? `${address}:${parsed.port}` : host });
    }
  }
  return out;
}

/**
 * The namespace's nftables ruleset: out through loopback, replies, and the allowed destinations
 * (TCP and UDP to the port, or every port); everything else refused at once (a TCP reset, else
 * ICMP "administratively prohibited"), and nothing comes in but replies. A confined step cannot
 * change it: that takes `NET_ADMIN`, which it does not keep.
 */
export function allowRuleset(allowed: readonly { entry: AllowEntry }[]): string {
  const rules = allowed.map(({ entry }) => {
    const family = entry.kind === 'ip6' ? 'ip6' : 'ip';
    const address = entry.prefix !== null ? `${entry.host}/${entry.prefix}` : entry.host;
    return entry.port === null
      ? [`    ${family} daddr ${address} accept`]
      : [`    ${family} daddr ${address} tcp dport ${entry.port} accept`, `    ${family} daddr ${address} udp dport ${entry.port} accept`];
  });
  return [
    'table inet capsule {',
    '  chain output {',
    '    type filter hook output priority 0; policy drop;',
    '    oif "lo" accept',
    '    ct state established,related accept',
    ...rules.flat(),
    '    meta l4proto tcp reject with tcp reset',
    '    reject with icmpx type admin-prohibited',
    '  }',
    '  chain input {',
    '    type filter hook input priority 0; policy drop;',
    '    iif "lo" accept',
    '    ct state established,related accept',
    '  }',
    '}',
    '',
  ].join('\n');
}

/**
 * Gives the namespace bound on `file` its allow-list: the ruleset first (nothing may pass before
 * it holds), then `pasta` (run as root: it must enter a namespace root owns), which links it to
 * the host's network through sockets of its own and quits by itself once the file is dropped.
 */
function linkAllowed(file: string, helper: string, tools: { pasta: string; nft: string }, allowed: readonly { entry: AllowEntry }[]): void {
  try {
    execFileSync(helper, ['--netns', file, '--', tools.nft, 'nft', '-f', '-'], { input: allowRuleset(allowed), encoding: 'utf8', timeout: 10_000, stdio: ['pipe', 'pipe', 'pipe'] });
  } catch (error) {
    throw new NetworkUnavailable(`nft could not load the allow-list's rules (${((error as { stderr?: string }).stderr ?? (error as Error).message).trim()})`);
  }
  try {
    execFileSync(
      tools.pasta,
      ['--quiet', '--runas', '0', '--config-net', '--netns', file, '-a', ALLOW_LINK.address, '-n', String(ALLOW_LINK.prefixLength), '-g', ALLOW_LINK.hostLoopback, '-t', 'none', '-u', 'none', '-T', 'none', '-U', 'none', '-P', `${file}.pasta`],
      { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] },
    );
  } catch (error) {
    throw new NetworkUnavailable(`pasta could not link the namespace (${((error as { stderr?: string }).stderr ?? (error as Error).message).trim()})`);
  }
}

/**
 * Decides a session's network, making its namespace for `session` (and, with `probeOnly`, dropping
 * it again at once: `capsule doctor` proves it can be made).
 * @throws {NetworkUnavailable} when `session` was asked for and cannot be had (no helper, not root).
 */
export function openSessionNetwork(mode: NetworkMode, sessionId: string, helper: string | null, probeOnly: boolean, allow: readonly string[] | null = null): SessionNetwork {
  if (mode === 'host') return HOST_NETWORK;
  if (helper === null) throw new NetworkUnavailable('a network namespace is made and joined by the spawn helper, which is not built here (capsule doctor says why)');
  if (process.getuid?.() !== 0) throw new NetworkUnavailable('making a network namespace needs root (CAP_SYS_ADMIN)');
  try {
    mkdirSync(NETNS_DIR, { recursive: true, mode: 0o755 });
  } catch (error) {
    throw new NetworkUnavailable(`cannot create ${NETNS_DIR} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  const tools = allow !== null ? allowTools() : null;
  const allowed = allow !== null && !probeOnly ? resolveAllowList(allow) : [];
  if (!probeOnly) sweepDeadNamespaces(helper);
  const file = namespaceFile(sessionId);
  const said = helperSays(helper, ['--netns-make', file]);
  if (said !== 'netns ok') throw new NetworkUnavailable(`the spawn helper could not make a network namespace (${said})`);
  if (tools !== null && !probeOnly) {
    try {
      linkAllowed(file, helper, tools, allowed);
    } catch (error) {
      helperSays(helper, ['--netns-drop', file]);
      rmSync(`${file}.pasta`, { force: true });
      throw error;
    }
  }
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
    reason:
      allow === null
        ? 'a network namespace of the session with only loopback (127.0.0.1, ::1) up: its commands and plans reach each other there, nothing outside'
        : `a network namespace of the session: loopback, and out only to ${allowed.map((a) => a.text).join(', ') || 'the allow-list'} (through pasta; ${ALLOW_LINK.hostLoopback} is the host's loopback)`,
    allow: allow === null ? null : allowed.map((a) => a.text),
  };
  if (probeOnly) closeSessionNetwork(network, helper);
  return network;
}

/** Drops the session's namespace (nothing for `host`). Never throws. */
export function closeSessionNetwork(network: SessionNetwork, helper: string | null): void {
  if (network.namespace === null || helper === null) return;
  // pasta, if any, quits once the file is gone.
  helperSays(helper, ['--netns-drop', network.namespace]);
  rmSync(`${network.namespace}.pasta`, { force: true });
}

/** `session_start.containment.network` (docs/trace.md#containment-records). */
export function networkTraceFields(network: SessionNetwork): { mode: NetworkMode; namespace: string | null; inode: number | null; reason: string; allow?: readonly string[] } {
  return { mode: network.mode, namespace: network.namespace, inode: network.inode, reason: network.reason, ...(network.allow !== null ? { allow: network.allow } : {}) };
}
