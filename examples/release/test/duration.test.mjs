import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatDuration } from '../build/lib/index.mjs';

test('formatDuration picks a unit for each scale', () => {
  assert.equal(formatDuration(850), '850ms');
  assert.equal(formatDuration(1200), '1.2s');
  assert.equal(formatDuration(125_000), '2m05s');
  assert.equal(formatDuration(3_720_000), '1h02m');
});

test('formatDuration refuses negative durations', () => {
  assert.throws(() => formatDuration(-5), RangeError);
});
