/**
 * The messages between the runtime (`client.ts`) and the session's spawner (`main.ts`), JSON over
 * the IPC channel of `child_process.fork`: defined once, as schemas each side parses what it
 * receives with, so that neither acts on a message the other did not mean. `id` is the runtime's
 * number for one spawn request; `s` is a stream, 0 for stdout, 1 for stderr.
 *
 * zod/mini rather than zod: the spawner bundles what it uses of it, and the spawner's start is on
 * the way of every run.
 */
import * as z from 'zod/mini';

const id = z.int();
const stream = z.literal([0, 1]);
const signalName = z.custom<NodeJS.Signals>((value) => typeof value === 'string' && /^SIG[A-Z0-9]+$/.test(value));

/**
 * A command's environment: an object of strings. One loop rather than `z.record`, whose parse of
 * each entry through two schemas was most of the cost of a spawn request's.
 */
const environment = z.custom<Record<string, string>>((value) => {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  for (const name in value) if (typeof (value as Record<string, unknown>)[name] !== 'string') return false;
  return true;
});

/** What the runtime sends the spawner. */
export const SpawnerRequest = z.discriminatedUnion('t', [
  /** Start a command in a process group of its own (`input`: its stdin text; `stdinPipe`: hand its stdin pipe back; `control`: a control channel on fd 3). */
  z.strictObject({
    t: z.literal('spawn'),
    id,
    file: z.string(),
    args: z.array(z.string()),
    argv0: z.optional(z.string()),
    cwd: z.string(),
    env: environment,
    input: z.nullable(z.string()),
    stdinPipe: z.boolean(),
    control: z.boolean(),
  }),
  /** The runtime stopped reading that stream (a held-open pipe it cut). */
  z.strictObject({ t: z.literal('close'), id, s: stream }),
  /** The runtime's drain grace ended while a stream is still read by the spawner. */
  z.strictObject({ t: z.literal('flush'), id }),
  /** The runtime has proven the process group of request `id` gone: the spawner stops holding it. */
  z.strictObject({ t: z.literal('forget'), id }),
  /** The runtime heard nothing for a while: answered `pong` at once (a spawner silent through many pings is taken for hung). */
  z.strictObject({ t: z.literal('ping') }),
]);
export type SpawnerRequest = z.infer<typeof SpawnerRequest>;

/** What the spawner sends the runtime. */
export const SpawnerReport = z.discriminatedUnion('t', [
  /** The answer to a `ping`. */
  z.strictObject({ t: z.literal('pong') }),
  /** The command started: its pid and start time (clock ticks after boot; -1 when it could not be read). */
  z.strictObject({ t: z.literal('started'), id, pid: z.int(), startTime: z.int() }),
  /** Bytes of a stream as they were read (`b`: base64). */
  z.strictObject({ t: z.literal('d'), id, s: stream, b: z.string() }),
  /** A stream's end of file, after the leader's `exit`. */
  z.strictObject({ t: z.literal('e'), id, s: stream }),
  /** The answer to a `flush`: the streams still read there read nothing new for a whole loop turn, every byte read sent before it. */
  z.strictObject({ t: z.literal('flushed'), id }),
  /** The stream's pipe itself, sent as the message's handle (read-stopped first, every byte read before sent before it). */
  z.strictObject({ t: z.literal('h'), id, s: stream }),
  /** The command's stdin pipe, sent as the message's handle (only with `stdinPipe`). */
  z.strictObject({ t: z.literal('in'), id }),
  /** The helper's control channel at its end of file, with the start time of the PID namespace's init it names (null: not readable). */
  z.strictObject({ t: z.literal('ctl'), id, text: z.string(), initStart: z.optional(z.nullable(z.int())) }),
  /**
   * The leader exited: `ended` says which streams had reached their end of file there (no `e`
   * follows for those); `kept` that the group still has a process (it is held until `forget`).
   */
  z.strictObject({
    t: z.literal('exit'),
    id,
    code: z.nullable(z.int()),
    signal: z.nullable(signalName),
    ended: z.tuple([z.boolean(), z.boolean()]),
    kept: z.optional(z.literal(true)),
  }),
  /** The command could not be spawned. */
  z.strictObject({ t: z.literal('fail'), id, code: z.nullable(z.string()), message: z.string() }),
]);
export type SpawnerReport = z.infer<typeof SpawnerReport>;

/**
 * The spawner's exit status when it was sent a message that is not a {@link SpawnerRequest}: it
 * ends what it holds, as when the runtime is gone, and exits (`EX_PROTOCOL`).
 */
export const UNREADABLE_REQUEST_EXIT = 76;

/** The first thing wrong with a message that did not parse, for an error (`t: Invalid input`, `id: Invalid input: expected int`). */
export function protocolIssue(error: { readonly issues: readonly { readonly path: readonly PropertyKey[]; readonly message: string }[] }): string {
  const issue = error.issues[0];
  if (issue === undefined) return 'not a message of the protocol';
  return issue.path.length === 0 ? issue.message : `${issue.path.map(String).join('.')}: ${issue.message}`;
}
