/**
 * `capsule validate PLAN` (DESIGN §3): reads, parses and validates a plan against a manifest
 * exactly as `capsule run` would before its first step, and runs nothing. Beyond that, it refuses
 * a plan that a run would find blocked (a dependency cycle, `plan.md` §10.3) and warns about
 * references that may not be ready (`src/plan/lint.ts`).
 */
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { loadManifest, type Manifest } from '../manifest.js';
import { lintPlan } from '../plan/lint.js';
import { parsePlanText, readPlanFile, stepKind } from '../plan/schema.js';
import { excerpt } from '../plan/text.js';
import { validatePlan } from '../plan/validate.js';
import { collect, EXIT, usageError, type ExitCode } from './program.js';
import { printable } from './progress.js';
import { WarningSink, type WarningLike } from './warning-sink.js';

/** Options of `capsule validate`, as commander parses them. */
export interface ValidateCommandOptions {
  readonly manifest?: string;
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
   * The warnings printed on stderr (without `warning: `): unknown keys of the manifest and the
   * plan, references that may not be ready; at most `MAX_WARNINGS_PER_KIND` of each kind, then
   * one `<n> more '<kind>' warnings not shown (<total> in all)` line per kind over the cap.
   */
  readonly warnings: readonly string[];
}

/** Registers `capsule validate` on the program. */
export function registerValidate(program: Command): void {
  program
    .command('validate')
    .description('Parse and validate a plan without running it.')
    .argument('<plan>', 'plan file (JSON)')
    .option('--manifest <file>', 'capsule manifest (default: ./capsule.json when present)')
    .option('--allow <bin>', 'also allow this binary in shell steps, as `run --allow` (repeatable)', collect)
    .option('--json', 'print {valid, plan_id, failed_step, error, warnings} on stdout')
    .addHelpText('after', '\nExit codes: 0 valid, 1 refused (or unreadable/unparseable), 2 usage error or bad manifest.')
    .action(async (plan: string, options: ValidateCommandOptions) => {
      process.exitCode = await validateCommand(plan, options);
    });
}

/** Runs `capsule validate` and returns its exit code. */
export async function validateCommand(planPath: string, options: ValidateCommandOptions): Promise<ExitCode> {
  // The terminal gets printable lines (a control character in a plan must not rewrite it); --json the texts as they are.
  const sink = new WarningSink({ write: (line) => process.stderr.write(`${printable(line)}\n`) });
  const warn = (warning: WarningLike): void => sink.warn(warning);

  const manifestPath = options.manifest ?? (existsSync('capsule.json') ? 'capsule.json' : null);
  let manifest: Manifest | null = null;
  if (manifestPath !== null) {
    const loaded = await loadManifest(manifestPath);
    if (!loaded.ok) return usageError(loaded.error);
    manifest = loaded.manifest;
    for (const warning of loaded.warnings) warn(warning);
  }

  const report = await validatePlanFile(planPath, manifest, options.allow ?? [], warn);
  sink.finish();
  const withWarnings: ValidationReport = { ...report, warnings: sink.shown };
  if (options.json === true) {
    process.stdout.write(`${JSON.stringify(withWarnings, null, 2)}\n`);
  } else if (report.valid) {
    process.stdout.write(`valid: plan ${printable(excerpt(report.plan_id))}\n`);
  } else {
    const where = report.failed_step === 'plan' ? 'plan' : `step '${excerpt(report.failed_step ?? '')}'`;
    process.stderr.write(`${printable(`refused: ${where}: ${report.error ?? ''}`)}\n`);
  }
  return report.valid ? EXIT.OK : EXIT.FAILED;
}

async function validatePlanFile(
  planPath: string,
  manifest: Manifest | null,
  allow: readonly string[],
  warn: (warning: WarningLike) => void,
): Promise<Omit<ValidationReport, 'warnings'>> {
  const refused = (planId: string, stepId: string, error: string) =>
    ({ valid: false, plan_id: planId, failed_step: stepId, error }) as const;
  const read = await readPlanFile(planPath);
  if (!read.ok) return refused('', 'plan', read.error);
  const parsed = parsePlanText(read.text);
  if (!parsed.ok) return refused('', 'plan', parsed.error);
  for (const warning of parsed.warnings) warn(warning);
  const failure = validatePlan(parsed.plan, {
    shellAllow: [...(manifest?.capabilities.shell.allow ?? []), ...allow],
    installedTools: new Set(Object.keys(manifest?.tools ?? {})),
  });
  if (failure !== null) return refused(parsed.plan.id, failure.step_id, failure.error);
  const lint = lintPlan(parsed.plan, parsed.plan.steps.map(stepKind));
  for (const warning of lint.warnings) warn({ kind: 'unordered-reference', message: warning });
  if (lint.blocked !== null) return refused(parsed.plan.id, lint.blocked.step_id, lint.blocked.error);
  return { valid: true, plan_id: parsed.plan.id, failed_step: null, error: null };
}
