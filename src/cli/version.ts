/** The version of `capsule`, for `--version` and internal-error reports. */
import { readFileSync } from 'node:fs';

let cached: string | null = null;

/** The package version, read from package.json (three levels above `dist/src/cli/`); `0.0.0` when unreadable. */
export function packageVersion(): string {
  if (cached !== null) return cached;
  try {
    const text = readFileSync(new URL('../../../package.json', import.meta.url), 'utf8');
    const version: unknown = (JSON.parse(text) as { version?: unknown }).version;
    cached = typeof version === 'string' ? version : '0.0.0';
  } catch {
    cached = '0.0.0';
  }
  return cached;
}
