/**
 * The scale-out options of the commands that coordinate (`capsule run`, `capsule serve`,
 * `capsule mcp`) and of `capsule worker`, and the coordinator a coordinating command opens with
 * them (docs/scale-out.md): one list and one start-up for every door.
 */
import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { RemoteAttempts } from '../runtime/attempts/remote.js';
import { parsePositiveInteger } from './program.js';

/** The scale-out options of a coordinating command, as commander parses them. */
export interface ScaleOutOptions {
  /** Run shell steps and command tools on `capsule worker`s through the Redis at this URL (docs/scale-out.md). */
  readonly redis?: string;
  /** The scale-out shared key's file (else `$CAPSULE_SCALE_OUT_KEY`). */
  readonly keyFile?: string;
  /** Seconds a worker's lock on a step lasts unless renewed: a lost worker's step is re-dispatched after it. */
  readonly lockDuration?: number;
  /** Seconds Redis may be out of reach mid-run before the steps waiting on it fail. */
  readonly redisTimeout?: number;
}

/**
 * Declares the scale-out options on `command`: a coordinator's `--redis` (what it runs there:
 * `redisHelp`), `--key-file`, `--lock-duration` and `--redis-timeout`; a worker's `--redis` and
 * `--key-file` alone (its Redis may also come from `$CAPSULE_REDIS_URL`, src/cli/worker.ts).
 */
export function withScaleOutOptions(command: Command, redisHelp: string, side: 'coordinator' | 'worker' = 'coordinator'): Command {
  command.option('--redis <url>', redisHelp);
  if (side === 'worker') return command.option('--key-file <file>', 'the key jobs are signed with, shared with the coordinators (default: $CAPSULE_SCALE_OUT_KEY)');
  return command
    .option('--key-file <file>', 'with --redis: the key jobs are signed with, shared with the workers (default: $CAPSULE_SCALE_OUT_KEY)')
    .option('--lock-duration <secs>', "with --redis: seconds a worker's lock on a step lasts unless renewed; a lost worker's step runs elsewhere after it (default 30)", parsePositiveInteger)
    .option('--redis-timeout <secs>', 'with --redis: seconds Redis may be out of reach mid-run before the steps waiting on it fail (default 30)', parsePositiveInteger);
}

/**
 * The usage error of a scale-out option given without `--redis`, or null: `usedFor` says what the
 * option is for in the command's words (`a run on workers`, `plans run on workers`).
 */
export function scaleOutWithoutRedis(options: ScaleOutOptions, usedFor: string): string | null {
  if (options.redis !== undefined) return null;
  const flag = options.keyFile !== undefined ? '--key-file' : options.lockDuration !== undefined ? '--lock-duration' : options.redisTimeout !== undefined ? '--redis-timeout' : null;
  return flag !== null ? `${flag} is for ${usedFor}: it needs --redis URL` : null;
}

/**
 * What hides the scale-out key file from the steps, as the records key is
 * (docs/security.md#what-a-step-gets): a session's `hiddenFiles` naming it when the command uses
 * the key (`used`) and it comes from `--key-file`; nothing else (`$CAPSULE_SCALE_OUT_KEY` is no file).
 */
export function hiddenKeyFile(options: Pick<ScaleOutOptions, 'keyFile'>, used: boolean): { readonly hiddenFiles?: readonly string[] } {
  return used && options.keyFile !== undefined ? { hiddenFiles: [resolve(options.keyFile)] } : {};
}

/**
 * Opens the coordinator of the session `sessionId` (its queue is named after it, so it opens
 * before the session) with `--redis`; null without it. The scale-out code is loaded with `--redis`
 * alone. @throws when Redis is out of reach or there is no shared key (the command's usage error).
 */
export async function openScaleOut(
  options: ScaleOutOptions,
  sessionId: string,
  onNotice: (line: string) => void,
  onStarted?: (stepId: string, worker: { readonly name: string; readonly host: string }) => void,
): Promise<(RemoteAttempts & { close(): Promise<void> }) | null> {
  if (options.redis === undefined) return null;
  const { Coordinator } = await import('../scale-out/coordinator.js');
  const { sharedKey } = await import('../scale-out/job.js');
  return Coordinator.open({
    redis: options.redis,
    sessionId,
    key: sharedKey(options.keyFile),
    ...(options.lockDuration !== undefined ? { lockDurationMs: options.lockDuration * 1000 } : {}),
    ...(options.redisTimeout !== undefined ? { unreachableMs: options.redisTimeout * 1000 } : {}),
    onNotice,
    ...(onStarted !== undefined ? { onStarted } : {}),
  });
}
