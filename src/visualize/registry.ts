import type { AnyStateMachine } from 'xstate';
import { planMachine } from '../../machines/plan.machine.js';
import { stepMachine } from '../../machines/step.machine.js';

/** One machine `capsule visualize` draws. */
export interface DrawnMachine {
  /** File stem under `visualizations/` (`<name>.mmd`, `.svg`, `.json`). */
  readonly name: string;
  readonly machine: AnyStateMachine;
  /** Where the definition lives, linked from the index. */
  readonly source: string;
}

/** The machines drawn, in index order. Adding a machine is one line. */
export const DRAWN_MACHINES: readonly DrawnMachine[] = [
  { name: 'plan', machine: planMachine, source: 'machines/plan.machine.ts' },
  { name: 'step', machine: stepMachine, source: 'machines/step.machine.ts' },
];
