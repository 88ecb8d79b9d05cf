/**
 * `--network MODE` of `capsule run`, `capsule serve` and `capsule doctor` (docs/containment.md#network).
 * Kept apart from the process layer: `capsule validate` loads the CLI's option parsers and runs
 * nothing.
 */
import type { NetworkMode } from '../process/network.js';

const MODES: readonly NetworkMode[] = ['host', 'session'];

/** The mode, undefined when not given, or the usage error. */
export function parseNetworkOption(text: string | undefined): NetworkMode | undefined | Error {
  if (text === undefined) return undefined;
  if ((MODES as readonly string[]).includes(text)) return text as NetworkMode;
  return new Error(`--network ${text} is not one of ${MODES.join(', ')}`);
}
