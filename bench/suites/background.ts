/**
 * Suite 6, background commands: how soon a `backgroundCommand` `wait` returns after a
 * demoted command's exit, with 1 MiB of output printed after the demotion (target ≤ 100 ms,
 * median), and how long a `stop` of a command that takes SIGTERM takes to prove its tree gone.
 * Real sessions on the machine's containment backend, as `capsule serve` opens them.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Session } from '../../src/session/session.js';
import type { Row, Suite, SuiteContext } from '../harness.js';
import { now } from '../harness.js';

async function oneSession<T>(dir: string, body: (session: Session) => Promise<T>): Promise<T> {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const session = Session.open({ workdir: dir, recordsDir: join(dir, 'records'), background: { allow: ['bash'], graceMs: 0, onAbandonmentReport: () => undefined } });
  try {
    return await body(session);
  } finally {
    await session.end('ok');
  }
}

export const backgroundSuite: Suite = {
  name: 'background',
  title: 'Suite 6 — background commands (wait after the exit, stop)',
  async run(ctx: SuiteContext) {
    const runs = ctx.quick ? 2 : ctx.runs;
    const dir = join(ctx.tmpDir, 'background');
    const payload = join(ctx.tmpDir, 'payload.bin');
    writeFileSync(payload, Buffer.alloc(1024 * 1024, 7));
    const waitLatency: number[] = [];
    const stopMs: number[] = [];
    for (let i = 0; i < runs; i++) {
      ctx.log(`background: run ${i + 1}/${runs}`);
      waitLatency.push(
        await oneSession(dir, async (session) => {
          const detached = await session.background.run({ binary: 'bash', command: `sleep 0.3; cat '${payload}'` });
          if (detached.status !== 'detached') throw new Error(`expected a demotion, got ${detached.status}`);
          await session.background.operate({ operation: 'wait', work_id: detached.work_id, wait_secs: 30 });
          const returned = Date.now();
          const exitedAt = session.background.loaded?.index.completion(detached.work_id)?.exited_at_ms ?? returned;
          return returned - exitedAt;
        }),
      );
      stopMs.push(
        await oneSession(dir, async (session) => {
          const detached = await session.background.run({ binary: 'bash', command: 'sleep 300 & sleep 300 & wait' });
          if (detached.status !== 'detached') throw new Error(`expected a demotion, got ${detached.status}`);
          const started = now();
          await session.background.operate({ operation: 'stop', work_id: detached.work_id });
          return now() - started;
        }),
      );
    }
    const rows: Row[] = [
      {
        case: '1 MiB after the demotion',
        subject: 'wait returns after the exit',
        unit: 'ms',
        samples: waitLatency,
        target: { max: 100, on: 'median', text: '≤ 100 ms' },
      },
      { case: 'stop, 3 processes taking SIGTERM', subject: 'stop (tree proven gone)', unit: 'ms', samples: stopMs },
    ];
    return rows;
  },
};
