/**
 * The `background-command` rendering (`docs/background-commands.md#rendering`) of registry
 * snapshots, at unit level (the live output is an in-memory tail).
 */
import { MAX_WAIT_SECS, effectiveWaitMs } from '../../src/shell-calls/constants.js';
import { OutputTail } from '../../src/executors/output-tail.js';
import { completionMessage, refusedInputResult, renderBackgroundCommand, unknownWorkIdResult } from '../../src/shell-calls/texts.js';
import { completionOf, FakeCalls, fakeRegistration, ManualClock, RecordingSignaller } from './fakes.js';

function setup() {
  const clock = new ManualClock();
  const registry = new FakeCalls({ signaller: new RecordingSignaller(), clock });
  const output = new OutputTail();
  registry.register(fakeRegistration('wrk_0001', { output }));
  return { clock, registry, output };
}
function must<T>(value: T | null): T {
  if (value === null) throw new Error('the registry does not know this work id');
  return value;
}
const read = (registry: FakeCalls) => must(registry.read('wrk_0001'));
const afterSeparator = (data: string): string => data.slice(data.indexOf('\n\n') + 2);

describe('rendering a running command', () => {
  it('shows state running, all of the output, and ends with the output so far', () => {
    const { registry, output } = setup();
    output.push(Buffer.from('first\n'));
    output.push(Buffer.from('second\n'));
    const { result, delivered_now } = renderBackgroundCommand(read(registry));
    expect(result.data).toContain('state: running\n');
    expect(result.data).toContain('output_shown: all\n');
    expect(result.data.endsWith('\n\nfirst\nsecond\n')).toBe(true);
    expect(result.data).not.toContain('exit_code');
    expect(result.truncated).toBe(false);
    expect(result.status).toBe('passed');
    expect(delivered_now).toBe(false);
  });

  it('names the work id first and the absolute log path', () => {
    const { registry } = setup();
    const data = renderBackgroundCommand(read(registry)).result.data;
    expect(data.startsWith('work_id: wrk_0001\n')).toBe(true);
    expect(data).toContain('output: /records/logs/wrk_0001.log\n');
  });

  it('shows a stopped command as stopped', async () => {
    const { registry, clock } = setup();
    const stopping = registry.stop('wrk_0001');
    registry.leaderExited('wrk_0001');
    registry.complete('wrk_0001', completionOf('wrk_0001', { exit_code: 143 }));
    await clock.advance(0);
    await stopping;
    const data = renderBackgroundCommand(read(registry)).result.data;
    expect(data).toContain('state: stopped\n');
    expect(data).toContain('exit_code: 143\nstatus: error\n');
  });
});

describe('rendering past 16 KiB', () => {
  it('shows exactly the last 16384 bytes after the first blank line, and says so', () => {
    const { registry, output } = setup();
    output.push(Buffer.alloc(50000, 'a'));
    output.push(Buffer.from('\nTAILMARK\n'));
    const { result } = renderBackgroundCommand(read(registry));
    expect(result.truncated).toBe(true);
    expect(result.data).toContain('output_bytes: 50010\n');
    expect(result.data).toContain('output_shown: last 16384 bytes\n\n');
    const tail = afterSeparator(result.data);
    expect(Buffer.byteLength(tail)).toBe(16384);
    expect(tail).toBe(`${'a'.repeat(16374)}\nTAILMARK\n`);
  });

  it('shows fewer bytes when tail_bytes asks for fewer', () => {
    const { registry, output } = setup();
    output.push(Buffer.from('0123456789'));
    const { result } = renderBackgroundCommand(must(registry.read('wrk_0001', { tailBytes: 4 })));
    expect(result.data).toContain('output_shown: last 4 bytes\n\n');
    expect(result.data.endsWith('\n\n6789')).toBe(true);
    expect(result.truncated).toBe(true);
  });
});

describe('rendering a wait (docs/background-commands.md#operations)', () => {
  it('carries waited_secs, rounded down, after output_shown, and no exit_code while running', () => {
    const { registry } = setup();
    const { result } = renderBackgroundCommand(read(registry), { waitedMs: 1040 });
    expect(result.data).toContain('state: running\n');
    expect(result.data).toContain('waited_secs: 1\n');
    expect(result.data.indexOf('output_shown:')).toBeLessThan(result.data.indexOf('waited_secs:'));
    expect(result.data).not.toContain('exit_code');
  });

  it('shows a finished command with exit code and status right after it, and ends with its output', () => {
    const { registry, output } = setup();
    output.push(Buffer.from('done\n'));
    registry.complete('wrk_0001', completionOf('wrk_0001', { exit_code: 7 }));
    const rendered = renderBackgroundCommand(read(registry), { waitedMs: 3000 });
    expect(rendered.delivered_now).toBe(true);
    expect(rendered.completion?.exit_code).toBe(7);
    expect(rendered.result.data).toContain('state: exited\n');
    expect(rendered.result.data).toContain('exit_code: 7\nstatus: error\n');
    expect(rendered.result.data.endsWith('\n\ndone\n')).toBe(true);
  });

  it('bounds one wait by MAX_WAIT_SECS, defaulting to it', () => {
    expect(effectiveWaitMs(30)).toBe(30_000);
    expect(effectiveWaitMs(1)).toBe(1000);
    expect(effectiveWaitMs(0)).toBe(0);
    expect(effectiveWaitMs(undefined)).toBe(MAX_WAIT_SECS * 1000);
    expect(effectiveWaitMs(10_000)).toBe(600_000);
  });
});

describe('rendering finished commands', () => {
  it('shows exit_code 0 then status ok for a clean exit', () => {
    const { registry } = setup();
    registry.complete('wrk_0001', completionOf('wrk_0001'));
    expect(renderBackgroundCommand(read(registry)).result.data).toContain('exit_code: 0\nstatus: ok\n');
  });

  it('keeps one header line per value even when an error holds newlines, so the first blank line is the separator', () => {
    const { registry, output } = setup();
    output.push(Buffer.from('x\n\ny'));
    registry.complete('wrk_0001', completionOf('wrk_0001', { error: 'failed to write shell log: a\n\nb', resource_limit: 'cgroup_pids_max', output_holders: 'Killed' }));
    const data = renderBackgroundCommand(read(registry)).result.data;
    expect(afterSeparator(data)).toBe('x\n\ny');
    expect(data).toContain('resource_limit: cgroup_pids_max\n');
    expect(data).toContain('output_holders: killed\n');
    expect(data).toContain('wait_error: failed to write shell log: a\\n\\nb\n');
  });

  it("answers failed, not passed, for a command the session's end killed (it has no result of its own), and passed for one that exited by itself with the same code", () => {
    const { registry } = setup();
    registry.killRunning();
    registry.complete('wrk_0001', completionOf('wrk_0001', { exit_code: 137 }));
    const killed = renderBackgroundCommand(read(registry), { waitedMs: 1000 }).result;
    expect(killed.status).toBe('failed');
    expect(killed.data).toContain('ended_by: session_end');
    expect(killed.summary).toBe('wrk_0001 was killed at session end (exit code 137).');
    const own = setup();
    own.registry.complete('wrk_0001', completionOf('wrk_0001', { exit_code: 137 }));
    expect(renderBackgroundCommand(read(own.registry)).result.status).toBe('passed');
  });

  it('says ended_by log_cap, in the status header, the summary and the completion message, for a command the runtime stopped for its log cap', async () => {
    const { registry, clock } = setup();
    const stopping = registry.stop('wrk_0001', 'log_cap');
    registry.leaderExited('wrk_0001');
    registry.complete('wrk_0001', completionOf('wrk_0001', { exit_code: 143, output_capped: true }));
    await clock.advance(0);
    await stopping;
    const rendered = renderBackgroundCommand(read(registry)).result;
    expect(rendered.status).toBe('passed');
    expect(rendered.data).toContain('state: stopped\n');
    expect(rendered.data).toContain('\nended_by: log_cap (its log reached lifecycle.max_log_bytes and lifecycle.on_log_cap is stop, so the runtime stopped it)\n');
    expect(rendered.summary).toBe('wrk_0001 was stopped by the runtime when its log reached lifecycle.max_log_bytes (exit code 143).');
    const message = completionMessage(must(read(registry).finished));
    expect(message).toContain('\nended_by: log_cap (its log reached lifecycle.max_log_bytes');
    expect(completionMessage(completionOf('wrk_0002'))).not.toContain('ended_by');
  });

  it('says when the log was capped', () => {
    const registry = new FakeCalls({ signaller: new RecordingSignaller(), clock: new ManualClock() });
    const tail = new OutputTail();
    registry.register({ ...fakeRegistration('wrk_cap'), output: { sectionBytes: 5, tail: (n?: number) => tail.tail(n), capped: true } });
    expect(renderBackgroundCommand(must(registry.read('wrk_cap'))).result.data).toContain('output_capped: true\n');
  });
});

describe('refusals (docs/background-commands.md#tool-input)', () => {
  it('fails an unknown work id with a sentence naming it as none of this session', () => {
    const result = unknownWorkIdResult('wrk_abc');
    expect(result.status).toBe('failed');
    expect(result.data).toContain('wrk_abc');
    expect(result.data).toContain('this session');
  });

  it('fails refused input on one line', () => {
    expect(refusedInputResult('a\nb')).toMatchObject({ status: 'failed', data: 'a\\nb' });
  });
});
