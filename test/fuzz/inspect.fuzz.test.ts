/**
 * Fuzz target: `capsule inspect --once` of a records directory whose `events.jsonl` and
 * `trace.jsonl` are real sessions' with fields replaced or removed at any depth, lines dropped,
 * repeated or swapped (a child before its parent, an actor spawned twice, a cycle of `from`s),
 * bytes edited, torn tails and rare huge or deep lines. It exits 0 with at most 40 lines of tree
 * on stdout, each of bounded length; every line of the log that is not a record is one short,
 * clean warning on stderr; nothing throws.
 */
import fc from 'fast-check';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspectCommand } from '../../src/cli/inspect.js';
import { fuzzTarget } from './harness.js';
import { editedText, recordSessions, recordsEdit, type RecordedSession } from './records-support.js';
import { tempDirForTests } from './support.js';
import { expectCleanText, expectNoCrashText, must } from './verdicts.js';

const dir = tempDirForTests('inspect');
let sessions: RecordedSession[] = [];
beforeAll(async () => {
  sessions = await recordSessions(dir.path);
}, 60_000);
let count = 0;

/** An actor chain or a cycle of `from`s (each actor spawned by the one before, the first by the last). */
const spawnChain = fc.record({ length: fc.constantFrom(3, 3, 20_000), cycle: fc.boolean() }).map(({ length, cycle }) => {
  const lines: string[] = ['{"seq":1,"ts":1,"actor":"plan:p","kind":"event","type":"xstate.init","machine":"plan"}'];
  for (let i = 0; i < length; i++) {
    const from = i === 0 ? 'plan:p' : `step:${i - 1}`;
    lines.push(`{"seq":${i + 2},"ts":1,"actor":"step:${i}","kind":"event","type":"xstate.init","from":"${from}","machine":"step"}`);
  }
  if (cycle) lines.push(`{"seq":${length + 2},"ts":1,"actor":"plan:p","kind":"event","type":"xstate.init","from":"step:${length - 1}","machine":"plan"}`);
  return `${lines.join('\n')}\n`;
});

fuzzTarget({
  name: 'capsule inspect --once of damaged records',
  inputs: fc.record({
    events: fc.oneof({ weight: 60, arbitrary: recordsEdit.map((edit) => ({ edit, chain: null })) }, { weight: 1, arbitrary: spawnChain.map((chain) => ({ edit: null, chain })) }),
    trace: recordsEdit,
  }),
  fastRuns: 600,
  check: async ({ events, trace }) => {
    const records = join(dir.path, `records-${++count % 8}`);
    mkdirSync(records, { recursive: true });
    const eventsText = events.chain ?? editedText(sessions, 'events', events.edit as NonNullable<typeof events.edit>);
    writeFileSync(join(records, 'events.jsonl'), eventsText);
    writeFileSync(join(records, 'trace.jsonl'), editedText(sessions, 'trace', trace));
    let stdout = '';
    let stderr = '';
    const output = { stdout: { write: (text: string) => ((stdout += text), true) }, stderr: { write: (text: string) => ((stderr += text), true) } };
    const code = await inspectCommand(records, { once: true }, output);
    must(code === 0, `exit code ${code}; stderr: ${stderr.slice(0, 300)}`);
    expectNoCrashText(stdout, 'the tree');
    const lines = stdout.trimEnd().split('\n');
    must(lines.length <= 40, `the tree is ${lines.length} lines`);
    for (const line of lines) must(line.length <= 1_000, `a tree line of ${line.length} characters`);
    const warnings = stderr === '' ? [] : stderr.trimEnd().split('\n');
    must(warnings.length <= eventsText.split('\n').length, `${warnings.length} warnings for ${eventsText.split('\n').length} lines`);
    for (const warning of warnings) {
      must(warning.startsWith('warning: '), `stderr line that is not a warning: ${warning.slice(0, 300)}`);
      expectCleanText(warning, 'an inspect warning');
    }
  },
});
