/**
 * Reads a tool result's `data_path` (`docs/plan-format.md#tool-steps`, "Reading data_path"): a relative path beneath
 * the accessible workdir, no symbolic link anywhere on the way, at most {@link MAX_DATA_PATH_BYTES}.
 * The read happens in the host, outside every sandbox, so it trusts nothing the tool wrote.
 */
import { constants as fsConstants } from 'node:fs';
import { lstat, open, readlink, realpath } from 'node:fs/promises';
import { isAbsolute, join, normalize, resolve, sep } from 'node:path';
import { decodeUtf8Lossy } from './utf8.js';

/**
 * Largest `data_path` file read, in bytes (10 MiB). We REFUSE an
 * over-cap file (`too_large`): a silently cut result could be taken for the whole answer.
 */
export const MAX_DATA_PATH_BYTES = 10 * 1024 * 1024;

/** Bytes read per `read()` call. */
const READ_CHUNK_BYTES = 1024 * 1024;

/** Machine-readable refusal codes of {@link readDataPath}. */
export type DataPathErrorCode = 'symlink' | 'outside_workdir' | 'too_large' | 'not_found' | 'io';

/** Answer of {@link readDataPath}. */
export type DataPathRead =
  | { readonly ok: true; readonly text: string }
  | { readonly ok: false; readonly code: DataPathErrorCode; readonly error: string };

/** Error text: `tool '<tool>' data_path '<path>' refused (<code>): <detail>` (wording ours; key terms: tool and path). */
export const dataPathError = (toolName: string, relPath: string, code: DataPathErrorCode, detail: string): string =>
  `tool '${toolName}' data_path '${relPath}' refused (${code}): ${detail}`;

/**
 * Reads `relPath` beneath `workdir` and decodes it as UTF-8 (invalid sequences → U+FFFD).
 *
 * Refuses, as a value (never throws): an absolute path or one whose lexical normalisation leaves
 * the workdir (`outside_workdir`); a symbolic link as ANY component below the workdir, checked with
 * `lstat` for each component and `O_NOFOLLOW` on the final open (`symlink`); a missing file
 * (`not_found`); anything but a regular file, or a read error (`io`); more than
 * {@link MAX_DATA_PATH_BYTES} bytes (`too_large`). On Linux, the opened descriptor's path
 * (`/proc/self/fd/<fd>`) must equal the expected real path, which closes the window in which a
 * directory component is swapped for a link between the checks and the open.
 *
 * The workdir itself may lie under a symbolic link; only components below it are checked.
 */
export async function readDataPath(workdir: string, relPath: string, toolName: string): Promise<DataPathRead> {
  const refuse = (code: DataPathErrorCode, detail: string): DataPathRead => ({
    ok: false,
    code,
    error: dataPathError(toolName, relPath, code, detail),
  });

  if (relPath.includes('\0')) return refuse('io', 'the path contains a NUL byte');
  if (isAbsolute(relPath)) return refuse('outside_workdir', 'the path is absolute; give a path relative to the workdir');
  const normalized = normalize(relPath);
  if (normalized === '..' || normalized.startsWith(`..${sep}`)) {
    return refuse('outside_workdir', 'the path leaves the workdir through ..');
  }
  const components = normalized.split(sep).filter((part) => part !== '' && part !== '.');
  if (components.length === 0) return refuse('io', 'the path names the workdir itself, not a file');

  const root = resolve(workdir);
  let current = root;
  for (const [index, component] of components.entries()) {
    current = join(current, component);
    const shown = components.slice(0, index + 1).join('/');
    let stats;
    try {
      stats = await lstat(current);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return refuse('not_found', `'${shown}' does not exist`);
      return refuse('io', `cannot inspect '${shown}': ${(error as Error).message}`);
    }
    if (stats.isSymbolicLink()) return refuse('symlink', `'${shown}' is a symbolic link`);
    const last = index === components.length - 1;
    if (!last && !stats.isDirectory()) return refuse('not_found', `'${shown}' is not a directory`);
    if (last && !stats.isFile()) return refuse('io', `'${shown}' is not a regular file`);
  }

  let handle;
  try {
    // O_NONBLOCK: a FIFO swapped in after the checks must not block the open.
    handle = await open(current, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') return refuse('symlink', `'${normalized}' is a symbolic link`);
    if (code === 'ENOENT') return refuse('not_found', `'${normalized}' does not exist`);
    return refuse('io', `cannot open '${normalized}': ${(error as Error).message}`);
  }
  try {
    const opened = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => null);
    if (opened?.endsWith(' (deleted)') === true) return refuse('io', `'${normalized}' was removed while it was opened`);
    if (opened !== null) {
      const expected = join(await realpath(root), ...components);
      if (opened !== expected) return refuse('symlink', `'${normalized}' resolved to '${opened}' (a component changed into a link)`);
    }
    const stats = await handle.stat();
    if (!stats.isFile()) return refuse('io', `'${normalized}' is not a regular file`);
    if (stats.size > MAX_DATA_PATH_BYTES) {
      return refuse('too_large', `${stats.size} bytes is over the ${MAX_DATA_PATH_BYTES}-byte cap`);
    }
    // Read until EOF, but never more than cap + 1 bytes: the file may grow while it is read.
    const chunks: Buffer[] = [];
    let total = 0;
    const chunk = Buffer.alloc(READ_CHUNK_BYTES);
    for (;;) {
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, total);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > MAX_DATA_PATH_BYTES) {
        return refuse('too_large', `the file grew over the ${MAX_DATA_PATH_BYTES}-byte cap while it was read`);
      }
      chunks.push(Buffer.from(chunk.subarray(0, bytesRead)));
    }
    return { ok: true, text: decodeUtf8Lossy(Buffer.concat(chunks, total)) };
  } catch (error) {
    return refuse('io', `cannot read '${normalized}': ${(error as Error).message}`);
  } finally {
    await handle.close().catch(() => undefined);
  }
}
