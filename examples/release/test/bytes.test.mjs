import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatBytes, parseBytes } from '../build/lib/index.mjs';

test('formatBytes keeps small counts in bytes', () => {
  assert.equal(formatBytes(0), '0 B');
  assert.equal(formatBytes(1023), '1023 B');
});

test('formatBytes switches unit at 1024', () => {
  assert.equal(formatBytes(1024), '1.0 KiB');
  assert.equal(formatBytes(1536), '1.5 KiB');
  assert.equal(formatBytes(3 * 1024 ** 2), '3.0 MiB');
});

test('formatBytes refuses negative counts', () => {
  assert.throws(() => formatBytes(-1), RangeError);
});

test('parseBytes reads what formatBytes writes', () => {
  for (const bytes of [0, 512, 1536, 5 * 1024 ** 3]) assert.equal(parseBytes(formatBytes(bytes, 3)), bytes);
  assert.throws(() => parseBytes('lots'), SyntaxError);
});
