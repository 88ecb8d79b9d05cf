import { replayFile } from '../../src/replay/replay.js';
it('replays rec1', async () => {
  const r = await replayFile('/tmp/rec1/events.jsonl');
  console.log(JSON.stringify(r, null, 1).slice(0, 3000));
});
