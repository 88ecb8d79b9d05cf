// The shellCall machine (machines/shell-call.machine.ts) for the Stately editor (https://stately.ai/editor, "Import from code")
// or a simulation: `createActor(shellCallMachine).start()`. Generated from the machine by `capsule visualize`;
// do not edit (visualizations/README.md). Its effects are stubs: guards return false, actions do nothing,
// actors never answer, delays are 1000 ms; the context, inputs, params and output are left out.
import { fromCallback, setup } from 'xstate';

export const shellCallMachine = setup({
  guards: {
    demotable: () => false,
    triggered: () => false,
    hasGrace: () => false,
    notStopping: () => false,
    isTerm: () => false,
    wasEnded: () => false,
  },
  actions: {
    orderDemotion: () => {},
    orderSignal: () => {},
    orderEnd: () => {},
    orderSettle: () => {},
    rememberTrigger: () => {},
    recordTrigger: () => {},
    recordStart: () => {},
    recordDemotion: () => {},
    recordLogCapStop: () => {},
    recordDeadlineStop: () => {},
    recordSignal: () => {},
    recordLeaderExit: () => {},
    recordFinish: () => {},
  },
  actors: {
    runCommand: fromCallback(() => {}),
  },
  delays: {
    grace: 1000,
    stopTermGrace: 1000,
  },
}).createMachine({
  id: "shellCall",
  description: "One shell call of the session (shell.run), from its start to its end: in the foreground until it exits or is demoted (the grace, the caller gone, its task canceled), then in the background under its work id until it exits, a stop ends it (SIGTERM, SIGKILL after the grace) or the session's end kills it. Its completion is its output.",
  context: {},
  invoke: {
    id: "command",
    src: "runCommand",
  },
  on: {
    "COMMAND.SIGNAL_SENT": {
      description: "A signal reached the tree while the leader was unreaped, its report arriving after the exit it caused: counted, and a stop's marks it stopped.",
      actions: "recordSignal",
    },
  },
  initial: "running",
  states: {
    running: {
      description: "The command's own process has not exited.",
      initial: "foreground",
      on: {
        "COMMAND.LEADER_EXITED": {
          target: "leaderExited",
          description: "The leader exited and is being reaped; from here its group is never signalled again. The exit wins over a trigger seen at the same moment.",
          actions: "recordLeaderExit",
        },
        "COMMAND.FINISHED": {
          target: "finished",
          description: "It ended without a leader exit: the program could not be started (a foreground error).",
          actions: "recordFinish",
        },
      },
      states: {
        foreground: {
          description: "The call waits for its command: its output is captured, its result will be the answer.",
          initial: "starting",
          on: {
            "COMMAND.LOG_CAPPED": {
              target: ".held",
              description: "Its log reached the cap under on_log_cap \"stop\": it is ended in the foreground, never demoted, and says why (ended_by log_cap).",
              actions: [
                "recordLogCapStop",
                {
                  type: "orderEnd",
                  params: {
                    by: "log_cap",
                  },
                },
              ],
            },
            "COMMAND.DEADLINE": {
              guard: "notStopping",
              target: ".held",
              description: "Its deadline passed while it ran in the foreground: it is ended there, never demoted, and says why (ended_by deadline).",
              actions: [
                "recordDeadlineStop",
                {
                  type: "orderEnd",
                  params: {
                    by: "deadline",
                  },
                },
              ],
            },
          },
          states: {
            starting: {
              description: "The process is starting (through the session's spawner); the grace counts from its start.",
              on: {
                DEMOTE: {
                  description: "A trigger before the start: the first one is applied once the process has started.",
                  actions: "rememberTrigger",
                },
                "COMMAND.STARTED": [
                  {
                    guard: "demotable",
                    target: "pending",
                    description: "The process started: the grace counts from here.",
                    actions: "recordStart",
                  },
                  {
                    target: "held",
                    description: "Not demotable (the session has no records directory): it runs in the foreground to its end.",
                    actions: "recordStart",
                  },
                ],
              },
            },
            pending: {
              description: "Started: a trigger that came while it started demotes it now; else it waits for one.",
              always: [
                {
                  guard: "triggered",
                  target: "demoting",
                  description: "The caller went away, or the task was canceled, while it started: demote it now.",
                  actions: {
                    type: "recordTrigger",
                    params: {
                      trigger: null,
                    },
                  },
                },
                {
                  guard: "hasGrace",
                  target: "graced",
                  description: "A grace is declared: its clock runs.",
                },
                {
                  target: "waiting",
                  description: "No grace (null, or too long to count): no clock.",
                },
              ],
            },
            graced: {
              description: "Runs in the foreground until the grace elapses.",
              after: {
                grace: {
                  target: "demoting",
                  description: "The grace elapsed (a zero grace: at the first poll after the start).",
                  actions: {
                    type: "recordTrigger",
                    params: {
                      trigger: "grace",
                    },
                  },
                },
              },
              on: {
                DEMOTE: {
                  target: "demoting",
                  description: "The caller went away, or the call's task was canceled.",
                  actions: "recordTrigger",
                },
              },
            },
            waiting: {
              description: "Runs in the foreground with no grace clock: only the caller going away or a cancel demotes it.",
              on: {
                DEMOTE: {
                  target: "demoting",
                  description: "The caller went away, or the call's task was canceled.",
                  actions: "recordTrigger",
                },
              },
            },
            demoting: {
              description: "Told the command to demote: after a caller gone or a cancel it first gives an exit already under way a moment to arrive.",
              entry: "orderDemotion",
              on: {
                "COMMAND.DEMOTED": {
                  target: "#shellCall.running.background",
                  description: "It runs in the background under its work id, owned by the session; the call answers with the demotion.",
                  actions: "recordDemotion",
                },
                "COMMAND.HELD": {
                  target: "held",
                  description: "It cannot be demoted (the session is ending, or its log cap is stopping it): it stays in the foreground.",
                },
              },
            },
            held: {
              description: "Never demoted from here: it runs in the foreground to its end.",
            },
          },
        },
        background: {
          description: "Demoted: it runs in the background under its work id, the session's; stop, wait and status reach it by that id.",
          initial: "active",
          on: {
            KILL: {
              description: "The session's end: SIGKILL to the tree while the leader is unreaped.",
              actions: {
                type: "orderSignal",
                params: {
                  signal: "SIGKILL",
                  by: "kill",
                },
              },
            },
            "COMMAND.LOG_CAPPED": {
              description: "Its log reached the cap under on_log_cap \"stop\" while a stop or the session's end already ends it: it reads stopped, ended_by log_cap unless a stop came first.",
              actions: "recordLogCapStop",
            },
          },
          states: {
            active: {
              description: "It runs on its own.",
              on: {
                STOP: {
                  description: "A stop: SIGTERM to the whole tree (it reads stopped once the signal reached it).",
                  actions: {
                    type: "orderSignal",
                    params: {
                      signal: "SIGTERM",
                      by: "stop",
                    },
                  },
                },
                "COMMAND.LOG_CAPPED": {
                  description: "Its log reached the cap under on_log_cap \"stop\": the runtime stops it as a stop does; it reads stopped, ended_by log_cap.",
                  actions: [
                    "recordLogCapStop",
                    {
                      type: "orderSignal",
                      params: {
                        signal: "SIGTERM",
                        by: "log_cap",
                      },
                    },
                  ],
                },
                "COMMAND.DEADLINE": {
                  description: "Its deadline passed: the runtime stops it as a stop does; it reads stopped, ended_by deadline.",
                  actions: [
                    "recordDeadlineStop",
                    {
                      type: "orderSignal",
                      params: {
                        signal: "SIGTERM",
                        by: "deadline",
                      },
                    },
                  ],
                },
                "COMMAND.SIGNAL_SENT": [
                  {
                    guard: "isTerm",
                    target: "stopping",
                    description: "SIGTERM reached the tree: a stop is under way.",
                    actions: "recordSignal",
                  },
                  {
                    target: "killing",
                    description: "SIGKILL reached the tree: the session's end.",
                    actions: "recordSignal",
                  },
                ],
              },
            },
            stopping: {
              description: "SIGTERM was sent; the leader has the grace to exit.",
              after: {
                stopTermGrace: {
                  description: "The leader outlived the grace: SIGKILL to the tree.",
                  actions: "orderSignal",
                },
              },
              on: {
                "COMMAND.SIGNAL_SENT": [
                  {
                    guard: "isTerm",
                    description: "A SIGTERM reported while stopping: counted.",
                    actions: "recordSignal",
                  },
                  {
                    target: "killing",
                    description: "SIGKILL reached the tree.",
                    actions: "recordSignal",
                  },
                ],
              },
            },
            killing: {
              description: "SIGKILL was sent; waiting for the leader to exit.",
            },
          },
        },
      },
    },
    leaderExited: {
      description: "The leader exited and is being reaped; its output may still be draining, and what a stop left of its tree is ended. A stop here sends nothing.",
      entry: "orderSettle",
      on: {
        "COMMAND.LOG_CAPPED": {
          description: "Its draining output reached the cap under on_log_cap \"stop\": it reads stopped, ended_by log_cap, and what it left is ended.",
          actions: [
            "recordLogCapStop",
            "orderSettle",
          ],
        },
        "COMMAND.FINISHED": [
          {
            guard: "wasEnded",
            target: "canceled",
            description: "Settled, after a stop (it reads stopped) or the session's end had ended it.",
            actions: "recordFinish",
          },
          {
            target: "finished",
            description: "Settled: it ended on its own (it reads exited).",
            actions: "recordFinish",
          },
        ],
      },
    },
    finished: {
      type: "final",
      description: "It ended on its own and everything of it is settled (its result answered the call, or its completion is recorded).",
    },
    canceled: {
      type: "final",
      description: "A stop (it reads stopped) or the session's end ended it; its completion is recorded and its processes are gone.",
    },
  },
});
