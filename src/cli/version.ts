/** The version of `capsule`, for `--version` and internal-error reports. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../package-root.js';

let cached: string | null = null;

/** The package version, read from the package root's package.json (found from this module up: the bundle and tsc's output sit at different depths); `0.0.0` when unreadable. */
export function packageVersion(): string {
  if (cached !== null) return cached;
  try {
    const text = readFileSync(join(packageRoot(), 'package.json'), 'utf8');
    const version: unknown = (JSON.parse(text) as { version?: unknown }).version;
    cached = typeof version === 'string' ? version : '0.0.0';
  } catch {
    cached = '0.0.0';
  }
  return cached;
}
