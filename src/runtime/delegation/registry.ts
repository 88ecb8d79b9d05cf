/**
 * The local capsule registry (`docs/delegation.md#the-capsule-registry`: a local delegation plane
 * instead of `mur-roost`). A capsule is a directory holding a `capsule.json` manifest (docs/manifest.md) with an
 * `entry`; the registry is a directory of such directories (`--capsules DIR`, default
 * `<workdir>/capsules/`), one per capsule, named by the capsule's bare name (`capsules/worker/`
 * for `local/worker`).
 *
 * Addressing (`docs/delegation.md#who-may-delegate-to-what`): a plan step names a capsule by its bare name; the spawn target
 * is the parent's `capabilities.spawn.allow` entry whose bare part equals it, else the name as
 * given. Only the parent's manifest grants spawn rights (a plan cannot grant itself any): a
 * target the allow list does not hold is `refused` and nothing is started.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { loadManifest, MANIFEST_FILE, type Manifest, type ManifestEntry } from '../../manifest.js';
import { isDirectory } from '../../records/directories.js';

/** The version a capsule step asks for when none is given (`docs/delegation.md#one-delegation`). */
export const DEFAULT_CAPSULE_VERSION = '0.1.0';

/** The bare part of an allow-list entry or capsule name: what follows the last `/` (an entry without a scope is its own bare name). */
export function bareName(name: string): string {
  const slash = name.lastIndexOf('/');
  return slash < 0 ? name : name.slice(slash + 1);
}

/** The spawn target of `name` (`docs/delegation.md#who-may-delegate-to-what`): the allow-list entry whose bare part equals it, else `name` as given. */
export function spawnTarget(name: string, allow: readonly string[]): string {
  if (allow.includes(name)) return name;
  return allow.find((entry) => bareName(entry) === name) ?? name;
}

/** A capsule found in the registry. */
export interface RegisteredCapsule {
  /** The full name (the spawn target), e.g. `local/worker`. */
  readonly name: string;
  readonly version: string;
  /** The capsule's directory, absolute. */
  readonly dir: string;
  /** Its `capsule.json`, absolute. */
  readonly manifestPath: string;
  readonly manifest: Manifest;
  readonly entry: ManifestEntry;
}

/** Why a capsule step's delegation was refused before anything started. `status` is the plane status it maps to. */
export interface CapsuleRefusal {
  readonly status: 'refused' | 'failed';
  readonly reason: string;
}

/** What {@link resolveCapsule} needs. */
export interface ResolveRequest {
  /** The capsule as the step names it (bare, or a full name). */
  readonly capsule: string;
  /** The version asked for (default {@link DEFAULT_CAPSULE_VERSION}). */
  readonly version?: string;
  /** The parent's `capabilities.spawn.allow`, or null when the parent runs without a manifest. */
  readonly spawnAllow: readonly string[] | null;
  /** The registry directory, absolute. */
  readonly capsulesDir: string;
}

/**
 * Resolves a capsule step's capsule, refusing in this order, each reason naming the fix:
 * not allowed by the parent's manifest (`refused`), no registry directory, no capsule directory
 * or `capsule.json` for it, an unreadable manifest, a name or version that does not match, no
 * `entry` (all `failed`: nothing was started).
 */
export async function resolveCapsule(request: ResolveRequest): Promise<{ ok: true; capsule: RegisteredCapsule } | { ok: false; refusal: CapsuleRefusal }> {
  const allow = request.spawnAllow ?? [];
  const target = spawnTarget(request.capsule, allow);
  const version = request.version ?? DEFAULT_CAPSULE_VERSION;
  const refuse = (status: CapsuleRefusal['status'], reason: string) => ({ ok: false as const, refusal: { status, reason } });
  if (!allow.includes(target)) {
    const where = request.spawnAllow === null ? 'the session runs without a manifest, so it may delegate to nothing' : `its capabilities.spawn.allow is ${JSON.stringify(allow)}`;
    return refuse(
      'refused',
      `capsule '${target}' is not allowed: ${where}; add "${target.includes('/') ? target : `local/${target}`}" to capabilities.spawn.allow in the parent's capsule.json (a plan cannot grant itself spawn rights)`,
    );
  }
  if (!isDirectory(request.capsulesDir)) {
    return refuse('failed', `no capsule registry: ${request.capsulesDir} is not a directory; create it with a directory per capsule (e.g. ${join(request.capsulesDir, bareName(target), MANIFEST_FILE)}) or pass --capsules DIR`);
  }
  const dir = join(request.capsulesDir, bareName(target));
  const manifestPath = join(dir, MANIFEST_FILE);
  if (!existsSync(manifestPath)) {
    return refuse('failed', `capsule '${target}' not found: no ${manifestPath} in the capsule registry ${request.capsulesDir}; create ${bareName(target)}/${MANIFEST_FILE} there (with an "entry") or pass --capsules DIR`);
  }
  const loaded = await loadManifest(manifestPath);
  if (!loaded.ok) return refuse('failed', `capsule '${target}' cannot be read: ${loaded.error}`);
  const manifest = loaded.manifest;
  const declaredName = manifest.name;
  if (declaredName !== undefined && declaredName !== target && declaredName !== bareName(target)) {
    return refuse('failed', `capsule '${target}' not found: ${manifestPath} declares the name '${declaredName}'; set "name" to "${bareName(target)}" there`);
  }
  const declaredVersion = manifest.version ?? DEFAULT_CAPSULE_VERSION;
  if (declaredVersion !== version) {
    return refuse('failed', `capsule '${target}@${version}' not found: ${manifestPath} is version ${declaredVersion}; set "version" to "${version}" there (versions are exact)`);
  }
  if (manifest.entry === undefined) {
    return refuse('failed', `capsule '${target}' has no entry: add "entry": {"plan": FILE} or {"command": [ARGV…]} to ${manifestPath}`);
  }
  return { ok: true, capsule: { name: target, version, dir, manifestPath, manifest, entry: manifest.entry } };
}
