/**
 * The SVG charts read as pictures: every edge ends at a real state, edges with
 * the same ends are one edge, and transitions that stay in (or re-enter) a compound state are
 * listed inside it, so no edge points into empty space.
 */
import { stepMachine } from '../../machines/step.machine.js';
import { DRAWN_MACHINES } from '../../src/visualize/registry.js';
import { toDot } from '../../src/visualize/dot.js';
import { walkMachine } from '../../src/visualize/walk.js';

/** The edges of a DOT text: `from -> to`, with their label. */
function edges(dot: string): { from: string; to: string; label: string }[] {
  return [...dot.matchAll(/^\s*(\S+) -> (\S+?)(?: \[(.*)\])?;$/gm)].map((m) => ({ from: m[1] ?? '', to: m[2] ?? '', label: /label="([^"]*)"/.exec(m[3] ?? '')?.[1] ?? '' }));
}

/** The node ids a DOT text declares. */
function nodes(dot: string): Set<string> {
  return new Set([...dot.matchAll(/^\s*(s_\w+|start\w*) \[/gm)].map((m) => m[1] ?? ''));
}

describe.each(DRAWN_MACHINES.map((entry) => [entry.name, entry] as const))('the %s chart (DOT)', (_name, entry) => {
  const dot = toDot(walkMachine(entry.machine));

  it('draws every edge between declared states (none into or out of an invisible point)', () => {
    const declared = nodes(dot);
    for (const edge of edges(dot)) {
      expect(declared.has(edge.from)).toBe(true);
      expect(declared.has(edge.to)).toBe(true);
    }
  });

  it('ties each label to its own edge (Graphviz places a label before clipping its edge at a cluster, so it can sit away from it)', () => {
    expect(dot).toMatch(/^ {2}edge \[.*\bdecorate=true\b.*\];$/m);
    expect(edges(dot).filter((edge) => edge.label !== '' && /decorate=false/.test(edge.label))).toEqual([]);
  });

  it('draws one edge per pair of ends', () => {
    const pairs = edges(dot).map((edge) => `${edge.from}->${edge.to}`);
    expect(new Set(pairs).size).toBe(pairs.length);
  });
});

describe('the step chart', () => {
  const dot = toDot(walkMachine(stepMachine));

  it('lists the retry that re-enters running inside running, and its forced stop with the state it goes to', () => {
    expect(dot).toContain('↻ ATTEMPT.FINISHED [shouldRetry] / recordAttempt');
    expect(dot).toContain('CANCEL [isForced] / recordCancel → stopping');
  });

  it('merges the two ATTEMPT.FINISHED transitions from leaderExited to finished-or-canceled into labelled edges of their own ends', () => {
    const fromLeaderExited = edges(dot).filter((edge) => edge.from === 's_leaderExited');
    expect(fromLeaderExited.map((edge) => edge.to).sort()).toEqual(['s_canceled', 's_finished', 's_running_attempting', 's_running_backoff']);
  });
});
