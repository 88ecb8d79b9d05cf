import { stateName, type MachineModel, type StateInfo, type TransitionInfo } from './walk.js';

/**
 * Mermaid `stateDiagram-v2` text of a machine (`visualizations/README.md`): compound states as nested blocks,
 * `[*]` for initial and final, edge labels `EVENT [guard] / action, action`, targetless
 * transitions of an atomic state as self-loops. Each edge is written in the block of the innermost
 * state that contains both ends, so Mermaid places it inside the right box.
 * Every edge joins two declared states: Mermaid draws an edge from an undeclared id (the machine's
 * own transitions) as a state of its own, and a compound state's loop onto itself as one too. So
 * a compound state's targetless transitions and transitions back into itself (re-entered, `↻`) are
 * a note beside it, and the machine's own (taken in every state) a note beside its initial state.
 */
export function toMermaid(model: MachineModel): string {
  const lines: string[] = ['stateDiagram-v2'];
  const byId = new Map(model.states.map((state) => [state.id, state]));
  const edgesByBlock = new Map<string, TransitionInfo[]>();
  const notes = new Map<string, string[]>();
  const note = (stateId: string, line: string): void => void notes.set(stateId, [...(notes.get(stateId) ?? []), line]);
  const everyState = byId.get(model.root.initial ?? '') ?? model.root.children[0];
  for (const transition of model.transitions) {
    const source = byId.get(transition.sourceId);
    const to = transition.targets.map((id) => stateName(byId.get(id) ?? model.root) || model.id);
    if (source === undefined) {
      if (everyState !== undefined) note(everyState.id, `in every state: ${edgeLabel(transition)}${to.length > 0 ? ` → ${to.join(', ')}` : ''}`);
      continue;
    }
    if (source.children.length > 0 && transition.targets.every((id) => id === source.id)) {
      note(source.id, `${transition.targets.length > 0 ? '↻ ' : ''}${edgeLabel(transition)}${transition.targets.length > 0 && transition.reenter ? ' (re-entered)' : ''}`);
      continue;
    }
    const block = edgeBlock(transition, byId, model.root.id);
    const list = edgesByBlock.get(block) ?? [];
    list.push(transition);
    edgesByBlock.set(block, list);
  }

  const writeBlock = (parent: StateInfo, indent: string): void => {
    if (parent.initial !== null) lines.push(`${indent}[*] --> ${mermaidId(parent.initial, model.id)}`);
    for (const child of parent.children) {
      const id = mermaidId(child.id, model.id);
      if (child.children.length > 0) {
        lines.push(`${indent}state ${id} {`);
        writeBlock(child, `${indent}  `);
        lines.push(`${indent}}`);
      } else if (id !== child.path[child.path.length - 1]) {
        lines.push(`${indent}state "${child.path[child.path.length - 1] ?? id}" as ${id}`);
      } else {
        lines.push(`${indent}${id}`);
      }
    }
    for (const transition of edgesByBlock.get(parent.id) ?? []) {
      const from = mermaidId(transition.sourceId, model.id);
      const targets = transition.targets.length > 0 ? transition.targets : [transition.sourceId];
      for (const target of targets) lines.push(`${indent}${from} --> ${mermaidId(target, model.id)} : ${edgeLabel(transition)}`);
    }
    for (const child of parent.children) {
      if (child.type === 'final') lines.push(`${indent}${mermaidId(child.id, model.id)} --> [*]`);
    }
    for (const child of parent.children) {
      const text = notes.get(child.id);
      if (text === undefined) continue;
      lines.push(`${indent}note right of ${mermaidId(child.id, model.id)}`, ...text.map((line) => `${indent}  ${line}`), `${indent}end note`);
    }
  };
  writeBlock(model.root, '  ');
  return lines.join('\n') + '\n';
}

/** `EVENT [guard] / action, action` (the event part is `always`, `after <delay>`, `done: <actor>` …). */
export function edgeLabel(transition: TransitionInfo): string {
  let label = transition.label;
  if (transition.guard !== null) label += ` [${transition.guard}]`;
  if (transition.actions.length > 0) label += ` / ${transition.actions.join(', ')}`;
  return label.replace(/[:;#]/g, ' ');
}

/** A Mermaid state id: the key path below the root joined with `_` (`running_bounded`). */
export function mermaidId(stateId: string, machineId: string): string {
  const path = stateId.startsWith(`${machineId}.`) ? stateId.slice(machineId.length + 1) : stateId;
  return path.replace(/[^A-Za-z0-9_]/g, '_');
}

/** The id of the block an edge is written in: the innermost state strictly containing both ends. */
function edgeBlock(transition: TransitionInfo, byId: ReadonlyMap<string, StateInfo>, rootId: string): string {
  const ends = [transition.sourceId, ...transition.targets];
  const paths = ends.map((id) => byId.get(id)?.path ?? []);
  let common = paths[0] ?? [];
  for (const path of paths.slice(1)) {
    let n = 0;
    while (n < common.length && n < path.length && common[n] === path[n]) n++;
    common = common.slice(0, n);
  }
  // The block must strictly contain each end: an end equal to the common prefix lives one level up.
  if (paths.some((path) => path.length === common.length)) common = common.slice(0, -1);
  if (common.length === 0) return rootId;
  for (const state of byId.values()) {
    if (stateName(state) === common.join('.')) return state.id;
  }
  return rootId;
}
