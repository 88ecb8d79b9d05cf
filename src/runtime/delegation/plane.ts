/**
 * The local delegation plane (`docs/delegation.md`: no `mur-roost` daemon, the parent runtime
 * launches the child itself). One {@link Delegation} is one child
 * capsule started as a separate `capsule serve` process, contained like any other command (its
 * tree is owned by the attempt that delegates), handed one task text over its stdio as JSON-RPC
 * (`session.info`, `message/send`, `tasks/get` every {@link POLL_INTERVAL_MS}), and waited for:
 * until its task is terminal (`completed` / `failed`), the bound expires (`timed_out`, the child is
 * stopped), the child dies without an answer (`failed`; its completion is `crashed`), or the
 * delegation is canceled (`canceled`; the child is ended and proven gone).
 *
 * Layout (docs/records.md): the child's records directory is `<records>/children/<dlg_id>/` (its
 * `completion.json` is there) and its work folder `<records>/children/<dlg_id>.work/`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { JSONRPCClient, type JSONRPCResponse } from 'json-rpc-2.0';
import { PARENT_ENDED_DETAIL } from '../../../machines/messages.js';
import { uuidV7Simple } from '../../ids.js';
import { buildShellEnv } from '../../executors/environment.js';
import { CONTAINMENT_ENV, ISOLATION_ENV, PRIVILEGED_STEPS_ENV, type ContainedProcess } from '../../process/containment.js';
import { cliProgram } from '../../process/programs.js';
import { reap, type RecordedTree } from '../../process/reap.js';
import { isRecordOf, readTrace } from '../../records/trace-reader.js';
import { keyDir, KEY_DIR_ENV } from '../../records/key-dir.js';
import { RecordProver } from '../../records/record-proof.js';
import type { Owner } from '../../process/owner.js';
import { systemClock, timeoutAt } from '../../session/clock.js';
import type { Session } from '../../session/session.js';
import { DELEGATION_ENV, type ChildTask } from './protocol.js';
import type { RegisteredCapsule } from './registry.js';
import { copyWorkdir, type WorkdirSnapshot } from './snapshot.js';
import { messageOf } from '../../errors.js';

/** Default bound on one delegation, seconds (`docs/delegation.md#the-bound-and-the-inherited-deadline`; = `lifecycle.delegation_deadline_secs`'s default). */
export const DEFAULT_DELEGATION_TIMEOUT_SECS = 600;

/** Environment variables overriding the bound (ours first, then the original's), when they hold a positive whole number of seconds. */
export const DELEGATION_TIMEOUT_ENV = ['CAPSULE_DELEGATION_TIMEOUT_SECS', 'MURMUR_DELEGATION_TIMEOUT_SECS'] as const;

/** Milliseconds between two `tasks/get` polls (`docs/delegation.md#one-delegation`). */
export const POLL_INTERVAL_MS = 500;

/** Cap of an answer or explanation text, bytes (`docs/delegation.md#one-delegation`), cut at a character boundary. */
export const DELEGATION_TEXT_CAP_BYTES = 65_536;

/** Marker appended to a cut answer or explanation. */
export const CUT_MARKER = ' […]';

/** Milliseconds a child gets to come up and say who it is (`session.info`). */
export const CHILD_START_TIMEOUT_MS = 30_000;

/** Milliseconds between SIGTERM and SIGKILL when a child is ended. */
export const CHILD_KILL_GRACE_MS = 2000;

/** Detail of a completion the launcher writes for a child the parent ended (`docs/cancel.md#one-writer-per-row`). */
export { PARENT_ENDED_DETAIL };

/** Plane status of one delegation (`docs/delegation.md#statuses`). */
export type DelegationStatus = 'completed' | 'failed' | 'timed_out' | 'refused' | 'canceled';

/** How one delegation ended. `answer` for `completed`, `reason` otherwise. */
export interface DelegationResult {
  readonly status: DelegationStatus;
  readonly answer: string | null;
  readonly reason: string | null;
  /** Null when no child was launched. */
  readonly delegation_id: string | null;
  readonly child_session_id: string | null;
}

/** What a child is when it is up (the `delegation_start` record's fields and the live-delegation entry). */
export interface LaunchedChild {
  readonly delegation_id: string;
  readonly capsule: string;
  readonly version: string;
  readonly child_session_id: string;
  /** The child's records directory, absolute. */
  readonly records_dir: string;
  /** The child's work folder, absolute. */
  readonly workdir: string;
  /** The work folder relative to the parent's workdir (`/` separators), or absolute when outside it. */
  readonly child_workdir: string;
  /** Epoch ms by which this delegation ends: the earlier of its bound (from the moment the child is up) and the inherited deadline. */
  readonly deadline_ms: number;
  /** What was copied into the work folder (`capabilities.spawn.workdir_snapshot`), or null when nothing was. */
  readonly workdir_snapshot: WorkdirSnapshot | null;
  readonly tree: ContainedProcess;
}

/** A fresh delegation id, `dlg_` + uuid v7 (simple form): it names the child's directories under `children/`. */
export function newDelegationId(): string {
  return `dlg_${uuidV7Simple()}`;
}

/** What {@link startDelegation} needs. */
export interface DelegationRequest {
  readonly session: Session;
  /**
   * The id the child is started under ({@link newDelegationId}; a fresh one when absent). The
   * caller mints it first when it must name the child before the child is up (the event log's
   * `DELEGATION.APPROVED`, so `capsule inspect` finds a child ended while it was starting).
   */
  readonly delegationId?: string;
  readonly capsule: RegisteredCapsule;
  readonly task: string;
  /** Owner of the child's process tree (the attempt that delegates). */
  readonly owner: Owner;
  /** The parent's `capabilities.env.allow` (the child gets the names both declare, `docs/delegation.md#the-childs-environment`). */
  readonly parentEnvAllow: readonly string[];
  /** The bound, seconds, counted from the moment the child is up (its start has {@link CHILD_START_TIMEOUT_MS}). */
  readonly timeoutSecs: number;
  /**
   * The deadline the delegating session inherited (epoch ms), or null (`docs/delegation.md#the-bound-and-the-inherited-deadline`): the
   * delegation ends by it whatever its own bound, and the child's task inherits the earlier of
   * the two, so a grandchild ends by it too.
   */
  readonly deadlineMs?: number | null;
  /** Start the child with a copy of the parent's work folder (`capabilities.spawn.workdir_snapshot`, `docs/delegation.md#workdir-snapshots`). */
  readonly snapshot?: boolean;
  /** The registry directory (the child's own capsule steps resolve there too). */
  readonly capsulesDir: string;
  /** Called once the child is up, before it is handed its task. */
  readonly onLaunched?: (child: LaunchedChild) => void;
}

/** The bound of one delegation (`docs/delegation.md#the-bound-and-the-inherited-deadline`): a positive whole number in an override variable, else the manifest's `lifecycle.delegation_deadline_secs`, else 600. */
export function delegationTimeoutSecs(manifestSecs: number | undefined, env: Readonly<Record<string, string | undefined>> = process.env): number {
  for (const name of DELEGATION_TIMEOUT_ENV) {
    const text = env[name]?.trim();
    if (text !== undefined && /^[0-9]+$/.test(text) && Number(text) > 0) return Number(text);
  }
  return manifestSecs ?? DEFAULT_DELEGATION_TIMEOUT_SECS;
}

/** `text` cut to {@link DELEGATION_TEXT_CAP_BYTES} at a character boundary, with {@link CUT_MARKER} when cut. */
export function capDelegationText(text: string): string {
  if (Buffer.byteLength(text, 'utf8') <= DELEGATION_TEXT_CAP_BYTES) return text;
  let bytes = 0;
  let end = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char, 'utf8');
    if (bytes + size > DELEGATION_TEXT_CAP_BYTES) break;
    bytes += size;
    end += char.length;
  }
  return `${text.slice(0, end)}${CUT_MARKER}`;
}

/** The `capsule` CLI a child is started with: the built one of this package (`dist/bundle/capsule.js`, src/process/programs.ts). */
export function capsuleCliPath(): string {
  return cliProgram();
}

/** One running delegation: its result, and the cancel door. */
export interface Delegation {
  readonly result: Promise<DelegationResult>;
  /** The child's tree once it was started (ATTEMPT.END ends it), else null. */
  tree(): ContainedProcess | null;
  /** Ends the child (a cancel of the delegating task): the result becomes `canceled` once its tree is proven gone. */
  cancel(): void;
}

/** The scratch directory a child session whose records are `childRecords` uses (`Session.scratchDir`: `.<name>.scratch` beside its records). */
export function childScratchDir(childRecords: string): string {
  return join(dirname(childRecords), `.${basename(childRecords)}.scratch`);
}

/**
 * The process trees a child capsule's own trace says it started (`process_start`), for ending
 * what a child killed outright left: on the process-group backend without a PID namespace its
 * steps lead process groups of their own, which the child's death does not end. Each is believed
 * only as `reap` believes a dead session's records (pid and start time, or live members of its
 * group that started no earlier than its leader while it still holds the group's number, none
 * older than the child itself).
 */
function recordedChildTrees(childRecords: string): { sessionId: string | null; trees: RecordedTree[] } {
  const { records } = readTrace(childRecords);
  // The child's steps can write its records: only what its runtime signed is believed (src/records/record-proof.ts).
  const prover = new RecordProver(childRecords);
  let sessionId: string | null = null;
  let proven = false;
  const trees: RecordedTree[] = [];
  for (const record of records) {
    if (isRecordOf(record, 'session_start')) {
      if (sessionId !== null) continue;
      sessionId = record.session_id;
      proven = prover.prove(record).proven;
    } else if (isRecordOf(record, 'process_start') && proven && sessionId !== null && prover.prove(record, sessionId).proven) {
      trees.push({ pid: record.pid, startTime: record.pid_start_time ?? null, pgid: record.pgid ?? null, cgroup: record.cgroup ?? null, pidNamespace: record.pid_namespace === true });
    }
  }
  return { sessionId, trees };
}

/** Starts one delegation. Never throws: every failure is a result. */
export function startDelegation(request: DelegationRequest): Delegation {
  let tree: ContainedProcess | null = null;
  let cancelRequested = false;
  let onCancel: () => void = () => {};
  const result = delegate(request, (t) => (tree = t), (handler) => {
    onCancel = handler;
    if (cancelRequested) handler();
  });
  return {
    result,
    tree: () => tree,
    cancel: () => {
      if (cancelRequested) return;
      cancelRequested = true;
      onCancel();
    },
  };
}

async function delegate(request: DelegationRequest, setTree: (tree: ContainedProcess) => void, setCancel: (handler: () => void) => void): Promise<DelegationResult> {
  const { session, capsule } = request;
  const none = (status: DelegationStatus, reason: string, ids: Partial<Pick<DelegationResult, 'delegation_id' | 'child_session_id'>> = {}): DelegationResult => ({
    status,
    answer: null,
    reason: capDelegationText(reason),
    delegation_id: ids.delegation_id ?? null,
    child_session_id: ids.child_session_id ?? null,
  });
  const delegationId = request.delegationId ?? newDelegationId();
  const childRecords = join(session.recordsDir, 'children', delegationId);
  const childWork = join(session.recordsDir, 'children', `${delegationId}.work`);
  // The child session's scratch directory (HOME, TMPDIR of its steps), where its Session puts it.
  const childScratch = childScratchDir(childRecords);
  const started = Date.now();
  try {
    mkdirSync(childRecords, { recursive: true, mode: 0o700 });
    mkdirSync(childWork, { recursive: true, mode: 0o700 });
    mkdirSync(childScratch, { recursive: true, mode: 0o700 });
  } catch (error) {
    return none('failed', `capsule '${capsule.name}' was not started: its directories under ${join(session.recordsDir, 'children')} cannot be created (${messageOf(error)})`);
  }
  // Never the runtime's own trees: the records (the child's own folders are in them), the scratch directory, <workdir>/.capsule/, the step cache's store.
  const snapshot = request.snapshot === true ? copyWorkdir(session.workdir, childWork, session.runtimeOwnPaths) : null;
  const childAllow = capsule.manifest.capabilities?.env?.allow ?? [];
  let env: Record<string, string>;
  try {
    env = buildShellEnv({
      hostEnv: process.env,
      allow: childAllow.filter((name, i) => request.parentEnvAllow.includes(name) && childAllow.indexOf(name) === i),
      scratchDir: session.scratchDir,
      runtimeDir: session.runtimeDir,
      owner: session.containment.info.runAs,
    });
  } catch (error) {
    return none('failed', `capsule '${capsule.name}' was not started: ${messageOf(error)}`);
  }
  // The runtime-owned tail (`docs/delegation.md#the-childs-environment`): the child cannot override it.
  env[DELEGATION_ENV] = JSON.stringify({ session_id: session.id, delegation_id: delegationId, capsule: capsule.name, version: capsule.version });
  // The child is contained as its parent is (its own steps on the same backend and isolation).
  env[CONTAINMENT_ENV] = session.containment.info.backend;
  // `--keep-scratch` holds for the child's session too (docs/records.md#scratch).
  if (session.keepsScratch) env['CAPSULE_KEEP_SCRATCH'] = '1';
  env[ISOLATION_ENV] = session.containment.info.pidNamespace ? 'pid-namespace' : 'none';
  // Its steps are confined as the parent's are: its manifest cannot opt out where the parent did not.
  env[PRIVILEGED_STEPS_ENV] = session.containment.info.confinement.privilegedSteps ? '1' : '0';
  // The child signs its records with the user's key, where the parent reads it (its HOME is the steps' scratch directory).
  env[KEY_DIR_ENV] = keyDir();
  const child = session.containment.spawn({
    owner: request.owner,
    file: process.execPath,
    args: [capsuleCliPath(), 'serve', '--workdir', childWork, '--records', childRecords, '--manifest', capsule.manifestPath, '--capsules', request.capsulesDir],
    cwd: childWork,
    env,
    stdinPipe: true,
    collectOutput: false,
    // A runtime, not a step: it makes the namespaces and cgroups of its own steps, and confines them.
    privileged: true,
    // Steps' read-only records (with a PID namespace): the child sees the parent's records
    // read-only, as any step does, and may write only its own directories beneath them.
    writablePaths: [childRecords, childWork, childScratch],
  });
  setTree(child);
  if (child.identity === null || child.stdin === null || child.stdout === null) {
    const spawned = await child.done;
    return none('failed', `capsule '${capsule.name}' was not started: ${spawned.spawnError ?? 'its process could not be spawned'}`);
  }
  const stdin = child.stdin;
  let stderrTail = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderrTail = (stderrTail + chunk.toString('utf8')).slice(-2000);
  });
  const client = new JSONRPCClient((payload) => {
    if (!stdin.writable) throw new Error('the child capsule is gone');
    stdin.write(`${JSON.stringify(payload)}\n`);
  });
  const lines = createInterface({ input: child.stdout });
  lines.on('line', (line) => {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      return; // not ours to read: stdout carries only JSON-RPC
    }
    if (typeof message === 'object' && message !== null && 'id' in message && ('result' in message || 'error' in message)) client.receive(message as JSONRPCResponse);
  });

  // The three ways a wait ends besides an answer: the child's death, the bound, a cancel.
  let exited = false;
  const exit = child.done.then((done) => {
    exited = true;
    client.rejectAllPendingRequests('the child capsule exited');
    return done;
  });
  let settleOther: (why: 'timeout' | 'deadline' | 'canceled') => void = () => {};
  const other = new Promise<'timeout' | 'deadline' | 'canceled'>((resolveOther) => (settleOther = resolveOther));
  setCancel(() => settleOther('canceled'));
  // The inherited deadline runs from the start (the child's launch counts against it); the own bound from the moment the child is up.
  const inherited = request.deadlineMs ?? null;
  const timer = (ms: number, why: 'timeout' | 'deadline'): (() => void) => timeoutAt(systemClock, systemClock.monotonicMs() + ms, () => settleOther(why));
  const cancelDeadline = inherited === null ? null : timer(inherited - Date.now(), 'deadline');
  let cancelBound: (() => void) | null = null;

  let childSessionId: string | null = null;
  let launched: LaunchedChild | null = null;
  const ids = (): Partial<Pick<DelegationResult, 'delegation_id' | 'child_session_id'>> => ({ delegation_id: launched === null ? null : delegationId, child_session_id: childSessionId });

  const completion = (status: 'crashed' | 'terminated', detail: string): void => {
    try {
      writeFileSync(
        join(childRecords, 'completion.json'),
        `${JSON.stringify({ delegation_id: delegationId, capsule_name: capsule.name, capsule_version: capsule.version, session_id: childSessionId ?? '', status, workdir: childWork, duration_ms: Date.now() - started, detail: detail.slice(0, 2000), reported_by: 'launcher', delivered: false })}\n`,
      );
    } catch {
      // the records say it another way: the terminal `delegation` record
    }
  };
  // Where the child's tree is not all of it (process groups, no PID namespace: its steps lead
  // groups of their own), what its records say it started is ended too once the child is gone.
  const groupsOnly = session.containment.info.backend === 'process-group' && !session.containment.info.pidNamespace;
  const childStartTime = child.identity.startTime;
  const endLeftovers = async (): Promise<void> => {
    if (!groupsOnly) return;
    try {
      const recorded = recordedChildTrees(childRecords);
      if (recorded.trees.length === 0 || recorded.sessionId === null) return;
      await reap(recorded.trees, recorded.sessionId, CHILD_KILL_GRACE_MS, { notBefore: childStartTime >= 0 ? childStartTime : null });
    } catch {
      // best effort: the child's records may be unreadable; its groups are then reported by nobody
    }
  };
  const endChild = async (): Promise<void> => {
    stdin.end();
    await child.end(CHILD_KILL_GRACE_MS);
    await endLeftovers();
  };
  const crashed = async (): Promise<DelegationResult> => {
    // What is left of the tree goes first: a child still ending could otherwise write over the launcher's completion.
    await child.end(CHILD_KILL_GRACE_MS);
    await endLeftovers();
    const done = await exit;
    const status = done.signal !== null ? `signal ${done.signal}` : `exit code ${done.exitCode}`;
    completion('crashed', `${status}${stderrTail.trim() === '' ? '' : `: ${stderrTail.trim()}`}`);
    return none('failed', `capsule '${capsule.name}' stopped answering: its process ended (${status}) without completing its task`, ids());
  };

  type Step<T> = { kind: 'value'; value: T } | { kind: 'exit' } | { kind: 'timeout' } | { kind: 'deadline' } | { kind: 'canceled' } | { kind: 'error'; error: unknown };
  const race = <T>(work: PromiseLike<T>): Promise<Step<T>> =>
    Promise.race([
      Promise.resolve(work).then((value): Step<T> => ({ kind: 'value', value }), (error: unknown): Step<T> => (exited ? { kind: 'exit' } : { kind: 'error', error })),
      exit.then((): Step<T> => ({ kind: 'exit' })),
      other.then((why): Step<T> => ({ kind: why })),
    ]);
  const ended = async (step: Step<unknown>): Promise<DelegationResult> => {
    if (step.kind === 'exit') return crashed();
    if (step.kind === 'timeout') {
      await endChild();
      completion('terminated', `the delegation bound of ${request.timeoutSecs} s expired`);
      return none('timed_out', `capsule '${capsule.name}' did not answer within ${request.timeoutSecs} s and was stopped`, ids());
    }
    if (step.kind === 'deadline') {
      await endChild();
      completion('terminated', 'the deadline the delegating session inherited passed');
      return none('timed_out', `capsule '${capsule.name}' did not answer by the deadline this session inherited from its own parent (${new Date(inherited ?? 0).toISOString()}) and was stopped`, ids());
    }
    if (step.kind === 'canceled') {
      await endChild();
      completion('terminated', PARENT_ENDED_DETAIL);
      return none('canceled', PARENT_ENDED_DETAIL, ids());
    }
    // A request that failed because the child's end of the pipe is gone: the child died (its exit may still be draining).
    if (!stdin.writable || exited) return crashed();
    await endChild();
    const message = step.kind === 'error' ? messageOf(step.error) : 'no answer';
    return none('failed', `capsule '${capsule.name}' stopped answering: ${message}`, ids());
  };

  try {
    const info = await race(client.timeout(CHILD_START_TIMEOUT_MS).request('session.info', {}));
    if (info.kind !== 'value') return await ended(info);
    childSessionId = String((info.value as { session_id?: unknown }).session_id ?? '');
    // Up: the own bound starts now; the child inherits the earlier of it and the inherited deadline.
    cancelBound = timer(request.timeoutSecs * 1000, 'timeout');
    const deadlineMs = Math.min(Date.now() + request.timeoutSecs * 1000, inherited ?? Number.POSITIVE_INFINITY);
    const relativeWork = relative(resolve(session.workdir), childWork);
    launched = {
      delegation_id: delegationId,
      capsule: capsule.name,
      version: capsule.version,
      child_session_id: childSessionId,
      records_dir: childRecords,
      workdir: childWork,
      child_workdir: relativeWork.startsWith('..') ? childWork : relativeWork.split('\\').join('/'),
      deadline_ms: deadlineMs,
      workdir_snapshot: snapshot,
      tree: child,
    };
    request.onLaunched?.(launched);

    const sent = await race(
      client.request('message/send', { message: { role: 'user', messageId: `msg_${delegationId}`, parts: [{ text: request.task }] }, metadata: { deadline_ms: deadlineMs } }),
    );
    if (sent.kind !== 'value') return await ended(sent);
    const taskId = (sent.value as ChildTask).id;
    for (;;) {
      const polled = await race(client.request('tasks/get', { id: taskId }));
      if (polled.kind !== 'value') return await ended(polled);
      const task = polled.value as ChildTask;
      const state = task.status?.state as string | undefined;
      if (state === 'completed') {
        const answer = task.artifacts?.[0]?.parts?.[0]?.text ?? '';
        await endChild();
        return { status: 'completed', answer: capDelegationText(answer), reason: null, ...{ delegation_id: delegationId, child_session_id: childSessionId } };
      }
      if (state === 'failed' || state === 'rejected') {
        const text = task.status.message?.parts?.[0]?.text;
        await endChild();
        return none('failed', text !== undefined && text !== '' ? text : `the task delegated to capsule '${capsule.name}' failed`, ids());
      }
      if (state !== 'submitted' && state !== 'working' && state !== 'input-required') {
        await endChild();
        return none('failed', `capsule '${capsule.name}' reported the unknown task state '${String(state)}'`, ids());
      }
      const waited = await race(new Promise<void>((r) => setTimeout(r, POLL_INTERVAL_MS)));
      if (waited.kind !== 'value') return await ended(waited);
    }
  } finally {
    cancelBound?.();
    cancelDeadline?.();
    lines.close();
  }
}
