/**
 * Fuzz target: manifests (`capsule.json`) as `capsule run` and `validate` load them — the file's
 * text through `parseManifestText`, and one input in eight through `loadManifest` on a real file.
 * Every text ends in a manifest or a clean refusal naming the file; an accepted manifest has the
 * normalised shapes the runtime reads without checking (allow-lists of strings, tools with argv
 * and a positive timeout).
 */
import fc from 'fast-check';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadManifest, parseManifestText, type Manifest } from '../../src/manifest.js';
import { jsonFileText, manifestObject } from './arbitraries.js';
import { fuzzTarget } from './harness.js';
import { tempDirForTests } from './support.js';
import { expectCleanText, must } from './verdicts.js';

const dir = tempDirForTests('manifest');

const isStringArray = (value: unknown): boolean => Array.isArray(value) && value.every((item) => typeof item === 'string');

function expectNormalised(manifest: Manifest): void {
  must(isStringArray(manifest.capabilities.shell.allow), 'capabilities.shell.allow is an array of strings');
  must(isStringArray(manifest.capabilities.spawn.allow), 'capabilities.spawn.allow is an array of strings');
  const env = manifest.capabilities.env.allow;
  must(env === undefined || isStringArray(env), 'capabilities.env.allow is absent or an array of strings');
  const grace = manifest.lifecycle.shell_grace_secs;
  must(grace === undefined || (typeof grace === 'number' && grace >= 0), 'shell_grace_secs is absent or ≥ 0');
  for (const tool of Object.values(manifest.tools)) {
    must(isStringArray(tool.command) && tool.command.length > 0, 'a tool command is a non-empty array of strings');
    must(typeof tool.timeout_secs === 'number' && tool.timeout_secs > 0, 'a tool timeout is positive');
  }
}

fuzzTarget({
  name: 'manifests through parseManifestText and loadManifest',
  inputs: fc.record({ text: jsonFileText(manifestObject), viaFile: fc.nat({ max: 7 }).map((n) => n === 0) }),
  check: async ({ text, viaFile }) => {
    let outcome: ReturnType<typeof parseManifestText>;
    if (viaFile) {
      const path = join(dir.path, 'capsule.json');
      await writeFile(path, text);
      outcome = await loadManifest(path);
    } else {
      outcome = parseManifestText(text, 'capsule.json');
    }
    if (!outcome.ok) {
      expectCleanText(outcome.error, 'the manifest error');
      must(outcome.error.includes('capsule.json'), `the manifest error names the file: ${outcome.error}`);
      return;
    }
    for (const warning of outcome.warnings) expectCleanText(warning.message, 'a manifest warning');
    expectNormalised(outcome.manifest);
  },
});
