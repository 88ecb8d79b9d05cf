/**
 * `capsule run PLAN` (docs/cli.md, docs/report.md): runs one plan file as a session, shows progress on stderr,
 * prints the JSON report on stdout with `--json`, and maps the report to the exit code.
 */
import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { SCHEDULE_MODES, type StepKind } from '../../machines/contracts.js';
import { replaceFile } from '../records/append-file.js';
import { describeFsError, isDirectory } from '../records/directories.js';
import type { Command } from 'commander';
import { DEFAULT_CANCEL_GRACE_SECS, findManifest, loadManifest, MANIFEST_FILE } from '../manifest.js';
import { ERROR_CODES, isRuntimeError, messageOf, RunInternalError } from '../errors.js';
import { newSessionId } from '../ids.js';
import { startPlan, type PlanReport } from '../runtime/run-plan.js';
import { explainUnreadPlan, validatePlan } from './validate.js';
import { releaseEarlySignals } from './early-signals.js';
import { onUncaughtError } from './internal-error.js';
import { cancelOnSignals, DEFAULT_ON_SIGTERM, signalsFor, type OnSigterm } from './cancel-on-signals.js';
import { createLogger } from '../session/logger.js';
import { recordsIncomplete } from '../records/records-dir.js';
import { expandLatest } from '../records/latest.js';
import { collect, EXIT, exitCodeAfterLog, logFileRefusal, parseNonNegativeNumber, parsePositiveInteger, usageError, type ExitCode, type GlobalOptions } from './program.js';
import { loadLiveView, printable, Progress, progressModeFor, useColor } from './progress.js';
import { WarningSink } from './warning-sink.js';
import { hiddenKeyFile, openScaleOut, scaleOutWithoutRedis, withScaleOutOptions, type ScaleOutOptions } from './scale-out-options.js';
import { parseNetworkOption } from './network-option.js';
import type { ContainmentInfo } from '../process/containment.js';
import { describeConfinement } from '../process/spawn/confinement.js';
import { describeResourceBounds, hasBounds } from '../process/resources.js';
import type { Session } from '../session/session.js';
import { cliProgram } from '../process/programs.js';
import type { ResumeOutcome } from '../reconcile/resume.js';

/** Options of `capsule run`, as commander parses them (the global `--log-level` and `--log-file` included). */
export interface RunCommandOptions extends GlobalOptions, ScaleOutOptions {
  readonly manifest?: string;
  readonly workdir?: string;
  readonly records?: string;
  readonly capsules?: string;
  readonly allow?: readonly string[];
  readonly maxParallel?: number;
  /** `waves` or `eager` (docs/plan-format.md#schedule); overrides the plan's `schedule`. */
  readonly schedule?: string;
  readonly json?: boolean;
  readonly quiet?: boolean;
  /** Seconds a graceful cancel may take before it is forced. */
  readonly cancelGrace?: number;
  /** What SIGTERM does: `force` (default; for supervisors) or `graceful` (like Ctrl-C). */
  readonly onSigterm?: string;
  /** Also print how the run's processes are contained and isolated (and why). */
  readonly verbose?: boolean;
  /** Run every step's processes as this unprivileged user (the runtime must be root). */
  readonly runAs?: string;
  /** Steps keep every capability of the runtime's user (the opt-out from confinement). */
  readonly privilegedSteps?: boolean;
  /** `host` or `session` (docs/containment.md#network). */
  readonly network?: string;
  /** A prior session's records directory to account for first (docs/resume.md). */
  readonly resume?: string;
  /** With `resume`: stop the live processes it left (SIGTERM, SIGKILL after 2 s, proven gone). */
  readonly reap?: boolean;
  /** An earlier session's records directory (or `latest`) to continue: its unchanged successful steps are restored, not run (docs/continue.md). */
  readonly continue?: string;
  /** Run this step and everything downstream of it (docs/continue.md#from-and-only). */
  readonly from?: string;
  /** Run only these steps (comma-separated, repeatable). */
  readonly only?: readonly string[];
  /** The step cache's store (docs/cache.md#the-store). */
  readonly cacheDir?: string;
  /** False with `--no-cache`: every step runs, nothing is stored (docs/cache.md). */
  readonly cache?: boolean;
  /** Keep the steps' scratch directory (HOME, TMPDIR) when the run ends. */
  readonly keepScratch?: boolean;
  /** Validate, print what would run (waves, steps, commands), run nothing (docs/cli.md#dry-run). */
  readonly dryRun?: boolean;
  /** Write the run as JUnit XML to this file (docs/cli.md#ci-summaries). */
  readonly junit?: string;
  /** Write the run as Markdown to this file, and append it to `$GITHUB_STEP_SUMMARY` when set. */
  readonly summary?: string;
  /** Write the run's page (one HTML file, docs/run-page.md) to this file at the end of the run. */
  readonly report?: string;
}

/** The words of `--schedule`, in the order its usage error lists them. */

/** Registers `capsule run` on the program. */
export function registerRun(program: Command): void {
  const run = program
    .command('run')
    .description('Run a plan file; progress on stderr, the JSON report with --json on stdout.')
    .argument('<plan>', 'plan file (JSON), relative to the current directory')
    .option('--manifest <file>', 'capsule manifest (default: <workdir>/capsule.json when present)')
    .option('--workdir <dir>', 'directory shell steps and command tools run in (default: the current directory)')
    .option('--records <dir>', 'records directory (default: <workdir>/.capsule/records/<session_id>/)')
    .option('--capsules <dir>', 'capsule registry for capsule steps (default: <workdir>/capsules/)')
    .option('--allow <bin>', 'also allow this binary in shell steps (repeatable)', collect);
  withScaleOutOptions(run, 'run shell steps and command tools on capsule workers through this Redis (redis://[user:password@]host:port or rediss:// for TLS): docs/scale-out.md')
    .option('--max-parallel <n>', 'run at most N steps of a wave at once', parsePositiveInteger)
    .option('--schedule <mode>', "how steps start: waves (a wave of ready steps settles together, then the next; the default) or eager (each step as soon as its own dependencies settled); overrides the plan's schedule")
    .option('--json', 'print exactly the JSON report on stdout')
    .option('--quiet', 'no progress on stderr (warnings and errors still go there)')
    .option('--cancel-grace <secs>', 'seconds a graceful cancel may take before it is forced (default 10)', parseNonNegativeNumber)
    .option('--on-sigterm <mode>', `what SIGTERM does: force (end every running step's tree now) or graceful (like Ctrl-C) (default ${DEFAULT_ON_SIGTERM})`)
    .option('--run-as <user>', 'run every step as this unprivileged user (the runtime must be root; see capsule doctor)')
    .option('--privileged-steps', "steps keep every capability of the runtime's user, no cgroup namespace, writable /sys: a root step can then undo its isolation (docs/security.md)")
    .option('--network <mode>', "the network of the session's commands and steps: host (the host's, the default) or session (a namespace of the session's own, loopback only; root): docs/containment.md#network")
    .option('--verbose', 'also print how steps are contained and isolated, and why (as capsule doctor does)')
    .option('--resume <dir>', "first account for what the session recorded in DIR left behind (lost background commands, live processes); this run's records go to a directory of its own")
    .option('--reap', 'with --resume: stop the live processes the resumed session left (SIGTERM, SIGKILL after 2 s, proven gone)')
    .option('--continue <dir>', "continue the session recorded in DIR (or latest): each step that succeeded there, unchanged, is restored instead of run (docs/continue.md)")
    .option('--from <step>', 'run STEP and every step downstream of it; the steps they depend on are restored from --continue')
    .option('--only <steps>', 'run only these steps (comma-separated, repeatable); the steps they depend on are restored from --continue', collect)
    .option('--cache-dir <dir>', "the step cache's store (default: the manifest's cache.dir, else $XDG_CACHE_HOME/capsule-runtime/steps): docs/cache.md")
    .option('--no-cache', 'bypass the step cache: every step with "cache" runs, nothing is restored or stored')
    .option('--keep-scratch', "keep the steps' scratch directory (their HOME and TMPDIR) when the run ends (default: removed)")
    .option('--dry-run', 'validate, then print what would run (waves, each step and its command) and run nothing')
    .option('--junit <file>', 'also write the run as JUnit XML (a testcase per step) to FILE')
    .option('--summary <file>', 'also write the run as Markdown to FILE (and append it to $GITHUB_STEP_SUMMARY when set)')
    .option('--report <file>', "also write the run's page to FILE at its end: one self-contained HTML file, the plan's graph by outcome, a timeline of every attempt, each step's details (as capsule report)")
    .addHelpText(
      'after',
      '\nExit codes: 0 completed; 1 failed (plan refused or unreadable, a step stopped it, the records directory unusable, a forced containment, isolation or --run-as unavailable); 2 usage error, bad manifest, unwritable --log-file, or --records DIR already holding a session; 130 canceled. All: docs/exit-codes.md.' +
        '\nCtrl-C cancels gracefully; a second Ctrl-C forces. A graceful cancel is forced after --cancel-grace seconds (default 10).' +
        '\nSIGTERM forces at once (--on-sigterm force, the default, for systemd, Kubernetes and timeout), or cancels like Ctrl-C (--on-sigterm graceful).' +
        '\n--resume DIR (with --reap) accounts for a session that was killed outright before this run starts its plan: docs/resume.md.' +
        '\n--continue DIR runs only what failed, did not run or changed in that session; --from/--only run part of the plan: docs/continue.md.' +
        '\nA step with "cache" whose inputs did not change is not run, its outputs restored (--no-cache, --cache-dir, capsule cache prune): docs/cache.md.',
    )
    .action(async (plan: string, options: RunCommandOptions, command: Command) => {
      process.exitCode = await runCommand(plan, { ...command.optsWithGlobals<GlobalOptions>(), ...options });
    });
}

/** The exit code a report stands for (docs/cli.md). */
export function exitCodeOf(report: PlanReport): ExitCode {
  if (report.canceled) return EXIT.CANCELED;
  return report.completed ? EXIT.OK : EXIT.FAILED;
}

/** Runs `capsule run` and returns its exit code. */
export async function runCommand(planPath: string, given: RunCommandOptions): Promise<ExitCode> {
  const workdir = resolve(given.workdir ?? process.cwd());
  // `--resume latest`: the newest session of the workdir's records root (docs/records.md#latest), read before this run's session replaces it.
  const options: RunCommandOptions = {
    ...given,
    ...(given.resume !== undefined ? { resume: expandLatest(given.resume, workdir) } : {}),
    ...(given.continue !== undefined ? { continue: expandLatest(given.continue, workdir) } : {}),
  };
  const only = options.only?.flatMap((list) => list.split(',')).map((id) => id.trim()).filter((id) => id !== '');
  if (options.from !== undefined && only !== undefined) return usageError('--from and --only select the steps to run in two ways: give one of them');
  if (only !== undefined && only.length === 0) return usageError('--only needs at least one step id (--only build,test)');
  if (options.continue !== undefined && options.resume !== undefined) return usageError('--continue reconciles the session it continues as --resume does: leave out --resume');
  if (options.continue !== undefined && options.records !== undefined && resolve(options.records) === resolve(options.continue)) {
    return usageError(`--records and --continue both name ${resolve(options.continue)}: a continued session is a new session and writes its records in a directory of its own; leave --records out, or name a fresh directory`);
  }
  if (!isDirectory(workdir)) return usageError(`--workdir ${workdir} is not a directory`);
  if (options.cache === false && options.cacheDir !== undefined) return usageError('--no-cache bypasses the step cache and --cache-dir names its store: give one of them');
  if (options.reap === true && options.resume === undefined) return usageError('--reap stops what a resumed session left: it needs --resume DIR');
  const network = parseNetworkOption(options.network);
  if (network instanceof Error) return usageError(network.message);
  if (options.dryRun === true) return dryRun(planPath, options);
  if (options.resume !== undefined && options.records !== undefined && resolve(options.records) === resolve(options.resume)) {
    return usageError(
      `--records and --resume both name ${resolve(options.resume)}: a resumed session is a new session and writes its records in a directory of its own; leave --records out, or name a fresh directory`,
    );
  }

  // The manifest is read here first so that a bad one is a usage error before anything starts;
  // startPlan finds and reads the same file again (and warns once).
  const manifestSource = findManifest(options.manifest, options.workdir);
  const graceSecs = options.cancelGrace ?? DEFAULT_CANCEL_GRACE_SECS;
  const schedule = SCHEDULE_MODES.find((mode) => mode === options.schedule);
  if (options.schedule !== undefined && schedule === undefined) return usageError(`--schedule ${options.schedule} is not one of ${SCHEDULE_MODES.join(', ')}`);
  const onSigterm = options.onSigterm ?? DEFAULT_ON_SIGTERM;
  if (onSigterm !== 'force' && onSigterm !== 'graceful') return usageError(`--on-sigterm ${onSigterm} is not one of force, graceful`);
  if (manifestSource.kind === 'file') {
    const loaded = await loadManifest(manifestSource.label);
    if (!loaded.ok) return usageError(loaded.error);
  }
  // A summary file that cannot be written is said before anything runs, not after.
  for (const [flag, file] of [['--junit', options.junit], ['--summary', options.summary], ['--report', options.report]] as const) {
    if (file !== undefined && !isDirectory(dirname(resolve(file)))) return usageError(`${flag} ${file}: its directory ${dirname(resolve(file))} does not exist`);
  }

  // The runtime's structured log: JSON lines on stderr or in --log-file, never on stdout.
  let log: Awaited<ReturnType<typeof createLogger>>;
  try {
    log = await createLogger({ level: options.logLevel ?? 'silent', ...(options.logFile !== undefined ? { file: resolve(options.logFile) } : {}) });
  } catch (error) {
    return usageError(logFileRefusal(resolve(options.logFile ?? ''), error));
  }
  const stderr = process.stderr;
  const progressMode = progressModeFor(stderr, options.quiet === true);
  await loadLiveView(progressMode);
  const progress = new Progress({
    stream: stderr,
    mode: progressMode,
    color: useColor(stderr),
    remote: options.redis !== undefined,
  });
  const warnings = new WarningSink({ write: (line) => progress.note(printable(line)) });
  progress.info(
    manifestSource.kind === 'file'
      ? `manifest: ${manifestSource.path}`
      : `manifest: none (there is no ${join(workdir, MANIFEST_FILE)}; --manifest FILE names one)`,
  );
  // The first records write that failed (a full or read-only filesystem): said after the report.
  let recordsFailure: Error | null = null;
  // The plan's steps and when it started, for --junit and --summary.
  let planSteps: readonly { readonly id: string; readonly kind: StepKind }[] = [];
  let startedAt = new Date();
  // Only a resume reads the prior session's records (src/reconcile/): loaded for --resume alone (startup).
  const describeResume = options.resume !== undefined ? (await import('../reconcile/resume.js')).describeResume : null;
  const sessionId = newSessionId();
  let remote: Awaited<ReturnType<typeof openScaleOut>> = null;
  try {
    remote = await openScaleOut(
      options,
      sessionId,
      (line) => warnings.warn({ kind: 'scale-out', message: line }),
      (stepId, worker) => progress.startedOnWorker(stepId, worker),
    );
  } catch (error) {
    progress.dispose();
    return exitCodeAfterLog(log, usageError(messageOf(error)));
  }
  const withoutRedis = scaleOutWithoutRedis(options, 'a run on workers');
  if (withoutRedis !== null) {
    progress.dispose();
    return exitCodeAfterLog(log, usageError(withoutRedis));
  }
  const run = startPlan({
    sessionId,
    ...(remote !== null ? { remote } : {}),
    ...hiddenKeyFile(options, remote !== null),
    plan: planPath,
    workdir,
    ...(options.manifest !== undefined ? { manifest: options.manifest } : {}),
    ...(options.records !== undefined ? { recordsDir: resolve(options.records) } : {}),
    ...(options.capsules !== undefined ? { capsulesDir: resolve(options.capsules) } : {}),
    shellAllow: options.allow ?? [],
    maxParallel: options.maxParallel ?? null,
    ...(schedule !== undefined ? { schedule } : {}),
    logger: log.logger,
    onEvent: (event) => {
      if (event.type === 'plan.started') {
        planSteps = event.steps;
        startedAt = new Date();
      }
      progress.onEvent(event);
    },
    onWarning: (warning) => warnings.warn(warning),
    onNotice: (message) => warnings.warn({ kind: 'records', message }),
    onRecordsFailure: (error) => (recordsFailure = error),
    ...(options.runAs !== undefined ? { runAs: options.runAs } : {}),
    ...(options.privilegedSteps === true ? { privilegedSteps: true } : {}),
    ...(network !== undefined ? { network } : {}),
    ...(options.keepScratch === true ? { keepScratch: true } : {}),
    ...(options.verbose === true ? { onSession: (session: Session) => progress.note(containmentLines(session.containment.info)) } : {}),
    ...(options.cache === false ? { cacheDir: null } : options.cacheDir !== undefined ? { cacheDir: resolve(options.cacheDir) } : {}),
    // What the step cache could not do is the operator's, like warnings: shown with --quiet too.
    onCacheNotice: (line: string) => progress.note(line),
    ...(options.continue !== undefined ? { continue: { priorDir: resolve(options.continue), warn: (line: string) => progress.note(line) } } : {}),
    ...(options.from !== undefined ? { select: { from: options.from } } : only !== undefined ? { select: { only } } : {}),
    ...(options.resume !== undefined
      ? {
          resume: {
            priorDir: resolve(options.resume),
            reap: options.reap === true,
            // The resume's lines are the operator's, like warnings: shown with --quiet too.
            warn: (line: string) => progress.note(line),
            onOutcome: (outcome: ResumeOutcome) => {
              for (const line of describeResume?.(outcome) ?? []) progress.note(line);
            },
          },
        }
      : {}),
  });
  const stopHandlingSignals = cancelOnSignals(run, {
    graceSecs,
    ...signalsFor(onSigterm as OnSigterm),
    note: (text) => progress.note(text),
    early: releaseEarlySignals(),
  });
  // A terminal that went away (EIO/EPIPE on stderr) must not crash the run before its process
  // groups are ended: progress is best effort, for the rest of this process's life.
  ignoreStreamErrors(stderr);
  // An exception outside this flow (a timer, a listener) ends the run by force before capsule exits.
  const stopOnUncaughtError = onUncaughtError(
    () => run.cancel({ force: true }),
    options.records !== undefined ? resolve(options.records) : join(workdir, '.capsule', 'records'),
  );

  let report: PlanReport;
  try {
    report = await run.report;
  } catch (error) {
    progress.dispose();
    // A bad manifest or a records directory that holds a session: a usage error (exit 2), before any step ran.
    if (isRuntimeError(error, ERROR_CODES.MANIFEST_INVALID, ERROR_CODES.RECORDS_DIR_IN_USE, ERROR_CODES.CONTINUE_REFUSED)) return exitCodeAfterLog(log, usageError(error.message));
    // A bug inside the session (its trace is closed): the top-level handler reports it.
    if (error instanceof RunInternalError) throw error;
    // No report: the records directory could not be used.
    process.stderr.write(`error: the plan could not be run: ${messageOf(error)}\n`);
    return exitCodeAfterLog(log, EXIT.FAILED);
  } finally {
    stopHandlingSignals();
    stopOnUncaughtError();
    await remote?.close();
    log.flush();
  }

  warnings.finish();
  progress.finish(report, report.refusal ?? (report.plan_id === '' && report.failed_step === 'plan' ? explainUnreadPlan(planPath, report.results[0]?.error ?? '', options.workdir) : undefined));
  if (options.json === true) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  const pageFailure = await writeReportPage(report, options);
  const summariesFailure = [await writeCiSummaries(report, planSteps, startedAt, options), pageFailure].filter((failure) => failure !== null).join('; ') || null;
  if (summariesFailure !== null) {
    process.stderr.write(`error: ${printable(summariesFailure)}\n`);
    return exitCodeAfterLog(log, exitCodeOf(report) === EXIT.OK ? EXIT.FAILED : exitCodeOf(report));
  }
  // A full or read-only records filesystem: the report stands, but a run without its records did not succeed.
  if (recordsFailure !== null) {
    process.stderr.write(`error: ${printable(recordsIncomplete(recordsFailure))}\n`);
    return exitCodeAfterLog(log, exitCodeOf(report) === EXIT.OK ? EXIT.FAILED : exitCodeOf(report));
  }
  // A log that could not be written (a full disk): one line after the report, and exit 1 for 0.
  return exitCodeAfterLog(log, exitCodeOf(report));
}

/**
 * `capsule run --dry-run` (docs/cli.md#dry-run): `capsule validate`'s checks and words, then what
 * would run, in order, on stdout (`--json`: as one object); no session, no records, no process.
 */
async function dryRun(planPath: string, options: RunCommandOptions): Promise<ExitCode> {
  const wouldWrite = [
    options.resume !== undefined ? '--resume' : null,
    options.continue !== undefined ? '--continue' : null,
    options.from !== undefined ? '--from' : null,
    options.only !== undefined ? '--only' : null,
    options.junit !== undefined ? '--junit' : null,
    options.summary !== undefined ? '--summary' : null,
    options.report !== undefined ? '--report' : null,
  ].filter((flag) => flag !== null);
  if (wouldWrite.length > 0) return usageError(`--dry-run runs nothing and writes nothing: leave out ${wouldWrite.join(', ')}`);
  const { code, plan, manifest } = await validatePlan(
    planPath,
    {
      ...(options.manifest !== undefined ? { manifest: options.manifest } : {}),
      ...(options.workdir !== undefined ? { workdir: options.workdir } : {}),
      ...(options.records !== undefined ? { records: options.records } : {}),
      ...(options.allow !== undefined ? { allow: options.allow } : {}),
    },
    { sayValid: false },
  );
  if (code !== EXIT.OK || plan === null) return code;
  const { planPreview, previewText } = await import('./dry-run/preview.js');
  const preview = planPreview(plan, { manifest, workdir: resolve(options.workdir ?? process.cwd()), maxParallel: options.maxParallel ?? null, path: process.env['PATH'] });
  process.stdout.write(options.json === true ? `${JSON.stringify(preview, null, 2)}\n` : previewText(preview));
  return EXIT.OK;
}

/**
 * Writes `--junit` and `--summary` (and appends the Markdown to `$GITHUB_STEP_SUMMARY`): each file
 * whole or not at all, never through a link planted in its place (docs/cli.md#ci-summaries). Their
 * writers are loaded only when asked for. @returns what could not be written, or null.
 */
async function writeCiSummaries(
  report: PlanReport,
  steps: readonly { readonly id: string; readonly kind: StepKind }[],
  startedAt: Date,
  options: Pick<RunCommandOptions, 'junit' | 'summary'>,
): Promise<string | null> {
  const failures: string[] = [];
  if (options.junit !== undefined) {
    const { junitXml } = await import('./ci-summaries/junit.js');
    try {
      replaceFile(resolve(options.junit), junitXml(report, steps, startedAt));
    } catch (error) {
      failures.push(`--junit ${options.junit} could not be written: ${describeFsError(error)}`);
    }
  }
  if (options.summary !== undefined) {
    const { markdownSummary } = await import('./ci-summaries/markdown.js');
    const markdown = markdownSummary(report, steps);
    const file = resolve(options.summary);
    const github = process.env['GITHUB_STEP_SUMMARY'];
    const toGithub = github !== undefined && github !== '';
    // `--summary "$GITHUB_STEP_SUMMARY"` appends to it once, as below, never replacing what earlier steps wrote there.
    if (!toGithub || resolve(github) !== file) {
      try {
        replaceFile(file, markdown);
      } catch (error) {
        failures.push(`--summary ${options.summary} could not be written: ${describeFsError(error)}`);
      }
    }
    // GitHub Actions' job summary: appended to (other steps of the job write there too).
    if (toGithub) {
      try {
        appendFileSync(github, `${markdown}\n`);
      } catch (error) {
        failures.push(`GITHUB_STEP_SUMMARY ${github} could not be appended to: ${describeFsError(error)}`);
      }
    }
  }
  return failures.length === 0 ? null : failures.join('; ');
}

/**
 * Writes `--report FILE`, the run's page (docs/run-page.md), from the records the run just closed:
 * after a completed, failed or canceled run alike. `capsule report` writes it, as a process of its
 * own: the page's modules and Graphviz stay out of `capsule run`'s program (scripts/bundle.js).
 * @returns what could not be written, or null.
 */
async function writeReportPage(report: PlanReport, options: Pick<RunCommandOptions, 'report'>): Promise<string | null> {
  if (options.report === undefined) return null;
  const file = resolve(options.report);
  const child = spawn(process.execPath, [cliProgram(), 'report', report.records_dir, '--out', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await new Promise<number | null>((done) => {
    child.on('error', (error) => {
      stderr += error.message;
      done(null);
    });
    child.on('close', (exit) => done(exit));
  });
  if (code === 0) {
    process.stderr.write(stderr);
    return null;
  }
  return `--report ${options.report} could not be written: ${stderr.trim().replace(/^error: /, '') || `capsule report exited with ${code ?? 'an error'}`}`;
}

const ignoring = new WeakSet<NodeJS.WriteStream>();

/**
 * Adds one do-nothing `error` listener to `stream`, once per stream. Defined out here: a closure
 * made inside `runCommand` would hold on to that run (its session, plan and actors) for as long as
 * the stream lives, and in-process callers (tests, the CLI fuzz target) run many.
 */
function ignoreStreamErrors(stream: NodeJS.WriteStream): void {
  if (ignoring.has(stream)) return;
  ignoring.add(stream);
  stream.on('error', ignoreError);
}

function ignoreError(): void {}

/** What `--verbose` prints about the session's containment (the same facts as `session_start.containment`). */
export function containmentLines(info: ContainmentInfo): string {
  return [
    `containment: ${info.backend} — ${info.reason}`,
    `isolation: ${info.pidNamespace ? 'PID namespace' : 'none'} — ${info.isolationReason}`,
    ...(info.runAs !== null ? [`run as: ${info.runAs.name} (uid ${info.runAs.uid}, gid ${info.runAs.gid})`] : []),
    `steps get: ${describeConfinement(info.confinement)}`,
    `network: ${info.network.mode} — ${info.network.reason}`,
    ...(hasBounds(info.resources) ? [`resource limits: ${describeResourceBounds(info.resources)}`] : []),
  ].join('\n');
}
