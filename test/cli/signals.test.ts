/**
 * Ctrl-C and SIGTERM during `capsule run` (docs/cli.md): graceful first, forced on the second signal,
 * bursts within 300 ms count once, a graceful cancel escalates after `--cancel-grace` seconds,
 * exit 130, and no process of the run is left (checked in /proc).
 */
import { closeSync, existsSync, fstatSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { join } from 'node:path';
import {
  groupLedBy,
  groupMembers,
  isProcessAlive,
  killGroups,
  killStartedClis,
  type LedGroup,
  manifestAllowing,
  parseReport,
  resultOf,
  sleep,
  startCli,
  type StartedCli,
  stepCommand,
  TempDirs,
  waitFor,
  waitForPid,
  writeJson,
} from './helpers.js';
import { eachBackend } from '../support/backends.js';

const temp = new TempDirs();
/** Process groups led by the tests' steps: killed after each test if a failure left them. */
const stepGroups: LedGroup[] = [];
afterEach(() => {
  killStartedClis();
  killGroups(stepGroups.splice(0));
});
afterAll(() => temp.removeAll());

/**
 * The environment forcing the backend under test. These cases read the steps' pids from the steps
 * themselves, so they run without a PID namespace (test/integration/containment.test.ts covers
 * namespaced trees).
 */
let backendEnv: Record<string, string> = {};

/** A workdir whose plan is `first` (a step-script invocation) followed by a dependent step `second`. */
function cancelableRun(firstArgs: (string | number)[], manifest: Record<string, unknown> = manifestAllowing(), extraArgs: string[] = []) {
  const dir = temp.make('signals');
  writeJson(dir, 'capsule.json', manifest);
  writeJson(dir, 'plan.json', {
    id: 'long',
    steps: [
      { id: 'first', shell: stepCommand('first', ...firstArgs) },
      { id: 'second', shell: stepCommand('second', 'sleep', 0), depends_on: ['first'] },
    ],
  });
  const cli = startCli(['run', 'plan.json', '--json', ...extraArgs], { cwd: dir, env: backendEnv });
  return { dir, cli };
}

/** Polls `/proc/<pid>/status` until the process has a handler for `signal` (its SigCgt bit). */
async function waitUntilCatches(pid: number, signal: NodeJS.Signals): Promise<void> {
  const bit = BigInt(1) << BigInt((osConstants.signals[signal] as number) - 1);
  for (let tries = 0; tries < 5000; tries++) {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const caught = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    if (caught !== undefined && (BigInt(`0x${caught}`) & bit) !== BigInt(0)) return;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  throw new Error(`process ${pid} never caught ${signal}`);
}

/** Waits until step `first` of `cli`'s run runs and returns its pid (= the pgid of its group); fails at once if the run ended first. */
async function firstStepRunning(dir: string, cli: StartedCli): Promise<number> {
  const pgid = await waitForPid(join(dir, 'first.pid'), { cli });
  stepGroups.push(groupLedBy(pgid));
  return pgid;
}

describe('waitForPid with the CLI that writes the file', () => {
  it('fails at once, with the exit code and stderr, when that CLI ended before the pid file appeared', async () => {
    const { dir, cli } = cancelableRun(['sleep', 0], manifestAllowing(), ['--on-sigterm', 'later']);
    const startedAtMs = Date.now();
    const error = await waitForPid(join(dir, 'first.pid'), { cli }).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toContain('the CLI ended (exit code 2) before pid file');
    expect(error?.message).toContain('--on-sigterm later is not one of force, graceful');
    expect(Date.now() - startedAtMs).toBeLessThan(8000);
  });
});

describe('capsule run --quiet: a canceled run', () => {
  it('prints one line saying the plan was canceled and after how long, as the summary does, and exits 130', async () => {
    const dir = temp.make('signals-quiet');
    writeJson(dir, 'capsule.json', manifestAllowing());
    writeJson(dir, 'plan.json', { id: 'long', steps: [{ id: 'first', shell: stepCommand('first', 'sleep', 60_000) }] });
    const cli = startCli(['run', 'plan.json', '--quiet'], { cwd: dir });
    await firstStepRunning(dir, cli);

    cli.child.kill('SIGTERM');
    const result = await cli.done;

    expect(result.code).toBe(130);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^canceling by force: SIGTERM \(--on-sigterm force\)[^\n]*\ncanceled: plan long after \d+(ms|\.\ds)\n$/);
  });
});

eachBackend((backend) => {
beforeAll(() => {
  backendEnv = { CAPSULE_CONTAINMENT: backend.containment, CAPSULE_ISOLATION: backend.isolation };
});

describe('capsule run: cancel by signal', () => {
  it('lets the running step finish after a first SIGINT, skips what was not started, and exits 130', async () => {
    const { dir, cli } = cancelableRun(['sleep', 1500]);
    const pgid = await firstStepRunning(dir, cli);

    cli.child.kill('SIGINT');
    const result = await cli.done;

    expect(result.code).toBe(130);
    expect(result.stderr).toContain('canceling: waiting for running steps (Ctrl-C again to force)');
    const report = parseReport(result.stdout);
    expect(report).toMatchObject({ canceled: true, completed: false, failed_step: null });
    expect(resultOf(report, 'first').status).toBe('success');
    expect(resultOf(report, 'second')).toMatchObject({ status: 'skipped', attempts: 0 });
    expect(resultOf(report, 'second').error).toContain('cancelled before this step ran');
    expect(existsSync(join(dir, 'first.done'))).toBe(true);
    expect(existsSync(join(dir, 'second.pid'))).toBe(false);
    expect(groupMembers(pgid)).toEqual([]);
  });

  it('treats SIGTERM as a graceful cancel too with --on-sigterm graceful', async () => {
    const { dir, cli } = cancelableRun(['sleep', 800], manifestAllowing(), ['--on-sigterm', 'graceful']);
    await firstStepRunning(dir, cli);

    cli.child.kill('SIGTERM');
    const result = await cli.done;

    expect(result.code).toBe(130);
    const report = parseReport(result.stdout);
    expect(report.canceled).toBe(true);
    expect(resultOf(report, 'first').status).toBe('success');
  });

  it("forces on a single SIGTERM by default (a supervisor's stop): the step's tree is ended, exit 130, and the summary says what was stopped", async () => {
    const { dir, cli } = cancelableRun(['tree', 60_000]);
    const pgid = await firstStepRunning(dir, cli);
    const grandchild = await waitForPid(join(dir, 'first.child'), { cli });

    cli.child.kill('SIGTERM');
    const result = await cli.done;

    expect(result.code).toBe(130);
    expect(result.stderr).toContain('canceling by force: SIGTERM (--on-sigterm force)');
    expect(result.stderr).toContain("stopped: 'first' (its process tree was ended by force)");
    expect(result.stderr).toContain("not started: 'second' (skipped)");
    const report = parseReport(result.stdout);
    expect(report).toMatchObject({ canceled: true, completed: false, failed_step: null });
    expect(resultOf(report, 'first').error).toContain('cancelled by force');
    expect(groupMembers(pgid)).toEqual([]);
    expect(isProcessAlive(grandchild)).toBe(false);
  });

  /** A plan of `count` `sleep 30` steps, no max_parallel, started; and its trace's `process_start` records so far. */
  const wideRun = (count: number) => {
    const dir = temp.make('signals-wide');
    writeJson(dir, 'capsule.json', manifestAllowing('sleep'));
    writeJson(dir, 'plan.json', { id: 'wide', steps: Array.from({ length: count }, (_, i) => ({ id: `s${i}`, shell: 'sleep 30' })) });
    const cli = startCli(['run', 'plan.json', '--json', '--cancel-grace', '60'], { cwd: dir, env: backendEnv });
    const traceOf = (): string => {
      const root = join(dir, '.capsule', 'records');
      const session = existsSync(root) ? readdirSync(root).find((name) => name.startsWith('ses_')) : undefined;
      const trace = session === undefined ? null : join(root, session, 'trace.jsonl');
      // The session's directory is made before its trace.
      return trace === null || !existsSync(trace) ? '' : readFileSync(trace, 'utf8');
    };
    const starts = (): Array<{ pgid: number; owner: string }> =>
      traceOf().split('\n').filter((line) => line.includes('"event_type":"process_start"')).map((line) => JSON.parse(line) as { pgid: number; owner: string });
    const late = (): number => traceOf().split('\n').filter((line) => line.includes('"event_type":"plan_step_late"')).length;
    return { cli, starts, late, traceOf };
  };

  it('forces a wide wave without starting the launches still waiting for the spawner: those steps are skipped as not run, the summary counts both, and nothing is left', async () => {
    const count = 400;
    const { cli, starts, late, traceOf } = wideRun(count);
    await waitFor(() => starts().length > 0 || cli.child.exitCode !== null, 20_000, 'the first step to start');

    cli.child.kill('SIGTERM');
    const result = await cli.done;

    expect(result.code).toBe(130);
    const report = parseReport(result.stdout);
    expect(report.results).toHaveLength(count);
    // The spawner is sent a few launches at a time: those still waiting were withdrawn, never forked.
    const started = starts();
    expect(started.length).toBeGreaterThan(0);
    expect(started.length).toBeLessThan(count);
    const ran = new Set(started.map((start) => /step:(s\d+)#/.exec(start.owner)?.[1]));
    for (const step of report.results) {
      if (ran.has(step.step_id)) expect(step).toMatchObject({ status: 'failed', attempts: 1, error: expect.stringContaining('cancelled by force') });
      else expect(step).toMatchObject({ status: 'skipped', attempts: 0, error: 'the task running this plan was cancelled before this step ran' });
    }
    expect(late()).toBe(0); // a withdrawn launch has no result to ignore
    const sessionEnd = JSON.parse(traceOf().split('\n').find((line) => line.includes('"event_type":"session_end"')) ?? '{}') as { total_shell_calls?: number };
    expect(sessionEnd.total_shell_calls).toBe(started.length); // a withdrawn launch made no shell call
    const skipped = count - started.length;
    const stoppedLine = /^stopped: .*$/m.exec(result.stderr)?.[0] ?? '';
    if (started.length > 10) expect(stoppedLine).toMatch(new RegExp(`^stopped: ${started.length} steps, their process trees ended by force: ('s\\d+', ){4}'s\\d+' … and ${started.length - 5} more$`));
    else expect(stoppedLine.match(/\(its process tree was ended by force\)/g)).toHaveLength(started.length);
    expect(result.stderr).toMatch(new RegExp(`not started: ('s\\d+', ){4}'s\\d+' … and ${skipped - 5} more steps \\(skipped\\)\\n`));
    for (const { pgid } of started) expect(groupMembers(pgid)).toEqual([]);
  });

  it('starts nothing more after a graceful cancel of a wide wave: launches still waiting are withdrawn and skipped, the started ones run on', async () => {
    const count = 400;
    const { cli, starts } = wideRun(count);
    await waitFor(() => starts().length > 0 || cli.child.exitCode !== null, 20_000, 'the first step to start');

    cli.child.kill('SIGINT');
    await waitFor(() => cli.stderr().includes('canceling: waiting for running steps'), 20_000, 'the graceful cancel');
    const startedAtNotice = starts().length;
    // Launches sent to the spawner before the cancel (a few) still start; then nothing more does.
    // Quiet for 3 s: on a loaded machine one in-flight launch can take over a second to start.
    let last = -1;
    let stableSince = Date.now();
    await waitFor(() => {
      const now = starts().length;
      if (now !== last) [last, stableSince] = [now, Date.now()];
      return Date.now() - stableSince >= 3000;
    }, 25_000, 'no more steps to start');
    // The steps started run on (sleep 30); end them by force, so the test is short.
    cli.child.kill('SIGINT');
    const result = await cli.done;

    expect(result.code).toBe(130);
    const started = starts();
    expect(started.length).toBe(last); // the forced cancel started nothing either
    expect(started.length).toBeLessThanOrEqual(startedAtNotice + 8); // at most the spawner's window was still in flight
    expect(started.length).toBeLessThan(count);
    const report = parseReport(result.stdout);
    const skipped = report.results.filter((step) => step.status === 'skipped');
    expect(skipped).toHaveLength(count - started.length);
    for (const step of skipped) expect(step).toMatchObject({ attempts: 0, error: 'the task running this plan was cancelled before this step ran' });
    for (const { pgid } of started) expect(groupMembers(pgid)).toEqual([]);
  });

  it('ends a 100,000-step wave of `true` on SIGTERM once it has started: every step settled, exit 130, no process and no cgroup left', async () => {
    const count = 100_000;
    const dir = temp.make('signals-widest');
    writeJson(dir, 'capsule.json', manifestAllowing('true'));
    writeJson(dir, 'plan.json', { id: 'widest', steps: Array.from({ length: count }, (_, i) => ({ id: `s${i}`, shell: 'true' })) });
    const cli = startCli(['run', 'plan.json', '--quiet', '--records', 'records'], { cwd: dir, env: backendEnv });
    const tracePath = join(dir, 'records', 'trace.jsonl');
    // The trace's last 256 KiB: its 100,000 plan_step_start come first, then what runs.
    const traceTail = (): string => {
      if (!existsSync(tracePath)) return '';
      const fd = openSync(tracePath, 'r');
      try {
        const size = fstatSync(fd).size;
        const length = Math.min(size, 256 * 1024);
        const buffer = Buffer.alloc(length);
        readSync(fd, buffer, 0, length, size - length);
        return buffer.toString('utf8');
      } finally {
        closeSync(fd);
      }
    };
    await waitFor(() => traceTail().includes('"event_type":"process_start"') || cli.child.exitCode !== null, 120_000, 'the first step to start');

    cli.child.kill('SIGTERM');
    const result = await cli.done;

    expect(result.code).toBe(130);
    const report = JSON.parse(readFileSync(join(dir, 'records', 'report.json'), 'utf8')) as { canceled: boolean; results: { step_id: string; status: string; attempts: number }[] };
    expect(report.canceled).toBe(true);
    expect(report.results).toHaveLength(count);
    const lines = readFileSync(tracePath, 'utf8').split('\n');
    const starts = lines.filter((line) => line.includes('"event_type":"process_start"')).map((line) => JSON.parse(line) as { pgid: number; cgroup: string | null });
    expect(starts.length).toBeGreaterThan(0);
    // Every step either ran (its process started) or settled as never run; none is left unaccounted.
    expect(report.results.filter((step) => step.status === 'skipped' && step.attempts === 0)).toHaveLength(count - starts.length);
    for (const { pgid, cgroup } of starts) {
      expect(groupMembers(pgid)).toEqual([]);
      if (cgroup !== null) expect(existsSync(cgroup)).toBe(false);
    }
    const sessionStart = JSON.parse(lines.find((line) => line.includes('"event_type":"session_start"')) ?? '{}') as { containment?: { cgroup?: string | null } };
    const sessionCgroup = sessionStart.containment?.cgroup ?? null;
    if (backend.containment === 'cgroup') expect(sessionCgroup).not.toBeNull();
    if (sessionCgroup !== null) expect(existsSync(sessionCgroup)).toBe(false);
    expect(lines.some((line) => line.includes('"event_type":"session_end"'))).toBe(true);
  }, 300_000);

  it('refuses an --on-sigterm word it does not know (usage error, exit 2)', async () => {
    const { cli } = cancelableRun(['sleep', 0], manifestAllowing(), ['--on-sigterm', 'later']);
    const result = await cli.done;
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--on-sigterm later is not one of force, graceful');
  });

  it('counts SIGINTs that arrive within 300 ms of each other as one graceful cancel', async () => {
    const { dir, cli } = cancelableRun(['sleep', 1500]);
    await firstStepRunning(dir, cli);

    cli.child.kill('SIGINT');
    await sleep(50);
    cli.child.kill('SIGINT');
    await sleep(50);
    cli.child.kill('SIGINT');
    const result = await cli.done;

    expect(result.code).toBe(130);
    expect(result.stderr.match(/canceling: waiting for running steps/g)).toHaveLength(1);
    expect(result.stderr).not.toContain('by force');
    expect(resultOf(parseReport(result.stdout), 'first').status).toBe('success');
  });

  it("forces on a second SIGINT: the step's whole process group is ended and nothing is left", async () => {
    const { dir, cli } = cancelableRun(['tree', 60_000]);
    const pgid = await firstStepRunning(dir, cli);
    const grandchild = await waitForPid(join(dir, 'first.child'), { cli });
    expect(groupMembers(pgid)).toEqual(expect.arrayContaining([pgid, grandchild]));

    cli.child.kill('SIGINT');
    await sleep(500);
    expect(cli.stderr()).toContain('canceling: waiting for running steps');
    expect(groupMembers(pgid).length).toBeGreaterThan(0); // graceful: the step runs on
    const forcedAtMs = Date.now();
    cli.child.kill('SIGINT');
    const result = await cli.done;

    expect(Date.now() - forcedAtMs).toBeLessThan(8000);
    expect(result.code).toBe(130);
    expect(result.stderr).toContain('canceling by force');
    const report = parseReport(result.stdout);
    expect(report.canceled).toBe(true);
    expect(resultOf(report, 'first').status).toBe('failed');
    expect(resultOf(report, 'first').error).toContain('cancelled by force');
    expect(groupMembers(pgid)).toEqual([]);
    expect(isProcessAlive(grandchild)).toBe(false);
    expect(existsSync(join(dir, 'first.done'))).toBe(false);
  });

  it('forces at once on SIGHUP, so a closed terminal leaves no step running', async () => {
    const { dir, cli } = cancelableRun(['tree', 60_000]);
    const pgid = await firstStepRunning(dir, cli);
    const grandchild = await waitForPid(join(dir, 'first.child'), { cli });

    cli.child.kill('SIGHUP');
    const result = await cli.done;

    expect(result.code).toBe(130);
    expect(result.stderr).toContain('canceling by force: the terminal hung up (SIGHUP)');
    expect(resultOf(parseReport(result.stdout), 'first').error).toContain('cancelled by force');
    expect(groupMembers(pgid)).toEqual([]);
    expect(isProcessAlive(grandchild)).toBe(false);
  });

  it('treats a Ctrl-C that lands while capsule is still loading as a cancel before the first step', async () => {
    const dir = temp.make('early');
    writeJson(dir, 'capsule.json', manifestAllowing());
    writeJson(dir, 'plan.json', { id: 'early', steps: [{ id: 'first', shell: stepCommand('first', 'sleep', 60_000) }] });
    const cli = startCli(['run', 'plan.json', '--json'], { cwd: dir, env: backendEnv });
    // The moment the entry point holds signals (it is the first to catch SIGHUP, /proc's SigCgt;
    // Node itself catches SIGINT during bootstrap), the commands are still loading.
    await waitUntilCatches(cli.child.pid as number, 'SIGHUP');
    cli.child.kill('SIGINT');
    const result = await cli.done;

    expect(result.code).toBe(130);
    const report = parseReport(result.stdout);
    expect(report.canceled).toBe(true);
    expect(resultOf(report, 'first')).toMatchObject({ status: 'skipped', attempts: 0 });
  });

  it('forces a graceful cancel on its own once --cancel-grace seconds have passed', async () => {
    const { dir, cli } = cancelableRun(['tree', 60_000], manifestAllowing(), ['--cancel-grace', '1']);
    const pgid = await firstStepRunning(dir, cli);
    const grandchild = await waitForPid(join(dir, 'first.child'), { cli });

    const canceledAtMs = Date.now();
    cli.child.kill('SIGINT');
    const result = await cli.done;
    const tookMs = Date.now() - canceledAtMs;

    expect(result.code).toBe(130);
    expect(tookMs).toBeGreaterThanOrEqual(900);
    expect(tookMs).toBeLessThan(8000);
    expect(result.stderr).toContain('steps still running 1 s after the cancel (--cancel-grace)');
    expect(resultOf(parseReport(result.stdout), 'first').error).toContain('cancelled by force');
    expect(groupMembers(pgid)).toEqual([]);
    expect(isProcessAlive(grandchild)).toBe(false);
  });
});
});
