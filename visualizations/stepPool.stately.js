// The stepPool machine (machines/step-pool.machine.ts) for the Stately editor (https://stately.ai/editor, "Import from code")
// or a simulation: `createActor(stepPoolMachine).start()`. Generated from the machine by `capsule visualize`;
// do not edit (visualizations/README.md). Its effects are stubs: guards return false, actions do nothing,
// actors never answer, delays are 1000 ms; the context, inputs, params and output are left out.
import { fromPromise, setup } from 'xstate';

export const stepPoolMachine = setup({
  actions: {
    startBatches: () => {},
    reportStepEnded: () => {},
    reportStepCrashed: () => {},
    forwardCancel: () => {},
  },
  actors: {
    step: fromPromise(() => new Promise(() => {})),
  },
}).createMachine({
  id: "stepPool",
  description: "A node of the plan's tree of live steps, so that no actor's children map grows with the width of a wave: starts the steps it is handed (or passes them down to its sub-pools), forwards CANCEL down, reports each step's end to the plan as it happens.",
  context: {},
  initial: "running",
  states: {
    running: {
      description: "Steps of the pool run; the plan stops the pools once its last wave is over.",
      entry: "startBatches",
      on: {
        "POOL.START": {
          description: "The plan hands the pool (or a pool below it) more steps: a slot freed, or a new wave.",
          actions: "startBatches",
        },
        CANCEL: {
          description: "Forward the cancel to every live step of the pool and to every sub-pool.",
          actions: "forwardCancel",
        },
        "xstate.done.actor.step.*": {
          description: "A step of the pool ended: report its output to the plan.",
          actions: "reportStepEnded",
        },
        "xstate.error.actor.step.*": {
          description: "A step actor of the pool crashed (a runtime bug): report it to the plan.",
          actions: "reportStepCrashed",
        },
      },
    },
  },
});
