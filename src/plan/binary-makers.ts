/**
 * Which earlier step may make a shell step's binary (docs/cli.md#warnings): a binary written as a
 * relative path (`./build/test_default`) lies in the workdir, where a step the step depends on may
 * build it. Such a step is not warned about at start; if the binary is still missing when the step
 * starts, its error says which step was expected to make it — a dependency whose command names the
 * binary's folder — or that none is.
 */
import { dirname, isAbsolute, normalize } from 'node:path';
import type { PlanStep } from '../../machines/contracts.js';
import { splitShellWords } from './shell-words.js';

/** Whether `binary` is a path in the workdir (relative, with a `/`). */
export function isWorkdirPath(binary: string): boolean {
  return binary.includes('/') && !isAbsolute(binary);
}

/** The steps `steps[index]` waits for, directly or not, in declaration order. */
export function stepsBefore(steps: readonly Pick<PlanStep, 'id' | 'depends_on'>[], index: number): number[] {
  const byId = new Map(steps.map((step, i) => [step.id, i]));
  const seen = new Set<number>();
  const stack = [...(steps[index]?.depends_on ?? [])];
  while (stack.length > 0) {
    const at = byId.get(stack.pop() as string);
    if (at === undefined || seen.has(at) || at === index) continue;
    seen.add(at);
    stack.push(...(steps[at]?.depends_on ?? []));
  }
  return [...seen].sort((a, b) => a - b);
}

/**
 * The steps before `steps[index]` whose shell command names the folder of `binary` (or, for a
 * binary in the workdir itself, the binary's name): those expected to make it.
 */
export function binaryMakers(steps: readonly PlanStep[], index: number, binary: string): PlanStep[] {
  const path = normalize(binary);
  const folder = dirname(path);
  const named = folder === '.' ? path : folder;
  const names = (word: string): boolean =>
    // A word may be a whole script (`sh -c '… > build/app'`): each of its tokens is looked at.
    word.split(/[\s;&|<>()'"`]+/).some((token) => {
      if (token === '') return false;
      const value = normalize(token.replace(/^-[A-Za-z]/, '').replace(/^[^=]*=/, ''));
      return value === named || value.startsWith(`${named}/`) || value === path;
    });
  return stepsBefore(steps, index)
    .map((i) => steps[i] as PlanStep)
    .filter((step) => step.shell !== undefined && splitShellWords(step.shell).slice(1).some(names));
}

/** What the start error of a missing workdir binary adds: who was to make it, or that nothing does. */
export function missingBinaryHint(steps: readonly PlanStep[], index: number, binary: string): string {
  if (!isWorkdirPath(binary)) return '';
  const makers = binaryMakers(steps, index, binary);
  const folder = dirname(normalize(binary));
  if (makers.length > 0) {
    const names = makers.map((step) => `'${step.id}'`).join(', ');
    return `; it was to be made by step ${names} (${makers.length === 1 ? 'its command names' : 'their commands name'} ${folder === '.' ? `'${binary}'` : `its folder '${folder}'`}), which did not make it`;
  }
  if (stepsBefore(steps, index).length === 0) return '; no step runs before it to make it';
  return `; no step before it names ${folder === '.' ? `'${binary}'` : `its folder '${folder}'`} in its command: nothing makes it`;
}
