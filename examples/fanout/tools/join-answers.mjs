// Command tool `join-answers` (capsule.json `tools`; protocol in the repository README).
// Reads on stdin: {"headline": "<answer of the headline capsule>", "words": "<answer of the wordcount capsule>"}
// Writes build/summary.md joining both answers and prints one ToolResult with its text as data.
import { mkdirSync, writeFileSync } from 'node:fs';

let raw = '';
process.stdin.setEncoding('utf8');
for await (const chunk of process.stdin) raw += chunk;
const input = JSON.parse(raw);
if (typeof input.headline !== 'string' || typeof input.words !== 'string') {
  process.stdout.write(JSON.stringify({ status: 'error', summary: 'join-answers: input.headline and input.words must be strings' }));
  process.exit(0);
}
const summary = `# ${input.headline.trim()}\n\n${input.words.trim()} words\n`;
mkdirSync('build', { recursive: true });
writeFileSync('build/summary.md', summary);
process.stdout.write(JSON.stringify({ status: 'passed', data: summary }));
