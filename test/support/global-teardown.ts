/**
 * Jest globalTeardown: removes the code-cache directory of this test run that
 * test/support/global-setup.ts made (`CAPSULE_CODE_CACHE`).
 */
import { rmSync } from 'node:fs';
import { basename } from 'node:path';

export default function globalTeardown(): void {
  const dir = process.env['CAPSULE_CODE_CACHE'];
  if (dir !== undefined && basename(dir).startsWith('capsule-test-code-cache-')) rmSync(dir, { recursive: true, force: true });
}
