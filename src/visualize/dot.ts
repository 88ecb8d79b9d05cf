import { edgeLabel, mermaidId } from './mermaid.js';
import type { MachineModel, StateInfo } from './walk.js';

/**
 * Graphviz DOT of a machine, from the same walk as the Mermaid text: compound states are clusters,
 * final states have a double border, a state's description is its tooltip. So that the picture
 * reads (look at it as a PNG: `rsvg-convert visualizations/step.svg -o step.png`):
 * - an edge into a compound state ends at its initial state (where the machine goes), clipped at
 *   the cluster's border with `lhead`; an edge out of one starts at its last state, clipped with
 *   `ltail`, so it leaves from the border and never from a point in empty space;
 * - edges with the same ends are one edge with one label line per transition (no crossing twins),
 *   its label tied to it by a line (`decorate`);
 * - targetless transitions, and a compound state's transitions back into itself (re-entered, `↻`),
 *   are listed inside their state, UML's internal-transition compartment: Graphviz piles
 *   self-loop labels on top of each other, and a cluster has no self-loop.
 * Rendered to SVG offline by `@viz-js/viz` (Graphviz compiled to WASM; no browser).
 */
export function toDot(model: MachineModel): string {
  const lines: string[] = [
    `digraph ${quote(model.id)} {`,
    '  compound=true;',
    '  rankdir=LR;',
    '  nodesep=0.5;',
    '  labelloc=t; fontname="Helvetica"; fontsize=16;',
    // Wide margins: viewers substitute Helvetica with wider fonts than Graphviz measured.
    '  node [shape=box, style=rounded, fontname="Helvetica", fontsize=11, margin="0.3,0.06"];',
    // decorate: each label is underlined and tied to its own edge by a line. Graphviz places a
    // label before clipping an edge at a cluster (ltail/lhead), so it can sit far from what is drawn.
    '  edge [fontname="Helvetica", fontsize=9, decorate=true];',
  ];
  const byId = new Map(model.states.map((state) => [state.id, state]));
  const inside = (outer: StateInfo, inner: StateInfo): boolean =>
    inner.path.length >= outer.path.length && outer.path.every((key, i) => inner.path[i] === key);
  // Listed in their state's compartment: targetless transitions, and a compound state's transitions into itself.
  const internal = new Map<string, string[]>();
  const listInside = (state: string, line: string): void => void internal.set(state, [...(internal.get(state) ?? []), line]);
  for (const transition of model.transitions) {
    const source = byId.get(transition.sourceId);
    if (transition.targets.length === 0) listInside(transition.sourceId, edgeLabel(transition));
    else if (source !== undefined && source.children.length > 0 && transition.targets.every((t) => t === source.id)) {
      listInside(transition.sourceId, `↻ ${edgeLabel(transition)}${transition.reenter ? ' (re-entered)' : ''}`);
    } else if (source !== undefined && source.children.length > 0) {
      // From any state of the compound to one of its own states: a cluster cannot be an edge's tail there.
      const within = transition.targets.map((t) => byId.get(t)).filter((t): t is StateInfo => t !== undefined && t.id !== source.id && inside(source, t));
      if (within.length === transition.targets.length) listInside(transition.sourceId, `${edgeLabel(transition)} → ${within.map((t) => t.path.slice(source.path.length).join('.')).join(', ')}`);
    }
  }
  /** The leaf an edge into `state` ends at (its initial state, all the way down) and the one an edge out of it starts at (its last). */
  const leafOf = (state: StateInfo, end: 'in' | 'out'): StateInfo => {
    let node = state;
    while (node.children.length > 0) {
      const next = end === 'in' ? (byId.get(node.initial ?? '') ?? node.children[0]) : node.children[node.children.length - 1];
      if (next === undefined) break;
      node = next;
    }
    return node;
  };

  const writeBlock = (parent: StateInfo, indent: string): void => {
    if (parent.initial !== null) {
      const start = startId(parent, model.id);
      lines.push(`${indent}${start} [shape=point, width=0.12, label=""];`);
      const initial = byId.get(parent.initial);
      if (initial !== undefined) {
        lines.push(`${indent}${start} -> ${dotId(leafOf(initial, 'in'), model.id)}${initial.children.length > 0 ? ` [lhead=${clusterId(initial, model.id)}]` : ''};`);
      }
    }
    for (const child of parent.children) {
      const name = child.path[child.path.length - 1] ?? child.id;
      const label = htmlLabel(name, [
        ...child.entry.map((action) => `entry / ${action}`),
        ...child.invoke.map((src) => `invoke / ${src}`),
        ...(internal.get(child.id) ?? []),
      ]);
      const tooltip = child.description !== null ? `tooltip=${quote(child.description)}` : null;
      if (child.children.length > 0) {
        lines.push(`${indent}subgraph ${clusterId(child, model.id)} {`);
        lines.push(`${indent}  label=${label}; style=rounded; fontname="Helvetica"; fontsize=12;${tooltip !== null ? ` ${tooltip};` : ''}`);
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
  // The machine's own invocations and transitions (a root-level invoke, an event every state takes) go under its title.
  lines.splice(
    7,
    0,
    `  label=${htmlLabel(model.id, [...model.root.invoke.map((src) => `invoke / ${src}`), ...(internal.get(model.root.id) ?? [])])};`,
  );

  // One edge per pair of ends, with a label line per transition (document order).
  const edges = new Map<string, { from: string; to: string; attrs: string[]; labels: string[]; tooltips: string[] }>();
  for (const transition of model.transitions) {
    const source = byId.get(transition.sourceId);
    if (source === undefined) continue;
    for (const targetId of transition.targets) {
      const target = byId.get(targetId);
      if (target === undefined) continue;
      if (source.children.length > 0 && (target.id === source.id || inside(source, target))) continue; // listed inside
      const outOf = source.children.length > 0 && !inside(source, target);
      const into = target.children.length > 0 && !inside(target, source);
      const from = dotId(outOf || source.children.length === 0 ? leafOf(source, 'out') : source, model.id);
      const to = dotId(leafOf(target, 'in'), model.id);
      const attrs: string[] = [];
      // Graphviz cannot clip an edge at a cluster that contains its other end.
      if (outOf) attrs.push(`ltail=${clusterId(source, model.id)}`);
      if (into) attrs.push(`lhead=${clusterId(target, model.id)}`);
      const key = `${from}->${to}|${attrs.join(',')}`;
      const edge = edges.get(key) ?? { from, to, attrs, labels: [], tooltips: [] };
      edge.labels.push(wrap(edgeLabel(transition)));
      if (transition.description !== null) edge.tooltips.push(transition.description);
      edges.set(key, edge);
    }
  }
  for (const edge of edges.values()) {
    const attrs = [`label=${quote(edge.labels.join('\n'))}`, ...edge.attrs];
    if (edge.tooltips.length > 0) attrs.push(`tooltip=${quote(edge.tooltips.join(' / '))}`);
    lines.push(`  ${edge.from} -> ${edge.to} [${attrs.join(', ')}];`);
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
  return `<<table border="0" cellborder="0" cellspacing="2" cellpadding="3"><tr><td><b>${html(name)}</b></td></tr><hr/>${rows.join('')}</table>>`;
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
