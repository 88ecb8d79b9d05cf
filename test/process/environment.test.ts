import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildShellEnv, CREDENTIAL_ENV_PATTERNS, isCredentialEnvName, matchesEnvPattern } from '../../src/executors/environment.js';
import { ProcessGroupRegistry } from '../../src/process/process-groups.js';
import { TrackedStarter, makeTempDir, removeDirs } from './helpers.js';

const starter = new TrackedStarter(new ProcessGroupRegistry());
const dirs: string[] = [];

afterAll(async () => {
  const left = await starter.cleanUp();
  await removeDirs(dirs);
  expect(left).toEqual([]);
});

const hostEnv = {
  PATH: '/usr/bin:/bin',
  HOME: '/home/host',
  USER: 'host',
  LANG: 'C.UTF-8',
  TERM: 'xterm',
  AWS_SECRET_ACCESS_KEY: 'aws-secret',
  AWS_REGION: 'eu-west-1',
  FOO_API_KEY: 'foo-key',
  GITHUB_TOKEN: 'gh',
  DOCKER_HOST: 'tcp://x',
  MY_SETTING: 'kept',
  NOT_ALLOWED: 'dropped',
  EMPTY: '',
  UNSET: undefined,
};

describe('buildShellEnv', () => {
  it('copies the baseline, adds allowed names, strips credentials and sets HOME, TMPDIR and the runtime dir last', () => {
    const scratchDir = makeTempDir('env', dirs);
    const env = buildShellEnv({
      hostEnv,
      allow: ['MY_SETTING', 'FOO_API_KEY', 'AWS_REGION', 'GITHUB_TOKEN', 'EMPTY', 'UNSET', 'HOME'],
      scratchDir,
      runtimeDir: '/opt/runtime',
    });
    expect(env).toEqual({
      PATH: '/usr/bin:/bin',
      USER: 'host',
      LANG: 'C.UTF-8',
      TERM: 'xterm',
      MY_SETTING: 'kept',
      EMPTY: '',
      HOME: join(scratchDir, 'home'),
      TMPDIR: join(scratchDir, 'tmp'),
      MURMUR_RUNTIME_DIR: '/opt/runtime',
      CAPSULE_RUNTIME_DIR: '/opt/runtime',
    });
    expect(statSync(join(scratchDir, 'home')).isDirectory()).toBe(true);
    expect(statSync(join(scratchDir, 'tmp')).isDirectory()).toBe(true);
  });

  it('passes a declared secret even when its name is credential-shaped, but not past the strip policy (docs/security.md#masked-secrets)', () => {
    const scratchDir = makeTempDir('env', dirs);
    const env = buildShellEnv({ hostEnv, allow: ['FOO_API_KEY'], secrets: ['GITHUB_TOKEN', 'AWS_REGION'], strip: ['AWS_*'], scratchDir, runtimeDir: '/r' });
    expect(env['GITHUB_TOKEN']).toBe('gh');
    expect(env['FOO_API_KEY']).toBeUndefined();
    expect(env['AWS_REGION']).toBeUndefined();
  });

  it('strips extra policy patterns and keeps a name like __proto__ as an ordinary variable', () => {
    const scratchDir = makeTempDir('env', dirs);
    const env = buildShellEnv({
      hostEnv: { PATH: '/bin', SESSION_SECRET_X: 's', ['__proto__']: 'p' },
      allow: ['SESSION_SECRET_X', '__proto__'],
      strip: ['*SECRET*'],
      scratchDir,
      runtimeDir: '/r',
    });
    expect(Object.hasOwn(env, '__proto__')).toBe(true);
    expect(env['SESSION_SECRET_X']).toBeUndefined();
  });

  it('throws naming the directory when HOME cannot be created', () => {
    // (Not under /proc: Node's recursive mkdirSync loops forever there, retrying ENOENT.)
    const notADir = join(makeTempDir('env', dirs), 'file');
    writeFileSync(notADir, '');
    expect(() => buildShellEnv({ hostEnv, allow: [], scratchDir: notADir, runtimeDir: '/r' })).toThrow(
      `cannot create directory '${notADir}/home' for the shell environment: ENOTDIR`,
    );
  });

  it('keeps only the absolute entries of PATH: relative and empty ones would resolve against the working directory', () => {
    const scratchDir = makeTempDir('env', dirs);
    for (const path of [':/usr/bin', '.:/usr/bin', '/usr/local/bin::/usr/bin', 'node_modules/.bin:/usr/bin:']) {
      expect(buildShellEnv({ hostEnv: { PATH: path }, allow: [], scratchDir, runtimeDir: '/r' })['PATH']).toBe(path.startsWith('/usr/local') ? '/usr/local/bin:/usr/bin' : '/usr/bin');
    }
  });

  it('gives a real process only the built variables', async () => {
    const scratchDir = makeTempDir('env', dirs);
    const env = buildShellEnv({ hostEnv: { ...process.env, ...hostEnv, PATH: process.env['PATH'] }, allow: ['FOO_API_KEY'], scratchDir, runtimeDir: '/r' });
    const result = await starter.start({ file: 'env', args: [], env }).done;
    const names = result.stdout.toString().split('\n').filter(Boolean).map((line) => line.slice(0, line.indexOf('=')));
    expect(names.sort()).toEqual(Object.keys(env).sort());
    expect(names.some((name) => name.startsWith('AWS_') || name.endsWith('_API_KEY'))).toBe(false);
  });
});

describe('credential patterns', () => {
  it('match exact names, PREFIX*, *SUFFIX and *MIDDLE*, ignoring case', () => {
    expect(matchesEnvPattern('AWS_SECRET', 'AWS_*')).toBe(true);
    expect(matchesEnvPattern('FOO_API_KEY', '*_API_KEY')).toBe(true);
    expect(matchesEnvPattern('MY_TOKEN_FILE', '*TOKEN*')).toBe(true);
    expect(matchesEnvPattern('gh_token', 'GH_TOKEN')).toBe(true);
    expect(matchesEnvPattern('GH_TOKENS', 'GH_TOKEN')).toBe(false);
    expect(matchesEnvPattern('XAWS_', 'AWS_*')).toBe(false);
  });

  it('cover the docs/shell-commands.md#environment list', () => {
    for (const name of ['ANTHROPIC_API_KEY', 'KUBECONFIG', 'NPM_TOKEN', 'PYPI_TOKEN', 'CARGO_REGISTRY_TOKEN', 'DOCKER_CONFIG', 'HUGGING_FACE_HUB_TOKEN', 'openai_api_key']) {
      expect(isCredentialEnvName(name)).toBe(true);
    }
    for (const name of ['PATH', 'HOME', 'LANG', 'API_KEYS_DIR']) expect(isCredentialEnvName(name)).toBe(false);
    expect(CREDENTIAL_ENV_PATTERNS).toContain('*_API_KEY');
  });
});
