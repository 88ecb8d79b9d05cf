// Command tool `log-stats` (capsule.json `tools`; protocol in the repository README).
// Reads on stdin: {"errors": "<ERROR lines, as grep printed them>", "warnings": "<grep -c output>", "budget": N}
// Groups the errors by message, writes build/error-report.json, and prints one ToolResult JSON
// object on stdout whose data is a short human summary.
import { mkdirSync, writeFileSync } from 'node:fs';

const REPORT = 'build/error-report.json';
/** "<timestamp> <LEVEL> <service> <message…>" */
const LINE = /^(\S+) (ERROR) (\S+) (.+)$/;

let raw = '';
process.stdin.setEncoding('utf8');
for await (const chunk of process.stdin) raw += chunk;
const input = JSON.parse(raw);
if (typeof input.errors !== 'string') {
  process.stdout.write(JSON.stringify({ status: 'error', summary: 'log-stats: input.errors must be the text of the ERROR lines' }));
  process.exit(0);
}

const byMessage = new Map();
let unparsed = 0;
for (const line of input.errors.split('\n').filter((l) => l.trim() !== '')) {
  const match = LINE.exec(line);
  if (!match) {
    unparsed++;
    continue;
  }
  const [, timestamp, , service, message] = match;
  const entry = byMessage.get(message) ?? { message, count: 0, services: new Set(), last_seen: timestamp };
  entry.count++;
  entry.services.add(service);
  if (timestamp > entry.last_seen) entry.last_seen = timestamp;
  byMessage.set(message, entry);
}
const groups = [...byMessage.values()]
  .sort((a, b) => b.count - a.count || a.message.localeCompare(b.message))
  .map((g) => ({ ...g, services: [...g.services].sort() }));
const warningsByFile = Object.fromEntries(
  String(input.warnings ?? '')
    .split('\n')
    .map((line) => /^(.+):(\d+)$/.exec(line.trim()))
    .filter(Boolean)
    .map((m) => [m[1], Number(m[2])]),
);
const errorsTotal = groups.reduce((sum, g) => sum + g.count, 0);
const warningsTotal = Object.values(warningsByFile).reduce((sum, n) => sum + n, 0);
const report = { errors_total: errorsTotal, budget: input.budget ?? null, warnings_total: warningsTotal, warnings_by_file: warningsByFile, unparsed_lines: unparsed, errors_by_message: groups };
mkdirSync('build', { recursive: true });
writeFileSync(REPORT, `${JSON.stringify(report, null, 2)}\n`);

const summary = [
  `${errorsTotal} errors, ${warningsTotal} warnings (report: ${REPORT})`,
  ...groups.map((g) => `${String(g.count).padStart(4)}x ${g.message} [${g.services.join(', ')}]`),
].join('\n');
process.stdout.write(JSON.stringify({ status: 'passed', data: `${summary}\n`, metadata: [['state_effect', 'wrote build/error-report.json']] }));
