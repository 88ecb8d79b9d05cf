/**
 * The reconcile scan (`docs/resume.md#the-scan`): what a prior session's `trace.jsonl` says about its
 * demoted commands, as pure functions over the file's bytes. Self-contained on purpose: the
 * skipping rules are Murmur's (split at `\n`, drop a trailing `\r`, skip what does not
 * parse), and every skipped line is counted and reported with its byte offset.
 */
import { isUtf8 } from 'node:buffer';
import type { LostWork } from '../shell-calls/lost-report.js';
import { readBesideNuls } from '../records/jsonl-reader.js';
import { checkRecordText } from '../records/json-text.js';
import { lowestTrust, parseTrust, type Trust } from '../session/provenance.js';
import type { Proof } from '../records/record-proof.js';

/**
 * Why a line was skipped. `torn`: the unterminated last line, not JSON (a write cut short).
 * `nul`: the line holds NUL bytes (a block of zeros left by a crash). `invalid_utf8`: not UTF-8.
 * `not_json`: does not parse. `blank`: empty or whitespace only (a writer never writes one).
 * `too_long`: longer than {@link MAX_SCANNED_LINE_BYTES} (not held in memory, not parsed).
 */
export type LineDamageKind = 'torn' | 'nul' | 'invalid_utf8' | 'not_json' | 'blank' | 'too_long';

/** Longest line the scan holds and parses, bytes. A trace record is a few hundred bytes; a longer line is damage and is only counted. */
export const MAX_SCANNED_LINE_BYTES = 16 * 1024 * 1024;

/** One skipped line (or, for `nul`, the NUL bytes of a line: records beside them are still read). */
export interface LineDamage {
  readonly kind: LineDamageKind;
  /** 1-based line number. */
  readonly line: number;
  /** Byte offset of the line's first byte in the file. */
  readonly offset: number;
  /** Length of the line in bytes, without its `\n`. */
  readonly bytes: number;
  /** NUL bytes in the line (0 unless `kind` is `nul`). */
  readonly nul_bytes: number;
  /** Offset of the first NUL byte, or null. */
  readonly first_nul_offset: number | null;
  /**
   * `nul` only: whole records found beside the NUL bytes and read (a crash can leave a block of
   * zeros where a record was about to go, and the next session appends right after it). What is
   * neither NUL nor such a record is skipped with the NULs.
   */
  readonly recovered: number;
}

/** A `process_start` (ours) the scan remembered: a process tree the session started. */
export interface ProcessStartCandidate {
  /** `run:<run>/step:<step_id>#<attempt>`, or null when not a string. */
  readonly owner: string | null;
  readonly pid: number;
  /** Clock ticks after boot; null when missing or negative (unreadable at the time). */
  readonly pid_start_time: number | null;
  readonly pgid: number | null;
  readonly cgroup: string | null;
  readonly pid_namespace: boolean;
  readonly executable: string | null;
  readonly argv: readonly string[];
  /**
   * Whether the record is proven the runtime's own ({@link ScanOptions.prove}): only a proven one
   * is ever checked for life or signalled. Null when the scan was not asked to prove.
   */
  readonly proof: Proof | null;
}

/** Options of a {@link TraceScanner}. */
export interface ScanOptions {
  /**
   * Proves a `session_start` (no session id given) or a `process_start` of the session the first
   * `session_start` names (src/records/record-proof.ts `RecordProver.prove`), given the line's
   * text it was parsed from when there is one. Absent: nothing is proven (a plain reconcile, which
   * reads Murmur traces too, needs no proof).
   */
  readonly prove?: (record: Readonly<Record<string, unknown>>, sessionId?: string, line?: string) => Proof;
  /**
   * Given every record the scan reads, with its proof when it is one of the session's records a
   * proof covers (`plan_step` included) and the scan proves (a `--continue` keeps the proven
   * `plan_step` results, docs/continue.md).
   */
  readonly onRecord?: (record: Readonly<Record<string, unknown>>, proof: Proof | null) => void;
  /**
   * The record types {@link onRecord} wants (default: every one). A line of a type neither the
   * scan nor `onRecord` reads is checked (UTF-8, JSON), not parsed: its damage is reported alike.
   */
  readonly onRecordTypes?: ReadonlySet<string>;
  /**
   * Stop reading once a `session_start` was read (a caller that wants only whose session the
   * trace is, as `--continue` asks before a session opens): the scan covers the file up to it.
   */
  readonly untilSession?: boolean;
}

/** The key of a process identity (pid and start time) in {@link TraceScan.processLost}. */
export const identityKey = (pid: number, startTime: number | null): string => `${pid}:${startTime ?? '?'}`;

/** A remembered `shell_detached` (docs/resume.md#the-scan): its lost-work fields and the task that made the call. */
export interface DetachedCandidate extends LostWork {
  /** The record's `task_id` when a string, else null. */
  readonly task_id: string | null;
  /** The whole record, for our fields beyond Murmur's (pid, pgid, start time, cgroup). */
  readonly record: Readonly<Record<string, unknown>>;
  /** Whether the record is proven the runtime's own ({@link ScanOptions.prove}); null when the scan was not asked to prove. */
  readonly proof: Proof | null;
}

/** A whole number ≥ `min`, or null. */
const int = (value: unknown, min: number): number | null => (typeof value === 'number' && Number.isSafeInteger(value) && value >= min ? value : null);

/**
 * The process tree a `shell_detached` names (ours: `pid`, `pid_start_time`,
 * `pgid`, `cgroup`, `pid_namespace`, the names `process_start` uses), or null when it names no
 * usable pid (a Murmur trace never does).
 */
export function detachedProcess(record: Readonly<Record<string, unknown>>): Omit<ProcessStartCandidate, 'owner' | 'executable' | 'argv' | 'proof'> | null {
  const pid = int(record['pid'], 2);
  if (pid === null) return null;
  return {
    pid,
    pid_start_time: int(record['pid_start_time'], 0),
    pgid: int(record['pgid'], 2),
    cgroup: typeof record['cgroup'] === 'string' ? record['cgroup'] : null,
    pid_namespace: record['pid_namespace'] === true,
  };
}

/** What one scan found (docs/resume.md#the-scan). */
export interface TraceScan {
  /** The first `session_start` with a non-empty `session_id`, and its `event_id` (null when not a string). */
  readonly session: { readonly session_id: string; readonly event_id: string | null } | null;
  /** That `session_start` record whole (ours adds `pid`, `pid_start_time`, `containment`), or null. */
  readonly sessionRecord: Readonly<Record<string, unknown>> | null;
  /** Whether that `session_start` is proven ({@link ScanOptions.prove}); null when not asked, or there is none. */
  readonly sessionProof: Proof | null;
  /** A `session_end` line was read (the session ended normally; its sweep ran). */
  readonly ended: boolean;
  /** `process_start` records with a usable pid, in file order (one per identity: a proven record is never replaced by one that is not). */
  readonly processes: readonly ProcessStartCandidate[];
  /** Identities ({@link identityKey}) an earlier resume marked with `process_lost`. */
  readonly processLost: ReadonlySet<string>;
  /** `task_id → trust` from `task_start` lines (a later line for a task overwrites). */
  readonly taskTrust: ReadonlyMap<string, Trust>;
  /** `shell_detached` by work id (a later line for a work id replaces the earlier). */
  readonly detached: ReadonlyMap<string, DetachedCandidate>;
  /** Work ids named by `shell_completed`, `shell_abandoned` or `shell_lost`, wherever they appear. */
  readonly accounted: ReadonlySet<string>;
  /** Every skipped line, in file order. */
  readonly damage: readonly LineDamage[];
  /** Lines read (skipped ones included; a final empty segment after the last `\n` is not a line). */
  readonly lines: number;
  /** Bytes scanned. */
  readonly bytes: number;
  /** Whether the file ended with `\n` (an empty file counts as terminated, docs/resume.md#reconcile). */
  readonly endsWithNewline: boolean;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const ACCOUNTING = new Set(['shell_completed', 'shell_abandoned', 'shell_lost']);
/** The record types the scan itself reads ({@link TraceScanner}'s dispatch). */
const SCANNED_TYPES: ReadonlySet<string> = new Set(['session_start', 'session_end', 'process_start', 'process_lost', 'task_start', 'shell_detached', ...ACCOUNTING]);

/**
 * An incremental scan: {@link push} chunks of the file in order, then {@link finish}. Memory is
 * bounded by the longest line plus the remembered records, whatever the file's size.
 */
export class TraceScanner {
  readonly #prove: NonNullable<ScanOptions['prove']> | null;
  readonly #onRecord: NonNullable<ScanOptions['onRecord']> | null;
  /** The record types a line is parsed for (others are only checked), or null: every line is parsed. */
  readonly #parsed: ReadonlySet<string> | null;
  #session: { session_id: string; event_id: string | null } | null = null;
  #sessionRecord: Readonly<Record<string, unknown>> | null = null;
  #sessionProof: Proof | null = null;
  #ended = false;
  readonly #processes = new Map<string, ProcessStartCandidate>();
  readonly #processLost = new Set<string>();
  readonly #taskTrust = new Map<string, Trust>();
  readonly #detached = new Map<string, DetachedCandidate>();
  readonly #accounted = new Set<string>();
  readonly #damage: LineDamage[] = [];
  /** Pieces of the current, not yet terminated line. */
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  /** The current line passed {@link MAX_SCANNED_LINE_BYTES}: its bytes are dropped, its NULs counted. */
  #overflow: { nul: number; firstNul: number | null } | null = null;
  /** Offset of the current line's first byte. */
  #lineOffset = 0;
  #line = 0;
  #bytes = 0;
  #lastByte: number | null = null;

  constructor(options: ScanOptions = {}) {
    this.#prove = options.prove ?? null;
    this.#onRecord = options.onRecord ?? null;
    const wanted = options.onRecordTypes;
    this.#parsed = this.#onRecord === null ? SCANNED_TYPES : wanted === undefined ? null : new Set([...SCANNED_TYPES, ...wanted]);
  }

  /** Scans the lines `chunk` completes; an unterminated rest is held (bounded) until the next chunk or {@link finish}. */
  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    const data = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length);
    const base = this.#bytes;
    this.#bytes += data.length;
    this.#lastByte = data[data.length - 1] ?? null;
    let start = 0;
    for (let end = data.indexOf(0x0a, start); end >= 0; end = data.indexOf(0x0a, start)) {
      this.#hold(data.subarray(start, end), base + start);
      this.#endLine(false);
      start = end + 1;
      this.#lineOffset = base + start;
    }
    if (start < data.length) this.#hold(Buffer.from(data.subarray(start)), base + start);
  }

  /** Whether a `session_start` was read. */
  get hasSession(): boolean {
    return this.#session !== null;
  }

  /** Scans the unterminated last line, if any, and returns the result. */
  finish(): TraceScan {
    if (this.#pendingBytes > 0 || this.#overflow !== null) this.#endLine(true);
    return {
      session: this.#session,
      sessionRecord: this.#sessionRecord,
      sessionProof: this.#sessionProof,
      ended: this.#ended,
      processes: [...this.#processes.values()],
      processLost: this.#processLost,
      taskTrust: this.#taskTrust,
      detached: this.#detached,
      accounted: this.#accounted,
      damage: this.#damage,
      lines: this.#line,
      bytes: this.#bytes,
      endsWithNewline: this.#lastByte === null || this.#lastByte === 0x0a,
    };
  }

  /** Adds a piece (at file offset `at`) to the current line, or only counts it past the limit. */
  #hold(piece: Buffer, at: number): void {
    if (piece.length === 0) return;
    if (this.#overflow === null && this.#pendingBytes + piece.length <= MAX_SCANNED_LINE_BYTES) {
      this.#pending.push(piece);
      this.#pendingBytes += piece.length;
      return;
    }
    if (this.#overflow === null) {
      this.#overflow = { nul: 0, firstNul: null };
      let pos = this.#lineOffset;
      for (const held of this.#pending) {
        this.#countNuls(held, pos);
        pos += held.length;
      }
      this.#pending = [];
    }
    this.#countNuls(piece, at);
    this.#pendingBytes += piece.length;
  }

  #countNuls(piece: Buffer, at: number): void {
    const overflow = this.#overflow as { nul: number; firstNul: number | null };
    for (let i = piece.indexOf(0); i >= 0; i = piece.indexOf(0, i + 1)) {
      overflow.nul++;
      if (overflow.firstNul === null) overflow.firstNul = at + i;
    }
  }

  #endLine(unterminated: boolean): void {
    const offset = this.#lineOffset;
    const length = this.#pendingBytes;
    const overflow = this.#overflow;
    const raw = overflow === null ? (this.#pending.length === 1 ? (this.#pending[0] as Buffer) : Buffer.concat(this.#pending, length)) : null;
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#overflow = null;
    if (raw === null) {
      const line = ++this.#line;
      const o = overflow as { nul: number; firstNul: number | null };
      this.#damage.push({ kind: o.nul > 0 ? 'nul' : 'too_long', line, offset, bytes: length, nul_bytes: o.nul, first_nul_offset: o.firstNul, recovered: 0 });
      return;
    }
    this.#take(raw, offset, unterminated);
  }

  #take(raw: Buffer, offset: number, unterminated: boolean): void {
    const line = ++this.#line;
    // A trailing `\r` is dropped (docs/resume.md#the-scan).
    const bytes = raw.length > 0 && raw[raw.length - 1] === 0x0d ? raw.subarray(0, raw.length - 1) : raw;
    const damage = (kind: LineDamageKind, nul = 0, firstNul: number | null = null, recovered = 0): void => {
      this.#damage.push({ kind, line, offset, bytes: raw.length, nul_bytes: nul, first_nul_offset: firstNul, recovered });
    };
    const firstNul = bytes.indexOf(0);
    if (firstNul >= 0) {
      // JSON never holds a raw NUL, so no record spans one: the NUL runs are skipped (loudly), and
      // a whole record between them is still read.
      const { nul, recovered } = readBesideNuls(bytes, parseRecord, (record) => this.#dispatch(record));
      return damage('nul', nul, offset + firstNul, recovered);
    }
    if (this.#parsed !== null) {
      // A record nothing here reads (most of a large plan's trace: its `plan_start`, its
      // `plan_step_start`s) is checked, not parsed; its damage is reported as a parse would.
      const type = leadingType(bytes);
      if (type !== null && !this.#parsed.has(type)) {
        const check = isUtf8(bytes) ? checkRecordText(bytes) : 'invalid_utf8';
        if (check === 'json') return;
        if (check !== 'rekeyed') return damage(unterminated ? 'torn' : check);
        // Another top-level `event_type` (or an escaped key) may make it a record of another type: parsed.
      }
    }
    const parsed = parseLine(bytes);
    if (parsed.kind === 'value') {
      if (typeof parsed.value === 'object' && parsed.value !== null && !Array.isArray(parsed.value)) this.#dispatch(parsed.value as Record<string, unknown>, parsed.text);
      // Any other JSON value parses and has no event_type: ignored, as Murmur's reader does.
      return;
    }
    damage(unterminated ? 'torn' : parsed.kind);
  }

  /** The proof of a record of the session the first `session_start` names (null when not asked to prove); `line`: the text it was parsed from. */
  #proofOf(record: Record<string, unknown>, type: string, line: string | undefined): Proof | null {
    if (this.#prove === null) return null;
    if (this.#session === null) return { proven: false, reason: `its ${type} comes before any session_start` };
    return this.#prove(record, this.#session.session_id, line);
  }

  /**
   * docs/resume.md#the-scan. `line`: the text the record was parsed from (none for a record read
   * beside NUL bytes). A type read here must be in SCANNED_TYPES, or its lines are only checked
   * and never reach this.
   */
  #dispatch(record: Record<string, unknown>, line?: string): void {
    const type = typeof record['event_type'] === 'string' ? record['event_type'] : '';
    const workId = record['work_id'];
    if (this.#onRecord !== null && type !== 'session_start') this.#onRecord(record, type === 'plan_step' ? this.#proofOf(record, type, line) : null);
    if (type === 'session_start') {
      const sessionId = record['session_id'];
      if (this.#session === null && typeof sessionId === 'string' && sessionId !== '') {
        const eventId = record['event_id'];
        this.#session = { session_id: sessionId, event_id: typeof eventId === 'string' ? eventId : null };
        this.#sessionRecord = record;
        this.#sessionProof = this.#prove?.(record, undefined, line) ?? null;
      }
    } else if (type === 'session_end') {
      this.#ended = true;
    } else if (type === 'process_start') {
      // A tree a worker ran on its machine (docs/scale-out.md#the-same-records): not this machine's to look for or signal.
      if (record['worker'] !== undefined) return;
      const pid = int(record['pid'], 2);
      if (pid === null) return;
      const startTime = int(record['pid_start_time'], 0);
      const argv = Array.isArray(record['argv']) ? record['argv'].filter((a): a is string => typeof a === 'string') : [];
      const key = identityKey(pid, startTime);
      const proof = this.#proofOf(record, 'process_start', line);
      // A line that proves nothing never takes the place of one that does (a planted copy of a genuine record).
      if (this.#processes.get(key)?.proof?.proven === true && proof?.proven !== true) return;
      this.#processes.set(key, {
        owner: typeof record['owner'] === 'string' ? record['owner'] : null,
        pid,
        pid_start_time: startTime,
        pgid: int(record['pgid'], 2),
        cgroup: typeof record['cgroup'] === 'string' ? record['cgroup'] : null,
        pid_namespace: record['pid_namespace'] === true,
        executable: typeof record['executable'] === 'string' ? record['executable'] : null,
        argv,
        proof,
      });
    } else if (type === 'process_lost') {
      const pid = int(record['pid'], 2);
      if (pid !== null) this.#processLost.add(identityKey(pid, int(record['pid_start_time'], 0)));
    } else if (type === 'task_start') {
      const taskId = record['task_id'];
      const trust = parseTrust(record['trust']);
      if (typeof taskId === 'string' && trust !== null) this.#taskTrust.set(taskId, trust);
    } else if (type === 'shell_detached') {
      if (typeof workId !== 'string') return;
      const timestamp = record['timestamp'];
      const taskId = record['task_id'];
      this.#detached.set(workId, {
        work_id: workId,
        binary: typeof record['binary'] === 'string' ? record['binary'] : '',
        command: typeof record['command'] === 'string' ? record['command'] : '',
        detached_at_ms: typeof timestamp === 'number' && Number.isInteger(timestamp) && timestamp >= 0 ? timestamp : 0,
        task_id: typeof taskId === 'string' ? taskId : null,
        record,
        proof: this.#proofOf(record, 'shell_detached', line),
      });
    } else if (ACCOUNTING.has(type)) {
      if (typeof workId === 'string') this.#accounted.add(workId);
    }
  }
}

/** `{"event_type":"`: how every record the runtime writes starts. */
const TYPE_PREFIX = Buffer.from('{"event_type":"', 'latin1');

/** The type a line starts with (`{"event_type":"<type>"`, the type of lowercase letters and `_`), or null. */
function leadingType(bytes: Buffer): string | null {
  const from = TYPE_PREFIX.length;
  if (bytes.length <= from) return null;
  for (let k = 0; k < from; k++) if (bytes[k] !== TYPE_PREFIX[k]) return null;
  let i = from;
  for (; i < bytes.length && bytes[i] !== 0x22; i++) {
    const byte = bytes[i] as number;
    if (!((byte >= 0x61 && byte <= 0x7a) || byte === 0x5f)) return null;
  }
  return i < bytes.length ? bytes.toString('latin1', from, i) : null;
}

/** A line's bytes as JSON: the value and the text it was parsed from, or why it is not one. */
function parseLine(bytes: Uint8Array): { kind: 'value'; value: unknown; text: string } | { kind: 'invalid_utf8' | 'blank' | 'not_json' } {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { kind: 'invalid_utf8' };
  }
  if (text.trim() === '') return { kind: 'blank' };
  try {
    return { kind: 'value', value: JSON.parse(text), text };
  } catch {
    return { kind: 'not_json' };
  }
}

/** A whole JSON object in `bytes` (a record beside a NUL block), or null. */
function parseRecord(bytes: Uint8Array): Record<string, unknown> | null {
  const parsed = parseLine(bytes);
  return parsed.kind === 'value' && typeof parsed.value === 'object' && parsed.value !== null && !Array.isArray(parsed.value) ? (parsed.value as Record<string, unknown>) : null;
}

/** Scans a whole file's bytes (or text) at once. */
export function scanTrace(content: Uint8Array | string, options: ScanOptions = {}): TraceScan {
  const scanner = new TraceScanner(options);
  scanner.push(typeof content === 'string' ? Buffer.from(content, 'utf8') : content);
  return scanner.finish();
}

/** Unaccounted work (docs/resume.md#trust): remembered `shell_detached` minus the accounted set, ascending work-id string order (= demotion order). */
export function unaccounted(scan: TraceScan): DetachedCandidate[] {
  return [...scan.detached.values()].filter((work) => !scan.accounted.has(work.work_id)).sort((a, b) => (a.work_id < b.work_id ? -1 : a.work_id > b.work_id ? 1 : 0));
}

/** One command's trust (docs/resume.md#trust): its `task_start`'s, or `untrusted` when it names no task or the join finds none. */
export const candidateTrust = (scan: TraceScan, work: DetachedCandidate): Trust => (work.task_id === null ? 'untrusted' : scan.taskTrust.get(work.task_id) ?? 'untrusted');

/** The report's trust (docs/resume.md#trust): the lowest over every unaccounted command (accounted ones do not count). */
export function reportTrust(scan: TraceScan, work: readonly DetachedCandidate[] = unaccounted(scan)): Trust {
  return lowestTrust(work.map((w) => candidateTrust(scan, w)));
}

const DAMAGE_WORDS: Readonly<Record<LineDamageKind, string>> = {
  torn: 'the last line has no newline and is not a complete record (a write cut short)',
  nul: 'NUL bytes (a block of zeros, as a crash can leave)',
  invalid_utf8: 'not UTF-8',
  not_json: 'not JSON',
  blank: 'an empty line',
  too_long: `longer than ${MAX_SCANNED_LINE_BYTES} bytes, not read`,
};

/**
 * One line per skipped line, for stderr: `<file>: line <n> at byte <offset> (<bytes> bytes): <why>; skipped`,
 * plus a first line counting them. Empty when nothing was skipped. At most `max` detail lines
 * (default 20); the count line says how many more there were.
 */
export function describeDamage(file: string, damage: readonly LineDamage[], max = 20): string[] {
  if (damage.length === 0) return [];
  const lines = [`${file}: ${damage.length} damaged ${damage.length === 1 ? 'line' : 'lines'} skipped while reconciling${damage.length > max ? ` (first ${max} listed)` : ''}`];
  for (const d of damage.slice(0, max)) {
    if (d.kind === 'nul') {
      const kept = d.recovered === 0 ? 'skipped' : `skipped; ${d.recovered} whole ${d.recovered === 1 ? 'record' : 'records'} beside them read`;
      lines.push(`${file}: line ${d.line} at byte ${d.offset} (${d.bytes} bytes): ${d.nul_bytes} ${DAMAGE_WORDS.nul} from byte ${d.first_nul_offset}; ${kept}`);
    } else {
      lines.push(`${file}: line ${d.line} at byte ${d.offset} (${d.bytes} bytes): ${DAMAGE_WORDS[d.kind]}; skipped`);
    }
  }
  return lines;
}
