/**
 * The `delegation` effect actor: one attempt of a capsule step (`docs/delegation.md#one-delegation`), through the
 * local delegation plane (`src/runtime/delegation/`). Per attempt: interpolate the
 * input, compute the task text (docs/plan-format.md#capsule-input), refuse without a records directory, resolve the capsule
 * in the registry against the parent's `capabilities.spawn.allow` (a refusal starts nothing),
 * then delegate: the child is a separate `capsule serve` process owned by this attempt.
 *
 * Records (`docs/trace.md#delegation-records`): `delegation_start` once the child is up (it is registered in the
 * session's live delegations first, so a cancel's residue names it); the terminal `delegation`
 * record by exactly one writer (`docs/cancel.md#one-writer-per-row`): the attempt for every outcome but `canceled`;
 * a canceled delegation's row is left for the run's task, which closes it after its
 * `task_canceled` ({@link closeCanceledRows}).
 */
import { createActor, fromCallback, type AnyActorRef } from 'xstate';
import { delegationMachine, type DelegationInput, type DelegationOutcome, type DelegationReport, type PlaneRequest } from '../../../machines/delegation.machine.js';
import { CANCEL_CAPSULE_STEP, PARENT_ENDED_DETAIL } from '../../../machines/messages.js';
import { capsuleTaskText } from '../../plan/validate.js';
import { interpolateInput } from '../../plan/interpolate.js';
import type { ContainedProcess } from '../../process/containment.js';
import type { Session } from '../../session/session.js';
import { messageOf } from '../../errors.js';
import type { AttemptEnvironment, CanceledRow } from '../attempt.js';
import type { Delegation } from '../delegation/plane.js';
import { resolveCapsule, spawnTarget, DEFAULT_CAPSULE_VERSION } from '../delegation/registry.js';
import { attemptActor, trackTree, type LastTrees } from './attempt-run.js';

/** A capsule step of a run that has no records directory (`docs/delegation.md#one-delegation`). */
export const noRecordsDirectory = (capsule: string): string =>
  `capsule step '${capsule}' cannot be delegated: the plan runs outside a session's records directory, where the child's work folder would be created; run it with a records directory (capsule run writes one by default; do not pass records: false)`;

/** The `delegation` actor logic for one plan run: each attempt runs one `delegation` machine (machines/delegation.machine.ts). */
export function delegationActor(env: AttemptEnvironment, lastTrees: LastTrees) {
  return attemptActor(env, lastTrees, (run) => {
    let delegation: Delegation | null = null;
    let machine: AnyActorRef | null = null;
    let canceled = false;
    /** The step was stopped (a forced cancel) while the delegation ran: its machine is stopped, not done. */
    let abandoned = false;
    /** The child's row once it is up (registered in the session's live delegations), else null. */
    let launched: { readonly delegation_id: string; readonly child_session_id: string | null } | null = null;
    run.dispatchWhenClear(() => {
      const { step, results } = run.input.step;
      const interpolated = interpolateInput(step.input, results);
      if (!interpolated.ok) return run.fail(interpolated.error);
      const task = capsuleTaskText(interpolated.value);
      if (!task.ok) return run.fail(task.error);
      const session = env.session;
      const name = step.capsule as string;
      const target = spawnTarget(name, env.spawnAllow ?? []);
      // The version map is keyed by the name as the step writes it (`docs/delegation.md#one-delegation`).
      const version = env.capsuleVersions !== undefined && Object.hasOwn(env.capsuleVersions, name) ? (env.capsuleVersions[name] as string) : DEFAULT_CAPSULE_VERSION;
      const startedMs = session.time.monotonicMs();
      const terminal = (result: DelegationOutcome): void => {
        session.trace.write('delegation', session.node, {
          capsule: target,
          version,
          delegation_id: result.delegation_id,
          child_session_id: result.child_session_id,
          duration_ms: Math.max(0, Math.round(session.time.monotonicMs() - startedMs)),
          outcome: result.status,
          ...(result.status !== 'completed' && result.reason !== null ? { reason: result.reason } : {}),
        });
      };
      const noChild = (status: DelegationOutcome['status'], reason: string): DelegationOutcome => ({ status, answer: null, reason, delegation_id: null, child_session_id: null });
      /**
       * Closes the row of a child that is up when the step was stopped (`docs/cancel.md#one-writer-per-row`): left for
       * the run's task while the run has not ended (`late` false: called at the stop), else closed
       * here (`late`: the child came up after the stop, once its delegation ended). With no child
       * up at the stop, writes the terminal record of a delegation canceled without one.
       */
      let rowLeft = false;
      const closeAbandoned = (late: boolean): void => {
        const row = launched as { readonly delegation_id: string; readonly child_session_id: string | null } | null;
        // No child up at the stop: the delegation ends canceled without one, as a graceful cancel's does.
        if (row === null) {
          if (!late) terminal({ status: 'canceled', answer: null, reason: PARENT_ENDED_DETAIL, delegation_id: null, child_session_id: null });
          return;
        }
        if (rowLeft || !session.delegations.has(row.delegation_id)) return;
        if (!late && env.canceledRows !== undefined) {
          rowLeft = true;
          env.canceledRows.push({ delegation_id: row.delegation_id, capsule: target, version, child_session_id: row.child_session_id, startedMs });
          return;
        }
        if (session.delegations.finish(row.delegation_id) !== null) {
          terminal({ status: 'canceled', answer: null, reason: CANCELED_ROW_REASON, delegation_id: row.delegation_id, child_session_id: row.child_session_id });
        }
      };
      const logic = delegationMachine.provide({
        actors: {
          plane: fromCallback<PlaneRequest, DelegationInput>(({ sendBack, receive }) => {
            let over = false;
            const report = (event: DelegationReport): void => {
              if (!over) sendBack(event);
            };
            receive(() => {
              canceled = true;
              (delegation as Delegation | null)?.cancel();
            });
            void (async (): Promise<void> => {
              if (!session.hasRecords) return report({ type: 'DELEGATION.ENDED', outcome: noChild('failed', noRecordsDirectory(name)) });
              // The delegation plane (its JSON-RPC client, the child's work folder and snapshot) is
              // loaded by the first capsule step, not by every plan (startup).
              const [resolved, { delegationTimeoutSecs, newDelegationId, startDelegation }, { snapshotGranted }] = await Promise.all([
                resolveCapsule({ capsule: name, version, spawnAllow: env.spawnAllow, capsulesDir: env.capsulesDir }),
                import('../delegation/plane.js'),
                import('../delegation/snapshot.js'),
              ]);
              if (!resolved.ok) return report({ type: 'DELEGATION.ENDED', outcome: noChild(resolved.refusal.status, resolved.refusal.reason) });
              // The id is minted before the launch and logged with the approval: a child ended while it
              // is still starting (a cancel) is then linked to its records all the same.
              const delegationId = newDelegationId();
              report({ type: 'DELEGATION.APPROVED', delegationId });
              if (canceled || abandoned || run.stopped) return report({ type: 'DELEGATION.ENDED', outcome: noChild('canceled', PARENT_ENDED_DETAIL) });
              let up = false;
              delegation = startDelegation({
                session,
                delegationId,
                capsule: resolved.capsule,
                task: task.text,
                owner: { kind: 'attempt', run: env.runId, step: step.id, attempt: run.attempt },
                parentEnvAllow: env.envAllow,
                timeoutSecs: delegationTimeoutSecs(env.delegationDeadlineSecs),
                deadlineMs: env.deadlineMs ?? null,
                snapshot: snapshotGranted(env.spawnSnapshot, name, target),
                capsulesDir: env.capsulesDir,
                onLaunched: (child) => {
                  up = true;
                  launched = { delegation_id: child.delegation_id, child_session_id: child.child_session_id };
                  trackTree(run, child.tree);
                  // Live from the moment the child is up (`docs/cancel.md#live-delegations`), before it is handed its task.
                  session.delegations.register(child.delegation_id, {
                    workdir: child.workdir,
                    capsule: child.capsule,
                    version: child.version,
                    child_session_id: child.child_session_id,
                    child_workdir: child.child_workdir,
                    started: startedMs,
                  });
                  session.trace.write('delegation_start', session.node, {
                    delegation_id: child.delegation_id,
                    capsule: child.capsule,
                    version: child.version,
                    child_session_id: child.child_session_id,
                    child_workdir: child.child_workdir,
                    deadline_ms: child.deadline_ms,
                    ...(child.workdir_snapshot !== null ? { workdir_snapshot: child.workdir_snapshot } : {}),
                  });
                  report({ type: 'DELEGATION.LAUNCHED', delegationId: child.delegation_id, childSessionId: child.child_session_id });
                },
              });
              if (canceled) delegation.cancel();
              const result = await delegation.result;
              // A child that came up after the stop (its answer to session.info was already on its way): nobody else closes its row.
              if (abandoned) return closeAbandoned(true);
              // A child that never came up ends the delegation at once; otherwise the child has been ended and exited.
              if (!up) return report({ type: 'DELEGATION.ENDED', outcome: result });
              report({ type: 'DELEGATION.ANSWERED', outcome: result });
              report({ type: 'DELEGATION.ENDED', outcome: result });
            })().catch((error: unknown) => report({ type: 'DELEGATION.ENDED', outcome: noChild('failed', messageOf(error)) }));
            return () => {
              over = true;
            };
          }),
        },
      });
      // In the session's event log beside the plan (a root of its own: `capsule replay` replays it, `capsule inspect` nests it under its step).
      // `step` names the step's actor (`step:<step>`): its id, or its tag when the session tagged it (`a~2`).
      const stepActor = run.input.step.actorId?.replace(/^step:/, '') ?? step.id;
      const actor = createActor(logic, { input: { capsule: name, task: task.text, step: stepActor, attempt: run.attempt }, ...(session.inspect ? { inspect: session.inspect } : {}) });
      machine = actor;
      actor.subscribe({
        complete: () => {
          const snapshot = actor.getSnapshot();
          if (snapshot.status !== 'done') {
            // Stopped, not done: the step was stopped (a forced cancel) while the delegation ran; the
            // machine has no outcome. A child that is up still holds its row, closed as canceled.
            closeAbandoned(false);
            return run.fail(CANCEL_CAPSULE_STEP);
          }
          const result = snapshot.output as DelegationOutcome;
          if (result.status === 'canceled') {
            // One writer per row: the task that was canceled closes it after its task_canceled.
            if (result.delegation_id !== null) env.canceledRows?.push({ delegation_id: result.delegation_id, capsule: target, version, child_session_id: result.child_session_id, startedMs });
            else terminal(result);
            return run.fail(CANCEL_CAPSULE_STEP);
          }
          // The row is the step's when it still holds it (or there never was one): the step writes the record.
          if (result.delegation_id === null || session.delegations.finish(result.delegation_id) !== null) terminal(result);
          if (result.status === 'completed') run.finish({ status: 'success', output: result.answer ?? '', error: null });
          else run.fail(result.reason ?? `capsule step '${name}' failed`);
        },
        error: (error: unknown) => run.crash(error),
      });
      actor.start();
      // A cancel that came before the machine existed (between the attempt's start and its dispatch).
      if (canceled) actor.send({ type: 'CANCEL' });
    });
    return {
      tree: (): ContainedProcess | null => {
        // The step was stopped (a forced cancel): the plane ends the child, even one still starting.
        abandoned = true;
        (delegation as Delegation | null)?.cancel();
        (machine as AnyActorRef | null)?.stop();
        return (delegation as Delegation | null)?.tree() ?? null;
      },
      // A graceful cancel ends a delegation's child (`docs/cancel.md#during-a-wave`).
      onCancel: () => {
        canceled = true;
        (machine as AnyActorRef | null)?.send({ type: 'CANCEL' });
      },
    };
  });
}

/** The reason a canceled delegation's terminal record gives (`docs/cancel.md#one-writer-per-row`: the parent's cancel, child-side detail). */
const CANCELED_ROW_REASON = `${PARENT_ENDED_DETAIL}: the task running the plan was cancelled`;

/**
 * Closes the rows a canceled run's delegations left (after the task's `task_canceled`): each row
 * still live is taken out of the session's live delegations and its terminal `delegation` record
 * written, outcome `canceled`, reason {@link CANCEL_CAPSULE_STEP}'s child-side detail.
 */
export function closeCanceledRows(session: Session, rows: CanceledRow[]): void {
  for (const row of rows.splice(0)) {
    if (session.delegations.finish(row.delegation_id) === null) continue;
    session.trace.write('delegation', session.node, {
      capsule: row.capsule,
      version: row.version,
      delegation_id: row.delegation_id,
      child_session_id: row.child_session_id,
      duration_ms: Math.max(0, Math.round(session.time.monotonicMs() - row.startedMs)),
      outcome: 'canceled',
      reason: CANCELED_ROW_REASON,
    });
  }
}
