/**
 * One session, the same plan id twice (docs/event-log.md, "Actor ids"): `capsule serve` runs the
 * same plan again, one run after the other or both at once, and the second plan's actors get a tag
 * (`plan:p~2`, `step:a~2`), so that the session's event log replays identically and `capsule
 * inspect` draws two plans, each with its own steps. The report and the trace keep the user's plan
 * id. A plan with another id that shares a step id keeps its plain plan actor id; only the step
 * actor whose id is taken is tagged.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspectCommand } from '../../src/cli/inspect.js';
import { replayFile } from '../../src/replay/replay.js';
import { ActorNames } from '../../src/session/actor-names.js';
import { endServes, exitOf, startServe, type ServeClient } from '../background/serve-client.js';
import { runCli } from '../cli/helpers.js';
import { commandCapsule, writeCapsule } from '../support/delegation-harness.js';

afterEach(endServes);

function capture() {
  const sink = () => ({ text: '', isTTY: false, rows: 24, columns: 100, write(chunk: string) { this.text += chunk; return true; } });
  return { stdout: sink(), stderr: sink() };
}

async function inspectOnce(recordsDir: string): Promise<string[]> {
  const out = capture();
  expect(await inspectCommand(recordsDir, { once: true, verbose: true }, out)).toBe(0);
  return out.stdout.text.split('\n');
}

interface Report {
  readonly plan_id: string;
  readonly completed: boolean;
  readonly results: readonly { readonly step_id: string; readonly status: string }[];
}

/** The records of a stopped serve: its replay verdict, its plan_start records' plan ids, its inspect tree below the session line. */
async function stopAndRead(serve: ServeClient): Promise<{ replay: Awaited<ReturnType<typeof replayFile>>; planIds: unknown[]; tree: string[] }> {
  expect(await serve.call('session.stop')).toEqual({ residue: [] });
  expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  const replay = await replayFile(join(serve.R, 'events.jsonl'));
  const planIds = serve.trace().filter((record) => record['event_type'] === 'plan_start').map((record) => record['plan_id']);
  const tree = (await inspectOnce(serve.R)).slice(1);
  return { replay, planIds, tree };
}

describe('capsule serve given the same plan id twice in one session', () => {
  const plan = {
    id: 'p',
    steps: [
      { id: 'a', shell: 'bash -c "exit 0"' },
      { id: 'b', shell: 'bash -c "exit 3"', depends_on: ['a'], on_error: 'continue' },
    ],
  };

  it('tags the second run of a plan submitted twice, one after the other: the event log replays identically and inspect shows two plans', async () => {
    const serve = startServe();
    const first = await serve.call<{ report: Report }>('plan.submit', { plan });
    const second = await serve.call<{ report: Report }>('plan.submit', { plan });
    // The report keeps the user's plan id.
    expect([first.report.plan_id, second.report.plan_id]).toEqual(['p', 'p']);
    expect(second.report.results.map((result) => `${result.step_id}:${result.status}`)).toEqual(['a:success', 'b:failed']);
    const { replay, planIds, tree } = await stopAndRead(serve);
    expect(replay.divergence).toBeUndefined();
    expect(replay.identical).toBe(true);
    expect(replay.actors['plan:p']?.at(-1)).toBe('finished');
    expect(replay.actors['plan:p~2']?.at(-1)).toBe('finished');
    expect(replay.actors['step:a']).toEqual(replay.actors['step:a~2']);
    expect(replay.actors['step:b~2']?.at(-1)).toBe('finished');
    expect(planIds).toEqual(['p', 'p']);
    expect(tree).toEqual([
      '├─ plan:p  finished (done)  [0 running, 2 ended]',
      '│  ├─ step:a  finished (done) → success',
      '│  └─ step:b  finished (done) → failed: exit code 3',
      '└─ plan:p~2  finished (done)  [0 running, 2 ended]',
      '   ├─ step:a~2  finished (done) → success',
      '   └─ step:b~2  finished (done) → failed: exit code 3',
      '',
    ]);
    // The CLI says the same of the session's log.
    const cli = await runCli(['replay', join(serve.R, 'events.jsonl')]);
    expect(cli.code).toBe(0);
    expect(cli.stdout).toContain('identical');
  });

  it('tags the second of two runs of the same plan running at once: the event log replays identically and inspect shows two plans', async () => {
    const serve = startServe();
    // Each run's step waits until both have started: the two plans run at the same time. (A marker
    // from mktemp: with PID namespaces both steps' shells may be pid 2.)
    const meeting = {
      id: 'p',
      steps: [{ id: 'meet', shell: `bash -c 'mktemp started.XXXXXX >/dev/null; until [ $(ls started.* | wc -l) -ge 2 ]; do sleep 0.02; done'`, timeout_secs: 30 }],
    };
    const [one, two] = await Promise.all([
      serve.call<{ task_id: string }>('plan.submit', { plan: meeting, wait: false }),
      serve.call<{ task_id: string }>('plan.submit', { plan: meeting, wait: false }),
    ]);
    const reports = await Promise.all(
      [one, two].map(async (task) => (await serve.awaitNotification('task.finished', (params) => params['task_id'] === task.task_id))['report'] as Report),
    );
    expect(reports.map((report) => [report.plan_id, report.completed])).toEqual([
      ['p', true],
      ['p', true],
    ]);
    const { replay, planIds, tree } = await stopAndRead(serve);
    expect(replay.divergence).toBeUndefined();
    expect(replay.identical).toBe(true);
    expect(replay.actors['plan:p']?.at(-1)).toBe('finished');
    expect(replay.actors['plan:p~2']?.at(-1)).toBe('finished');
    expect(replay.actors['step:meet~2']?.at(-1)).toBe('finished');
    expect(planIds).toEqual(['p', 'p']);
    expect(tree).toEqual([
      '├─ plan:p  finished (done)  [0 running, 1 ended]',
      '│  └─ step:meet  finished (done) → success',
      '└─ plan:p~2  finished (done)  [0 running, 1 ended]',
      '   └─ step:meet~2  finished (done) → success',
      '',
    ]);
  });
});

describe('capsule serve given two plans of different ids that share a step id', () => {
  it('keeps both plan actor ids and tags only the step actor whose id is taken: the log replays identically, inspect draws each step under its own plan', async () => {
    const serve = startServe();
    await serve.call('plan.submit', { plan: { id: 'first', steps: [{ id: 'a', shell: 'bash -c "exit 0"' }] } });
    await serve.call('plan.submit', {
      plan: { id: 'second', steps: [{ id: 'a', shell: 'bash -c "exit 3"', on_error: 'continue' }, { id: 'b', shell: 'bash -c "exit 0"', depends_on: ['a'] }] },
    });
    const { replay, planIds, tree } = await stopAndRead(serve);
    expect(replay.divergence).toBeUndefined();
    expect(Object.keys(replay.actors).filter((name) => /^(plan|step):/.test(name)).sort()).toEqual(['plan:first', 'plan:second', 'step:a', 'step:a~2', 'step:b']);
    expect(planIds).toEqual(['first', 'second']);
    expect(tree).toEqual([
      '├─ plan:first  finished (done)  [0 running, 1 ended]',
      '│  └─ step:a  finished (done) → success',
      '└─ plan:second  finished (done)  [0 running, 2 ended]',
      '   ├─ step:a~2  finished (done) → failed: exit code 3',
      '   └─ step:b  finished (done) → success',
      '',
    ]);
    // The trace names steps by the user's ids.
    const steps = serve.trace().filter((record) => record['event_type'] === 'plan_step');
    expect(steps.map((step) => `${String(step['plan_id'])}/${String(step['step_id'])}`)).toEqual(['first/a', 'second/a', 'second/b']);
  });
});

describe('capsule serve given a plan with a capsule step twice', () => {
  it("names the second run's delegation after its tagged step, and inspect draws each delegation under its own step", async () => {
    const serve = startServe({
      setup: (W) => {
        writeFileSync(join(W, 'capsule.json'), JSON.stringify({ name: 'parent', capabilities: { spawn: { allow: ['local/echoer'] } } }));
        writeCapsule(join(W, 'capsules'), commandCapsule('echoer', 'read -r task; printf "echo:%s" "$task"'));
      },
    });
    const plan = { id: 'p', steps: [{ id: 'd', capsule: 'echoer', input: 'hi' }] };
    for (let run = 0; run < 2; run++) {
      const { report } = await serve.call<{ report: Report }>('plan.submit', { plan });
      expect(report.results.map((result) => `${result.step_id}:${result.status}`)).toEqual(['d:success']);
    }
    const { replay, tree } = await stopAndRead(serve);
    expect(replay.divergence).toBeUndefined();
    expect(replay.actors['delegation:echoer@d#1']?.at(-1)).toBe('finished');
    expect(replay.actors['delegation:echoer@d~2#1']?.at(-1)).toBe('finished');
    const under = (step: string): string | undefined => tree[tree.findIndex((line) => line.includes(`step:${step}  `)) + 1];
    expect(under('d')).toContain('delegation:echoer@d#1  finished');
    expect(under('d~2')).toContain('delegation:echoer@d~2#1  finished');
  });
});

describe('ActorNames', () => {
  it('hands out the n-th use of a plan id as ~n, and never an id already taken, even one a plan id spells out', () => {
    const names = new ActorNames();
    expect(names.claimPlan('p', ['a'])).toEqual({ actorId: 'plan:p' });
    expect(names.claimPlan('p', ['a', 'z'])).toEqual({ actorId: 'plan:p~2', stepActorIds: ['step:a~2', null] });
    expect(names.claimPlan('p~2', ['a~2', 'a'])).toEqual({ actorId: 'plan:p~2~2', stepActorIds: ['step:a~2~2', 'step:a~3'] });
    expect(names.claimPlan('p', [])).toEqual({ actorId: 'plan:p~3' });
  });

  // A plan id that spells another plan's step pool (`plan:p/pool.1`) would share that pool's
  // actor id, and `capsule inspect` would draw its steps under the other plan.
  it('never hands out a plan actor id that is a step pool of another plan actor (`<plan actor>/pool.<n>`), in either order', () => {
    const names = new ActorNames();
    expect(names.claimPlan('p', ['a'])).toEqual({ actorId: 'plan:p' });
    expect(names.claimPlan('p/pool.1', ['x'])).toEqual({ actorId: 'plan:p/pool.1~2' });
    expect(names.claimPlan('p/pool.x', ['y'])).toEqual({ actorId: 'plan:p/pool.x' });
    const other = new ActorNames();
    expect(other.claimPlan('q/pool.3', [])).toEqual({ actorId: 'plan:q/pool.3' });
    expect(other.claimPlan('q', [])).toEqual({ actorId: 'plan:q~2' });
    expect(other.claimPlan('q/pool', [])).toEqual({ actorId: 'plan:q/pool' });
  });

  it('keeps a serve session whose second plan id names the first plan\'s step pool drawn as two plans, replaying identically', async () => {
    const serve = startServe();
    const wide = { id: 'p', steps: Array.from({ length: 20 }, (_, i) => ({ id: `s${i}`, shell: 'bash -c "exit 0"' })) };
    expect((await serve.call<{ report: Report }>('plan.submit', { plan: wide })).report.completed).toBe(true);
    expect((await serve.call<{ report: Report }>('plan.submit', { plan: { id: 'p/pool.1', steps: [{ id: 'x', shell: 'bash -c "exit 0"' }] } })).report.completed).toBe(true);
    const { replay, planIds, tree } = await stopAndRead(serve);
    expect(replay.identical).toBe(true);
    expect(planIds).toEqual(['p', 'p/pool.1']);
    expect(tree[0]).toBe('├─ plan:p  finished (done)  [0 running, 20 ended]');
    expect(tree).toContain('└─ plan:p/pool.1~2  finished (done)  [0 running, 1 ended]');
    expect(tree).toContain('   └─ step:x  finished (done) → success');
  });
});
