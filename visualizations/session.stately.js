// The session machine (machines/session.machine.ts) for the Stately editor (https://stately.ai/editor, "Import from code")
// or a simulation: `createActor(sessionMachine).start()`. Generated from the machine by `capsule visualize`;
// do not edit (visualizations/README.md). Its effects are stubs: guards return false, actions do nothing,
// actors never answer, delays are 1000 ms; the context, inputs, params and output are left out.
import { fromPromise, setup } from 'xstate';

export const sessionMachine = setup({
  actions: {
    spawnCall: () => {},
    spawnCommand: () => {},
    deliverCompletion: () => {},
    recordSweep: () => {},
  },
  actors: {
    shellCall: fromPromise(() => new Promise(() => {})),
    detachedCommand: fromPromise(() => new Promise(() => {})),
    sweep: fromPromise(() => new Promise(() => {})),
  },
}).createMachine({
  id: "session",
  description: "One runtime session (capsule serve, or a library session): owns its shell calls (one shellCall child each, shell:<task_id>), delivers each demoted call's completion once, and runs the teardown sweep when it ends.",
  context: {},
  on: {
    "xstate.done.actor.shell.*": {
      description: "A shell call ended: a demoted call's completion (its output) is delivered once, to whoever claims it first.",
      actions: "deliverCompletion",
    },
  },
  initial: "running",
  states: {
    running: {
      description: "The session takes work.",
      initial: "accepting",
      states: {
        accepting: {
          description: "Calls run; each shell call is a child actor of the session.",
          on: {
            "CALL.ACCEPTED": {
              description: "Spawn the call's actor (shell:<task_id>) as a child of the session.",
              actions: "spawnCall",
            },
            "COMMAND.DEMOTED": {
              description: "A recording made before shell calls had a machine: spawn the demoted command's actor (wrk_…).",
              actions: "spawnCommand",
            },
            "SESSION.STOP": {
              target: "sweeping",
              description: "An ordinary end of the session: sweep.",
            },
          },
        },
        sweeping: {
          description: "The teardown sweep (docs/background-commands.md#session-end): every command still running in the background is killed and proven gone; the unaccounted are recorded as abandoned and reported once.",
          invoke: {
            id: "sweep",
            src: "sweep",
            onDone: {
              target: "#session.finished",
              actions: "recordSweep",
              description: "The sweep is done.",
            },
            onError: {
              target: "#session.finished",
              description: "The sweep failed (a bug): the session ends anyway.",
            },
          },
        },
      },
    },
    finished: {
      type: "final",
      description: "The session has ended: no command of it is running.",
    },
  },
});
