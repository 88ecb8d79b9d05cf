/**
 * `npm run bench`: runs every registered suite (bench/suites/index.ts) in this one process run,
 * prints one Markdown table per suite, and writes the results to `.bench/` (JSON and Markdown).
 *
 *   npm run bench                         all suites, 7 measured runs each (memory: 3)
 *   npm run bench -- --suite scheduler    some suites (comma-separated names)
 *   npm run bench -- --runs 11            more runs
 *   npm run bench -- --quick              small plans, 2 runs: a smoke test of the bench itself
 *   npm run bench -- --out results.json   also write the JSON there
 *
 * Not part of `npm test`. Linux only (`/proc`).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { computeRows, renderTable, type RowResult, type SuiteContext } from './harness.js';
import { SUITES } from './suites/index.js';

interface Args {
  suites: string[] | null;
  runs: number | null;
  quick: boolean;
  out: string | null;
}

function parseArgs(argv: readonly string[]): Args {
  const args: Args = { suites: null, runs: null, quick: false, out: null };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === '--suite' || arg === '--suites') args.suites = value().split(',').filter(Boolean);
    else if (arg === '--runs') args.runs = Number(value());
    else if (arg === '--quick') args.quick = true;
    else if (arg === '--out') args.out = value();
    else if (arg === '--help' || arg === '-h') {
      process.stdout.write(`usage: npm run bench -- [--suite ${SUITES.map((s) => s.name).join(',')}] [--runs N] [--quick] [--out FILE]\n`);
      process.exit(0);
    } else throw new Error(`unknown argument ${arg}`);
  }
  return args;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const unknown = (args.suites ?? []).filter((name) => !SUITES.some((s) => s.name === name));
  if (unknown.length > 0) throw new Error(`unknown suite ${unknown.join(', ')}; known: ${SUITES.map((s) => s.name).join(', ')}`);
  const selected = args.suites === null ? SUITES : SUITES.filter((s) => args.suites?.includes(s.name));
  const tmpDir = mkdtempSync(join(tmpdir(), 'capsule-bench-'));
  const startedAt = new Date();
  const t0 = performance.now();
  const ctx: SuiteContext = {
    runs: args.runs ?? (args.quick ? 2 : 7),
    warmups: args.quick ? 1 : 2,
    quick: args.quick,
    tmpDir,
    log: (message) => process.stderr.write(`[bench ${((performance.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${message}\n`),
  };
  const machine = `${cpus().length} cores (${cpus()[0]?.model.trim() ?? 'unknown cpu'}), Node ${process.version}, ${process.platform}`;
  const header = `Bench run ${startedAt.toISOString()} — ${machine}; ${ctx.runs} measured runs per row after ${ctx.warmups} warm-up run(s)${ctx.quick ? ' (--quick)' : ''}`;
  process.stdout.write(`${header}\n\n`);
  const results: { suite: string; title: string; seconds: number; rows: RowResult[] }[] = [];
  const tables: string[] = [];
  let failed = false;
  try {
    for (const suite of selected) {
      const s0 = performance.now();
      ctx.log(`suite ${suite.name}`);
      let rows: RowResult[];
      try {
        rows = computeRows(await suite.run(ctx));
      } catch (error) {
        failed = true;
        const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
        process.stderr.write(`suite ${suite.name} failed: ${message}\n`);
        tables.push(`### ${suite.title}\n\nFAILED: ${message.split('\n')[0] ?? ''}`);
        process.stdout.write(`${tables[tables.length - 1] ?? ''}\n\n`);
        continue;
      }
      const seconds = (performance.now() - s0) / 1000;
      results.push({ suite: suite.name, title: suite.title, seconds, rows });
      const table = `${renderTable(suite, rows, ctx.runs)}\nSuite time: ${seconds.toFixed(0)} s.`;
      tables.push(table);
      process.stdout.write(`${table}\n\n`);
    }
  } finally {
    rmSync(tmpDir, { recursive: true, force: true });
  }
  const totalSeconds = (performance.now() - t0) / 1000;
  const targets = results.flatMap((r) => r.rows.filter((row) => row.met !== null).map((row) => ({ suite: r.suite, case: row.case, subject: row.subject, target: row.target?.text, met: row.met })));
  const summary = `Targets met: ${targets.filter((t) => t.met).length} of ${targets.length}. Total bench time ${totalSeconds.toFixed(0)} s.`;
  process.stdout.write(`${summary}\n`);
  for (const t of targets.filter((t) => !t.met)) process.stdout.write(`  not met: ${t.suite} / ${t.case} / ${t.subject}: ${t.target ?? ''}\n`);

  const outDir = resolve('.bench');
  mkdirSync(outDir, { recursive: true });
  const json = JSON.stringify({ startedAt: startedAt.toISOString(), machine, runs: ctx.runs, warmups: ctx.warmups, quick: ctx.quick, totalSeconds, results, targets }, null, 2);
  const stamp = startedAt.toISOString().replace(/[:.]/g, '-');
  writeFileSync(join(outDir, `results-${stamp}.json`), json);
  writeFileSync(join(outDir, 'latest.json'), json);
  writeFileSync(join(outDir, 'latest.md'), `${header}\n\n${tables.join('\n\n')}\n\n${summary}\n`);
  if (args.out !== null) writeFileSync(resolve(args.out), json);
  process.stderr.write(`results written to ${join(outDir, 'latest.json')} and latest.md\n`);
  if (failed) process.exitCode = 1;
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
