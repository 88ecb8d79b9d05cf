/**
 * A plan run's steps as a Graphviz graph (docs/run-page.md#the-graph), each step filled by its
 * outcome, laid out and drawn to SVG by `@viz-js/viz` (Graphviz compiled to WASM) when the page is
 * written, so the page needs no script or network to show it. Each node's SVG element has the id
 * `dag-r<run>-<step index>` and the class `step-<state>`, which the page's script and style use.
 */
import type { RunModel, StepState } from './run-model.js';

/** Steps of a run above which the graph is not drawn (layout time and a readable picture); the list and the timeline stay. */
export const DAG_MAX_STEPS = 300;
/** Dependencies above which the graph is not drawn either (Graphviz's layout time grows with them). */
export const DAG_MAX_EDGES = 1500;

/** Whether a run's graph is drawn. */
export function drawsGraph(run: RunModel): boolean {
  return run.steps.length > 0 && run.steps.length <= DAG_MAX_STEPS && run.steps.reduce((n, step) => n + step.dependsOn.length, 0) <= DAG_MAX_EDGES;
}

/** Fill and border per outcome; the page's legend uses the same colours. */
export const STATE_COLOURS: Readonly<Record<StepState, { readonly fill: string; readonly border: string }>> = {
  success: { fill: '#d3f2d9', border: '#1f7a35' },
  failed: { fill: '#fbd5d5', border: '#b42318' },
  skipped: { fill: '#e4e7ec', border: '#667085' },
  canceled: { fill: '#fde7c6', border: '#b54708' },
  discarded: { fill: '#ece3fb', border: '#6941c6' },
  'not-run': { fill: '#ffffff', border: '#98a2b3' },
  running: { fill: '#d1e9ff', border: '#1570ef' },
  pending: { fill: '#ffffff', border: '#d0d5dd' },
};

/** The run's graph in DOT: a node per step (labelled with its id and outcome), an edge per dependency. */
export function runDot(run: RunModel, key: string): string {
  const index = new Map(run.steps.map((step, i) => [step.id, i]));
  const lines = [
    'digraph plan {',
    '  rankdir=LR; nodesep=0.25; ranksep=0.5;',
    '  node [shape=box, style="rounded,filled", fontname="sans-serif", fontsize=11, margin="0.15,0.05", penwidth=1.5];',
    '  edge [color="#667085", arrowsize=0.7];',
  ];
  run.steps.forEach((step, i) => {
    const colours = STATE_COLOURS[step.state];
    const label = `${step.id}\n${step.state}${step.attempts.length > 1 ? ` · ${step.attempts.length} attempts` : ''}`;
    const dashed = step.state === 'not-run' || step.state === 'pending' || step.state === 'skipped' ? ',dashed' : '';
    const bold = step.critical ? ', penwidth=3' : '';
    lines.push(
      `  s${i} [id=${quote(`dag-${key}-${i}`)}, class=${quote(`step-node step-${step.state}${step.critical ? ' critical' : ''}`)}, label=${quote(label)}, tooltip=${quote(`${step.id}: ${step.state}`)}, fillcolor=${quote(colours.fill)}, color=${quote(colours.border)}, style=${quote(`rounded,filled${dashed}`)}${bold}];`,
    );
  });
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

/** DOT's quoted string: backslashes, quotes and newlines escaped (Graphviz's `\n` is a line break). */
function quote(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\r?\n/g, '\\n')}"`;
}

/**
 * Draws each run's graph to SVG; null for a run of no steps, more than {@link DAG_MAX_STEPS}
 * steps or more than {@link DAG_MAX_EDGES} dependencies.
 * Graphviz is loaded here only, so nothing else pays for it.
 */
export async function drawRuns(runs: readonly RunModel[]): Promise<(string | null)[]> {
  if (!runs.some(drawsGraph)) return runs.map(() => null);
  const { instance } = await import('@viz-js/viz');
  const viz = await instance();
  return runs.map((run, i) => {
    if (!drawsGraph(run)) return null;
    const svg = viz.renderString(runDot(run, `r${i}`), { format: 'svg', engine: 'dot' });
    // The XML prologue and doctype have no place inside HTML; the version comment says nothing to a reader.
    return svg.replace(/^[\s\S]*?(<svg\b)/, '$1').replace(/<!--[\s\S]*?-->\n?/g, '');
  });
}
