/**
 * `SessionOptions.exclusiveRecords` (`capsule run --records`, `capsule serve --records`):
 * a session opened on a records directory that another session has just claimed (after both found
 * it empty) is refused with `RecordsDirInUseError`, and the first session's records are untouched.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ERROR_CODES, isRuntimeError } from '../../src/errors.js';
import { Session } from '../../src/session/session.js';

const dirs: string[] = [];
const opened: Session[] = [];
afterAll(async () => {
  for (const session of opened) await session.end('ok');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('a records directory claimed for one session', () => {
  it('refuses a second exclusive session on the directory another session holds, leaving its records as they were', () => {
    const root = mkdtempSync(join(tmpdir(), 'capsule-exclusive-'));
    dirs.push(root);
    const records = join(root, 'records');
    const first = Session.open({ workdir: root, recordsDir: records, exclusiveRecords: true, containment: 'process-group', isolation: 'none' });
    opened.push(first);
    const before = readFileSync(join(records, 'trace.jsonl'), 'utf8');
    let refused: unknown = null;
    try {
      opened.push(Session.open({ workdir: root, recordsDir: records, exclusiveRecords: true, containment: 'process-group', isolation: 'none' }));
    } catch (error) {
      refused = error;
    }
    expect(isRuntimeError(refused, ERROR_CODES.RECORDS_DIR_IN_USE)).toBe(true);
    expect((refused as Error).message).toContain(`already holds session ${first.id}`);
    expect(readFileSync(join(records, 'trace.jsonl'), 'utf8')).toBe(before);
  });
});
