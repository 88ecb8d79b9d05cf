/**
 * The capsule manifest (`capsule.json`, docs/manifest.md): its zod schema, loading it with unknown-key
 * warnings, and writing the JSON Schemas of the manifest and the plan file to `schema/`.
 */

import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import * as z from 'zod';
import {
  MANIFEST_SHAPE,
  manifestMissing,
  manifestProblem,
  manifestUnreadable,
  TOP_LEVEL_PATH,
  unknownKey,
} from './plan/messages.js';
import {
  duplicateKeyDetail,
  expecting,
  formatIssues,
  jsonSyntaxDetail,
  MAX_JSON_DEPTH,
  planJsonSchema,
  readUtf8File,
  textNestingExceeds,
  TOO_DEEP,
  type SettingWarning,
  type UnknownKeyWarning,
} from './plan/schema.js';
import { findDuplicateKey } from './plan/json-location.js';
import { findUnknownKeys, type KeySpec } from './plan/unknown-keys.js';

/**
 * Seconds `capsule run` waits after a graceful cancel before it forces one (ends the running
 * steps' process groups). Ours (`docs/cancel.md#capsule-run-and-signals`); `--cancel-grace` overrides it.
 */
export const DEFAULT_CANCEL_GRACE_SECS = 10;

/** Default `lifecycle.delegation_deadline_secs`: the bound on one delegation (`docs/delegation.md#the-bound-and-the-inherited-deadline`). */
export const DEFAULT_DELEGATION_DEADLINE_SECS = 600;

/** Default `tools.<name>.timeout_secs` of a command tool (docs/manifest.md#command-tools). */
export const DEFAULT_TOOL_TIMEOUT_SECS = 600;

const stringList = (description: string) =>
  z
    .array(z.string({ error: expecting(MANIFEST_SHAPE.listEntry) }), {
      error: expecting(MANIFEST_SHAPE.stringList),
    })
    .default(() => [])
    .meta({ description });

/** Error option of every manifest section object. */
const SECTION = { error: expecting(MANIFEST_SHAPE.object) };

/** One destination of `capabilities.network.allow`, parsed (docs/containment.md#the-allow-list). */
export interface AllowEntry {
  /** An IPv4 or IPv6 address, or a host name (resolved at the session's start). */
  readonly host: string;
  readonly kind: 'ip4' | 'ip6' | 'name';
  /** A CIDR prefix length, or null (the one address). */
  readonly prefix: number | null;
  /** One TCP and UDP port, or null (every port). */
  readonly port: number | null;
}

/** Parses an allow-list entry: `IP`, `IP:PORT`, `[IPv6]:PORT`, `CIDR`, `NAME`, `NAME:PORT`; null when it is none of them. */
export function parseAllowEntry(entry: string): AllowEntry | null {
  const portOf = (text: string): number | null | undefined => {
    if (!/^\d{1,5}$/.test(text)) return undefined;
    const port = Number(text);
    return port >= 1 && port <= 65535 ? port : undefined;
  };
  const bracketed = /^\[([^\]]+)\]:(\d+)$/.exec(entry);
  if (bracketed !== null) {
    const port = portOf(bracketed[2] ?? '');
    return isIP(bracketed[1] ?? '') === 6 && port !== undefined ? { host: bracketed[1] ?? '', kind: 'ip6', prefix: null, port } : null;
  }
  const cidr = /^([^/]+)\/(\d{1,3})$/.exec(entry);
  if (cidr !== null) {
    const family = isIP(cidr[1] ?? '');
    const prefix = Number(cidr[2]);
    if (family === 0 || prefix > (family === 4 ? 32 : 128)) return null;
    return { host: cidr[1] ?? '', kind: family === 4 ? 'ip4' : 'ip6', prefix, port: null };
  }
  const family = isIP(entry);
  if (family !== 0) return { host: entry, kind: family === 4 ? 'ip4' : 'ip6', prefix: null, port: null };
  const [host = '', portText, ...rest] = entry.split(':');
  if (rest.length > 0) return null;
  const port = portText === undefined ? null : portOf(portText);
  if (port === undefined) return null;
  if (isIP(host) === 4) return { host, kind: 'ip4', prefix: null, port };
  if (!/^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(host)) return null;
  return { host, kind: 'name', prefix: null, port };
}

/** A positive whole number (a resource bound), absent when not given. */
const positiveCount = (shape: string, description: string) =>
  z
    .number({ error: expecting(shape) })
    .int({ error: expecting(shape) })
    .positive({ error: expecting(shape) })
    .optional()
    .meta({ description });

/** A non-empty argv array: program first, then its arguments. */
const argvSchema = (description: string) =>
  z
    .array(z.string({ error: expecting(MANIFEST_SHAPE.listEntry) }), {
      error: expecting(MANIFEST_SHAPE.command),
    })
    .min(1, { error: expecting(MANIFEST_SHAPE.command) })
    .meta({ description });

/** A manifest's `entry`, after parsing: exactly one of the two forms. */
export type ManifestEntry = { readonly plan: string } | { readonly command: readonly string[] };

/**
 * zod schema of `capsule.json` (docs/manifest.md). Every key is optional, but a present key must have
 * the right type. Parsing normalises:
 * - `capabilities.shell.allow`, `capabilities.spawn.allow`, `capabilities.spawn.workdir_snapshot`
 *   default to `[]` (nothing allowed); `capabilities.env.allow` stays absent when not given (the
 *   environment builder then applies its own default);
 * - `lifecycle.shell_grace_secs` stays absent when not given (no demotion clock,
 *   `docs/background-commands.md#demotion-triggers`) and is 0 or more; `lifecycle.delegation_deadline_secs` defaults to 600 (positive);
 * - `tools` defaults to `{}`; each tool's `command` is a non-empty array of strings and its
 *   `timeout_secs` defaults to 600 (positive);
 * - `entry`, when present, is exactly one of `{ plan }` or `{ command }` (non-empty argv).
 * Unknown keys are accepted and dropped (`loadManifest` warns about them).
 *
 * Built at its first use ({@link manifestSchema}): a run without a manifest never builds it
 * (startup time).
 */
function buildManifestSchema() {
  /** One command tool (docs/manifest.md#command-tools). */
  const ToolSchema = z
    .object(
      {
        command: argvSchema('The argv that runs the tool: program first, then its arguments.'),
        timeout_secs: z
          .number({ error: expecting(MANIFEST_SHAPE.positiveSecs) })
          .positive({ error: expecting(MANIFEST_SHAPE.positiveSecs) })
          .default(DEFAULT_TOOL_TIMEOUT_SECS)
          .meta({ description: 'Seconds one call may run before its process group is ended.' }),
      },
      { error: expecting(MANIFEST_SHAPE.tool) },
    )
    .meta({ description: 'A command tool: reads the input JSON on stdin, prints one ToolResult on stdout.' });

  /** What a delegated child runs: exactly one of `plan` or `command` (docs/manifest.md). */
  const EntrySchema = z
    .object(
      {
        plan: z
          .string({ error: expecting(MANIFEST_SHAPE.string) })
          .optional()
          .meta({ description: 'Plan file to run; the task text is available as $task.output.' }),
        command: argvSchema('Command to run; the task text arrives on stdin, stdout is the answer.').optional(),
      },
      { error: expecting(MANIFEST_SHAPE.entry) },
    )
    .refine((entry) => (entry.plan === undefined) !== (entry.command === undefined), {
      error: MANIFEST_SHAPE.entryOneOf,
    })
    .meta({
      description: 'What a delegated child runs: { "plan": FILE } or { "command": [ARGV...] }.',
      oneOf: [{ required: ['plan'] }, { required: ['command'] }],
    })
    .transform((entry): ManifestEntry =>
      entry.plan !== undefined ? { plan: entry.plan } : { command: entry.command ?? [] },
    );

  const ManifestSchema = z
    .object(
      {
        name: z
          .string({ error: expecting(MANIFEST_SHAPE.string) })
          .optional()
          .meta({ description: "The capsule's name." }),
        version: z
          .string({ error: expecting(MANIFEST_SHAPE.string) })
          .optional()
          .meta({ description: "The capsule's version, e.g. 0.1.0." }),
        capabilities: z
          .object(
            {
              shell: z
                .object({ allow: stringList('Binary names shell steps and shell tools may start.') }, SECTION)
                .prefault({})
                .meta({ description: 'Shell commands.' }),
              spawn: z
                .object(
                  {
                    allow: stringList('Capsules this one may delegate to, e.g. local/worker.'),
                    workdir_snapshot: stringList('Capsules whose child gets a copy of the work folder.'),
                  },
                  SECTION,
                )
                .prefault({})
                .meta({ description: 'Delegation to child capsules.' }),
              env: z
                .object(
                  {
                    allow: z
                      .array(z.string({ error: expecting(MANIFEST_SHAPE.listEntry) }), {
                        error: expecting(MANIFEST_SHAPE.stringList),
                      })
                      .optional()
                      .meta({ description: 'Environment variables passed to commands.' }),
                    secrets: z
                      .array(z.string({ error: expecting(MANIFEST_SHAPE.listEntry) }), {
                        error: expecting(MANIFEST_SHAPE.stringList),
                      })
                      .optional()
                      .meta({ description: "Environment variables passed to plan shell steps and command tools as secrets: credential-shaped names too, and their values (base64 and URL-encoded forms included) read *** in everything the run writes or prints. See docs/security.md#masked-secrets." }),
                  },
                  SECTION,
                )
                .prefault({})
                .meta({ description: 'Environment of started commands.' }),
              network: z
                .union(
                  [
                    z.enum(['host', 'session']),
                    z.object(
                      {
                        allow: z
                          .array(
                            z.string({ error: expecting(MANIFEST_SHAPE.listEntry) }).refine((entry) => parseAllowEntry(entry) !== null, {
                              error: (issue) => `${MANIFEST_SHAPE.allowEntry}, got ${JSON.stringify(issue.input)}`,
                            }),
                            { error: expecting(MANIFEST_SHAPE.stringList) },
                          )
                          .min(1, { error: expecting(MANIFEST_SHAPE.allowList) })
                          .meta({ description: 'Destinations outside the session namespace its commands may reach: "IP", "IP:PORT", "CIDR", "NAME[:PORT]" (resolved once, at the session\'s start); "192.0.2.1" is the host\'s loopback.' }),
                      },
                      { error: expecting(MANIFEST_SHAPE.network) },
                    ),
                  ],
                  { error: expecting(MANIFEST_SHAPE.network) },
                )
                .optional()
                .meta({
                  description:
                    'The network of the session\'s commands and plan steps: "host" (the host\'s network, the default), "session" (a network namespace of the session\'s own with only loopback: they reach each other on 127.0.0.1 and nothing else; needs root), or { "allow": [...] } (that namespace, reaching out only to the listed destinations; needs pasta and nft). --network overrides it. See docs/containment.md#network.',
                }),
              resources: z
                .object(
                  {
                    memory_max_bytes: positiveCount(MANIFEST_SHAPE.positiveBytes, 'Most memory, in bytes, one command may use: its cgroup memory.max where the memory controller is enabled for the runtime, else its address space (RLIMIT_AS, per process). A command killed for it fails with resource_limit "memory". See docs/shell-commands.md#resource-limits.'),
                    pids_max: positiveCount(MANIFEST_SHAPE.positiveCount, 'Most processes one command may have at once: its cgroup pids.max where the pids controller is enabled for the runtime, else RLIMIT_NPROC under --run-as (it counts every process of that user). A fork refused for it names resource_limit "pids".'),
                    cpu_secs: positiveCount(MANIFEST_SHAPE.positiveWholeSecs, 'Most CPU seconds one process of a command may use (RLIMIT_CPU): SIGXCPU ends it, resource_limit "cpu".'),
                    file_size_max_bytes: positiveCount(MANIFEST_SHAPE.positiveBytes, 'Largest file, in bytes, a command may write (RLIMIT_FSIZE): SIGXFSZ ends it, resource_limit "file_size".'),
                    workdir_max_bytes: positiveCount(MANIFEST_SHAPE.positiveBytes, 'Most bytes the work folder may hold while a command runs: a command that grows it past this is stopped, resource_limit "workdir"; one started when it is already past this is refused.'),
                  },
                  SECTION,
                )
                .optional()
                .meta({ description: 'Bounds on each shell command (plan shell steps, shell.run and background commands), per command; absent: unbounded. See docs/shell-commands.md#resource-limits.' }),
              privileged_steps: z
                .boolean({ error: expecting('expected true or false') })
                .optional()
                .meta({
                  description:
                    "The opt-out from step confinement: steps keep every capability of the runtime's user, get no cgroup namespace and a writable /sys (as capsule run --privileged-steps). A step running as root can then undo its isolation; warned about at start, recorded in session_start. See docs/security.md.",
                }),
            },
            SECTION,
          )
          .prefault({})
          .meta({ description: 'What the capsule may do.' }),
        lifecycle: z
          .object(
            {
              shell_grace_secs: z
                .number({ error: expecting(MANIFEST_SHAPE.graceSecs) })
                .min(0, { error: expecting(MANIFEST_SHAPE.graceSecs) })
                .optional()
                .meta({
                  description:
                    'Seconds a shell.run command may run in the foreground before it is demoted to the background (capsule serve; 0: at once); absent: never demoted by the clock. Plan shell steps always run in the foreground.',
                }),
              shell_deadline_secs: z
                .number({ error: expecting(MANIFEST_SHAPE.positiveSecs) })
                .positive({ error: expecting(MANIFEST_SHAPE.positiveSecs) })
                .optional()
                .meta({
                  description:
                    'Seconds from its start after which a shell.run command is ended by the runtime (in the foreground, or stopped as by backgroundCommand stop once in the background; it reads ended_by deadline); a call\'s deadline_secs overrides it; absent: no deadline.',
                }),
              shell_idle_secs: z
                .number({ error: expecting(MANIFEST_SHAPE.positiveSecs) })
                .positive({ error: expecting(MANIFEST_SHAPE.positiveSecs) })
                .optional()
                .meta({
                  description:
                    'Seconds a background shell.run command may print nothing before the session says so, once (serve\'s command.idle notification, MCP notifications/message); a call\'s idle_secs overrides it; absent: never.',
                }),
              max_log_bytes: z
                .number({ error: expecting(MANIFEST_SHAPE.positiveBytes) })
                .int({ error: expecting(MANIFEST_SHAPE.positiveBytes) })
                .positive({ error: expecting(MANIFEST_SHAPE.positiveBytes) })
                .optional()
                .meta({
                  description:
                    'Most output, in bytes, a shell command\'s log keeps: a background command\'s logs/<work_id>.log, and the logs/shell-<ms>.log of a plan shell step or foreground shell.run whose output was cut at 16 KiB (both streams together); past it one marker line is written and later output only counts; absent: no cap.',
                }),
              on_log_cap: z
                .enum(['continue', 'stop'], { error: expecting(MANIFEST_SHAPE.onLogCap) })
                .optional()
                .meta({ description: 'What a command whose log reached max_log_bytes does: continue (default) or stop (a background command is stopped as by backgroundCommand stop; a plan shell step is ended and fails; a foreground shell.run is ended with ended_by log_cap).' }),
              // Murmur's words for a session that outlives its task (docs/background-commands.md#session-end): accepted so a
              // manifest written for Murmur (and the abandonment report's advice) is not an unknown
              // key; capsule serve behaves this way whatever they say.
              task_acceptance: z
                .string({ error: expecting('a word (Murmur: queue)') })
                .optional()
                .meta({ description: 'Murmur compatibility: how a session takes tasks (queue). capsule serve always keeps its session open and delivers completions as notifications until it is stopped.' }),
              after_task: z
                .string({ error: expecting('a word (Murmur: sleep)') })
                .optional()
                .meta({ description: 'Murmur compatibility: what a session does after a task (sleep). capsule serve always waits for the next request.' }),
              delegation_deadline_secs: z
                .number({ error: expecting(MANIFEST_SHAPE.positiveSecs) })
                .positive({ error: expecting(MANIFEST_SHAPE.positiveSecs) })
                .default(DEFAULT_DELEGATION_DEADLINE_SECS)
                .meta({ description: 'Bound on one delegation, in seconds.' }),
            },
            SECTION,
          )
          .prefault({})
          .meta({ description: 'Timing bounds.' }),
        tools: z
          .record(z.string(), ToolSchema, { error: expecting(MANIFEST_SHAPE.tools) })
          .default(() => ({}))
          .meta({ description: 'Command tools by name.' }),
        entry: EntrySchema.optional(),
        cache: z
          .object(
            {
              dir: z
                .string({ error: expecting('a directory path string (relative to the manifest\'s directory)') })
                .min(1, { error: expecting('a directory path string (relative to the manifest\'s directory)') })
                .optional()
                .meta({ description: "Ours (docs/cache.md#the-store): the step cache's store, relative to the manifest's directory; capsule run --cache-dir overrides it. Default: $XDG_CACHE_HOME/capsule-runtime/steps (~/.cache when unset)." }),
            },
            SECTION,
          )
          .optional()
          .meta({ description: 'Ours: the step cache (docs/cache.md).' }),
      },
      { error: expecting(MANIFEST_SHAPE.topLevel) },
    )
    .meta({ title: 'capsule-runtime manifest (capsule.json)', description: 'See docs/manifest.md.' });
  return ManifestSchema;
}

let builtManifestSchema: ReturnType<typeof buildManifestSchema> | null = null;

/** The zod schema of `capsule.json` (built once, at the first call). */
export function manifestSchema(): ReturnType<typeof buildManifestSchema> {
  builtManifestSchema ??= buildManifestSchema();
  return builtManifestSchema;
}

/** A parsed, normalised manifest. */
export type Manifest = z.output<ReturnType<typeof buildManifestSchema>>;

/** Where unknown keys are looked for in a manifest. */
const MANIFEST_KEY_SPEC: KeySpec = {
  keys: ['name', 'version', 'capabilities', 'lifecycle', 'tools', 'entry', 'cache'],
  children: {
    cache: { keys: ['dir'] },
    capabilities: {
      keys: ['shell', 'spawn', 'env', 'privileged_steps', 'network', 'resources'],
      children: {
        network: { keys: ['allow'] },
        resources: { keys: ['memory_max_bytes', 'pids_max', 'cpu_secs', 'file_size_max_bytes', 'workdir_max_bytes'] },
        shell: { keys: ['allow'] },
        spawn: { keys: ['allow', 'workdir_snapshot'] },
        env: { keys: ['allow', 'secrets'] },
      },
    },
    lifecycle: { keys: ['shell_grace_secs', 'shell_deadline_secs', 'shell_idle_secs', 'max_log_bytes', 'on_log_cap', 'task_acceptance', 'after_task', 'delegation_deadline_secs'] },
    tools: { keys: [], members: { keys: ['command', 'timeout_secs'] } },
    entry: { keys: ['plan', 'command'] },
  },
};

/** A manifest's warnings: its unknown keys, then its settings that do nothing as written. */
export type ManifestWarning = UnknownKeyWarning | SettingWarning;

/** Outcome of `parseManifestText` and `loadManifest`. */
export type ManifestResult =
  | { readonly ok: true; readonly manifest: Manifest; readonly warnings: ManifestWarning[] }
  | { readonly ok: false; readonly error: string };

/**
 * Parses the text of a manifest. Errors (never thrown) are `<label>: <detail>`: the nesting limit
 * (checked on the text first), `invalid JSON: <parser message>`, a key written twice in one object
 * (`duplicate key '<key>' at <json path> (line L, column C), first written at line L, column C:
 * remove one of them`; `JSON.parse` would keep the last), or one to three shape problems `<json path>: <expected>,
 * got <value>`, e.g. `capsule.json: tools.word-count.command: expected a non-empty array of
 * strings, got an empty array`.
 *
 * @param text The file's text.
 * @param label How the file is named in errors and warnings (normally its path as given).
 * @returns The manifest and one warning per unknown key, worded
 *   `<label>: <path>: unknown key '<key>' (did you mean '<known>'?)`.
 */
export function parseManifestText(text: string, label: string): ManifestResult {
  // The nesting limit is checked on the text, before JSON.parse spends time on 60 MB of `[`.
  if (textNestingExceeds(text, MAX_JSON_DEPTH)) return { ok: false, error: manifestProblem(label, TOO_DEEP) };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    return { ok: false, error: manifestProblem(label, jsonSyntaxDetail(text, error)) };
  }
  const duplicate = findDuplicateKey(text);
  if (duplicate !== null) return { ok: false, error: manifestProblem(label, duplicateKeyDetail(duplicate)) };
  const parsed = manifestSchema().safeParse(raw);
  if (!parsed.success) return { ok: false, error: manifestProblem(label, formatIssues(parsed.error.issues)) };
  const warnings = findUnknownKeys(raw, MANIFEST_KEY_SPEC).map(
    (found): UnknownKeyWarning => ({
      kind: 'unknown_key',
      path: found.path,
      key: found.key,
      suggestion: found.suggestion,
      message: manifestProblem(
        label,
        unknownKey(found.path === '' ? TOP_LEVEL_PATH : found.path, found.key, found.suggestion, found.known),
      ),
    }),
  );
  return { ok: true, manifest: parsed.data, warnings: [...warnings, ...settingWarnings(parsed.data, label)] };
}

/** Settings that do nothing as written: said once at load, since nothing else would ever show it. */
function settingWarnings(manifest: Manifest, label: string): SettingWarning[] {
  const lifecycle = manifest.lifecycle;
  if (lifecycle?.on_log_cap === 'stop' && lifecycle.max_log_bytes === undefined) {
    return [
      {
        kind: 'inert_setting',
        path: 'lifecycle.on_log_cap',
        message: `${label}: lifecycle.on_log_cap is "stop" but lifecycle.max_log_bytes is not set, so no log is capped and nothing is stopped: set lifecycle.max_log_bytes to a size in bytes`,
      },
    ];
  }
  return [];
}

/** Outcome of `loadManifest`. */
export type LoadManifestResult =
  | {
      readonly ok: true;
      readonly manifest: Manifest;
      readonly warnings: ManifestWarning[];
      /** Absolute directory holding the manifest file. */
      readonly dir: string;
    }
  | { readonly ok: false; readonly error: string };

/**
 * Reads and parses a manifest file (docs/manifest.md). Never throws.
 *
 * @param path The manifest path as given (shown as given in errors and warnings).
 * @returns The manifest, its unknown-key warnings and `dir`, the absolute directory holding the
 *   file (relative paths in the manifest, such as `entry.plan`, are relative to it); or an error:
 *   `failed to read manifest <path>: it does not exist`, `failed to read manifest <path>: <io
 *   error>`, or a parse error of `parseManifestText`.
 */
export async function loadManifest(path: string): Promise<LoadManifestResult> {
  const read = await readUtf8File(path);
  if (!read.ok) {
    return { ok: false, error: read.missing ? manifestMissing(path) : manifestUnreadable(path, read.error) };
  }
  const parsed = parseManifestText(read.text, path);
  if (!parsed.ok) return parsed;
  return { ...parsed, dir: dirname(resolve(path)) };
}

/** The manifest file looked for in the workdir when none is given (docs/cli.md). */
export const MANIFEST_FILE = 'capsule.json';

/**
 * Where a run's manifest came from, so that every message depending on it can say so: a file
 * (given with `--manifest`, or found in the workdir), none (and where it was looked for), or a
 * parsed manifest handed over by a library user.
 */
export type ManifestSource =
  | {
      readonly kind: 'file';
      /** Absolute path. */
      readonly path: string;
      /** The path as shown in errors: as given with `--manifest`, else `<workdir as given>/capsule.json`. */
      readonly label: string;
      /** Given with `--manifest` (else found in the workdir). */
      readonly given: boolean;
    }
  | { readonly kind: 'none'; /** Absolute path of the default that does not exist; null when none was wanted (`manifest: null`). */ readonly looked: string | null }
  | { readonly kind: 'object' };

/**
 * The manifest `capsule run` and `capsule validate` use (docs/cli.md): `manifest` when given
 * (relative to the current directory), else `<workdir>/capsule.json` when that file exists, else
 * none. Does not read the file.
 *
 * @param manifest `--manifest` as given, or undefined.
 * @param workdir `--workdir` as given (relative to the current directory), or undefined for the current directory.
 */
export function findManifest(manifest: string | undefined, workdir: string | undefined): ManifestSource {
  if (manifest !== undefined) return { kind: 'file', path: resolve(manifest), label: manifest, given: true };
  const label = join(workdir ?? '.', MANIFEST_FILE);
  const candidate = resolve(label);
  return existsSync(candidate) ? { kind: 'file', path: candidate, label, given: false } : { kind: 'none', looked: candidate };
}

/**
 * The manifest source in words, for messages: `manifest /w/capsule.json`, or `no manifest was
 * loaded (there is no /w/capsule.json)`.
 */
export function describeManifestSource(source: ManifestSource): string {
  switch (source.kind) {
    case 'file':
      return `manifest ${source.path}${source.given ? '' : ' (found in the workdir)'}`;
    case 'object':
      return 'the manifest object the caller passed';
    case 'none':
      return source.looked === null ? 'no manifest (none was wanted)' : `no manifest was loaded (there is no ${source.looked})`;
  }
}

/**
 * A `capsule.json` beside the plan file when no manifest was loaded: the usual cause of a refusal
 * from a run started in another directory (`capsule run examples/release/plan.json`). Relative to
 * the current directory, as the plan path; null when there is none or a manifest was loaded.
 */
export function manifestBesidePlan(planPath: string | null, source: ManifestSource): string | null {
  if (source.kind !== 'none' || source.looked === null || planPath === null) return null;
  const candidate = join(dirname(planPath), MANIFEST_FILE);
  return resolve(candidate) !== source.looked && existsSync(candidate) ? candidate : null;
}

/** The JSON Schema (draft 2020-12) of `capsule.json` as authors write it (defaults shown). */
export function manifestJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(manifestSchema(), { io: 'input' }) as Record<string, unknown>;
}

/** File names `writeSchemas` writes. */
export const SCHEMA_FILES = { plan: 'plan.schema.json', manifest: 'manifest.schema.json' } as const;

/** The text of each schema file: pretty JSON with a final newline. */
export function schemaFileTexts(): Record<keyof typeof SCHEMA_FILES, string> {
  return {
    plan: `${JSON.stringify(planJsonSchema(), null, 2)}\n`,
    manifest: `${JSON.stringify(manifestJsonSchema(), null, 2)}\n`,
  };
}

/**
 * Writes `plan.schema.json` and `manifest.schema.json` into `dir` (created when missing); the
 * committed copies live in `schema/`. Throws on io errors (a build-time tool, not a runtime path).
 *
 * @returns The absolute paths written.
 */
export async function writeSchemas(dir: string): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const texts = schemaFileTexts();
  const written: string[] = [];
  for (const kind of ['plan', 'manifest'] as const) {
    const target = resolve(join(dir, SCHEMA_FILES[kind]));
    await writeFile(target, texts[kind]);
    written.push(target);
  }
  return written;
}
