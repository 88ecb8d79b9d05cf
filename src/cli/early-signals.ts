/**
 * Signals that arrive while `capsule` is still loading its modules (a few hundred ms) would kill
 * it with Node's default action, before `capsule run` has installed its cancel handlers. The entry
 * point holds them here instead; the command that runs takes them over (`capsule run` replays
 * them as a cancel) or, for every other command, they end the process as they would have.
 */
const HELD: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
const arrived: NodeJS.Signals[] = [];
const remember = (signal: NodeJS.Signals): void => {
  arrived.push(signal);
};
let holding = false;

/**
 * Signals that would open Node's inspector (`SIGUSR1` on Linux): while a listener exists, Node
 * leaves the inspector closed (a step that could `kill -USR1` the runtime could attach
 * a debugger — unauthenticated — and read its memory and environment). Never removed.
 */
const INSPECTOR_SIGNALS: readonly NodeJS.Signals[] = ['SIGUSR1'];
let inspectorClosed = false;

/**
 * Keeps the inspector from being opened by a signal for the rest of this process's life, in every
 * command. Call first thing. Idempotent. A signal that arrives is ignored (nothing is printed:
 * whoever sent it gets no answer).
 */
export function keepInspectorClosed(): void {
  if (inspectorClosed) return;
  inspectorClosed = true;
  for (const signal of INSPECTOR_SIGNALS) process.on(signal, () => {});
}

/** Starts holding SIGINT, SIGTERM and SIGHUP. Call first thing, before loading anything heavy. */
export function holdEarlySignals(): void {
  if (holding) return;
  holding = true;
  for (const signal of HELD) process.on(signal, remember);
}

/** Stops holding and returns the signals that arrived meanwhile, in order. Idempotent. */
export function releaseEarlySignals(): NodeJS.Signals[] {
  if (holding) {
    holding = false;
    for (const signal of HELD) process.off(signal, remember);
  }
  return arrived.splice(0);
}
