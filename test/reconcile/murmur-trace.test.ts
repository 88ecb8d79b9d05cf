/**
 * Murmur compatibility: a `trace.jsonl` as Murmur's runtime writes it, written by hand
 * (`docs/trace.md`, `docs/resume.md`): its record names and fields, records this
 * runtime never writes (inference, shell, session_end), and the shapes of its accounting records.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { reconcile } from '../../src/reconcile/reconcile.js';

const MURMUR_TRACE = [
  {
    event_type: 'session_start', event_id: 'evt_0197a1b2c3d47e8f9a0b1c2d3e4f5a60', parent_id: null, session_id: 'ses_0197a1b2c3d47e8f9a0b1c2d3e4f5a61', timestamp: 1750000000000,
    capsule_name: 'coder', capsule_version: '0.3.1', model: 'claude-sonnet', max_turns: 40, capabilities: { shell: { allow: ['bash', 'cargo'] } }, tools_declared: ['bash', 'cargo', 'background-command'],
    containment_declared: 'scope', containment_achieved: 'scope', workdir_exec: true, userns_grant: false, effective_grants: [], system_prompt_source: 'capsule', system_prompt_sha256: 'ab'.repeat(32), resumed_from: null, context_id: 'ctx_main',
  },
  { event_type: 'task_start', event_id: 'evt_t1', parent_id: 'evt_0197a1b2c3d47e8f9a0b1c2d3e4f5a60', session_id: 'ses_0197a1b2c3d47e8f9a0b1c2d3e4f5a61', timestamp: 1750000000100, task_id: 'tsk_user', context_id: 'ctx_main', source: 'task_md', origin: 'user', trust: 'trusted', lane: 'user', message_parts_bytes: 120 },
  { event_type: 'inference', event_id: 'evt_i1', parent_id: 'evt_t1', session_id: 'ses_0197a1b2c3d47e8f9a0b1c2d3e4f5a61', timestamp: 1750000000200, turn: 1, task_id: 'tsk_user', input_tokens: 900, output_tokens: 40 },
  { event_type: 'shell', event_id: 'evt_s1', parent_id: 'evt_i1', session_id: 'ses_0197a1b2c3d47e8f9a0b1c2d3e4f5a61', timestamp: 1750000000300, turn: 1, task_id: 'tsk_user', binary: '/usr/bin/bash', command: 'ls', exit_code: 0, stdout_bytes: 20, stderr_bytes: 0, duration_ms: 4 },
  { event_type: 'shell_detached', event_id: 'evt_d1', parent_id: 'evt_i1', session_id: 'ses_0197a1b2c3d47e8f9a0b1c2d3e4f5a61', timestamp: 1750000010000, turn: 1, task_id: 'tsk_user', work_id: 'wrk_0197a1b2d0007c00800000000000000a', binary: '/usr/bin/cargo', command: 'build --release', grace_ms: 10000 },
  { event_type: 'shell_detached', event_id: 'evt_d2', parent_id: 'evt_i1', session_id: 'ses_0197a1b2c3d47e8f9a0b1c2d3e4f5a61', timestamp: 1750000020000, turn: 2, task_id: 'tsk_user', work_id: 'wrk_0197a1b2d0007c00800000000000000b', binary: '/usr/bin/bash', command: 'npm test', grace_ms: null },
  { event_type: 'shell_detached', event_id: 'evt_d3', parent_id: 'evt_i1', session_id: 'ses_0197a1b2c3d47e8f9a0b1c2d3e4f5a61', timestamp: 1750000030000, turn: 3, task_id: 'tsk_user', work_id: 'wrk_0197a1b2d0007c00800000000000000c', binary: '/usr/bin/bash', command: 'sleep 5', grace_ms: 10000 },
  {
    event_type: 'shell_completed', event_id: 'evt_c3', parent_id: 'evt_0197a1b2c3d47e8f9a0b1c2d3e4f5a60', session_id: 'ses_0197a1b2c3d47e8f9a0b1c2d3e4f5a61', timestamp: 1750000036000,
    work_id: 'wrk_0197a1b2d0007c00800000000000000c', binary: '/usr/bin/bash', command: 'sleep 5', exit_code: 0, duration_ms: 5003, output_path: '/var/murmur/records/ses_x/logs/wrk_0197a1b2d0007c00800000000000000c.log', output_bytes: 41, status: 'ok', delivered_via: 'background_command',
  },
  { event_type: 'task_canceled', event_id: 'evt_x', parent_id: 'evt_t1', session_id: 'ses_0197a1b2c3d47e8f9a0b1c2d3e4f5a61', timestamp: 1750000040000, task_id: 'tsk_user', phase: 'harness', detached_work_ids: ['wrk_0197a1b2d0007c00800000000000000a', 'wrk_0197a1b2d0007c00800000000000000b'], delegation_ids: [] },
];

describe("a trace written by Murmur's runtime", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'capsule-murmur-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('reconciles the same way: the two unaccounted commands, trusted, marked with Murmur-shaped shell_lost lines', () => {
    // Murmur's runtime died mid-write of its next record.
    writeFileSync(join(dir, 'trace.jsonl'), `${MURMUR_TRACE.map((r) => JSON.stringify(r)).join('\n')}\n{"event_type":"inference","event_id":"evt_i2","par`);
    const warnings: string[] = [];
    const { report } = reconcile(dir, 'ses_ours', 'ctx_main', { warn: (l) => warnings.push(l) });
    expect(report?.started_in_session).toBe('ses_0197a1b2c3d47e8f9a0b1c2d3e4f5a61');
    expect(report?.lost).toEqual([
      { work_id: 'wrk_0197a1b2d0007c00800000000000000a', binary: '/usr/bin/cargo', command: 'build --release', detached_at_ms: 1750000010000 },
      { work_id: 'wrk_0197a1b2d0007c00800000000000000b', binary: '/usr/bin/bash', command: 'npm test', detached_at_ms: 1750000020000 },
    ]);
    expect(report?.provenance).toEqual({ origin: 'completion', trust: 'trusted' });
    const lines = readFileSync(join(dir, 'trace.jsonl'), 'utf8').trimEnd().split('\n');
    const markers = lines.slice(-2).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(markers.map((m) => [m['event_type'], m['session_id'], m['parent_id'], m['reconciled_by_session'], m['reconciled_task_id']])).toEqual([
      ['shell_lost', 'ses_0197a1b2c3d47e8f9a0b1c2d3e4f5a61', 'evt_0197a1b2c3d47e8f9a0b1c2d3e4f5a60', 'ses_ours', report?.task_id],
      ['shell_lost', 'ses_0197a1b2c3d47e8f9a0b1c2d3e4f5a61', 'evt_0197a1b2c3d47e8f9a0b1c2d3e4f5a60', 'ses_ours', report?.task_id],
    ]);
    expect(warnings.some((w) => /torn|mid-line/.test(w))).toBe(true);
    // A second resume, by Murmur or by us, finds everything accounted for.
    expect(reconcile(dir, 'ses_later', 'ctx_main').report).toBeNull();
  });
});
