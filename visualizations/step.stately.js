// The step machine (machines/step.machine.ts) for the Stately editor (https://stately.ai/editor, "Import from code")
// or a simulation: `createActor(stepMachine).start()`. Generated from the machine by `capsule visualize`;
// do not edit (visualizations/README.md). Its effects are stubs: guards return false, actions do nothing,
// actors never answer, delays are 1000 ms; the context, inputs, params and output are left out.
import { fromCallback, setup } from 'xstate';

export const stepMachine = setup({
  guards: {
    isStaleReport: () => false,
    isForced: () => false,
    hasTimeout: () => false,
    wasForcedToStop: () => false,
    shouldRetry: () => false,
    shouldRetryAfterDelay: () => false,
  },
  actions: {
    startAttempt: () => {},
    terminateAttempt: () => {},
    tellAttemptOfCancel: () => {},
    recordCancel: () => {},
    recordTimeout: () => {},
    recordLeaderExit: () => {},
    recordAttempt: () => {},
  },
  actors: {
    toolAttempt: fromCallback(() => {}),
    shellAttempt: fromCallback(() => {}),
    delegation: fromCallback(() => {}),
  },
  delays: {
    attemptTimeout: 1000,
    retryDelay: 1000,
  },
}).createMachine({
  id: "step",
  description: "One plan step. Runs attempts one after another until one succeeds, retries run out, or a cancel forbids another; each attempt is a child effect actor (toolAttempt, shellAttempt or delegation) that reports back with ATTEMPT.* events.",
  context: {},
  initial: "running",
  states: {
    running: {
      description: "An attempt is in flight: its tool call or its process group leader is running.",
      initial: "attempting",
      on: {
        "ATTEMPT.LEADER_EXITED": [
          {
            guard: "isStaleReport",
            description: "A report from an earlier attempt (it was ended and replaced): ignored.",
          },
          {
            target: "leaderExited",
            description: "The attempt's leader process exited; from here its group is never signalled again.",
            actions: "recordLeaderExit",
          },
        ],
        "ATTEMPT.FINISHED": [
          {
            guard: "isStaleReport",
            description: "A report from an earlier attempt (it was ended and replaced): ignored.",
          },
          {
            guard: "wasForcedToStop",
            target: "canceled",
            description: "A forced cancel ended an attempt that had no leader process (an in-process tool).",
            actions: "recordAttempt",
          },
          {
            guard: "shouldRetryAfterDelay",
            target: ".backoff",
            description: "An in-process attempt failed, retries remain and the step has retry_delay_secs: wait before the next attempt.",
            actions: "recordAttempt",
          },
          {
            guard: "shouldRetry",
            target: "running",
            reenter: true,
            description: "An in-process attempt failed and retries remain: start the next attempt at once (no retry_delay_secs).",
            actions: "recordAttempt",
          },
          {
            target: "finished",
            description: "An in-process attempt ended and stands.",
            actions: "recordAttempt",
          },
        ],
        CANCEL: [
          {
            guard: "isForced",
            target: ".stopping",
            description: "Forced cancel: end the running attempt's process group now.",
            actions: "recordCancel",
          },
          {
            description: "Graceful cancel: the running attempt finishes on its own bound, but no further attempt starts.",
            actions: [
              "recordCancel",
              "tellAttemptOfCancel",
            ],
          },
        ],
      },
      states: {
        attempting: {
          description: "The next attempt starts as the child actor attempt (of the kind of the step); it runs without a time bound unless the step has one.",
          entry: "startAttempt",
          always: {
            guard: "hasTimeout",
            target: "bounded",
            description: "The step has a timeout_secs bound.",
          },
        },
        bounded: {
          description: "The attempt runs under its timeout_secs bound.",
          after: {
            attemptTimeout: {
              target: "stopping",
              description: "timeout_secs elapsed: end the attempt (SIGTERM, then SIGKILL after the grace).",
              actions: "recordTimeout",
            },
          },
          on: {
            "ATTEMPT.LAUNCHING": [
              {
                guard: "isStaleReport",
                description: "A report from an earlier attempt (it was ended and replaced): ignored.",
              },
              {
                target: "launching",
                description: "The attempt asks for its process: its bound waits for the process to start.",
              },
            ],
          },
        },
        launching: {
          description: "The attempt's process is being started: its launch waits for the session's spawner (behind the rest of a wide wave) and its fork. timeout_secs does not count this wait; a cancel still ends it.",
          on: {
            "ATTEMPT.LAUNCHED": [
              {
                guard: "isStaleReport",
                description: "A report from an earlier attempt (it was ended and replaced): ignored.",
              },
              {
                target: "bounded",
                description: "The process started: the timeout_secs bound starts, in full.",
              },
            ],
          },
        },
        backoff: {
          description: "Between two attempts (retry_delay_secs, doubled per attempt up to 60 s, less a jitter derived from the step id and the attempt): no attempt runs. A cancel settles the step at once with the last attempt's outcome.",
          after: {
            retryDelay: {
              target: "attempting",
              description: "The delay is over: start the next attempt.",
            },
          },
          on: {
            CANCEL: {
              target: "#step.finished",
              description: "A cancel (graceful or forced: no process runs) during the delay: no further attempt; the last attempt stands.",
              actions: "recordCancel",
            },
            "ATTEMPT.*": {
              description: "No attempt runs during the delay: a report is stale and ignored.",
            },
          },
        },
        stopping: {
          description: "The attempt was told to end (timeout or forced cancel); waiting for its leader to exit.",
          entry: "terminateAttempt",
        },
      },
    },
    leaderExited: {
      description: "The attempt's leader exited and is being reaped; output may still be draining. Its process group is never signalled from here on (the plan ends it at cleanup).",
      on: {
        "ATTEMPT.FINISHED": [
          {
            guard: "isStaleReport",
            description: "A report from an earlier attempt (it was ended and replaced): ignored.",
          },
          {
            guard: "wasForcedToStop",
            target: "canceled",
            description: "The group a forced cancel ended is gone: the step is canceled.",
            actions: "recordAttempt",
          },
          {
            guard: "shouldRetryAfterDelay",
            target: "running.backoff",
            description: "The attempt failed (or timed out), retries remain and the step has retry_delay_secs: wait before the next attempt.",
            actions: "recordAttempt",
          },
          {
            guard: "shouldRetry",
            target: "running",
            description: "The attempt failed (or timed out) and retries remain: start the next attempt at once (no retry_delay_secs).",
            actions: "recordAttempt",
          },
          {
            target: "finished",
            description: "The attempt succeeded, retries ran out, or a cancel forbids another attempt.",
            actions: "recordAttempt",
          },
        ],
        CANCEL: {
          description: "A cancel while output drains only forbids further attempts.",
          actions: "recordCancel",
        },
      },
    },
    finished: {
      type: "final",
      description: "The last attempt stands; the outcome (success or failed, output, error, attempts) is the output.",
    },
    canceled: {
      type: "final",
      description: "A forced cancel ended the step and its process group is verified gone.",
    },
  },
});
