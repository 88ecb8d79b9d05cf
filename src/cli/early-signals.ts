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
