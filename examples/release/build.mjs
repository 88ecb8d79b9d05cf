// Compiles the library: strips comments from src/*.mjs into build/lib/, writes build/lib/package.json,
// then imports the result to prove it loads. Everything it writes is under build/ (gitignored).
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const NAME = 'units';
const VERSION = '1.2.0';
const SRC = 'src';
const OUT = join('build', 'lib');

/** Drops JSDoc/block comments and whole-line `//` comments; keeps everything else byte for byte. */
function stripComments(source) {
  return source
    .replace(/\/\*[\s\S]*?\*\/\n?/g, '')
    .split('\n')
    .filter((line) => !/^\s*\/\//.test(line))
    .join('\n');
}

rmSync('build', { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
let before = 0;
let after = 0;
const modules = readdirSync(SRC).filter((file) => file.endsWith('.mjs')).sort();
for (const file of modules) {
  const source = readFileSync(join(SRC, file), 'utf8');
  const compiled = stripComments(source);
  writeFileSync(join(OUT, file), compiled);
  before += Buffer.byteLength(source);
  after += Buffer.byteLength(compiled);
}
writeFileSync(
  join(OUT, 'package.json'),
  `${JSON.stringify({ name: NAME, version: VERSION, type: 'module', exports: './index.mjs' }, null, 2)}\n`,
);

const lib = await import(pathToFileURL(join(OUT, 'index.mjs')).href);
const exported = Object.keys(lib).sort();
if (exported.length === 0) throw new Error('build/lib/index.mjs exports nothing');
console.log(`compiled ${modules.length} modules (${before} B -> ${after} B) into ${OUT}; exports: ${exported.join(', ')}`);
