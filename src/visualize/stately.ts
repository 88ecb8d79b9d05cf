import type { AnyStateMachine } from 'xstate';
import type { DrawnMachine } from './registry.js';

/** What a stub delay waits, in milliseconds: the real delays are functions of the input. */
export const STUB_DELAY_MS = 1000;

/**
 * `visualizations/<name>.stately.js` (`capsule visualize --stately NAME`): the machine as one
 * self-contained ES module that imports only `xstate`, for the Stately editor's "Import from code"
 * or a simulation. Generated from the machine object: its config (`machine.config`) as written —
 * states, transitions, guards, actions, actors and delays by name, descriptions — and every name
 * of its `setup()` (`machine.implementations`) with a stub: guards return false, actions do
 * nothing, actors never answer (an effect that settles once, or a child machine, as a promise that
 * never settles; an effect that sends events as a callback that sends none), delays are
 * {@link STUB_DELAY_MS}. What only runs as code is left out: the context (`{}`), inputs, action
 * and guard params, the output. An inline action or guard (an `assign(...)` written in the
 * config) gets a name of its own, `<kind>_<n>` (`assign_1`), stubbed like the others.
 * Plain JavaScript that is also valid TypeScript, so Node runs it as it is (docs/cli.md).
 */
export function toStatelyModule(entry: DrawnMachine): string {
  const machine = entry.machine;
  const impl = machine.implementations;
  const inline = { actions: new Map<unknown, string>(), guards: new Map<unknown, string>() };
  const inlineName = (kind: 'actions' | 'guards', fn: { type?: unknown; name: string }): string => {
    const known = inline[kind].get(fn);
    if (known !== undefined) return known;
    const base = (typeof fn.type === 'string' ? fn.type.replace(/^xstate\./, '') : fn.name || (kind === 'actions' ? 'action' : 'guard')).replace(/[^A-Za-z0-9_]/g, '_');
    const name = `${base}_${inline[kind].size + 1}`;
    inline[kind].set(fn, name);
    return name;
  };

  const action = (value: unknown, where: string): Code | string | Record<string, unknown> => {
    if (typeof value === 'string') return value;
    if (typeof value === 'function') return inlineName('actions', value as { type?: unknown; name: string });
    if (isObject(value) && typeof value.type === 'string') return namedWithParams(value, where);
    throw new Error(`${machine.id}: cannot write the action at ${where} for the Stately module`);
  };
  const actions = (value: unknown, where: string): unknown => (Array.isArray(value) ? value.map((a, i) => action(a, `${where}[${i}]`)) : action(value, where));
  const guard = (value: unknown, where: string): unknown => {
    if (typeof value === 'string') return value;
    if (typeof value === 'function') return inlineName('guards', value as { type?: unknown; name: string });
    if (isObject(value) && typeof value.type === 'string') return namedWithParams(value, where);
    throw new Error(`${machine.id}: cannot write the guard at ${where} for the Stately module`);
  };
  const transition = (value: unknown, where: string): unknown => {
    if (typeof value === 'string' || value === undefined) return value;
    if (!isObject(value)) throw new Error(`${machine.id}: cannot write the transition at ${where} for the Stately module`);
    return mapKeys(value, where, {
      target: plain,
      reenter: plain,
      description: plain,
      meta: plain,
      guard: (v, at) => guard(v, at),
      actions: (v, at) => actions(v, at),
    });
  };
  const transitions = (value: unknown, where: string): unknown => (Array.isArray(value) ? value.map((t, i) => transition(t, `${where}[${i}]`)) : transition(value, where));
  const transitionMap = (value: unknown, where: string): unknown => {
    if (!isObject(value)) throw new Error(`${machine.id}: cannot write ${where} for the Stately module`);
    return Object.fromEntries(Object.entries(value).map(([key, t]) => [key, transitions(t, `${where}.${key}`)]));
  };
  const invoke = (value: unknown, where: string): unknown => {
    if (!isObject(value) || typeof value.src !== 'string') throw new Error(`${machine.id}: cannot write the invoke at ${where} for the Stately module (its src must be a name of setup())`);
    return mapKeys(value, where, {
      id: plain,
      src: plain,
      systemId: plain,
      input: dropped,
      onDone: (v, at) => transitions(v, at),
      onError: (v, at) => transitions(v, at),
      onSnapshot: (v, at) => transitions(v, at),
    });
  };
  const state = (value: unknown, where: string): unknown => {
    if (!isObject(value)) throw new Error(`${machine.id}: cannot write the state ${where} for the Stately module`);
    return mapKeys(value, where, {
      id: plain,
      description: plain,
      type: plain,
      history: plain,
      target: plain,
      initial: plain,
      tags: plain,
      meta: plain,
      // Functions of the running machine, not of its chart.
      context: () => (where === machine.id ? {} : undefined),
      output: dropped,
      schemas: dropped,
      entry: (v, at) => actions(v, at),
      exit: (v, at) => actions(v, at),
      on: (v, at) => transitionMap(v, at),
      after: (v, at) => transitionMap(v, at),
      always: (v, at) => transitions(v, at),
      invoke: (v, at) => (Array.isArray(v) ? v.map((i, n) => invoke(i, `${at}[${n}]`)) : invoke(v, at)),
      states: (v, at) => (isObject(v) ? Object.fromEntries(Object.entries(v).map(([key, s]) => [key, state(s, `${at}.${key}`)])) : v),
    });
  };
  const config = state(machine.config, machine.id);

  const actorKinds = entry.actorKinds ?? {};
  const setupConfig: Record<string, unknown> = {};
  const guards = [...Object.keys(impl.guards), ...inline.guards.values()];
  if (guards.length > 0) setupConfig.guards = Object.fromEntries(guards.map((name) => [name, new Code('() => false')]));
  const actionNames = [...Object.keys(impl.actions), ...inline.actions.values()];
  if (actionNames.length > 0) setupConfig.actions = Object.fromEntries(actionNames.map((name) => [name, new Code('() => {}')]));
  const actors = Object.entries(impl.actors);
  if (actors.length > 0) {
    setupConfig.actors = Object.fromEntries(
      actors.map(([name]) => [name, new Code(actorKinds[name] === 'callback' ? 'fromCallback(() => {})' : 'fromPromise(() => new Promise(() => {}))')]),
    );
  }
  const delays = Object.keys(impl.delays);
  if (delays.length > 0) setupConfig.delays = Object.fromEntries(delays.map((name) => [name, STUB_DELAY_MS]));

  const imports = ['setup'];
  if (actors.some(([name]) => actorKinds[name] === 'callback')) imports.push('fromCallback');
  if (actors.some(([name]) => actorKinds[name] !== 'callback')) imports.push('fromPromise');
  return [
    `// The ${machine.id} machine (${entry.source}) for the Stately editor (https://stately.ai/editor, "Import from code")`,
    '// or a simulation: `createActor(' + exportName(machine) + ').start()`. Generated from the machine by `capsule visualize`;',
    '// do not edit (visualizations/README.md). Its effects are stubs: guards return false, actions do nothing,',
    `// actors never answer, delays are ${STUB_DELAY_MS} ms; the context, inputs, params and output are left out.`,
    `import { ${imports.sort().join(', ')} } from 'xstate';`,
    '',
    `export const ${exportName(machine)} = setup(${print(setupConfig, '')}).createMachine(${print(config, '')});`,
    '',
  ].join('\n');
}

/** The module's export: `stepMachine` for the machine `step`. */
export function exportName(machine: AnyStateMachine): string {
  return `${machine.id.replace(/[^A-Za-z0-9_$]/g, '_')}Machine`;
}

/** Code written as it is (a stub's implementation), not as a literal. */
class Code {
  constructor(readonly text: string) {}
}

type Mapper = (value: unknown, where: string) => unknown;

const plain: Mapper = (value, where) => {
  if (!isPlain(value)) throw new Error(`${where}: a function where the Stately module needs plain data`);
  return value;
};
const dropped: Mapper = () => undefined;

/** Maps each key of a config object; a key no mapper knows is refused, so a new XState feature is never dropped silently. */
function mapKeys(value: Record<string, unknown>, where: string, mappers: Record<string, Mapper>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (v === undefined) continue;
    const mapper = mappers[key];
    if (mapper === undefined) throw new Error(`${where}: the key \`${key}\` is not written to the Stately module (src/visualize/stately.ts)`);
    const mapped = mapper(v, `${where}.${key}`);
    if (mapped !== undefined) out[key] = mapped;
  }
  return out;
}

/** `{ type, params }`: params kept when they are plain data, left out when computed from the event. */
function namedWithParams(value: Record<string, unknown>, where: string): string | Record<string, unknown> {
  const params = value.params;
  if (params === undefined || typeof params === 'function') return value.type as string;
  return { type: value.type, params: plain(params, `${where}.params`) };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isPlain(value: unknown): boolean {
  if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) return true;
  if (Array.isArray(value)) return value.every(isPlain);
  return isObject(value) && Object.values(value).every(isPlain);
}

/** JavaScript source of a value: objects a key a line, keys unquoted when they can be. */
function print(value: unknown, indent: string): string {
  if (value instanceof Code) return value.text;
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    const inner = `${indent}  `;
    return `[\n${value.map((item) => `${inner}${print(item, inner)},`).join('\n')}\n${indent}]`;
  }
  if (isObject(value)) {
    const entries = Object.entries(value);
    if (entries.length === 0) return '{}';
    const inner = `${indent}  `;
    return `{\n${entries.map(([key, item]) => `${inner}${/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? key : JSON.stringify(key)}: ${print(item, inner)},`).join('\n')}\n${indent}}`;
  }
  return JSON.stringify(value);
}
