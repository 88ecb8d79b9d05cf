/**
 * `capsule replay` as a library: replays a recorded event log or a hand-written script against
 * the machines of the actor-kind table (docs/event-log.md). The engine is in `engine.ts`, the
 * two replays in `recorded.ts` and `hand.ts`, line comparison in `compare.ts`.
 */
import { HandReplay } from './hand.js';
import { RecordedReplay } from './recorded.js';
import { readReplayScript, type ReplayScript } from './script.js';
import type { ReplayOptions, ReplayResult } from './engine.js';

export type { Divergence, ExpectUpdate, ReplayOptions, ReplayResult } from './engine.js';
export { describe, stateText } from './compare.js';

/** Replays a file (recorded `events.jsonl` or a hand-written script). @throws {ReplayFileError} for an unreadable file. */
export async function replayFile(file: string, options: ReplayOptions = {}): Promise<ReplayResult> {
  return replay(readReplayScript(file), options);
}

/**
 * Rebuilds the script's root actors from the actor-kind table (src/actors/actor-kinds.ts), with
 * every effect a kind names replaced by a fake (docs/event-log.md): a fake action only marks the point
 * where the recorded effect ran; a fake promise actor settles, and a fake callback actor sends,
 * when the recording shows it did. The recorded outside inputs are fed back at their recorded
 * points: events no actor sent (`actor.send`), events from effect actors (through their fakes),
 * and timer firings (`xstate.after.*`, sent to the actor once it can take them: the timers
 * themselves run on a {@link ManualClock} that never moves, so none fires by itself). It checks
 * that every actor passes through the same states, issues the same commands (spawns, CANCEL
 * forwards, emitted events, in order) and ends with the same output. Any machine of the table
 * replays this way; nothing here knows a machine by name except the step-level sugar of
 * hand-written plan scripts.
 */
export async function replay(script: ReplayScript, options: ReplayOptions = {}): Promise<ReplayResult> {
  return script.format === 'recorded' ? new RecordedReplay(script, options).run() : new HandReplay(script, options).run();
}

