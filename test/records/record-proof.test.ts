/**
 * The records key and the proof of a record (src/records/record-key.ts, record-proof.ts): the key
 * is made once per user, 0600 in a 0700 directory, and two first runs at once agree on it; a key
 * anyone else could have written or read is not used; a record the session's trace writer signed
 * is proven where it was written, and nothing else is: not an altered one, not one without a mac,
 * not one copied into another directory, not one of another session, not one under another key.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, cpSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RECORD_KEY_BYTES, RECORD_KEY_FILE, recordKey } from '../../src/records/record-key.js';
import { RecordProver, recordSigner } from '../../src/records/record-proof.js';
import { TraceWriter } from '../../src/records/trace-writer.js';
import { ROOT } from '../cli/helpers.js';
import { sessionStartFields } from './session-start-fields.js';

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'capsule-proof-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** An environment whose key directory is `dir` (keyDir's CAPSULE_KEY_DIR). */
const keys = (dir: string): NodeJS.ProcessEnv => ({ CAPSULE_KEY_DIR: dir });

describe('the records key', () => {
  it('is made on first use: 32 bytes, mode 0600, in a directory of mode 0700, and read back the same', () => {
    const dir = join(root, 'state', 'capsule-runtime');
    const made = recordKey({ create: true, env: keys(dir) });
    expect(made.key?.length).toBe(RECORD_KEY_BYTES);
    expect(statSync(join(dir, RECORD_KEY_FILE)).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readFileSync(join(dir, RECORD_KEY_FILE)).equals(made.key as Buffer)).toBe(true);
  });

  it('is never made by a reader: without a key nothing is proven, and the reason says so', () => {
    const dir = join(root, 'none');
    const read = recordKey({ env: keys(dir) });
    expect(read.key).toBeNull();
    expect(read.key === null && read.reason).toMatch(/there is none/);
    mkdirSync(join(root, 'records'));
    const proof = new RecordProver(join(root, 'records'), keys(dir)).prove({ event_type: 'session_start', session_id: 's', mac: '0'.repeat(64) });
    expect(proof).toEqual({ proven: false, reason: expect.stringContaining(`no record can be proven without the records key ${join(dir, RECORD_KEY_FILE)}`) });
  });

  it('is one key when eight first runs make it at the same moment (each links its own file into place; the losers read the winner\'s)', async () => {
    const dir = join(root, 'race');
    const script = `import { recordKey } from ${JSON.stringify(join(ROOT, 'dist', 'src', 'records', 'record-key.js'))};
      const k = recordKey({ create: true });
      process.stdout.write(k.key === null ? 'none: ' + k.reason : k.key.toString('hex'));`;
    const runs = Array.from({ length: 8 }, () =>
      new Promise<string>((resolve, reject) => {
        const child = spawn(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, NODE_OPTIONS: '', CAPSULE_KEY_DIR: dir }, stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
        child.on('error', reject);
        child.on('close', () => resolve(out));
      }),
    );
    const seen = await Promise.all(runs);
    expect(new Set(seen).size).toBe(1);
    expect(seen[0]).toBe(readFileSync(join(dir, RECORD_KEY_FILE)).toString('hex'));
    expect(seen[0]).toMatch(/^[0-9a-f]{64}$/);
  });

  it.each([
    ['readable by others (mode 0644)', (path: string) => chmodSync(path, 0o644), /others may read or write it \(mode 644/],
    ['of another user', (path: string) => chownSync(path, 65534, 65534), /belongs to uid 65534/],
    ['a symbolic link to a key', (path: string) => {
      renameSync(path, `${path}.real`);
      symlinkSync(`${path}.real`, path);
    }, /cannot be read \(ELOOP\)/],
    ['of the wrong length', (path: string) => writeFileSync(path, 'short'), /holds 5 bytes, not 32/],
  ])('is not used when it is %s', (_what, spoil, reason) => {
    const dir = join(root, 'spoiled');
    recordKey({ create: true, env: keys(dir) });
    spoil(join(dir, RECORD_KEY_FILE));
    // A fresh process reads it anew (the key a process already read is kept: it never changes).
    const script = `import { recordKey } from ${JSON.stringify(join(ROOT, 'dist', 'src', 'records', 'record-key.js'))};
      const k = recordKey({ create: true }); process.stdout.write(k.key === null ? k.reason : 'used');`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, NODE_OPTIONS: '', CAPSULE_KEY_DIR: dir }, encoding: 'utf8' });
    expect(out).toMatch(reason);
  });
});

describe('the proof of a record', () => {
  /** A session's records written by its trace writer, signed, in `dir`: the lines as written. */
  function written(dir: string, env: NodeJS.ProcessEnv, sessionId = 'ses_proof', odd = 'plain'): Record<string, unknown>[] {
    mkdirSync(dir, { recursive: true });
    const signing = recordSigner(dir, env);
    if (signing.signer === null) throw new Error(signing.reason);
    const writer = new TraceWriter(join(dir, 'trace.jsonl'), sessionId, { signer: signing.signer });
    const start = writer.write('session_start', null, { ...sessionStartFields(dir, 4_194_321), capsule_name: odd, capabilities: { '1': odd, b: [odd, { '\u2028': null }] } as never });
    writer.write('process_start', start, { owner: `run:1/step:${odd}#1`, pid: 4_194_322, pid_start_time: 5, pgid: 4_194_322, cgroup: null, pid_namespace: false, executable: '/bin/sleep', argv: ['sleep', odd] });
    writer.write('plan_start', start, { plan_id: 'p', step_count: 0, steps: [] });
    writer.close();
    return readFileSync(join(dir, 'trace.jsonl'), 'utf8')
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  it.each([
    ['plain text', 'plain'],
    ['quotes, backslashes, control characters, lone surrogates, U+2028 and emoji', 'a"b\\c\u0000\u001f\ud800x\udfff\u2028\u0085é😀'],
  ])('proves what the trace writer signed, with %s in it, and only session_start, process_start and shell_detached carry a mac', (_what, odd) => {
    const env = keys(join(root, 'k'));
    const dir = join(root, 'r');
    const [start, proc, plan] = written(dir, env, 'ses_proof', odd) as [Record<string, unknown>, Record<string, unknown>, Record<string, unknown>];
    const prover = new RecordProver(dir, env);
    expect(start['mac']).toMatch(/^[0-9a-f]{64}$/);
    expect(Object.keys(start).at(-1)).toBe('mac');
    expect(prover.prove(start)).toEqual({ proven: true });
    expect(prover.prove(proc, 'ses_proof')).toEqual({ proven: true });
    expect(plan).not.toHaveProperty('mac');
  });

  it('proves nothing altered, nothing without a mac, nothing of another session, nothing under another key', () => {
    const env = keys(join(root, 'k'));
    const dir = join(root, 'r');
    const [start, proc] = written(dir, env) as [Record<string, unknown>, Record<string, unknown>];
    const prover = new RecordProver(dir, env);
    expect(prover.prove({ ...start, pid: 1 })).toEqual({ proven: false, reason: expect.stringMatching(/the mac of its session_start does not match: the record was forged or altered/) });
    expect(prover.prove({ ...proc, cgroup: '/sys/fs/cgroup/capsule-runtime/ses_x/u1' }, 'ses_proof').proven).toBe(false);
    const { mac: _mac, ...bare } = start;
    expect(prover.prove(bare)).toEqual({ proven: false, reason: 'its session_start carries no mac (written before records were signed, or not by this runtime)' });
    expect(prover.prove({ ...start, mac: 'ABC' })).toEqual({ proven: false, reason: 'its session_start has a mac that is not 64 hex digits' });
    expect(prover.prove(proc, 'ses_other')).toEqual({ proven: false, reason: 'its process_start names another session than its session_start' });
    // The same records, but the key of another user (or another machine).
    expect(new RecordProver(dir, keys(join(root, 'other-key'))).prove(start).proven).toBe(false);
  });

  it.each([
    ['plain text', 'plain'],
    ['characters the writer escapes after signing', 'a\u2028b\u0085c"d\\e\u0001'],
  ])('proves a record from the line it was read from as from the record alone, with %s in it', (_what, odd) => {
    const env = keys(join(root, 'k'));
    const dir = join(root, 'r');
    written(dir, env, 'ses_proof', odd);
    const prover = new RecordProver(dir, env);
    const lines = readFileSync(join(dir, 'trace.jsonl'), 'utf8').trimEnd().split('\n');
    const [startLine, procLine] = lines as [string, string];
    const start = JSON.parse(startLine) as Record<string, unknown>;
    expect(prover.prove(start, undefined, startLine)).toEqual({ proven: true });
    expect(prover.prove(JSON.parse(procLine) as object, 'ses_proof', procLine)).toEqual({ proven: true });
    // The same record written out again (spaces after the colons) is proven as the record alone is.
    const respaced = procLine.replace(/":/g, '": ');
    expect(prover.prove(JSON.parse(respaced) as object, 'ses_proof', respaced)).toEqual({ proven: true });
    // A line altered before its proof proves nothing.
    const altered = procLine.replace('"pid_start_time":5', '"pid_start_time":6');
    expect(altered).not.toBe(procLine);
    expect(prover.prove(JSON.parse(altered) as object, 'ses_proof', altered).proven).toBe(false);
    // Another record's proof at the end of this line proves nothing.
    const grafted = `${procLine.slice(0, -66)}${start['mac'] as string}"}`;
    expect(prover.prove(JSON.parse(grafted) as object, 'ses_proof', grafted).proven).toBe(false);
  });

  it('proves nothing copied into another directory; a directory moved within its filesystem keeps its proof', () => {
    const env = keys(join(root, 'k'));
    const dir = join(root, 'r');
    written(dir, env);
    const copy = join(root, 'copy');
    cpSync(dir, copy, { recursive: true });
    const copied = readFileSync(join(copy, 'trace.jsonl'), 'utf8').split('\n')[0] as string;
    expect(new RecordProver(copy, env).prove(JSON.parse(copied) as object)).toEqual({
      proven: false,
      reason: expect.stringContaining('or copied here from another records directory'),
    });
    const moved = join(root, 'moved');
    renameSync(dir, moved);
    expect(new RecordProver(moved, env).prove(JSON.parse(copied) as object)).toEqual({ proven: true });
  });
});
