import type { SessionStartFields } from '../../src/records/trace-records.js';

/**
 * The fields of a `session_start` trace record a test writes by hand (through `TraceWriter`), for
 * a session whose workdir and records are `dir` and whose runtime was `pid`. Plain data: importing
 * it builds no schema (the lazy-schema tests count the schemas built).
 */
export function sessionStartFields(dir: string, pid: number): SessionStartFields {
  return {
    capsule_name: null,
    capsule_version: null,
    capabilities: {},
    tools_declared: [],
    workdir_exec: dir,
    records_dir: dir,
    runtime: 'capsule-runtime (TypeScript)',
    pid,
    pid_start_time: null,
    containment: { backend: 'process-group', reason: 'test', cgroup: null, cgroup_kill: false, helper: null, pid_namespace: false, isolation_reason: 'test', run_as: null },
  };
}
