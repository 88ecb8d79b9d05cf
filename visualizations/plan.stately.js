// The plan machine (machines/plan.machine.ts) for the Stately editor (https://stately.ai/editor, "Import from code")
// or a simulation: `createActor(planMachine).start()`. Generated from the machine by `capsule visualize`;
// do not edit (visualizations/README.md). Its effects are stubs: guards return false, actions do nothing,
// actors never answer, delays are 1000 ms; the context, inputs, params and output are left out.
import { fromCallback, fromPromise, setup } from 'xstate';

export const planMachine = setup({
  guards: {
    hasWave: () => false,
    isEager: () => false,
    endsWave: () => false,
    isWaveSettledAfterCrash: () => false,
    noLiveStepsAlwaysLeft: () => false,
    isRunOver: () => false,
    isCanceled: () => false,
    noLiveSteps: () => false,
  },
  actions: {
    scanSteps: () => {},
    emitSettledRecords: () => {},
    beginWave: () => {},
    spawnReadySteps: () => {},
    grantSlice: () => {},
    settleHeldSteps: () => {},
    collectStepOutcome: () => {},
    collectStepCrash: () => {},
    settleEndedStep: () => {},
    joinReadySteps: () => {},
    settleCurrentWave: () => {},
    skipAlwaysSteps: () => {},
    recordCancel: () => {},
    forwardCancel: () => {},
    stopDispatch: () => {},
  },
  actors: {
    step: fromPromise(() => new Promise(() => {})),
    stepPool: fromPromise(() => new Promise(() => {})),
    endProcessGroups: fromPromise(() => new Promise(() => {})),
    slicePacer: fromCallback(() => {}),
  },
}).createMachine({
  id: "plan",
  description: "A plan run (docs/plan-format.md#how-a-plan-runs): scan for ready steps, start them all as one wave of step actors (--max-parallel the only cap), settle the wave with on_error, repeat; then end every process group the steps started.",
  context: {},
  initial: "running",
  states: {
    running: {
      description: "Waves are being scanned, dispatched and settled.",
      initial: "scanning",
      exit: "stopDispatch",
      on: {
        CANCEL: {
          target: ".canceling",
          description: "Stop dispatching; tell every live step (graceful: no more retries; forced: end its process group); dispatched steps still held without an actor never ran.",
          actions: [
            "skipAlwaysSteps",
            "recordCancel",
            "forwardCancel",
            "settleHeldSteps",
          ],
        },
      },
      states: {
        scanning: {
          description: "docs/plan-format.md#the-scan: settle canceled, false-if and condition-error steps; collect the ready list in declaration order; detect a blocked plan.",
          entry: [
            "scanSteps",
            "emitSettledRecords",
          ],
          always: [
            {
              guard: "hasWave",
              target: "dispatching",
              description: "Some steps are ready (after a stop or a cancel: always-run steps only): run them as one wave.",
            },
            {
              guard: "isCanceled",
              target: "canceling",
              description: "The task was canceled before the first wave (docs/cancel.md#before-the-first-wave): nothing is dispatched, every step was skipped by the scan.",
            },
            {
              target: "#plan.leaderExited",
              description: "Nothing left to run: all settled, stopped by a failure, blocked, or canceled.",
            },
          ],
        },
        dispatching: {
          description: "The wave runs: every ready step is dispatched at once (at most max-parallel at a time) and gets its step actor, a slice at a time once many are live; each sees the results as they stood when the wave began.",
          entry: [
            "beginWave",
            "spawnReadySteps",
          ],
          on: {
            "SLICE.READY": {
              description: "The pacer has room for another slice: spawn step actors for held dispatched steps.",
              actions: [
                "grantSlice",
                "spawnReadySteps",
              ],
            },
            "xstate.done.actor.step.*": [
              {
                guard: "endsWave",
                description: "The last step of the wave ended: settle the wave (docs/plan-format.md#settling-a-wave: declaration order, on_error unless canceled, a fail stop discards later siblings), scan again and start the next wave.",
                actions: [
                  "collectStepOutcome",
                  "settleCurrentWave",
                  "emitSettledRecords",
                  "scanSteps",
                  "emitSettledRecords",
                  "beginWave",
                  "spawnReadySteps",
                ],
              },
              {
                guard: "isEager",
                description: "Eager (docs/plan-format.md#schedule): a step ended: settle it now (on_error), let the steps whose dependencies have all settled join the wave, and start what max-parallel allows.",
                actions: [
                  "collectStepOutcome",
                  "settleEndedStep",
                  "joinReadySteps",
                  "emitSettledRecords",
                  "spawnReadySteps",
                ],
              },
              {
                description: "A step ended: keep its outcome, start the next ready step of the wave (max-parallel).",
                actions: [
                  "collectStepOutcome",
                  "spawnReadySteps",
                ],
              },
            ],
            "POOL.STEP_ENDED": [
              {
                guard: "endsWave",
                description: "The last step of the wave ended in a pool: settle the wave, scan again and start the next wave.",
                actions: [
                  "collectStepOutcome",
                  "settleCurrentWave",
                  "emitSettledRecords",
                  "scanSteps",
                  "emitSettledRecords",
                  "beginWave",
                  "spawnReadySteps",
                ],
              },
              {
                guard: "isEager",
                description: "Eager: a step ended in a pool: settle it now, let the steps it unblocked join the wave, start what max-parallel allows.",
                actions: [
                  "collectStepOutcome",
                  "settleEndedStep",
                  "joinReadySteps",
                  "emitSettledRecords",
                  "spawnReadySteps",
                ],
              },
              {
                description: "A step ended in a pool: keep its outcome, start the next ready step of the wave.",
                actions: [
                  "collectStepOutcome",
                  "spawnReadySteps",
                ],
              },
            ],
            "xstate.error.actor.step.*": {
              description: "A step actor crashed (a runtime bug): that step fails with the error text.",
              actions: [
                "collectStepCrash",
                "spawnReadySteps",
              ],
            },
            "POOL.STEP_CRASHED": {
              description: "A step actor in a pool crashed (a runtime bug): that step fails with the error text.",
              actions: [
                "collectStepCrash",
                "spawnReadySteps",
              ],
            },
          },
          always: [
            {
              guard: "isWaveSettledAfterCrash",
              target: "scanning",
              description: "A crash ended the wave: settle it and scan again.",
              actions: [
                "settleCurrentWave",
                "emitSettledRecords",
              ],
            },
            {
              guard: "isRunOver",
              target: "#plan.leaderExited",
              description: "The last scan found nothing left to run.",
            },
          ],
        },
        canceling: {
          description: "The task was canceled (docs/cancel.md#plan-runs): nothing more is dispatched; CANCEL went to every live step (graceful: a tool or shell step finishes on its own bound, not retried; forced: its tree is ended). Waiting for the live steps to settle.",
          on: {
            CANCEL: {
              description: "A further cancel (a forced one after a graceful one): forwarded to every live step; while always-run steps run, those not started yet will be skipped.",
              actions: [
                "skipAlwaysSteps",
                "recordCancel",
                "forwardCancel",
              ],
            },
            "xstate.done.actor.step.*": {
              description: "A live step settled: its outcome is kept as it returned (no on_error after a cancel).",
              actions: [
                "collectStepOutcome",
              ],
            },
            "POOL.STEP_ENDED": {
              description: "A live step in a pool settled: its outcome is kept as it returned.",
              actions: [
                "collectStepOutcome",
              ],
            },
            "xstate.error.actor.step.*": {
              description: "A step actor crashed (a runtime bug): that step fails with the error text.",
              actions: [
                "collectStepCrash",
              ],
            },
            "POOL.STEP_CRASHED": {
              description: "A step actor in a pool crashed (a runtime bug): that step fails with the error text.",
              actions: [
                "collectStepCrash",
              ],
            },
          },
          always: [
            {
              guard: "noLiveStepsAlwaysLeft",
              target: "scanning",
              description: "Every live step settled and always-run steps are left (docs/plan-format.md#always): record the wave as it returned, then scan for them (every other step without a result is skipped).",
              actions: [
                "settleCurrentWave",
                "emitSettledRecords",
              ],
            },
            {
              guard: "noLiveSteps",
              target: "#plan.leaderExited",
              description: "Every live step settled: record the wave as it returned, then skip every step without a result with the cancel-before-step error (declaration order).",
              actions: [
                "settleCurrentWave",
                "emitSettledRecords",
                "scanSteps",
                "emitSettledRecords",
              ],
            },
          ],
        },
      },
    },
    leaderExited: {
      description: "The last wave has exited. Every process group the plan's steps started (and anything they backgrounded) is being ended and verified gone.",
      invoke: {
        id: "endProcessGroups",
        src: "endProcessGroups",
        onDone: [
          {
            guard: "isCanceled",
            target: "canceled",
            description: "Every process group is gone and the run was canceled.",
          },
          {
            target: "finished",
            description: "Every process group is gone; the run completed or a step stopped it.",
          },
        ],
        onError: [
          {
            guard: "isCanceled",
            target: "canceled",
            description: "Ending the process groups failed; the run was canceled all the same.",
          },
          {
            target: "finished",
            description: "Ending the process groups failed; the run ends as its steps left it.",
          },
        ],
      },
    },
    finished: {
      type: "final",
      description: "The run completed or a step stopped it; no process of the plan is left.",
    },
    canceled: {
      type: "final",
      description: "A cancel ended the run; every unsettled step is skipped and no process of the plan is left.",
    },
  },
});
