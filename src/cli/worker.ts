/**
 * `capsule worker --redis URL` (docs/scale-out.md#running-workers, docs/cli.md#capsule-worker): a
 * long-lived process that runs the steps coordinators (`capsule run --redis URL`) put in Redis,
 * each in its own session on this machine under this worker's manifest and allow list. SIGTERM or
 * Ctrl-C: no new step is taken and the running ones finish; a second one ends them now.
 *
 * Each start is a session of its own, its records in a fresh directory under the records root
 * (`--records DIR`, default `<workdir>/.capsule/records/`), so that a restart (systemd's
 * `Restart=always`) never finds its directory taken; what an earlier start of a worker killed
 * outright left there is accounted for at once, as a run's `--resume --reap` would
 * (docs/exit-codes.md#capsule-worker).
 */
import type { Command } from 'commander';
import type { Redis } from 'ioredis';
import { hostname } from 'node:os';
import { resolve, join } from 'node:path';
import { existsSync, writeFileSync } from 'node:fs';
import { isRuntimeError, ERROR_CODES, messageOf } from '../errors.js';
import { newSessionId } from '../ids.js';
import { findManifest, loadManifest, MANIFEST_FILE, type Manifest } from '../manifest.js';
import { abandonedSessionWarning, findAbandonedSessions, markNoticed } from '../process/leftovers.js';
import { recordedSessionIn } from '../records/records-dir.js';
import { Session } from '../session/session.js';
import { releaseEarlySignals } from './early-signals.js';
import { collect, EXIT, parsePositiveInteger, usageError, type ExitCode } from './program.js';
import { isDirectory } from '../records/directories.js';
import { hiddenKeyFile, withScaleOutOptions } from './scale-out-options.js';

interface WorkerCommandOptions {
  readonly redis?: string;
  readonly concurrency?: number;
  readonly workdir?: string;
  readonly manifest?: string;
  readonly allow?: readonly string[];
  readonly name?: string;
  readonly keyFile?: string;
  readonly records?: string;
  readonly redisTimeout?: number;
  readonly runAs?: string;
}

/** The file in each of a worker's records directories that says it is a worker's (its leftovers are the next start's to account for). */
export const WORKER_MARK_FILE = 'worker.json';
/** How often the worker sweeps what dead coordinator sessions left in Redis (src/scale-out/sweep.ts). */
const SWEEP_EVERY_MS = 10_000;
/** How often a worker that lost Redis says it still waits for it. */
const STILL_WAITING_MS = 60_000;

export function registerWorker(program: Command): void {
  const worker = program
    .command('worker')
    .description("run the steps of capsule run --redis coordinators on this machine (docs/scale-out.md): each in a session of this worker's, under its own manifest and allow list");
  withScaleOutOptions(worker, 'the Redis the coordinators use: redis://[user:password@]host:port[/db], or rediss://… for TLS (default: $CAPSULE_REDIS_URL, which keeps a password off the command line)', 'worker')
    .option('--concurrency <n>', 'steps run at once (per coordinator session; default 1)', parsePositiveInteger)
    .option('--workdir <dir>', 'directory the steps run in (default: the current directory)')
    .option('--manifest <file>', "this worker's manifest: what its steps may run (default: <workdir>/capsule.json when present)")
    .option('--allow <bin>', 'also allow this binary in shell steps (repeatable)', collect)
    .option('--name <name>', 'the name on every process_start of its steps (default: <host>:<pid>)')
    .option('--records <dir>', "the root of this worker's records: each start writes to a fresh <dir>/<session_id>/ (default: <workdir>/.capsule/records/)")
    .option('--run-as <user>', "run every step as this unprivileged user (the worker must be root): a root step can read any file the worker can, --key-file aside (docs/scale-out.md#the-shared-key)")
    .option('--redis-timeout <secs>', 'seconds Redis may be out of reach before the worker gives up and exits 1 (default: it waits for Redis for ever)', parsePositiveInteger)
    .addHelpText('after', '\nExit codes: 0 stopped by SIGTERM/SIGINT; 1 failed while running (Redis out of reach past --redis-timeout, its records could not be written) or its session could not be opened (a forced containment or --run-as user that cannot be had); 2 refused at the start (usage, no key, Redis unreachable or refusing its password, a bad --workdir, --manifest or --records): docs/exit-codes.md#capsule-worker.')
    .action(async (options: WorkerCommandOptions) => {
      process.exitCode = await workerCommand(options);
    });
}

async function workerCommand(given: WorkerCommandOptions): Promise<ExitCode> {
  const redis = given.redis ?? process.env['CAPSULE_REDIS_URL'];
  if (redis === undefined || redis === '') return usageError('capsule worker needs the Redis its coordinators use: --redis URL or $CAPSULE_REDIS_URL (docs/scale-out.md#running-workers)');
  const options = { ...given, redis };
  const workdir = resolve(options.workdir ?? process.cwd());
  if (!isDirectory(workdir)) return usageError(`--workdir ${workdir} is not a directory`);
  const source = findManifest(options.manifest, options.workdir);
  let manifest: Manifest | null = null;
  let manifestDir: string | null = null;
  if (source.kind === 'file') {
    const loaded = await loadManifest(source.label);
    if (!loaded.ok) return usageError(loaded.error);
    manifest = loaded.manifest;
    manifestDir = loaded.dir;
  }
  const recordsRoot = resolve(options.records ?? join(workdir, '.capsule', 'records'));
  // A records root, not one session's directory: each start of the worker is a session of its own.
  const held = options.records !== undefined ? recordedSessionIn(recordsRoot) : null;
  if (held !== null)
    return usageError(`--records ${recordsRoot} holds the records of session ${held.sessionId ?? '?'} itself; a worker's --records is the root its sessions' directories go under (<dir>/<session_id>/): name a directory of its own`);
  const { sharedKey } = await import('../scale-out/job.js');
  const { redisOptions, redisUrlText, connectRedis, watchReach } = await import('../scale-out/redis.js');
  let key: Buffer;
  try {
    redisOptions(options.redis);
    key = sharedKey(options.keyFile);
  } catch (error) {
    return usageError(messageOf(error));
  }
  const name = options.name ?? `${hostname()}:${process.pid}`;
  const say = (line: string): void => void process.stderr.write(`worker ${name}: ${line}\n`);
  // Its own connection for the sweep and for watching Redis's reach (the worker's are BullMQ's); a clear refusal when Redis is not there.
  let watch: Redis;
  try {
    watch = await connectRedis(options.redis, `capsule-worker:${name}`);
  } catch (error) {
    return usageError(messageOf(error));
  }
  const sessionId = newSessionId();
  let session: Session;
  try {
    session = Session.open({
      workdir,
      sessionId,
      recordsDir: join(recordsRoot, sessionId),
      exclusiveRecords: true,
      ...hiddenKeyFile(options, true),
      manifest,
      runtimeDir: manifestDir ?? workdir,
      onWarning: (message) => say(`warning: ${message}`),
      pointLatest: false,
      // Its own earlier sessions are accounted for below rather than warned about.
      noticeAbandoned: false,
      ...(options.runAs !== undefined ? { runAs: options.runAs } : {}),
    });
  } catch (error) {
    watch.disconnect();
    if (isRuntimeError(error, ERROR_CODES.RECORDS_DIR_IN_USE)) return usageError(error.message);
    process.stderr.write(`error: the worker's session could not be opened: ${messageOf(error)}\n`);
    return EXIT.FAILED;
  }
  try {
    writeFileSync(join(session.recordsDir, WORKER_MARK_FILE), `${JSON.stringify({ name, host: hostname(), pid: process.pid })}\n`, { flag: 'wx' });
  } catch (error) {
    say(`warning: ${join(session.recordsDir, WORKER_MARK_FILE)} could not be written (${messageOf(error)}): a later start will not account for what this one leaves`);
  }
  await accountForLeftovers(session, recordsRoot, say);
  const manifestPath = source.kind === 'file' ? source.path : null;
  const allowed = [...(manifest?.capabilities?.shell?.allow ?? []), ...(options.allow ?? [])];
  if (allowed.length === 0)
    say(
      `warning: no binary is allowed (${manifestPath === null ? `no manifest: no --manifest and no ${join(workdir, MANIFEST_FILE)}` : `${manifestPath} has no capabilities.shell.allow`}, no --allow): every shell step will be refused; give it --manifest FILE or --allow BIN (docs/scale-out.md#running-workers)`,
    );
  const { ScaleOutWorker } = await import('../scale-out/worker.js');
  let worker: Awaited<ReturnType<typeof ScaleOutWorker.start>>;
  try {
    worker = await ScaleOutWorker.start({ redis: options.redis, key, session, concurrency: options.concurrency ?? 1, allow: options.allow ?? [], name, manifestPath, onNotice: say });
  } catch (error) {
    watch.disconnect();
    await session.end('error');
    return usageError(messageOf(error));
  }
  say(`ready (manifest: ${manifestPath ?? `none, no ${join(workdir, MANIFEST_FILE)}`}; records: ${session.recordsDir})`);

  let stops = 0;
  let gaveUp: string | null = null;
  let settle: () => void = () => {};
  const stopped = new Promise<void>((done) => (settle = done));
  // Told to stop: nothing new is taken and the running steps finish; told again: they are ended now.
  const onSignal = (): void => {
    stops++;
    if (stops === 1) {
      say('stopping: no new step is taken; the running ones finish (signal again to end them now)');
      void worker.close(false).then(settle);
    } else void worker.close(true).then(settle);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // A signal that came while the worker was loading counts as the first.
  if (releaseEarlySignals().length > 0) onSignal();

  // What dead coordinators left in Redis is swept now and then (docs/scale-out.md#the-coordinator-dies).
  const { sweepDeadSessions } = await import('../scale-out/sweep.js');
  let sweeping = false;
  const sweep = (): void => {
    if (sweeping || watch.status !== 'ready') return;
    sweeping = true;
    sweepDeadSessions(watch)
      .then((removed) => {
        for (const dead of removed) say(`removed what session ${dead} left in Redis (its queue): its coordinator's lease has been gone over a minute (the coordinator stopped renewing it: killed, frozen, or cut off from Redis)`);
      })
      .catch(() => {})
      .finally(() => (sweeping = false));
  };
  sweep();
  const sweeper = setInterval(sweep, SWEEP_EVERY_MS);
  // Redis out of reach: said, and waited for (for ever, or --redis-timeout); the running steps are ended by the lock rule meanwhile.
  let saidAt = 0;
  const url = redisUrlText(options.redis);
  const redisReach = watchReach(watch, {
    ignored: () => stops > 0,
    onDown: () => {
      saidAt = Date.now();
      say(
        `Redis at ${url} is out of reach: no step is taken, a running one is ended before its lock expires (docs/scale-out.md#a-partition); waiting for Redis${options.redisTimeout !== undefined ? ` at most ${options.redisTimeout} s (--redis-timeout)` : ''}`,
      );
    },
    onBack: (downMs) => say(`Redis at ${url} answers again after ${Math.round(downMs / 1000)} s`),
  });
  const reach = setInterval(() => {
    const downSince = redisReach.downSince;
    if (downSince === null || stops > 0) return;
    const down = Date.now() - downSince;
    if (options.redisTimeout !== undefined && down >= options.redisTimeout * 1000) {
      gaveUp = `Redis at ${url} was out of reach for ${options.redisTimeout} s (--redis-timeout): the worker stops`;
      stops = 2;
      void worker.close(true).then(settle);
    } else if (Date.now() - saidAt >= STILL_WAITING_MS) {
      saidAt = Date.now();
      say(`Redis at ${url} is still out of reach (${Math.round(down / 1000)} s)`);
    }
  }, 1000);

  await stopped;
  clearInterval(sweeper);
  clearInterval(reach);
  watch.disconnect();
  const failure = gaveUp ?? (session.recordsFailure !== null ? `the worker's records are incomplete: ${messageOf(session.recordsFailure)}` : null);
  await session.end(failure === null ? 'ok' : 'error');
  if (failure !== null) {
    process.stderr.write(`error: worker ${name}: ${failure}\n`);
    return EXIT.FAILED;
  }
  say('stopped');
  return EXIT.OK;
}

/**
 * What earlier starts of a worker, killed outright, left in `recordsRoot`: accounted for now, as a
 * run's `--resume DIR --reap` would (docs/resume.md) — their live trees stopped, proven gone, and
 * said — since under systemd nobody would type the resume. Only a worker's sessions (marked by
 * {@link WORKER_MARK_FILE}) are; another session killed there (a local `capsule run` in the same
 * workdir) is only warned about, as a run warns, and left to its user.
 */
async function accountForLeftovers(session: Session, recordsRoot: string, say: (line: string) => void): Promise<void> {
  const abandoned = findAbandonedSessions(recordsRoot, { exclude: session.id });
  if (abandoned.length === 0) return;
  const { resumeSession, describeResume } = await import('../reconcile/resume.js');
  for (const found of abandoned) {
    if (!existsSync(join(found.recordsDir, WORKER_MARK_FILE))) {
      say(`warning: ${abandonedSessionWarning(found)}`);
      continue;
    }
    // Marked as noticed first: no later session (a run in this workdir) warns about it again.
    if (!markNoticed(found.recordsDir, session.id, found.processes, Date.now())) continue;
    try {
      const outcome = await resumeSession(session, found.recordsDir, { reap: true, warn: (line) => say(line) });
      for (const line of describeResume(outcome)) say(line);
    } catch (error) {
      say(`resume: ${found.recordsDir} could not be accounted for: ${messageOf(error)}`);
    }
  }
}
