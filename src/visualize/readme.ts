import { toMermaid } from './mermaid.js';
import type { DrawnMachine } from './registry.js';
import { STUB_DELAY_MS } from './stately.js';
import { stateName, type MachineModel } from './walk.js';

/**
 * `visualizations/README.md`: the index. Per machine its description, the Mermaid diagram in a
 * ```` ```mermaid ```` fence (GitHub renders it), links to the SVG and the Stately module, and tables of the
 * states and transitions with their descriptions.
 */
export function toReadme(machines: readonly { readonly entry: DrawnMachine; readonly model: MachineModel }[]): string {
  const out: string[] = [
    '# State charts',
    '',
    'Generated from `machines/` by `capsule visualize` (`npm run viz`); do not edit by hand.',
    '`capsule visualize --check` (run by `test/visualize/visualize.test.ts`) fails when these files',
    'differ from what the machines produce, so regenerate them after changing a machine.',
    'The machines drawn are the kinds of the actor-kind table (`src/actors/actor-kinds.ts`).',
    '',
    'Edge labels read `EVENT [guard] / actions`. `always` is an eventless transition, `after <delay>`',
    'a delayed one, `done (<actor>)` / `error (<actor>)` the end of an invoked actor. In the Mermaid',
    'charts a transition without a target is a self-loop, `[*]` marks initial and final states, and',
    'a note beside a compound state lists the transitions that stay in it (or re-enter it, `↻`); the',
    'machine\'s own transitions, taken in every state, are a note beside its initial state. In',
    'the SVGs each label is tied to its edge by a line, transitions with the same ends share one',
    'edge (a label line each), an edge into a',
    'compound state ends at its initial state, and transitions that stay in their state (or re-enter',
    'it, `↻`) are listed inside it, under its name.',
    '',
    'Each `<name>.stately.js` is the machine as one module that imports only `xstate`: paste it into',
    'the Stately editor (https://stately.ai/editor, "Import from code") or run it with',
    '`createActor(<name>Machine).start()`. Its config is the machine\'s (states, transitions, guards,',
    'actions, actors and delays by name, descriptions); the implementations are stubs (guards return',
    `\`false\`, actions do nothing, actors never answer, delays are ${STUB_DELAY_MS} ms), and the context, inputs,`,
    'params and output, which only run as code, are left out. `capsule visualize --stately NAME`',
    'prints one.',
    '',
  ];
  for (const { entry } of machines) out.push(`- [${entry.name}](#${entry.name.toLowerCase()}) — \`${entry.source}\``); // a heading's anchor is lower case
  out.push('');
  for (const { entry, model } of machines) {
    out.push(`## ${entry.name}`, '');
    if (model.description !== null) out.push(model.description, '');
    out.push(
      `Source: \`${entry.source}\` · [${entry.name}.svg](${entry.name}.svg) · [${entry.name}.mmd](${entry.name}.mmd) · [${entry.name}.stately.js](${entry.name}.stately.js) (for the Stately editor)`,
      '',
      '```mermaid',
      toMermaid(model).trimEnd(),
      '```',
      '',
      '### States',
      '',
      '| State | Type | Description |',
      '| --- | --- | --- |',
    );
    for (const state of model.states) {
      const extra = [
        state.entry.length > 0 ? `entry: ${state.entry.join(', ')}` : null,
        state.invoke.length > 0 ? `invokes: ${state.invoke.join(', ')}` : null,
      ].filter((part): part is string => part !== null);
      const type = state.type === 'compound' && state.initial !== null ? `compound (initial \`${state.initial.split('.').pop() ?? ''}\`)` : state.type;
      out.push(`| \`${stateName(state)}\` | ${type} | ${cell(state.description ?? '')}${extra.length > 0 ? ` _(${extra.join('; ')})_` : ''} |`);
    }
    out.push('', '### Transitions', '', '| From | Event | Guard | To | Actions | Description |', '| --- | --- | --- | --- | --- | --- |');
    const nameOf = (id: string): string => id.slice(model.id.length + 1) || id;
    for (const transition of model.transitions) {
      const to = transition.targets.length === 0 ? '_(stays)_' : transition.targets.map((id) => `\`${nameOf(id)}\``).join(', ');
      out.push(
        `| \`${nameOf(transition.sourceId)}\` | ${cell(transition.label)} | ${transition.guard ?? ''} | ${to}${transition.reenter && transition.targets.length > 0 ? ' (re-entered)' : ''} | ${cell(transition.actions.join(', '))} | ${cell(transition.description ?? '')} |`,
      );
    }
    out.push('');
  }
  return out.join('\n');
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}
