// The delegation machine (machines/delegation.machine.ts) for the Stately editor (https://stately.ai/editor, "Import from code")
// or a simulation: `createActor(delegationMachine).start()`. Generated from the machine by `capsule visualize`;
// do not edit (visualizations/README.md). Its effects are stubs: guards return false, actions do nothing,
// actors never answer, delays are 1000 ms; the context, inputs, params and output are left out.
import { fromCallback, setup } from 'xstate';

export const delegationMachine = setup({
  guards: {
    wasCanceled: () => false,
  },
  actions: {
    assign_1: () => {},
    sendTo_2: () => {},
    assign_3: () => {},
    assign_4: () => {},
    assign_5: () => {},
    assign_6: () => {},
    assign_7: () => {},
    assign_8: () => {},
    assign_9: () => {},
  },
  actors: {
    plane: fromCallback(() => {}),
  },
}).createMachine({
  id: "delegation",
  description: "One delegation of a capsule step: the parent approves the capsule (its spawn allow list and the registry), launches the child capsule as its own process, hands it the task and waits; the child is ended before the outcome is known.",
  context: {},
  invoke: {
    id: "plane",
    src: "plane",
  },
  initial: "running",
  states: {
    running: {
      description: "The delegation is under way: approving, launching, then awaiting the answer.",
      initial: "approving",
      on: {
        CANCEL: {
          description: "The delegating task was canceled: the plane ends the child (docs/cancel.md#during-a-wave).",
          actions: [
            "assign_1",
            "sendTo_2",
          ],
        },
        "DELEGATION.ENDED": [
          {
            description: "Canceled before a child was up (before or while it was approved or launched): nothing is left.",
            guard: "wasCanceled",
            target: "#delegation.canceled",
            actions: "assign_3",
          },
          {
            description: "Refused, or the child never came up: nothing was started or nothing is left.",
            target: "#delegation.finished",
            actions: "assign_4",
          },
        ],
      },
      states: {
        approving: {
          description: "The parent's capabilities.spawn.allow and the capsule registry decide; a refusal starts nothing.",
          on: {
            "DELEGATION.APPROVED": {
              description: "Allowed, and the registry holds the capsule; the dlg_ id the child is started under is known from here.",
              target: "launching",
              actions: "assign_5",
            },
          },
        },
        launching: {
          description: "The child capsule starts as a separate capsule serve process, contained; up once it names its session.",
          on: {
            "DELEGATION.LAUNCHED": {
              description: "The child is up: live (a cancel names it) and delegation_start written.",
              target: "awaiting",
              actions: "assign_6",
            },
          },
        },
        awaiting: {
          description: "The task is handed over and polled until the child answers, the bound expires, the child dies or the task is canceled.",
          on: {
            "DELEGATION.ANSWERED": {
              description: "The wait is over; the child has been ended and has exited.",
              target: "#delegation.leaderExited",
              actions: "assign_7",
            },
          },
        },
      },
    },
    leaderExited: {
      description: "The child has exited (ended and proven gone); what it left (its completion) is read.",
      on: {
        "DELEGATION.ENDED": [
          {
            description: "The delegating task was canceled: the child was ended with it.",
            guard: "wasCanceled",
            target: "canceled",
            actions: "assign_8",
          },
          {
            description: "The outcome is final.",
            target: "finished",
            actions: "assign_9",
          },
        ],
      },
    },
    finished: {
      description: "The delegation ended with its outcome (completed, failed, timed_out or refused).",
      type: "final",
    },
    canceled: {
      description: "The delegating task was canceled; the child was ended and proven gone.",
      type: "final",
    },
  },
});
