/**
 * Jest globalSetup: builds the project once before any test file runs, as `npm run build` does
 * (`tsc -p tsconfig.json`, the spawn helper, then the bundle of scripts/bundle.js), so the CLI
 * tests in test/cli/ run the built `dist/bundle/capsule.js` as a user would, and sessions start
 * the bundled spawner (`dist/bundle/spawner.cjs`).
 *
 * Type errors do not stop the tests: tsc still emits JavaScript, and type checking is the job of
 * `npm run build` (which `npm ci` runs through `prepare`) and `tsc --noEmit`. They are printed, and
 * the run fails only when the CLI entry point was not emitted.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function globalSetup(_globalConfig: unknown, projectConfig: { readonly rootDir: string }): void {
  const root = projectConfig.rootDir;
  const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
  try {
    execFileSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: root, stdio: 'pipe', encoding: 'utf8' });
  } catch (error) {
    const output = (error as { stdout?: string }).stdout ?? String(error);
    process.stderr.write(`\nglobalSetup: \`tsc -p tsconfig.json\` reported errors (JavaScript was still emitted):\n${output}\n`);
  }
  // The spawn helper (src/process/spawn/capsule-spawn.c), as `npm run build` compiles it; without a
  // C compiler the tests of the helper-only behaviours skip with a visible reason.
  execFileSync(process.execPath, [join(root, 'dist', 'src', 'process', 'spawn', 'build.js')], { cwd: root, stdio: 'inherit' });
  // The programs that ship (src/process/programs.ts): a bundle error fails the run here.
  execFileSync(process.execPath, [join(root, 'scripts', 'bundle.js')], { cwd: root, stdio: 'inherit' });
  // package.json's `bin` (the same file as src/process/programs.ts CLI_PROGRAM: test/architecture/bundle.test.ts).
  const bin = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: { capsule: string } }).bin.capsule;
  const cli = join(root, bin);
  if (!existsSync(cli)) throw new Error(`globalSetup: building with \`tsc -p tsconfig.json\` and scripts/bundle.js did not produce ${cli}`);
  chmodSync(cli, 0o755);
  // `capsule run`'s code cache (src/cli/code-cache.ts) goes to a directory of this test run, not the
  // user's ~/.cache (test/support/global-teardown.ts removes it); the workers inherit the variable.
  // Tests of where the cache lives by default set their own.
  process.env['CAPSULE_CODE_CACHE'] = mkdtempSync(join(tmpdir(), 'capsule-test-code-cache-'));
}
