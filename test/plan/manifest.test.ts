import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  loadManifest,
  manifestJsonSchema,
  parseManifestText,
  schemaFileTexts,
  writeSchemas,
} from '../../src/manifest.js';

/** The example manifest of docs/manifest.md. */
const DESIGN_EXAMPLE = {
  name: 'demo',
  version: '0.1.0',
  capabilities: {
    shell: { allow: ['bash', 'make'] },
    spawn: { allow: ['local/worker'], workdir_snapshot: [] },
    env: { allow: ['PATH', 'HOME', 'LANG'] },
  },
  lifecycle: { shell_grace_secs: 10 },
  tools: { 'word-count': { command: ['node', 'tools/word-count.mjs'], timeout_secs: 60 } },
  entry: { plan: 'plans/main.json' },
};

/** The error of parsing `value` as capsule.json, failing the test when it parses. */
function manifestError(value: unknown): string {
  const parsed = parseManifestText(JSON.stringify(value), 'capsule.json');
  if (parsed.ok) throw new Error('expected a manifest error');
  return parsed.error;
}

describe('parseManifestText', () => {
  it('parses the docs/manifest.md example and fills the missing lifecycle default', () => {
    const parsed = parseManifestText(JSON.stringify(DESIGN_EXAMPLE), 'capsule.json');
    expect(parsed).toEqual({
      ok: true,
      warnings: [],
      manifest: {
        ...DESIGN_EXAMPLE,
        lifecycle: { shell_grace_secs: 10, delegation_deadline_secs: 600 },
      },
    });
  });

  it('leaves shell_grace_secs absent when it is not given (no demotion clock)', () => {
    const parsed = parseManifestText('{"lifecycle":{}}', 'capsule.json');
    expect(parsed.ok && parsed.manifest.lifecycle.shell_grace_secs).toBeUndefined();
  });

  it('accepts an empty object and fills every default', () => {
    expect(parseManifestText('{}', 'capsule.json')).toEqual({
      ok: true,
      warnings: [],
      manifest: {
        capabilities: { shell: { allow: [] }, spawn: { allow: [], workdir_snapshot: [] }, env: {} },
        lifecycle: { delegation_deadline_secs: 600 },
        tools: {},
      },
    });
  });

  it('gives a tool without timeout_secs the 600 s default', () => {
    const parsed = parseManifestText('{"tools":{"t":{"command":["node","t.mjs"]}}}', 'capsule.json');
    expect(parsed.ok && parsed.manifest.tools['t']).toEqual({ command: ['node', 't.mjs'], timeout_secs: 600 });
  });

  it('accepts an entry command', () => {
    const parsed = parseManifestText('{"entry":{"command":["node","answer.mjs"]}}', 'capsule.json');
    expect(parsed.ok && parsed.manifest.entry).toEqual({ command: ['node', 'answer.mjs'] });
  });

  it('warns that on_log_cap "stop" does nothing without max_log_bytes, and says nothing once the cap is set', () => {
    const inert = parseManifestText(JSON.stringify({ lifecycle: { on_log_cap: 'stop' } }), 'capsule.json');
    expect(inert.ok && inert.warnings).toEqual([
      {
        kind: 'inert_setting',
        path: 'lifecycle.on_log_cap',
        message: 'capsule.json: lifecycle.on_log_cap is "stop" but lifecycle.max_log_bytes is not set, so no log is capped and nothing is stopped: set lifecycle.max_log_bytes to a size in bytes',
      },
    ]);
    const capped = parseManifestText(JSON.stringify({ lifecycle: { on_log_cap: 'stop', max_log_bytes: 1000 } }), 'capsule.json');
    expect(capped.ok && capped.warnings).toEqual([]);
  });

  it('accepts a shell grace of 0 seconds', () => {
    const parsed = parseManifestText('{"lifecycle":{"shell_grace_secs":0}}', 'capsule.json');
    expect(parsed.ok && parsed.manifest.lifecycle.shell_grace_secs).toBe(0);
  });

  describe('errors name the file, the path and the fix', () => {
    it.each<[unknown, string]>([
      [{ tools: { 'word-count': { command: [] } } }, 'capsule.json: tools.word-count.command: expected a non-empty array of strings, got an empty array'],
      [{ tools: { 'word-count': { command: 'node x.mjs' } } }, 'capsule.json: tools.word-count.command: expected a non-empty array of strings, got the string "node x.mjs"'],
      [{ tools: { 'word-count': {} } }, 'capsule.json: tools.word-count.command: expected a non-empty array of strings, got nothing (the key is missing)'],
      [{ tools: { t: { command: ['a', 3] } } }, 'capsule.json: tools.t.command[1]: expected a string, got 3'],
      [{ tools: { t: { command: ['a'], timeout_secs: 0 } } }, 'capsule.json: tools.t.timeout_secs: expected a positive number of seconds, got 0'],
      [{ tools: [] }, 'capsule.json: tools: expected an object mapping each tool name to { "command": [...], "timeout_secs": N }, got an empty array'],
      [{ tools: { t: 'node' } }, 'capsule.json: tools.t: expected a tool object such as { "command": ["node", "tools/x.mjs"] }, got the string "node"'],
      [{ capabilities: { shell: { allow: 'bash' } } }, 'capsule.json: capabilities.shell.allow: expected an array of strings, got the string "bash"'],
      [{ capabilities: { spawn: { allow: [1] } } }, 'capsule.json: capabilities.spawn.allow[0]: expected a string, got 1'],
      [{ capabilities: { env: null } }, 'capsule.json: capabilities.env: expected an object, got null'],
      [{ capabilities: [] }, 'capsule.json: capabilities: expected an object, got an empty array'],
      [{ lifecycle: { shell_grace_secs: -1 } }, 'capsule.json: lifecycle.shell_grace_secs: expected a number of seconds, 0 or more, got -1'],
      [{ lifecycle: { delegation_deadline_secs: '600' } }, 'capsule.json: lifecycle.delegation_deadline_secs: expected a positive number of seconds, got the string "600"'],
      [{ name: 7 }, 'capsule.json: name: expected a string, got 7'],
      [{ entry: {} }, 'capsule.json: entry: declare exactly one of "plan" or "command"'],
      [{ entry: { plan: 'a.json', command: ['x'] } }, 'capsule.json: entry: declare exactly one of "plan" or "command"'],
      [{ entry: { command: [] } }, 'capsule.json: entry.command: expected a non-empty array of strings, got an empty array'],
      [{ entry: 'plans/main.json' }, 'capsule.json: entry: expected { "plan": "plans/main.json" } or { "command": ["prog", "arg"] }, got the string "plans/main.json"'],
      [[], 'capsule.json: top level: expected a JSON object (the capsule manifest), got an empty array'],
    ])('refuses %j', (value, error) => {
      expect(manifestError(value)).toBe(error);
    });

    it('refuses an object that writes a key twice (JSON.parse would keep the last allow list), naming the key, its path, both places and the fix', () => {
      const text = '{\n  "capabilities": { "shell": { "allow": ["ls"] } },\n  "capabilities": { "shell": { "allow": ["rm"] } }\n}';
      expect(parseManifestText(text, 'dir/capsule.json')).toEqual({
        ok: false,
        error: "dir/capsule.json: duplicate key 'capabilities' at capabilities (line 3, column 3), first written at line 2, column 3: remove one of them",
      });
    });

    it('refuses text that is not JSON', () => {
      const parsed = parseManifestText('{', 'dir/capsule.json');
      expect(parsed).toEqual({ ok: false, error: expect.stringMatching(/^dir\/capsule\.json: invalid JSON: /) });
    });
  });

  describe('unknown-key warnings', () => {
    it('warns with the closest key at every known level', () => {
      const parsed = parseManifestText(
        JSON.stringify({
          nmae: 'x',
          capabilities: { shel: {}, spawn: { alow: [] } },
          lifecycle: { shell_grace: 3 },
          tools: { t: { command: ['x'], timout_secs: 3 } },
          entry: { plan: 'p.json', plans: 'q.json' },
        }),
        'capsule.json',
      );
      expect(parsed.ok && parsed.warnings.map((w) => [w.path, w.kind === 'unknown_key' ? w.key : null, w.kind === 'unknown_key' ? w.suggestion : null])).toEqual([
        ['', 'nmae', 'name'],
        ['capabilities', 'shel', 'shell'],
        ['capabilities.spawn', 'alow', 'allow'],
        ['lifecycle', 'shell_grace', 'shell_grace_secs'],
        ['tools.t', 'timout_secs', 'timeout_secs'],
        ['entry', 'plans', 'plan'],
      ]);
    });

    it('suggests the key an unknown manifest key is a truncation of: timeout → timeout_secs, max_log → max_log_bytes', () => {
      const parsed = parseManifestText(JSON.stringify({ lifecycle: { max_log: 1 }, tools: { t: { command: ['x'], timeout: 3 } } }), 'capsule.json');
      expect(parsed.ok && parsed.warnings.map((w) => w.message)).toEqual([
        "capsule.json: lifecycle: unknown key 'max_log' (did you mean 'max_log_bytes'?)",
        "capsule.json: tools.t: unknown key 'timeout' (did you mean 'timeout_secs'?)",
      ]);
    });

    it('words the warning with the file, the path and the suggestion', () => {
      const parsed = parseManifestText('{"capabilities":{"shel":{}}}', 'capsule.json');
      expect(parsed.ok && parsed.warnings[0]?.message).toBe(
        "capsule.json: capabilities: unknown key 'shel' (did you mean 'shell'?)",
      );
    });

    it('names the top level and lists the known keys when nothing is close', () => {
      const parsed = parseManifestText('{"description":"x"}', 'capsule.json');
      expect(parsed.ok && parsed.warnings[0]?.message).toBe(
        "capsule.json: top level: unknown key 'description' is ignored (known keys: name, version, capabilities, lifecycle, tools, entry, cache)",
      );
    });

    it('does not treat tool names as unknown keys', () => {
      const parsed = parseManifestText('{"tools":{"anything":{"command":["x"]}}}', 'capsule.json');
      expect(parsed.ok && parsed.warnings).toEqual([]);
    });
  });
});

describe('loadManifest', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'manifest-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('loads a manifest and reports its absolute directory', async () => {
    const path = join(dir, 'capsule.json');
    await writeFile(path, JSON.stringify(DESIGN_EXAMPLE));
    const loaded = await loadManifest(path);
    expect(loaded).toMatchObject({ ok: true, dir, manifest: { name: 'demo' }, warnings: [] });
  });

  it('names a missing manifest by the path as given', async () => {
    expect(await loadManifest('nope/capsule.json')).toEqual({
      ok: false,
      error: 'failed to read manifest nope/capsule.json: it does not exist',
    });
  });

  it('reports other read errors with the path and the io error', async () => {
    const loaded = await loadManifest(dir);
    expect(loaded).toEqual({ ok: false, error: expect.stringMatching(/^failed to read manifest .+: EISDIR/) });
  });

  it('prefixes shape errors with the path as given', async () => {
    const path = join(dir, 'bad.json');
    await writeFile(path, '{"tools":{"word-count":{"command":[]}}}');
    expect(await loadManifest(path)).toEqual({
      ok: false,
      error: `${path}: tools.word-count.command: expected a non-empty array of strings, got an empty array`,
    });
  });
});

describe('JSON Schemas', () => {
  const committed = (name: string) => readFile(fileURLToPath(new URL(`../../schema/${name}`, import.meta.url)), 'utf8');

  it('keeps schema/manifest.schema.json and schema/plan.schema.json up to date', async () => {
    const texts = schemaFileTexts();
    expect(await committed('manifest.schema.json')).toBe(texts.manifest);
    expect(await committed('plan.schema.json')).toBe(texts.plan);
  });

  it('shows the lifecycle and tool defaults in the manifest schema', () => {
    const schema = manifestJsonSchema() as {
      properties: {
        lifecycle: { properties: Record<string, { default?: unknown }> };
        tools: { additionalProperties: { required: string[]; properties: Record<string, { default?: unknown }> } };
      };
    };
    expect(schema.properties.lifecycle.properties['shell_grace_secs']?.default).toBeUndefined();
    expect(schema.properties.lifecycle.properties['delegation_deadline_secs']?.default).toBe(600);
    expect(schema.properties.tools.additionalProperties.required).toEqual(['command']);
    expect(schema.properties.tools.additionalProperties.properties['timeout_secs']?.default).toBe(600);
  });

  it('writes both schema files into a directory', async () => {
    const out = await mkdtemp(join(tmpdir(), 'schemas-'));
    try {
      const written = await writeSchemas(join(out, 'nested'));
      expect(written).toEqual([join(out, 'nested', 'plan.schema.json'), join(out, 'nested', 'manifest.schema.json')]);
      expect(await readFile(written[1] ?? '', 'utf8')).toBe(schemaFileTexts().manifest);
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });
});
