/**
 * The session a door of `capsule` opens for an agent harness — `capsule serve` (JSON-RPC,
 * src/cli/serve.ts) and `capsule mcp` (MCP, src/cli/mcp.ts): the same options, checks, manifest,
 * log, records, containment and `SessionApi`, so that both doors drive one kind of session
 * (docs/serve.md, docs/mcp.md). Each door then reads its own transport and ends the session with
 * the same teardown (`SessionApi.end`).
 */
import { fstatSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { findManifest, loadManifest, MANIFEST_FILE, type ManifestWarning } from '../manifest.js';
import { ERROR_CODES, isRuntimeError, messageOf } from '../errors.js';
import { newSessionId } from '../ids.js';
import { isDirectory } from '../records/directories.js';
import { RecordsDirInUseError, recordedSessionIn } from '../records/records-dir.js';
import { createLogger } from '../session/logger.js';
import { Session } from '../session/session.js';
import { SessionApi } from '../runtime/session-api.js';
import { parseNetworkOption } from './network-option.js';
import type { Command } from 'commander';
import { hiddenKeyFile, openScaleOut, scaleOutWithoutRedis, withScaleOutOptions, type ScaleOutOptions } from './scale-out-options.js';
import { collect, EXIT, exitCodeAfterLog, logFileRefusal, usageError, type ExitCode, type GlobalOptions } from './program.js';

/**
 * Options of a door (`capsule serve`, `capsule mcp`), as commander parses them; with `redis`, the
 * session's plans run their shell steps and command tools on `capsule worker`s (docs/scale-out.md#sessions-of-serve-and-mcp).
 */
export interface DoorOptions extends GlobalOptions, ScaleOutOptions {
  readonly manifest?: string;
  readonly workdir?: string;
  readonly records?: string;
  readonly capsules?: string;
  readonly allow?: readonly string[];
  readonly network?: string;
  readonly resume?: string;
  readonly reap?: boolean;
  /** Keep the steps' scratch directory (HOME, TMPDIR) when the session ends (docs/records.md#scratch). */
  readonly keepScratch?: boolean;
}

/** Declares a door's options on its command (one list for both doors). */
export function withDoorOptions(command: Command): Command {
  command
    .option('--manifest <file>', 'capsule manifest (default: <workdir>/capsule.json when present)')
    .option('--workdir <dir>', 'directory commands run in (default: the current directory)')
    .option('--records <dir>', 'records directory (default: <workdir>/.capsule/records/<session_id>/)')
    .option('--capsules <dir>', 'capsule registry for capsule steps (default: <workdir>/capsules/)')
    .option('--allow <bin>', 'also allow this binary in shell.run and plan shell steps (repeatable)', collect)
    .option('--network <mode>', "the network of the session's commands and steps: host (the host's, the default) or session (a namespace of the session's own, loopback only; root): docs/containment.md#network")
    .option('--resume <records_dir>', 'account for what a prior session (killed outright) left behind, before taking requests (docs/resume.md)')
    .option('--reap', 'with --resume: stop the process trees the prior session left running (SIGTERM, SIGKILL after 2 s)')
    .option('--keep-scratch', "keep the steps' scratch directory (their HOME and TMPDIR) when the session ends");
  return withScaleOutOptions(command, "run the shell steps and command tools of the session's plans on capsule workers through this Redis (redis://[user:password@]host:port or rediss:// for TLS); shell.run and background commands stay here: docs/scale-out.md");
}

/** A door's session, opened. */
export interface OpenedDoor {
  readonly session: Session;
  readonly api: SessionApi;
  readonly log: Awaited<ReturnType<typeof createLogger>>;
  readonly logger: Awaited<ReturnType<typeof createLogger>>['logger'];
  readonly workdir: string;
  /** `--resume DIR`, resolved; the door runs `api.resume` before it reads its first request. */
  readonly resumeDir: string | undefined;
  /**
   * Ends the session's scale-out (`--redis`): its queue removed, its lease dropped, the workers
   * told. The door calls it after `api.end` (every plan settled); a no-op without `--redis`.
   */
  readonly closeScaleOut: () => Promise<void>;
}

/**
 * Opens the session of a door from its options, its shell calls loaded (its first `shell.run`
 * starts at once); or the exit code of a refusal (a usage error, a records directory in use),
 * its line already printed.
 */
export async function openDoorSession(options: DoorOptions, door: 'serve' | 'mcp'): Promise<OpenedDoor | ExitCode> {
  const workdir = resolve(options.workdir ?? process.cwd());
  const network = parseNetworkOption(options.network);
  if (network instanceof Error) return usageError(network.message);
  if (!isDirectory(workdir)) return usageError(`--workdir ${workdir} is not a directory`);
  if (options.reap === true && options.resume === undefined) return usageError('--reap needs --resume DIR: it stops what the resumed session left running');
  const withoutRedis = scaleOutWithoutRedis(options, 'plans run on workers');
  if (withoutRedis !== null) return usageError(withoutRedis);
  const resumeDir = options.resume !== undefined ? resolve(options.resume) : undefined;
  if (resumeDir !== undefined && options.records !== undefined && resolve(options.records) === resumeDir) {
    return usageError(`--records ${resumeDir} and --resume ${resumeDir} name the same directory: the resuming session writes its own records elsewhere`);
  }
  // Node reads a directory given as stdin (`capsule serve < /tmp`) as an input that ends at once,
  // with no error: the session would open and end with exit 0, as at a harness's end of input.
  if (stdinIsDirectory()) {
    process.stderr.write(`error: stdin cannot be read: it is a directory (EISDIR); give capsule ${door} its ${door === 'serve' ? 'JSON-RPC requests' : 'MCP messages'} on stdin (a pipe, a file)\n`);
    return EXIT.FAILED;
  }
  const source = findManifest(options.manifest, options.workdir);
  let manifest = null;
  let manifestDir: string | null = null;
  let manifestWarnings: readonly ManifestWarning[] = [];
  if (source.kind === 'file') {
    const loaded = await loadManifest(source.label);
    if (!loaded.ok) return usageError(loaded.error);
    manifest = loaded.manifest;
    manifestDir = loaded.dir;
    manifestWarnings = loaded.warnings;
  }
  let log: Awaited<ReturnType<typeof createLogger>>;
  try {
    log = await createLogger({ level: options.logLevel ?? 'info', ...(options.logFile !== undefined ? { file: resolve(options.logFile) } : {}) });
  } catch (error) {
    return usageError(logFileRefusal(resolve(options.logFile ?? ''), error));
  }
  const logger = log.logger;
  logger.info(source.kind === 'file' ? { manifest: source.path } : { manifest: null, looked: join(workdir, MANIFEST_FILE) }, 'manifest');
  // Unknown keys and settings that do nothing, as `capsule run` prints them (the log is the operator's channel here).
  for (const warning of manifestWarnings) logger.warn({ warning: warning.message, kind: warning.kind }, 'warning');
  const allow = options.allow ?? [];

  // Scale-out (docs/scale-out.md): one coordinator for the whole session, as `capsule run --redis` opens it.
  const sessionId = newSessionId();
  let coordinator: Awaited<ReturnType<typeof openScaleOut>> = null;
  try {
    coordinator = await openScaleOut(options, sessionId, (line) => logger.warn({ warning: line, kind: 'scale-out' }, 'warning'));
  } catch (error) {
    return exitCodeAfterLog(log, usageError(messageOf(error)));
  }
  const closeScaleOut = async (): Promise<void> => {
    await coordinator?.close();
  };

  let session: Session;
  try {
    if (options.records !== undefined) {
      const existing = recordedSessionIn(resolve(options.records));
      if (existing !== null) throw new RecordsDirInUseError(resolve(options.records), existing);
    }
    session = Session.open({
      sessionId,
      ...hiddenKeyFile(options, options.redis !== undefined),
      workdir,
      manifest,
      runtimeDir: manifestDir ?? workdir,
      logger,
      onWarning: (message) => logger.warn({ warning: message }, 'warning'),
      ...(options.records !== undefined ? { recordsDir: resolve(options.records), exclusiveRecords: true } : {}),
      ...(resumeDir !== undefined ? { resumeFrom: resumeDir } : {}),
      ...(network !== undefined ? { network } : {}),
      ...(options.keepScratch === true ? { keepScratch: true } : {}),
      background: {
        allow,
        // a door offers backgroundCommand whatever the manifest declares.
        toolOffered: true,
        door,
        onAbandonmentReport: (text) => void process.stderr.write(text),
      },
    });
  } catch (error) {
    await closeScaleOut();
    log.flush();
    if (isRuntimeError(error, ERROR_CODES.RECORDS_DIR_IN_USE)) return exitCodeAfterLog(log, usageError(error.message));
    process.stderr.write(`error: the session could not be opened: ${messageOf(error)}\n`);
    return exitCodeAfterLog(log, EXIT.FAILED);
  }

  // A harness that stopped reading stderr (EPIPE) must not crash the session before its sweep
  // and session_end: the abandonment report and the log are best effort there, as in `capsule run`.
  process.stderr.on('error', () => {});

  // The background commands are serve's from its first request (its first `shell.run` starts at
  // once, as every later one does): loaded now, while the session opens (`capsule run` never loads them).
  await session.background.load();

  const capsulesDir = resolve(options.capsules ?? join(workdir, 'capsules'));
  const api = new SessionApi(session, {
    capsulesDir,
    shellAllow: allow,
    ...(coordinator !== null ? { remote: coordinator } : {}),
    // plan.submit runs against the manifest loaded here (`--manifest FILE`), as `capsule run --manifest` does.
    manifest: { manifest, dir: manifestDir, source },
    // A delegated child runs its manifest's entry for `message/send`.
    entry: manifest?.entry !== undefined && manifestDir !== null ? { entry: manifest.entry, dir: manifestDir, manifestPath: source.kind === 'file' ? source.path : join(manifestDir, MANIFEST_FILE), envAllow: manifest.capabilities?.env?.allow ?? [], capsulesDir } : null,
  });
  return { session, api, log, logger, workdir, resumeDir, closeScaleOut };
}

/** Whether fd 0 is a directory (false when it cannot be stat'ed: reading it then says why). */
function stdinIsDirectory(): boolean {
  try {
    return fstatSync(0).isDirectory();
  } catch {
    return false;
  }
}
