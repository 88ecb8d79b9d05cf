/**
 * A plan run's steps as a Graphviz graph (docs/run-page.md#the-graph), each step filled by its
 * outcome, laid out and drawn to SVG by `@viz-js/viz` (Graphviz compiled to WASM) when the page is
 * written, so the page needs no script or network to show it.
 *
 * Two pictures of a run with matrix steps: the **grouped** one, where a matrix step's instances
 * are one node showing their aggregate state (the page's first view), and the **expanded** one,
 * where they are boxed together under their step. Each node's SVG element has the id
 * `dag-<run>-<step index>` (grouped: `dag-<run>-g<group index>` for a group) or
 * `dagx-<run>-<step index>` (expanded) and the class `step-<state>`, which the page's script and
 * style use.
 */
import type { GroupModel, RunModel, StepModel, StepState } from './run-model.js';

/** Nodes of a graph above which it is not drawn (layout time and a readable picture); the list and the timeline stay. */
export const DAG_MAX_STEPS = 300;
/** Edges above which a graph is not drawn either (Graphviz's layout time grows with them). */
export const DAG_MAX_EDGES = 1500;

/** Fill and border per outcome; the page's legend uses the same colours. */
export const STATE_COLOURS: Readonly<Record<StepState, { readonly fill: string; readonly border: string }>> = {
  success: { fill: '#d3f2d9', border: '#1f7a35' },
  restored: { fill: '#e3f5e1', border: '#4e7a1f' },
  cached: { fill: '#d5f5f6', border: '#0e7090' },
  failed: { fill: '#fbd5d5', border: '#b42318' },
  skipped: { fill: '#e4e7ec', border: '#667085' },
  canceled: { fill: '#fde7c6', border: '#b54708' },
  discarded: { fill: '#ece3fb', border: '#6941c6' },
  'not-run': { fill: '#ffffff', border: '#98a2b3' },
  running: { fill: '#d1e9ff', border: '#1570ef' },
  pending: { fill: '#ffffff', border: '#d0d5dd' },
};

/** A run's graph as drawn: the nodes (a step, or a matrix group in the grouped picture) and their edges. */
interface Shape {
  readonly nodes: number;
  readonly edges: ReadonlySet<string>;
}

/**
 * The grouped picture's nodes and edges: a step outside a matrix is its own node, each matrix
 * group one node (`g<n>`); a dependency between two nodes is one edge however many instances it joins.
 */
function groupedShape(run: RunModel): { readonly nodeOf: readonly string[]; readonly shape: Shape } {
  const nodeOf: string[] = run.steps.map((_, i) => `s${i}`);
  run.groups.forEach((group, g) => {
    for (const i of group.steps) nodeOf[i] = `g${g}`;
  });
  const index = indexOf(run);
  const edges = new Set<string>();
  run.steps.forEach((step, i) => {
    for (const dep of step.dependsOn) {
      const from = index.get(dep);
      if (from !== undefined && nodeOf[from] !== nodeOf[i]) edges.add(`${nodeOf[from] as string} -> ${nodeOf[i] as string}`);
    }
  });
  return { nodeOf, shape: { nodes: run.steps.length - run.groups.reduce((n, group) => n + group.steps.length - 1, 0), edges } };
}

/** Whether a graph of this many nodes and edges is drawn. */
function drawable(nodes: number, edges: number): boolean {
  return nodes > 0 && nodes <= DAG_MAX_STEPS && edges <= DAG_MAX_EDGES;
}

/** Dependencies of a run, counted as written (each instance's own). */
export function dependencyCount(run: RunModel): number {
  let n = 0;
  for (const step of run.steps) n += step.dependsOn.length;
  return n;
}

/** Whether a run's graph is drawn: its grouped picture within the bounds (each matrix group one node). */
export function drawsGraph(run: RunModel): boolean {
  if (run.steps.length === 0) return false;
  if (run.groups.length === 0) return drawable(run.steps.length, dependencyCount(run));
  // The boxes are counted before the arrows are: too many boxes need no walk of every dependency.
  const boxes = run.steps.length - run.groups.reduce((n, group) => n + group.steps.length - 1, 0);
  if (!drawable(boxes, 0)) return false;
  const { shape } = groupedShape(run);
  return drawable(shape.nodes, shape.edges.size);
}

/** Whether its expanded picture (every instance a node) is drawn too: it has matrix groups and is within the bounds. */
export function drawsExpanded(run: RunModel): boolean {
  return run.groups.length > 0 && drawable(run.steps.length, dependencyCount(run));
}

const HEAD = [
  '  rankdir=LR; nodesep=0.25; ranksep=0.5;',
  '  node [shape=box, style="rounded,filled", fontname="sans-serif", fontsize=11, margin="0.15,0.05", penwidth=1.5];',
  '  edge [color="#667085", arrowsize=0.7];',
];

/** A step's node: its id and state, its attempts when more than one, and `always runs` when it does. */
function stepNode(step: StepModel, name: string, id: string): string {
  const colours = STATE_COLOURS[step.state];
  const label = `${step.id}\n${step.state}${step.attempts.length > 1 ? ` · ${step.attempts.length} attempts` : ''}${step.always ? '\nalways runs' : ''}`;
  const dashed = step.state === 'not-run' || step.state === 'pending' || step.state === 'skipped' ? ',dashed' : '';
  const bold = step.critical ? ', penwidth=3' : '';
  const cls = `step-node step-${step.state}${step.critical ? ' critical' : ''}${step.always ? ' always' : ''}`;
  return `  ${name} [id=${quote(id)}, class=${quote(cls)}, label=${quote(label)}, tooltip=${quote(`${step.id}: ${step.state}${step.always ? ', always runs' : ''}`)}, fillcolor=${quote(colours.fill)}, color=${quote(colours.border)}, style=${quote(`rounded,filled${dashed}`)}${bold}];`;
}

/** What a group's instances ended as, in words: `3 success, 1 failed`. */
export function groupCounts(group: GroupModel): string {
  return (Object.entries(group.totals) as [StepState, number][])
    .filter(([, n]) => n > 0)
    .map(([state, n]) => `${n} ${state}`)
    .join(', ');
}

/** A matrix group's node in the grouped picture: a double border, its step's id, its instances' count and aggregate state. */
function groupNode(group: GroupModel, name: string, id: string): string {
  const colours = STATE_COLOURS[group.state];
  const label = `${group.id}\nmatrix · ${group.steps.length} instances\n${group.state} (${groupCounts(group)})${group.always ? '\nalways runs' : ''}`;
  const bold = group.critical ? ', penwidth=3' : '';
  const cls = `step-node group-node step-${group.state}${group.critical ? ' critical' : ''}`;
  return `  ${name} [id=${quote(id)}, class=${quote(cls)}, peripheries=2, label=${quote(label)}, tooltip=${quote(`${group.id}: matrix of ${group.steps.length} instances, ${group.state} (${groupCounts(group)})`)}, fillcolor=${quote(colours.fill)}, color=${quote(colours.border)}${bold}];`;
}

/** The run's grouped graph in DOT: a node per step outside a matrix and per matrix group, an edge per dependency between them. */
export function runDot(run: RunModel, key: string): string {
  const { nodeOf, shape } = groupedShape(run);
  const lines = ['digraph plan {', ...HEAD];
  run.steps.forEach((step, i) => {
    if (step.matrixGroup === null) lines.push(stepNode(step, `s${i}`, `dag-${key}-${i}`));
  });
  run.groups.forEach((group, g) => lines.push(groupNode(group, `g${g}`, `dag-${key}-g${g}`)));
  const critical = new Set<string>();
  run.steps.forEach((step, i) => {
    if (step.critical) critical.add(nodeOf[i] as string);
  });
  for (const edge of shape.edges) {
    const [from, to] = edge.split(' -> ') as [string, string];
    lines.push(`  ${edge}${critical.has(from) && critical.has(to) ? ' [color="#101828", penwidth=2]' : ''};`);
  }
  lines.push('}');
  return lines.join('\n');
}

/** The run's expanded graph in DOT: every step a node, each matrix group's instances boxed under their step's id and aggregate state. */
export function expandedDot(run: RunModel, key: string): string {
  const lines = ['digraph plan {', ...HEAD];
  const grouped = new Set<number>();
  run.groups.forEach((group, g) => {
    const colours = STATE_COLOURS[group.state];
    lines.push(`  subgraph cluster_g${g} {`, `    id=${quote(`dagx-${key}-g${g}`)}; label=${quote(`${group.id} (matrix): ${group.state}`)}; style="rounded,dashed"; color=${quote(colours.border)}; fontname="sans-serif"; fontsize=11;`);
    for (const i of group.steps) {
      grouped.add(i);
      lines.push(`  ${stepNode(run.steps[i] as StepModel, `s${i}`, `dagx-${key}-${i}`)}`);
    }
    lines.push('  }');
  });
  run.steps.forEach((step, i) => {
    if (!grouped.has(i)) lines.push(stepNode(step, `s${i}`, `dagx-${key}-${i}`));
  });
  const index = indexOf(run);
  run.steps.forEach((step, i) => {
    for (const dep of step.dependsOn) {
      const from = index.get(dep);
      if (from === undefined) continue;
      const critical = run.steps[from]?.critical === true && step.critical;
      lines.push(`  s${from} -> s${i}${critical ? ' [color="#101828", penwidth=2]' : ''};`);
    }
  });
  lines.push('}');
  return lines.join('\n');
}

function indexOf(run: RunModel): Map<string, number> {
  return new Map(run.steps.map((step, i) => [step.id, i]));
}

/** DOT's quoted string: backslashes, quotes and newlines escaped (Graphviz's `\n` is a line break). */
function quote(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\r?\n/g, '\\n')}"`;
}

/** A run's pictures as SVG: the grouped one (null when not drawn) and the expanded one (null without matrix groups or past the bounds). */
export interface RunGraphs {
  readonly grouped: string | null;
  readonly expanded: string | null;
}

/**
 * Draws each run's graphs to SVG ({@link drawsGraph}, {@link drawsExpanded}).
 * Graphviz is loaded here only, so nothing else pays for it.
 */
export async function drawRuns(runs: readonly RunModel[]): Promise<RunGraphs[]> {
  const wanted = runs.map((run) => ({ grouped: drawsGraph(run), expanded: drawsExpanded(run) }));
  if (!wanted.some((want) => want.grouped || want.expanded)) return runs.map(() => ({ grouped: null, expanded: null }));
  const { instance } = await import('@viz-js/viz');
  const viz = await instance();
  // The XML prologue and doctype have no place inside HTML; the version comment says nothing to a reader.
  const svg = (dot: string): string =>
    viz
      .renderString(dot, { format: 'svg', engine: 'dot' })
      .replace(/^[\s\S]*?(<svg\b)/, '$1')
      .replace(/<!--[\s\S]*?-->\n?/g, '');
  return runs.map((run, i) => ({
    grouped: wanted[i]?.grouped === true ? svg(runDot(run, `r${i}`)) : null,
    expanded: wanted[i]?.expanded === true ? svg(expandedDot(run, `r${i}`)) : null,
  }));
}
