/**
 * Fuzz target: `capsule replay` of recorded event logs — real sessions' `events.jsonl` with fields
 * replaced or removed at any depth, lines dropped, repeated or swapped, bytes edited, torn tails
 * and rare huge or deep lines — through the command itself (in-process, output captured). Every
 * file ends in a verdict (exit 0 identical, 1 diverged) or a clean refusal (exit 2, nothing on
 * stdout), never an exception, a stack trace or an uncaught error after the verdict; the output
 * is bounded (`emitted` not an array, a malformed plan input in `xstate.init`).
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { fuzzTarget } from './harness.js';
import { editedText, recordSessions, recordsEdit, type RecordedSession } from './records-support.js';
import { expectReplayVerdict } from './replay-support.js';
import { tempDirForTests } from './support.js';

const dir = tempDirForTests('replay-recorded');
let sessions: RecordedSession[] = [];
beforeAll(async () => {
  sessions = await recordSessions(dir.path);
}, 60_000);
let count = 0;

fuzzTarget({
  name: 'capsule replay of recorded event logs',
  inputs: fc.record({ edit: recordsEdit, json: fc.boolean() }),
  fastRuns: 600,
  check: async ({ edit, json }) => {
    const file = join(dir.path, `events-${++count % 8}.jsonl`);
    await writeFile(file, editedText(sessions, 'events', edit));
    await expectReplayVerdict(file, json);
  },
});
