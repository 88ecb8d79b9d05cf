/** Work ids (`docs/background-commands.md#work-ids`), provenance (docs/background-commands.md#provenance) and the `background-command` input (`docs/background-commands.md#tool-input`). */
import fc from 'fast-check';
import { completionProvenance, deriveTrust, lowestTrust, ORIGINS, parseOrigin, parseTrust, provenanceOf } from '../../src/session/provenance.js';
import { BACKGROUND_COMMAND_INPUT_SCHEMA, parseBackgroundCommandInput } from '../../src/shell-calls/tool-input.js';
import { checkWorkId, newWorkId, WORK_ID_PATTERN } from '../../src/shell-calls/work-id.js';

describe('work ids (docs/background-commands.md#work-ids)', () => {
  it('are wrk_ and 32 lowercase hex digits of a UUID v7, matching ^wrk_[0-9a-f]+$', () => {
    const id = newWorkId();
    expect(id).toMatch(/^wrk_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$/);
    expect(id).toMatch(WORK_ID_PATTERN);
  });

  it('sort by mint time as strings', () => {
    const ids = Array.from({ length: 2000 }, newWorkId);
    expect([...ids].sort()).toEqual(ids);
  });

  it('are checked against the full pattern; a refusal names the form and quotes at most 40 characters', () => {
    expect(checkWorkId('wrk_0a1b')).toEqual({ ok: true, workId: 'wrk_0a1b' });
    for (const bad of ['wrk_', 'WRK_0a', 'wrk_0A1B', 'wrk_xyz', ' wrk_0a', 'wrk_0a\n', 'tsk_0a']) expect(checkWorkId(bad).ok).toBe(false);
    const huge = checkWorkId(`wrk_${'z'.repeat(100_000)}`);
    expect(huge.ok).toBe(false);
    if (!huge.ok) {
      expect(huge.error).toContain('"wrk_" followed by lowercase hex digits');
      expect(huge.error.length).toBeLessThan(220);
      expect(huge.error).toContain('(100004 characters)');
    }
    const typed = checkWorkId(42);
    expect(typed.ok === false && typed.error).toMatch(/got number$/);
  });

  it('refusals never carry a raw line break of the input', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (input) => {
        const checked = checkWorkId(input);
        if (!checked.ok) expect(checked.error).not.toMatch(/[\r\n]/);
      }),
      { seed: 44, numRuns: 300 },
    );
  });
});

describe('provenance (docs/background-commands.md#provenance)', () => {
  it('derives trust from the origin; peer and completion inherit, and absent is untrusted', () => {
    expect(['user', 'schedule', 'system'].map((o) => deriveTrust(o as 'user'))).toEqual(['trusted', 'trusted', 'trusted']);
    expect(deriveTrust('event', 'trusted')).toBe('untrusted');
    expect(deriveTrust('peer', 'trusted')).toBe('trusted');
    expect(deriveTrust('peer')).toBe('untrusted');
    expect(deriveTrust('completion', null)).toBe('untrusted');
    expect(deriveTrust('user', 'untrusted')).toBe('trusted');
  });

  it('stamps a completion from a user task as completion/trusted, and one with no provenance untrusted', () => {
    expect(completionProvenance(provenanceOf('user'))).toEqual({ origin: 'completion', trust: 'trusted' });
    expect(completionProvenance(provenanceOf('event'))).toEqual({ origin: 'completion', trust: 'untrusted' });
    expect(completionProvenance(null)).toEqual({ origin: 'completion', trust: 'untrusted' });
  });

  it('parses the wire words by exact match only', () => {
    for (const origin of ORIGINS) expect(parseOrigin(origin)).toBe(origin);
    for (const bad of ['User', 'USER', ' user', 'users', '', null, 1]) expect(parseOrigin(bad)).toBeNull();
    expect(parseTrust('trusted')).toBe('trusted');
    expect(parseTrust('untrusted')).toBe('untrusted');
    for (const bad of ['Trusted', 'true', '', null]) expect(parseTrust(bad)).toBeNull();
  });

  it('takes the lowest trust: one untrusted makes it untrusted; none given is trusted', () => {
    expect(lowestTrust(['trusted', 'trusted'])).toBe('trusted');
    expect(lowestTrust(['trusted', 'untrusted', 'trusted'])).toBe('untrusted');
    expect(lowestTrust([])).toBe('trusted');
  });
});

describe('the background-command input (docs/background-commands.md#tool-input)', () => {
  it('publishes the schema exactly, as one line without whitespace', () => {
    expect(JSON.parse(BACKGROUND_COMMAND_INPUT_SCHEMA)).toEqual({
      type: 'object',
      properties: { operation: { type: 'string', enum: ['status', 'wait', 'stop'] }, work_id: { type: 'string' }, wait_secs: { type: 'integer', minimum: 0 } },
      required: ['operation', 'work_id'],
    });
    expect(BACKGROUND_COMMAND_INPUT_SCHEMA).not.toMatch(/\s/);
  });

  it('accepts the three operations with a well-formed work id, wait_secs optional', () => {
    expect(parseBackgroundCommandInput({ operation: 'wait', work_id: 'wrk_0a', wait_secs: 30 })).toEqual({
      ok: true,
      input: { operation: 'wait', work_id: 'wrk_0a', wait_secs: 30, tail_bytes: null, until: null },
    });
    expect(parseBackgroundCommandInput({ operation: 'status', work_id: 'wrk_0a' })).toMatchObject({ ok: true, input: { wait_secs: null } });
    expect(parseBackgroundCommandInput({ operation: 'stop', work_id: 'wrk_0a', wait_secs: 5 })).toMatchObject({ ok: true });
  });

  it('refuses a missing or unknown operation, a missing or malformed work id, and a bad wait_secs', () => {
    for (const bad of [
      { work_id: 'wrk_0a' },
      { operation: 'Status', work_id: 'wrk_0a' },
      { operation: 'status' },
      { operation: 'status', work_id: 'job-1' },
      { operation: 'wait', work_id: 'wrk_0a', wait_secs: -1 },
      { operation: 'wait', work_id: 'wrk_0a', wait_secs: 1.5 },
      { operation: 'wait', work_id: 'wrk_0a', wait_secs: '3' },
      null,
      [],
      'status',
    ]) {
      expect(parseBackgroundCommandInput(bad).ok).toBe(false);
    }
  });

  it('accepts serve extensions only when extended: status without a work id, tail_bytes, until', () => {
    expect(parseBackgroundCommandInput({ operation: 'status' }, { extended: true })).toMatchObject({ ok: true, input: { work_id: null } });
    expect(parseBackgroundCommandInput({ operation: 'wait' }, { extended: true }).ok).toBe(false);
    const parsed = parseBackgroundCommandInput({ operation: 'wait', work_id: 'wrk_0a', until: 'listening on \\d+', tail_bytes: 100 }, { extended: true });
    expect(parsed.ok && parsed.input.until?.test('server listening on 8080')).toBe(true);
    expect(parsed.ok && parsed.input.tail_bytes).toBe(100);
    expect(parseBackgroundCommandInput({ operation: 'wait', work_id: 'wrk_0a', until: '(' }, { extended: true }).ok).toBe(false);
    expect(parseBackgroundCommandInput({ operation: 'status', work_id: 'wrk_0a', until: 'x' }, { extended: true }).ok).toBe(false);
    expect(parseBackgroundCommandInput({ operation: 'status', work_id: 'wrk_0a', tail_bytes: 16385 }, { extended: true }).ok).toBe(false);
    expect(parseBackgroundCommandInput({ operation: 'wait', work_id: 'wrk_0a', until: 'x' })).toMatchObject({ ok: true, input: { until: null } });
  });

  it('accepts since (with until) and write (input, input_base64, close_stdin) only when extended', () => {
    const wait = (extra: Record<string, unknown>): ReturnType<typeof parseBackgroundCommandInput> => parseBackgroundCommandInput({ operation: 'wait', work_id: 'wrk_0a', until: 'x', ...extra }, { extended: true });
    expect(wait({})).toMatchObject({ ok: true, input: { since: 'now' } });
    expect(wait({ since: 'start' })).toMatchObject({ ok: true, input: { since: 'start' } });
    expect(wait({ since: 42 })).toMatchObject({ ok: true, input: { since: 42 } });
    for (const bad of [-1, 1.5, 'later', true]) expect(wait({ since: bad }).ok).toBe(false);
    expect(parseBackgroundCommandInput({ operation: 'wait', work_id: 'wrk_0a', since: 'start' }, { extended: true })).toMatchObject({ ok: false, error: expect.stringContaining('only for a wait with until') });
    const write = (extra: Record<string, unknown>): ReturnType<typeof parseBackgroundCommandInput> => parseBackgroundCommandInput({ operation: 'write', work_id: 'wrk_0a', ...extra }, { extended: true });
    const text = write({ input: 'é\n' });
    expect(text.ok && [...(text.input.input ?? [])]).toEqual([0xc3, 0xa9, 0x0a]);
    const bytes = write({ input_base64: Buffer.from([0, 255]).toString('base64'), close_stdin: true });
    expect(bytes.ok && [[...(bytes.input.input ?? [])], bytes.input.close_stdin]).toEqual([[0, 255], true]);
    expect(write({ close_stdin: true })).toMatchObject({ ok: true, input: { close_stdin: true } });
    expect(write({}).ok).toBe(false);
    expect(write({ input: 'a', input_base64: 'YQ==' }).ok).toBe(false);
    expect(write({ input_base64: 'not base64!' }).ok).toBe(false);
    expect(parseBackgroundCommandInput({ operation: 'status', work_id: 'wrk_0a', input: 'x' }, { extended: true }).ok).toBe(false);
    expect(parseBackgroundCommandInput({ operation: 'write', work_id: 'wrk_0a', input: 'x' }).ok).toBe(false);
  });
});
