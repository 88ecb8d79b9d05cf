/**
 * `capsule doctor` and `capsule run --verbose`: what a run would find here — Node,
 * the containment backend and why, isolation and why, the records dir, and what each allowed
 * binary resolves to — and the backend a run actually got.
 */
import { killStartedClis, manifestAllowing, ROOT, runCli, TempDirs, writeJson } from './helpers.js';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { KEPT_CAPABILITIES } from '../../src/process/spawn/helper.js';
import { cgroupUnavailable, pidNamespaceUnavailable } from '../support/backends.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

describe('capsule doctor', () => {
  it('prints Node, the backend and why, isolation, the records dir and what each allowed binary resolves to', async () => {
    const dir = temp.make('doctor');
    writeJson(dir, 'capsule.json', manifestAllowing('bash', 'no-such-binary-capsule'));
    const result = await runCli(['doctor'], { cwd: dir });
    expect(result.code).toBe(0);
    const lines = result.stdout.split('\n');
    expect(lines[0]).toBe(`node: ${process.version}`);
    expect(lines.find((l) => l.startsWith('containment: '))).toMatch(/^containment: (cgroup|process-group) — /);
    expect(lines.find((l) => l.startsWith('isolation: '))).toMatch(/^isolation: (PID namespace|none) — /);
    expect(lines).toContain(`records: ${dir}/.capsule/records: will be created (${dir} is writable)`);
    expect(lines.find((l) => l.startsWith('  node → '))).toMatch(/^ {2}node → \/.*\/node$/);
    expect(lines.find((l) => l.startsWith('  bash → '))).toMatch(/^ {2}bash → \/.*\/bash$/);
    expect(lines).toContain('  no-such-binary-capsule → not found on the trusted PATH (ENOENT)');
  });

  it('says which manifest it read, or that there is none and where it looked, as run does (text and --json)', async () => {
    const withManifest = temp.make('doctor-manifest');
    writeJson(withManifest, 'capsule.json', manifestAllowing('bash'));
    const found = await runCli(['doctor'], { cwd: withManifest });
    expect(found.stdout.split('\n')[1]).toBe(`manifest: ${withManifest}/capsule.json`);
    const given = await runCli(['doctor', '--json', '--manifest', `${withManifest}/capsule.json`], { cwd: temp.make('doctor-elsewhere') });
    expect(JSON.parse(given.stdout)).toMatchObject({ manifest: { path: `${withManifest}/capsule.json` } });
    const without = temp.make('doctor-no-manifest');
    const none = await runCli(['doctor'], { cwd: without });
    expect(none.stdout.split('\n')[1]).toBe(`manifest: none (there is no ${without}/capsule.json; --manifest FILE names one)`);
    expect(JSON.parse((await runCli(['doctor', '--json'], { cwd: without })).stdout)).toMatchObject({ manifest: { path: null, looked: `${without}/capsule.json` } });
  });

  it('follows CAPSULE_CONTAINMENT, says why, and reports as JSON with --json', async () => {
    const dir = temp.make('doctor-json');
    const result = await runCli(['doctor', '--json', '--allow', 'bash'], { cwd: dir, env: { CAPSULE_CONTAINMENT: 'process-group' } });
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as Record<string, unknown>;
    expect(report).toMatchObject({
      ok: true,
      node: { version: process.version, ok: true },
      containment: { ok: true, backend: 'process-group', reason: 'process groups: CAPSULE_CONTAINMENT=process-group' },
      records: { writable: true },
      allow: [{ entry: 'bash', resolved: expect.stringMatching(/\/bash$/) }],
    });
  });

  it('says whether shell steps start in the session spawner, and CAPSULE_SPAWNER=direct turns it off', async () => {
    const dir = temp.make('doctor-spawner');
    const used = JSON.parse((await runCli(['doctor', '--json'], { cwd: dir })).stdout) as Record<string, unknown>;
    expect(used).toMatchObject({ spawner: { used: true } });
    const direct = await runCli(['doctor'], { cwd: dir, env: { CAPSULE_SPAWNER: 'direct' } });
    expect(direct.stdout).toContain('spawner: no — CAPSULE_SPAWNER=direct: shell steps start from the runtime');
  });

  it('exits 1 naming the reason when the forced backend cannot be had', async () => {
    const result = await runCli(['doctor'], { cwd: temp.make('doctor-refused'), env: { CAPSULE_CONTAINMENT: 'cgroup', CAPSULE_SPAWN_HELPER: 'none' } });
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('containment: refused — CAPSULE_CONTAINMENT=cgroup, but cgroups cannot be used here: no spawn helper');
  });
});

describe('what steps get (confinement)', () => {
  const confinable = process.getuid?.() === 0 && pidNamespaceUnavailable === null;
  (confinable ? it : it.skip)(
    `says the capabilities kept, no_new_privs, the seccomp filter, the cgroup namespace, the read-only /sys, runtime files and records root and the hidden key and step cache store, creating nothing${confinable ? '' : ' (skipped: needs root and a PID namespace)'}`,
    async () => {
      const dir = temp.make('doctor-confinement');
      const key = join(temp.make('doctor-key'), 'not-yet');
      const xdg = temp.make('doctor-xdg');
      const store = join(xdg, 'capsule-runtime', 'steps');
      const env = { CAPSULE_KEY_DIR: key, XDG_CACHE_HOME: xdg };
      // The runtime's own files (src/runtime-files.ts): the package the CLI runs from, Node, the code cache (global-setup.ts places it).
      const runtimeFiles = [ROOT, process.execPath, process.env['CAPSULE_CODE_CACHE'] ?? ''];
      const result = await runCli(['doctor', '--json'], { cwd: dir, env });
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout)).toMatchObject({
        confinement: {
          privileged_steps: false,
          capabilities: [...KEPT_CAPABILITIES],
          no_new_privs: true,
          seccomp: true,
          cgroup_namespace: true,
          read_only_kernel: true,
          read_only: [...runtimeFiles, join(dir, '.capsule', 'records')],
          hidden: [key, store],
          reason: '',
        },
      });
      expect(existsSync(key)).toBe(false);
      expect(existsSync(store)).toBe(false);
      const text = await runCli(['doctor'], { cwd: dir, env });
      expect(text.stdout).toContain(
        `steps get: capabilities ${KEPT_CAPABILITIES.join(',')}; no_new_privs; no user namespaces (seccomp); a cgroup namespace; /sys and cgroup filesystems read-only; read-only ${[...runtimeFiles, join(dir, '.capsule', 'records')].join(', ')}; hidden ${key}, ${store}\n`,
      );
    },
  );

  it('says what --privileged-steps would give, and what a run without the spawn helper gets', async () => {
    const dir = temp.make('doctor-privileged');
    const privileged = JSON.parse((await runCli(['doctor', '--json', '--privileged-steps'], { cwd: dir })).stdout) as { confinement: Record<string, unknown> };
    expect(privileged.confinement).toMatchObject({ privileged_steps: true, no_new_privs: false, seccomp: false, cgroup_namespace: false, read_only_kernel: false });
    expect(String(privileged.confinement['reason'])).toMatch(/^privileged steps \(--privileged-steps\): steps keep every capability of the runtime's user/);
    const bare = JSON.parse((await runCli(['doctor', '--json'], { cwd: dir, env: { CAPSULE_SPAWN_HELPER: 'none' } })).stdout) as { confinement: Record<string, unknown> };
    expect(bare.confinement).toMatchObject({ privileged_steps: false, no_new_privs: false, seccomp: false, cgroup_namespace: false, read_only_kernel: false, read_only: [], hidden: [] });
    expect(String(bare.confinement['reason'])).toMatch(/^not confined: no spawn helper \(CAPSULE_SPAWN_HELPER=none\)/);
  });
});

describe('the network and the resource limits', () => {
  const isRoot = process.getuid?.() === 0;
  it("says the network a run would get and whether a session's own can be had here (text and --json)", async () => {
    const dir = temp.make('doctor-network');
    const text = (await runCli(['doctor'], { cwd: dir })).stdout.split('\n');
    expect(text.find((l) => l.startsWith('network: '))).toMatch(
      isRoot ? /^network: host \(the host's network\); session: available here$/ : /^network: host \(the host's network\); session: not available here — making a network namespace needs root/,
    );
    writeJson(dir, 'capsule.json', { capabilities: { network: 'session' } });
    const json = await runCli(['doctor', '--json'], { cwd: dir });
    expect(JSON.parse(json.stdout)).toMatchObject({ network: { mode: 'session', session_available: isRoot }, ok: isRoot });
    expect((await runCli(['doctor', '--network', 'nowhere'], { cwd: dir })).code).toBe(2);
  });

  it('says how each declared limit holds here, and which one is not enforced and why', async () => {
    const dir = temp.make('doctor-limits');
    writeJson(dir, 'capsule.json', { capabilities: { resources: { cpu_secs: 5, pids_max: 50, workdir_max_bytes: 1000000 } } });
    const result = await runCli(['doctor'], { cwd: dir, env: { CAPSULE_CONTAINMENT: 'process-group' } });
    const line = result.stdout.split('\n').find((l) => l.startsWith('resource limits: ')) ?? '';
    expect(line).toContain('cpu_secs by an rlimit set by the spawn helper (RLIMIT_CPU)');
    expect(line).toContain("workdir_max_bytes by the work folder's guard");
    expect(line).toMatch(/pids_max not enforced; .* — capabilities\.resources\.pids_max is not enforced: .*--run-as/);
    const json = JSON.parse((await runCli(['doctor', '--json'], { cwd: dir, env: { CAPSULE_CONTAINMENT: 'process-group' } })).stdout) as { resources: { declared: { enforced_by: Record<string, unknown> } } };
    expect(json.resources.declared.enforced_by).toEqual({ pids: null, cpu: 'rlimit', workdir: 'guard' });
  });
});

describe('--run-as', () => {
  it('refuses a user that does not exist, in doctor and in run, before anything runs', async () => {
    const dir = temp.make('run-as');
    writeJson(dir, 'capsule.json', manifestAllowing('bash'));
    writeJson(dir, 'plan.json', { id: 'v', steps: [{ id: 'a', shell: 'bash -c true' }] });
    const doctor = await runCli(['doctor', '--run-as', 'no-such-user-capsule'], { cwd: dir });
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).toMatch(/^containment: refused — --run-as no-such-user-capsule: /m);
    const run = await runCli(['run', 'plan.json', '--run-as', 'no-such-user-capsule'], { cwd: dir });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^error: the plan could not be run: --run-as no-such-user-capsule: /m);
    expect(run.stdout).toBe('');
  });
});

describe('capsule run --verbose', () => {
  (cgroupUnavailable === null ? it : it.skip)('says which backend and isolation the run got, and why', async () => {
    const dir = temp.make('verbose');
    writeJson(dir, 'capsule.json', manifestAllowing('bash'));
    writeJson(dir, 'plan.json', { id: 'v', steps: [{ id: 'a', shell: 'bash -c true' }] });
    const result = await runCli(['run', 'plan.json', '--verbose'], { cwd: dir, env: { CAPSULE_CONTAINMENT: 'cgroup', CAPSULE_ISOLATION: 'none' } });
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/^containment: cgroup — cgroup v2 \(.*\): one cgroup per session under .*capsule-runtime, one per process tree inside it \(CAPSULE_CONTAINMENT=cgroup\)$/m);
    expect(result.stderr).toContain('isolation: none — no PID namespace: CAPSULE_ISOLATION=none');
  });

  it('prints nothing about containment without --verbose', async () => {
    const dir = temp.make('quiet-containment');
    writeJson(dir, 'capsule.json', manifestAllowing('bash'));
    writeJson(dir, 'plan.json', { id: 'v', steps: [{ id: 'a', shell: 'bash -c true' }] });
    const result = await runCli(['run', 'plan.json'], { cwd: dir });
    expect(result.code).toBe(0);
    expect(result.stderr).not.toContain('containment:');
  });
});
