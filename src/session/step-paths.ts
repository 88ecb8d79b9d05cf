/**
 * Which paths a session's steps get read-only, writable beneath those, and hidden, in their mount
 * namespace (the spawn helper's `--ro`, `--rw`, `--hide`; docs/security.md#what-a-step-gets).
 *
 * - Read-only: the records ROOT `<workdir>/.capsule/records/` (every session's records, not only
 *   this one's: a later `capsule run` reads all of them), and a records directory elsewhere
 *   (`--records DIR`) itself. Never one that holds the workdir or the runtime directory, which
 *   steps must be able to write.
 * - Writable beneath them: the session's scratch directory (the steps' HOME and TMPDIR), which
 *   lies beside the records directory, inside the root.
 * - Hidden: the records key's directory (`src/records/key-dir.ts`): a step running as root reads
 *   any file it can see. It is created here (0700) when missing: a directory that does not exist
 *   cannot be mounted over, and a step could create it with a key of its own choosing. Not when it
 *   holds the workdir, the records or the scratch directory (hiding it would hide them).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

/** What {@link stepPaths} is given: the session's layout. */
export interface SessionLayout {
  readonly workdir: string;
  readonly runtimeDir: string;
  /** The session's records directory, or null without records. */
  readonly recordsDir: string | null;
  readonly scratchDir: string;
  /** The records key's directory (`keyDir()`). */
  readonly keyDir: string;
  /** Create the key's directory when missing (default true; `capsule doctor` creates nothing). */
  readonly createKeyDir?: boolean;
}

/** The paths, and why one that should have been there is not (for `capsule run --verbose` and the trace's reason). */
export interface StepPaths {
  readonly readOnly: readonly string[];
  readonly writable: readonly string[];
  readonly hidden: readonly string[];
  readonly notes: readonly string[];
}

/** Whether `path` is `dir` or inside it (both absolute, normalized). */
function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

export function stepPaths(layout: SessionLayout): StepPaths {
  const notes: string[] = [];
  const mustWrite = [layout.workdir, layout.runtimeDir];
  const root = join(layout.workdir, '.capsule', 'records');
  const candidates: string[] = [];
  // The root when it exists (a run with --records elsewhere does not create it in the workdir).
  if ((layout.recordsDir !== null && isInside(layout.recordsDir, root)) || existsSync(root)) candidates.push(root);
  if (layout.recordsDir !== null && !isInside(layout.recordsDir, root)) candidates.push(layout.recordsDir);
  const readOnly = candidates.filter((path) => {
    const holds = mustWrite.find((dir) => isInside(dir, path));
    if (holds !== undefined) notes.push(`${path} is not read-only for steps: it holds ${holds}, which they write`);
    return holds === undefined;
  });
  const writable = readOnly.some((path) => isInside(layout.scratchDir, path)) ? [layout.scratchDir] : [];

  const hidden: string[] = [];
  const exposed = [layout.workdir, layout.runtimeDir, layout.scratchDir, ...(layout.recordsDir !== null ? [layout.recordsDir] : [])].find((dir) => isInside(dir, layout.keyDir));
  if (exposed !== undefined) {
    notes.push(`the records key's directory ${layout.keyDir} is not hidden from steps: it holds ${exposed}`);
  } else {
    try {
      if (layout.createKeyDir !== false) mkdirSync(layout.keyDir, { recursive: true, mode: 0o700 });
      hidden.push(layout.keyDir);
    } catch (error) {
      notes.push(`the records key's directory ${layout.keyDir} is not hidden from steps: it cannot be created (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
  }
  return { readOnly, writable, hidden, notes };
}
