/**
 * Whether a program would be found when a step starts it (`docs/plan-format.md#shell-dispatch`: the binary is
 * looked up on `PATH`), so that validation can warn before a run fails to start it.
 */
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';

/**
 * True when `program` can be executed: a name with a slash is a path (relative to `cwd`) to an
 * executable file; a bare name is looked for in the absolute directories of `pathVar`, as
 * `execvp` does (relative entries are skipped: a step's working directory is not a lookup place).
 * Never throws.
 */
export function canExecute(program: string, pathVar: string | undefined, cwd: string): boolean {
  if (program.includes('/')) return isExecutableFile(resolve(cwd, program));
  return (pathVar ?? '').split(':').some((dir) => isAbsolute(dir) && isExecutableFile(join(dir, program)));
}

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
