/**
 * `capsule doctor` (docs/cli.md): what `capsule run` would find on this machine, before anything
 * runs — the Node version, the containment backend and why, the isolation available and why, the
 * records directory's writability, and what each allow-listed binary resolves to on the trusted
 * PATH. Nothing is started; the probe cgroup it may create is removed again.
 */
import { basename, dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { findManifest, loadManifest, MANIFEST_FILE } from '../manifest.js';
import { directoryProblem, nearestExisting } from '../records/directories.js';
import { removeCgroupTree } from '../process/cgroup-unit.js';
import { ContainmentError, detectContainment, type ContainmentInfo } from '../process/containment.js';
import { confinementTraceFields, describeConfinement } from '../process/spawn/confinement.js';
import { keyDir } from '../records/key-dir.js';
import { runtimeFiles } from '../runtime-files.js';
import { decideResourceBounds, describeResourceBounds, EVERY_LIMIT, hasBounds, resourceTraceFields, type ResourceBounds } from '../process/resources.js';
import type { ResourceLimits } from '../executors/resource-limit.js';
import { NetworkUnavailable, openSessionNetwork, type NetworkMode } from '../process/network.js';
import type { SessionConfinementFields } from '../records/trace-records.js';
import { stepPaths } from '../session/step-paths.js';
import { manifestCacheDir } from '../cache/cache-dir.js';
import { droppedPathWarning, resolveExecutable, trustedPath } from '../process/resolve-binary.js';
import { SPAWNER_ENV, spawnerWanted } from '../process/spawner/client.js';
import { collect, EXIT, usageError, type ExitCode } from './program.js';
import { parseNetworkOption } from './network-option.js';

/** Options of `capsule doctor`, as commander parses them. */
export interface DoctorCommandOptions {
  readonly manifest?: string;
  readonly workdir?: string;
  readonly records?: string;
  readonly allow?: readonly string[];
  readonly runAs?: string;
  readonly privilegedSteps?: boolean;
  readonly network?: string;
  /** Also check the Redis a worker or `run --redis` would use (docs/scale-out.md). */
  readonly redis?: string;
  readonly keyFile?: string;
  readonly json?: boolean;
}

/** Oldest Node the runtime supports (package.json `engines`). */
const MIN_NODE: readonly [number, number] = [20, 5];

/** What `capsule doctor --json` prints. */
export interface DoctorReport {
  readonly node: { readonly version: string; readonly ok: boolean };
  /**
   * The manifest read, found as `capsule run` finds it: `path` absolute, or null when there is
   * none, `looked` then naming where it was looked for (`<workdir>/capsule.json`).
   */
  readonly manifest: { readonly path: string } | { readonly path: null; readonly looked: string };
  /** The backend and isolation a run would get, or the refusal (a forced backend that cannot be had). */
  readonly containment:
    | { readonly ok: true; readonly backend: string; readonly reason: string; readonly cgroup_kill: boolean; readonly helper: string | null }
    | { readonly ok: false; readonly error: string };
  readonly isolation: { readonly pid_namespace: boolean; readonly reason: string; readonly run_as: string | null } | null;
  /** What a step gets (capabilities kept, no_new_privs, cgroup namespace, read-only /sys and records, hidden key): as `session_start.containment.confinement` would say it. */
  readonly confinement: SessionConfinementFields | null;
  /**
   * `capabilities.resources` (docs/shell-commands.md#resource-limits): how the declared ones would
   * be enforced (`declared`, as `session_start.containment.resources`; null when none are), and how
   * each one could be here (`here`).
   */
  readonly resources: { readonly declared: ReturnType<typeof resourceTraceFields> | null; readonly here: ReturnType<typeof resourceTraceFields> } | null;
  /**
   * The network a run's steps would get (docs/containment.md#network): `mode` as the manifest (or
   * `--network`) asks, default `host`; whether a session namespace can be made here, and why not.
   */
  readonly network: { readonly mode: NetworkMode; readonly session_available: boolean; readonly reason: string } | null;
  /** Whether shell steps start in the session's spawner process (docs/containment.md), and why. */
  readonly spawner: { readonly used: boolean; readonly reason: string };
  readonly records: { readonly dir: string; readonly writable: boolean; readonly detail: string };
  readonly path: { readonly dirs: readonly string[]; readonly dropped: readonly string[] };
  /** Each allow-list entry and the absolute path it resolves to (`null`: not found, with `error`). */
  readonly allow: readonly { readonly entry: string; readonly resolved: string | null; readonly error?: string }[];
  /** False when something would stop a run (old Node, an unwritable records dir, a refused containment). */
  readonly ok: boolean;
}

/** Registers `capsule doctor` on the program. */
export function registerDoctor(program: Command): void {
  program
    .command('doctor')
    .description('Show what `capsule run` would find here: Node, containment and isolation (and why), records dir, allow-list resolution.')
    .option('--manifest <file>', 'capsule manifest (default: <workdir>/capsule.json when present)')
    .option('--workdir <dir>', 'the workdir a run would use (default: the current directory)')
    .option('--records <dir>', 'the records directory a run would use (default: <workdir>/.capsule/records/)')
    .option('--allow <bin>', 'also check this binary, as `run --allow` (repeatable)', collect)
    .option('--run-as <user>', 'check running steps as this user, as `run --run-as`')
    .option('--privileged-steps', 'say what steps would get with `run --privileged-steps`')
    .option('--network <mode>', 'say what steps would get with `run --network MODE` (host or session)')
    .option('--redis <url>', 'also say what a capsule worker (or run --redis) would get from this Redis: whether it answers, its version, the sessions announced, the shared key')
    .option('--key-file <file>', 'with --redis: the shared key file to check (default: $CAPSULE_SCALE_OUT_KEY)')
    .option('--json', 'print the findings as one JSON object on stdout')
    .addHelpText('after', '\nExit codes: 0 a run could start here, 1 something would stop it, 2 usage error or bad manifest.')
    .action(async (options: DoctorCommandOptions) => {
      process.exitCode = await doctorCommand(options);
    });
}

/** Whether a run could create and write `dir` (`directoryProblem`: also refuses /proc and /sys), and why. */
function writability(dir: string): { writable: boolean; detail: string } {
  const problem = directoryProblem(dir);
  if (problem !== null) return { writable: false, detail: `not writable: ${problem.reason}` };
  const probe = nearestExisting(dir);
  return { writable: true, detail: probe === dir ? 'exists and is writable' : `will be created (${probe} is writable)` };
}

/** Runs `capsule doctor` and returns its exit code. */
export async function doctorCommand(options: DoctorCommandOptions): Promise<ExitCode> {
  const workdir = resolve(options.workdir ?? process.cwd());
  // Found as `capsule run` finds it: --manifest, else <workdir>/capsule.json when it exists.
  const manifest = findManifest(options.manifest, options.workdir);
  let allow: string[] = [];
  let resources: ResourceLimits | undefined;
  let networkMode: NetworkMode = 'host';
  let networkAllow: readonly string[] | null = null;
  let privilegedSteps: { privilegedSteps: true; privilegedStepsBy: string } | null = options.privilegedSteps === true ? { privilegedSteps: true, privilegedStepsBy: '--privileged-steps' } : null;
  const runtimeDir = manifest.kind === 'file' ? dirname(manifest.path) : workdir;
  let cacheDir = manifestCacheDir(null, runtimeDir);
  if (manifest.kind === 'file') {
    const loaded = await loadManifest(manifest.label);
    if (!loaded.ok) return usageError(loaded.error);
    cacheDir = manifestCacheDir(loaded.manifest, runtimeDir);
    allow = [...(loaded.manifest.capabilities?.shell?.allow ?? [])];
    resources = loaded.manifest.capabilities?.resources;
    const declared = loaded.manifest.capabilities?.network;
    networkMode = declared === undefined ? 'host' : typeof declared === 'string' ? declared : 'session';
    networkAllow = typeof declared === 'object' ? declared.allow : null;
    if (loaded.manifest.capabilities?.privileged_steps === true) privilegedSteps ??= { privilegedSteps: true, privilegedStepsBy: 'capabilities.privileged_steps of the manifest' };
  }
  const asked = parseNetworkOption(options.network);
  if (asked instanceof Error) return usageError(asked.message);
  if (asked !== undefined) networkMode = asked;
  const recordsDir = resolve(options.records ?? join(workdir, '.capsule', 'records'));
  // As a run's session would decide them (a run's records go to <records>/<session_id>/ by default).
  const paths = stepPaths({
    workdir,
    runtimeDir,
    recordsDir: options.records !== undefined ? recordsDir : join(recordsDir, 'ses_doctor'),
    scratchDir: options.records !== undefined ? join(dirname(recordsDir), `.${basename(recordsDir)}.scratch`) : join(recordsDir, '.ses_doctor.scratch'),
    keyDir: keyDir(),
    runtimeFiles: runtimeFiles(),
    cacheDir,
    createKeyDir: false,
  });
  allow.push(...(options.allow ?? []));

  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  const nodeOk = major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1]);

  let info: ContainmentInfo | null = null;
  let containmentError: string | null = null;
  let resourcesHere: ResourceBounds | null = null;
  let sessionNetwork: { available: boolean; reason: string } | null = null;
  try {
    info = detectContainment({
      sessionId: `doctor-${process.pid}-${Date.now()}`,
      probeOnly: true,
      runAs: options.runAs ?? null,
      ...(privilegedSteps ?? {}),
      readOnlyPaths: paths.readOnly,
      writablePaths: paths.writable,
      hiddenPaths: paths.hidden,
      pathNotes: paths.notes,
      ...(resources !== undefined ? { resources } : {}),
    });
    // Made and dropped at once: whether a session's own network can be had here, whatever is asked.
    try {
      openSessionNetwork('session', `doctor-${process.pid}-${Date.now()}`, info.helper, true, networkMode === 'session' ? networkAllow : null);
      sessionNetwork = { available: true, reason: 'each session can get a network namespace of its own (loopback only)' };
    } catch (error) {
      if (!(error instanceof NetworkUnavailable)) throw error;
      sessionNetwork = { available: false, reason: error.message };
    }
    resourcesHere = decideResourceBounds({ limits: EVERY_LIMIT, sessionCgroup: info.cgroup, helper: info.helper, runAs: info.runAs !== null, probeOnly: true });
  } catch (error) {
    if (!(error instanceof ContainmentError)) throw error;
    containmentError = error.message;
  } finally {
    if (info?.cgroup !== null && info?.cgroup !== undefined) removeCgroupTree(info.cgroup);
  }

  const records = { dir: recordsDir, ...writability(recordsDir) };
  const path = trustedPath(process.env['PATH']);
  const resolutions = allow.map((entry) => {
    const found = resolveExecutable(entry, path, workdir);
    return found.ok ? { entry, resolved: found.path } : { entry, resolved: null, error: found.code === 'EACCES' ? 'found, but not executable (EACCES)' : 'not found on the trusted PATH (ENOENT)' };
  });

  const spawnerUsed = spawnerWanted();
  const spawner = {
    used: spawnerUsed,
    reason: spawnerUsed
      ? 'shell steps start in the session\'s spawner process (a small process started once per session, contained with it)'
      : process.env[SPAWNER_ENV] === 'direct'
        ? `${SPAWNER_ENV}=direct: shell steps start from the runtime`
        : 'the spawner program is not built (run `npm run build`): shell steps start from the runtime',
  };
  const report: DoctorReport = {
    node: { version: process.version, ok: nodeOk },
    manifest: manifest.kind === 'file' ? { path: manifest.path } : { path: null, looked: (manifest.kind === 'none' ? manifest.looked : null) ?? join(workdir, MANIFEST_FILE) },
    containment:
      info !== null
        ? { ok: true, backend: info.backend, reason: info.reason, cgroup_kill: info.cgroupKill, helper: info.helper }
        : { ok: false, error: containmentError ?? 'unknown' },
    isolation: info === null ? null : { pid_namespace: info.pidNamespace, reason: info.isolationReason, run_as: info.runAs?.name ?? null },
    confinement: info === null ? null : confinementTraceFields(info.confinement),
    network: sessionNetwork === null ? null : { mode: networkMode, session_available: sessionNetwork.available, reason: sessionNetwork.reason },
    resources:
      info === null || resourcesHere === null
        ? null
        : { declared: hasBounds(info.resources) ? resourceTraceFields(info.resources) : null, here: resourceTraceFields(resourcesHere) },
    spawner,
    records,
    path: { dirs: path.dirs, dropped: path.dropped },
    allow: resolutions,
    ok: nodeOk && info !== null && records.writable && (networkMode === 'host' || sessionNetwork?.available === true),
  };

  // Scale-out (docs/scale-out.md): loaded with --redis alone.
  const scaleOut = options.redis !== undefined ? await (await import('../scale-out/check.js')).checkScaleOut(options.redis, options.keyFile) : null;
  const ok = report.ok && (scaleOut?.ok ?? true);
  if (options.json === true) {
    process.stdout.write(`${JSON.stringify(scaleOut === null ? report : { ...report, scale_out: scaleOut, ok }, null, 2)}\n`);
  } else {
    const lines = [
      `node: ${process.version}${nodeOk ? '' : ` (too old: capsule-runtime needs ${MIN_NODE.join('.')} or newer)`}`,
      // The same words as `capsule run`'s first line.
      report.manifest.path !== null ? `manifest: ${report.manifest.path}` : `manifest: none (there is no ${report.manifest.looked}; --manifest FILE names one)`,
      info !== null ? `containment: ${info.backend} — ${info.reason}` : `containment: refused — ${containmentError ?? ''}`,
      ...(info !== null
        ? [
            `isolation: ${info.pidNamespace ? 'PID namespace' : 'none'} — ${info.isolationReason}`,
            `run as: ${info.runAs === null ? 'the runtime\'s own user' : `${info.runAs.name} (uid ${info.runAs.uid}, gid ${info.runAs.gid})`}`,
            `steps get: ${describeConfinement(info.confinement)}`,
            `network: ${networkMode}${networkMode === 'host' ? " (the host's network)" : networkAllow !== null ? ` (a network namespace of the session, out only to ${networkAllow.join(', ')})` : ' (a network namespace of the session, loopback only)'}; session: ${sessionNetwork === null ? 'unknown' : sessionNetwork.available ? 'available here' : `not available here — ${sessionNetwork.reason}`}`,
            hasBounds(info.resources)
              ? `resource limits: ${describeResourceBounds(info.resources)}`
              : `resource limits: none declared (capabilities.resources); here they would be: ${resourcesHere === null ? 'unknown' : describeResourceBounds(resourcesHere)}`,
            `spawn helper: ${info.helper ?? 'none'}`,
            `spawner: ${spawner.used ? 'yes' : 'no'} — ${spawner.reason}`,
          ]
        : []),
      `records: ${records.dir}: ${records.detail}`,
      `PATH (absolute entries only): ${path.text === '' ? '(empty)' : path.text}`,
      ...(path.dropped.length > 0 ? [`warning: ${droppedPathWarning(path)}`] : []),
      resolutions.length === 0 ? 'allow-list: empty (no manifest allow-list, no --allow)' : 'allow-list:',
      ...resolutions.map((r) => `  ${r.entry} → ${r.resolved ?? r.error ?? ''}`),
      ...(scaleOut !== null ? [(await import('../scale-out/check.js')).describeScaleOut(scaleOut)] : []),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  }
  return ok ? EXIT.OK : EXIT.FAILED;
}
