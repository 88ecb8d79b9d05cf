/**
 * The plan's `slicePacer` effect (machines/plan.machine.ts): when the plan holds dispatched steps
 * it has no step actor for yet (a wide wave), it grants the next slice (`SLICE.READY`) on a later
 * turn of the event loop, once few of the session's launches wait to start. So a
 * wide wave is dispatched a slice per turn — signals and serve requests are answered in between —
 * and a step whose process cannot start yet waits as data in the plan, not as a step actor, an
 * attempt and a queued launch (docs/architecture.md#waves-and-step-pools).
 */
import { fromCallback } from 'xstate';
import type { SliceReadyEvent, SliceWantedEvent } from '../../machines/plan.machine.js';
import type { Containment } from '../process/containment.js';

/**
 * A slice is granted once fewer than this many of the session's launches wait to start: enough to
 * keep the spawner's 8 in flight busy, few enough that a cancel has little to withdraw.
 */
export const LAUNCHES_LOW = 64;

/** The `slicePacer` actor logic of one plan run over the session's containment. */
export function slicePacer(containment: Pick<Containment, 'whenLaunchesBelow'>, launchesLow = LAUNCHES_LOW) {
  return fromCallback<SliceWantedEvent>(({ sendBack, receive }) => {
    let stopped = false;
    receive(() => {
      setImmediate(() => {
        if (stopped) return;
        void containment.whenLaunchesBelow(launchesLow).then(() => {
          if (stopped) return;
          const ready: SliceReadyEvent = { type: 'SLICE.READY' };
          sendBack(ready);
        });
      });
    });
    return () => {
      stopped = true;
    };
  });
}
