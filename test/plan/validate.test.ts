import type { JsonValue } from '../../machines/contracts.js';
import { evaluateCondition } from '../../src/plan/condition.js';
import { interpolateInput } from '../../src/plan/interpolate.js';
import {
  capsuleTaskText,
  conditionReferenceTokens,
  PLAN_SUBMISSION_TOOL,
  TURN_ONLY_TOOLS,
  validatePlan,
} from '../../src/plan/validate.js';
import { DEFAULT_CTX, planFrom, planOf, resultsOf } from './support.js';

/** Validates plan JSON text under the default setup (`test/plan/support.ts`). */
const validate = (text: string, ctx = DEFAULT_CTX) => validatePlan(planOf(text), ctx);

/** Validates `{"id":"p","steps":[{"id":"w","capsule":"worker","input":INPUT}]}`. */
const validateCapsuleInput = (input: JsonValue | undefined) =>
  validatePlan(
    planFrom({ id: 'p', steps: [{ id: 'w', capsule: 'worker', ...(input === undefined ? {} : { input }) }] }),
    DEFAULT_CTX,
  );

describe('validatePlan', () => {
  it('accepts a valid plan', () => {
    expect(
      validate(
        JSON.stringify({
          id: 'p',
          steps: [
            { id: 'fetch', tool: 'echo', input: { url: 'https://example.com' } },
            { id: 'count', shell: 'printf x', depends_on: ['fetch'] },
            {
              id: 'summarise',
              capsule: 'worker',
              depends_on: ['count'],
              input: { objective: '$count.output' },
              if: "$count.status == 'success'",
              on_error: 'continue',
              retries: 1,
            },
          ],
        }),
      ),
    ).toBeNull();
  });

  it('accepts an empty plan', () => {
    expect(validate('{"id":"p","steps":[]}')).toBeNull();
  });

  describe('rule 1: unique ids', () => {
    it('blames the repeated id (B7)', () => {
      expect(validate('{"id":"p","steps":[{"id":"a","tool":"echo"},{"id":"a","tool":"echo"}]}')).toEqual({
        step_id: 'a',
        error: "duplicate step id 'a'",
      });
    });

    it('reports the duplicate before the repeated step’s own kind problem', () => {
      expect(validate('{"id":"p","steps":[{"id":"a","tool":"echo"},{"id":"a"}]}')).toEqual({
        step_id: 'a',
        error: "duplicate step id 'a'",
      });
    });

    it('handles ids such as __proto__ and constructor like any other', () => {
      expect(validate('{"id":"p","steps":[{"id":"__proto__","tool":"echo"},{"id":"constructor","tool":"echo"}]}')).toBeNull();
      expect(validate('{"id":"p","steps":[{"id":"__proto__","tool":"echo"},{"id":"__proto__","tool":"echo"}]}')).toEqual({
        step_id: '__proto__',
        error: "duplicate step id '__proto__'",
      });
    });
  });

  describe('rule 2: exactly one kind', () => {
    it('refuses a step with no kind (B8)', () => {
      expect(validate('{"id":"p","steps":[{"id":"s"}]}')).toEqual({
        step_id: 's',
        error: 'step must declare exactly one of tool, shell, or capsule',
      });
    });

    it('refuses a step whose kinds are all null', () => {
      expect(validate('{"id":"p","steps":[{"id":"s","tool":null,"shell":null,"capsule":null}]}')).toEqual({
        step_id: 's',
        error: 'step must declare exactly one of tool, shell, or capsule',
      });
    });

    it('refuses a step with two kinds', () => {
      expect(validate('{"id":"p","steps":[{"id":"s","tool":"echo","shell":"bash"}]}')).toEqual({
        step_id: 's',
        error: 'step declares more than one of tool, shell, or capsule',
      });
    });

    it('counts an empty string as a declaration', () => {
      expect(validate('{"id":"p","steps":[{"id":"s","tool":"","capsule":""}]}')).toEqual({
        step_id: 's',
        error: 'step declares more than one of tool, shell, or capsule',
      });
    });
  });

  describe('rule 3t: tool steps', () => {
    it('refuses a tool that is not installed (B10)', () => {
      expect(validate('{"id":"p","steps":[{"id":"bad","tool":"nonexistent"}]}')).toEqual({
        step_id: 'bad',
        error: "tool 'nonexistent' is not installed",
      });
    });

    it('refuses an empty tool name as not installed', () => {
      expect(validate('{"id":"p","steps":[{"id":"t","tool":""}]}')).toEqual({
        step_id: 't',
        error: "tool '' is not installed",
      });
    });

    it('refuses the plan-submission tool even when it is installed (B11)', () => {
      const ctx = { ...DEFAULT_CTX, installedTools: new Set([...DEFAULT_CTX.installedTools, PLAN_SUBMISSION_TOOL]) };
      const failure = validate(`{"id":"p","steps":[{"id":"nest","tool":"${PLAN_SUBMISSION_TOOL}"}]}`, ctx);
      expect(failure?.step_id).toBe('nest');
      expect(failure?.error).toContain('cannot submit another plan');
      expect(failure?.error).toContain("'submit-plan' is not callable from inside a plan");
    });

    it('names the plan-submission tool submit-plan', () => {
      expect(PLAN_SUBMISSION_TOOL).toBe('submit-plan');
    });

    it.each(['switch-driver', 'end-without-answer', 'pull-artifact', 'remove-artifact'])(
      'refuses the turn-only tool %s even when it is installed',
      (tool) => {
        expect(TURN_ONLY_TOOLS).toContain(tool);
        const ctx = { ...DEFAULT_CTX, installedTools: new Set([tool]) };
        expect(validate(`{"id":"p","steps":[{"id":"t","tool":"${tool}"}]}`, ctx)).toEqual({
          step_id: 't',
          error: `'${tool}' is not callable from inside a plan`,
        });
      },
    );

    it('checks forbidden tools (3t-i, 3t-ii) before installation (3t-iii)', () => {
      const empty = { ...DEFAULT_CTX, installedTools: new Set<string>() };
      expect(validate('{"id":"p","steps":[{"id":"t","tool":"submit-plan"}]}', empty)?.error).toContain(
        'cannot submit another plan',
      );
      expect(validate('{"id":"p","steps":[{"id":"t","tool":"pull-artifact"}]}', empty)).toEqual({
        step_id: 't',
        error: "'pull-artifact' is not callable from inside a plan",
      });
    });
  });

  describe('rule 3s: shell steps', () => {
    it('refuses a binary outside capabilities.shell.allow (B13)', () => {
      expect(validate('{"id":"p","steps":[{"id":"py","shell":"python3 -c 1"}]}')).toEqual({
        step_id: 'py',
        error: "binary 'python3' is not in capabilities.shell.allow",
      });
    });

    it.each(['', '   ', "''"])('refuses the empty shell command %j (B14)', (shell) => {
      expect(validatePlan(planFrom({ id: 'p', steps: [{ id: 's', shell }] }), DEFAULT_CTX)).toEqual({
        step_id: 's',
        error: 'shell command is empty',
      });
    });

    it('compares the binary by exact string equality', () => {
      expect(validate('{"id":"p","steps":[{"id":"s","shell":"/bin/bash -c true"}]}')).toEqual({
        step_id: 's',
        error: "binary '/bin/bash' is not in capabilities.shell.allow",
      });
    });

    it('takes the binary after word splitting, so quotes around it do not matter', () => {
      expect(validate(`{"id":"p","steps":[{"id":"s","shell":"'bash' -c 'exit 3'"}]}`)).toBeNull();
    });
  });

  describe('rule 3c: capsule input shapes (docs/plan-format.md#capsule-input)', () => {
    it('refuses keys the child cannot receive (C23)', () => {
      const failure = validateCapsuleInput({ task: 'hello' });
      expect(failure?.step_id).toBe('w');
      expect(failure?.error).toContain('keys the child cannot receive: task');
      expect(failure?.error).toContain('"objective"');
    });

    it('lists the extra keys sorted and joined by ", ", without objective', () => {
      const failure = validateCapsuleInput({ render_as: 'json', objective: 'x', instructions: 'y' });
      expect(failure?.error).toContain('keys the child cannot receive: instructions, render_as;');
    });

    it('sorts the extra keys by code point', () => {
      const failure = validateCapsuleInput({ b: 1, B: 1, '😀': 1, '！': 1 });
      expect(failure?.error).toContain('keys the child cannot receive: B, b, ！, 😀;');
    });

    it('checks extra keys before a non-string objective', () => {
      expect(validateCapsuleInput({ objective: 7, zz: 1 })?.error).toContain('keys the child cannot receive: zz');
    });

    it.each<JsonValue>([7, null, { text: 'x' }, ['x'], true])(
      'refuses the non-string objective %j (C25)',
      (objective) => {
        expect(validateCapsuleInput({ objective })).toEqual({
          step_id: 'w',
          error: 'capsule step input "objective" must be a string',
        });
      },
    );

    it('refuses an empty object (C26)', () => {
      expect(validateCapsuleInput({})).toEqual({
        step_id: 'w',
        error: 'capsule step input must be a string or { "objective": "<text>" }',
      });
    });

    it('refuses a boolean, a number and an array with their own endings (C27)', () => {
      const prefix = 'capsule step input must be a string or { "objective": "<text>" }, not ';
      expect(validateCapsuleInput(true)?.error).toBe(`${prefix}a boolean`);
      expect(validateCapsuleInput(3)?.error).toBe(`${prefix}a number`);
      expect(validateCapsuleInput(['x'])?.error).toBe(`${prefix}an array`);
    });

    it('refuses absent and null input with the same no-input text (C28)', () => {
      const absent = validateCapsuleInput(undefined);
      const nulled = validateCapsuleInput(null);
      expect(absent).toEqual(nulled);
      expect(absent?.error).toContain('has no input');
      expect(absent?.error).toContain('task text');
    });

    it.each<JsonValue>(['$analyse.output', '', { objective: '$analyse.output' }, { objective: '' }])(
      'accepts the input %j (C29)',
      (input) => {
        const plan = planFrom({
          id: 'p',
          steps: [
            { id: 'analyse', tool: 'echo' },
            { id: 'w', capsule: 'worker', depends_on: ['analyse'], input },
          ],
        });
        expect(validatePlan(plan, DEFAULT_CTX)).toBeNull();
      },
    );

    it('does not check spawn_allow: a capsule step naming anything passes', () => {
      expect(validate('{"id":"p","steps":[{"id":"w","capsule":"anything/at-all","input":"go"}]}')).toBeNull();
    });
  });

  describe('rule 4: on_error', () => {
    it.each(['fail', 'skip', 'continue'])('accepts %s', (policy) => {
      expect(validate(`{"id":"p","steps":[{"id":"a","tool":"echo","on_error":"${policy}"}]}`)).toBeNull();
    });

    it.each(['Fail', 'retry', ''])('refuses %j (case-sensitive)', (policy) => {
      expect(validate(`{"id":"p","steps":[{"id":"a","tool":"echo","on_error":"${policy}"}]}`)).toEqual({
        step_id: 'a',
        error: `invalid on_error policy '${policy}'`,
      });
    });

    it('checks the kind rules before on_error', () => {
      expect(validate('{"id":"p","steps":[{"id":"a","tool":"nope","on_error":"bad"}]}')?.error).toBe(
        "tool 'nope' is not installed",
      );
    });
  });

  describe('rule 5: dependencies', () => {
    it('blames the first unknown dependency in array order (B16)', () => {
      expect(
        validate('{"id":"p","steps":[{"id":"a","tool":"echo"},{"id":"b","tool":"echo","depends_on":["a","zzz","yyy"]}]}'),
      ).toEqual({ step_id: 'b', error: "unknown dependency 'zzz'" });
    });

    it('accepts a dependency on a step declared later', () => {
      expect(validate('{"id":"p","steps":[{"id":"x","tool":"echo","depends_on":["y"]},{"id":"y","tool":"echo"}]}')).toBeNull();
    });

    it('does not refuse self-dependencies or cycles (the scheduler finds them)', () => {
      expect(validate('{"id":"p","steps":[{"id":"a","tool":"echo","depends_on":["a"]}]}')).toBeNull();
      expect(
        validate('{"id":"p","steps":[{"id":"a","tool":"echo","depends_on":["b"]},{"id":"b","tool":"echo","depends_on":["a"]}]}'),
      ).toBeNull();
    });
  });

  describe('rule 6: references', () => {
    it('refuses an unknown step in a nested input reference (B17)', () => {
      expect(validate('{"id":"p","steps":[{"id":"a","tool":"echo","input":{"list":[1,{"x":"$nope.output"}]}}]}')).toEqual({
        step_id: 'a',
        error: "unknown reference '$nope.output'",
      });
    });

    it('refuses an unknown field of a known step', () => {
      expect(
        validate('{"id":"p","steps":[{"id":"a","tool":"echo"},{"id":"b","tool":"echo","input":"$a.stdout"}]}'),
      ).toEqual({ step_id: 'b', error: "unknown reference field 'stdout'" });
    });

    it('refuses $5.00 as an unknown reference when no step 5 exists', () => {
      expect(validate('{"id":"p","steps":[{"id":"a","tool":"echo","input":{"price":"$5.00"}}]}')).toEqual({
        step_id: 'a',
        error: "unknown reference '$5.00'",
      });
    });

    it('refuses $5.00 as an unknown field 00 when a step 5 exists', () => {
      expect(
        validate('{"id":"p","steps":[{"id":"5","tool":"echo"},{"id":"a","tool":"echo","input":{"price":"$5.00"}}]}'),
      ).toEqual({ step_id: 'a', error: "unknown reference field '00'" });
    });

    it('accepts a reference to a step id with dots', () => {
      expect(
        validate('{"id":"p","steps":[{"id":"a.b","tool":"echo"},{"id":"c","tool":"echo","input":"$a.b.output"}]}'),
      ).toBeNull();
    });

    it('accepts references to steps outside depends_on', () => {
      expect(validate('{"id":"p","steps":[{"id":"a","tool":"echo"},{"id":"b","tool":"echo","input":"$a.output"}]}')).toBeNull();
    });

    it('ignores object keys and embedded text', () => {
      expect(
        validate('{"id":"p","steps":[{"id":"a","tool":"echo","input":{"$nope.output":"total: $nope.output"}}]}'),
      ).toBeNull();
    });

    it('refuses an unknown step named in a condition (B19a)', () => {
      expect(validate(`{"id":"p","steps":[{"id":"a","tool":"echo","if":"$ghost.status == 'success'"}]}`)).toEqual({
        step_id: 'a',
        error: "unknown reference '$ghost.status'",
      });
    });

    it('strips a trailing parenthesis before checking a condition token (B19b)', () => {
      expect(validate(`{"id":"p","steps":[{"id":"a","tool":"echo","if":"'x' == $ghost.status)"}]}`)).toEqual({
        step_id: 'a',
        error: "unknown reference '$ghost.status'",
      });
    });

    it('does not look at a token starting with ( and the evaluator then refuses it (B19c)', () => {
      const plan = planOf(
        `{"id":"p","steps":[{"id":"a","tool":"echo"},{"id":"b","tool":"echo","depends_on":["a"],"if":"($a.status == 'success')"}]}`,
      );
      expect(validatePlan(plan, DEFAULT_CTX)).toBeNull();
      expect(evaluateCondition(plan.steps[1]?.if, resultsOf({ a: ['success', 'ok'] }))).toEqual({
        ok: false,
        error: "unsupported condition operand '($a.status'",
      });
    });

    it('refuses a condition written without spaces through its field part (B20)', () => {
      expect(
        validate(
          `{"id":"p","steps":[{"id":"a","tool":"echo"},{"id":"b","tool":"echo","depends_on":["a"],"if":"$a.status=='success'"}]}`,
        ),
      ).toEqual({ step_id: 'b', error: "unknown reference field 'status=='success''" });
    });

    it('passes a $word without a dot, which then fails at dispatch (B22)', () => {
      const plan = planOf('{"id":"p","steps":[{"id":"a","tool":"echo","input":{"home":"$HOME"},"retries":1}]}');
      expect(validatePlan(plan, DEFAULT_CTX)).toBeNull();
      expect(interpolateInput(plan.steps[0]?.input ?? null, resultsOf({}))).toEqual({
        ok: false,
        error: "invalid reference '$HOME'",
      });
    });

    it('ignores a $word without a dot in a condition', () => {
      expect(validate(`{"id":"p","steps":[{"id":"a","tool":"echo","if":"$HOME == 'x'"}]}`)).toBeNull();
    });

    it('does not refuse a condition that does not parse', () => {
      expect(validate(`{"id":"p","steps":[{"id":"a","tool":"echo","if":"this is not a condition"}]}`)).toBeNull();
    });

    it('checks input references before if tokens', () => {
      expect(
        validate(`{"id":"p","steps":[{"id":"a","tool":"echo","input":"$in.output","if":"$cond.status == 'x'"}]}`),
      ).toEqual({ step_id: 'a', error: "unknown reference '$in.output'" });
    });

    it('checks input references depth-first in insertion order', () => {
      expect(
        validate('{"id":"p","steps":[{"id":"a","tool":"echo","input":{"x":[{"y":"$first.output"}],"z":"$second.output"}}]}'),
      ).toEqual({ step_id: 'a', error: "unknown reference '$first.output'" });
    });

    it('checks if tokens from left to right', () => {
      expect(
        validate(`{"id":"p","steps":[{"id":"a","tool":"echo","if":"$left.status == $right.status"}]}`),
      ).toEqual({ step_id: 'a', error: "unknown reference '$left.status'" });
    });

    it('splits the condition on Unicode whitespace', () => {
      expect(validate(`{"id":"p","steps":[{"id":"a","tool":"echo","if":"$ghost.status\u3000== 'x'"}]}`)).toEqual({
        step_id: 'a',
        error: "unknown reference '$ghost.status'",
      });
    });
  });

  describe('rule order', () => {
    it('reports a rule 1–4 failure in a later step over a rule 5 failure in an earlier step', () => {
      expect(
        validate('{"id":"p","steps":[{"id":"a","tool":"echo","depends_on":["zzz"]},{"id":"b","tool":"nope"}]}'),
      ).toEqual({ step_id: 'b', error: "tool 'nope' is not installed" });
    });

    it('reports a rule 1–4 failure in a later step over a rule 6 failure in an earlier step', () => {
      expect(
        validate('{"id":"p","steps":[{"id":"a","tool":"echo","input":"$nope.output"},{"id":"b","tool":"echo","on_error":"x"}]}'),
      ).toEqual({ step_id: 'b', error: "invalid on_error policy 'x'" });
    });

    it('checks rule 5 before rule 6 within one step', () => {
      expect(
        validate('{"id":"p","steps":[{"id":"a","tool":"echo","input":"$nope.output","depends_on":["zzz"]}]}'),
      ).toEqual({ step_id: 'a', error: "unknown dependency 'zzz'" });
    });

    it('reports the first step in declaration order within pass 2', () => {
      expect(
        validate('{"id":"p","steps":[{"id":"a","tool":"echo","input":"$nope.output"},{"id":"b","tool":"echo","depends_on":["zzz"]}]}'),
      ).toEqual({ step_id: 'a', error: "unknown reference '$nope.output'" });
    });

    it('reports the first failing step in declaration order within pass 1', () => {
      expect(validate('{"id":"p","steps":[{"id":"a"},{"id":"b","tool":"nope"}]}')).toEqual({
        step_id: 'a',
        error: 'step must declare exactly one of tool, shell, or capsule',
      });
    });
  });
});

describe('conditionReferenceTokens', () => {
  it('keeps tokens starting with $ and strips parentheses from both ends', () => {
    expect(conditionReferenceTokens("($a.status) == $b.output)) || $c.status")).toEqual(['$b.output', '$c.status']);
  });

  it('keeps a token written without spaces whole', () => {
    expect(conditionReferenceTokens("$a.status=='success'")).toEqual(["$a.status=='success'"]);
  });
});

describe('capsuleTaskText', () => {
  it('uses a string input as the task text, even when empty', () => {
    expect(capsuleTaskText('Echo this task')).toEqual({ ok: true, text: 'Echo this task' });
    expect(capsuleTaskText('')).toEqual({ ok: true, text: '' });
  });

  it('uses the objective of { "objective": <string> }', () => {
    expect(capsuleTaskText({ objective: 'do it' })).toEqual({ ok: true, text: 'do it' });
    expect(capsuleTaskText({ objective: '' })).toEqual({ ok: true, text: '' });
  });

  it('refuses other shapes with the validation texts', () => {
    expect(capsuleTaskText(null)).toEqual({ ok: false, error: expect.stringContaining('has no input') });
    expect(capsuleTaskText({ task: 'x' })).toEqual({
      ok: false,
      error: expect.stringContaining('keys the child cannot receive: task'),
    });
  });

  it('treats an own __proto__ key as a key the child cannot receive', () => {
    const input = JSON.parse('{"__proto__": "x", "objective": "y"}') as JsonValue;
    expect(capsuleTaskText(input)).toEqual({
      ok: false,
      error: expect.stringContaining('keys the child cannot receive: __proto__'),
    });
  });
});
