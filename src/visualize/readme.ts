import { toMermaid } from './mermaid.js';
import type { DrawnMachine } from './registry.js';
import { stateName, type MachineModel } from './walk.js';

/**
 * `visualizations/README.md`: the index. Per machine its description, the Mermaid diagram in a
 * ```` ```mermaid ```` fence (GitHub renders it), links to the SVG and JSON, and tables of the
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
    'charts a transition without a target is a self-loop and `[*]` marks initial and final states. In',
    'the SVGs transitions with the same ends share one edge (a label line each), an edge into a',
    'compound state ends at its initial state, and transitions that stay in their state (or re-enter',
    'it, `↻`) are listed inside it, under its name.',
    '',
  ];
  for (const { entry } of machines) out.push(`- [${entry.name}](#${entry.name.toLowerCase()}) — \`${entry.source}\``); // a heading's anchor is lower case
  out.push('');
  for (const { entry, model } of machines) {
    out.push(`## ${entry.name}`, '');
    if (model.description !== null) out.push(model.description, '');
    out.push(
      `Source: \`${entry.source}\` · [${entry.name}.svg](${entry.name}.svg) · [${entry.name}.mmd](${entry.name}.mmd) · [${entry.name}.json](${entry.name}.json) (\`machine.toJSON()\`)`,
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
