/**
 * Which paths a session's steps get read-only, writable beneath those, and hidden, in their mount
 * namespace (the spawn helper's `--ro`, `--rw`, `--hide`; docs/security.md#what-a-step-gets).
 *
 * - Read-only: the runtime's own files (src/runtime-files.ts: its package, the Node executable,
 *   the code cache), so that a step cannot change what the runtime loads or execs after it has
 *   started — the next process tree's spawn helper, a lazily imported chunk; the records ROOT
 *   `<workdir>/.capsule/records/` (every session's records of this workdir, not only this one's: a
 *   later `capsule run` reads all of them), and a records directory elsewhere (`--records DIR`)
 *   itself. Never one that holds the workdir or the runtime directory, which steps must be able
 *   to write — but the package may: the workdir inside it (`npm start` runs examples/release
 *   inside the repository) is a writable exception beneath it, and a package that IS the workdir
 *   gives only its code (dist/, node_modules/, package.json).
 * - Writable beneath them: the workdir and the runtime directory where they lie in the package,
 *   and the session's scratch directory (the steps' HOME and TMPDIR), which lies beside the
 *   records directory, inside the root. The helper binds them outermost first, so they nest.
 * - Hidden: the records key's directory (`src/records/key-dir.ts`): a step running as root reads
 *   any file it can see. It is created here (0700) when missing: a directory that does not exist
 *   cannot be mounted over, and a step could create it with a key of its own choosing. Not when it
 *   holds the workdir, the records or the scratch directory (hiding it would hide them). The code
 *   cache's directory is created for the same reason. And the step cache's store
 *   (docs/security.md#the-step-cache): only the runtime writes it, and a step that could would
 *   delete, damage or fill what later runs (of every workdir sharing it) restore from; made (0700)
 *   when missing for the same reason — unless a directory above it is another user's or others
 *   may write it, or a link such a user could have planted lies above it (`storeReachUnsafe`),
 *   checked first: then it is neither made nor used. Hidden rather than
 *   read-only: no step needs to read it, and it holds outputs of other workdirs. Hidden also where
 *   it lies inside the workdir. Not when it holds a directory steps use (the workdir, the records,
 *   the scratch directory, the runtime's package or Node).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { storeReachUnsafe } from '../cache/store.js';
import { isInside } from '../paths.js';
import type { RuntimeFiles } from '../runtime-files.js';

/** What {@link stepPaths} is given: the session's layout. */
export interface SessionLayout {
  readonly workdir: string;
  readonly runtimeDir: string;
  /** The session's records directory, or null without records. */
  readonly recordsDir: string | null;
  readonly scratchDir: string;
  /** The records key's directory (`keyDir()`). */
  readonly keyDir: string;
  /** The runtime's own files (`runtimeFiles()`), read-only for steps; absent: none. */
  readonly runtimeFiles?: RuntimeFiles;
  /** The step cache's store (`Session.cacheDir`), hidden from steps; absent or null: none. */
  readonly cacheDir?: string | null;
  /** Create the key's, the code cache's and the store's directories when missing (default true; `capsule doctor` creates nothing). */
  readonly createKeyDir?: boolean;
}

/** The paths, and why one that should have been there is not (for `capsule run --verbose` and the trace's reason). */
export interface StepPaths {
  readonly readOnly: readonly string[];
  readonly writable: readonly string[];
  readonly hidden: readonly string[];
  readonly notes: readonly string[];
}

/** What of the package a step gets read-only when the package is itself a directory steps write: its code. */
const PACKAGE_CODE = ['dist', 'node_modules', 'package.json'];

export function stepPaths(layout: SessionLayout): StepPaths {
  const notes: string[] = [];
  const mustWrite = [layout.workdir, layout.runtimeDir];
  const create = layout.createKeyDir !== false;
  const files = layout.runtimeFiles;

  // The runtime's own files: a directory steps write may lie inside the package (a writable exception there), never be it.
  const code: string[] = [];
  if (files !== undefined) {
    const root = files.packageRoot;
    const holder = mustWrite.find((dir) => dir === root);
    if (holder === undefined) code.push(root);
    else {
      code.push(...PACKAGE_CODE.map((name) => join(root, name)).filter((path) => existsSync(path)));
      notes.push(`the runtime's package ${root} is the directory steps write: only its ${PACKAGE_CODE.join(', ')} are read-only for them`);
    }
    code.push(files.executable);
    const cache = files.codeCacheDir;
    const holds = cache === null ? undefined : mustWrite.find((dir) => isInside(dir, cache));
    if (cache !== null && holds !== undefined) notes.push(`the code cache ${cache} is not read-only for steps: it holds ${holds}, which they write`);
    else if (cache !== null) {
      try {
        if (create) mkdirSync(cache, { recursive: true, mode: 0o700 });
        code.push(cache);
      } catch (error) {
        notes.push(`the code cache ${cache} is not read-only for steps: it cannot be created (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
      }
    }
  }

  const root = join(layout.workdir, '.capsule', 'records');
  const candidates: string[] = [];
  // The root when it exists (a run with --records elsewhere does not create it in the workdir).
  if ((layout.recordsDir !== null && isInside(layout.recordsDir, root)) || existsSync(root)) candidates.push(root);
  if (layout.recordsDir !== null && !isInside(layout.recordsDir, root)) candidates.push(layout.recordsDir);
  const records = candidates.filter((path) => {
    const holds = mustWrite.find((dir) => isInside(dir, path));
    if (holds !== undefined) notes.push(`${path} is not read-only for steps: it holds ${holds}, which they write`);
    return holds === undefined;
  });
  const readOnly = [...code, ...records];
  // Each directory steps write that lies inside a read-only path, once (the scratch directory beside the records, the workdir in the package).
  const writable = [...new Set([...mustWrite, layout.scratchDir])].filter((dir) => readOnly.some((path) => path !== dir && isInside(dir, path)));

  const hidden: string[] = [];
  const used = [layout.workdir, layout.runtimeDir, layout.scratchDir, ...(layout.recordsDir !== null ? [layout.recordsDir] : [])];
  // A directory is hidden (made first when missing and `make`: a step could otherwise make it) unless that would hide one of `visible`.
  const hide = (what: string, dir: string, visible: readonly string[], make = create): void => {
    const exposed = visible.find((path) => isInside(path, dir));
    if (exposed !== undefined) {
      notes.push(`${what} ${dir} is not hidden from steps: it holds ${exposed}`);
      return;
    }
    try {
      if (make) mkdirSync(dir, { recursive: true, mode: 0o700 });
      hidden.push(dir);
    } catch (error) {
      notes.push(`${what} ${dir} is not hidden from steps: it cannot be created (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
  };
  hide("the records key's directory", layout.keyDir, used);
  // Steps run Node and a delegated child's runtime from the package: the store never hides them.
  const cacheDir = layout.cacheDir ?? null;
  // One inside the key's directory is hidden with it (and a mount inside that empty tmpfs would fail).
  if (cacheDir !== null && !hidden.some((dir) => isInside(cacheDir, dir))) {
    const visible = [...used, ...(files !== undefined ? [files.packageRoot, files.executable] : [])];
    // Checked before it is made: a store below a directory another user owns or may write (or a
    // link such a user could have planted) is not used this run (the plan run says so,
    // `storeUnsafe`), and is never made there as root. One already there is still hidden: a mount in the steps' namespace writes nothing.
    const unsafe = create ? storeReachUnsafe(cacheDir) : null;
    if (unsafe === null) hide("the step cache's store", cacheDir, visible);
    else if (existsSync(cacheDir)) hide("the step cache's store", cacheDir, visible, false);
    else notes.push(`the step cache's store ${cacheDir} is not made nor hidden, and not used: ${unsafe}`);
  }
  return { readOnly, writable, hidden, notes };
}
