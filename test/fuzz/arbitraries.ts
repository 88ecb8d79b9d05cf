/**
 * Input generators shared by the fuzz targets: texts made of the characters the readers care about
 * (quotes, backslashes, `$`, dots, operators, brackets, Unicode whitespace, NUL, lone surrogates),
 * long runs of one piece (what overflows a stack or makes a regular expression backtrack), JSON
 * values of any depth, plan and manifest objects that are mostly well-formed with a few fields
 * wrong, and the texts of such files with byte-level mutations.
 */
import fc from 'fast-check';

/** Characters the plan readers treat specially, and a few ordinary ones. */
export const SPECIAL_UNITS: readonly string[] = [
  "'", '"', '\\', '$', '.', ' ', '\t', '\n', '\r', '\u000b', '\u00a0', '\u0085', '\u1680', '\u2028', '\u2029', '\u3000', '\ufeff',
  '(', ')', '[', ']', '{', '}', '=', '!', '<', '>', '&', '|', ',', ':', '\u0000', '\u001b', '\u007f', '\ud800', '\udc00',
  '😀', 'a', 'b', 'z', 'é', '0', '1', '9', '-', '_', '/', '*', '~', ';',
];

/** A short text of {@link SPECIAL_UNITS}. */
export const specialText = (maxLength = 24): fc.Arbitrary<string> =>
  fc.string({ unit: fc.constantFrom(...SPECIAL_UNITS), maxLength });

/** Lengths of a long run: enough to overflow a spread or a backtracking regex, cheap to build. */
export const LONG_RUN_COUNTS = [1_000, 30_000, 300_000, 1_000_000] as const;

/** One short piece repeated many times, between a short prefix and suffix: `x` + U+2028 × 1,000,000 + `x`. */
export const longRun = (counts: readonly number[] = LONG_RUN_COUNTS): fc.Arbitrary<string> =>
  fc
    .record({
      piece: fc.oneof(fc.constantFrom(...SPECIAL_UNITS), specialText(4).filter((t) => t.length > 0)),
      count: fc.constantFrom(...counts),
      prefix: specialText(3),
      suffix: specialText(3),
    })
    .map(({ piece, count, prefix, suffix }) => `${prefix}${piece.repeat(Math.ceil(count / piece.length))}${suffix}`);

/** Any text a field may hold: mostly short texts of special characters, sometimes arbitrary code units, rarely a long run. */
export const anyText: fc.Arbitrary<string> = fc.oneof(
  { weight: 40, arbitrary: specialText() },
  { weight: 12, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  { weight: 6, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: longRun() },
);

/** Like {@link anyText}, without the long runs: for fields a value holds many of (list entries). */
export const shortText: fc.Arbitrary<string> = fc.oneof(
  { weight: 40, arbitrary: specialText() },
  { weight: 12, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  { weight: 6, arbitrary: fc.string({ maxLength: 12 }) },
);

/** A step id or a reference target: often from a small pool (so references and dependencies hit), sometimes any text. */
export const stepIdText: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('a', 'b', 'c', 'a.b', 'build', 'test', '', 'x y', '$a', "it's") },
  { weight: 1, arbitrary: anyText },
);

/** A JSON scalar. */
export const jsonScalar: fc.Arbitrary<null | boolean | number | string> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  anyText,
  fc.constantFrom('$a.output', '$a.status', '$b.output', '$a', '$.output', '$a.b.status', '$zz.output', '$a.stat'),
);

/** A JSON value nested at most `depth` levels (arrays and objects with short keys). */
export const jsonValue = (depth = 3): fc.Arbitrary<unknown> =>
  fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true, maxDepth: depth },
      jsonScalar,
      fc.array(tie('value'), { maxLength: 4 }),
      fc.dictionary(fc.oneof(specialText(6), fc.constantFrom('objective', '__proto__', 'constructor', 'id')), tie('value'), { maxKeys: 4 }),
    ),
  })).value;

/** A value nested exactly `depth` levels: `[[[…]]]` or `{"k":{"k":…}}` around a scalar. */
export const deepValue: fc.Arbitrary<unknown> = fc
  .record({ depth: fc.constantFrom(127, 128, 129, 200, 600), object: fc.boolean(), leaf: jsonScalar })
  .map(({ depth, object, leaf }) => {
    let value: unknown = leaf;
    for (let i = 0; i < depth; i++) value = object ? { k: value } : [value];
    return value;
  });

/** A value of a field: usually `good`, sometimes any JSON value (a wrong type), sometimes absent (`undefined`). */
export const mostly = <T>(good: fc.Arbitrary<T>): fc.Arbitrary<T | unknown> =>
  fc.oneof({ weight: 10, arbitrary: good }, { weight: 1, arbitrary: jsonValue(2) }, { weight: 2, arbitrary: fc.constant(undefined) });

/** A condition: comparisons of references and quoted literals joined by `&&`/`||`, with odd spacing; or any text. */
export const conditionText: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .array(
        fc.tuple(
          fc.constantFrom('$a.status', '$b.output', "'success'", '"failed"', "'x'", '$a', 'failed', "'unterminated", '$c.stat', "''", "'a''b'"),
          fc.constantFrom('==', '!=', '<', '>', '=', ' ', '==='),
          fc.constantFrom("'success'", "'failed'", '$a.output', "'skipped'", '"a b"', 'x', "'&&'", "'||'", ''),
          fc.constantFrom(' && ', ' || ', '&&', '||', ' & ', ' ( ', ') || ('),
          fc.constantFrom(' ', '', '  ', '\u3000', '\u2028', '\t', '\u00a0'),
        ),
        { minLength: 1, maxLength: 4 },
      )
      .map((parts) => parts.map(([l, op, r, join, space]) => `${space}${l}${space}${op}${space}${r}${join}`).join('').replace(/( && | \|\| |&&|\|\|)$/u, '')),
  },
  { weight: 2, arbitrary: anyText },
  { weight: 1, arbitrary: fc.constantFrom('\u2028', '(', "'", ' ').map((unit) => `$a.status == ${unit.repeat(1_000)}`) },
);

/** A shell command: mostly an allowed binary and words with quotes and escapes, sometimes any text. */
export const shellText: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.constantFrom('true', 'echo', 'printf', 'nope', '/bin/true', "'true'", '"echo"', 'tr\\ue', ''), fc.array(fc.oneof(specialText(8), fc.constantFrom("'a b'", '"x"', '\\ ', "it\\'s", '$a.output')), { maxLength: 5 }))
      .map(([binary, words]) => [binary, ...words].join(' ')),
  },
  { weight: 2, arbitrary: anyText },
);

/** The keys of a step (and near misses, for the unknown-key warnings). */
const STEP_KEY_TYPOS = ['depends-on', 'dependsOn', 'timeout', 'retry', 'on-error', 'iff', 'inputs', 'shel', 'kind', ''];

/** A step object: mostly well-formed, any field sometimes of the wrong type or absent, sometimes an unknown key. */
export const stepObject: fc.Arbitrary<Record<string, unknown>> = fc
  .record(
    {
      id: mostly(stepIdText),
      kind: fc.constantFrom('shell', 'shell', 'shell', 'tool', 'capsule', 'none', 'two'),
      shell: shellText,
      tool: fc.constantFrom('echo', 'word-count', 'submit-plan', 'switch-driver', 'nope', ''),
      capsule: fc.constantFrom('worker', 'local/worker', ''),
      input: mostly(jsonValue(3)),
      depends_on: mostly(fc.array(stepIdText, { maxLength: 4 })),
      if: mostly(conditionText),
      on_error: mostly(fc.constantFrom('fail', 'skip', 'continue', 'ignore', 'FAIL', '')),
      retries: mostly(fc.oneof(fc.nat({ max: 3 }), fc.constantFrom(-1, 1.5, 4294967295, 4294967296))),
      timeout_secs: mostly(fc.oneof(fc.double({ min: 0.001, max: 5, noNaN: true }), fc.constantFrom(0, -1, 1e308))),
      extra: fc.option(fc.tuple(fc.constantFrom(...STEP_KEY_TYPOS), jsonValue(1)), { freq: 4 }),
    },
    { requiredKeys: ['id', 'kind'] },
  )
  .map((raw) => {
    const step: Record<string, unknown> = { id: raw.id };
    if (raw.kind === 'shell' || raw.kind === 'two') step['shell'] = raw.shell;
    if (raw.kind === 'tool' || raw.kind === 'two') step['tool'] = raw.tool;
    if (raw.kind === 'capsule') step['capsule'] = raw.capsule;
    for (const key of ['input', 'depends_on', 'if', 'on_error', 'retries', 'timeout_secs'] as const) {
      if (raw[key] !== undefined) step[key] = raw[key];
    }
    if (raw.extra !== undefined && raw.extra !== null) step[raw.extra[0]] = raw.extra[1];
    return step;
  });

/**
 * Plans with many steps and long lists, built cheaply: thousands of steps, a step depending on
 * thousands of others, many unknown keys, many references outside the dependencies (warnings).
 */
export const manySteps: fc.Arbitrary<unknown> = fc
  .record({ count: fc.constantFrom(100, 1_000, 5_000), shape: fc.constantFrom('wide', 'deps', 'unknown-keys', 'references', 'duplicate', 'bad-conditions', 'long-ids', 'cycle') })
  .map(({ count, shape }) => {
    const steps: Record<string, unknown>[] = [];
    switch (shape) {
      case 'wide':
        for (let i = 0; i < count; i++) steps.push({ id: `s${i}`, shell: 'true' });
        break;
      case 'deps':
        steps.push({ id: 'a', shell: 'true' }, { id: 'b', shell: 'true', depends_on: Array.from({ length: count * 10 }, () => 'a') }, { id: 'c', shell: 'true', depends_on: ['b'], input: '$a.output' });
        break;
      case 'unknown-keys':
        for (let i = 0; i < count; i++) steps.push({ id: `s${i}`, shell: 'true', 'depends-on': [] });
        break;
      case 'references':
        steps.push({ id: 'a', shell: 'true' }, { id: 'b', shell: 'true', input: Array.from({ length: count * 10 }, () => '$a.output') });
        break;
      case 'duplicate':
        for (let i = 0; i < count; i++) steps.push({ id: 'same', shell: 'true' });
        break;
      case 'bad-conditions':
        // Every step fails later: a refusal explained (with its line and column) for each.
        for (let i = 0; i < count; i++) steps.push({ id: `s${i}`, shell: 'true', if: i % 2 === 0 ? 'true' : `$s${i}`, input: '$HOME' });
        break;
      case 'long-ids': {
        const id = 'i'.repeat(count * 100);
        steps.push({ id, shell: `echo $${id}.output | ${'x'.repeat(count * 10)}`, input: 'x', if: `$${id}.status == '${id}'` }, { id: `${id}2`, shell: 'true', depends_on: [id, `${id}2`], input: `$${id}.output` });
        break;
      }
      case 'cycle':
        for (let i = 0; i < count; i++) steps.push({ id: `s${i}`, shell: 'true', depends_on: [`s${(i + 1) % count}`] });
        break;
    }
    return { id: 'many', steps };
  });

/** A plan object: `{ id, steps }`, mostly well-formed; sometimes a top level that is not a plan at all. */
export const planObject: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 160,
    arbitrary: fc
      .record({
        id: mostly(fc.oneof(fc.constantFrom('p', 'release', ''), anyText)),
        steps: fc.oneof({ weight: 10, arbitrary: fc.array(stepObject, { maxLength: 6 }) }, { weight: 1, arbitrary: jsonValue(2) }),
        extra: fc.option(fc.tuple(fc.constantFrom('step', 'Steps', 'name', 'version'), jsonValue(1)), { freq: 5 }),
      })
      .map(({ id, steps, extra }) => {
        const plan: Record<string, unknown> = { steps };
        if (id !== undefined) plan['id'] = id;
        if (extra !== null) plan[extra[0]] = extra[1];
        return plan;
      }),
  },
  { weight: 4, arbitrary: jsonValue(3) },
  { weight: 4, arbitrary: deepValue.map((input) => ({ id: 'p', steps: [{ id: 'a', tool: 'echo', input }] })) },
  { weight: 1, arbitrary: manySteps },
);

/** One edit of a file's text: truncation, an inserted piece, a replaced character, a doubled slice. */
type TextMutation =
  | { readonly kind: 'truncate'; readonly at: number }
  | { readonly kind: 'insert'; readonly at: number; readonly piece: string }
  | { readonly kind: 'replace'; readonly at: number; readonly piece: string }
  | { readonly kind: 'double'; readonly at: number; readonly length: number };

const textMutation: fc.Arbitrary<TextMutation> = fc.oneof(
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), piece: fc.oneof(specialText(4), fc.constantFrom('[', '{', '"', '\\', ',', '}', ']', 'null', '"$a.output"', '\ufeff')) }),
  fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), piece: fc.constantFrom('"', '[', '{', '0', ' ', '\\', 'x', '\u2028') }),
  fc.record({ kind: fc.constant('double' as const), at: fc.nat(), length: fc.nat({ max: 40 }) }),
);

/** Applies `mutations` in order (positions are taken modulo the current length). */
export function mutateText(text: string, mutations: readonly TextMutation[]): string {
  let out = text;
  for (const m of mutations) {
    const at = out.length === 0 ? 0 : m.at % (out.length + 1);
    switch (m.kind) {
      case 'truncate':
        out = out.slice(0, at);
        break;
      case 'insert':
        out = out.slice(0, at) + m.piece + out.slice(at);
        break;
      case 'replace':
        out = out.slice(0, at) + m.piece + out.slice(at + 1);
        break;
      case 'double':
        out = out.slice(0, at + m.length) + out.slice(at, at + m.length) + out.slice(at + m.length);
        break;
    }
  }
  return out;
}

/** The text of a JSON file made from `values`: mostly as written (compact or pretty), sometimes mutated, sometimes garbage or deep brackets. */
export const jsonFileText = (values: fc.Arbitrary<unknown>): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 8, arbitrary: fc.tuple(values, fc.boolean()).map(([value, pretty]) => JSON.stringify(value, null, pretty ? 2 : undefined) ?? 'null') },
    { weight: 4, arbitrary: fc.tuple(values, fc.array(textMutation, { minLength: 1, maxLength: 3 })).map(([value, mutations]) => mutateText(JSON.stringify(value) ?? '', mutations)) },
    { weight: 1, arbitrary: fc.oneof(anyText, fc.constantFrom('', ' ', '\ufeff{"id":"p","steps":[]}', 'null', '[]', '{}', '"plan"', '{"id":"p","steps":[]} trailing')) },
    { weight: 1, arbitrary: fc.record({ n: fc.constantFrom(129, 10_000, 1_000_000), open: fc.constantFrom('[', '{"a":', '[{"a":') }).map(({ n, open }) => open.repeat(n)) },
  );

/** A list of strings for an allow-list: usually short names, sometimes wrong types, rarely very long. */
const allowList: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 250, arbitrary: fc.array(fc.oneof(fc.constantFrom('true', 'echo', 'node', 'bash', '/bin/true', ''), shortText), { maxLength: 5 }) },
  { weight: 30, arbitrary: jsonValue(2) },
  { weight: 1, arbitrary: fc.constantFrom(10_000, 100_000).map((n) => Array.from({ length: n }, (_, i) => `bin${i}`)) },
);

/** A manifest object (`capsule.json`): every section mostly well-formed, any field sometimes wrong or unknown. */
export const manifestObject: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc
      .record(
        {
          name: mostly(anyText),
          version: mostly(fc.constantFrom('0.1.0', '', '1')),
          capabilities: mostly(
            fc.record(
              {
                shell: mostly(fc.record({ allow: allowList }, { requiredKeys: [] })),
                spawn: mostly(fc.record({ allow: allowList, workdir_snapshot: allowList }, { requiredKeys: [] })),
                env: mostly(fc.record({ allow: allowList }, { requiredKeys: [] })),
                shel: jsonValue(1),
              },
              { requiredKeys: [] },
            ),
          ),
          lifecycle: mostly(
            fc.record(
              { shell_grace_secs: mostly(fc.oneof(fc.nat(), fc.constantFrom(-1, 0.5))), delegation_deadline_secs: mostly(fc.constantFrom(0, 1, 600, -5)) },
              { requiredKeys: [] },
            ),
          ),
          tools: mostly(
            fc.dictionary(
              fc.oneof(fc.constantFrom('echo', 'word-count', 'submit-plan'), shortText),
              mostly(fc.record({ command: mostly(fc.array(fc.constantFrom('node', 'tools/x.mjs', ''), { maxLength: 3 })), timeout_secs: mostly(fc.constantFrom(1, 0, -1, 30)), timeout: jsonValue(1) }, { requiredKeys: [] })),
              { maxKeys: 3 },
            ),
          ),
          entry: mostly(fc.oneof(fc.record({ plan: mostly(anyText) }), fc.record({ command: mostly(fc.array(shortText, { maxLength: 2 })) }), fc.record({ plan: anyText, command: fc.constant(['x']) }))),
          nmae: jsonValue(1),
        },
        { requiredKeys: [] },
      )
      .map((manifest) => JSON.parse(JSON.stringify(manifest)) as unknown),
  },
  { weight: 1, arbitrary: jsonValue(3) },
  { weight: 1, arbitrary: deepValue.map((value) => ({ capabilities: { shell: { allow: value } } })) },
);
