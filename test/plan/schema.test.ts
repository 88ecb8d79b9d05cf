import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PlanStep } from '../../machines/contracts.js';
import { parsePlanText, planJsonSchema, readPlanFile, stepKind } from '../../src/plan/schema.js';
import { planOf } from './support.js';

const PARSE_PREFIX = 'failed to parse plan JSON: ';
/** A plan that is JSON but not a plan's shape says so (changed from the bare `PARSE_PREFIX`: it read like a JSON syntax error). */
const SHAPE_PREFIX = `${PARSE_PREFIX}plan shape error (valid JSON, not a plan): `;

/** The parse error of `text`, failing the test when it parses. */
function parseError(text: string): string {
  const parsed = parsePlanText(text);
  if (parsed.ok) throw new Error(`expected a parse failure for ${text}`);
  return parsed.error;
}

describe('readPlanFile', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'plan-read-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads the text of an existing file', async () => {
    const path = join(dir, 'plan.json');
    await writeFile(path, '{"id":"p","steps":[]}');
    expect(await readPlanFile(path)).toEqual({ ok: true, text: '{"id":"p","steps":[]}' });
  });

  it('names a missing file by the path as given', async () => {
    expect(await readPlanFile('plans/nope.json')).toEqual({
      ok: false,
      error: 'failed to read plan file plans/nope.json: it does not exist',
    });
  });

  it('reports any other read error with the io error text and no path prefix', async () => {
    const outcome = await readPlanFile(dir);
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect(outcome.error).toMatch(/^failed to read plan file: EISDIR/);
  });

  it('refuses bytes that are not UTF-8', async () => {
    const path = join(dir, 'latin1.json');
    await writeFile(path, Buffer.from([0x7b, 0xe9, 0x7d]));
    expect(await readPlanFile(path)).toEqual({
      ok: false,
      error: 'failed to read plan file: stream did not contain valid UTF-8',
    });
  });

  it('reports an unreadable file as a read error', async () => {
    if (process.getuid?.() === 0) return; // root reads anything
    const path = join(dir, 'locked.json');
    await writeFile(path, '{}');
    await chmod(path, 0o000);
    const outcome = await readPlanFile(path);
    expect(outcome).toEqual({ ok: false, error: expect.stringMatching(/^failed to read plan file: EACCES/) });
  });
});

describe('parsePlanText', () => {
  describe('reading and parsing cases', () => {
    it('refuses text that is not JSON (A2)', () => {
      expect(parseError('{"id": "p", "steps": [')).toMatch(/^failed to parse plan JSON: invalid JSON: /);
      // A JSON syntax error is never called a shape error (and the other way round, below).
      expect(parseError('{"id": "p", "steps": [')).not.toContain('plan shape error');
    });

    it.each([
      ['{"id":"p","steps":[{"id":"a","tool":"echo","retries":-1}]}', 'steps[0].retries'],
      ['{"id":"p","steps":[{"id":"a","tool":"echo","depends_on":null}]}', 'steps[0].depends_on'],
      ['{"id":"p","steps":[{"id":"a","tool":"echo","on_error":null}]}', 'steps[0].on_error'],
      ['{"id":"p","steps":[{"id":"a","tool":7}]}', 'steps[0].tool'],
    ])('refuses the bad field types of A4: %s', (text, path) => {
      const error = parseError(text);
      expect(error.startsWith(`${SHAPE_PREFIX}${path}: `)).toBe(true);
    });

    it('names the path, the allowed range and the value for a negative retries', () => {
      expect(parseError('{"id":"p","steps":[{"id":"a","tool":"echo","retries":-1}]}')).toBe(
        'failed to parse plan JSON: plan shape error (valid JSON, not a plan): steps[0].retries: expected an integer from 0 to 4294967295, got -1',
      );
    });

    it('reads null tool/shell/capsule/if as absent (A5)', () => {
      const plan = planOf('{"id":"p","steps":[{"id":"a","tool":"echo","shell":null,"capsule":null,"if":null}]}');
      const [step] = plan.steps;
      expect(step).toEqual({ id: 'a', tool: 'echo', input: null, depends_on: [], on_error: 'fail', retries: 0 });
      expect(step && 'shell' in step).toBe(false);
      expect(step && 'if' in step).toBe(false);
      expect(step && stepKind(step)).toBe('tool');
    });
  });

  describe('defaults and accepted values', () => {
    it('applies the defaults of docs/plan-format.md#parse-rules', () => {
      expect(planOf('{"id":"p","steps":[{"id":"a","shell":"bash -c true"}]}').steps[0]).toEqual({
        id: 'a',
        shell: 'bash -c true',
        input: null,
        depends_on: [],
        on_error: 'fail',
        retries: 0,
      });
    });

    it('keeps every declared field', () => {
      const text = JSON.stringify({
        id: 'p',
        steps: [
          {
            id: 's',
            capsule: 'worker',
            input: { objective: '$a.output' },
            depends_on: ['a'],
            if: "$a.status == 'success'",
            on_error: 'continue',
            retries: 1,
            timeout_secs: 2.5,
          },
        ],
      });
      expect(planOf(text).steps[0]).toEqual({
        id: 's',
        capsule: 'worker',
        input: { objective: '$a.output' },
        depends_on: ['a'],
        if: "$a.status == 'success'",
        on_error: 'continue',
        retries: 1,
        timeout_secs: 2.5,
      });
    });

    it('reads input null the same as input absent', () => {
      expect(planOf('{"id":"p","steps":[{"id":"a","tool":"x","input":null}]}').steps[0]?.input).toBeNull();
    });

    it('accepts an empty steps array', () => {
      expect(planOf('{"id":"p","steps":[]}')).toEqual({ id: 'p', steps: [] });
    });

    it('accepts retries 0 and 4294967295', () => {
      expect(planOf('{"id":"p","steps":[{"id":"a","retries":0}]}').steps[0]?.retries).toBe(0);
      expect(planOf('{"id":"p","steps":[{"id":"a","retries":4294967295}]}').steps[0]?.retries).toBe(4294967295);
    });

    it('accepts retries written as 2.0 as 2 (the accepted divergence of docs/plan-format.md#parse-rules)', () => {
      expect(planOf('{"id":"p","steps":[{"id":"a","retries":2.0}]}').steps[0]?.retries).toBe(2);
    });

    it('accepts any on_error string (validation checks the value)', () => {
      expect(planOf('{"id":"p","steps":[{"id":"a","on_error":"Retry"}]}').steps[0]?.on_error).toBe('Retry');
    });

    it('keeps empty strings as declarations', () => {
      const plan = planOf('{"id":"p","steps":[{"id":"t","tool":""},{"id":"s","shell":""},{"id":"i","tool":"x","if":""}]}');
      expect(plan.steps[0]?.tool).toBe('');
      expect(plan.steps[1]?.shell).toBe('');
      expect(plan.steps[2]?.if).toBe('');
    });

    it('accepts any step id string, including dots and __proto__', () => {
      const plan = planOf('{"id":"p","steps":[{"id":"a.b"},{"id":"__proto__"}]}');
      expect(plan.steps.map((step) => step.id)).toEqual(['a.b', '__proto__']);
    });

    it('drops unknown keys from the parsed plan', () => {
      const plan = planOf('{"id":"p","extra":1,"steps":[{"id":"a","tool":"x","note":"hi"}]}');
      expect(plan).toEqual({
        id: 'p',
        steps: [{ id: 'a', tool: 'x', input: null, depends_on: [], on_error: 'fail', retries: 0 }],
      });
    });

    // JSON.parse would keep the last 'tool' ('y') without a word; Murmur's reader refuses the
    // plan, and so does ours (docs/plan-format.md#parse-rules).
    it('refuses an object that writes a key twice, naming the key, its JSON path, both places and the fix', () => {
      const text = '{"id":"p","steps":[{"id":"a","tool":"x","tool":"y"}]}';
      const parsed = parsePlanText(text);
      expect(parsed).toEqual({
        ok: false,
        error: `${PARSE_PREFIX}duplicate key 'tool' at steps[0].tool (line 1, column 41), first written at line 1, column 30: remove one of them`,
        at: { duplicateKey: { key: 'tool', path: ['steps', 0, 'tool'], position: { line: 1, column: 41, offset: 40 }, first: { line: 1, column: 30, offset: 29 } } },
      });
      expect(parseError('{"id":"p","id":"q","steps":[]}')).toBe(`${PARSE_PREFIX}duplicate key 'id' at id (line 1, column 11), first written at line 1, column 2: remove one of them`);
    });
  });

  describe('parse failures', () => {
    it.each<[string, string]>([
      ['[1]', 'top level: expected a JSON object with "id" (a string) and "steps" (an array), got an array'],
      ['"plan"', 'top level: expected a JSON object with "id" (a string) and "steps" (an array), got the string "plan"'],
      ['{"steps":[]}', 'id: expected the plan id as a string, got nothing (the key is missing)'],
      ['{"id":"p"}', 'steps: expected an array of step objects (it may be empty), got nothing (the key is missing)'],
      ['{"id":"p","steps":null}', 'steps: expected an array of step objects (it may be empty), got null'],
      ['{"id":"p","steps":["a"]}', 'steps[0]: expected a step object such as { "id": "a", "tool": "echo" }, got the string "a"'],
      ['{"id":"p","steps":[{"tool":"x"}]}', 'steps[0].id: expected the step id as a string, got nothing (the key is missing)'],
      ['{"id":"p","steps":[{"id":1}]}', 'steps[0].id: expected the step id as a string, got 1'],
      ['{"id":"p","steps":[{"id":"a","if":true}]}', 'steps[0].if: expected a string, or null (the same as leaving the key out), got true'],
      ['{"id":"p","steps":[{"id":"a","shell":["ls"]}]}', 'steps[0].shell: expected a string, or null (the same as leaving the key out), got an array'],
      ['{"id":"p","steps":[{"id":"a","depends_on":"b"}]}', 'steps[0].depends_on: expected an array of step id strings (leave the key out for no dependencies; null is not accepted), got the string "b"'],
      ['{"id":"p","steps":[{"id":"a","depends_on":["b",2]}]}', 'steps[0].depends_on[1]: expected a step id string, got 2'],
      ['{"id":"p","steps":[{"id":"a","retries":null}]}', 'steps[0].retries: expected an integer from 0 to 4294967295, got null'],
      ['{"id":"p","steps":[{"id":"a","retries":1.5}]}', 'steps[0].retries: expected an integer from 0 to 4294967295, got 1.5'],
      ['{"id":"p","steps":[{"id":"a","retries":4294967296}]}', 'steps[0].retries: expected an integer from 0 to 4294967295, got 4294967296'],
      ['{"id":"p","steps":[{"id":"a","retries":"1"}]}', 'steps[0].retries: expected an integer from 0 to 4294967295, got the string "1"'],
      ['{"id":"p","steps":[{"id":"a","timeout_secs":0}]}', 'steps[0].timeout_secs: expected a positive number of seconds (leave the key out for no bound), got 0'],
      ['{"id":"p","steps":[{"id":"a","timeout_secs":null}]}', 'steps[0].timeout_secs: expected a positive number of seconds (leave the key out for no bound), got null'],
    ])('refuses %s', (text, detail) => {
      expect(parseError(text)).toBe(SHAPE_PREFIX + detail);
    });

    it('lists at most three problems, one per path, then counts the rest', () => {
      const error = parseError('{"id":"p","steps":[{"tool":7,"shell":7,"capsule":7,"if":7,"retries":-1.5}]}');
      expect(error).toBe(
        SHAPE_PREFIX +
          'steps[0].id: expected the step id as a string, got nothing (the key is missing); ' +
          'steps[0].tool: expected a string, or null (the same as leaving the key out), got 7; ' +
          'steps[0].shell: expected a string, or null (the same as leaving the key out), got 7; and 3 more problems',
      );
    });

    it('refuses JSON nested more than 128 levels deep', () => {
      const deep = `${'['.repeat(200)}${']'.repeat(200)}`;
      expect(parseError(`{"id":"p","steps":[{"id":"a","tool":"x","input":${deep}}]}`)).toBe(
        `${PARSE_PREFIX}arrays and objects are nested more than 128 levels deep`,
      );
    });
  });

  describe('unknown-key warnings', () => {
    it("names the step, its id and the closest known key: 'depends-on' → 'depends_on'", () => {
      const parsed = parsePlanText(
        '{"id":"p","steps":[{"id":"a","tool":"x"},{"id":"b","tool":"x","depends-on":["a"]}]}',
      );
      expect(parsed).toMatchObject({
        ok: true,
        warnings: [
          {
            path: 'steps[1]',
            key: 'depends-on',
            suggestion: 'depends_on',
            message: "steps[1] (id 'b'): unknown key 'depends-on' (did you mean 'depends_on'?)",
          },
        ],
      });
    });

    it("warns about an unknown key in a step's cache ('input' → 'inputs'), which would leave the files out of its key", () => {
      const parsed = parsePlanText('{"id":"p","steps":[{"id":"a","shell":"true","cache":{"input":["src/**"],"outputs":["out/**"]}}]}');
      expect(parsed).toMatchObject({
        ok: true,
        warnings: [{ path: 'steps[0].cache', key: 'input', suggestion: 'inputs', message: "steps[0].cache: unknown key 'input' (did you mean 'inputs'?)" }],
      });
    });

    it('warns about unknown top-level keys', () => {
      const parsed = parsePlanText('{"id":"p","step":[],"steps":[]}');
      expect(parsed).toMatchObject({
        ok: true,
        warnings: [{ path: '', key: 'step', suggestion: 'steps', message: "top level: unknown key 'step' (did you mean 'steps'?)" }],
      });
    });

    it('gives no suggestion when nothing is close, and lists the known keys', () => {
      const parsed = parsePlanText('{"id":"p","steps":[{"id":"a","tool":"x","description":"hi"}]}');
      expect(parsed).toMatchObject({
        ok: true,
        warnings: [
          {
            path: 'steps[0]',
            key: 'description',
            suggestion: null,
            message:
              "steps[0] (id 'a'): unknown key 'description' is ignored (known keys: id, tool, shell, capsule, input, depends_on, if, on_error, retries, timeout_secs, stdin, env, cwd, retry_delay_secs, always, matrix, cache)",
          },
        ],
      });
    });

    it('suggests within max(2, length/3) edits: retires → retries, dependsOn → depends_on (retry and timeout: by prefix, below)', () => {
      const parsed = parsePlanText('{"id":"p","steps":[{"id":"a","retires":1,"dependsOn":[]}]}');
      expect(parsed.ok && parsed.warnings.map((w) => [w.key, w.suggestion])).toEqual([
        ['retires', 'retries'],
        ['dependsOn', 'depends_on'],
      ]);
    });

    it('suggests the key an unknown key is a truncation of: retry → retries, timeout → timeout_secs, dep → depends_on, Inp → input', () => {
      const parsed = parsePlanText('{"id":"p","steps":[{"id":"a","tool":"x","retry":1,"timeout":5,"dep":[],"Inp":1,"retri":2}]}');
      expect(parsed.ok && parsed.warnings.map((w) => [w.key, w.suggestion])).toEqual([
        ['retry', 'retries'],
        ['timeout', 'timeout_secs'],
        ['dep', 'depends_on'],
        ['Inp', 'input'],
        ['retri', 'retries'],
      ]);
      expect(parsed.ok && parsed.warnings[1]?.message).toBe("steps[0] (id 'a'): unknown key 'timeout' (did you mean 'timeout_secs'?)");
    });

    it('suggests the key a short truncation begins before a short key a few edits away: std → stdin, tim → timeout_secs, not id', () => {
      const parsed = parsePlanText('{"id":"p","steps":[{"id":"a","tool":"x","std":"","tim":5,"ids":1}]}');
      expect(parsed.ok && parsed.warnings.map((w) => [w.key, w.suggestion])).toEqual([
        ['std', 'stdin'],
        ['tim', 'timeout_secs'],
        ['ids', 'id'],
      ]);
    });

    it('suggests no key by prefix when the key is a truncation of none, and lists the known keys instead', () => {
      const parsed = parsePlanText('{"id":"p","steps":[{"id":"a","tool":"x","vars":1,"stdout":1,"dependencies":[]}]}');
      expect(parsed.ok && parsed.warnings.map((w) => [w.key, w.suggestion])).toEqual([
        ['vars', null],
        ['stdout', null],
        ['dependencies', null],
      ]);
      expect(parsed.ok && parsed.warnings[1]?.message).toBe(
        "steps[0] (id 'a'): unknown key 'stdout' is ignored (known keys: id, tool, shell, capsule, input, depends_on, if, on_error, retries, timeout_secs, stdin, env, cwd, retry_delay_secs, always, matrix, cache)",
      );
    });

    it('does not look for unknown keys inside input', () => {
      const parsed = parsePlanText('{"id":"p","steps":[{"id":"a","tool":"x","input":{"tol":1}}]}');
      expect(parsed).toEqual(expect.objectContaining({ ok: true, warnings: [] }));
    });
  });
});

describe('stepKind', () => {
  const step = (kinds: Partial<Pick<PlanStep, 'tool' | 'shell' | 'capsule'>>): PlanStep => ({
    id: 's',
    input: null,
    depends_on: [],
    on_error: 'fail',
    retries: 0,
    ...kinds,
  });

  it.each<[Partial<Pick<PlanStep, 'tool' | 'shell' | 'capsule'>>, string]>([
    [{ tool: 'echo' }, 'tool'],
    [{ shell: '' }, 'shell'],
    [{ capsule: 'worker' }, 'capsule'],
    [{}, 'unknown'],
    [{ tool: 'echo', shell: 'ls' }, 'unknown'],
    [{ tool: 'a', shell: 'b', capsule: 'c' }, 'unknown'],
  ])('names %j as %s', (kinds, kind) => {
    expect(stepKind(step(kinds))).toBe(kind);
  });
});

describe('planJsonSchema', () => {
  it('matches the committed schema/plan.schema.json', async () => {
    const committed = await readFile(fileURLToPath(new URL('../../schema/plan.schema.json', import.meta.url)), 'utf8');
    expect(JSON.parse(committed)).toEqual(planJsonSchema());
  });

  it('describes the input side: null kinds allowed, only id required for a step', () => {
    const schema = planJsonSchema() as {
      required: string[];
      properties: { steps: { items: { required: string[]; properties: Record<string, { type?: unknown }> } } };
    };
    expect(schema.required).toEqual(['id', 'steps']);
    expect(schema.properties.steps.items.required).toEqual(['id']);
    expect(schema.properties.steps.items.properties['tool']?.type).toEqual(['string', 'null']);
  });
});
