/**
 * `capsule replay --junit FILE` (docs/event-log.md#batch-replay): one `testsuite` for the replay,
 * one `testcase` per file replayed, with its time; a `failure` for a divergence (its first line as
 * the message, the whole divergence as the text), an `error` for a file that cannot be replayed.
 * Written with junit-report-builder, loaded only when `--junit` is given.
 */
import junitReportBuilder, { type Builder } from 'junit-report-builder';

// The package sets `module.exports` to its builder while its types say `export default`: either shape is taken.
const builder: Builder = (junitReportBuilder as unknown as { default?: Builder }).default ?? (junitReportBuilder as unknown as Builder);

/** One file's result as the JUnit report shows it. */
export interface ReplayCase {
  readonly file: string;
  readonly outcome: 'identical' | 'updated' | 'diverged' | 'refused';
  readonly durationMs: number;
  /** The result as `capsule replay` prints it (a divergence's first line is its summary). */
  readonly text: string;
}

export function replayJunitXml(cases: readonly ReplayCase[], startedAt: Date): string {
  const junit = builder.newBuilder().name('capsule replay');
  const suite = junit
    .testSuite()
    .name('capsule replay')
    .timestamp(startedAt)
    .time(cases.reduce((sum, c) => sum + c.durationMs, 0) / 1000);
  for (const c of cases) {
    const test = suite.testCase().className('replay').name(c.file).time(c.durationMs / 1000).property('outcome', c.outcome);
    if (c.outcome === 'diverged') test.failure(c.text.split('\n')[0] ?? 'diverged', 'divergence').stacktrace(c.text);
    else if (c.outcome === 'refused') test.error(c.text, 'refused');
  }
  return junit.build();
}
