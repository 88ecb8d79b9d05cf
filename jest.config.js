/** Jest with ts-jest in ESM mode (execa and uuid are ESM-only). Run through `npm test`. */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.test.json' }] },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  testTimeout: 30000,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.cjs'],
  // Builds dist/ once per run: the CLI tests (test/cli/) run the built `dist/src/cli.js`.
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  // The example plans build into examples/<name>/build/ (package.json copies would collide in the haste map).
  modulePathIgnorePatterns: ['<rootDir>/examples/'],
};
