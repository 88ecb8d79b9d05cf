/**
 * Where this package is installed: found from the running module upwards, so that it holds for
 * tsc's output (`dist/src/…`), the bundle (`dist/bundle/…`, `dist/bundle/chunks/…`) and the
 * sources under a test runner alike. Imports only Node.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package root: the nearest directory above this module holding capsule-runtime's package.json (this module's directory when there is none). */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === 'capsule-runtime') return dir;
      } catch {
        // not ours; keep climbing
      }
    }
    const parent = dirname(dir);
    if (parent === dir) return dirname(fileURLToPath(import.meta.url));
    dir = parent;
  }
}
