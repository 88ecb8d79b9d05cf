/** Jest with ts-jest in ESM mode (execa and uuid are ESM-only). Run through `npm test`. */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.test.json' }] },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  testTimeout: 30000,
};
