/**
 * The black-box acceptance cases of the plan rules (`docs/plan-format.md`: reading, validation,
 * capsule input shapes, scheduling, conditions, retries and `on_error`, tool results, shell steps,
 * the gate, cancellation, capsule steps, the trace), run through `runPlan` under the default setup
 * D (`test/support/plan-harness.ts`), plus cases for interpolation, the report, tool steps, the
 * gate and cancellation (`docs/cancel.md#plan-runs`, `docs/trace.md`). Report facts are asserted from the returned
 * report; trace facts from `trace.jsonl` in the report's records directory.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import {
  BLOCKED,
  CANCEL_BEFORE_STEP,
  CANCEL_FORCED_STEP,
  PLAN_CANCELED_REASON,
} from '../../machines/messages.js';
import type { GateRequest } from '../../src/runtime/attempt.js';
import type { PlanRun } from '../../src/runtime/run-plan.js';
import { splitShellWords } from '../../src/plan/shell-words.js';
import {
  deferred,
  facts,
  failed,
  passed,
  pollUntil,
  processesWithArg,
  RecordingGate,
  rows,
  runCase,
  StubTools,
  TempDirs,
  uniqueSleepArg,
  within,
  type CaseRun,
  type TraceRecord,
} from '../support/plan-harness.js';

const dirs = new TempDirs();
afterAll(async () => {
  await dirs.removeAll();
});

/** Writes `text` as a plan file in a fresh directory and returns its path. */
function planFile(text: string): string {
  const path = join(dirs.make('planfile'), 'plan.json');
  writeFileSync(path, text);
  return path;
}

type Plan = { id: string; steps: Record<string, unknown>[] };
const plan = (...steps: Record<string, unknown>[]): Plan => ({ id: 'p', steps });

/** The `session_start` event id of a run (the session node). */
function sessionNode(run: CaseRun): string {
  return run.trace.one('session_start').event_id;
}

// The local delegation plane: a capsule step of a session whose manifest does not allow the
// capsule (these runs have no manifest) is refused at dispatch, starting nothing
// (docs/delegation.md#who-may-delegate-to-what).
const CAPSULE_NOT_ALLOWED = ['not allowed', 'capabilities.spawn.allow'];

// ---------------------------------------------------------------------------------------------
// A. Reading and parsing
// ---------------------------------------------------------------------------------------------

describe('A. reading and parsing', () => {
  it('1: blames `plan` for a missing plan file, naming the path as given, and traces only plan_end under the session node', async () => {
    const path = join(dirs.make('missing'), 'nope.json');
    const run = await runCase(dirs, path);
    const error = `failed to read plan file ${path}: it does not exist`;
    expect(facts(run.report)).toEqual({ rows: [`plan:failed:${error}`], completed: false, failed_step: 'plan', canceled: false });
    expect(run.trace.planTypes()).toEqual(['plan_end']);
    expect(run.trace.end()).toMatchObject({
      parent_id: sessionNode(run),
      plan_id: '',
      outcome: 'failed',
      failed_step: 'plan',
      steps_total: 0,
      steps_succeeded: 0,
      steps_failed: 0,
      steps_skipped: 0,
      reason: error,
    });
    expect(run.report.plan_id).toBe('');
  });

  it('2: blames `plan` for a file that is not JSON and invokes no tool', async () => {
    const run = await runCase(dirs, planFile('{"id": "p", "steps": ['));
    expect(run.report.results).toHaveLength(1);
    const [result] = run.report.results;
    expect(result).toMatchObject({ step_id: 'plan', status: 'failed', output: null });
    expect(result?.error).toMatch(/^failed to parse plan JSON: /);
    expect(facts(run.report)).toMatchObject({ completed: false, failed_step: 'plan', canceled: false });
    expect(run.stubs.count()).toBe(0);
    expect(run.trace.planTypes()).toEqual(['plan_end']);
    expect(run.trace.end()).toMatchObject({ plan_id: '', failed_step: 'plan', reason: result?.error });
  });

  it.each([
    ['negative retries', '{"id":"p","steps":[{"id":"a","tool":"echo","retries":-1}]}'],
    ['null depends_on', '{"id":"p","steps":[{"id":"a","tool":"echo","depends_on":null}]}'],
    ['null on_error', '{"id":"p","steps":[{"id":"a","tool":"echo","on_error":null}]}'],
    ['a number as tool', '{"id":"p","steps":[{"id":"a","tool":7}]}'],
    ['null retries', '{"id":"p","steps":[{"id":"a","tool":"echo","retries":null}]}'],
    ['fractional retries', '{"id":"p","steps":[{"id":"a","tool":"echo","retries":1.5}]}'],
    ['retries above 32 bits', '{"id":"p","steps":[{"id":"a","tool":"echo","retries":4294967296}]}'],
    ['depends_on holding a number', '{"id":"p","steps":[{"id":"a","tool":"echo","depends_on":[1]}]}'],
    ['steps missing', '{"id":"p"}'],
    ['a top-level array', '[]'],
  ])('4: blames `plan` for a parse failure (%s)', async (_name, text) => {
    const run = await runCase(dirs, planFile(text));
    expect(run.report.results).toHaveLength(1);
    expect(run.report.results[0]).toMatchObject({ step_id: 'plan', status: 'failed', output: null });
    expect(run.report.results[0]?.error).toMatch(/^failed to parse plan JSON: /);
    expect(facts(run.report)).toMatchObject({ completed: false, failed_step: 'plan', canceled: false });
    expect(run.stubs.count()).toBe(0);
  });

  it('blames `plan` with the io error for a plan path that cannot be read as a file', async () => {
    const dir = dirs.make('plan-is-dir');
    const run = await runCase(dirs, dir);
    expect(run.report.results).toHaveLength(1);
    expect(run.report.results[0]?.error).toMatch(/^failed to read plan file: /);
    expect(run.report.results[0]?.error).not.toContain('it does not exist');
    expect(facts(run.report)).toMatchObject({ completed: false, failed_step: 'plan', canceled: false });
  });

  it('blames `plan` for a plan file that is not UTF-8', async () => {
    const path = join(dirs.make('planfile'), 'plan.json');
    writeFileSync(path, Buffer.from([0x7b, 0xff, 0xfe, 0x7d]));
    const run = await runCase(dirs, path);
    expect(run.report.results[0]?.error).toMatch(/^failed to read plan file: /);
    expect(run.report.failed_step).toBe('plan');
  });

  it('5: reads null tool/shell/capsule/if keys as absent', async () => {
    const run = await runCase(dirs, planFile('{"id":"p","steps":[{"id":"a","tool":"echo","shell":null,"capsule":null,"if":null}]}'));
    expect(facts(run.report)).toEqual({ rows: ['a:success:ok'], completed: true, failed_step: null, canceled: false });
    expect(run.trace.one('plan_start')).toMatchObject({ steps: [{ step_id: 'a', kind: 'tool', depends_on: [], has_condition: false }] });
  });

  it('reads a plan given as an object exactly like the same plan in a file', async () => {
    const body = plan({ id: 'a', tool: 'echo' }, { id: 'b', tool: 'echo', depends_on: ['a'] });
    const fromObject = await runCase(dirs, body);
    const fromFile = await runCase(dirs, planFile(JSON.stringify(body)));
    expect(facts(fromObject.report)).toEqual(facts(fromFile.report));
    expect(fromObject.trace.planTypes()).toEqual(fromFile.trace.planTypes());
  });

  it('completes an empty plan at once with no results', async () => {
    const run = await runCase(dirs, { id: 'p', steps: [] });
    expect(facts(run.report)).toEqual({ rows: [], completed: true, failed_step: null, canceled: false });
    expect(run.trace.planTypes()).toEqual(['plan_start', 'plan_end']);
    expect(run.trace.end()).toMatchObject({ outcome: 'completed', steps_total: 0, steps_succeeded: 0, steps_failed: 0, steps_skipped: 0 });
  });
});

// ---------------------------------------------------------------------------------------------
// B. Validation
// ---------------------------------------------------------------------------------------------

describe('B. validation (nothing runs; exactly one result)', () => {
  /** Runs a plan that validation must refuse and checks the common facts. */
  async function refused(body: Plan, blamed: string, error: string | RegExp): Promise<CaseRun> {
    const run = await runCase(dirs, body);
    expect(run.report.results).toHaveLength(1);
    const [result] = run.report.results;
    expect(result).toMatchObject({ step_id: blamed, status: 'failed', output: null, attempts: 0 });
    if (typeof error === 'string') expect(result?.error).toBe(error);
    else expect(result?.error).toMatch(error);
    expect(facts(run.report)).toMatchObject({ completed: false, failed_step: blamed, canceled: false });
    expect(run.stubs.count()).toBe(0);
    expect(run.trace.planTypes()).toEqual(['plan_start', 'plan_end']);
    expect(run.trace.end()).toMatchObject({
      outcome: 'failed',
      failed_step: blamed,
      steps_total: body.steps.length,
      steps_succeeded: 0,
      steps_failed: 0,
      steps_skipped: 0,
      reason: result?.error,
    });
    expect(run.trace.one('session_end')).toMatchObject({ total_tool_calls: 0, total_shell_calls: 0 });
    return run;
  }

  it('7: refuses a duplicate id and invokes nothing', async () => {
    await refused(plan({ id: 'a', tool: 'echo' }, { id: 'a', tool: 'echo' }), 'a', "duplicate step id 'a'");
  });

  it('8: refuses a step with no kind; plan_start names its kind unknown', async () => {
    const run = await refused(plan({ id: 's' }), 's', 'step must declare exactly one of tool, shell, or capsule');
    expect(run.trace.one('plan_start')).toMatchObject({ steps: [{ step_id: 's', kind: 'unknown' }] });
  });

  it('refuses a step with two kinds', async () => {
    const run = await refused(plan({ id: 's', tool: 'echo', shell: 'bash -c true' }), 's', 'step declares more than one of tool, shell, or capsule');
    expect(run.trace.one('plan_start')).toMatchObject({ steps: [{ step_id: 's', kind: 'unknown' }] });
  });

  it('10: refuses a tool that is not installed', async () => {
    await refused(plan({ id: 'bad', tool: 'nonexistent' }), 'bad', "tool 'nonexistent' is not installed");
  });

  it('11: refuses the plan-submission tool even when it is installed', async () => {
    const stubs = new StubTools().on('submit-plan', () => passed('nested'));
    const run = await runCase(dirs, plan({ id: 's', tool: 'submit-plan' }), { stubs });
    expect(run.report.results).toHaveLength(1);
    expect(run.report.results[0]).toMatchObject({ step_id: 's', status: 'failed' });
    expect(run.report.results[0]?.error).toContain('cannot submit another plan');
    expect(run.report.results[0]?.error).toContain('is not callable from inside a plan');
    expect(run.report.failed_step).toBe('s');
    expect(stubs.count('submit-plan')).toBe(0);
  });

  it.each(['switch-driver', 'end-without-answer', 'pull-artifact', 'remove-artifact'])(
    'refuses the turn-only tool %s inside a plan, installed or not',
    async (tool) => {
      const stubs = new StubTools().on(tool, () => passed('x'));
      const run = await runCase(dirs, plan({ id: 's', tool }), { stubs });
      expect(rows(run.report)).toEqual([`s:failed:'${tool}' is not callable from inside a plan`]);
      expect(stubs.count()).toBe(0);
      const bare = await runCase(dirs, plan({ id: 's', tool }));
      expect(rows(bare.report)).toEqual([`s:failed:'${tool}' is not callable from inside a plan`]);
    },
  );

  it('13: refuses a shell binary outside shell_allow and starts no process', async () => {
    await refused(plan({ id: 'py', shell: 'python3 -c 1' }), 'py', "binary 'python3' is not in capabilities.shell.allow");
  });

  it.each(['', '   ', "''"])('14: refuses the empty shell command %j', async (command) => {
    await refused(plan({ id: 's', shell: command }), 's', 'shell command is empty');
  });

  it('16: refuses an unknown dependency, naming the first offending entry', async () => {
    await refused(plan({ id: 'a', tool: 'echo' }, { id: 'b', tool: 'echo', depends_on: ['a', 'zzz', 'yyy'] }), 'b', "unknown dependency 'zzz'");
  });

  it('17: refuses an unknown reference nested inside input', async () => {
    await refused(plan({ id: 'a', tool: 'echo', input: { list: [1, { x: '$nope.output' }] } }), 'a', "unknown reference '$nope.output'");
  });

  it('refuses an unknown field of a known step, and $5.00 as a reference', async () => {
    await refused(plan({ id: 'a', tool: 'echo' }, { id: 'b', tool: 'echo', input: '$a.text' }), 'b', "unknown reference field 'text'");
    await refused(plan({ id: 'a', tool: 'echo', input: { price: '$5.00' } }), 'a', "unknown reference '$5.00'");
    await refused(plan({ id: '5', tool: 'echo' }, { id: 'a', tool: 'echo', input: { price: '$5.00' } }), 'a', "unknown reference field '00'");
  });

  it('19a: refuses an unknown reference in a condition', async () => {
    await refused(plan({ id: 'a', tool: 'echo', if: "$ghost.status == 'success'" }), 'a', "unknown reference '$ghost.status'");
  });

  it('19b: strips a trailing parenthesis before checking a condition reference', async () => {
    await refused(plan({ id: 'a', tool: 'echo', if: "'x' == $ghost.status)" }), 'a', "unknown reference '$ghost.status'");
  });

  it('19c: does not look at a token starting with ( — it fails at evaluation instead', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo' }, { id: 'b', tool: 'echo', depends_on: ['a'], if: "($a.status == 'success')" }));
    expect(facts(run.report)).toEqual({
      rows: ['a:success:ok', "b:failed:unsupported condition operand '($a.status'"],
      completed: false,
      failed_step: 'b',
      canceled: false,
    });
    expect(run.stubs.count('echo')).toBe(1);
  });

  it('20: refuses a condition written without spaces around the operator', async () => {
    await refused(
      plan({ id: 'a', tool: 'echo' }, { id: 'b', tool: 'echo', depends_on: ['a'], if: "$a.status=='success'" }),
      'b',
      "unknown reference field 'status=='success''",
    );
  });

  it('22: lets a $word without a dot pass validation and fails every attempt at dispatch', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo', input: { home: '$HOME' }, retries: 1 }));
    expect(facts(run.report)).toEqual({ rows: ["a:failed:invalid reference '$HOME'"], completed: false, failed_step: 'a', canceled: false });
    expect(run.stubs.count()).toBe(0);
    const step = run.trace.step('a');
    expect(step).toMatchObject({ status: 'failed', attempts: 2, error: "invalid reference '$HOME'" });
    expect(step).not.toHaveProperty('input');
  });

  it('applies rules 1–4 to every step before any rule 5–6 check', async () => {
    await refused(
      plan({ id: 'a', tool: 'echo', depends_on: ['zzz'] }, { id: 'b', tool: 'echo' }, { id: 'c', tool: 'nonexistent' }),
      'c',
      "tool 'nonexistent' is not installed",
    );
  });

  it('refuses an on_error policy it does not know, case-sensitively', async () => {
    await refused(plan({ id: 'a', tool: 'echo', on_error: 'Skip' }), 'a', "invalid on_error policy 'Skip'");
  });

  it('refuses a forbidden tool with the forbidden-tool text before the not-installed check', async () => {
    await refused(plan({ id: 'a', tool: 'submit-plan' }), 'a', /cannot submit another plan/);
  });
});

// ---------------------------------------------------------------------------------------------
// C. Capsule step input shapes
// ---------------------------------------------------------------------------------------------

describe('C. capsule step input shapes (validation)', () => {
  /** Runs `{"id":"p","steps":[{"id":"w","capsule":"worker","input":<input>}]}` (input omitted when undefined). */
  async function capsule(input?: unknown): Promise<CaseRun> {
    const step: Record<string, unknown> = { id: 'w', capsule: 'worker' };
    if (input !== undefined) step['input'] = input;
    const gate = new RecordingGate();
    const run = await runCase(dirs, plan(step), { gate: gate.gate });
    expect(run.report.results).toHaveLength(1);
    expect(run.report.results[0]).toMatchObject({ step_id: 'w', status: 'failed', output: null, attempts: 0 });
    expect(facts(run.report)).toMatchObject({ completed: false, failed_step: 'w', canceled: false });
    expect(run.trace.started()).toEqual([]);
    expect(gate.requests).toEqual([]);
    return run;
  }

  it('23: refuses keys the child cannot receive and points at "objective"', async () => {
    const run = await capsule({ task: 'hello' });
    expect(run.report.results[0]?.error).toContain('keys the child cannot receive: task');
    expect(run.report.results[0]?.error).toContain('"objective"');
  });

  it('lists the extra keys sorted and joined by ", "', async () => {
    const run = await capsule({ render_as: 'json', objective: 'x', instructions: 'y' });
    expect(run.report.results[0]?.error).toContain('keys the child cannot receive: instructions, render_as');
  });

  it.each([[7], [null], [{ nested: 'x' }], [['x']]])('25: refuses a non-string objective (%j)', async (objective) => {
    const run = await capsule({ objective });
    expect(run.report.results[0]?.error).toBe('capsule step input "objective" must be a string');
  });

  it('26: refuses an empty object', async () => {
    const run = await capsule({});
    expect(run.report.results[0]?.error).toBe('capsule step input must be a string or { "objective": "<text>" }');
  });

  it('28: refuses an absent and a null input with the same no-input text', async () => {
    const absent = await capsule(undefined);
    const nullInput = await capsule(null);
    expect(absent.report.results[0]?.error).toContain('has no input');
    expect(absent.report.results[0]?.error).toContain('task text');
    expect(nullInput.report.results[0]?.error).toBe(absent.report.results[0]?.error);
  });

  it.each([
    [true, 'a boolean'],
    [3, 'a number'],
    [['a'], 'an array'],
  ])('refuses %j as capsule input, naming it as %s', async (input, what) => {
    const run = await capsule(input);
    expect(run.report.results[0]?.error).toBe(`capsule step input must be a string or { "objective": "<text>" }, not ${what}`);
  });

  it.each([[{ objective: '$analyse.output' }], ['$analyse.output'], [''], [{ objective: '' }]])(
    '29: lets the accepted shape %j reach dispatch, where the spawn allow list refuses it',
    async (input) => {
      const run = await runCase(
        dirs,
        plan({ id: 'analyse', tool: 'echo' }, { id: 'w', capsule: 'worker', depends_on: ['analyse'], input }),
      );
      expect(rows(run.report)[0]).toBe('analyse:success:ok');
      expect(run.report.results[1]).toMatchObject({ step_id: 'w', status: 'failed', output: null, attempts: 1 });
      for (const term of CAPSULE_NOT_ALLOWED) expect(run.report.results[1]?.error).toContain(term);
      expect(facts(run.report)).toMatchObject({ completed: false, failed_step: 'w', canceled: false });
      expect(run.trace.started()).toEqual(['analyse', 'w']);
    },
  );
});

// ---------------------------------------------------------------------------------------------
// D. Scheduling
// ---------------------------------------------------------------------------------------------

describe('D. scheduling', () => {
  it('31: runs a join point once, after both sides, with both outputs interpolated', async () => {
    const stubs = new StubTools().on('echo', ({ input }) => {
      const value = input as Record<string, string>;
      if (value['l'] === 'left' && value['r'] === 'right') return passed('joined');
      return passed(value['side'] ?? 'none');
    });
    const run = await runCase(
      dirs,
      plan(
        { id: 'left', tool: 'echo', input: { side: 'left' } },
        { id: 'right', tool: 'echo', input: { side: 'right' } },
        { id: 'join', tool: 'echo', depends_on: ['left', 'right'], input: { l: '$left.output', r: '$right.output' } },
      ),
      { stubs },
    );
    expect(facts(run.report)).toEqual({
      rows: ['left:success:left', 'right:success:right', 'join:success:joined'],
      completed: true,
      failed_step: null,
      canceled: false,
    });
    const inputs = stubs.inputs('echo').map((text) => JSON.parse(text) as unknown);
    expect(inputs).toHaveLength(3);
    expect(inputs[2]).toEqual({ l: 'left', r: 'right' });
  });

  it('32: runs the steps of a wave concurrently (both calls are in flight at once)', async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    const bothIn = deferred();
    const stubs = new StubTools().on('slow', async () => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      if (inFlight === 2) bothIn.resolve();
      await within(bothIn.promise, 10_000, 'the other slow call to be in flight (rendezvous)');
      inFlight--;
      return passed('ok');
    });
    const run = await runCase(dirs, plan({ id: 'a', tool: 'slow' }, { id: 'b', tool: 'slow' }), { stubs });
    expect(facts(run.report)).toEqual({ rows: ['a:success:ok', 'b:success:ok'], completed: true, failed_step: null, canceled: false });
    expect(maxInFlight).toBe(2);
    expect(run.trace.planTypes()).toEqual(['plan_start', 'plan_step_start', 'plan_step_start', 'plan_step', 'plan_step', 'plan_end']);
  });

  it('34: fails a step that references the output of a success without output', async () => {
    const stubs = new StubTools().on('a', () => passed());
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'echo', depends_on: ['a'], input: { v: '$a.output' } }), { stubs });
    expect(run.report.results[0]).toMatchObject({ step_id: 'a', status: 'success', output: null, error: null });
    expect(facts(run.report)).toEqual({
      rows: ['a:success', "b:failed:reference '$a.output' has no output"],
      completed: false,
      failed_step: 'b',
      canceled: false,
    });
    expect(stubs.count('echo')).toBe(0);
  });

  it('35: reports results in settlement order, not declaration order', async () => {
    const run = await runCase(dirs, plan({ id: 'x', tool: 'echo', depends_on: ['y'], if: "$y.status == 'success'" }, { id: 'y', tool: 'echo' }));
    expect(facts(run.report)).toEqual({ rows: ['y:success:ok', 'x:success:ok'], completed: true, failed_step: null, canceled: false });
    expect(run.trace.settled()).toEqual(['y', 'x']);
  });

  it('37: blames the first step of a cycle with the blocked error and runs nothing', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo', depends_on: ['b'] }, { id: 'b', tool: 'echo', depends_on: ['a'] }));
    expect(facts(run.report)).toEqual({ rows: [`a:failed:${BLOCKED}`], completed: false, failed_step: 'a', canceled: false });
    expect(BLOCKED).toContain('blocked');
    expect(BLOCKED).toContain('dependency cycle');
    expect(run.stubs.count()).toBe(0);
    expect(run.trace.started()).toEqual([]);
    expect(run.trace.step('a')).toMatchObject({ status: 'failed', attempts: 0, duration_ms: 0, error: BLOCKED });
    expect(run.trace.steps('b')).toEqual([]);
    expect(run.trace.end()).toMatchObject({ outcome: 'failed', failed_step: 'a', steps_failed: 1 });
    expect(run.trace.end()).not.toHaveProperty('reason');
  });

  it('38: blames the first unsettled step in declaration order, even outside the cycle', async () => {
    const run = await runCase(
      dirs,
      plan(
        { id: 'a', tool: 'echo', depends_on: ['c'] },
        { id: 'b', tool: 'echo' },
        { id: 'c', tool: 'echo', depends_on: ['d'] },
        { id: 'd', tool: 'echo', depends_on: ['c'] },
      ),
    );
    expect(facts(run.report)).toEqual({ rows: ['b:success:ok', `a:failed:${BLOCKED}`], completed: false, failed_step: 'a', canceled: false });
    expect(run.stubs.count()).toBe(1);
  });

  it('blocks a step that depends on itself, after the steps that can run have run', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo' }, { id: 'self', tool: 'echo', depends_on: ['self'] }, { id: 'c', tool: 'echo', depends_on: ['a'] }));
    expect(facts(run.report)).toEqual({
      rows: ['a:success:ok', 'c:success:ok', `self:failed:${BLOCKED}`],
      completed: false,
      failed_step: 'self',
      canceled: false,
    });
  });

  it('gives every step of a wave the results as they stood when the wave began (siblings never see each other)', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo' }, { id: 'b', tool: 'echo', input: '$a.output', on_error: 'continue' }));
    expect(facts(run.report)).toEqual({
      rows: ['a:success:ok', "b:failed:reference '$a.output' is not ready"],
      completed: true,
      failed_step: null,
      canceled: false,
    });
  });

  it('lets a step reference a settled step it does not depend on when that step settled in an earlier wave', async () => {
    const stubs = new StubTools().on('a', () => passed('42'));
    const run = await runCase(
      dirs,
      plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'echo', depends_on: ['a'] }, { id: 'c', tool: 'echo', depends_on: ['b'], input: { n: '$a.output', s: '$a.status', k: 7, t: 'x $a.output' } }),
      { stubs },
    );
    expect(run.report.completed).toBe(true);
    expect(JSON.parse(stubs.inputs('echo')[1] ?? 'null')).toEqual({ n: '42', s: 'success', k: 7, t: 'x $a.output' });
  });

  it('splits a reference at its last dot, so step ids may contain dots', async () => {
    const stubs = new StubTools().on('a', () => passed('dotted'));
    const run = await runCase(
      dirs,
      plan({ id: 'a.b', tool: 'a' }, { id: 'c', tool: 'echo', depends_on: ['a.b'], if: "$a.b.status == 'success'", input: { v: '$a.b.output' } }),
      { stubs },
    );
    expect(rows(run.report)).toEqual(['a.b:success:dotted', 'c:success:ok']);
    expect(stubs.inputs('echo')).toEqual(['{"v":"dotted"}']);
  });

  it('handles step ids that are names of Object.prototype members', async () => {
    const stubs = new StubTools().on('a', ({ input }) => passed(`got ${JSON.stringify(input)}`));
    const run = await runCase(
      dirs,
      plan(
        { id: '__proto__', tool: 'echo' },
        { id: 'constructor', tool: 'echo', depends_on: ['__proto__'], if: "$__proto__.status == 'success'" },
        { id: 'toString', tool: 'a', depends_on: ['constructor'], input: { p: '$__proto__.output', c: '$constructor.status' } },
        { id: 'hasOwnProperty', tool: 'echo', input: '$valueOf.output', on_error: 'continue' },
        { id: 'valueOf', tool: 'echo', depends_on: ['valueOf'] },
      ),
      { stubs },
    );
    expect(rows(run.report)).toEqual([
      '__proto__:success:ok',
      "hasOwnProperty:failed:reference '$valueOf.output' is not ready",
      'constructor:success:ok',
      'toString:success:got {"p":"ok","c":"success"}',
      `valueOf:failed:${BLOCKED}`,
    ]);
  });

  it('settles a wave in declaration order, not completion order', async () => {
    const release = deferred();
    const stubs = new StubTools()
      .on('slow', async () => {
        await within(release.promise, 10_000, 'the fast step to finish');
        return passed('slow');
      })
      .on('ok', () => {
        release.resolve();
        return passed('fast');
      });
    const run = await runCase(dirs, plan({ id: 's', tool: 'slow' }, { id: 'f', tool: 'ok' }), { stubs });
    expect(stubs.order).toEqual(['slow', 'ok']);
    expect(rows(run.report)).toEqual(['s:success:slow', 'f:success:fast']);
    expect(run.trace.settled()).toEqual(['s', 'f']);
  });

  it('starts no step of the next wave before every step of the current wave has finished', async () => {
    const events: string[] = [];
    const aDone = deferred();
    const stubs = new StubTools()
      .on('a', () => {
        events.push('a');
        aDone.resolve();
        return passed('a');
      })
      .on('slow', async () => {
        events.push('slow:start');
        await within(aDone.promise, 10_000, 'step a to be invoked');
        // Give the scheduler many turns in which it could (wrongly) start c.
        for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
        events.push('slow:end');
        return passed('slow');
      })
      .on('b', () => {
        events.push('c');
        return passed('c');
      });
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, { id: 's', tool: 'slow' }, { id: 'c', tool: 'b', depends_on: ['a'] }), { stubs });
    expect(run.report.completed).toBe(true);
    expect(events.indexOf('c')).toBeGreaterThan(events.indexOf('slow:end'));
    expect(run.trace.planTypes()).toEqual([
      'plan_start', 'plan_step_start', 'plan_step_start', 'plan_step', 'plan_step', 'plan_step_start', 'plan_step', 'plan_end',
    ]);
  });

  it('writes plan_step_start for every step of a wave before any of them runs (first and later waves)', async () => {
    const seen: Record<string, number> = {};
    const startsWritten = (ctx: { workdir: string }): number =>
      readFileSync(join(ctx.workdir, 'records', 'trace.jsonl'), 'utf8')
        .split('\n')
        .filter((line) => line.includes('"event_type":"plan_step_start"')).length;
    const stubs = new StubTools();
    for (const tool of ['a', 'b', 'ok', 'echo']) {
      stubs.on(tool, ({ ctx }) => {
        seen[tool] = startsWritten(ctx);
        return passed(tool);
      });
    }
    const run = await runCase(
      dirs,
      plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'b' }, { id: 'c', tool: 'ok', depends_on: ['a'] }, { id: 'd', tool: 'echo', depends_on: ['b'] }),
      { stubs },
    );
    expect(run.report.completed).toBe(true);
    expect(seen).toEqual({ a: 2, b: 2, ok: 4, echo: 4 });
  });

  it('rejects a maxParallel below 1 instead of never starting a step', async () => {
    await expect(runCase(dirs, plan({ id: 'a', tool: 'a' }), { maxParallel: 0 })).rejects.toThrow(RangeError);
    await expect(runCase(dirs, plan({ id: 'a', tool: 'a' }), { maxParallel: 1.5 })).rejects.toThrow(/maxParallel/);
  });

  it('skips with the cancel error the steps of a wave that maxParallel had not started when the cancel came', async () => {
    let door: PlanRun | undefined;
    const stubs = new StubTools().on('a', () => {
      door?.cancel();
      return passed('a');
    });
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'b' }), {
      stubs,
      maxParallel: 1,
      onStart: (r) => {
        door = r;
      },
    });
    expect(facts(run.report)).toEqual({ rows: ['a:success:a', `b:skipped:${CANCEL_BEFORE_STEP}`], completed: false, failed_step: null, canceled: true });
    expect(stubs.count('b')).toBe(0);
    expect(run.trace.started()).toEqual(['a']);
  });

  it('keeps at most maxParallel steps of a wave in flight and still runs them all', async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    const stubs = new StubTools().on('slow', async () => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
      inFlight--;
      return passed('ok');
    });
    const steps = ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id, tool: 'slow' }));
    const run = await runCase(dirs, plan(...steps), { stubs, maxParallel: 2 });
    expect(rows(run.report)).toEqual(['a', 'b', 'c', 'd', 'e'].map((id) => `${id}:success:ok`));
    expect(maxInFlight).toBe(2);
    expect(stubs.count('slow')).toBe(5);
  });
});

// ---------------------------------------------------------------------------------------------
// E. Conditions
// ---------------------------------------------------------------------------------------------

describe('E. conditions', () => {
  it('40: skips a step whose condition is false without running it, with no error and no plan_step_start', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'ok' }, { id: 'b', tool: 'ok', depends_on: ['a'], if: "$a.status == 'failed'" }));
    expect(facts(run.report)).toEqual({ rows: ['a:success:ok', 'b:skipped'], completed: true, failed_step: null, canceled: false });
    expect(run.report.results[1]).toMatchObject({ output: null, error: null, attempts: 0 });
    expect(run.stubs.count()).toBe(1);
    expect(run.trace.started()).toEqual(['a']);
    const b = run.trace.step('b');
    expect(b).toMatchObject({ status: 'skipped', attempts: 0, duration_ms: 0 });
    expect(b).not.toHaveProperty('error');
    expect(run.trace.end()).toMatchObject({ outcome: 'completed', steps_succeeded: 1, steps_skipped: 1 });
  });

  it('41: runs a step whose compound condition is true', async () => {
    const stubs = new StubTools().on('a', () => passed('42'));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'echo', depends_on: ['a'], if: "$a.output == \"42\" && $a.status != 'failed'" }), { stubs });
    expect(facts(run.report)).toEqual({ rows: ['a:success:42', 'b:success:ok'], completed: true, failed_step: null, canceled: false });
  });

  it('43: stops the run on a condition error whatever on_error says, dropping steps made ready in the same scan', async () => {
    const stubs = new StubTools().on('a', () => passed());
    const run = await runCase(
      dirs,
      plan({ id: 'a', tool: 'a' }, { id: 'd', tool: 'echo', depends_on: ['a'] }, { id: 'c', tool: 'echo', depends_on: ['a'], if: "$a.output == 'x'", on_error: 'continue' }),
      { stubs },
    );
    expect(facts(run.report)).toEqual({
      rows: ['a:success', "c:failed:reference '$a.output' has no output"],
      completed: false,
      failed_step: 'c',
      canceled: false,
    });
    expect(stubs.count('echo')).toBe(0);
    expect(run.trace.started()).toEqual(['a']);
    expect(run.trace.step('c')).toMatchObject({ status: 'failed', attempts: 0, duration_ms: 0, error: "reference '$a.output' has no output" });
    expect(run.trace.steps('d')).toEqual([]);
  });

  it('44: fails a condition with a bare word operand', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo' }, { id: 'b', tool: 'echo', depends_on: ['a'], if: '$a.status == success' }));
    expect(facts(run.report)).toEqual({
      rows: ['a:success:ok', "b:failed:unsupported condition operand 'success'"],
      completed: false,
      failed_step: 'b',
      canceled: false,
    });
  });

  it('46: treats a blank condition as no condition, though plan_start says it has one', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo', if: '   ' }));
    expect(facts(run.report)).toEqual({ rows: ['a:success:ok'], completed: true, failed_step: null, canceled: false });
    expect(run.trace.one('plan_start')).toMatchObject({ steps: [{ step_id: 'a', has_condition: true }] });
  });

  /** docs/plan-format.md#conditions, evaluated by the running scheduler: `a` = success/"42", `b` unsettled (it depends on the step under test). */
  it.each<[string | undefined, 'true' | 'false' | string]>([
    [undefined, 'true'],
    ['', 'true'],
    ['   ', 'true'],
    ["$a.status == 'success'", 'true'],
    ["$a.output == \"42\" && $a.status != 'failed'", 'true'],
    ["$a.output == 'nope' || $a.status == 'failed'", 'false'],
    ["'42' == $a.output", 'true'],
    ["$a.output > '100'", 'true'],
    ["$a.output < '5'", 'true'],
    ["$a.output == 'x || y'", 'false'],
    ["$a.status == 'success' || $b.status == 'x'", 'true'],
    ["$b.status == 'success'", "reference '$b.status' is not ready"],
    ['$a.status == success', "unsupported condition operand 'success'"],
    ['$a.status', "unsupported condition expression '$a.status'"],
    ["$a.output >= '1'", "unsupported condition operand '= '1''"],
    ["($a.status == 'success')", "unsupported condition operand '($a.status'"],
  ])('47: evaluates %j to %s', async (condition, expected) => {
    const stubs = new StubTools().on('a', () => passed('42'));
    const step: Record<string, unknown> = { id: 'c', tool: 'echo', depends_on: ['a'] };
    if (condition !== undefined) step['if'] = condition;
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, step, { id: 'b', tool: 'echo', depends_on: ['c'] }), { stubs });
    const c = run.report.results.find((r) => r.step_id === 'c');
    if (expected === 'true') {
      expect(c).toMatchObject({ status: 'success', output: 'ok' });
      expect(run.report.completed).toBe(true);
    } else if (expected === 'false') {
      expect(c).toMatchObject({ status: 'skipped', output: null, error: null, attempts: 0 });
      expect(run.report.completed).toBe(true);
    } else {
      expect(c).toMatchObject({ status: 'failed', output: null, error: expected, attempts: 0 });
      expect(facts(run.report)).toMatchObject({ completed: false, failed_step: 'c', canceled: false });
      expect(run.report.results.map((r) => r.step_id)).toEqual(['a', 'c']);
    }
  });

  it('runs a dependant without an if after its dependency was skipped by a false condition (skipped counts as settled)', async () => {
    const run = await runCase(
      dirs,
      plan({ id: 'a', tool: 'echo' }, { id: 'b', tool: 'echo', depends_on: ['a'], if: "$a.status == 'failed'" }, { id: 'c', tool: 'ok', depends_on: ['b'], input: '$b.status' }),
    );
    expect(facts(run.report)).toEqual({ rows: ['a:success:ok', 'b:skipped', 'c:success:ok'], completed: true, failed_step: null, canceled: false });
    expect(run.stubs.inputs('ok')).toEqual(['"skipped"']);
  });

  it('settles a skip cascade within one scan, in declaration order, before the wave it made ready (docs/plan-format.md#the-scan)', async () => {
    // After a's wave, one scan skips b, then c (declared after b), and makes w ready; z, declared
    // before c, waits for the next scan even though c settled earlier in this one.
    const run = await runCase(
      dirs,
      plan(
        { id: 'z', tool: 'echo', depends_on: ['c'], if: "$c.status == 'success'" },
        { id: 'a', tool: 'echo' },
        { id: 'b', tool: 'echo', depends_on: ['a'], if: "$a.status == 'failed'" },
        { id: 'c', tool: 'echo', depends_on: ['b'], if: "$b.status == 'success'" },
        { id: 'w', tool: 'echo', depends_on: ['b'], if: "$b.status == 'skipped'" },
      ),
    );
    expect(facts(run.report)).toEqual({ rows: ['a:success:ok', 'b:skipped', 'c:skipped', 'w:success:ok', 'z:skipped'], completed: true, failed_step: null, canceled: false });
    expect(run.trace.settled()).toEqual(['a', 'b', 'c', 'w', 'z']);

    // The same steps with z declared after c: z is skipped in the same scan, before w runs.
    const after = await runCase(
      dirs,
      plan(
        { id: 'a', tool: 'echo' },
        { id: 'b', tool: 'echo', depends_on: ['a'], if: "$a.status == 'failed'" },
        { id: 'c', tool: 'echo', depends_on: ['b'], if: "$b.status == 'success'" },
        { id: 'z', tool: 'echo', depends_on: ['c'], if: "$c.status == 'success'" },
        { id: 'w', tool: 'echo', depends_on: ['b'], if: "$b.status == 'skipped'" },
      ),
    );
    expect(rows(after.report)).toEqual(['a:success:ok', 'b:skipped', 'c:skipped', 'z:skipped', 'w:success:ok']);
  });

  it('runs a step declared before a skipped dependency in the next wave, not the one the same scan made ready', async () => {
    const run = await runCase(
      dirs,
      plan(
        { id: 'z', tool: 'echo', depends_on: ['c'] },
        { id: 'a', tool: 'echo' },
        { id: 'b', tool: 'echo', depends_on: ['a'], if: "$a.status == 'failed'" },
        { id: 'c', tool: 'echo', depends_on: ['b'], if: "$b.status == 'success'" },
        { id: 'w', tool: 'echo', depends_on: ['b'] },
      ),
    );
    expect(rows(run.report)).toEqual(['a:success:ok', 'b:skipped', 'c:skipped', 'w:success:ok', 'z:success:ok']);
    expect(run.trace.planTypes()).toEqual([
      'plan_start',
      'plan_step_start', 'plan_step',
      'plan_step', 'plan_step', 'plan_step_start', 'plan_step',
      'plan_step_start', 'plan_step',
      'plan_end',
    ]);
    expect(run.trace.started()).toEqual(['a', 'w', 'z']);
  });

  it('evaluates a condition once all its dependencies settled, against results recorded earlier in the same scan', async () => {
    const run = await runCase(
      dirs,
      plan(
        { id: 'a', tool: 'echo' },
        { id: 'b', tool: 'echo', depends_on: ['a'], if: "$a.status == 'failed'" },
        { id: 'c', tool: 'echo', depends_on: ['a'], if: "$b.status == 'skipped'" },
      ),
    );
    expect(rows(run.report)).toEqual(['a:success:ok', 'b:skipped', 'c:success:ok']);
  });

  it('fails a condition that references a step settling later in the same scan as not ready', async () => {
    const run = await runCase(
      dirs,
      plan(
        { id: 'a', tool: 'echo' },
        { id: 'c', tool: 'echo', depends_on: ['a'], if: "$b.status == 'skipped'" },
        { id: 'b', tool: 'echo', depends_on: ['a'], if: "$a.status == 'failed'" },
      ),
    );
    expect(facts(run.report)).toEqual({
      rows: ['a:success:ok', "c:failed:reference '$b.status' is not ready"],
      completed: false,
      failed_step: 'c',
      canceled: false,
    });
  });
});

// ---------------------------------------------------------------------------------------------
// F. Retries and on_error
// ---------------------------------------------------------------------------------------------

describe('F. retries and on_error', () => {
  it('49: retries, then continues past the failure; dependants run', async () => {
    const stubs = new StubTools().on('a', () => failed());
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a', retries: 2, on_error: 'continue' }, { id: 'b', tool: 'b', depends_on: ['a'] }), { stubs });
    expect(facts(run.report)).toEqual({ rows: ['a:failed:tool step failed', 'b:success:ok'], completed: true, failed_step: null, canceled: false });
    expect(stubs.count()).toBe(4);
    expect(run.report.results[0]?.attempts).toBe(3);
    expect(run.trace.step('a')).toMatchObject({ status: 'failed', attempts: 3, error: 'tool step failed' });
    expect(run.trace.started()).toEqual(['a', 'b']);
  });

  it('50: a fail policy stops the run; the dependant never runs', async () => {
    const stubs = new StubTools().on('fail', () => failed({ summary: 'nope' }));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'fail', on_error: 'fail' }, { id: 'b', tool: 'echo', depends_on: ['a'] }), { stubs });
    expect(facts(run.report)).toEqual({ rows: ['a:failed:nope'], completed: false, failed_step: 'a', canceled: false });
    expect(stubs.count('echo')).toBe(0);
    const end = run.trace.end();
    expect(end).toMatchObject({ outcome: 'failed', failed_step: 'a', steps_total: 2, steps_succeeded: 0, steps_failed: 1, steps_skipped: 0 });
    expect(end).not.toHaveProperty('reason');
  });

  it('52a: a fail stop discards later siblings of the same wave, though they ran', async () => {
    const stubs = new StubTools().on('fail', () => failed({ summary: 'boom' }));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'fail' }, { id: 'b', tool: 'echo' }), { stubs });
    expect(facts(run.report)).toEqual({ rows: ['a:failed:boom'], completed: false, failed_step: 'a', canceled: false });
    expect(stubs.count('echo')).toBe(1);
    expect(run.trace.started()).toEqual(['a', 'b']);
    expect(run.trace.settled()).toEqual(['a']);
    expect(run.trace.end()).toMatchObject({ steps_succeeded: 0, steps_failed: 1, steps_skipped: 0 });
  });

  it('52b: keeps siblings declared before the failing step', async () => {
    const stubs = new StubTools().on('fail', () => failed({ summary: 'boom' }));
    const run = await runCase(dirs, plan({ id: 'b', tool: 'echo' }, { id: 'a', tool: 'fail' }), { stubs });
    expect(facts(run.report)).toEqual({ rows: ['b:success:ok', 'a:failed:boom'], completed: false, failed_step: 'a', canceled: false });
  });

  it('53: retries a gate refusal and never invokes the tool', async () => {
    const gate = new RecordingGate((request) => (request.kind === 'tool' && request.name === 'a' ? 'read-only session' : null));
    const run = await runCase(dirs, plan({ id: 's', tool: 'a', retries: 2 }), { gate: gate.gate });
    expect(facts(run.report)).toEqual({ rows: ['s:failed:read-only session'], completed: false, failed_step: 's', canceled: false });
    expect(gate.requests).toHaveLength(3);
    expect(run.stubs.count()).toBe(0);
    const step = run.trace.step('s');
    expect(step).toMatchObject({ attempts: 3, error: 'read-only session' });
    expect(step).not.toHaveProperty('input');
  });

  it('records a step skip-policy failure as skipped with its error kept and no output', async () => {
    const stubs = new StubTools().on('fail', () => failed({ summary: 'broken', data: 'partial' }));
    const run = await runCase(
      dirs,
      plan({ id: 'a', tool: 'fail', on_error: 'skip' }, { id: 'b', tool: 'ok', depends_on: ['a'], input: '$a.status' }, { id: 'c', tool: 'echo', depends_on: ['a'], input: '$a.output', on_error: 'continue' }),
      { stubs },
    );
    expect(run.report.results[0]).toMatchObject({ step_id: 'a', status: 'skipped', output: null, error: 'broken', attempts: 1 });
    expect(facts(run.report)).toEqual({
      rows: ['a:skipped:broken', 'b:success:ok', "c:failed:reference '$a.output' has no output"],
      completed: true,
      failed_step: null,
      canceled: false,
    });
    expect(stubs.inputs('ok')).toEqual(['"skipped"']);
    expect(run.trace.step('a')).toMatchObject({ status: 'skipped', error: 'broken', attempts: 1 });
    expect(run.trace.end()).toMatchObject({ outcome: 'completed', steps_succeeded: 1, steps_failed: 1, steps_skipped: 1 });
  });

  it('lets a dependant of a continued failure see status failed', async () => {
    const stubs = new StubTools().on('fail', () => failed({ data: 'only data' }));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'fail', on_error: 'continue' }, { id: 'b', tool: 'ok', depends_on: ['a'], input: { s: '$a.status' } }), { stubs });
    expect(rows(run.report)).toEqual(['a:failed:only data', 'b:success:ok']);
    expect(stubs.inputs('ok')).toEqual(['{"s":"failed"}']);
  });

  it('stops retrying at the first success; the trace counts the attempts', async () => {
    const stubs = new StubTools().on('flaky', ({ call }) => (call < 3 ? failed({ summary: `try ${call}` }) : passed('third')));
    const run = await runCase(dirs, plan({ id: 'f', tool: 'flaky', retries: 5 }), { stubs });
    expect(facts(run.report)).toEqual({ rows: ['f:success:third'], completed: true, failed_step: null, canceled: false });
    expect(stubs.count('flaky')).toBe(3);
    expect(run.trace.started()).toEqual(['f']);
    expect(run.trace.step('f')).toMatchObject({ status: 'success', attempts: 3 });
    expect(run.trace.step('f')).not.toHaveProperty('error');
  });

  it('keeps the last error when every attempt fails', async () => {
    const stubs = new StubTools().on('flaky', ({ call }) => failed({ summary: `try ${call}` }));
    const run = await runCase(dirs, plan({ id: 'f', tool: 'flaky', retries: 2 }), { stubs });
    expect(rows(run.report)).toEqual(['f:failed:try 3']);
  });

  it('accepts the largest retries value (4294967295) and stops at the first success', async () => {
    const stubs = new StubTools().on('flaky', ({ call }) => (call < 4 ? failed() : passed('done')));
    const run = await runCase(dirs, plan({ id: 'f', tool: 'flaky', retries: 4294967295 }), { stubs });
    expect(facts(run.report)).toEqual({ rows: ['f:success:done'], completed: true, failed_step: null, canceled: false });
    expect(run.report.results[0]?.attempts).toBe(4);
  });

  it('retries an invoke error (a throwing tool) and reports its message', async () => {
    const stubs = new StubTools().on('flaky', ({ call }) => {
      throw new Error(`host error ${call}`);
    });
    const run = await runCase(dirs, plan({ id: 'f', tool: 'flaky', retries: 1 }), { stubs });
    expect(rows(run.report)).toEqual(['f:failed:host error 2']);
    expect(stubs.count('flaky')).toBe(2);
  });

  it('retries a non-zero shell exit, starting a new process each attempt', async () => {
    const workdir = dirs.make('retry-shell');
    const run = await runCase(dirs, plan({ id: 's', shell: "bash -c 'echo x >> attempts.txt; exit 4'", retries: 2 }), { workdir });
    expect(rows(run.report)).toEqual(['s:failed:exit code 4']);
    expect(readFileSync(join(workdir, 'attempts.txt'), 'utf8')).toBe('x\nx\nx\n');
    expect(run.trace.step('s')).toMatchObject({ attempts: 3 });
  });

  it('bounds each attempt by timeout_secs and retries a timed-out attempt', async () => {
    const stubs = new StubTools().on('slow', ({ ctx, call }) =>
      call === 1
        ? new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve(passed('too late')), { once: true }))
        : passed('second'),
    );
    const run = await runCase(dirs, plan({ id: 's', tool: 'slow', timeout_secs: 0.2, retries: 1 }), { stubs });
    expect(facts(run.report)).toEqual({ rows: ['s:success:second'], completed: true, failed_step: null, canceled: false });
    expect(run.report.results[0]?.attempts).toBe(2);
  });

  it('fails a step whose every attempt times out with an error naming the bound and the tool', async () => {
    const signals: AbortSignal[] = [];
    const stubs = new StubTools().on('slow', ({ ctx }) => {
      signals.push(ctx.signal);
      return new Promise(() => {}); // never answers; the abort must end the attempt
    });
    const run = await runCase(dirs, plan({ id: 's', tool: 'slow', timeout_secs: 0.1, retries: 1 }), { stubs });
    expect(run.report.results[0]).toMatchObject({ step_id: 's', status: 'failed', attempts: 2 });
    expect(run.report.results[0]?.error).toContain('timeout_secs');
    expect(run.report.results[0]?.error).toContain("'slow'");
    expect(signals.map((s) => s.aborted)).toEqual([true, true]);
    expect(run.report.failed_step).toBe('s');
  });

  it('ends an attempt whose gate is still deciding when timeout_secs elapses, and starts nothing for it', async () => {
    const workdir = dirs.make('timeout-gate');
    let asked = 0;
    const firstAnswered = deferred();
    const run = await runCase(dirs, plan({ id: 's', shell: "bash -c 'echo ran >> marker'", timeout_secs: 0.2, retries: 1 }), {
      workdir,
      gate: async () => {
        asked++;
        if (asked > 1) return null;
        // The first attempt's gate allows, but only long after the bound.
        await new Promise((resolve) => setTimeout(resolve, 600));
        setImmediate(() => firstAnswered.resolve());
        return null;
      },
    });
    expect(facts(run.report)).toEqual({ rows: ['s:success:'], completed: true, failed_step: null, canceled: false });
    expect(run.report.results[0]?.attempts).toBe(2);
    await within(firstAnswered.promise, 10_000, "the first attempt's gate to answer");
    expect(readFileSync(join(workdir, 'marker'), 'utf8')).toBe('ran\n');
    expect(asked).toBe(2);
  });

  it('holds a timeout_secs longer than a timer can hold (2^31 ms) without firing early', async () => {
    const stubs = new StubTools().on('slow', () => new Promise((resolve) => setTimeout(() => resolve(passed('done')), 50)));
    const run = await runCase(dirs, plan({ id: 's', tool: 'slow', timeout_secs: 3_000_000 }), { stubs });
    expect(facts(run.report)).toEqual({ rows: ['s:success:done'], completed: true, failed_step: null, canceled: false });
  });

  it('ends a timed-out shell attempt and its process group, then retries', async () => {
    const sleepArg = uniqueSleepArg();
    const workdir = dirs.make('timeout-shell');
    const started = Date.now();
    const run = await runCase(dirs, plan({ id: 's', shell: `bash -c 'echo x >> attempts.txt; sleep ${sleepArg}'`, timeout_secs: 0.3, retries: 1 }), { workdir, killGraceMs: 200 });
    expect(run.report.results[0]).toMatchObject({ step_id: 's', status: 'failed', attempts: 2 });
    expect(run.report.results[0]?.error).toContain('timed out after 0.3 s');
    expect(readFileSync(join(workdir, 'attempts.txt'), 'utf8')).toBe('x\nx\n');
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(processesWithArg(sleepArg)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// G. Tool results
// ---------------------------------------------------------------------------------------------

describe('G. tool results', () => {
  it('55: reports a success without output as output null', async () => {
    const stubs = new StubTools().on('a', () => passed());
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }), { stubs });
    expect(facts(run.report)).toEqual({ rows: ['a:success'], completed: true, failed_step: null, canceled: false });
    expect(run.report.results[0]).toMatchObject({ output: null, error: null });
  });

  it('keeps an empty data string as the output', async () => {
    const stubs = new StubTools().on('a', () => passed(''));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }), { stubs });
    expect(run.report.results[0]).toMatchObject({ status: 'success', output: '' });
  });

  it('56: reads data_path beneath the workdir', async () => {
    const workdir = dirs.make('data-path');
    mkdirSync(join(workdir, 'out'));
    writeFileSync(join(workdir, 'out', 'result.txt'), 'hello');
    const stubs = new StubTools().on('a', () => ({ status: 'passed', data_path: 'out/result.txt' }));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }), { stubs, workdir });
    expect(facts(run.report)).toEqual({ rows: ['a:success:hello'], completed: true, failed_step: null, canceled: false });
  });

  it('56: refuses a data_path that is a symbolic link, naming the tool and the path', async () => {
    const workdir = dirs.make('data-path-link');
    writeFileSync(join(workdir, 'real.txt'), 'secret');
    symlinkSync(join(workdir, 'real.txt'), join(workdir, 'link.txt'));
    const stubs = new StubTools().on('a', () => ({ status: 'passed', data_path: 'link.txt' }));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }), { stubs, workdir });
    expect(run.report.results[0]).toMatchObject({ step_id: 'a', status: 'failed', output: null });
    expect(run.report.results[0]?.error).toContain("'a'");
    expect(run.report.results[0]?.error).toContain('link.txt');
    expect(run.report.failed_step).toBe('a');
  });

  it.each(['../outside.txt', '/etc/hostname', 'missing.txt'])('refuses the data_path %j, naming the tool and the path', async (dataPath) => {
    const stubs = new StubTools().on('a', () => ({ status: 'passed', data_path: dataPath }));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }), { stubs });
    expect(run.report.results[0]).toMatchObject({ step_id: 'a', status: 'failed', output: null });
    expect(run.report.results[0]?.error).toContain("'a'");
    expect(run.report.results[0]?.error).toContain(dataPath);
  });

  it('56: prefers inline data over data_path', async () => {
    const stubs = new StubTools().on('a', () => ({ status: 'passed', data: 'inline', data_path: 'does/not/exist.txt' }));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }), { stubs });
    expect(rows(run.report)).toEqual(['a:success:inline']);
  });

  it('58: puts the first non-empty metadata into the trace only', async () => {
    const stubs = new StubTools().on('a', () => ({
      status: 'passed',
      data: 'x',
      metadata: [['state_effect', 'read'], ['resource_id', ''], ['state_effect', 'mutate']],
    }));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }), { stubs });
    expect(rows(run.report)).toEqual(['a:success:x']);
    expect(run.report.results[0]).not.toHaveProperty('state_effect');
    const step = run.trace.step('a');
    expect(step['state_effect']).toBe('read');
    expect(step).not.toHaveProperty('resource_id');
  });

  it('records metadata of a failed tool result in the trace too', async () => {
    const stubs = new StubTools().on('a', () => ({ status: 'error', summary: 'bad', metadata: [['resource_id', 'r-1']] }));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }), { stubs });
    expect(rows(run.report)).toEqual(['a:failed:bad']);
    expect(run.trace.step('a')).toMatchObject({ resource_id: 'r-1' });
  });

  it('59: hands a step without input the text null and traces no input', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo' }));
    expect(run.stubs.inputs('echo')).toEqual(['null']);
    expect(run.trace.step('a')).not.toHaveProperty('input');
  });

  it('59: hands a step its input as JSON and traces it', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo', input: { k: 1 } }));
    expect(JSON.parse(run.stubs.inputs('echo')[0] ?? '')).toEqual({ k: 1 });
    expect(run.trace.step('a')['input']).toEqual({ k: 1 });
  });

  it('traces the interpolated input of the last attempt', async () => {
    const stubs = new StubTools().on('a', () => passed('42'));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'echo', depends_on: ['a'], input: ['$a.output', { s: '$a.status' }] }), { stubs });
    expect(run.trace.step('b')['input']).toEqual(['42', { s: 'success' }]);
  });

  it.each([
    [{ status: 'failed', summary: '', data: 'd' }, ''],
    [{ status: 'failed', data: 'd' }, 'd'],
    [{ status: 'error' }, 'tool step failed'],
    [{ status: 'error', summary: 's' }, 's'],
  ] as const)('fails a tool result %j with the error %j', async (result, error) => {
    const stubs = new StubTools().on('a', () => result);
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a', on_error: 'continue' }), { stubs });
    expect(run.report.results[0]).toMatchObject({ status: 'failed', output: null, error });
  });
});

// ---------------------------------------------------------------------------------------------
// H. Shell steps
// ---------------------------------------------------------------------------------------------

describe('H. shell steps', () => {
  it('61: reports a silent non-zero exit as its exit code', async () => {
    const run = await runCase(dirs, plan({ id: 'quiet', shell: "bash -c 'exit 3'" }));
    expect(facts(run.report)).toEqual({ rows: ['quiet:failed:exit code 3'], completed: false, failed_step: 'quiet', canceled: false });
    expect(run.trace.step('quiet')).not.toHaveProperty('input');
    expect(run.trace.step('quiet')).toMatchObject({ kind: 'shell', attempts: 1 });
  });

  it('62: reports stderr as the error, verbatim', async () => {
    const bare = await runCase(dirs, plan({ id: 's', shell: "bash -c 'printf boom >&2; exit 1'" }));
    expect(rows(bare.report)).toEqual(['s:failed:boom']);
    const line = await runCase(dirs, plan({ id: 's', shell: "bash -c 'echo boom >&2; exit 1'" }));
    expect(rows(line.report)).toEqual(['s:failed:boom\n']);
  });

  it('passes stdout through untrimmed and ignores stderr on success; runs in the workdir', async () => {
    const workdir = dirs.make('shell-ok');
    const run = await runCase(dirs, plan({ id: 's', shell: "bash -c 'pwd; echo warn >&2'" }), { workdir });
    expect(rows(run.report)).toEqual([`s:success:${workdir}\n`]);
  });

  it('passes $a.output inside a shell command to the program literally', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo' }, { id: 's', shell: "printf %s $a.output", depends_on: ['a'] }));
    expect(rows(run.report)).toEqual(['a:success:ok', 's:success:$a.output']);
  });

  it('fails a shell attempt whose input does not interpolate, before starting anything', async () => {
    const gate = new RecordingGate();
    const run = await runCase(dirs, plan({ id: 's', shell: 'bash -c true', input: '$nothing' }), { gate: gate.gate });
    expect(rows(run.report)).toEqual(["s:failed:invalid reference '$nothing'"]);
    expect(gate.requests).toEqual([]);
    expect(run.trace.one('session_end')).toMatchObject({ total_shell_calls: 0 });
  });

  it.each<[string, string, string[]]>([
    ["bash -c 'exit 3'", 'bash', ['-c', 'exit 3']],
    ["printf '%s|%s' 'a b' c", 'printf', ['%s|%s', 'a b', 'c']],
    ['printf "it\'s"', 'printf', ["it's"]],
    ["printf 'x\\ny'", 'printf', ['xny']],
    ['printf a\\ b', 'printf', ['a b']],
    ["printf ''", 'printf', []],
    ["printf a''b", 'printf', ['ab']],
    ['printf "open', 'printf', ['open']],
    ['printf $a.output > f', 'printf', ['$a.output', '>', 'f']],
  ])('64: shows the gate the words of %j (binary %s, argv %j)', async (command, binary, argv) => {
    expect(splitShellWords(command)).toEqual([binary, ...argv]);
    const gate = new RecordingGate(() => 'inspect only');
    const run = await runCase(dirs, plan({ id: 's', shell: command }), { gate: gate.gate });
    expect(gate.requests).toEqual([{ kind: 'shell', binary, command, argv }]);
    expect(rows(run.report)).toEqual(['s:failed:inspect only']);
  });

  it('65: a gate refusal fails a shell step, starts no process and shows the gate what would run', async () => {
    const workdir = dirs.make('gate-shell');
    const gate = new RecordingGate((request) => (request.kind === 'shell' ? 'refused by the manifest' : null));
    const command = "bash -c 'printf x > marker'";
    const run = await runCase(dirs, plan({ id: 'w', shell: command }), { gate: gate.gate, workdir });
    expect(facts(run.report)).toEqual({ rows: ['w:failed:refused by the manifest'], completed: false, failed_step: 'w', canceled: false });
    expect(existsSync(join(workdir, 'marker'))).toBe(false);
    expect(gate.requests).toEqual<GateRequest[]>([{ kind: 'shell', binary: 'bash', argv: ['-c', 'printf x > marker'], command }]);
    expect(run.trace.one('session_end')).toMatchObject({ total_shell_calls: 0 });
    expect(run.trace.step('w')).not.toHaveProperty('input');
  });

  it('asks the gate before every attempt of a shell step and records each request', async () => {
    const gate = new RecordingGate(() => 'no');
    const run = await runCase(dirs, plan({ id: 'w', shell: 'printf hi', retries: 2 }), { gate: gate.gate });
    expect(rows(run.report)).toEqual(['w:failed:no']);
    expect(gate.requests).toHaveLength(3);
    expect(run.report.results[0]?.attempts).toBe(3);
  });

  it('reports a process killed by a signal as exit code 128 + the signal number', async () => {
    const run = await runCase(dirs, plan({ id: 's', shell: "bash -c 'kill -KILL $$'" }));
    expect(rows(run.report)).toEqual(['s:failed:exit code 137']);
  });

  it.each([
    ['XCPU', 'cpu_secs', 152],
    ['XFSZ', 'file_size_max_bytes', 153],
  ])('attributes a process killed by SIG%s to capabilities.resources.%s, naming the resolved binary', async (signal, limit, code) => {
    const run = await runCase(dirs, plan({ id: 's', shell: `bash -c 'ulimit -c 0; kill -${signal} $$'` }));
    const error = run.report.results[0]?.error ?? '';
    expect(run.report.results[0]?.status).toBe('failed');
    expect(error).toMatch(new RegExp(`^shell subprocess '/[^']*bash' was killed for exceeding capabilities\\.resources\\.${limit}: exit code ${code}$`));
  });

  it('cuts stdout over 16 KiB and writes the full output to a shell log in the records directory', async () => {
    const run = await runCase(dirs, plan({ id: 's', shell: "bash -c 'head -c 20000 /dev/zero | tr -c x a'" }));
    const output = run.report.results[0]?.output ?? '';
    expect(run.report.results[0]?.status).toBe('success');
    expect(output.length).toBe(16384);
    expect(/^a+$/.test(output)).toBe(true);
    const logs = readdirSync(join(run.report.records_dir, 'logs')).filter((name) => /^shell-\d+(-\d+)?\.log$/.test(name));
    expect(logs).toHaveLength(1);
    expect(readFileSync(join(run.report.records_dir, 'logs', logs[0] ?? ''), 'utf8').includes('a'.repeat(20000))).toBe(true);
  });

  // Not Murmur's `<records>/home` (docs/shell-commands.md#environment): HOME and TMPDIR are out
  // of the records' tree, so a step cannot plant files next to the records.
  it('gives a shell step HOME and TMPDIR in a scratch directory beside the records directory, and the runtime directory', async () => {
    const run = await runCase(dirs, plan({ id: 's', shell: `bash -c 'printf "%s|%s|%s" "$HOME" "$TMPDIR" "$MURMUR_RUNTIME_DIR"'` }));
    const [home, tmp, runtime] = (run.report.results[0]?.output ?? '').split('|');
    const scratch = join(dirname(run.report.records_dir), `.${basename(run.report.records_dir)}.scratch`);
    expect(home).toBe(join(scratch, 'home'));
    expect(tmp).toBe(join(scratch, 'tmp'));
    expect(home?.startsWith(`${run.report.records_dir}/`)).toBe(false);
    expect(runtime).toBe(run.workdir);
  });

  it('reports a binary that cannot be found as the executor error', async () => {
    const run = await runCase(dirs, plan({ id: 's', shell: 'nosuchbinary-xyz --flag' }), { shellAllow: ['nosuchbinary-xyz'] });
    expect(run.report.results[0]).toMatchObject({ step_id: 's', status: 'failed' });
    expect(run.report.results[0]?.error).toContain('nosuchbinary-xyz');
  });
});

// ---------------------------------------------------------------------------------------------
// I. Gate for tool steps
// ---------------------------------------------------------------------------------------------

describe('I. gate for tool steps', () => {
  it('shows the gate the tool name and the interpolated input JSON, then invokes the tool', async () => {
    const gate = new RecordingGate();
    const stubs = new StubTools().on('a', () => passed('42'));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'echo', depends_on: ['a'], input: { n: '$a.output' } }), { stubs, gate: gate.gate });
    expect(run.report.completed).toBe(true);
    expect(gate.requests).toEqual([
      { kind: 'tool', name: 'a', input_json: 'null' },
      { kind: 'tool', name: 'echo', input_json: '{"n":"42"}' },
    ]);
    expect(stubs.inputs('echo')).toEqual(['{"n":"42"}']);
  });

  it('fails a refused tool step with the reason, invokes nothing, and still traces the input', async () => {
    const gate = new RecordingGate(() => 'commit_policy: deny');
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo', input: { path: 'x' }, on_error: 'continue' }, { id: 'b', tool: 'ok', depends_on: ['a'] }), { gate: gate.gate });
    expect(rows(run.report)).toEqual(['a:failed:commit_policy: deny', 'b:failed:commit_policy: deny']);
    expect(run.stubs.count()).toBe(0);
    expect(run.trace.step('a')['input']).toEqual({ path: 'x' });
  });

  it('accepts an asynchronous gate', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo' }), {
      gate: async (request) => (request.kind === 'tool' ? null : 'no'),
    });
    expect(rows(run.report)).toEqual(['a:success:ok']);
  });

  it('fails the attempt with the message of a gate that throws', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo' }), {
      gate: () => {
        throw new Error('gate broke');
      },
    });
    expect(rows(run.report)).toEqual(['a:failed:gate broke']);
    expect(run.stubs.count()).toBe(0);
  });

  it('never asks the gate about a capsule step', async () => {
    const gate = new RecordingGate();
    const run = await runCase(dirs, plan({ id: 'w', capsule: 'worker', input: 'task' }), { gate: gate.gate });
    expect(gate.requests).toEqual([]);
    expect(run.report.results[0]?.status).toBe('failed');
  });
});

// ---------------------------------------------------------------------------------------------
// J. Cancellation
// ---------------------------------------------------------------------------------------------

describe('J. cancellation', () => {
  it('67: a run canceled before the first wave dispatches nothing and skips every step', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'b' }), { signal: AbortSignal.abort() });
    expect(facts(run.report)).toEqual({
      rows: [`a:skipped:${CANCEL_BEFORE_STEP}`, `b:skipped:${CANCEL_BEFORE_STEP}`],
      completed: false,
      failed_step: null,
      canceled: true,
    });
    expect(CANCEL_BEFORE_STEP).toContain('cancelled');
    expect(CANCEL_BEFORE_STEP).toContain('before this step ran');
    expect(run.stubs.count()).toBe(0);
    expect(run.trace.started()).toEqual([]);
    for (const id of ['a', 'b']) expect(run.trace.step(id)).toMatchObject({ status: 'skipped', attempts: 0, duration_ms: 0, error: CANCEL_BEFORE_STEP });
    expect(run.trace.end()).toMatchObject({ outcome: 'canceled', reason: PLAN_CANCELED_REASON, steps_skipped: 2, steps_succeeded: 0, steps_failed: 0 });
    expect(run.trace.end()).not.toHaveProperty('failed_step');
    expect(PLAN_CANCELED_REASON).toContain('cancelled');
  });

  it('67: a cancel() before the run gets going has the same effect as an aborted signal', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'b' }), { onStart: (r) => r.cancel() });
    expect(facts(run.report)).toMatchObject({ completed: false, failed_step: null, canceled: true });
    expect(rows(run.report)).toEqual([`a:skipped:${CANCEL_BEFORE_STEP}`, `b:skipped:${CANCEL_BEFORE_STEP}`]);
    expect(run.stubs.count()).toBe(0);
  });

  it('68: a canceled task retries nothing, applies no policy and names no failed step', async () => {
    let door: PlanRun | undefined;
    const stubs = new StubTools().on('a', () => {
      door?.cancel();
      return failed();
    });
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a', retries: 2, on_error: 'fail' }, { id: 'b', tool: 'b', depends_on: ['a'] }), {
      stubs,
      onStart: (r) => {
        door = r;
      },
    });
    expect(facts(run.report)).toEqual({
      rows: ['a:failed:tool step failed', `b:skipped:${CANCEL_BEFORE_STEP}`],
      completed: false,
      failed_step: null,
      canceled: true,
    });
    expect(stubs.count()).toBe(1);
    expect(run.trace.step('a')).toMatchObject({ status: 'failed', attempts: 1 });
    expect(run.trace.step('b')).toMatchObject({ status: 'skipped', attempts: 0 });
    expect(run.trace.end()).toMatchObject({ outcome: 'canceled', steps_failed: 1, steps_skipped: 1 });
  });

  it('a cancel during a wave keeps a skip-policy failure as failed and does not stop the run on it', async () => {
    let door: PlanRun | undefined;
    const stubs = new StubTools().on('a', () => {
      door?.cancel();
      return failed({ summary: 'x' });
    });
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a', on_error: 'skip' }, { id: 'b', tool: 'b' }, { id: 'c', tool: 'echo', depends_on: ['a'] }), {
      stubs,
      onStart: (r) => {
        door = r;
      },
    });
    expect(facts(run.report)).toEqual({
      rows: ['a:failed:x', 'b:success:ok', `c:skipped:${CANCEL_BEFORE_STEP}`],
      completed: false,
      failed_step: null,
      canceled: true,
    });
  });

  it('70: a cancel seen after the last wave still cancels the run', async () => {
    let door: PlanRun | undefined;
    const stubs = new StubTools().on('b', () => {
      door?.cancel();
      return passed('ok');
    });
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'b', depends_on: ['a'] }), {
      stubs,
      onStart: (r) => {
        door = r;
      },
    });
    expect(facts(run.report)).toEqual({ rows: ['a:success:ok', 'b:success:ok'], completed: false, failed_step: null, canceled: true });
    expect(run.trace.end()).toMatchObject({ outcome: 'canceled', steps_succeeded: 2, reason: PLAN_CANCELED_REASON });
  });

  it('71: a task nobody cancels changes nothing in the report', async () => {
    const body = plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'b' });
    const controller = new AbortController();
    const withTask = await runCase(dirs, body, { signal: controller.signal });
    const without = await runCase(dirs, body);
    const strip = (report: typeof withTask.report) => ({
      ...facts(report),
      results: report.results.map(({ duration_ms: _d, ...rest }) => rest),
    });
    expect(strip(withTask.report)).toEqual(strip(without.report));
    expect(facts(without.report)).toEqual({ rows: ['a:success:ok', 'b:success:ok'], completed: true, failed_step: null, canceled: false });
  });

  it('lets a running shell step finish on its own after a graceful cancel, then skips the rest', async () => {
    const workdir = dirs.make('graceful-shell');
    const gate = new RecordingGate();
    let door: PlanRun | undefined;
    const run = await runCase(
      dirs,
      plan({ id: 's', shell: "bash -c 'while [ ! -e go ]; do sleep 0.02; done; printf done'" }, { id: 't', tool: 'echo', depends_on: ['s'] }),
      {
        workdir,
        gate: gate.gate,
        onStart: (r) => {
          door = r;
        },
        onEvent: (event) => {
          if (event.type === 'step.started' && event.stepId === 's') {
            // Cancel while the process runs, then let it finish on its own.
            setTimeout(() => {
              door?.cancel();
              writeFileSync(join(workdir, 'go'), '');
            }, 50);
          }
        },
      },
    );
    expect(facts(run.report)).toEqual({ rows: ['s:success:done', `t:skipped:${CANCEL_BEFORE_STEP}`], completed: false, failed_step: null, canceled: true });
  });

  it('a forced cancel ends a running sleep group and the step fails with the forced-cancel error', async () => {
    const sleepArg = uniqueSleepArg();
    let door: PlanRun | undefined;
    const cancelSent = pollUntil(() => processesWithArg(sleepArg).length > 0, 10_000, `sleep ${sleepArg} to start`).then(() => door?.cancel({ force: true }));
    const started = Date.now();
    const run = await runCase(dirs, plan({ id: 's', shell: `bash -c 'sleep ${sleepArg}'` }, { id: 't', tool: 'echo', depends_on: ['s'] }), {
      killGraceMs: 500,
      onStart: (r) => {
        door = r;
      },
    });
    await cancelSent;
    expect(facts(run.report)).toEqual({
      rows: [`s:failed:${CANCEL_FORCED_STEP}`, `t:skipped:${CANCEL_BEFORE_STEP}`],
      completed: false,
      failed_step: null,
      canceled: true,
    });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(processesWithArg(sleepArg)).toEqual([]);
    expect(run.trace.end()).toMatchObject({ outcome: 'canceled' });
  });

  it('a forced cancel while the gate is deciding starts nothing, even when the gate then allows', async () => {
    const workdir = dirs.make('forced-gate');
    let door: PlanRun | undefined;
    const gateAsked = deferred();
    const gateAnswer = deferred<null>();
    const pending = runCase(dirs, plan({ id: 's', shell: "bash -c 'echo ran > marker'" }, { id: 't', tool: 'echo', depends_on: ['s'] }), {
      workdir,
      gate: () => {
        gateAsked.resolve();
        return gateAnswer.promise;
      },
      onStart: (r) => {
        door = r;
      },
    });
    await within(gateAsked.promise, 10_000, 'the gate to be asked');
    door?.cancel({ force: true });
    const run = await within(pending, 10_000, 'the forced-canceled run to end');
    gateAnswer.resolve(null);
    await new Promise((resolve) => setImmediate(resolve));
    expect(facts(run.report)).toEqual({
      rows: [`s:failed:${CANCEL_FORCED_STEP}`, `t:skipped:${CANCEL_BEFORE_STEP}`],
      completed: false,
      failed_step: null,
      canceled: true,
    });
    expect(existsSync(join(workdir, 'marker'))).toBe(false);
    expect(run.trace.one('session_end')).toMatchObject({ total_shell_calls: 0 });
  });

  it('keeps a result that arrives after a graceful cancel and skips a conditional dependant without evaluating it', async () => {
    let door: PlanRun | undefined;
    const stubs = new StubTools().on('slow', async () => {
      door?.cancel();
      await new Promise((resolve) => setTimeout(resolve, 20));
      return passed('late');
    });
    const run = await runCase(dirs, plan({ id: 'S1', tool: 'slow' }, { id: 'S2', tool: 'echo', depends_on: ['S1'], if: "$S1.status != 'succeeded'" }), {
      stubs,
      onStart: (r) => {
        door = r;
      },
    });
    expect(facts(run.report)).toEqual({ rows: ['S1:success:late', `S2:skipped:${CANCEL_BEFORE_STEP}`], completed: false, failed_step: null, canceled: true });
    expect(stubs.count('echo')).toBe(0);
  });

  describe.each([
    ['graceful', false],
    ['forced', true],
  ] as const)('a %s cancel', (_mode, force) => {
    it(`${force ? 'ends' : 'lets finish'} a running tool step, then skips its dependant`, async () => {
      let door: PlanRun | undefined;
      const inTool = deferred();
      const stubs = new StubTools().on('slow', ({ ctx }) => {
        inTool.resolve();
        return new Promise((resolve) => {
          const release = (): void => resolve(passed('done'));
          ctx.signal.addEventListener('abort', release, { once: true });
          void answer.promise.then(release);
        });
      });
      const answer = deferred();
      const pending = runCase(dirs, plan({ id: 's', tool: 'slow' }, { id: 't', tool: 'echo', depends_on: ['s'] }), {
        stubs,
        onStart: (r) => {
          door = r;
        },
      });
      await within(inTool.promise, 10_000, 'the tool to be invoked');
      door?.cancel({ force });
      answer.resolve();
      const run = await within(pending, 10_000, 'the canceled run to end');
      expect(facts(run.report)).toEqual({
        rows: [force ? `s:failed:${CANCEL_FORCED_STEP}` : 's:success:done', `t:skipped:${CANCEL_BEFORE_STEP}`],
        completed: false,
        failed_step: null,
        canceled: true,
      });
      expect(stubs.count('echo')).toBe(0);
    });

    it(`${force ? 'ends' : 'lets finish'} a running shell step, then skips its dependant`, async () => {
      const workdir = dirs.make('cancel-shell');
      const marker = `wait-${uniqueSleepArg()}`;
      let door: PlanRun | undefined;
      const running = pollUntil(() => processesWithArg(marker).length > 0, 10_000, 'the shell step to run').then(() => {
        door?.cancel({ force });
        writeFileSync(join(workdir, 'go'), '');
      });
      const run = await runCase(
        dirs,
        plan({ id: 's', shell: `bash -c 'while [ ! -e go ]; do sleep 0.02; done; printf done' ${marker}` }, { id: 't', tool: 'echo', depends_on: ['s'] }),
        {
          workdir,
          killGraceMs: 500,
          onStart: (r) => {
            door = r;
          },
        },
      );
      await running;
      expect(facts(run.report)).toEqual({
        rows: [force ? `s:failed:${CANCEL_FORCED_STEP}` : 's:success:done', `t:skipped:${CANCEL_BEFORE_STEP}`],
        completed: false,
        failed_step: null,
        canceled: true,
      });
      expect(processesWithArg(marker)).toEqual([]);
    });

    it('keeps the result of a step that finished before the cancel while its wave still ran', async () => {
      let door: PlanRun | undefined;
      const fastDone = deferred();
      const release = deferred();
      const stubs = new StubTools()
        .on('a', () => {
          setImmediate(() => fastDone.resolve());
          return passed('fast');
        })
        .on('slow', ({ ctx }) =>
          new Promise((resolve) => {
            ctx.signal.addEventListener('abort', () => resolve(passed('aborted')), { once: true });
            void release.promise.then(() => resolve(passed('slow')));
          }),
        );
      const pending = runCase(dirs, plan({ id: 'f', tool: 'a' }, { id: 'w', tool: 'slow' }, { id: 't', tool: 'echo', depends_on: ['f'] }), {
        stubs,
        onStart: (r) => {
          door = r;
        },
      });
      await within(fastDone.promise, 10_000, 'the fast step to finish');
      door?.cancel({ force });
      release.resolve();
      const run = await within(pending, 10_000, 'the canceled run to end');
      expect(facts(run.report)).toEqual({
        rows: ['f:success:fast', force ? `w:failed:${CANCEL_FORCED_STEP}` : 'w:success:slow', `t:skipped:${CANCEL_BEFORE_STEP}`],
        completed: false,
        failed_step: null,
        canceled: true,
      });
    });
  });

  it('a forced cancel after a graceful one ends the step the graceful cancel let run', async () => {
    const sleepArg = uniqueSleepArg();
    let door: PlanRun | undefined;
    const running = pollUntil(() => processesWithArg(sleepArg).length > 0, 10_000, `sleep ${sleepArg} to start`).then(async () => {
      door?.cancel();
      // The graceful cancel leaves the process running…
      await new Promise((resolve) => setTimeout(resolve, 100));
      const stillRunning = processesWithArg(sleepArg).length > 0;
      door?.cancel({ force: true });
      return stillRunning;
    });
    const run = await runCase(dirs, plan({ id: 's', shell: `bash -c 'sleep ${sleepArg}'` }), {
      killGraceMs: 500,
      onStart: (r) => {
        door = r;
      },
    });
    expect(await running).toBe(true);
    expect(facts(run.report)).toEqual({ rows: [`s:failed:${CANCEL_FORCED_STEP}`], completed: false, failed_step: null, canceled: true });
    expect(processesWithArg(sleepArg)).toEqual([]);
  });

  it('a forced cancel aborts a running in-process tool and skips the rest', async () => {
    let door: PlanRun | undefined;
    let toolSignal: AbortSignal | undefined;
    const stubs = new StubTools().on('slow', ({ ctx }) => {
      toolSignal = ctx.signal;
      setImmediate(() => door?.cancel({ force: true }));
      return new Promise(() => {}); // never answers on its own
    });
    const run = await runCase(dirs, plan({ id: 's', tool: 'slow', retries: 3 }, { id: 't', tool: 'echo', depends_on: ['s'] }), {
      stubs,
      onStart: (r) => {
        door = r;
      },
    });
    expect(facts(run.report)).toEqual({
      rows: [`s:failed:${CANCEL_FORCED_STEP}`, `t:skipped:${CANCEL_BEFORE_STEP}`],
      completed: false,
      failed_step: null,
      canceled: true,
    });
    expect(toolSignal?.aborted).toBe(true);
    expect(stubs.count('slow')).toBe(1);
  });

  it('forgets the abort signal once the run has ended: aborting it later reports nothing more', async () => {
    const controller = new AbortController();
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }), { signal: controller.signal });
    const eventsAtEnd = run.events.length;
    controller.abort();
    expect(run.events.slice(eventsAtEnd)).toEqual([]);
    expect(run.events.at(-1)?.type).toBe('plan.ended');
  });

  it('a cancel arriving after the run ended changes nothing', async () => {
    let door: PlanRun | undefined;
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }), {
      onStart: (r) => {
        door = r;
      },
    });
    door?.cancel({ force: true });
    expect(facts(run.report)).toEqual({ rows: ['a:success:ok'], completed: true, failed_step: null, canceled: false });
  });
});

// ---------------------------------------------------------------------------------------------
// K. Capsule steps refused by the local delegation plane (the delegating cases: test/delegation/)
// ---------------------------------------------------------------------------------------------

describe('K. capsule steps the session may not delegate', () => {
  it.each([['Echo this task'], [{ objective: 'Echo this task' }]])('fails a capsule step with valid input %j, naming capabilities.spawn.allow (refused, nothing started)', async (input) => {
    const run = await runCase(dirs, plan({ id: 'w', capsule: 'worker', input }));
    expect(run.report.results).toHaveLength(1);
    expect(run.report.results[0]).toMatchObject({ step_id: 'w', status: 'failed', output: null, attempts: 1 });
    for (const term of CAPSULE_NOT_ALLOWED) expect(run.report.results[0]?.error).toContain(term);
    expect(facts(run.report)).toMatchObject({ completed: false, failed_step: 'w', canceled: false });
    expect(run.trace.started()).toEqual(['w']);
    expect(run.trace.step('w')).toMatchObject({ kind: 'capsule', status: 'failed', attempts: 1 });
    expect(run.trace.step('w')).not.toHaveProperty('input');
    expect(run.trace.ofType('delegation_start')).toEqual([]);
    expect(run.trace.ofType('delegation')).toMatchObject([{ capsule: 'worker', version: '0.1.0', delegation_id: null, child_session_id: null, outcome: 'refused' }]);
    expect(run.trace.ofType('process_start')).toEqual([]);
  });

  it('makes a new attempt per retry', async () => {
    const run = await runCase(dirs, plan({ id: 'w', capsule: 'worker', input: 'x', retries: 1, on_error: 'continue' }));
    expect(run.report.results[0]).toMatchObject({ status: 'failed', attempts: 2 });
    expect(run.report.completed).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// L. Trace shape
// ---------------------------------------------------------------------------------------------

describe('L. trace shape', () => {
  it('79: plan_start describes the DAG as authored, before validation refuses it', async () => {
    const run = await runCase(
      dirs,
      plan(
        { id: 't', tool: 'echo' },
        { id: 's', shell: 'bash -c true', depends_on: ['t'], if: "$t.status == 'success'" },
        { id: 'c', capsule: 'worker', input: 'x' },
        { id: 'u' },
      ),
    );
    const start = run.trace.one('plan_start');
    expect(start).toMatchObject({
      plan_id: 'p',
      step_count: 4,
      steps: [
        { step_id: 't', kind: 'tool', depends_on: [], has_condition: false },
        { step_id: 's', kind: 'shell', depends_on: ['t'], has_condition: true },
        { step_id: 'c', kind: 'capsule', depends_on: [], has_condition: false },
        { step_id: 'u', kind: 'unknown', depends_on: [], has_condition: false },
      ],
    });
    expect(run.trace.end()).toMatchObject({ outcome: 'failed', failed_step: 'u' });
    expect(run.trace.planTypes()).toEqual(['plan_start', 'plan_end']);
  });

  it('80: every record opens with the five envelope keys; plan records hang off plan_start', async () => {
    const stubs = new StubTools().on('fail', () => failed({ summary: 'no' }));
    const run = await runCase(
      dirs,
      plan({ id: 'a', tool: 'echo' }, { id: 'b', tool: 'fail', depends_on: ['a'], on_error: 'continue' }, { id: 'c', tool: 'echo', depends_on: ['b'], if: "$b.status == 'success'" }),
      { stubs },
    );
    const records = run.trace.records;
    expect(records.length).toBeGreaterThan(4);
    const start = run.trace.one('plan_start');
    for (const record of records) {
      expect(Object.keys(record).slice(0, 5)).toEqual(['event_type', 'event_id', 'parent_id', 'session_id', 'timestamp']);
      expect(record.event_id).toMatch(/^evt_[0-9a-f]{32}$/);
      expect(Number.isInteger(record.timestamp)).toBe(true);
      expect(record.session_id).toBe(run.report.session_id);
      if (['plan_step_start', 'plan_step', 'plan_end'].includes(record.event_type)) expect(record.parent_id).toBe(start.event_id);
    }
    expect(start.parent_id).toBe(sessionNode(run));
    expect(new Set(records.map((r) => r.event_id)).size).toBe(records.length);
  });

  it('writes the records of a normal run in order, each under its parent (docs/trace.md#what-hangs-off-what)', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo' }, { id: 'b', tool: 'echo', depends_on: ['a'] }));
    expect(run.trace.planTypes()).toEqual(['plan_start', 'plan_step_start', 'plan_step', 'plan_step_start', 'plan_step', 'plan_end']);
    const [startA, startB] = run.trace.ofType('plan_step_start');
    expect(startA).toMatchObject({ plan_id: 'p', step_id: 'a', kind: 'tool', depends_on: [] });
    expect(startB).toMatchObject({ plan_id: 'p', step_id: 'b', kind: 'tool', depends_on: ['a'] });
    expect(run.trace.step('a')).toMatchObject({ plan_id: 'p', kind: 'tool', status: 'success', attempts: 1 });
    // Ours after Murmur's fields: the step's identity and output (what a --continue restores) and the record's proof (docs/continue.md#records).
    expect(Object.keys(run.trace.step('a')).slice(5)).toEqual(['plan_id', 'step_id', 'kind', 'status', 'attempts', 'duration_ms', 'identity', 'output', 'mac']);
    expect(Object.keys(run.trace.end()).slice(5)).toEqual([
      'plan_id', 'outcome', 'steps_total', 'steps_succeeded', 'steps_failed', 'steps_skipped', 'duration_ms',
    ]);
    expect(run.trace.end()).toMatchObject({ plan_id: 'p', outcome: 'completed', steps_total: 2, steps_succeeded: 2, steps_failed: 0, steps_skipped: 0 });
  });

  it('keeps one record per line when values hold newlines, carriage returns, U+2028 and NUL', async () => {
    const nasty = 'a\nb\rc\u2028d\u0000e';
    const stubs = new StubTools().on('a', () => ({ status: 'failed', summary: nasty, metadata: [['state_effect', nasty]] }));
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a', input: { text: nasty } }), { stubs });
    const text = readFileSync(join(run.report.records_dir, 'trace.jsonl'), 'utf8');
    const lines = text.split('\n').filter((line) => line !== '');
    expect(lines).toHaveLength(run.trace.records.length);
    expect(text.endsWith('\n')).toBe(true);
    expect(/[\r\u0000\u2028]/.test(text)).toBe(false);
    expect(run.trace.step('a')).toMatchObject({ error: nasty, input: { text: nasty }, state_effect: nasty });
  });

  it('traces the same report a run without a trace returns', async () => {
    const body = plan({ id: 'a', tool: 'echo' }, { id: 'b', tool: 'echo', depends_on: ['a'], if: "$a.status == 'failed'" });
    const traced = await runCase(dirs, body);
    const untraced = await runCase(dirs, body, { trace: false });
    expect(facts(untraced.report)).toEqual(facts(traced.report));
    expect(untraced.trace.records).toEqual([]);
  });

  it('returns the report fields of docs/report.md, results carrying attempts and duration_ms', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo' }));
    expect(Object.keys(run.report).sort()).toEqual(
      ['plan_id', 'session_id', 'results', 'completed', 'failed_step', 'canceled', 'records_dir', 'duration_ms'].sort(),
    );
    expect(run.report).toMatchObject({ plan_id: 'p', session_id: expect.stringMatching(/^ses_/), records_dir: join(run.workdir, 'records') });
    expect(Object.keys(run.report.results[0] ?? {})).toEqual(['step_id', 'status', 'output', 'error', 'attempts', 'duration_ms']);
  });

  it('writes report.json in the records directory equal to the returned report', async () => {
    const run = await runCase(dirs, plan({ id: 'a', tool: 'echo' }));
    const written = JSON.parse(readFileSync(join(run.report.records_dir, 'report.json'), 'utf8')) as unknown;
    expect(written).toEqual(run.report);
  });

  it('writes exactly one terminal record per settled step, with the reported status', async () => {
    const stubs = new StubTools().on('fail', () => failed({ summary: 'x' }));
    const run = await runCase(
      dirs,
      plan({ id: 'a', tool: 'fail', on_error: 'skip' }, { id: 'b', tool: 'echo', depends_on: ['a'], if: "$a.status == 'skipped'" }, { id: 'c', tool: 'fail', depends_on: ['b'], on_error: 'continue' }),
      { stubs },
    );
    const traced = run.trace.ofType('plan_step').map((r: TraceRecord) => `${String(r.step_id)}:${String(r.status)}`);
    expect(traced).toEqual(run.report.results.map((r) => `${r.step_id}:${r.status}`));
    expect(traced).toEqual(['a:skipped', 'b:success', 'c:failed']);
  });
});
