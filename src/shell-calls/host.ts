/**
 * What a session's shell calls need of their session (`Session` has all of it): where they run
 * and record, the containment that starts and ends their processes, the clock, the tasks, the
 * trace, and the options of its actors. Typed here so that the session holds its shell calls
 * without the shell calls importing the session back.
 */
import type { CommandLimits } from '../executors/command-runner.js';
import type { InspectionEvent } from 'xstate';
import type { Manifest } from '../manifest.js';
import type { Containment } from '../process/containment.js';
import type { TraceNode } from '../records/trace-records.js';
import type { TraceWriter } from '../records/trace-writer.js';
import type { ActorNames } from '../session/actor-names.js';
import type { SessionClock, XStateClock } from '../session/clock.js';
import type { RuntimeLogger } from '../session/logger.js';
import type { TaskTable } from '../session/tasks.js';

export interface ShellCallHost {
  /** `ses_…`. */
  readonly id: string;
  /** Where commands run. */
  readonly workdir: string;
  readonly recordsDir: string;
  /** Without a records directory nothing is written and nothing demoted. */
  readonly hasRecords: boolean;
  /** HOME and TMPDIR of the commands. */
  readonly scratchDir: string;
  /** The runtime directory commands are told about. */
  readonly runtimeDir: string;
  readonly manifest: Manifest | null;
  readonly trace: TraceWriter;
  /** `session_start`: the session-scoped records hang off it. */
  readonly node: TraceNode<'session_start'>;
  readonly containment: Containment;
  /** The manifest's `capabilities.resources` bounds for every command (docs/shell-commands.md#resource-limits). */
  readonly commandLimits: CommandLimits;
  /** The session's clock: epoch, monotonic, timers. */
  readonly time: SessionClock;
  /** Timers of the session's actors (XState's `clock` option). */
  readonly clock: XStateClock;
  readonly logger: RuntimeLogger;
  readonly tasks: TaskTable;
  /** The readable actor ids handed out in the session. */
  readonly actorNames: ActorNames;
  /** The `inspect` option for the session's actors, or undefined when nobody listens. */
  readonly inspect: ((event: InspectionEvent) => void) | undefined;
  /** Counts a dispatched shell command for `session_end`. */
  countCall(kind: 'shell'): void;
}
