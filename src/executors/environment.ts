/**
 * The environment of a shell step or command tool, built fresh for every process (`docs/shell-commands.md#environment`,
 * newest rule; `docs/library.md`; docs/manifest.md#command-tools: command tools get the same construction).
 */
import { chownSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { trustedPath } from '../process/resolve-binary.js';

/** Host variables copied when set (`docs/shell-commands.md#environment`, newest list). */
export const BASELINE_ENV_NAMES: readonly string[] = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'LANG',
  'LC_ALL',
  'CARGO_HOME',
  'RUSTUP_HOME',
  'TERM',
];

/**
 * Credential-shaped names removed after everything else is copied (`docs/shell-commands.md#environment`). Pattern
 * forms: exact name, `PREFIX*`, `*SUFFIX`, `*MIDDLE*`. Matching ignores case (stripping
 * `openai_api_key` too is the safe side).
 */
export const CREDENTIAL_ENV_PATTERNS: readonly string[] = [
  'ANTHROPIC_API_KEY',
  'OPENAI_API_KEY',
  'GOOGLE_API_KEY',
  'HUGGING_FACE_HUB_TOKEN',
  'NEXUS_API_KEY',
  'AWS_*',
  'GITHUB_TOKEN',
  'GH_TOKEN',
  'DOCKER_*',
  'KUBECONFIG',
  'NPM_TOKEN',
  'PYPI_TOKEN',
  'CARGO_REGISTRY_TOKEN',
  '*_API_KEY',
];

/**
 * Whether variable `name` matches `pattern`: exact name, `PREFIX*`, `*SUFFIX` or `*MIDDLE*`
 * (a lone `*` matches every name). Case-insensitive.
 */
export function matchesEnvPattern(name: string, pattern: string): boolean {
  return matchesCompiled(name.toUpperCase(), compileEnvPattern(pattern));
}

/** A pattern of {@link matchesEnvPattern}, upper-cased and taken apart once. */
interface EnvPattern {
  readonly kind: 'exact' | 'prefix' | 'suffix' | 'middle';
  readonly text: string;
}

function compileEnvPattern(pattern: string): EnvPattern {
  const p = pattern.toUpperCase();
  const starts = p.startsWith('*');
  const ends = p.endsWith('*') && p.length > 1;
  if (starts && ends) return { kind: 'middle', text: p.slice(1, -1) };
  if (starts) return { kind: 'suffix', text: p.slice(1) };
  if (ends) return { kind: 'prefix', text: p.slice(0, -1) };
  return { kind: 'exact', text: p };
}

/** {@link matchesEnvPattern} with `name` already upper-cased and the pattern compiled. */
function matchesCompiled(upperName: string, pattern: EnvPattern): boolean {
  switch (pattern.kind) {
    case 'middle':
      return upperName.includes(pattern.text);
    case 'suffix':
      return upperName.endsWith(pattern.text);
    case 'prefix':
      return upperName.startsWith(pattern.text);
    case 'exact':
      return upperName === pattern.text;
  }
}

// Compiled once: every step's environment checks each of its names against all of them.
const CREDENTIAL_PATTERNS_COMPILED: readonly EnvPattern[] = CREDENTIAL_ENV_PATTERNS.map(compileEnvPattern);

/** Whether `name` is credential-shaped: matches {@link CREDENTIAL_ENV_PATTERNS} or one of `extraPatterns`. */
export function isCredentialEnvName(name: string, extraPatterns: readonly string[] = []): boolean {
  const upper = name.toUpperCase();
  return (
    CREDENTIAL_PATTERNS_COMPILED.some((pattern) => matchesCompiled(upper, pattern)) ||
    extraPatterns.some((pattern) => matchesCompiled(upper, compileEnvPattern(pattern)))
  );
}

/** Inputs of {@link buildShellEnv}. */
export interface ShellEnvInput {
  /** The runtime's own environment (normally `process.env`); only read. */
  readonly hostEnv: Readonly<Record<string, string | undefined>>;
  /** Exact names whose host values are passed through (manifest `capabilities.env.allow`). Credential-shaped names are still stripped. */
  readonly allow: readonly string[];
  /**
   * Names passed like `allow` that are declared secrets (manifest `capabilities.env.secrets`): kept
   * even when credential-shaped (declaring one is the opt-in; its value is masked in output,
   * `docs/security.md#masked-secrets`). The `strip` policy still removes them.
   */
  readonly secrets?: readonly string[];
  /**
   * The session's scratch directory (`Session.scratchDir`): `HOME` = `<scratchDir>/home`,
   * `TMPDIR` = `<scratchDir>/tmp`. Not in the records directory's tree (a step must not
   * be able to plant files next to the records the runtime writes).
   */
  readonly scratchDir: string;
  /** The user the process runs as (`--run-as`): HOME and TMPDIR are made theirs (mode 0700). Absent: the runtime's own. */
  readonly owner?: { readonly uid: number; readonly gid: number } | null;
  /** The runtime directory, announced read-only as `MURMUR_RUNTIME_DIR` and `CAPSULE_RUNTIME_DIR`. */
  readonly runtimeDir: string;
  /** Extra strip patterns (policy `shell_strip_env`), same forms as {@link CREDENTIAL_ENV_PATTERNS}. */
  readonly strip?: readonly string[];
}

/**
 * Builds the complete environment of one shell step / command tool, later steps winning:
 * 1. {@link BASELINE_ENV_NAMES} copied from `hostEnv` when set (an empty value counts as set);
 * 2. host values of the names in `allow` and `secrets`;
 * 3. every credential-shaped name removed ({@link isCredentialEnvName}, plus `strip`), but a
 *    declared secret only by `strip`;
 * 4. `PATH` reduced to its absolute entries (relative and empty ones would make lookups depend on
 *    the working directory, `src/process/resolve-binary.ts`);
 * 5. `HOME` = `<scratchDir>/home` and `TMPDIR` = `<scratchDir>/tmp` (both created if missing,
 *    owned by `owner` when given), `MURMUR_RUNTIME_DIR` = `CAPSULE_RUNTIME_DIR` = `runtimeDir`.
 * Nothing else from the host leaks in (pass the result with execa's `extendEnv: false`).
 *
 * @throws {Error} when the home or temp directory cannot be created (the call must then be
 *   refused without spawning, `docs/shell-commands.md#allow-list`); the message names the directory.
 */
export function buildShellEnv(input: ShellEnvInput): Record<string, string> {
  // A Map, then Object.fromEntries: a name such as `__proto__` stays an ordinary own property.
  const env = new Map<string, string>();
  const secrets = new Set(input.secrets ?? []);
  for (const name of [...BASELINE_ENV_NAMES, ...input.allow, ...secrets]) {
    const value = Object.hasOwn(input.hostEnv, name) ? input.hostEnv[name] : undefined;
    if (value !== undefined) env.set(name, value);
  }
  for (const name of [...env.keys()]) {
    const stripped = secrets.has(name) ? (input.strip ?? []).some((pattern) => matchesEnvPattern(name, pattern)) : isCredentialEnvName(name, input.strip);
    if (stripped) env.delete(name);
  }
  const path = env.get('PATH');
  if (path !== undefined) env.set('PATH', trustedPath(path).text);
  const home = join(input.scratchDir, 'home');
  const tmp = join(input.scratchDir, 'tmp');
  const owner = input.owner ?? null;
  for (const dir of [home, tmp]) {
    try {
      if (owner === null) mkdirSync(dir, { recursive: true });
      else {
        // The parents stay the runtime's (and traversable); only home/ and tmp/ are the user's.
        mkdirSync(dirname(dir), { recursive: true });
        mkdirSync(dir, { recursive: true, mode: 0o700 });
        chownSync(dir, owner.uid, owner.gid);
      }
    } catch (error) {
      throw new Error(`cannot create directory '${dir}' for the shell environment: ${(error as Error).message}`, { cause: error });
    }
  }
  env.set('HOME', home);
  env.set('TMPDIR', tmp);
  env.set('MURMUR_RUNTIME_DIR', input.runtimeDir);
  env.set('CAPSULE_RUNTIME_DIR', input.runtimeDir);
  return Object.fromEntries(env);
}
