/**
 * Every machine's Stately module (`visualizations/<name>.stately.js`, `capsule visualize --stately`)
 * stands alone: evaluated in a child `node` outside the repository with only `xstate` to import,
 * it starts, takes an event, and has the real machine's states and transitions.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { AnyStateNode } from 'xstate';
import { visualizeCommand } from '../../src/cli/visualize.js';
import { DRAWN_MACHINES } from '../../src/visualize/registry.js';
import { exportName, toStatelyModule } from '../../src/visualize/stately.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-stately-'));
mkdirSync(join(scratch, 'node_modules'));
symlinkSync(resolve('node_modules', 'xstate'), join(scratch, 'node_modules', 'xstate'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Shape {
  readonly states: string[];
  /** Per state id: its events (`always` for eventless), each with how many candidate transitions. */
  readonly transitions: Record<string, string[]>;
}

/** The states and transitions of a machine as XState built them; run here on the real machine and, as source text, in the child. */
function shapeOf(root: AnyStateNode): Shape {
  const states: string[] = [];
  const transitions: Record<string, string[]> = {};
  const visit = (node: AnyStateNode): void => {
    states.push(node.id);
    transitions[node.id] = [...node.transitions.entries()].map(([type, list]) => `${type} ×${list.length}`).concat((node.always ?? []).length > 0 ? [`always ×${(node.always ?? []).length}`] : []);
    for (const child of Object.values(node.states as Record<string, AnyStateNode>)) visit(child);
  };
  visit(root);
  return { states, transitions };
}

/** In the child: import the module, start it, send the first event its state can take, report. */
const childScript = (file: string, exported: string): string => `
import { createActor } from 'xstate';
import { ${exported} as machine } from './${file}';
const shapeOf = ${shapeOf.toString()};
const actor = createActor(machine).start();
const before = actor.getSnapshot();
const candidates = [...new Set(before._nodes.flatMap((node) => [...node.transitions.keys()]))].filter((type) => !type.includes('*'));
const event = candidates.find((type) => before.can({ type }));
if (event === undefined) throw new Error('no event is taken in ' + JSON.stringify(before.value));
actor.send({ type: event });
const after = actor.getSnapshot();
actor.stop();
console.log(JSON.stringify({ started: before.status, event, status: after.status, error: String(after.error ?? ''), shape: shapeOf(machine.root) }));
`;

describe.each(DRAWN_MACHINES.map((entry) => [entry.name, entry] as const))('the Stately module of %s', (name, entry) => {
  const module = toStatelyModule(entry);

  it('imports only xstate', () => {
    const imports = [...module.matchAll(/^\s*import\b.*?from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1]);
    expect(imports).toEqual(['xstate']);
    expect(module).not.toMatch(/\brequire\(|\bimport\(/);
  });

  it('starts alone in node with only xstate, takes an event without throwing, and has the real machine\'s states and transitions', () => {
    const file = `${name}.stately.js`;
    writeFileSync(join(scratch, file), module);
    writeFileSync(join(scratch, `${name}.run.mjs`), childScript(file, exportName(entry.machine)));
    const child = spawnSync(process.execPath, [`${name}.run.mjs`], { cwd: scratch, encoding: 'utf8' });
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
    const result = JSON.parse(child.stdout) as { started: string; event: string; status: string; error: string; shape: Shape };
    expect(result.started).toBe('active');
    expect(result.error).toBe('');
    expect(result.status).not.toBe('error');
    expect(result.shape).toEqual(shapeOf(entry.machine.root));
  });

  it('is what visualizations/ holds', () => {
    expect(readFileSync(join('visualizations', `${name}.stately.js`), 'utf8')).toBe(module);
  });
});

describe('capsule visualize --stately', () => {
  const capture = (): { stdout: { text: string; write(t: string): boolean }; stderr: { text: string; write(t: string): boolean } } => {
    const sink = () => ({ text: '', write(chunk: string) { this.text += chunk; return true; } });
    return { stdout: sink(), stderr: sink() };
  };

  it('prints the machine\'s module', async () => {
    const out = capture();
    const step = DRAWN_MACHINES.find((entry) => entry.name === 'step');
    expect(await visualizeCommand({ stately: 'step' }, out, { built: '', sources: [] })).toBe(0);
    expect(out.stdout.text).toBe(step === undefined ? '?' : toStatelyModule(step));
    expect(out.stdout.text).toContain('export const stepMachine = setup(');
  });

  it('refuses a name no machine has, listing the machines (exit 2)', async () => {
    const out = capture();
    expect(await visualizeCommand({ stately: 'stpe' }, out, { built: '', sources: [] })).toBe(2);
    expect(out.stdout.text).toBe('');
    expect(out.stderr.text).toBe(`error: no machine is named "stpe"; the machines: ${DRAWN_MACHINES.map((entry) => entry.name).join(', ')}\n`);
  });
});
