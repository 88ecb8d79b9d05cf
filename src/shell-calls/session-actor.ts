/**
 * The session actor (machines/session.machine.ts) with its effects wired: the teardown sweep, the
 * delivery of a demoted call's completion, and each shell call's `runCommand`. Loaded with the
 * session (with xstate, which every run loads); the shell calls' own code, loaded at their first
 * use, starts it through here.
 */
import { createActor, fromCallback, fromPromise, type Actor, type AnyStateMachine } from 'xstate';
import { sessionActorId, type SweepOutput } from '../../machines/session.machine.js';
import type { CommandOrder, CommandReport, ShellCallInput, ShellCallOutput } from '../../machines/shell-call.machine.js';
import { provideKind } from '../actors/actor-kinds.js';
import type { ShellCallHost } from './host.js';

/** The session actor's effects, implemented by the session's shell calls. */
export interface SessionActorEffects {
  /** The teardown sweep. */
  sweep(): Promise<SweepOutput>;
  /** A shell call ended: its output (a demoted call's completion) to deliver once. */
  deliverCompletion(output: ShellCallOutput): void;
  /** A shell call's command: takes the machine's orders, sends its reports; returns what to do when its actor stops. */
  runCommand(input: ShellCallInput, report: (report: CommandReport) => void, onOrder: (listener: (order: CommandOrder) => void) => void): (() => void) | undefined;
}

/** Starts the session actor (`session:<id>`) of `host` with `effects`. */
export function startSessionActor(host: ShellCallHost, effects: SessionActorEffects): Actor<AnyStateMachine> {
  const machine = provideKind('session', {
    session: {
      actors: { sweep: fromPromise(() => effects.sweep()) },
      actions: { deliverCompletion: (_: unknown, params: { output: ShellCallOutput }) => effects.deliverCompletion(params.output) },
    },
    shellCall: {
      actors: {
        runCommand: fromCallback<CommandOrder, ShellCallInput>(({ input, sendBack, receive }) => effects.runCommand(input, (report) => sendBack(report), receive)),
      },
    },
  });
  const actor = createActor(machine, {
    id: sessionActorId(host.id),
    input: { sessionId: host.id },
    clock: host.clock,
    ...(host.inspect ? { inspect: host.inspect } : {}),
  });
  actor.start();
  return actor;
}
