/**
 * `capsule validate PLAN` (docs/cli.md): reads, parses and checks a plan against a manifest, with
 * the same `--workdir`/`--manifest` resolution as `capsule run`, and runs nothing. It refuses
 * everything a run would refuse (`docs/plan-format.md#validation`), and beyond that what a run would fail on later
 * (`src/plan/check.ts`: a condition that does not parse, a reference without a dot, a dependency
 * cycle); it prints the same warnings a run prints before its first step. Every refusal is
 * explained: where (file, line, column, JSON path), the rule, the accepted values and the fix.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { Command } from 'commander';
import type { PlanFile } from '../../machines/contracts.js';
import { describeManifestSource, findManifest, loadManifest, manifestBesidePlan, type Manifest, type ManifestSource } from '../manifest.js';
import { canExecute } from '../executors/on-path.js';
import { checkPlan } from '../plan/check.js';
import { explainParseFailure, explainReadFailure, furtherRefusalsNotShown, groupRefusals, refusalGroupLines, type Refusal } from '../plan/refusal.js';
import { parsePlanText, readPlanFile } from '../plan/schema.js';
import type { PlanWarning } from '../plan/warnings.js';
import { directoryProblem, isDirectory } from '../records/directories.js';
import { recordedSessionIn, RecordsDirInUseError, recordsDirUnusable } from '../records/records-dir.js';
import { excerpt } from '../excerpt.js';
import { collect, EXIT, usageError, type ExitCode } from './program.js';
import { printable } from './progress.js';
import { MAX_WARNINGS_PER_KIND, WarningSink } from './warning-sink.js';

/** The closing line after the further refusals shown. */
const moreRefusals = (count: number): string => `refused: ${count} more step${count === 1 ? '' : 's'} a run would fail on later, not shown`;

/** Options of `capsule validate`, as commander parses them. */
export interface ValidateCommandOptions {
  readonly manifest?: string;
  /** As `capsule run --workdir`: where `capsule.json` is looked for when `--manifest` is not given. */
  readonly workdir?: string;
  /** As `capsule run --records`: refused (exit 2) when it already holds a session, or could not be created or written. */
  readonly records?: string;
  readonly json?: boolean;
  /** Binaries allowed in shell steps on top of the manifest's, as `capsule run --allow`. */
  readonly allow?: readonly string[];
}

/** What `capsule validate --json` prints. */
export interface ValidationReport {
  readonly valid: boolean;
  /** The plan's id; `""` when the file could not be read or parsed. */
  readonly plan_id: string;
  /** `null` when valid; `"plan"` for an unreadable or unparseable file; else the refused step. */
  readonly failed_step: string | null;
  readonly error: string | null;
  /**
   * Warnings of the manifest and the plan, as printed on stderr (without `warning: `): at most
   * `MAX_WARNINGS_PER_KIND` of each kind, then one `<n> more '<kind>' warnings not shown (<total>
   * in all)` line per kind over the cap.
   */
  readonly warnings: readonly string[];
  /** Ours: the refusal explained; absent when valid and when the plan file could not be read. */
  readonly refusal?: Refusal;
  /**
   * Ours: the further refusals after `refusal`, explained, at most `MAX_WARNINGS_PER_KIND`: every
   * other step a run refuses (when `refusal` is one a run makes), else every other step a run
   * would fail on later. Present only when there are any.
   */
  readonly further_refusals?: readonly Refusal[];
  /** Ours: how many further refusals there are beyond `further_refusals`; present only when some are not shown. */
  readonly further_refusals_not_shown?: number;
}

/** Registers `capsule validate` on the program. */
export function registerValidate(program: Command): void {
  program
    .command('validate')
    .description('Check a plan without running it: everything `run` would refuse, and what a run would fail on later.')
    .argument('<plan>', 'plan file (JSON), relative to the current directory')
    .option('--manifest <file>', 'capsule manifest (default: <workdir>/capsule.json when present)')
    .option('--workdir <dir>', 'the workdir `run` would use: where capsule.json is looked for (default: the current directory)')
    .option('--records <dir>', 'the records directory `run` would use: refused when it already holds a session or cannot be written')
    .option('--allow <bin>', 'also allow this binary in shell steps, as `run --allow` (repeatable)', collect)
    .option('--json', 'print {valid, plan_id, failed_step, error, warnings, refusal?, further_refusals?} on stdout')
    .addHelpText(
      'after',
      '\nExit codes: 0 valid, 1 refused (or unreadable/unparseable), 2 usage error, bad manifest, or a --records directory that holds a session or cannot be written.',
    )
    .action(async (plan: string, options: ValidateCommandOptions) => {
      process.exitCode = await validateCommand(plan, options);
    });
}

/** Runs `capsule validate` and returns its exit code. */
export async function validateCommand(planPath: string, options: ValidateCommandOptions): Promise<ExitCode> {
  return (await validatePlan(planPath, options, { sayValid: true })).code;
}

/**
 * `capsule validate`'s checks and output (`capsule run --dry-run` makes them first): the exit
 * code, and the plan and manifest when the plan is valid. `sayValid` false leaves out the
 * `valid: plan <id>` line (the caller says more).
 */
export async function validatePlan(
  planPath: string,
  options: ValidateCommandOptions,
  { sayValid }: { readonly sayValid: boolean },
): Promise<{ readonly code: ExitCode; readonly plan: PlanFile | null; readonly manifest: Manifest | null }> {
  const code = (exit: ExitCode, plan: PlanFile | null = null, manifest: Manifest | null = null) => ({ code: exit, plan, manifest });
  // The one path every warning takes, capped per kind (src/cli/warning-sink.ts). The terminal gets
  // printable lines (a control character in a plan must not rewrite it); --json the texts as they are.
  const sink = new WarningSink({ write: (line) => process.stderr.write(`${printable(line)}\n`) });
  const warn = (warning: PlanWarning): void => sink.warn(warning);

  const workdir = resolve(options.workdir ?? process.cwd());
  if (!isDirectory(workdir)) return code(usageError(`--workdir ${workdir} is not a directory`));
  if (options.records !== undefined) {
    const recordsDir = resolve(options.records);
    const existing = recordedSessionIn(recordsDir);
    // The refusal `capsule run --records` would make, word for word.
    if (existing !== null) return code(usageError(new RecordsDirInUseError(recordsDir, existing).message));
    // One `capsule run --records` could not create or write (e.g. under /proc): the same refusal's words.
    const problem = directoryProblem(recordsDir);
    if (problem !== null) return code(usageError(recordsDirUnusable(recordsDir, problem).message));
  }
  const source = findManifest(options.manifest, options.workdir);
  let manifest: Manifest | null = null;
  if (source.kind === 'file') {
    const loaded = await loadManifest(source.label);
    if (!loaded.ok) return code(usageError(loaded.error));
    manifest = loaded.manifest;
    for (const warning of loaded.warnings) warn(warning);
  }

  const report = await validatePlanFile(planPath, workdir, manifest, source, options.allow ?? [], warn);
  sink.finish();
  const warnings = sink.shown;
  // Further refusals come capped from checkPlan; the later failures are capped like warnings: a
  // plan with a million bad conditions prints a few.
  const laterShown = report.later.slice(0, MAX_WARNINGS_PER_KIND);
  const laterNotShown = report.later.length - laterShown.length;
  const further = [...report.more, ...laterShown];
  const notShown = report.moreNotShown + laterNotShown;
  if (options.json === true) {
    const json: ValidationReport = {
      valid: report.valid,
      plan_id: report.plan_id,
      failed_step: report.failed_step,
      error: report.error,
      warnings,
      ...(report.refusal !== undefined ? { refusal: report.refusal } : {}),
      ...(further.length > 0 ? { further_refusals: further } : {}),
      ...(notShown > 0 ? { further_refusals_not_shown: notShown } : {}),
    };
    process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  } else if (report.valid) {
    // A warning (an ignored key) can mean the plan does not do what its author meant: said here too, not on stderr alone.
    const warned = sink.count === 0 ? '' : ` (${sink.count} warning${sink.count === 1 ? '' : 's'} on stderr: read ${sink.count === 1 ? 'it' : 'them'} before running)`;
    if (sayValid) process.stdout.write(`valid: plan ${printable(excerpt(report.plan_id))}${warned}\n`);
  } else {
    const where = report.failed_step === 'plan' ? 'plan' : `step '${excerpt(report.failed_step ?? '')}'`;
    const first = `refused: ${where}: ${report.error ?? ''}`;
    const explained = report.refusal ?? (report.failed_step === 'plan' ? explainUnreadPlan(planPath, report.error ?? '', options.workdir) : undefined);
    // Refusals of one cause (binaries not allowed, tools not installed) as one block, the fix once.
    const lines = explained === undefined ? [first] : [];
    const all = explained === undefined ? further : [explained, ...further];
    for (const group of groupRefusals(all)) {
      lines.push(...refusalGroupLines(group, (refusal) => (refusal === explained ? first : `refused: step '${excerpt(refusal.step_id)}': ${refusal.error}`), (refusal) => `step '${excerpt(refusal.step_id)}': ${refusal.error}`));
    }
    if (report.moreNotShown > 0) lines.push(report.moreFailLater ? moreRefusals(report.moreNotShown) : furtherRefusalsNotShown(report.moreNotShown));
    if (laterNotShown > 0) lines.push(moreRefusals(laterNotShown));
    process.stderr.write(`${lines.map(printable).join('\n')}\n`);
  }
  return report.valid ? code(EXIT.OK, report.plan ?? null, manifest) : code(EXIT.FAILED);
}

/**
 * The refusal of a plan file that could not be read, explained: the path; for a directory, what it
 * holds; for a missing file that exists under the workdir, that path.
 */
export function explainUnreadPlan(planPath: string, error: string, workdir: string | undefined): Refusal {
  let entries: string[] | null = null;
  try {
    if (statSync(planPath).isDirectory()) entries = readdirSync(planPath);
  } catch {
    entries = null;
  }
  const underWorkdir = workdir === undefined || isAbsolute(planPath) ? null : join(workdir, planPath);
  const inWorkdir = underWorkdir !== null && !existsSync(planPath) && existsSync(underWorkdir) ? underWorkdir : null;
  return explainReadFailure(error, planPath, process.cwd(), entries, inWorkdir);
}

type FileReport = Omit<ValidationReport, 'warnings'> & {
  /** The plan, when valid. */
  readonly plan?: PlanFile;
  /** Further problems, beyond the first: the other refusals a run makes too, or (none of those) those a run would fail on later. */
  readonly more: readonly Refusal[];
  /** How many further problems there are beyond `more` (counted, not explained). */
  readonly moreNotShown: number;
  /** Whether `more` are problems a run would fail on later (the closing line says so). */
  readonly moreFailLater: boolean;
  /** Beside refusals: the problems a run would fail on later, found in the same pass (not capped yet). */
  readonly later: readonly Refusal[];
};

async function validatePlanFile(
  planPath: string,
  workdir: string,
  manifest: Manifest | null,
  source: ManifestSource,
  allow: readonly string[],
  warn: (warning: PlanWarning) => void,
): Promise<FileReport> {
  const refused = (planId: string, refusal: Refusal | null, stepId: string, error: string, more: readonly Refusal[] = [], moreNotShown = 0, moreFailLater = false, later: readonly Refusal[] = []): FileReport => ({
    valid: false,
    plan_id: planId,
    failed_step: stepId,
    error,
    ...(refusal !== null ? { refusal } : {}),
    more,
    moreNotShown,
    moreFailLater,
    later,
  });
  const read = await readPlanFile(planPath);
  if (!read.ok) return refused('', null, 'plan', read.error);
  const located = { file: planPath, text: read.text };
  const parsed = parsePlanText(read.text);
  if (!parsed.ok) return refused('', explainParseFailure(parsed.error, parsed.at, located), 'plan', parsed.error);
  for (const warning of parsed.warnings) warn(warning);
  const check = checkPlan(parsed.plan, {
    shellAllow: [...(manifest?.capabilities.shell.allow ?? []), ...allow],
    installedTools: new Set(Object.keys(manifest?.tools ?? {})),
    ...located,
    manifest: describeManifestSource(source),
    manifestPath: source.kind === 'file' ? source.path : null,
    manifestBesidePlan: manifestBesidePlan(planPath, source),
    canExecute: (program) => canExecute(program, process.env['PATH'], workdir),
    toolProgram: (tool) => manifest?.tools[tool]?.command[0] ?? null,
    unknownKeys: parsed.warnings,
  }, { laterWithRefusals: true });
  if (check.refusal !== null) {
    // What a run would meet later is listed after the refusals, in the same pass.
    const later = check.failsLater.map((failure) => failure.refusal);
    return refused(parsed.plan.id, check.refusal, check.refusal.step_id, check.refusal.error, check.furtherRefusals, check.furtherNotShown, false, later);
  }
  // The same warnings a run prints before its first step, but what a run fails on later is refused here.
  for (const warning of check.warnings) warn(warning);
  const [first, ...more] = check.failsLater.map((later) => later.refusal);
  if (first !== undefined) return refused(parsed.plan.id, first, first.step_id, first.error, [], 0, true, more);
  return { valid: true, plan_id: parsed.plan.id, failed_step: null, error: null, more: [], moreNotShown: 0, moreFailLater: false, later: [], plan: parsed.plan };
}
