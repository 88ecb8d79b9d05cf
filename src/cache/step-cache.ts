/**
 * The step cache of a plan run (`docs/cache.md`): a step with a `cache` key whose key — its
 * identity (`docs/continue.md#identity`, the same code `--continue` compares with) and the
 * content of the files its `inputs` globs match — has a stored success is not run: its
 * `outputs` files are restored from the store and its result is answered as its attempt's
 * outcome, through the attempt hook `--continue` uses (`AttemptEnvironment.recall`): the machines
 * see an attempt that finished. A step that ran and succeeded is stored once it ended.
 */
import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { basename, dirname, join, relative, sep } from 'node:path';
import type { AttemptInput, AttemptOutcome } from '../../machines/step.machine.js';
import type { PlanStep, StepResult } from '../../machines/contracts.js';
import { messageOf } from '../errors.js';
import { isInside } from '../paths.js';
import { CHUNK_BYTES, hashFiles, matchFiles } from './files.js';
import { CacheStore, type FileOwner, type StoredFile } from './store.js';

/** Bumped when what goes into a key changes: a key of another version never matches. */
const KEY_VERSION = 1;

/** Options of {@link StepCache}. */
export interface StepCacheOptions {
  /** The store's directory (`--cache-dir`, the manifest's `cache.dir`, or {@link defaultCacheDir}). */
  readonly dir: string;
  readonly workdir: string;
  /** Said once per thing the cache could not do: a corrupt entry (then a miss), a store that failed (an error). */
  readonly warn: (line: string) => void;
  /** Who restored files belong to: the user steps run as (`--run-as`); null or absent: the runtime's user. */
  readonly owner?: FileOwner | null;
  /**
   * The runtime's own paths (`Session.runtimeOwnPaths`, absolute: the records, their scratch
   * directory, `<workdir>/.capsule`, the session's store), besides this cache's own store: those
   * inside the workdir are never matched nor restored into.
   */
  readonly runtimeOwn: readonly string[];
}

/** The outcome of a cache hit as the attempt answers it: `cached` rides along in the event log's `ATTEMPT.FINISHED` (the machines ignore it). */
export type CachedOutcome = AttemptOutcome & { readonly cached: true };

export class StepCache {
  readonly store: CacheStore;
  readonly #workdir: string;
  readonly #warn: (line: string) => void;
  readonly #owner: FileOwner | null;
  /** Workdir-relative trees of the runtime's (the records, the scratch directory, a store inside the workdir): never matched nor restored into. */
  readonly #runtimeOwn: readonly string[];
  /** Read and copy buffer, one per run: the cache's work is synchronous, so it is never shared. */
  readonly #buffer = Buffer.allocUnsafe(CHUNK_BYTES);
  /** The key of each step that missed, to store under when it succeeds. */
  readonly #pending = new Map<string, string>();
  readonly #cached = new Set<string>();

  constructor(options: StepCacheOptions) {
    this.store = new CacheStore(options.dir);
    this.#workdir = options.workdir;
    this.#warn = options.warn;
    this.#owner = options.owner ?? null;
    // Compared with links resolved: a store given through a link into the workdir is still the workdir's.
    const workdir = realOrSelf(options.workdir);
    const own = [...options.runtimeOwn, options.dir].map(realOrSelf).filter((path) => path !== workdir && isInside(path, workdir));
    this.#runtimeOwn = [...new Set(own.map((path) => relative(workdir, path).split(sep).join('/')))];
  }

  /**
   * The key of `step` with `identity`: sha256 (hex) of the key's version, the identity, and the
   * files its `inputs` match (sorted; each its path, length and bytes).
   */
  key(step: PlanStep, identity: string): string {
    const hash = createHash('sha256');
    hash.update(`capsule-step-cache\0${KEY_VERSION}\0${identity}\0`);
    hashFiles(hash, this.#workdir, matchFiles(this.#workdir, step.cache?.inputs ?? [], this.#runtimeOwn), this.#buffer);
    return hash.digest('hex');
  }

  /**
   * The attempt hook: for the first attempt of a step with `cache` and an identity, its stored
   * result with its outputs restored (a hit), or null to run it (a miss: it is stored when it
   * succeeds). A corrupt entry or blob is a miss with a warning, never a restore.
   */
  readonly lookup = (input: AttemptInput, identity: string | undefined): CachedOutcome | null => {
    const { step } = input.step;
    if (step.cache === undefined || input.attempt !== 1 || identity === undefined) return null;
    try {
      return this.#lookup(step, identity);
    } catch (error) {
      // The hook runs inside the attempt actor: a store that cannot be used is a miss, said, never a crash.
      this.#warn(`cache: step '${step.id}': the store ${this.store.dir} cannot be read (${messageOf(error)}): a miss, the step runs`);
      return null;
    }
  };

  #lookup(step: PlanStep, identity: string): CachedOutcome | null {
    let key: string;
    try {
      key = this.key(step, identity);
    } catch (error) {
      this.#warn(`cache: step '${step.id}': its inputs cannot be read (${messageOf(error)}): it runs and is not stored`);
      return null;
    }
    this.#pending.set(step.id, key);
    const read = this.store.readEntry(key);
    if (read.kind === 'missing') return null;
    const entryFile = this.store.entryPath(key);
    if (read.kind === 'corrupt') {
      this.#warn(`cache: step '${step.id}': the entry ${entryFile} is corrupt (${read.why}): a miss, the step runs and is stored again`);
      this.store.removeEntry(key);
      return null;
    }
    let restored;
    try {
      restored = this.store.restoreFiles(this.#workdir, read.entry.files, this.#buffer, { owner: this.#owner, runtimeOwn: this.#runtimeOwn });
    } catch (error) {
      this.#warn(`cache: step '${step.id}': its outputs could not be restored from ${entryFile} (${messageOf(error)}): a miss, the step runs`);
      return null;
    }
    if (!restored.ok) {
      this.#warn(`cache: step '${step.id}': the entry ${entryFile} cannot be restored: ${restored.why}: a miss, the step runs and is stored again`);
      this.store.removeEntry(key);
      return null;
    }
    this.store.touch(key);
    this.#pending.delete(step.id);
    this.#cached.add(step.id);
    return { status: 'success', output: read.entry.output, error: null, cached: true };
  }

  /** Whether `stepId`'s result is a cache hit of this run. */
  cached(stepId: string): boolean {
    return this.#cached.has(stepId);
  }

  /**
   * A step ended: when it ran and succeeded with a key, its `outputs` files and its result are
   * stored. A store that fails (a full disk, a read-only store) is said as an error: the step's
   * result stands, it is not cached.
   */
  ended(step: PlanStep, result: StepResult): void {
    const key = this.#pending.get(step.id);
    if (key === undefined) return;
    this.#pending.delete(step.id);
    // A truncated output is not the step's whole output: restoring it would pass the cut on as whole.
    if (result.status !== 'success' || result.truncated !== undefined || step.cache === undefined) return;
    try {
      const files: StoredFile[] = [];
      for (const file of matchFiles(this.#workdir, step.cache.outputs, this.#runtimeOwn)) {
        // Only regular files are stored: a link's target may be outside the workdir or made by another step.
        if (!file.stat.isFile()) continue;
        const blob = this.store.putBlob(`${this.#workdir}/${file.path}`, file.stat, this.#buffer);
        files.push({ path: file.path, sha256: blob.sha256, size: blob.size, mode: file.stat.mode & 0o777 });
      }
      this.store.putEntry({ v: 1, key, step_id: step.id, output: result.output, files, stored_at: new Date().toISOString() });
    } catch (error) {
      this.#warn(`cache: error: step '${step.id}' could not be stored in ${this.store.dir}: ${messageOf(error)}; its result stands but is not cached (free space, or move the store with --cache-dir)`);
    }
  }
}

/** Absolute `path` with its links resolved, as far as it exists (a part not made yet is kept as written). */
function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    const parent = dirname(path);
    return parent === path ? path : join(realOrSelf(parent), basename(path));
  }
}
