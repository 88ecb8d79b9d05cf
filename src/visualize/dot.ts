import { edgeLabel, mermaidId } from './mermaid.js';
import type { MachineModel, StateInfo, TransitionInfo } from './walk.js';

/**
 * Graphviz DOT of a machine, from the same walk as the Mermaid text: compound states are clusters
 * (edges attach to an invisible port inside and are clipped at the border with `lhead`/`ltail`),
 * final states have a double border, a state's description is its tooltip. Targetless
 * transitions are listed inside their state, UML's internal-transition compartment: Graphviz
 * piles self-loop labels on top of each other. Rendered to SVG offline by `@viz-js/viz`
 * (Graphviz compiled to WASM; no browser).
 */
export function toDot(model: MachineModel): string {
  const lines: string[] = [
    `digraph ${quote(model.id)} {`,
    '  compound=true;',
    '  rankdir=LR;',
    '  nodesep=0.5;',
    `  label=${quote(model.id)}; labelloc=t; fontname="Helvetica"; fontsize=16;`,
    '  node [shape=box, style=rounded, fontname="Helvetica", fontsize=11];',
    '  edge [fontname="Helvetica", fontsize=9];',
  ];
  const byId = new Map(model.states.map((state) => [state.id, state]));
  const internal = new Map<string, TransitionInfo[]>();
  for (const transition of model.transitions) {
    if (transition.targets.length > 0) continue;
    internal.set(transition.sourceId, [...(internal.get(transition.sourceId) ?? []), transition]);
  }
  // A compound state has two invisible ports, one edges leave from and one they arrive at:
  // with a single port, a pair of opposite edges would be drawn on one line, labels on top of each other.
  const nodeOf = (state: StateInfo, end: 'out' | 'in'): string =>
    state.children.length > 0 ? portId(state, model.id, end) : dotId(state, model.id);

  const writeBlock = (parent: StateInfo, indent: string): void => {
    if (parent.initial !== null) {
      const start = startId(parent, model.id);
      lines.push(`${indent}${start} [shape=point, width=0.12, label=""];`);
      const initial = byId.get(parent.initial);
      if (initial !== undefined) {
        lines.push(`${indent}${start} -> ${nodeOf(initial, 'in')}${initial.children.length > 0 ? ` [lhead=${clusterId(initial, model.id)}]` : ''};`);
      }
    }
    for (const child of parent.children) {
      const name = child.path[child.path.length - 1] ?? child.id;
      const label = htmlLabel(name, [
        ...child.entry.map((action) => `entry / ${action}`),
        ...child.invoke.map((src) => `invoke / ${src}`),
        ...(internal.get(child.id) ?? []).map(edgeLabel),
      ]);
      const tooltip = child.description !== null ? `tooltip=${quote(child.description)}` : null;
      if (child.children.length > 0) {
        lines.push(`${indent}subgraph ${clusterId(child, model.id)} {`);
        lines.push(`${indent}  label=${label}; style=rounded; fontname="Helvetica"; fontsize=12;${tooltip !== null ? ` ${tooltip};` : ''}`);
        for (const end of ['out', 'in'] as const) {
          lines.push(`${indent}  ${portId(child, model.id, end)} [shape=point, style=invis, width=0.01, label=""];`);
        }
        writeBlock(child, `${indent}  `);
        lines.push(`${indent}}`);
      } else {
        const attrs = [`label=${label}`];
        if (child.type === 'final') attrs.push('peripheries=2');
        if (tooltip !== null) attrs.push(tooltip);
        lines.push(`${indent}${dotId(child, model.id)} [${attrs.join(', ')}];`);
      }
    }
  };
  writeBlock(model.root, '  ');

  const inside = (outer: StateInfo, inner: StateInfo): boolean =>
    inner.path.length >= outer.path.length && outer.path.every((key, i) => inner.path[i] === key);
  for (const transition of model.transitions) {
    const source = byId.get(transition.sourceId);
    if (source === undefined) continue;
    for (const targetId of transition.targets) {
      const target = byId.get(targetId);
      if (target === undefined) continue;
      const attrs = [`label=${quote(wrap(edgeLabel(transition)))}`];
      if (transition.description !== null) attrs.push(`tooltip=${quote(transition.description)}`);
      // Graphviz cannot clip an edge at a cluster that contains its other end.
      if (source.children.length > 0 && !inside(source, target)) attrs.push(`ltail=${clusterId(source, model.id)}`);
      if (target.children.length > 0 && !inside(target, source)) attrs.push(`lhead=${clusterId(target, model.id)}`);
      lines.push(`  ${nodeOf(source, 'out')} -> ${nodeOf(target, 'in')} [${attrs.join(', ')}];`);
    }
  }
  lines.push('}');
  return lines.join('\n') + '\n';
}

/** A state's label: its name, then its compartment (entry actions, invoked actors, internal transitions), a line each. */
function htmlLabel(name: string, compartment: readonly string[]): string {
  if (compartment.length === 0) return quote(name);
  const rows = compartment
    .map((line) => wrap(line).split('\n').map(html).join('<br align="left"/>'))
    .map((text) => `<tr><td align="left" balign="left"><font point-size="9">${text}</font></td></tr>`);
  return `<<table border="0" cellborder="0" cellspacing="2"><tr><td><b>${html(name)}</b></td></tr><hr/>${rows.join('')}</table>>`;
}

/** Breaks a label after its guard and between actions, so no line is much wider than 48 characters. */
function wrap(label: string, width = 48): string {
  const out: string[] = [];
  let line = '';
  for (const word of label.split(' ')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      out.push(line);
      line = `  ${word}`;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  if (line !== '') out.push(line);
  return out.join('\n');
}

function dotId(state: StateInfo, machineId: string): string {
  return `s_${mermaidId(state.id, machineId)}`;
}

function clusterId(state: StateInfo, machineId: string): string {
  return `cluster_${mermaidId(state.id, machineId)}`;
}

/** Where edges leave (`out`) or reach (`in`) a compound state (invisible, clipped away at the cluster border). */
function portId(state: StateInfo, machineId: string, end: 'out' | 'in'): string {
  return `${end}_${mermaidId(state.id, machineId)}`;
}

/** The initial marker of a compound state (of the root: `start`). */
function startId(state: StateInfo, machineId: string): string {
  return state.path.length === 0 ? 'start' : `start_${mermaidId(state.id, machineId)}`;
}

function html(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function quote(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
}
