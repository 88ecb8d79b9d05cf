import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/** Every .ts file under `dir`, recursively. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

const root = process.cwd();
const files = [...sources(join(root, 'src')), ...sources(join(root, 'machines'))].map((file) => relative(root, file));

describe('one module sends signals (blueprint: only the containment layer signals processes)', () => {
  it('finds the source files to check', () => {
    expect(files).toEqual(expect.arrayContaining(['src/process/signals.ts', 'src/runtime/attempt.ts']));
  });

  it('has process.kill only in src/process/signals.ts', () => {
    const callers = files.filter((file) => /\bprocess\s*\.\s*kill\s*\(/.test(readFileSync(join(root, file), 'utf8')));
    expect(callers).toEqual(['src/process/signals.ts']);
  });

  it('has no child-process .kill( call and no other signalling API anywhere in src/ or machines/', () => {
    const offending = files.filter((file) => {
      const text = readFileSync(join(root, file), 'utf8');
      return /\.\s*kill\s*\(/.test(text.replace(/\bprocess\s*\.\s*kill\s*\(/g, '')) || /\b(killall|pkill)\b['"`]/.test(text);
    });
    expect(offending).toEqual([]);
  });
});
