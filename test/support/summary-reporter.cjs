/**
 * Prints one plain closing line after Jest's own summary, e.g. `tests: 1073 passed, 0 failed, 2 skipped`,
 * so a CI that reads closing lines (not Jest's format) sees the counts.
 */
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
    process.stdout.write(`\ntests: ${results.numPassedTests} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}\n`);
  }
}
module.exports = SummaryReporter;
