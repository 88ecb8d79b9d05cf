/** Where a path lies relative to another, as text: no file is looked at, no link followed. */

/**
 * Whether `path` is `dir` or lies below it. Both absolute, or both relative to one directory,
 * `/`-separated and normalized (no `.` or `..` part, no trailing `/` but the root's). Compared by
 * whole names: `<dir>/..name` and `<dir>/...` are below `dir`, `<dir>x` is not.
 */
export function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}
