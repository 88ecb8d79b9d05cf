import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const machinesDir = join(process.cwd(), 'machines');
const importPattern = /^\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm;

function importsOf(file: string): string[] {
  const text = readFileSync(join(machinesDir, file), 'utf8');
  const found: string[] = [];
  for (const match of text.matchAll(importPattern)) found.push(match[1] ?? match[2] ?? match[3] ?? '');
  return found;
}

describe('machines/ purity (docs/architecture.md)', () => {
  const files = readdirSync(machinesDir).filter((name) => name.endsWith('.ts'));

  it('holds machine files to check', () => {
    expect(files).toEqual(expect.arrayContaining(['plan.machine.ts', 'step.machine.ts']));
  });

  it.each(files)('%s imports nothing but xstate and other files in machines/', (file) => {
    const offending = importsOf(file).filter((spec) => spec !== 'xstate' && !/^\.\/[^/]+\.js$/.test(spec));
    expect(offending).toEqual([]);
  });

  it.each(files)('%s uses no clock, process or file API directly', (file) => {
    const text = readFileSync(join(machinesDir, file), 'utf8');
    expect(text).not.toMatch(/\b(Date\.now|performance\.now|setTimeout|setInterval|process\.|require\()/);
  });
});
