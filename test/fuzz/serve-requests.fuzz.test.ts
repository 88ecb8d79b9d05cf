/**
 * Fuzz target: `capsule serve` requests through the JSON-RPC server over one session's API
 * (`createRpcServer`, src/runtime/json-rpc.ts), as serve feeds them after parsing a line: every
 * method (known ones, near misses, unknown ones) with params that are mostly right, mutated, of a
 * wrong type, or any JSON value; ids of every JSON type; batches; values that are not requests.
 * Every request gets exactly one answer with its id (notifications none), a result or an error of
 * a JSON-RPC code with a short, clean message — never an `INTERNAL` error (a bug), a throw or a
 * hang. The session allows no binary, so no input starts a process; plans run in process and
 * are refused or finish at once; `session.stop` is left out (it ends the session, tested apart).
 */
import fc from 'fast-check';
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { createRpcServer, receiveMessage, SERVE_ERRORS } from '../../src/runtime/json-rpc.js';
import { SessionApi } from '../../src/runtime/session-api.js';
import { Session } from '../../src/session/session.js';
import { jsonValue, mostly, planObject, shortText } from './arbitraries.js';
import { fuzzTarget } from './harness.js';
import { tempDirForTests } from './support.js';
import { expectCleanText, must } from './verdicts.js';

const dir = tempDirForTests('serve-requests');
let api: SessionApi | null = null;
let server: ReturnType<typeof createRpcServer> | null = null;

beforeAll(() => {
  const W = mkdtempSync(join(dir.path, 'w-'));
  const session = Session.open({
    workdir: W,
    recordsDir: join(dir.path, 'records'),
    containment: 'process-group',
    isolation: 'none',
    eventLog: false,
    background: { allow: [], toolOffered: true, onAbandonmentReport: () => {} },
  });
  api = new SessionApi(session, { capsulesDir: join(W, 'capsules'), shellAllow: [] });
  server = createRpcServer(api, {
    onInternalError: (message) => {
      throw new Error(`internal error listener: ${message}`);
    },
  });
});

afterAll(async () => {
  if (api !== null) await api.end('ok');
});

const METHODS = ['shell.run', 'backgroundCommand', 'plan.submit', 'task.cancel', 'shell.Run', 'plan', 'rpc.discover', '', '__proto__', 'constructor', 'toString'];

const workId = fc.oneof(fc.constant('wrk_0190a1b2c3d47e8f9a0b1c2d3e4f5a6b'), fc.constant('wrk_'), shortText, fc.string({ maxLength: 3000 }));
const taskId = fc.oneof(fc.constant('tsk_0190a1b2c3d47e8f9a0b1c2d3e4f5a6b'), shortText);

const paramsFor: Record<string, fc.Arbitrary<unknown>> = {
  'shell.run': fc.record(
    { binary: mostly(fc.constantFrom('bash', 'sleep', '/bin/sh', '', '../x')), command: mostly(shortText), grace_secs: mostly(fc.oneof(fc.double(), fc.integer())), task_id: mostly(taskId) },
    { requiredKeys: [] },
  ),
  backgroundCommand: fc.record(
    {
      operation: mostly(fc.constantFrom('status', 'wait', 'stop', 'list', 'STATUS')),
      work_id: mostly(workId),
      wait_secs: mostly(fc.oneof(fc.integer({ min: -5, max: 2 }), fc.double(), fc.constant(1e300))),
      // Patterns, catastrophic ones included: nothing runs them here (no command exists), but their checks do.
      until: mostly(fc.oneof(shortText, fc.constantFrom('(a+)+$', '[', '(?<x>', '\\', 'a'.repeat(2000)))),
      tail_bytes: mostly(fc.oneof(fc.integer({ min: -1, max: 20_000 }), fc.double())),
      task_id: mostly(taskId),
    },
    { requiredKeys: [] },
  ),
  'plan.submit': fc.record({ plan: mostly(planObject), path: mostly(shortText), wait: mostly(fc.boolean()), max_parallel: mostly(fc.integer({ min: -2, max: 4 })) }, { requiredKeys: [] }),
  'task.cancel': fc.record({ task_id: mostly(taskId), force: mostly(fc.boolean()) }, { requiredKeys: [] }),
};

const request = fc
  .record({
    method: fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...METHODS) }, { weight: 1, arbitrary: shortText }),
    id: fc.oneof({ weight: 6, arbitrary: fc.integer() }, { weight: 2, arbitrary: shortText }, { weight: 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constant(undefined) }),
    shape: fc.nat({ max: 9 }),
    other: jsonValue(2),
  })
  .chain(({ method, id, shape, other }) =>
    (Object.hasOwn(paramsFor, method) ? (paramsFor[method] as fc.Arbitrary<unknown>) : jsonValue(2)).map((params) => {
      // Mostly a well-formed request; sometimes a broken envelope, params of a wrong type, or not a request at all.
      const base: Record<string, unknown> = { jsonrpc: '2.0', method, ...(id !== undefined ? { id } : {}), ...(params !== undefined ? { params } : {}) };
      if (shape === 0) return other;
      if (shape === 1) return { ...base, jsonrpc: '1.0' };
      if (shape === 2) return { ...base, params: other };
      if (shape === 3) return { ...base, method: other };
      return base;
    }),
  );

const inputs = fc.oneof({ weight: 9, arbitrary: request }, { weight: 1, arbitrary: fc.array(request, { maxLength: 4 }) });

const JSON_RPC_CODES = new Set([-32700, -32600, -32601, -32602, ...Object.values(SERVE_ERRORS).map((e) => e.code)]);

function expectResponse(response: unknown, what: string): void {
  must(typeof response === 'object' && response !== null && !Array.isArray(response), `${what}: a response object, got ${JSON.stringify(response)?.slice(0, 200)}`);
  const r = response as { jsonrpc?: unknown; error?: { code?: unknown; message?: unknown }; result?: unknown };
  must(r.jsonrpc === '2.0', `${what}: jsonrpc 2.0`);
  if (r.error === undefined) {
    must('result' in r, `${what}: a result or an error`);
    return;
  }
  must(typeof r.error.code === 'number' && JSON_RPC_CODES.has(r.error.code), `${what}: a JSON-RPC error code, got ${String(r.error.code)}`);
  must(r.error.code !== SERVE_ERRORS.INTERNAL.code, `${what}: an INTERNAL error (a bug): ${String(r.error.message)}`);
  expectCleanText(r.error.message, `${what}: the error message`);
}

fuzzTarget({
  name: 'serve requests through the JSON-RPC server of one session',
  inputs,
  fastRuns: 600,
  shrink: true,
  check: async (input) => {
    if (server === null || api === null) throw new Error('no session');
    must(!api.stopping, 'the session is still serving');
    const response: unknown = await receiveMessage(server, input);
    if (Array.isArray(input)) {
      if (response === null) return; // a batch of notifications only
      // JSON-RPC 2.0 §6: an empty batch is one Invalid Request answer, not an array.
      if (input.length === 0) return expectResponse(response, 'the answer to an empty batch');
      must(Array.isArray(response), `a batch gets an array of answers, got ${JSON.stringify(response)?.slice(0, 200)}`);
      for (const item of response as unknown[]) expectResponse(item, 'a batch answer');
      return;
    }
    const isRequest = typeof input === 'object' && input !== null && 'id' in input && (input as { jsonrpc?: unknown }).jsonrpc === '2.0' && typeof (input as { method?: unknown }).method === 'string';
    if (response === null) {
      must(!isRequest, `a request with an id got no answer: ${JSON.stringify(input).slice(0, 300)}`);
      return;
    }
    expectResponse(response, 'the answer');
    if (isRequest) must((response as { id?: unknown }).id === (input as { id?: unknown }).id, 'the answer carries the request id');
  },
});
