// Command tool `release-notes` (capsule.json `tools`; protocol in the repository README).
// Reads on stdin: {"name": "...", "version": "...", "checksums": "<sha256sum output>", "previous": "<sums file>"}
// Writes build/RELEASE-NOTES.md (file sizes, checksums, files changed since the previous release)
// and prints one ToolResult JSON object on stdout, pointing at the notes through data_path.
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const NOTES = join('build', 'RELEASE-NOTES.md');

function reply(result) {
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/** Parses `sha256sum` output: "<hex>  <path>" per line → Map(basename → hex). */
function parseSums(text) {
  const sums = new Map();
  for (const line of text.split('\n')) {
    const match = /^([0-9a-f]{64}) [ *](.+)$/.exec(line.trim());
    if (match) sums.set(match[2].split('/').pop(), match[1]);
  }
  return sums;
}

let raw = '';
process.stdin.setEncoding('utf8');
for await (const chunk of process.stdin) raw += chunk;
const input = JSON.parse(raw);

const current = parseSums(typeof input.checksums === 'string' ? input.checksums : '');
if (current.size === 0) {
  reply({ status: 'failed', summary: 'release-notes: input.checksums holds no sha256sum lines' });
  process.exit(0);
}
const previous = typeof input.previous === 'string' && existsSync(input.previous) ? parseSums(readFileSync(input.previous, 'utf8')) : new Map();

const rows = [...current].map(([file, sha]) => {
  const size = statSync(join('build', 'lib', file)).size;
  const change = !previous.has(file) ? 'new' : previous.get(file) === sha ? 'unchanged' : 'changed';
  return { file, size, sha, change };
});
const changed = rows.filter((row) => row.change !== 'unchanged');
const lines = [
  `# ${input.name ?? 'release'} ${input.version ?? ''}`.trimEnd(),
  '',
  `${changed.length} of ${rows.length} files differ from the previous release${changed.length ? `: ${changed.map((row) => `${row.file} (${row.change})`).join(', ')}` : ''}.`,
  '',
  '| file | bytes | sha256 |',
  '| --- | ---: | --- |',
  ...rows.map((row) => `| ${row.file} | ${row.size} | \`${row.sha}\` |`),
  '',
];
writeFileSync(NOTES, lines.join('\n'));
reply({
  status: 'passed',
  data_path: NOTES,
  summary: `${changed.length} changed file(s)`,
  metadata: [['resource_id', `${input.name ?? 'release'}@${input.version ?? ''}`]],
});
