/**
 * Every error and warning text the plan model produces (reading, parsing, validation, references,
 * conditions, capsule input shapes, the manifest), as `docs/plan-format.md` shows them. The short
 * texts are Murmur's, byte for byte (scripts and traces match them); the long sentences are ours
 * and keep the key terms Murmur's carry.
 *
 * One rule: no other file in `src/plan/` or `src/manifest.ts` spells an error text inline.
 * Another: a text quotes input (ids, words, keys, references) through `excerpt`, so a 10 MB step
 * id makes a short error, not a 10 MB one.
 */

import { BLOCKED, invalidOnErrorPolicy as invalidOnErrorPolicyText } from '../../machines/messages.js';
import { clipMiddle, excerpt, excerptList } from '../excerpt.js';

/** Rule 4 (`docs/plan-format.md#on-error`): the machines' text, quoting an excerpt of the value. */
export const invalidOnErrorPolicy = (value: string): string => invalidOnErrorPolicyText(excerpt(value));

// ---------------------------------------------------------------------------------------------
// Reading and parsing the plan file (docs/plan-format.md#reading-the-plan-file)
// ---------------------------------------------------------------------------------------------

/** The plan file does not exist (`docs/plan-format.md#reading-the-plan-file`). `path` is shown exactly as given. */
export const planFileMissing = (path: string): string =>
  `failed to read plan file ${path}: it does not exist`;

/** Any other read error (`docs/plan-format.md#reading-the-plan-file`). `ioError` is the operating system's text. */
export const planFileUnreadable = (ioError: string): string => `failed to read plan file: ${ioError}`;

/** The io error text for a plan path that is a directory (Node's EISDIR message does not name the path). */
export const planFileIsDirectory = (path: string): string => `EISDIR: ${path} is a directory, not a plan file`;

/** ` (line L, column C)`: where in a file a problem is. */
export const lineColumn = (line: number, column: number): string => `(line ${line}, column ${column})`;

/** The io error text for a plan file whose bytes are not UTF-8 (the source's `read_to_string` wording). */
export const NOT_UTF8 = 'stream did not contain valid UTF-8';

/**
 * A plan file refused before reading (ours, beyond `docs/plan-format.md#reading-the-plan-file`): `detail` is
 * {@link notRegularFile} or {@link fileTooLarge}. `path` is shown exactly as given.
 */
export const planFileRefused = (path: string, detail: string): string => `failed to read plan file ${path}: ${detail}`;

/** The end of {@link notRegularFile}'s detail (explanations recognise the refusal by it). */
export const NOT_REGULAR_FILE_TAIL = 'capsule reads plans and manifests only from regular files';

/** Detail for a path that is a FIFO, socket or device: reading it could block forever or never end. */
export const notRegularFile = (kind: string): string => `it is a ${kind}, not a regular file; ${NOT_REGULAR_FILE_TAIL}`;

/** The words of {@link fileTooLarge}'s detail explanations recognise it by. */
export const OVER_THE_LIMIT = 'over the limit of';

/** Detail for a file over the size limit; `sizeBytes` is null when it grew past the limit while being read. */
export const fileTooLarge = (sizeBytes: number | null, limitBytes: number): string => {
  const mib = limitBytes % (1024 * 1024) === 0 ? ` (${limitBytes / 1024 / 1024} MiB)` : '';
  return `${sizeBytes === null ? `it holds more than ${limitBytes} bytes` : `it is ${sizeBytes} bytes`}, ${OVER_THE_LIMIT} ${limitBytes} bytes${mib}`;
};

/** Parse detail for a plan object (library callers) holding something JSON cannot: a bigint, a function, a Map, NaN, … */
export const notJsonData = (got: string): string =>
  `expected JSON data (null, a boolean, a finite number, a string, an array or a plain object), got ${got}`;

/** Parse detail for a plan object with more values than the largest plan file could hold (shared objects count once per place). */
export const tooManyValues = (limit: number): string =>
  `the plan object holds more than ${limit} values (an object used in several places counts in each)`;

/** Parse detail for a plan object whose properties could not be read (a getter or a proxy threw). */
export const planObjectUnreadable = (reason: string): string => `the plan object could not be read: ${reason}`;

/** Not JSON, or not a plan's shape (`docs/plan-format.md#reading-the-plan-file`). `detail` names the JSON path and the fix. */
export const planParseFailed = (detail: string): string => `failed to parse plan JSON: ${detail}`;

/**
 * Parse detail for a plan that is JSON data but not a plan's shape (a missing `id`, a wrong
 * type): says so first, so it is not read as a JSON syntax error. `issues` names the JSON paths.
 */
export const planShapeError = (issues: string): string => `plan shape error (valid JSON, not a plan): ${issues}`;

/** Parse detail for text that is not JSON at all; `parserMessage` is `JSON.parse`'s message. */
export const invalidJson = (parserMessage: string): string => `invalid JSON: ${parserMessage}`;

/**
 * Parse detail for an object that writes a key twice (ours, stricter than `JSON.parse`, which keeps
 * the last one; the source refuses it, `docs/plan-format.md#parse-rules`): `path` is the second writing's JSON path,
 * `at` and `first` its place and the first writing's, each `(line L, column C)`. Plan and manifest.
 */
export const duplicateKey = (key: string, path: string, at: { line: number; column: number }, first: { line: number; column: number }): string =>
  `duplicate key '${excerpt(key)}' at ${clipMiddle(path, 200)} ${lineColumn(at.line, at.column)}, first written at line ${first.line}, column ${first.column}: remove one of them`;

/** Parse detail for a document whose arrays and objects nest deeper than `maxDepth`. */
export const nestedTooDeep = (maxDepth: number): string =>
  `arrays and objects are nested more than ${maxDepth} levels deep`;

/** One shape problem: `<path>: <message>` (`steps[0].retries: expected an integer …, got -1`). */
export const shapeIssue = (path: string, message: string): string => `${path}: ${message}`;

/** Suffix when a file has more shape problems than the detail lists. */
export const moreIssues = (count: number): string =>
  `; and ${count} more problem${count === 1 ? '' : 's'}`;

/** How the JSON path of the document root is named in details and warnings. */
export const TOP_LEVEL_PATH = 'top level';

/**
 * Shape-problem texts of the plan file (`docs/plan-format.md#plan-file`, `docs/plan-format.md#parse-rules`). Each says what was expected and,
 * where a default exists, how to get it; the caller appends `, got <value>` (see `describeValue`).
 */
export const PLAN_SHAPE = {
  topLevel: 'expected a JSON object with "id" (a string) and "steps" (an array)',
  planId: 'expected the plan id as a string',
  steps: 'expected an array of step objects (it may be empty)',
  step: 'expected a step object such as { "id": "a", "tool": "echo" }',
  stepId: 'expected the step id as a string',
  kindOrIf: 'expected a string, or null (the same as leaving the key out)',
  dependsOn:
    'expected an array of step id strings (leave the key out for no dependencies; null is not accepted)',
  dependency: 'expected a step id string',
  onError:
    'expected a string: "fail", "skip" or "continue" (leave the key out for "fail"; null is not accepted)',
  retries: 'expected an integer from 0 to 4294967295',
  timeoutSecs: 'expected a positive number of seconds (leave the key out for no bound)',
  env: 'expected an object of strings such as { "CC": "gcc" } (leave the key out for none)',
  envValue: 'expected the value of an environment variable as a string',
  always: 'expected true or false (leave the key out for false)',
  retryDelaySecs: 'expected a number of seconds from 0 to 60 (the first wait before a retry; leave the key out for none)',
  cwd: 'expected a directory inside the workdir as a relative path string such as "test" (leave the key out for the workdir)',
  cache: 'expected an object { "inputs": [glob, …], "outputs": [glob, …] } of glob strings relative to the workdir, such as { "inputs": ["src/**/*.c"], "outputs": ["build/**"] }',
  matrix: 'expected an object of value lists such as {"cc": ["gcc", "clang"]}',
  matrixValue: 'expected an array of values such as ["gcc", "clang"] (for include and exclude: of objects such as {"cc": "gcc"})',
} as const;

/** `<expected>, got <value>`: the common tail of a shape problem. */
export const expectedGot = (expected: string, got: string): string => `${expected}, got ${got}`;

/**
 * A short, readable description of a JSON value for shape problems: numbers and booleans as
 * written (`-1`, `true`), `null`, strings quoted and cut at 40 characters, `an array` /
 * `an empty array`, `an object` / `an empty object`, and `nothing (the key is missing)` for `undefined`.
 */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing (the key is missing)';
  if (value === null) return 'null';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value === 'string') {
    const cut = value.length > 40 ? `${value.slice(0, 40)}…` : value;
    return `the string ${JSON.stringify(cut)}`;
  }
  if (Array.isArray(value)) return value.length === 0 ? 'an empty array' : 'an array';
  if (typeof value === 'object') return Object.keys(value).length === 0 ? 'an empty object' : 'an object';
  return typeof value;
}

// ---------------------------------------------------------------------------------------------
// Unknown keys (ours: docs/plan-format.md#unknown-keys)
// ---------------------------------------------------------------------------------------------

/**
 * `<where>: unknown key '<key>' (did you mean '<suggestion>'?)`, or, with nothing close,
 * `<where>: unknown key '<key>' is ignored (known keys: a, b, …)`.
 */
export const unknownKey = (
  where: string,
  key: string,
  suggestion: string | null,
  knownKeys: readonly string[],
): string =>
  suggestion === null
    ? `${where}: unknown key '${excerpt(key)}' is ignored (known keys: ${knownKeys.join(', ')})`
    : `${where}: unknown key '${excerpt(key)}' (did you mean '${suggestion}'?)`;

/** How a step is named in a warning: `steps[1] (id 'b')`. */
export const stepWhere = (path: string, id: string): string => `${path} (id '${excerpt(id)}')`;

// ---------------------------------------------------------------------------------------------
// Validation (docs/plan-format.md#validation)
// ---------------------------------------------------------------------------------------------

/** Rule 1. */
export const duplicateStepId = (id: string): string => `duplicate step id '${excerpt(id)}'`;

/** Rule 2a. */
export const NO_STEP_KIND = 'step must declare exactly one of tool, shell, or capsule';

/** Rule 2b. */
export const SEVERAL_STEP_KINDS = 'step declares more than one of tool, shell, or capsule';

/** Rule 3t-ii, and the tail of 3t-i. */
export const notCallableInPlan = (tool: string): string =>
  `'${excerpt(tool)}' is not callable from inside a plan`;

/** Rule 3t-i (gist; key terms "cannot submit another plan", "is not callable from inside a plan"). */
export const cannotSubmitPlan = (tool: string): string =>
  `a plan step cannot submit another plan: ${notCallableInPlan(tool)}`;

/** Rule 3t-iii. */
export const toolNotInstalled = (tool: string): string => `tool '${excerpt(tool)}' is not installed`;

/** Rule 3s-i (and dispatch, docs/plan-format.md#shell-dispatch). */
export const SHELL_COMMAND_EMPTY = 'shell command is empty';

/** Rule 3s-ii (and the executor's re-check, docs/plan-format.md#shell-dispatch). */
export const binaryNotAllowed = (binary: string): string =>
  `binary '${excerpt(binary)}' is not in capabilities.shell.allow`;

/**
 * Ours, after rule 3s-ii: a NUL character in a shell command. No program can get one in its
 * arguments (`execve(2)` ends each at the first NUL), so the step could never start.
 */
export const SHELL_COMMAND_NUL = 'shell command holds a NUL character (\\u0000), which no program can receive in its arguments';

/** Ours: `stdin` on a tool or capsule step (it has a stdin of its own, or none). */
export const STDIN_NOT_SHELL =
  'stdin is for shell steps: a tool step gets its input as JSON on stdin, and a capsule step gets its input as the task text';

/** Ours: a step's `env` names a variable no process can be given, or one the runtime sets itself. */
export const invalidEnvName = (name: string, why: string): string => `env variable '${excerpt(name)}' ${why}`;

/** The reasons of {@link invalidEnvName}. */
export const ENV_NAME_WHY = {
  empty: 'has an empty name',
  syntax: "holds '=' or a NUL character, which no environment variable name can",
  reserved: 'is set by the runtime itself (PATH, HOME, TMPDIR, CAPSULE_RUNTIME_DIR, MURMUR_RUNTIME_DIR) and cannot be given by a step',
} as const;

/** Ours: a NUL character in a step's `env` value (no process can receive one). */
export const envValueNul = (name: string): string => `env variable '${excerpt(name)}' holds a NUL character (\\u0000) in its value, which no process can receive`;

/** Ours: a step's `cwd` that is not a relative path inside the workdir. */
export const cwdOutsideWorkdir = (cwd: string): string => `cwd '${excerpt(cwd)}' is not a directory inside the workdir: it must be a relative path that does not climb out with '..'`;

/** Ours: `cache` on a capsule step (its child's work is its own; nothing of it is a file of this workdir). */
export const CACHE_NOT_SHELL_OR_TOOL =
  "cache is for shell and tool steps: a capsule step's child runs in its own work folder, whose files this run does not store";

/** Ours: a `cache` glob that is not a relative path inside the workdir. */
export const cacheGlobOutsideWorkdir = (field: 'inputs' | 'outputs', glob: string): string =>
  `cache.${field} glob '${excerpt(glob)}' leaves the workdir: a cache glob is a relative path that never climbs out with '..'${field === 'outputs' ? ': a step whose outputs escape the workdir cannot be cached' : ''}`;

/** Ours: `env` or `cwd` on a capsule step (its child runs in its own work folder, under its own manifest). */
export const CAPSULE_ENV_CWD =
  "env and cwd are for shell and tool steps: a capsule step's child runs in its own work folder with the environment its own manifest allows";

/** Ours, at dispatch: the step's `cwd` does not exist (or is no directory) when the attempt starts. */
export const cwdMissing = (stepId: string, cwd: string, why: string): string =>
  `step '${excerpt(stepId)}': cwd '${excerpt(cwd)}' ${why} (docs/plan-format.md#cwd)`;

/** Ours, a warning: `cwd` is never resolved, so a reference written there is a folder name. */
export const cwdReferenceLiteral = (stepId: string, cwd: string): string =>
  `step '${excerpt(stepId)}': cwd '${excerpt(cwd)}' is taken as a folder name, not resolved: only input, stdin and env values are references (docs/plan-format.md#cwd); ` +
  `to start in a folder a step printed, pass it in env and cd there (bash -c 'cd "$DIR" && …')`;

/** Ours, at dispatch: a resolved `env` value holds a NUL, which no environment variable carries; the value is not echoed. */
export const resolvedEnvValueNul = (stepId: string, name: string, written: string): string =>
  `step '${excerpt(stepId)}': env ${excerpt(name)}: the value of ${excerpt(written)} holds a NUL byte, which an environment variable cannot carry; pass that output through stdin instead (docs/plan-format.md#env)`;

/** Ours, at dispatch: the step's `cwd` leads out of the workdir through a symbolic link. */
export const cwdEscapes = (stepId: string, cwd: string): string =>
  `step '${excerpt(stepId)}': cwd '${excerpt(cwd)}' leads outside the workdir (through a symbolic link); a step runs inside the workdir (docs/plan-format.md#cwd)`;

/** Rule 5. */
export const unknownDependency = (dep: string): string => `unknown dependency '${excerpt(dep)}'`;

/** Rule 6, step part unknown; `reference` is shown with its `$`. */
export const unknownReference = (reference: string): string => `unknown reference '${excerpt(reference)}'`;

/** Rule 6, field part neither `output` nor `status`. */
export const unknownReferenceField = (field: string): string => `unknown reference field '${excerpt(field)}'`;

// ---------------------------------------------------------------------------------------------
// Capsule step input shapes (docs/plan-format.md#capsule-input)
// ---------------------------------------------------------------------------------------------

/** The accepted-shapes phrase shared by several refusals. */
const CAPSULE_SHAPES = 'a string or { "objective": "<text>" }';

/**
 * An object with keys other than `objective` (gist; key terms `keys the child cannot receive:
 * <k1>, <k2>` and `"objective"`). `sortedKeys` are the offending keys, already sorted.
 */
export const capsuleInputExtraKeys = (sortedKeys: readonly string[]): string =>
  `capsule step input has keys the child cannot receive: ${excerptList(sortedKeys)}; ` +
  `the input is the task text, so put the whole instruction in "objective"`;

/** `objective` present but not a string. */
export const CAPSULE_OBJECTIVE_NOT_STRING = 'capsule step input "objective" must be a string';

/** An empty object `{}`. */
export const CAPSULE_INPUT_SHAPE = `capsule step input must be ${CAPSULE_SHAPES}`;

/** `null` or absent input (gist; key terms "has no input", "task text"). */
export const CAPSULE_NO_INPUT =
  `capsule step has no input; its input is the task text, given as ${CAPSULE_SHAPES}`;

/** A boolean, number or array input. */
export const capsuleInputWrongType = (what: 'a boolean' | 'a number' | 'an array'): string =>
  `${CAPSULE_INPUT_SHAPE}, not ${what}`;

// ---------------------------------------------------------------------------------------------
// References (docs/plan-format.md#reference-resolution) and conditions (docs/plan-format.md#conditions)
// ---------------------------------------------------------------------------------------------

/** Operand text that does not start with `$` and is not a quoted literal. */
export const unsupportedConditionOperand = (text: string): string =>
  `unsupported condition operand '${excerpt(text)}'`;

/** `$word` with no dot. */
export const invalidReference = (reference: string): string => `invalid reference '${excerpt(reference)}'`;

/** The referenced step has not settled. */
export const referenceNotReady = (reference: string): string => `reference '${excerpt(reference)}' is not ready`;

/** `.output` of a step without output. */
export const referenceNoOutput = (reference: string): string =>
  `reference '${excerpt(reference)}' has no output`;

/** A field other than `output` or `status`. */
export const unsupportedReferenceField = (field: string): string =>
  `unsupported reference field '${excerpt(field)}'`;

/** A condition piece with none of `==`, `!=`, `>`, `<` outside quotes. */
export const unsupportedConditionExpression = (piece: string): string =>
  `unsupported condition expression '${excerpt(piece)}'`;

// ---------------------------------------------------------------------------------------------
// The manifest (docs/manifest.md)
// ---------------------------------------------------------------------------------------------

/** The manifest file does not exist. */
export const manifestMissing = (path: string): string =>
  `failed to read manifest ${path}: it does not exist`;

/** Any other read error of the manifest. */
export const manifestUnreadable = (path: string, ioError: string): string =>
  `failed to read manifest ${path}: ${ioError}`;

/** A manifest problem: `<file>: <detail>` (`capsule.json: tools.word-count.command: expected …`). */
export const manifestProblem = (path: string, detail: string): string => `${path}: ${detail}`;

/** Shape-problem texts of the manifest (docs/manifest.md); the caller appends `, got <value>`. */
export const MANIFEST_SHAPE = {
  topLevel: 'expected a JSON object (the capsule manifest)',
  string: 'expected a string',
  object: 'expected an object',
  stringList: 'expected an array of strings',
  listEntry: 'expected a string',
  graceSecs: 'expected a number of seconds, 0 or more',
  positiveSecs: 'expected a positive number of seconds',
  positiveBytes: 'expected a positive whole number of bytes',
  positiveCount: 'expected a positive whole number',
  network: 'expected "host", "session" or { "allow": ["IP:PORT", "CIDR", ...] }',
  allowList: 'expected a non-empty array of destinations ("IP", "IP:PORT", "CIDR", "NAME:PORT")',
  allowEntry: 'expected a destination: "IP", "IP:PORT", "[IPv6]:PORT", "CIDR" or "NAME[:PORT]"',
  positiveWholeSecs: 'expected a positive whole number of seconds',
  onLogCap: 'expected "continue" or "stop"',
  tools: 'expected an object mapping each tool name to { "command": [...], "timeout_secs": N }',
  tool: 'expected a tool object such as { "command": ["node", "tools/x.mjs"] }',
  command: 'expected a non-empty array of strings',
  entry: 'expected { "plan": "plans/main.json" } or { "command": ["prog", "arg"] }',
  entryOneOf: 'declare exactly one of "plan" or "command"',
} as const;

// ---------------------------------------------------------------------------------------------
// Warnings of the plan check (src/plan/check.ts; ours: docs/plan-format.md#warnings)
// ---------------------------------------------------------------------------------------------

/** A reference to a step outside the referring step's (transitive) dependencies. */
export const unorderedReference = (stepId: string, reference: string, target: string): string =>
  `step '${excerpt(stepId)}': ${excerpt(reference)} names step '${excerpt(target)}', which is not among its dependencies; ` +
  `unless '${excerpt(target)}' settled in an earlier wave it is not ready (add it to depends_on)`;

/** `$x.status` compared with a text that is not a status word. */
export const statusLiteralWarning = (
  stepId: string,
  reference: string,
  operator: '==' | '!=',
  literal: string,
  closest: string | null,
  statusWords: readonly string[],
): string =>
  `step '${excerpt(stepId)}': if compares ${excerpt(reference)} ${operator} '${excerpt(literal)}', but '${excerpt(literal)}' is not a status word ` +
  `(${statusWords.join(', ')}), so the comparison is always ${operator === '==' ? 'false' : 'true'}${closest === null ? `; no status word is close to it: compare with ${statusWords.map((word) => `'${word}'`).join(', ')}` : `; did you mean '${closest}'?`}`;

/** `input` on a shell step: the command never receives it. */
export const shellInputIgnored = (stepId: string): string =>
  `step '${excerpt(stepId)}': a shell step does not receive its input (its references are only resolved, for their errors); ` +
  `to hand the command a value write "stdin": "$<step>.output" (the text arrives on its stdin), or use a command tool, which gets the input as JSON on stdin`;

/** Backslashes the splitter drops inside quotes (`docs/shell-commands.md#word-splitting`), where a POSIX shell keeps them. */
export const droppedBackslashes = (stepId: string, count: number, first: { quote: string; next: string | null; word: string | null }): string => {
  const where = first.quote === "'" ? 'inside single quotes' : first.quote === '"' ? 'inside double quotes' : 'at the end';
  const what = first.next === null ? `a trailing backslash is dropped` : `the backslash before '${first.next}' ${where} is dropped and '${first.next}' kept`;
  const more = count > 1 ? ` (and ${count - 1} more backslash${count === 2 ? '' : 'es'} like it)` : '';
  const word = first.word === null ? '' : `, so the program gets the argument \`${excerpt(first.word)}\``;
  return (
    `step '${excerpt(stepId)}': shell: ${what}${more}${word}. A backslash makes the next character literal everywhere, even inside quotes ` +
    `(docs/shell-commands.md#word-splitting, unlike a POSIX shell); to pass a backslash, write two (\\\\\\\\ in the JSON file)`
  );
};

/** Words of a command as a warning quotes them: `'a', 'b'`, each an excerpt, at most ten. */
const quotedList = (words: readonly string[]): string => {
  const shown = words.slice(0, 10).map((w) => `'${excerpt(w)}'`).join(', ');
  return words.length > 10 ? `${shown} and ${words.length - 10} more` : shown;
};

/** Shell syntax a shell step passes to its program as text. */
export const shellSyntaxAsText = (stepId: string, binary: string, words: readonly string[]): string =>
  `step '${excerpt(stepId)}': shell: ${quotedList(words)} ${words.length === 1 ? 'is' : 'are'} passed to ${excerpt(binary)} as text: ` +
  `a shell step runs its program without a shell, so pipes, redirections, ;, &&, $VARIABLES, globs and ~ mean nothing; ` +
  `for those run a shell: bash -c '…' (with bash in capabilities.shell.allow)`;

/** A reference written into a shell command: never substituted. */
export const referenceInShellCommand = (stepId: string, words: readonly string[]): string =>
  `step '${excerpt(stepId)}': shell: ${quotedList(words)} reaches the program as those characters: references are never put into a command; ` +
  `pass the value with "stdin": "$<step>.output" (the program reads it from stdin) or use a command tool`;

/** A problem `capsule validate` refuses, which a run meets only when it gets there. */
export const failsLater = (stepId: string, error: string, when: string, fix: string): string =>
  `step '${excerpt(stepId)}': ${error}: ${when} (capsule validate refuses this plan); fix: ${fix}`;

/** A dependency cycle found before the run: the run goes on and stops blocked when it reaches it. */
export const cycleWarning = (blamed: string, cycle: string, stuck: number): string =>
  `step '${excerpt(blamed)}': plan is blocked by a dependency cycle, ${cycle} (→ means "depends on"): ${stuck} step${stuck === 1 ? '' : 's'} can never run, ` +
  `and the run will stop blocked at '${excerpt(blamed)}' once the steps before it have run (capsule validate refuses this plan)`;

/** A shell step's binary that is allowed but cannot be found. */
export const binaryNotFound = (stepId: string, binary: string): string =>
  `step '${excerpt(stepId)}': shell: '${excerpt(binary)}' is not found on PATH${binary.includes('/') ? ' (as a file)' : ''}, so the step will fail to start: ` +
  `install it, or write the program's path (and allow that path in capabilities.shell.allow)`;

/** A command tool whose program cannot be found. */
export const toolProgramNotFound = (stepId: string, tool: string, program: string): string =>
  `step '${excerpt(stepId)}': tool '${excerpt(tool)}' runs '${excerpt(program)}', which is not found on PATH${program.includes('/') ? ' (as a file)' : ''}, so every call will fail to start: ` +
  `fix the tool's "command" in the manifest`;

/** `capsule validate`'s refusal of a blocked plan: the run's blocked error, then the cycle (`'x' → 'y' → 'x'`). */
export const blockedByCycle = (cycle: string): string => `${BLOCKED}: ${cycle}`;
