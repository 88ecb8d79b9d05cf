/**
 * Baseline (b) of the scheduler suite: the ready-queue scheduler of `ready-queue.ts`, with each
 * step run as one bare XState actor (a two-state machine whose entry calls the tool and whose
 * final state is reached on the tool's answer), created, started and awaited per step. The
 * difference to the runtime is what the plan machine, the step machine and run-plan add on top
 * of "one actor per step".
 */
import { createActor, setup, toPromise } from 'xstate';
import type { PlanFile } from '../../machines/contracts.js';
import { runReadyQueue, type QueueResult } from './ready-queue.js';

type BareEvent = { type: 'DONE'; output: string | null } | { type: 'FAIL'; error: string };

export function bareStepMachine(tool: (stepId: string) => Promise<string | null>) {
  return setup({
    types: {
      input: {} as { stepId: string },
      context: {} as { stepId: string; output: string | null },
      events: {} as BareEvent,
      output: {} as string | null,
    },
  }).createMachine({
    id: 'bare',
    context: ({ input }) => ({ stepId: input.stepId, output: null }),
    initial: 'running',
    states: {
      running: {
        entry: ({ context, self }) => {
          tool(context.stepId).then(
            (output) => self.send({ type: 'DONE', output }),
            (error: unknown) => self.send({ type: 'FAIL', error: String(error) }),
          );
        },
        on: {
          DONE: { target: 'done', actions: ({ context, event }) => void (context.output = event.output) },
          FAIL: { target: 'done' },
        },
      },
      done: { type: 'final' },
    },
    output: ({ context }) => context.output,
  });
}

/** Runs `plan` with one bare actor per step. */
export function runBareActors(
  plan: PlanFile,
  tool: (stepId: string) => Promise<string | null>,
  maxParallel?: number,
): Promise<QueueResult[]> {
  const machine = bareStepMachine(tool);
  return runReadyQueue(plan, (stepId) => toPromise(createActor(machine, { input: { stepId } }).start()), maxParallel);
}
