/**
 * `capsule run --dry-run` (docs/cli.md#dry-run): what a plan would run, in order, told before it
 * runs — its waves, each step's kind and command (its binary as `PATH` finds it; a tool's input
 * as it is known before the run), and what only the run decides (an `if`, a reference) marked so.
 * Nothing runs and no session is made.
 */
import type { JsonValue, PlanFile, PlanStep } from '../../../machines/contracts.js';
import type { Manifest } from '../../manifest.js';
import { splitShellWords } from '../../plan/shell-words.js';
import { planWaves } from '../../plan/waves.js';
import { resolveExecutable, trustedPath } from '../../process/resolve-binary.js';
import { printable } from '../progress.js';

/** What the preview needs besides the plan. */
export interface PreviewContext {
  readonly manifest: Manifest | null;
  readonly workdir: string;
  readonly maxParallel: number | null;
  /** The `PATH` steps get (the runtime's own, made trusted). */
  readonly path: string | undefined;
}

/** One step as the preview shows it (`--dry-run --json`). */
export interface PreviewStep {
  readonly step_id: string;
  readonly kind: 'shell' | 'tool' | 'capsule';
  /** A shell step's command as written (it is not interpolated), and its binary as `PATH` resolves it (null: not found). */
  readonly command?: string;
  readonly binary?: string | null;
  /** A tool step's tool, and a command tool's program and arguments (null: an in-process or missing tool). */
  readonly tool?: string;
  readonly tool_command?: readonly string[] | null;
  /** A capsule step's capsule. */
  readonly capsule?: string;
  /** The step's `input` as written (a tool's or a capsule's), when it has one. */
  readonly input?: JsonValue;
  readonly depends_on: readonly string[];
  /** What only the run decides: the `if`, references in `input` or `stdin`. */
  readonly at_run_time: readonly string[];
  readonly on_error: string;
  readonly retries: number;
  readonly timeout_secs?: number;
}

/** The preview as `--dry-run --json` prints it. */
export interface Preview {
  readonly plan_id: string;
  readonly steps: number;
  readonly max_parallel: number | null;
  readonly waves: readonly { readonly wave: number; readonly steps: readonly PreviewStep[] }[];
  /** Steps a dependency cycle keeps from ever running. */
  readonly blocked: readonly string[];
}

/** The preview of a plan validation accepted. */
export function planPreview(plan: PlanFile, context: PreviewContext): Preview {
  const { waves, blocked } = planWaves(plan.steps);
  const path = trustedPath(context.path);
  const step = (i: number): PreviewStep => previewStep(plan.steps[i] as PlanStep, context, (word) => {
    const found = resolveExecutable(word, path, context.workdir);
    return found.ok ? found.path : null;
  });
  return {
    plan_id: plan.id,
    steps: plan.steps.length,
    max_parallel: context.maxParallel,
    waves: waves.map((wave, n) => ({ wave: n + 1, steps: wave.map(step) })),
    blocked: blocked.map((i) => (plan.steps[i] as PlanStep).id),
  };
}

function previewStep(step: PlanStep, context: PreviewContext, resolveBinary: (word: string) => string | null): PreviewStep {
  const atRunTime: string[] = [];
  if (step.if !== undefined) atRunTime.push(`if ${step.if}`);
  const references = referencesIn(step.input);
  if (references.length > 0) atRunTime.push(`input references ${references.join(', ')}`);
  if (typeof step.stdin === 'string' && step.stdin.startsWith('$')) atRunTime.push(`stdin ${step.stdin}`);
  const common = {
    step_id: step.id,
    depends_on: step.depends_on,
    at_run_time: atRunTime,
    on_error: step.on_error,
    retries: step.retries,
    ...(step.timeout_secs !== undefined ? { timeout_secs: step.timeout_secs } : {}),
  };
  if (step.shell !== undefined) {
    const [binary] = splitShellWords(step.shell);
    return { ...common, kind: 'shell', command: step.shell, binary: binary === undefined ? null : resolveBinary(binary) };
  }
  if (step.tool !== undefined) {
    const command = context.manifest?.tools[step.tool]?.command ?? null;
    return { ...common, kind: 'tool', tool: step.tool, tool_command: command, ...(step.input !== null ? { input: step.input } : {}) };
  }
  return { ...common, kind: 'capsule', capsule: step.capsule ?? '', ...(step.input !== null ? { input: step.input } : {}) };
}

/** The `$step.field` references in a value (strings starting with `$`), each once. */
function referencesIn(value: JsonValue): string[] {
  const found = new Set<string>();
  const visit = (v: JsonValue): void => {
    if (typeof v === 'string') {
      if (v.startsWith('$')) found.add(v);
    } else if (Array.isArray(v)) {
      for (const item of v) visit(item);
    } else if (v !== null && typeof v === 'object') {
      for (const item of Object.values(v)) visit(item);
    }
  };
  visit(value);
  return [...found];
}

/** Characters of a command or an input a line shows at most. */
const SHOWN_CHARS = 160;

function shown(text: string): string {
  const line = printable(text.length > SHOWN_CHARS * 2 ? text.slice(0, SHOWN_CHARS * 2) : text);
  return line.length <= SHOWN_CHARS ? line : `${line.slice(0, SHOWN_CHARS - 1)}…`;
}

/** The preview as text for people. */
export function previewText(preview: Preview): string {
  const waves = preview.waves.length;
  const lines = [
    `dry run: plan ${shown(preview.plan_id)}: ${preview.steps} step${preview.steps === 1 ? '' : 's'} in ${waves} wave${waves === 1 ? '' : 's'}; nothing was run and no session was made`,
  ];
  for (const wave of preview.waves) {
    const cap = preview.max_parallel !== null && wave.steps.length > preview.max_parallel ? `, at most ${preview.max_parallel} at once` : '';
    lines.push(`wave ${wave.wave} (${wave.steps.length} step${wave.steps.length === 1 ? '' : 's'}${cap})`);
    for (const step of wave.steps) {
      lines.push(`  ▶ ${shown(step.step_id)} (${step.kind}): ${what(step)}`);
      const notes = [
        ...(step.depends_on.length > 0 ? [`after ${step.depends_on.map(shown).join(', ')}`] : []),
        ...(step.on_error !== 'fail' ? [`on_error: ${step.on_error}`] : []),
        ...(step.retries > 0 ? [`retries: ${step.retries}`] : []),
        ...(step.timeout_secs !== undefined ? [`timeout: ${step.timeout_secs}s`] : []),
      ];
      if (notes.length > 0) lines.push(`      ${notes.join(' · ')}`);
      for (const decided of step.at_run_time) lines.push(`      ${shown(decided)} — decided at run time`);
    }
  }
  if (preview.blocked.length > 0) lines.push(`blocked (a dependency cycle; never runs): ${preview.blocked.map(shown).join(', ')}`);
  if (preview.waves.some((wave) => wave.steps.some((step) => step.at_run_time.some((decided) => decided.startsWith('if '))))) {
    lines.push('A step whose if is false is skipped; one declared after it that depends on it may then run a wave earlier.');
  }
  return `${lines.join('\n')}\n`;
}

/** A step's command, tool or capsule, as one line. */
function what(step: PreviewStep): string {
  if (step.kind === 'shell') {
    const binary = step.binary === null ? '  (not found on PATH)' : step.binary !== undefined ? `  (${shown(step.binary)})` : '';
    return `${shown(step.command ?? '')}${binary}`;
  }
  const input = step.input !== undefined ? ` ${shown(JSON.stringify(step.input))}` : '';
  if (step.kind === 'tool') {
    const command = step.tool_command === null || step.tool_command === undefined ? '' : `  (runs ${shown(step.tool_command.join(' '))})`;
    return `${shown(step.tool ?? '')}${input}${command}`;
  }
  return `capsule ${shown(step.capsule ?? '')}${input}`;
}
