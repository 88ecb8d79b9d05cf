/**
 * The `shell_lost` marker (`docs/resume.md#markers`, `docs/trace.md#shell_lost`), our `process_lost` beside it,
 * and their small appender: one marker per line, one write per line, into the prior session's
 * existing `trace.jsonl`.
 */
import { closeSync, constants as fsConstants, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import { toJsonLine } from '../records/jsonl.js';
import type { LostWork } from '../shell-calls/lost-report.js';
import { messageOf } from '../errors.js';
import { traceFields, type ProcessLostFields } from '../records/trace-records.js';

/** Inputs of one marker. */
export interface LostMarkerInput {
  readonly work: LostWork;
  /** Fresh `evt_…`. */
  readonly event_id: string;
  /** The prior session's `session_start.event_id`; null → `parent_id` omitted entirely (not null). */
  readonly parent_id: string | null;
  /** The prior session's id (the file stays internally consistent). */
  readonly session_id: string;
  /** Epoch ms when reconciled. */
  readonly timestamp: number;
  readonly reconciled_by_session: string;
  readonly reconciled_task_id: string;
}

/**
 * The marker record, fields in the envelope's order then Murmur's (docs/trace.md#shell_lost). Never `exit_code`,
 * `status`, `duration_ms`, `output_path` or `output_bytes`: nothing about a result is known.
 */
export function lostMarker(input: LostMarkerInput): Record<string, string | number> {
  return {
    event_type: 'shell_lost',
    event_id: input.event_id,
    ...(input.parent_id === null ? {} : { parent_id: input.parent_id }),
    session_id: input.session_id,
    timestamp: input.timestamp,
    work_id: input.work.work_id,
    binary: input.work.binary,
    command: input.work.command,
    detached_at_ms: input.work.detached_at_ms,
    reconciled_by_session: input.reconciled_by_session,
    reconciled_task_id: input.reconciled_task_id,
  };
}

/** Inputs of one `process_lost` marker (ours; `trace-records.ts` {@link ProcessLostFields}). */
export interface ProcessLostInput {
  readonly fields: ProcessLostFields;
  readonly event_id: string;
  /** The prior session's `session_start.event_id`; null → `parent_id` omitted, as for `shell_lost`. */
  readonly parent_id: string | null;
  readonly session_id: string;
  readonly timestamp: number;
}

/** The `process_lost` record: the envelope as `shell_lost` has it, then its fields in written order. */
export function processLostMarker(input: ProcessLostInput): Record<string, unknown> {
  return {
    event_type: 'process_lost',
    event_id: input.event_id,
    ...(input.parent_id === null ? {} : { parent_id: input.parent_id }),
    session_id: input.session_id,
    timestamp: input.timestamp,
    ...traceFields('process_lost', input.fields),
  };
}

/** File operations of the appender; injectable so tests can fail one write. Defaults: `node:fs`. */
export interface MarkerFs {
  /** Whether the file's last byte is `\n` (an empty file counts as terminated). Read before the append open. */
  endsWithNewline(path: string): boolean;
  /** Opens an existing file for appending; never creates it. */
  openAppend(path: string): number;
  write(fd: number, buffer: Uint8Array, offset: number, length: number): number;
  close(fd: number): void;
}

export const MARKER_FS: MarkerFs = {
  endsWithNewline: (path) => {
    const fd = openSync(path, fsConstants.O_RDONLY);
    try {
      const size = fstatSync(fd).size;
      if (size === 0) return true;
      const last = Buffer.alloc(1);
      readSync(fd, last, 0, 1, size - 1);
      return last[0] === 0x0a;
    } finally {
      closeSync(fd);
    }
  },
  openAppend: (path) => openSync(path, fsConstants.O_WRONLY | fsConstants.O_APPEND),
  write: (fd, buffer, offset, length) => writeSync(fd, buffer, offset, length),
  close: (fd) => closeSync(fd),
};

/** What happened to one marker. */
export interface MarkerWrite {
  /** The marker's key as given (the work id of a `shell_lost`). */
  readonly key: string;
  readonly written: boolean;
  /** The OS error when not written. */
  readonly error: string | null;
}

/** What {@link appendMarkers} did. */
export type AppendOutcome =
  | { readonly opened: false; readonly error: string }
  | {
      readonly opened: true;
      /** The file ended mid-line (a torn tail) and the first marker was preceded by a newline. */
      readonly repairedTornTail: boolean;
      readonly results: readonly MarkerWrite[];
    };

/**
 * Appends one line per marker to an existing file (`docs/resume.md#reconcile`, `docs/resume.md#markers`), in order.
 * Before opening it learns whether the file ends with `\n`; if not (a torn tail), the first marker
 * is preceded by a newline so it is a line of its own and the torn fragment stays as it was. Each
 * marker is one write of a whole line; if a write fails or is cut short, that marker is reported
 * not written and the next one is preceded by a newline (so every later marker is still a line of
 * its own). The file is never created; a failed open writes nothing.
 */
export function appendMarkers(path: string, markers: readonly { readonly key: string; readonly record: Record<string, unknown> }[], fs: MarkerFs = MARKER_FS): AppendOutcome {
  let terminated: boolean;
  try {
    terminated = fs.endsWithNewline(path);
  } catch {
    terminated = false; // unknown: a newline costs one blank line at most; a glued marker costs the marker
  }
  let fd: number;
  try {
    fd = fs.openAppend(path);
  } catch (error) {
    return { opened: false, error: messageOf(error) };
  }
  const repairedTornTail = !terminated;
  const results: MarkerWrite[] = [];
  try {
    for (const marker of markers) {
      const line = Buffer.from((terminated ? '' : '\n') + toJsonLine(marker.record), 'utf8');
      let written = 0;
      try {
        while (written < line.length) {
          const n = fs.write(fd, line, written, line.length - written);
          if (n <= 0) throw new Error(`write returned ${n}`);
          written += n;
        }
        terminated = true;
        results.push({ key: marker.key, written: true, error: null });
      } catch (error) {
        // Nothing written leaves the file as it was; a partial line leaves it torn.
        if (written > 0) terminated = line[written - 1] === 0x0a;
        results.push({ key: marker.key, written: false, error: messageOf(error) });
      }
    }
  } finally {
    try {
      fs.close(fd);
    } catch {
      // The markers were written (or reported not written) already.
    }
  }
  return { opened: true, repairedTornTail, results };
}

