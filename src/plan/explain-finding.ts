/**
 * Explanations of the validation refusals (`docs/plan-format.md#validation`, our rules included): for
 * each rule's code, the rule in one sentence, the accepted values and the fix.
 */

import { dirname } from 'node:path';
import type { PlanFile, PlanStep } from '../../machines/contracts.js';
import { locateJsonPath } from './json-location.js';
import { parseReference, REFERENCE_FIELDS } from './references.js';
import { bounded, didYouMean, listValues, located, type ExplainContext, type Refusal } from './refusal.js';
import { splitShellWords } from './shell-words.js';
import { excerpt, MAX_SENTENCE_CHARS } from '../excerpt.js';
import { allowFlag, DOLLAR_QUOTE_NOTE, hasControlCharacter, shellQuote } from './allow-flag.js';
import { ON_ERROR_POLICIES, PLAN_SUBMISSION_TOOL, type ValidationFinding } from './validate.js';

/** Explains a validation refusal (`docs/plan-format.md#validation`). */
export function explainFinding(finding: ValidationFinding, plan: PlanFile, ctx: ExplainContext): Refusal {
  return bounded(explainUnbounded(finding, plan, ctx));
}

function explainUnbounded(finding: ValidationFinding, plan: PlanFile, ctx: ExplainContext): Refusal {
  const step = plan.steps[finding.index] as PlanStep;
  const ids = plan.steps.map((s) => s.id);
  const subject = finding.subject ?? '';
  const base = { step_id: finding.step_id, error: finding.error, code: finding.code, ...located(ctx, ['steps', finding.index, ...finding.path]) };
  switch (finding.code) {
    case 'duplicate_step_id': {
      const first = ids.indexOf(step.id);
      const firstAt = ctx.text === null ? null : locateJsonPath(ctx.text, ['steps', first, 'id']);
      return {
        ...base,
        rule: 'step ids are unique within a plan (docs/plan-format.md#rule-1)',
        accepted: null,
        fix: `rename one of the two: the first '${step.id}' is steps[${first}]${firstAt === null ? '' : ` (line ${firstAt.line})`}`,
      };
    }
    case 'no_step_kind': {
      const misspelt = ctx.unknownKeys.find((w) => w.path === `steps[${ctx.declaredStep?.(finding.index) ?? finding.index}]` && w.suggestion !== null && ['tool', 'shell', 'capsule'].includes(w.suggestion));
      return {
        ...base,
        rule: 'a step declares exactly one of tool, shell or capsule (docs/plan-format.md#rule-2a)',
        accepted: ['tool', 'shell', 'capsule'],
        fix:
          misspelt !== undefined
            ? `rename its key '${misspelt.key}' to '${misspelt.suggestion ?? ''}'`
            : 'add "shell": "<command line>", "tool": "<tool name>" or "capsule": "<capsule name>"',
      };
    }
    case 'several_step_kinds': {
      const kinds = (['tool', 'shell', 'capsule'] as const).filter((kind) => step[kind] !== undefined);
      return {
        ...base,
        rule: 'a step declares exactly one of tool, shell or capsule (docs/plan-format.md#rule-2b)',
        accepted: ['tool', 'shell', 'capsule'],
        fix: `keep one of ${kinds.join(' and ')}; to do both, make two steps and let the second depend on the first`,
      };
    }
    case 'forbidden_tool':
      return {
        ...base,
        rule:
          subject === PLAN_SUBMISSION_TOOL
            ? 'a plan cannot submit another plan (docs/plan-format.md#rule-3t-i)'
            : 'turn-only tools (switch-driver, end-without-answer, pull-artifact, remove-artifact) are not callable from a plan (docs/plan-format.md#rule-3t-ii)',
        accepted: null,
        fix: 'remove the step: these tools are decisions of the agent running the plan, not steps of it',
      };
    case 'tool_not_installed': {
      const tools = [...ctx.installedTools].sort();
      return {
        ...base,
        rule: 'a tool step names a tool of the manifest\'s "tools" (docs/plan-format.md#rule-3t-iii)',
        accepted: tools,
        fix:
          ctx.manifestPath === null && tools.length === 0
            ? `no tool is installed: ${noManifestFix(ctx)}`
            : tools.length === 0
              ? `no tool is installed in ${ctx.manifestPath ?? 'the manifest'}: declare it, "tools": { "${subject}": { "command": ["<program>", "<args>…"] } }`
              : `${didYouMean(subject, tools)}installed: ${listValues(tools)} (${ctx.manifest}); or declare '${subject}' under "tools" in ${ctx.manifestPath ?? 'the manifest'}`,
      };
    }
    case 'shell_command_empty':
      return { ...base, rule: 'a shell command has at least one word: the program to run (docs/plan-format.md#rule-3s-i)', accepted: null, fix: 'write the command line, e.g. "shell": "make test"' };
    case 'binary_not_allowed':
      return { ...base, rule: 'the first word of a shell command is a binary in capabilities.shell.allow, matched exactly (docs/plan-format.md#rule-3s-ii)', accepted: [...ctx.shellAllow], fix: binaryFix(subject, plan, ctx) };
    case 'shell_command_nul':
      return {
        ...base,
        rule: 'a shell command holds no NUL character: a program\'s arguments end at the first NUL (execve(2)), so the step could never start (docs/plan-format.md#rule-shell-nul)',
        accepted: null,
        fix: 'remove the \\u0000 from "shell"; to give a program bytes with NULs, write them with the step\'s "stdin", or have the program make them (e.g. "shell": "printf a\\\\0b")',
      };
    case 'capsule_input':
      return {
        ...base,
        rule: 'a capsule step\'s input is its task text: a string, or { "objective": "<text>" } (docs/plan-format.md#capsule-input)',
        accepted: ['"<task text>"', '{ "objective": "<task text>" }'],
        fix: 'give the whole instruction as "input": "<task text>" (references such as "$a.output" are fine)',
      };
    case 'on_error_policy':
      return {
        ...base,
        rule: 'on_error is one of fail, skip, continue, lower case (docs/plan-format.md#rule-4)',
        accepted: [...ON_ERROR_POLICIES],
        fix: `${didYouMean(subject, ON_ERROR_POLICIES)}"fail" stops the plan (the default: leave the key out), "skip" records the step skipped and goes on, "continue" records it failed and goes on`,
      };
    case 'stdin_not_shell':
      return {
        ...base,
        rule: 'stdin is our key for shell steps only (docs/plan-format.md#rule-stdin)',
        accepted: null,
        fix: step.tool !== undefined ? 'remove "stdin": the tool already gets "input" as JSON on its stdin' : 'remove "stdin": a capsule step gets "input" as its task text',
      };
    case 'capsule_env_cwd':
      return {
        ...base,
        rule: 'env and cwd are for shell and tool steps (docs/plan-format.md#env)',
        accepted: null,
        fix: `remove "${finding.path[0] ?? 'env'}" from the capsule step: its child capsule runs in its own work folder, with the variables its own manifest's capabilities.env.allow names`,
      };
    case 'env_name':
      return {
        ...base,
        rule: 'an env name is a non-empty variable name without = or NUL, and not one the runtime sets (PATH, HOME, TMPDIR, CAPSULE_RUNTIME_DIR, MURMUR_RUNTIME_DIR) (docs/plan-format.md#env)',
        accepted: null,
        fix: subject === '' ? 'give the variable a name, e.g. "env": { "CC": "gcc" }' : `rename or remove '${excerpt(subject)}' in "env"${subject === 'PATH' ? '; a program outside PATH is run by its path ("shell": "./tools/gen")' : ''}`,
      };
    case 'env_value_nul':
      return {
        ...base,
        rule: 'an env value holds no NUL character: a process\'s environment strings end at the first NUL (execve(2)) (docs/plan-format.md#env)',
        accepted: null,
        fix: `remove the \\u0000 from the value of '${excerpt(subject)}'; bytes with NULs go in the step's "stdin"`,
      };
    case 'cwd_outside_workdir':
      return {
        ...base,
        rule: 'cwd is a relative path inside the workdir (docs/plan-format.md#cwd)',
        accepted: null,
        fix: 'write the directory relative to the workdir, e.g. "cwd": "test" (run with --workdir to move the workdir itself)',
      };
    case 'cache_not_shell_or_tool':
      return {
        ...base,
        rule: 'cache is for shell and tool steps (docs/cache.md#declaring)',
        accepted: null,
        fix: 'remove "cache" from the capsule step, or cache the shell or tool steps its work is made of',
      };
    case 'cache_outside_workdir':
      return {
        ...base,
        rule: 'a cache glob is a relative path inside the workdir, without .. (docs/cache.md#declaring)',
        accepted: null,
        fix: `write the glob relative to the workdir, e.g. "${finding.path[1] === 'inputs' ? 'src/**/*.c' : 'build/**'}"; files outside the workdir are neither hashed nor stored (run with --workdir to move the workdir itself)`,
      };
    case 'unknown_dependency': {
      // A step cannot depend on itself (that is a cycle): its own id is no candidate.
      const others = ids.filter((id) => id !== step.id);
      return {
        ...base,
        rule: 'every depends_on entry is the id of a step of this plan (docs/plan-format.md#rule-5)',
        accepted: others,
        fix:
          others.length === 0
            ? `this plan has no other step: remove '${excerpt(subject)}' from the depends_on of '${excerpt(step.id)}'`
            : `${didYouMean(subject, others)}the other step ids are: ${listValues(others)}`,
      };
    }
    case 'unknown_reference': {
      const parsed = parseReference(subject);
      const id = parsed?.stepId ?? '';
      return {
        ...base,
        rule: 'a reference names a step of this plan and a field: $<step id>.output or $<step id>.status (docs/plan-format.md#rule-6)',
        accepted: ids,
        fix: `no step has the id '${id}'; ${didYouMean(id, ids)}the step ids are: ${listValues(ids)}`,
      };
    }
    case 'unknown_reference_field': {
      const parsed = parseReference(subject);
      const field = parsed?.field ?? '';
      const glued = /[=!<>]/u.test(field);
      return {
        ...base,
        rule: 'a reference\'s field is output or status (docs/plan-format.md#rule-6)',
        accepted: [...REFERENCE_FIELDS],
        fix: glued
          ? `put spaces around the operator: ${subject.replace(/(==|!=|<|>)/u, ' $1 ')}`
          : `${didYouMean(field, REFERENCE_FIELDS)}write $${parsed?.stepId ?? '<step>'}.output or $${parsed?.stepId ?? '<step>'}.status`,
      };
    }
  }
}

function binaryFix(binary: string, plan: PlanFile, ctx: ExplainContext): string {
  // A delegated child's allow list is its own manifest's: no flag reaches it, and the parent's
  // capsule.json is not the file to edit.
  if (ctx.surface === 'child') return childBinaryFix(binary, plan, ctx);
  const serve = ctx.surface === 'serve';
  const others = otherRefusedBinaries(binary, plan, ctx.shellAllow);
  const base = binary.split('/').pop() ?? binary;
  const allowedPath = binary.includes('/') ? null : ctx.shellAllow.find((entry) => entry.includes('/') && entry.split('/').pop() === binary);
  // serve's allow list is fixed when it starts: a plan.submit cannot widen it for one plan.
  const flag = serve ? `add ${allowFlag(binary)} to capsule serve's start flags (for the whole session)` : `allow it for one run with ${allowFlag(binary)}`;
  const allowedAs = binary.includes('/') && ctx.shellAllow.includes(base) ? base : allowedPath;
  let lead: string;
  if (allowedAs !== undefined && allowedAs !== null) {
    // Adding to capabilities.shell.allow needs a manifest: offered only when one was loaded.
    const inManifest = ctx.manifestPath !== null ? `add ${JSON.stringify(binary)} to capabilities.shell.allow in ${ctx.manifestPath}${serve ? SERVE_RESTART : ''}, or ` : '';
    lead = `entries match exactly: '${allowedAs}' is allowed but '${binary}' is not; write the command as ${shellQuote(allowedAs)} …, or ${inManifest}${flag}`;
  } else if (ctx.manifestPath !== null) {
    lead = `add ${JSON.stringify(binary)} to capabilities.shell.allow in ${ctx.manifestPath}${serve ? SERVE_RESTART : ''}, or ${flag}`;
  } else {
    lead = `${noManifestFix(ctx)}, or ${flag}`;
  }
  // The flags listed for the plan's other binaries include this one: pasted as they are, they let
  // the plan start. Fewer are written out (the rest counted) rather than the fix being cut in the
  // middle of a flag (a refusal's fix is clipped at MAX_SENTENCE_CHARS).
  // A flag written $'…' (a control character in the path) says once which shells take it.
  const note = [binary, ...others].some(hasControlCharacter) ? ` (${DOLLAR_QUOTE_NOTE})` : '';
  for (let shown = MAX_ALLOW_FLAGS_SHOWN; ; shown--) {
    const fix = `${lead}${othersHint(others, [binary], serve, shown)}${note}`;
    if (fix.length <= MAX_SENTENCE_CHARS || shown <= 1) return fix;
  }
}

/** The fix of a binary a delegated child capsule's plan starts without its manifest allowing it. */
function childBinaryFix(binary: string, plan: PlanFile, ctx: ExplainContext): string {
  const names = [binary, ...otherRefusedBinaries(binary, plan, ctx.shellAllow)];
  const shown = names.slice(0, MAX_ALLOW_FLAGS_SHOWN).map((name) => JSON.stringify(name)).join(', ');
  const more = names.length > MAX_ALLOW_FLAGS_SHOWN ? ` … and ${names.length - MAX_ALLOW_FLAGS_SHOWN} more` : '';
  const where = ctx.manifestPath ?? "the child capsule's capsule.json";
  return `add ${shown}${more} to capabilities.shell.allow in ${where} (the child capsule's manifest: a delegated capsule's plan runs under its own manifest alone, and no --allow flag of the parent reaches it)`;
}

/** Over serve, a manifest edit takes effect only in a new session: serve reads it once, when it starts. */
export const SERVE_RESTART = ' and start capsule serve again (it reads its manifest once, when it starts)';

/** Most `--allow` flags a fix writes out; the rest are counted. */
export const MAX_ALLOW_FLAGS_SHOWN = 10;

/** The first words of the plan's other shell steps that are not allowed either: distinct, in step order. */
function otherRefusedBinaries(refused: string, plan: PlanFile, shellAllow: readonly string[]): string[] {
  const allowed = new Set(shellAllow);
  const seen = new Set<string>([refused]);
  const others: string[] = [];
  for (const step of plan.steps) {
    if (step.shell === undefined) continue;
    const [binary] = splitShellWords(step.shell);
    if (binary === undefined || allowed.has(binary) || seen.has(binary)) continue;
    seen.add(binary);
    others.push(binary);
  }
  return others;
}

/**
 * `; the plan also starts b and c, not allowed either (for one run: --allow a --allow b --allow c)`
 * (serve: `(for the session, add to capsule serve's start flags: …)`), or '' when no other binary is
 * refused. `first` are the binaries flagged before the others. At most `max` (default
 * {@link MAX_ALLOW_FLAGS_SHOWN}) flags, then `… and N more`.
 */
function othersHint(others: readonly string[], first: readonly string[], serve: boolean, max: number = MAX_ALLOW_FLAGS_SHOWN): string {
  if (others.length === 0) return '';
  const all = [...first, ...others];
  const flags = all.slice(0, max).map(allowFlag).join(' ');
  const more = all.length > max ? ` … and ${all.length - max} more` : '';
  const shown = others.slice(0, max).map((name) => `'${excerpt(name)}'`).join(', ');
  const names = others.length > max ? `${shown}, … and ${others.length - max} more` : shown;
  return `; the plan also starts ${names}, not allowed either (${serve ? "for the session, add to capsule serve's start flags" : 'for one run'}: ${flags}${more})`;
}

/** What to do when no manifest was loaded: use the one beside the plan, or name one. */
function noManifestFix(ctx: ExplainContext): string {
  const beside = ctx.manifestBesidePlan ?? null;
  if (beside !== null) {
    const dir = dirname(beside);
    // serve reads its manifest once, when it starts: the flags go there, not on a plan.submit.
    if (ctx.surface === 'serve') return `${ctx.manifest} when capsule serve started, but the plan's directory has one: start capsule serve again with --workdir ${dir} (where shell steps then run), or --manifest ${beside}`;
    return `${ctx.manifest}, but the plan's directory has one: run with --workdir ${dir} (where shell steps then run), or --manifest ${beside}`;
  }
  if (ctx.surface === 'serve') return `${ctx.manifest} when capsule serve started: start capsule serve again with --manifest FILE, or --workdir DIR for the directory holding capsule.json`;
  return `${ctx.manifest}: pass --manifest FILE, or --workdir DIR for the directory holding capsule.json`;
}

