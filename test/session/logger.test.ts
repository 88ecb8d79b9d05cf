import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runPlan } from '../../src/runtime/run-plan.js';
import { createLogger, silentLogger } from '../../src/session/logger.js';
import { CLI } from '../cli/helpers.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-logger-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the runtime\'s structured log (pino)', () => {
  it('writes one JSON object a line, bound to the session, for the session and the plan', async () => {
    const lines: string[] = [];
    const { logger } = await createLogger({ level: 'debug', stream: { write: (line: string) => lines.push(line) } });
    const report = await runPlan({
      plan: { id: 'p', steps: [{ id: 'a', tool: 'ok' }] },
      manifest: null,
      workdir: scratch,
      recordsDir: join(scratch, 'run'),
      tools: { ok: () => ({ status: 'passed', data: '' }) },
      logger,
    });
    const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(records.map((r) => r['msg'])).toEqual(['session opened', 'plan started', 'steps started', 'step ended', 'plan ended', 'session ended']);
    expect(records.every((r) => r['session_id'] === report.session_id && typeof r['level'] === 'number')).toBe(true);
    expect(records.find((r) => r['msg'] === 'step ended')).toMatchObject({ plan_id: 'p', step_id: 'a', status: 'success' });
  });

  it('never throws into the runtime when a write fails (ENOSPC): the run completes, the log stops at the first failure and says why', async () => {
    let writes = 0;
    const full = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    const log = await createLogger({
      level: 'debug',
      stream: {
        write: () => {
          writes++;
          throw full;
        },
      },
    });
    const report = await runPlan({
      plan: { id: 'p', steps: [{ id: 'a', tool: 'ok' }] },
      manifest: null,
      workdir: scratch,
      recordsDir: join(scratch, 'full'),
      tools: { ok: () => ({ status: 'passed', data: '' }) },
      logger: log.logger,
    });
    expect(report.completed).toBe(true);
    expect(writes).toBe(1);
    expect(log.failure()).toEqual({ where: 'the log stream', error: full });
  });

  it('stops silently when its reader went away (EPIPE): no failure', async () => {
    let writes = 0;
    const log = await createLogger({
      level: 'info',
      stream: {
        write: () => {
          writes++;
          throw Object.assign(new Error('EPIPE: broken pipe, write'), { code: 'EPIPE' });
        },
      },
    });
    log.logger.info({}, 'one');
    log.logger.info({}, 'two');
    expect(writes).toBe(1);
    expect(log.failure()).toBeNull();
  });

  it('is silent by default, without loading pino', async () => {
    const { logger } = await createLogger({ level: 'silent' });
    expect(logger).toBe(silentLogger);
  });

  it('never writes to stdout: capsule run --json --log-level debug prints exactly the report there, the log on stderr', () => {
    const dir = mkdtempSync(join(scratch, 'cli-'));
    const plan = join(dir, 'plan.json');
    writeFileSync(plan, JSON.stringify({ id: 'p', steps: [{ id: 'a', shell: 'true' }] }));
    const run = spawnSync(process.execPath, [CLI, '--log-level', 'debug', 'run', plan, '--json', '--allow', 'true', '--workdir', dir], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ plan_id: 'p', completed: true });
    const logLines = run.stderr.split('\n').filter((line) => line.startsWith('{'));
    expect(logLines.map((line) => (JSON.parse(line) as { msg: string }).msg)).toContain('session opened');
  });

  it('appends to --log-file instead of stderr', () => {
    const dir = mkdtempSync(join(scratch, 'file-'));
    const plan = join(dir, 'plan.json');
    writeFileSync(plan, JSON.stringify({ id: 'p', steps: [{ id: 'a', shell: 'true' }] }));
    const logFile = join(dir, 'logs', 'capsule.log');
    execFileSync(process.execPath, [CLI, 'run', plan, '--quiet', '--allow', 'true', '--workdir', dir, '--log-level', 'info', '--log-file', logFile], { stdio: 'ignore' });
    const lines = readFileSync(logFile, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { msg: string });
    expect(lines.map((line) => line.msg)).toEqual(['session opened', 'plan started', 'plan ended', 'session ended']);
  });
});
