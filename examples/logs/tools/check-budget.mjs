// Fails (exit 1, reason on stderr) when build/error-report.json counts more errors than its budget.
// Usage: node tools/check-budget.mjs <report.json>
import { readFileSync } from 'node:fs';

const path = process.argv[2] ?? 'build/error-report.json';
const report = JSON.parse(readFileSync(path, 'utf8'));
if (typeof report.budget !== 'number') {
  console.error(`${path}: no numeric budget`);
  process.exit(2);
}
if (report.errors_total > report.budget) {
  const top = report.errors_by_message[0];
  console.error(`error budget exceeded: ${report.errors_total} errors > ${report.budget} allowed (top: ${top.count}x ${top.message})`);
  process.exit(1);
}
console.log(`error budget met: ${report.errors_total} of ${report.budget} errors`);
