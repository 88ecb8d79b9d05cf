/**
 * The message texts of demoted commands (`docs/background-commands.md#completion-message`, `docs/background-commands.md#demotion-result`, `docs/background-commands.md#abandonment-report`, `docs/resume.md#lost-report-text`, `docs/shell-commands.md#resource-limit-line`):
 * as units.
 */
import fc from 'fast-check';
import type { AbandonedCommand, FinishedTooLate } from '../../src/shell-calls/abandonment.js';
import { finishedTooLate, recoveredResult, shellAbandonedFields, abandonedRunningMs } from '../../src/shell-calls/abandonment.js';
import { newWorkId } from '../../src/shell-calls/work-id.js';
import {
  abandonmentReport,
  COMPLETION_CLOSING,
  COMPLETION_HEADING,
  completionMessage,
  demotionResult,
  demotionSummary,
  LOST_HEADING,
  lostReportText,
  oneLine,
  outputHoldersNote,
  resourceLimitLine,
} from '../../src/shell-calls/texts.js';
import { completionOf } from './fakes.js';

const FLAGS = [
  { delivered: true, toolOffered: true },
  { delivered: false, toolOffered: true },
  { delivered: true, toolOffered: false },
  { delivered: false, toolOffered: false },
] as const;
const count = (text: string, fragment: string): number => text.split(fragment).length - 1;

/**
 * An estimate of cl100k_base tokens (no tokenizer is a dependency): a letter run of up to 10
 * letters is one token, a longer one two, a digit run one per three digits, anything else one.
 * Checked against js-tiktoken's cl100k_base on 3,000 random work ids per flag pair: it is at most
 * 11 tokens under the real count, which was 51–88 for `data`.
 */
function tokenEstimate(text: string): number {
  let tokens = 0;
  for (const piece of text.match(/ ?[A-Za-z]+| ?[0-9]+|\s+|[^\sA-Za-z0-9]/g) ?? []) {
    const word = piece.trim();
    if (/^[A-Za-z]+$/.test(word)) tokens += word.length <= 10 ? 1 : 2;
    else if (/^[0-9]+$/.test(word)) tokens += Math.ceil(word.length / 3);
    else tokens += 1;
  }
  return tokens;
}

describe('the shared resource-limit line (docs/shell-commands.md#resource-limit-line)', () => {
  it('is one line naming the limit and saying what to do, the same every time', () => {
    const line = resourceLimitLine('cgroup_pids_max');
    expect(line).not.toMatch(/\n/);
    expect(line).toContain('cgroup_pids_max');
    expect(line).toMatch(/raise that declared limit|do less work/);
    expect(resourceLimitLine('cgroup_pids_max')).toBe(line);
  });

  it('stays one line for any string, line breaks included', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (limit) => {
        expect(resourceLimitLine(limit)).not.toMatch(/[\r\n\u0085\u2028\u2029]/);
      }),
      { seed: 9001, numRuns: 300 },
    );
    expect(resourceLimitLine('memory')).toContain('memory');
  });
});

describe('the completion message (docs/background-commands.md#completion-message)', () => {
  it('names its limit with the shared line, reads status error and ends with the closing sentence', () => {
    const text = completionMessage(
      completionOf('wrk_0001', { binary: 'bash', command: 'make -j64', exit_code: 1, duration_ms: 3000, exited_at_ms: 1000, output_path: '/R/logs/wrk_0001.log', output_bytes: 0, resource_limit: 'cgroup_pids_max' }),
    );
    const lines = text.split('\n');
    expect(lines).toContain(resourceLimitLine('cgroup_pids_max'));
    expect(lines[0]).toBe(COMPLETION_HEADING);
    expect(lines).toContain('status: error');
    expect(text.endsWith('are not reproduced here.')).toBe(true);
  });

  it('has exactly the documented lines in order, names the work id and not the command', () => {
    const text = completionMessage(
      completionOf('wrk_0001', { binary: '/usr/bin/bash', command: 'make -j64', exit_code: 0, duration_ms: 3000, output_path: 'P', output_bytes: 12, error: 'the wait failed' }),
    );
    expect(text.split('\n')).toEqual([
      COMPLETION_HEADING,
      'work_id: wrk_0001',
      'status: error',
      'exit_code: 0',
      'duration_ms: 3000',
      'output: P (12 bytes)',
      'wait_error: the wait failed',
      '',
      COMPLETION_CLOSING,
    ]);
    expect(COMPLETION_CLOSING.endsWith('are not reproduced here.')).toBe(true);
    expect(text).not.toContain('make -j64');
    expect(text).not.toContain('/usr/bin/bash');
    expect(text).not.toMatch(/^(binary|command):/m);
  });

  it('carries the Killed holders note as a whole line, before the closing sentence', () => {
    const note = outputHoldersNote('Killed');
    expect(note).not.toBeNull();
    const text = completionMessage(completionOf('wrk_0002', { output_holders: 'Killed' }));
    expect(text.split('\n')).toContain(note);
    expect(text.endsWith('are not reproduced here.')).toBe(true);
  });

  it('has no note for Closed holders and a one-line note for holders left running', () => {
    expect(outputHoldersNote('Closed')).toBeNull();
    expect(outputHoldersNote('LeftRunning')).not.toMatch(/\n/);
    expect(outputHoldersNote('LeftRunning')).not.toBe(outputHoldersNote('Killed'));
  });

  it('reads ok for a clean exit: exit 0, no error, no limit', () => {
    expect(completionMessage(completionOf('wrk_0003')).split('\n')).toContain('status: ok');
  });

  it('never says "in the capsule workdir" and keeps an error with newlines on its own line', () => {
    const text = completionMessage(completionOf('wrk_0004', { error: 'first\nsecond' }));
    expect(text).not.toContain('in the capsule workdir');
    expect(text.split('\n')).toContain('wait_error: first\\nsecond');
  });
});

describe('the demotion result (docs/background-commands.md#demotion-result)', () => {
  it.each(FLAGS)('has the documented fields and fragments for delivered=$delivered tool_offered=$toolOffered', (flags) => {
    const result = demotionResult('wrk_0a1b', flags);
    expect(Buffer.byteLength(result.data)).toBeLessThan(400);
    expect(result.data).toContain('wrk_0a1b');
    expect(result.data).toContain('is killed');
    expect(result.data.includes('background-command')).toBe(flags.toolOffered);
    expect(result.data.includes(' tool')).toBe(flags.toolOffered);
    expect(result.data.includes('separate task')).toBe(flags.delivered);
    expect(result.data).not.toContain('nothing to poll');
    expect(result.data).not.toContain('no way to ask');
    expect(result.data).not.toContain('logs/');
    expect(result.summary).toBe(demotionSummary('wrk_0a1b'));
    expect(result.summary).toContain('wrk_0a1b');
    expect(result.metadata).toEqual([['work_id', 'wrk_0a1b']]);
    expect(result).toMatchObject({ status: 'passed', truncated: false, data_path: null, attachments: [] });
  });

  it('puts its sentences in the documented order: id, tool, session-end kill, delivery', () => {
    const data = demotionResult('wrk_0a1b', { delivered: true, toolOffered: true }).data;
    const at = (fragment: string): number => data.indexOf(fragment);
    expect(at('wrk_0a1b')).toBeLessThan(at('background-command'));
    expect(at('background-command')).toBeLessThan(at('is killed'));
    expect(at('is killed')).toBeLessThan(at('separate task'));
    const untooled = demotionResult('wrk_0a1b', { delivered: true, toolOffered: false }).data;
    expect(untooled.indexOf('is killed')).toBeLessThan(untooled.indexOf('separate task'));
  });

  it('has the same size for any two work ids of equal length, whatever the flags (property)', () => {
    const hexId = fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 1, maxLength: 40 });
    fc.assert(
      fc.property(hexId, fc.nat(), fc.constantFrom(...FLAGS), (id, seed, flags) => {
        const other = Array.from(id, (_, i) => '0123456789abcdef'[(seed + i * 7) % 16]).join('');
        const a = demotionResult(`wrk_${id}`, flags);
        const b = demotionResult(`wrk_${other}`, flags);
        expect(Buffer.byteLength(a.data)).toBe(Buffer.byteLength(b.data));
        expect(Buffer.byteLength(a.summary)).toBe(Buffer.byteLength(b.summary));
      }),
      { seed: 1313, numRuns: 300 },
    );
  });

  it.each(FLAGS)('is small and constant for two freshly minted work ids with delivered=$delivered tool_offered=$toolOffered', (flags) => {
    const a = demotionResult(newWorkId(), flags);
    const b = demotionResult(newWorkId(), flags);
    expect(a.data.length).toBe(b.data.length);
    expect(Buffer.byteLength(a.data)).toBeLessThan(400);
    expect(tokenEstimate(a.data) + 11).toBeLessThan(120);
    expect(a.data).not.toContain('logs/');
  });
});

describe('the abandonment report (docs/background-commands.md#abandonment-report)', () => {
  const R = '/abs/R';
  const tooLate: FinishedTooLate = {
    kind: 'FinishedTooLate',
    work_id: 'wrk_0c2d',
    binary: '/usr/bin/bash',
    command: 'sleep 2; echo done',
    exit_code: 0,
    duration_ms: 2014,
    output_path: `${R}/logs/wrk_0c2d.log`,
    output_bytes: 91,
    resource_limit: null,
    wait_error: null,
    status: 'ok',
  };
  const stillRunning: AbandonedCommand = { kind: 'StillRunning', work_id: 'wrk_0a1b', binary: '/usr/bin/bash', command: 'sleep 30', running_ms: 12, output_path: `${R}/logs/wrk_0a1b.log` };
  const forbidden = ['nothing was killed', 'Nothing was waited for', 'keeps running', 'No exit code was recorded', 'in the capsule workdir'];

  it('reports a command that finished during teardown with its result', () => {
    const text = abandonmentReport('ses_x', [tooLate]) as string;
    expect(text).toContain('state: finished during teardown after 2014 ms');
    expect(text).toContain('status: ok');
    expect(text).toContain('exit_code: 0');
    expect(text).toContain(`output: ${R}/logs/wrk_0c2d.log (91 bytes)\n`);
    expect(text).not.toContain('in the capsule workdir');
    expect(text).not.toContain('killed at session end');
  });

  it('is one block enumerating every command, the count fragment once', () => {
    const text = abandonmentReport('ses_x', [stillRunning, tooLate]) as string;
    expect(count(text, '2 background shell commands discarded')).toBe(1);
    expect(count(text, 'work_id: ')).toBe(2);
    expect(text).toContain('wrk_0a1b');
    expect(text).toContain('wrk_0c2d');
    expect(text.startsWith('[capsule-runtime] ')).toBe(true);
    expect(text).toContain('Session ses_x');
    expect(text).toContain('were unaccounted for');
    for (const fragment of forbidden) expect(text).not.toContain(fragment);
  });

  it('says singular for one command', () => {
    const text = abandonmentReport('ses_x', [stillRunning]) as string;
    expect(count(text, '1 background shell command discarded')).toBe(1);
    expect(text).not.toContain('commands discarded');
    expect(text).toContain('1 demoted shell command was unaccounted for');
  });

  it("advises in the door's own words: an MCP session is ended by closing the client, and waited on with background_command", () => {
    const text = abandonmentReport('ses_x', [stillRunning], 'mcp') as string;
    expect(text).toContain('close the MCP client');
    expect(text).toContain('background_command wait');
    expect(text).not.toContain('session.stop');
    expect(text).not.toContain('backgroundCommand');
    expect(text).not.toContain('task_acceptance');
  });

  it('names a failed wait beside the status', () => {
    const text = abandonmentReport('ses_x', [{ ...tooLate, wait_error: 'no child processes', status: 'error' }]) as string;
    expect(text).toContain('status: error');
    expect(text).toContain('wait_error: no child processes');
  });

  it('gives a still-running command the kill state and the log path, and no exit_code line', () => {
    const text = abandonmentReport('ses_x', [stillRunning]) as string;
    expect(text).toContain('state: killed at session end after 12 ms');
    expect(text).toContain(`before the kill is in ${R}/logs/wrk_0a1b.log.`);
    expect(text).not.toContain('exit_code:');
    expect(text).toContain('binary: /usr/bin/bash');
    expect(text).toContain('command: sleep 30');
    for (const fragment of forbidden) expect(text).not.toContain(fragment);
  });

  it('lists resource_limit only when set, and recommends the queue/sleep lifecycle', () => {
    expect(abandonmentReport('s', [tooLate])).not.toContain('resource_limit:');
    const text = abandonmentReport('s', [{ ...tooLate, resource_limit: 'cgroup_memory_bytes', status: 'error' }]) as string;
    expect(text).toContain('resource_limit: cgroup_memory_bytes');
    expect(text).toContain('lifecycle.task_acceptance: queue');
    expect(text).toContain('lifecycle.after_task: sleep');
  });

  it('is not written when nothing was swept', () => {
    expect(abandonmentReport('ses_x', [])).toBeNull();
  });

  it('feeds shell_abandoned: only a finished command carries a recovered result', () => {
    const running45: AbandonedCommand = { ...stillRunning, running_ms: 45012 };
    expect(abandonedRunningMs(running45)).toBe(45012);
    expect(recoveredResult(running45)).toBeNull();
    expect(abandonedRunningMs(tooLate)).toBe(2014);
    expect(recoveredResult(tooLate)).toEqual({ exit_code: 0, output_path: `${R}/logs/wrk_0c2d.log`, output_bytes: 91 });
    expect(Object.keys(shellAbandonedFields(running45))).toEqual(['work_id', 'binary', 'command', 'running_ms']);
    expect(shellAbandonedFields(tooLate)).toEqual({ work_id: 'wrk_0c2d', binary: '/usr/bin/bash', command: 'sleep 2; echo done', running_ms: 2014, exit_code: 0, output_path: `${R}/logs/wrk_0c2d.log`, output_bytes: 91 });
  });

  it('builds a FinishedTooLate entry from a completion, with its status rule', () => {
    const entry = finishedTooLate(completionOf('wrk_1', { exit_code: 0, resource_limit: 'cgroup_pids_max' }));
    expect(entry).toMatchObject({ kind: 'FinishedTooLate', status: 'error', wait_error: null, resource_limit: 'cgroup_pids_max' });
  });
});

describe('the lost report text (docs/resume.md#lost-report-text)', () => {
  const report = {
    started_in_session: 'ses_prior',
    lost: [
      { work_id: 'wrk_one', binary: '/usr/bin/bash', command: 'sleep 60', detached_at_ms: 1750 },
      { work_id: 'wrk_two', binary: '/usr/bin/python3', command: 'train.py --epochs 9', detached_at_ms: 2500 },
    ],
  };

  it('opens with LOST_HEADING, which is not the completion heading', () => {
    const text = lostReportText(report);
    expect(LOST_HEADING).not.toBe(COMPLETION_HEADING);
    expect(text.startsWith(`${LOST_HEADING}\n\n`)).toBe(true);
    expect(text.startsWith(COMPLETION_HEADING)).toBe(false);
  });

  it('names the session, then the exact block of work ids and demotion instants, and ends as pinned', () => {
    const text = lostReportText(report);
    expect(text).toContain('\n\nSession ses_prior ended without recording');
    expect(text).toContain('\nwork_id: wrk_one\ndetached_at_ms: 1750\n\nwork_id: wrk_two\ndetached_at_ms: 2500\n');
    expect(text.endsWith('start the work again only if it still matters.')).toBe(true);
  });

  it('never shows a binary, a command, a path, a byte count or an exit code', () => {
    const text = lostReportText(report);
    for (const fragment of ['binary:', 'command:', '/usr/bin/bash', 'sleep 60', '/usr/bin/python3', 'train.py', 'bytes', 'exit_code', 'logs/']) expect(text).not.toContain(fragment);
  });
});

describe('one-line values', () => {
  it('escape every line break so a value cannot forge a line', () => {
    expect(oneLine('a\nb\rc\u2028d')).toBe('a\\nb\\rc\\u2028d');
    expect(oneLine('plain')).toBe('plain');
  });
});
