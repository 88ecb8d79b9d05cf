/**
 * The verdict of the replay fuzz targets on one `capsule replay` (run in-process through
 * `replayCommand`, output captured): exit 0 or 1 with the verdict on stdout, or exit 2 with a
 * clean refusal naming the file on stderr and nothing on stdout; no stack trace, no internal
 * error, no exception, and no uncaught one after the verdict (XState rethrows an unobserved
 * actor's error on a later turn of the event loop: the check waits for that turn).
 */
import { statSync } from 'node:fs';
import { replayCommand } from '../../src/cli/replay.js';
import { expectCleanText, expectNoCrashText, must } from './verdicts.js';

/** Bytes a verdict may print beyond the size of the file it replays (`--json` lists each actor's states). */
const VERDICT_BYTES = 20_000;

export async function expectReplayVerdict(file: string, json: boolean): Promise<void> {
  let stdout = '';
  let stderr = '';
  const output = {
    stdout: { write: (text: string) => ((stdout += text), true) },
    stderr: { write: (text: string) => ((stderr += text), true) },
  } as unknown as Parameters<typeof replayCommand>[2];
  const code = await replayCommand(file, { json }, output);
  // An error XState reports for an unobserved actor arrives on a later timer turn.
  await new Promise<void>((resolve) => setTimeout(resolve, 0));
  must(code === 0 || code === 1 || code === 2, `exit code ${String(code)}`);
  if (code === 2) {
    must(stdout === '', `a refusal printed on stdout: ${stdout.slice(0, 300)}`);
    expectCleanText(stderr, 'the refusal');
    must(stderr.startsWith('error: ') && stderr.includes(file), `the refusal names the file: ${stderr.slice(0, 300)}`);
    return;
  }
  must(stderr === '', `a verdict with stderr: ${stderr.slice(0, 300)}`);
  expectNoCrashText(stdout, 'the verdict');
  const bound = statSync(file).size * 2 + VERDICT_BYTES;
  must(stdout.length <= bound, `the verdict is ${stdout.length} characters (more than ${bound})`);
  if (json) {
    const parsed = JSON.parse(stdout) as { identical?: unknown };
    must(parsed.identical === (code === 0), `--json says identical: ${String(parsed.identical)} with exit ${code}`);
  } else {
    must(stdout.startsWith(code === 0 ? 'identical: ' : 'diverged at seq '), `the verdict's first word: ${stdout.slice(0, 200)}`);
    for (const line of stdout.split('\n')) must(line.length <= 2_500, `a verdict line of ${line.length} characters`);
  }
}
