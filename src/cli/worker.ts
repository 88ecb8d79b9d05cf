/**
 * `capsule worker --redis URL` (docs/scale-out.md#running-workers, docs/cli.md#capsule-worker): a
 * long-lived process that runs the steps coordinators (`capsule run --redis URL`) put in Redis,
 * each in its own session on this machine under this worker's manifest and allow list. SIGTERM or
 * Ctrl-C: no new step is taken and the running ones finish; a second one ends them now.
 */
import type { Command } from 'commander';
import { hostname } from 'node:os';
import { resolve, join } from 'node:path';
import { statSync } from 'node:fs';
import { messageOf } from '../errors.js';
import { findManifest, loadManifest, MANIFEST_FILE } from '../manifest.js';
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
}

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
    .option('--records <dir>', "this worker's records directory (default: <workdir>/.capsule/records/<session_id>/)")
    .action(async (options: WorkerCommandOptions, command: Command) => {
      command.setOptionValue('exitCode', await workerCommand(options));
    });
}

async function workerCommand(given: WorkerCommandOptions): Promise<ExitCode> {
  const redis = given.redis ?? process.env['CAPSULE_REDIS_URL'];
  if (redis === undefined || redis === '') return usageError('capsule worker needs the Redis its coordinators use: --redis URL or $CAPSULE_REDIS_URL (docs/scale-out.md#running-workers)');
  const options = { ...given, redis };
  const workdir = resolve(options.workdir ?? process.cwd());
  if (!isDirectory(workdir)) return usageError(`--workdir ${workdir} is not a directory`);
  const source = findManifest(options.manifest, options.workdir);
  let manifest = null;
  let manifestDir: string | null = null;
  if (source.kind === 'file') {
    const loaded = await loadManifest(source.label);
    if (!loaded.ok) return usageError(loaded.error);
    manifest = loaded.manifest;
    manifestDir = loaded.dir;
  }
  const { sharedKey } = await import('../scale-out/job.js');
  const { redisOptions } = await import('../scale-out/redis.js');
  let key: Buffer;
  try {
    redisOptions(options.redis);
    key = sharedKey(options.keyFile);
  } catch (error) {
    return usageError(messageOf(error));
  }
  const name = options.name ?? `${hostname()}:${process.pid}`;
  const say = (line: string): void => void process.stderr.write(`worker ${name}: ${line}\n`);
  let session: Session;
  try {
    session = Session.open({
      workdir,
      ...hiddenKeyFile(options, true),
      manifest,
      runtimeDir: manifestDir ?? workdir,
      onWarning: (message) => say(`warning: ${message}`),
      pointLatest: false,
      ...(options.records !== undefined ? { recordsDir: resolve(options.records), exclusiveRecords: true } : {}),
    });
  } catch (error) {
    process.stderr.write(`error: the worker's session could not be opened: ${messageOf(error)}\n`);
    return EXIT.FAILED;
  }
  const { ScaleOutWorker } = await import('../scale-out/worker.js');
  let worker: Awaited<ReturnType<typeof ScaleOutWorker.start>>;
  try {
    worker = await ScaleOutWorker.start({ redis: options.redis, key, session, concurrency: options.concurrency ?? 1, allow: options.allow ?? [], name, onNotice: say });
  } catch (error) {
    await session.end('error');
    return usageError(messageOf(error));
  }
  say(`ready (manifest: ${source.kind === 'file' ? source.path : `none, no ${join(workdir, MANIFEST_FILE)}`}; records: ${session.recordsDir})`);
  // Told to stop: nothing new is taken and the running steps finish; told again: they are ended now.
  let stops = 0;
  const stopped = new Promise<void>((done) => {
    const onSignal = (): void => {
      stops++;
      if (stops === 1) {
        say('stopping: no new step is taken; the running ones finish (signal again to end them now)');
        void worker.close(false).then(done);
      } else void worker.close(true).then(done);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    // A signal that came while the worker was loading counts as the first.
    if (releaseEarlySignals().length > 0) onSignal();
  });
  await stopped;
  await session.end('ok');
  say('stopped');
  return EXIT.OK;
}
