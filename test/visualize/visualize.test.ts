import { mkdtempSync, readFileSync, rmSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { visualizeCommand } from '../../src/cli/visualize.js';
import { toMermaid } from '../../src/visualize/mermaid.js';
import { DRAWN_MACHINES } from '../../src/visualize/registry.js';
import { checkVisualizations, generateVisualizations, type GeneratedFile } from '../../src/visualize/render.js';
import { walkMachine } from '../../src/visualize/walk.js';
import { stepMachine } from '../../machines/step.machine.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-viz-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Collects what a command prints. */
function capture(): { stdout: { write(text: string): boolean; text: string }; stderr: { write(text: string): boolean; text: string } } {
  const sink = () => ({ text: '', write(chunk: string) { this.text += chunk; return true; } });
  return { stdout: sink(), stderr: sink() };
}

let files: GeneratedFile[];
beforeAll(async () => {
  files = await generateVisualizations();
});

const content = (name: string): string => files.find((file) => file.name === name)?.content ?? '';

describe('visualizations/ (generated from machines/)', () => {
  it('match what the machines produce (capsule visualize --check)', async () => {
    const out = capture();
    const code = await visualizeCommand({ out: join(process.cwd(), 'visualizations'), check: true }, out);
    expect(out.stderr.text).toBe('');
    expect(code).toBe(0);
  });

  it('holds a .mmd, .svg and .stately.js per registered machine, plus README.md', () => {
    const expected = DRAWN_MACHINES.flatMap(({ name }) => [`${name}.mmd`, `${name}.svg`, `${name}.stately.js`]).concat('README.md');
    expect(files.map((file) => file.name)).toEqual(expected);
  });

  it('are deterministic: a second generation is byte for byte the same', async () => {
    expect(await generateVisualizations()).toEqual(files);
  });
});

describe('capsule visualize --check', () => {
  it('exits 1 and names the file when a committed diagram has drifted, and 0 once regenerated', async () => {
    const dir = join(scratch, 'drift');
    expect(await visualizeCommand({ out: dir }, capture())).toBe(0);
    expect(await visualizeCommand({ out: dir, check: true }, capture())).toBe(0);

    writeFileSync(join(dir, 'step.mmd'), readFileSync(join(dir, 'step.mmd'), 'utf8').replace('after attemptTimeout', 'after someOtherDelay'));
    unlinkSync(join(dir, 'plan.svg'));
    const out = capture();
    expect(await visualizeCommand({ out: dir, check: true }, out)).toBe(1);
    expect(out.stderr.text).toContain('step.mmd: differs from what the machines produce');
    // What differs: the first line that does, as the file has it and as the machines draw it.
    expect(out.stderr.text).toMatch(/step\.mmd: differs from what the machines produce, from line \d+:\n {2}in the file: {2}.*after someOtherDelay.*\n {2}the machines: .*after attemptTimeout/);
    expect(out.stderr.text).toContain('plan.svg: missing');
    expect(checkVisualizations(dir, files).map((drift) => drift.name)).toEqual(['plan.svg', 'step.mmd']);

    expect(await visualizeCommand({ out: dir }, capture())).toBe(0);
    expect(await visualizeCommand({ out: dir, check: true }, capture())).toBe(0);
  });

  it('does not pass stale charts after a machine source was edited without a build: it names the source and says to build (exit 1; drawing: exit 2)', async () => {
    const dir = join(scratch, 'stale');
    expect(await visualizeCommand({ out: dir }, capture())).toBe(0);
    const built = join(scratch, 'capsule.js');
    const source = join(scratch, 'step.machine.ts');
    writeFileSync(built, '');
    writeFileSync(source, '');
    utimesSync(built, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    const out = capture();
    expect(await visualizeCommand({ out: dir, check: true }, out, { built, sources: [source] })).toBe(1);
    expect(out.stdout.text).toBe('');
    expect(out.stderr.text).toContain('step.machine.ts changed after the build this command runs');
    expect(out.stderr.text).toContain('run `npm run build` first (`npm run viz` builds, then draws)');
    expect(await visualizeCommand({ out: dir }, capture(), { built, sources: [source] })).toBe(2);
    // Built since: checked as before.
    utimesSync(built, new Date(), new Date(Date.now() + 60_000));
    expect(await visualizeCommand({ out: dir, check: true }, capture(), { built, sources: [source] })).toBe(0);
  });

  it('flags a chart file no machine produces, such as one left by a removed machine', async () => {
    const dir = join(scratch, 'extra');
    expect(await visualizeCommand({ out: dir }, capture())).toBe(0);
    writeFileSync(join(dir, 'retired.mmd'), 'stateDiagram-v2\n');
    // The machine.toJSON() files earlier versions wrote, which the Stately modules replace.
    writeFileSync(join(dir, 'step.json'), '{}\n');
    const out = capture();
    expect(await visualizeCommand({ out: dir, check: true }, out)).toBe(1);
    expect(out.stderr.text).toContain('retired.mmd: produced by no machine');
    expect(out.stderr.text).toContain('step.json: produced by no machine');
  });

  it('exits 2 with a one-line error when --out cannot be written', async () => {
    const file = join(scratch, 'a-file');
    writeFileSync(file, '');
    const out = capture();
    expect(await visualizeCommand({ out: file }, out)).toBe(2);
    expect(out.stderr.text).toMatch(/^error: cannot write to .*a-file: .*\n$/);
  });
});

describe('the Mermaid charts', () => {
  const step = (): string => content('step.mmd');

  it('mark initial and final states with [*] and nest compound states', () => {
    expect(step()).toMatch(/^stateDiagram-v2\n {2}\[\*\] --> running\n {2}state running \{\n {4}\[\*\] --> running_attempting/);
    expect(step()).toContain('  finished --> [*]');
    expect(step()).toContain('  canceled --> [*]');
  });

  it('draw eventless (always) and delayed (after) transitions with their guards and actions', () => {
    expect(step()).toContain('running_attempting --> running_bounded : always [hasTimeout]');
    expect(step()).toContain('running_bounded --> running_stopping : after attemptTimeout / recordTimeout');
    expect(content('plan.mmd')).toContain('running_scanning --> running_dispatching : always [hasWave]');
    expect(content('plan.mmd')).toContain('leaderExited --> canceled : done (endProcessGroups) [isCanceled]');
  });

  it('draw targetless transitions of an atomic state as self-loops, and a compound state\'s in a note beside it', () => {
    expect(step()).toContain('leaderExited --> leaderExited : CANCEL / recordCancel');
    expect(step()).toMatch(/\n {2}note right of running\n(?: {4}.*\n)* {4}CANCEL \/ recordCancel, tellAttemptOfCancel\n(?: {4}.*\n)* {2}end note\n/);
    expect(step()).toContain('    ↻ ATTEMPT.FINISHED [shouldRetry] / recordAttempt (re-entered)\n');
    expect(step()).not.toMatch(/^ *running --> running :/m);
  });

  it('write the machine\'s own transitions in a note beside its initial state, never as a state named after the machine', () => {
    expect(content('shellCall.mmd')).toMatch(/\n {2}note right of running\n(?: {4}.*\n)* {4}in every state: COMMAND.SIGNAL_SENT \/ recordSignal\n/);
    expect(content('shellCall.mmd')).not.toContain('shellCall --> shellCall');
  });

  it('draw every transition of the walk, as an edge or a note line', () => {
    for (const { machine } of DRAWN_MACHINES) {
      const model = walkMachine(machine);
      const compound = new Set(model.states.filter((state) => state.children.length > 0).map((state) => state.id));
      const inNotes = model.transitions.filter((t) => !model.states.some((state) => state.id === t.sourceId) || (compound.has(t.sourceId) && t.targets.every((id) => id === t.sourceId)));
      const text = toMermaid(model);
      const edges = text.split('\n').filter((line) => line.includes(' --> ') && line.includes(' : '));
      const noteLines = [...text.matchAll(/note right of \S+\n((?:.*\n)*?)\s*end note/g)].flatMap((m) => (m[1] ?? '').trimEnd().split('\n'));
      expect(noteLines).toHaveLength(inNotes.length);
      expect(edges).toHaveLength(model.transitions.filter((t) => !inNotes.includes(t)).reduce((n, t) => n + Math.max(1, t.targets.length), 0));
    }
  });

  it.each(DRAWN_MACHINES.map(({ name }) => [name]))('%s.mmd draws no state that does not exist: every edge and note joins declared states, and no compound state loops onto itself', (name) => {
    const text = content(`${name}.mmd`);
    const declared = new Set<string>();
    for (const m of text.matchAll(/^\s*state (?:"[^"]*" as )?(\w+)(?: \{)?$/gm)) declared.add(m[1] ?? '');
    for (const m of text.matchAll(/^\s*(\w+)$/gm)) if (m[1] !== 'stateDiagram') declared.add(m[1] ?? '');
    const compound = new Set([...text.matchAll(/^\s*state (\w+) \{$/gm)].map((m) => m[1] ?? ''));
    const ends = [...text.matchAll(/^\s*(\S+) --> (\S+)/gm)].flatMap((m) => [m[1] ?? '', m[2] ?? '']).filter((end) => end !== '[*]');
    const noted = [...text.matchAll(/^\s*note right of (\S+)$/gm)].map((m) => m[1] ?? '');
    expect([...ends, ...noted].filter((id) => !declared.has(id))).toEqual([]);
    expect([...text.matchAll(/^\s*(\w+) --> \1 :/gm)].map((m) => m[1]).filter((id) => compound.has(id ?? ''))).toEqual([]);
  });
});

describe('the index and the SVG', () => {
  it('embeds each chart in a mermaid fence, with tables of state and transition descriptions', () => {
    const readme = content('README.md');
    for (const { name } of DRAWN_MACHINES) {
      expect(readme).toContain(`## ${name}`);
      expect(readme).toContain('```mermaid\n' + content(`${name}.mmd`).trimEnd() + '\n```');
    }
    const step = walkMachine(stepMachine);
    const bounded = step.states.find((state) => state.id === 'step.running.bounded');
    const timeout = step.transitions.find((t) => t.kind === 'after');
    expect(readme).toContain(`| \`running.bounded\` | atomic | ${bounded?.description ?? '?'} |`);
    expect(readme).toContain(`| \`running.bounded\` | after attemptTimeout |  | \`running.stopping\` | recordTimeout | ${timeout?.description ?? '?'} |`);
  });

  it('renders SVG offline, without the renderer version in it', () => {
    for (const { name } of DRAWN_MACHINES) {
      const svg = content(`${name}.svg`);
      expect(svg).toContain('<svg');
      expect(svg).not.toContain('Generated by graphviz');
    }
    expect(content('step.svg')).toContain('after attemptTimeout');
  });
});

describe('machines/ documentation', () => {
  it.each(DRAWN_MACHINES.map(({ name, machine }) => [name, machine] as const))('every state and transition of %s has a description', (_name, machine) => {
    const model = walkMachine(machine);
    expect(model.description).not.toBeNull();
    expect(model.states.filter((state) => state.description === null).map((state) => state.id)).toEqual([]);
    expect(model.transitions.filter((t) => t.description === null).map((t) => `${t.sourceId} ${t.label}`)).toEqual([]);
  });
});
