/**
 * Suite 2, shell steps, as whole fresh processes — what a user's alternative costs:
 *
 * - `capsule run` of the plan file (`node dist/bundle/capsule.js run plan.json --allow true
 *   --max-parallel N`, records on, progress to a non-terminal stderr, as a user runs it);
 * - raw `child_process.spawn` of `/usr/bin/true` (pipes read) from a FRESH small Node process at the
 *   same concurrency, in the same dependency order (`dist/bench/raw-spawn.js`: no runtime loaded);
 * - the contained floor (`raw-spawn.js --contained`): the same, plus exactly the kernel work of the
 *   default containment per step (a cgroup made and removed, the spawn helper joining it, a PID +
 *   mount namespace with its private /proc and one read-only bind); `capsule run` is compared with
 *   it too, and `capsule run` with the bare containment (process groups, no helper, no namespace)
 *   with the plain raw spawn;
 * - the design floor (`design-floor-spawn.js`): the contained floor's per-step work as the invoked
 *   attempt of one step actor per step, in the actor structure the design card asks for
 *   (bench/lib/design-floor.ts, at most N step actors alive), in a fresh small Node; and the same
 *   with the commands started by a small spawner process over IPC (`--spawner`), as the runtime
 *   does. No target: `capsule run` over it says what of its time is neither the kernel's nor the
 *   design's actors, the floor over the contained floor what those actors cost per step;
 * - `make -jN` on the equivalent Makefile (one phony target per step, its prerequisites the step's
 *   dependencies);
 * - `xargs -PN` on the equivalent work (one `xargs` per layer for the layered plan: each layer
 *   depends on the whole previous one, so a barrier between layers is the same DAG).
 *
 * Every subject is timed from outside, from just before its spawn to its exit (its start-up
 * included), interleaved run by run, and each ratio is taken pair by pair. 500 `true` steps, flat
 * and 20×25 layered, at N = 2 and 8. Then the flatness row (per-step cost of 10,000 shell steps
 * against 100, both through `capsule run`), and the startup row: from the exec of `capsule run` of a
 * 1-step plan to its step's command starting (the step is `date +%s%N`; its epoch against the
 * epoch read just before the spawn), against its floors, pair by pair: the whole of `node -e 0`
 * (Node's own start), and a fresh Node that only imports the bundle's chunks `capsule run` loads
 * (Node's start, reading, compiling and evaluating our code and the packages': no command parsed,
 * no session, no plan).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Row, Suite, SuiteContext } from '../harness.js';
import { interleave } from '../harness.js';
import { count, dependencies, layers, makePlan, stepId, type Shape } from '../lib/plans.js';
import { CLI, DESIGN_FLOOR_SPAWN, hasBinary, RAW_SPAWN, timeProcess, TRUE_BIN } from '../lib/processes.js';

const PARALLEL = [2, 8] as const;
/** The contained floor (`raw-spawn.js --contained`): the default containment's kernel work per step, nothing of ours. */
const CONTAINED = 'contained floor (fresh node)';
/** The design floor (`design-floor-spawn.js`): the contained floor's per-step work run through the design card's actor structure. */
const FLOOR_SUBJECT = 'design floor (fresh node)';
/** The design floor with its commands started by a small spawner process over IPC (`design-floor-spawn.js --spawner`), as the runtime starts them. */
const DESIGN_SPAWNER = 'design floor, spawner (fresh node)';
const MODULE_LIST = fileURLToPath(new URL('../module-list.js', import.meta.url));

/** esbuild's metafile of the bundle (scripts/bundle.js): each output file's source modules, and how outputs import each other. */
interface BundleMeta {
  readonly outputs: Readonly<Record<string, { readonly entryPoint?: string; readonly inputs: Readonly<Record<string, unknown>> }>>;
}

/** The package root (`CLI` is `<root>/dist/bundle/capsule.js`). */
const PACKAGE_ROOT = join(dirname(CLI), '..', '..');

function bundleMeta(): BundleMeta {
  return JSON.parse(readFileSync(join(PACKAGE_ROOT, 'dist', 'bundle', 'meta.json'), 'utf8')) as BundleMeta;
}

/** The package a source path belongs to (`ours` for the runtime's own). */
function packageOf(path: string): string {
  return /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path)?.[1] ?? 'ours';
}

/**
 * A script for `node --input-type=module -e` that imports, in a fresh Node, the files `capsule
 * run` loads before its first step (its program, `dist/bundle/run/`: the internal-error handler,
 * the command table and the run command, with the entry point's first-instruction files it
 * imports; then the run command's own file, which the command table imports: each file pulls in
 * the files it imports statically) and does nothing else.
 */
function loadOnlyScript(): string {
  const meta = bundleMeta();
  const chunk = (entry: string): string => {
    const found = Object.entries(meta.outputs).find(([path, output]) => path.endsWith('.js') && path.startsWith('dist/bundle/run/') && output.entryPoint === entry);
    if (found === undefined) throw new Error(`dist/bundle/meta.json has no file of capsule run's program for ${entry}`);
    return pathToFileURL(join(PACKAGE_ROOT, found[0])).href;
  };
  return ['dist/src/cli/run-main.js', 'dist/src/cli/run.js'].map((entry) => `await import(${JSON.stringify(chunk(entry))});`).join(' ');
}

/**
 * The modules `capsule run` of `planFile` loads (one run under loader hooks): the files Node loads
 * (the bundle's chunks and any package outside it) and, by package, the source modules those files
 * hold (from the bundle's metafile; a file outside the bundle is one module).
 */
async function modulesLoaded(cwd: string, planFile: string, allow: string): Promise<{ files: number; total: number; byPackage: [string, number][] }> {
  const list = join(cwd, `modules-${Date.now()}.txt`);
  writeFileSync(list, '');
  await timeProcess(process.execPath, ['--import', MODULE_LIST, CLI, 'run', planFile, '--allow', allow, '--workdir', cwd], {
    cwd,
    env: { ...process.env, CAPSULE_BENCH_MODULE_LIST: list },
  });
  const urls = new Set(readFileSync(list, 'utf8').split('\n').filter((url) => url !== '' && !url.includes('/bench/module-list')));
  const meta = bundleMeta();
  const counts = new Map<string, number>();
  let total = 0;
  for (const url of urls) {
    const path = url.startsWith('file:') ? relative(PACKAGE_ROOT, fileURLToPath(url)) : url;
    const inputs = meta.outputs[path] !== undefined ? Object.keys(meta.outputs[path].inputs) : [path];
    for (const input of inputs) {
      counts.set(packageOf(input), (counts.get(packageOf(input)) ?? 0) + 1);
      total++;
    }
  }
  return { files: urls.size, total, byPackage: [...counts].sort((a, b) => b[1] - a[1]) };
}

/** A Makefile with one phony target per step, its prerequisites the step's dependencies. */
function writeMakefile(dir: string, shape: Shape, n: number): string {
  const lines = ['.PHONY: all', `all: ${Array.from({ length: n }, (_, i) => stepId(i)).join(' ')}`, ''];
  for (let i = 0; i < n; i++) {
    lines.push(`.PHONY: ${stepId(i)}`, `${stepId(i)}: ${dependencies(shape, n, i).map(stepId).join(' ')}`, `\t@${TRUE_BIN}`, '');
  }
  const file = join(dir, `Makefile.${shape}-${n}`);
  writeFileSync(file, lines.join('\n'));
  return file;
}

/** One argument file per layer (the flat plan is one layer) and the `sh` script running one `xargs -P` per file in order. */
function writeXargs(dir: string, shape: Shape, n: number, parallel: number): string {
  const width = shape === 'wide' ? n : layers(n).width;
  const script: string[] = ['set -e'];
  for (let start = 0, k = 0; start < n; start += width, k++) {
    const file = join(dir, `xargs.${shape}-${n}.${k}`);
    writeFileSync(file, Array.from({ length: Math.min(width, n - start) }, (_, i) => stepId(start + i)).join('\n') + '\n');
    script.push(`xargs -P ${parallel} -n 1 -a ${file} ${TRUE_BIN}`);
  }
  const file = join(dir, `xargs.${shape}-${n}-P${parallel}.sh`);
  writeFileSync(file, script.join('\n') + '\n');
  return file;
}

/** The plan as a file (the shell plan of `n` `true` steps in `shape`). */
function writePlan(dir: string, shape: Shape, n: number): string {
  const file = join(dir, `plan.${shape}-${n}.json`);
  writeFileSync(file, JSON.stringify(makePlan(`shell-${shape}-${n}`, shape, n, () => ({ shell: 'true' }))));
  return file;
}

/** `capsule run` of `planFile` as a user runs it (records on, progress to a non-terminal), timed spawn to exit, ms. */
const capsuleRun = (cwd: string, planFile: string, parallel: number, env?: NodeJS.ProcessEnv) => async (): Promise<number> =>
  (await timeProcess(process.execPath, [CLI, 'run', planFile, '--allow', 'true', '--max-parallel', String(parallel), '--workdir', cwd], { cwd, ...(env !== undefined ? { env } : {}) })).ms;

/** The bare containment: process groups, no spawn helper, no PID namespace (what the raw spawn is a floor of). */
const BARE_ENV: NodeJS.ProcessEnv = { ...process.env, CAPSULE_CONTAINMENT: 'process-group', CAPSULE_ISOLATION: 'none', CAPSULE_SPAWN_HELPER: 'none' };

/**
 * Whether the contained floor can run here (a cgroup v2 this process may create cgroups in, the
 * built spawn helper, PID namespaces): one 1-step run of it. Null when it can, else why not.
 */
async function containedFloorProblem(cwd: string, readOnly: string): Promise<string | null> {
  const planFile = join(cwd, 'plan.contained-probe.json');
  writeFileSync(planFile, JSON.stringify({ id: 'probe', steps: [{ id: 's1', shell: 'true', depends_on: [] }] }));
  try {
    await timeProcess(process.execPath, [RAW_SPAWN, planFile, '1', '--contained', '--ro', readOnly], { cwd });
    return null;
  } catch (error) {
    return (error as Error).message.slice(0, 300);
  }
}

function label(shape: Shape, n: number, parallel: number): string {
  const { width, count: layerCount } = layers(n);
  return `${shape === 'wide' ? `flat ${count(n)}` : `layered ${count(n)} (${layerCount}×${width})`}, N = ${parallel}`;
}

async function pairs(ctx: SuiteContext, cwd: string, rows: Row[]): Promise<void> {
  const n = ctx.quick ? 50 : 500;
  const make = hasBinary('make');
  const xargs = hasBinary('xargs');
  const readOnly = join(cwd, 'raw-contained-ro');
  mkdirSync(readOnly, { recursive: true });
  const containedProblem = await containedFloorProblem(cwd, readOnly);
  for (const shape of ['wide', 'layered'] as const) {
    const planFile = writePlan(cwd, shape, n);
    const makefile = writeMakefile(cwd, shape, n);
    for (const parallel of PARALLEL) {
      ctx.log(`shell: ${shape}, N = ${parallel}`);
      const perStep = (fn: () => Promise<number>) => async (): Promise<number> => ((await fn()) * 1000) / n;
      const subjects: [string, () => Promise<number>][] = [
        ['capsule run', perStep(capsuleRun(cwd, planFile, parallel))],
        ['raw spawn (fresh node)', perStep(async () => (await timeProcess(process.execPath, [RAW_SPAWN, planFile, String(parallel)], { cwd })).ms)],
        ['capsule run, bare containment', perStep(capsuleRun(cwd, planFile, parallel, BARE_ENV))],
      ];
      if (containedProblem === null) {
        subjects.push([
          CONTAINED,
          perStep(async () => (await timeProcess(process.execPath, [RAW_SPAWN, planFile, String(parallel), '--contained', '--ro', readOnly], { cwd })).ms),
        ]);
        subjects.push([FLOOR_SUBJECT, perStep(async () => (await timeProcess(process.execPath, [DESIGN_FLOOR_SPAWN, planFile, String(parallel), '--ro', readOnly], { cwd })).ms)]);
        subjects.push([
          DESIGN_SPAWNER,
          perStep(async () => (await timeProcess(process.execPath, [DESIGN_FLOOR_SPAWN, planFile, String(parallel), '--ro', readOnly, '--spawner'], { cwd })).ms),
        ]);
      }
      if (make) subjects.push([`make -j${parallel}`, perStep(async () => (await timeProcess('make', ['-s', `-j${parallel}`, '-f', makefile, 'all'], { cwd })).ms)]);
      if (xargs) {
        const script = writeXargs(cwd, shape, n, parallel);
        subjects.push([`xargs -P${parallel}`, perStep(async () => (await timeProcess('/bin/sh', [script], { cwd })).ms)]);
      }
      const samples = await interleave(ctx, subjects, ctx.runs, 1);
      const name = label(shape, n, parallel);
      rows.push({
        case: name,
        subject: 'capsule run',
        unit: 'µs/step',
        samples: samples.get('capsule run') ?? [],
        compare: subjects.slice(1).map(([s]) => s),
        target: { max: 1.3, on: 'ratio', against: 'raw spawn (fresh node)', text: '≤ 1.3× raw spawn' },
      });
      if (containedProblem === null) {
        // The same runs against the floor with the containment's own kernel work in it.
        rows.push({
          case: name,
          subject: 'capsule run (÷ contained floor)',
          unit: 'µs/step',
          samples: samples.get('capsule run') ?? [],
          compare: [CONTAINED],
          target: { max: 1.3, on: 'ratio', against: CONTAINED, text: '≤ 1.3× the contained floor' },
          note: 'the capsule run row again, its ratio taken against the contained floor (default containment on both sides)',
        });
        // And against the design floor: what is left once the design card's actors are on the floor's side too (no target: an explanation).
        rows.push({
          case: name,
          subject: 'capsule run (÷ design floor)',
          unit: 'µs/step',
          samples: samples.get('capsule run') ?? [],
          compare: [FLOOR_SUBJECT, DESIGN_SPAWNER],
          note: 'the capsule run row again, its ratios taken against the design floor, forking from its own process and through a spawner (default containment on both sides; no target: the targets stay against the raw spawn and the contained floor)',
        });
      }
      rows.push({
        case: name,
        subject: 'capsule run, bare containment',
        unit: 'µs/step',
        samples: samples.get('capsule run, bare containment') ?? [],
        compare: ['raw spawn (fresh node)'],
        target: { max: 1.3, on: 'ratio', against: 'raw spawn (fresh node)', text: '≤ 1.3× raw spawn' },
        note: 'CAPSULE_CONTAINMENT=process-group CAPSULE_ISOLATION=none CAPSULE_SPAWN_HELPER=none: no cgroup, no PID namespace, no helper',
      });
      for (const [subject] of subjects.slice(1)) {
        if (subject === 'capsule run, bare containment') continue;
        rows.push({
          case: name,
          subject,
          unit: 'µs/step',
          samples: samples.get(subject) ?? [],
          ...(subject === CONTAINED ? { compare: ['raw spawn (fresh node)'], note: 'per step: a cgroup made, `true` through the spawn helper (cgroup joined, PID + mount namespace, private /proc, one read-only bind), the cgroup removed' } : {}),
          ...(subject === FLOOR_SUBJECT
            ? {
                compare: [CONTAINED],
                note: "the contained floor's per-step work as each step's invoked attempt in the design card's actor structure (a plan actor spawning one step actor per step, wave by wave, at most N alive; bench/lib/design-floor.ts); its ratio to the contained floor is the price of those actors per step, on the same cores as the steps",
              }
            : {}),
          ...(subject === DESIGN_SPAWNER
            ? {
                compare: [FLOOR_SUBJECT, CONTAINED],
                note: 'the design floor with each command started by a small spawner process (dist/bench/floor-spawner.js, forked at the start; one IPC request and one answer per step; the cgroups made and removed in the floor process), as the runtime starts its commands through its spawner',
              }
            : {}),
        });
      }
    }
  }
  if (containedProblem !== null) rows.push({ case: 'contained floor', subject: CONTAINED, unit: '', samples: [Number.NaN], note: `the contained floor cannot run here: ${containedProblem}` });
  if (!make) rows.push({ case: 'make', subject: 'make', unit: '', samples: [Number.NaN], note: 'make is not installed: no make baseline' });
  if (!xargs) rows.push({ case: 'xargs', subject: 'xargs', unit: '', samples: [Number.NaN], note: 'xargs is not installed: no xargs baseline' });
}

/**
 * Per-step cost of a large shell plan against a small one, both through `capsule run` (flat,
 * N = 2), each without the start-up: a 1-step run of the same plan kind is measured next to them
 * and taken off pair by pair, `(T(n) − T(1)) / (n − 1)`.
 */
async function flatness(ctx: SuiteContext, cwd: string, rows: Row[]): Promise<void> {
  const [small, large] = (ctx.quick ? [50, 500] : [100, 10_000]) as [number, number];
  const parallel = 2;
  ctx.log(`shell: flatness ${count(small)} vs ${count(large)}`);
  const files = new Map([1, small, large].map((n) => [n, writePlan(cwd, 'wide', n)]));
  const runs = Math.min(ctx.runs, 3); // 10,000 shell steps take ~30 s a run
  const samples = await interleave(
    ctx,
    [large, small, 1].map((n) => [String(n), capsuleRun(cwd, files.get(n) as string, parallel)] as [string, () => Promise<number>]),
    runs,
    0,
  );
  const one = samples.get('1') ?? [];
  const perStep = (n: number): number[] => (samples.get(String(n)) ?? []).map((ms, i) => ((ms - (one[i] ?? Number.NaN)) * 1000) / (n - 1));
  const name = `flatness: flat, N = ${parallel}, per step beyond the 1-step run`;
  rows.push({
    case: name,
    subject: `${count(large)} steps`,
    unit: 'µs/step',
    samples: perStep(large),
    compare: [`${count(small)} steps`],
    target: { max: 1.1, on: 'ratio', against: `${count(small)} steps`, text: `≤ 1.1× the ${count(small)}-step cost (flat)` },
    note: `(T(n) − T(1-step plan)) / (n − 1), each run against the 1-step run next to it; all three through capsule run as whole processes`,
  });
  rows.push({ case: name, subject: `${count(small)} steps`, unit: 'µs/step', samples: perStep(small) });
  rows.push({ case: name, subject: '1-step plan, whole run', unit: 'ms', samples: one });
}

/** Exec of `capsule run` of a 1-step plan to its step's command starting, against `node -e 0`. */
async function startup(ctx: SuiteContext, cwd: string, rows: Row[]): Promise<void> {
  ctx.log('shell: startup');
  const planFile = join(cwd, 'plan.startup.json');
  writeFileSync(planFile, JSON.stringify({ id: 'startup', steps: [{ id: 'stamp', shell: 'date +%s%N' }] }));
  const exits: number[] = [];
  const loadOnly = loadOnlyScript();
  const samples = await interleave(
    ctx,
    [
      [
        'capsule run → first step',
        async () => {
          const done = await timeProcess(process.execPath, [CLI, 'run', planFile, '--allow', 'date', '--json', '--workdir', cwd], { cwd, keepStdout: true });
          const report = JSON.parse(done.stdout) as { results: { output: string | null }[] };
          const stampNs = BigInt((report.results[0]?.output ?? '').trim());
          exits.push(done.ms);
          // Epoch ns of the step's `date` against the epoch ms just before the spawn (both from CLOCK_REALTIME).
          return Number(stampNs / 1000n) / 1000 - done.startedEpochMs;
        },
      ],
      ['node -e 0', async () => (await timeProcess(process.execPath, ['-e', '0'], { cwd })).ms],
      ['node, loading the bundle only', async () => (await timeProcess(process.execPath, ['--input-type=module', '-e', loadOnly], { cwd })).ms],
    ],
    ctx.quick ? ctx.runs : Math.max(ctx.runs, 11),
    ctx.warmups,
  );
  const name = 'startup: 1-step plan';
  rows.push({
    case: name,
    subject: 'capsule run → first step',
    unit: 'ms',
    samples: samples.get('capsule run → first step') ?? [],
    compare: ['node -e 0', 'node, loading the bundle only'],
    target: { max: 120, on: 'median', text: '≤ 120 ms' },
    note: 'from just before the spawn of `node dist/bundle/capsule.js run` (its fork and exec included) to the step\'s `date +%s%N` reading the clock',
  });
  rows.push({ case: name, subject: 'node -e 0', unit: 'ms', samples: samples.get('node -e 0') ?? [], note: 'the whole process, spawn to exit: Node\'s own start' });
  rows.push({
    case: name,
    subject: 'node, loading the bundle only',
    unit: 'ms',
    samples: samples.get('node, loading the bundle only') ?? [],
    compare: ['node -e 0'],
    note: 'a fresh Node importing the files `capsule run` loads (its program, dist/bundle/run/: the internal-error handler, the command table, the run command, and what they import), then exiting: Node\'s start plus reading, compiling and evaluating the code; no command, session or plan',
  });
  rows.push({ case: name, subject: 'capsule run, spawn to exit', unit: 'ms', samples: exits.slice(exits.length - (samples.get('node -e 0')?.length ?? 0)), compare: ['node -e 0'] });
  const modules = await modulesLoaded(cwd, planFile, 'date');
  rows.push({
    case: name,
    subject: 'capsule run, modules loaded',
    unit: 'modules',
    samples: [modules.total],
    digits: 0,
    note: `source modules loaded by the run (one run under loader hooks; no timing), in ${modules.files} files (the bundle's chunks, and any module outside it), by package: ${modules.byPackage
      .slice(0, 8)
      .map(([pkg, n]) => `${pkg} ${n}`)
      .join(', ')}${modules.byPackage.length > 8 ? `, ${modules.byPackage.length - 8} more packages` : ''}`,
  });
}

export const shellSuite: Suite = {
  name: 'shell',
  title: 'Suite 2 — shell steps (`true`), whole processes: capsule run against a fresh raw spawn, make, xargs',
  async run(ctx: SuiteContext) {
    const cwd = join(ctx.tmpDir, 'shell');
    mkdirSync(cwd, { recursive: true });
    const rows: Row[] = [];
    await startup(ctx, cwd, rows);
    await pairs(ctx, cwd, rows);
    await flatness(ctx, cwd, rows);
    return rows;
  },
};
