/**
 * Suite 7, the two doors of a session: a `shell.run` of `true` answered over `capsule mcp`
 * (the MCP SDK's client, stdio) against the same call over `capsule serve` (newline-delimited
 * JSON-RPC), target ≤ 1.5× (pairwise ratio of medians per run); and how soon a `write` to an
 * interactive command (`cat`) shows in its log, from the write's request to the bytes in the file
 * (target ≤ 20 ms, median), on pipes and on a terminal (`tty: true`, docs/serve.md#terminals:
 * the terminal's echo and cat's copy of the line, through the spawn helper's relay). Both doors run as installed (`dist/bundle/capsule.js`), one session
 * each for the whole suite; the calls are interleaved.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Row, Suite, SuiteContext } from '../harness.js';
import { now } from '../harness.js';
import { CLI } from '../lib/processes.js';

/** Calls of each kind per measured run (the run's figure is their median). */
const CALLS_PER_RUN = 20;

/** A minimal line client of `capsule serve`. */
function startServe(dir: string): { call: (method: string, params: Record<string, unknown>) => Promise<Record<string, unknown>>; end: () => Promise<void> } {
  const child = spawn(process.execPath, [CLI, 'serve', '--workdir', dir, '--allow', 'true'], { cwd: dir, stdio: ['pipe', 'pipe', 'ignore'] });
  const waiting = new Map<number, (result: Record<string, unknown>) => void>();
  let pending = '';
  let id = 0;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    for (let at = pending.indexOf('\n'); at >= 0; at = pending.indexOf('\n')) {
      const message = JSON.parse(pending.slice(0, at)) as { id?: number; result?: Record<string, unknown>; error?: unknown };
      pending = pending.slice(at + 1);
      if (typeof message.id === 'number') waiting.get(message.id)?.(message.result ?? { error: message.error });
    }
  });
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  return {
    call: (method, params) =>
      new Promise((resolve) => {
        const mine = ++id;
        waiting.set(mine, resolve);
        child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: mine, method, params })}\n`);
      }),
    end: async () => {
      child.stdin.end();
      await exited;
    },
  };
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
};

export const doorsSuite: Suite = {
  name: 'doors',
  title: 'Suite 7 — the doors: capsule mcp against capsule serve, write to an interactive command',
  async run(ctx: SuiteContext) {
    const runs = ctx.quick ? 2 : ctx.runs;
    const dir = join(ctx.tmpDir, 'doors');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(join(dir, 'serve'), { recursive: true });
    mkdirSync(join(dir, 'mcp'), { recursive: true });
    const serve = startServe(join(dir, 'serve'));
    const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp', '--workdir', join(dir, 'mcp'), '--allow', 'true', '--allow', 'cat'], cwd: join(dir, 'mcp'), stderr: 'ignore' });
    const client = new Client({ name: 'capsule-bench', version: '1' });
    await client.connect(transport);
    const serveMs: number[] = [];
    const mcpMs: number[] = [];
    const writeMs: number[] = [];
    const ttyWriteMs: number[] = [];
    try {
      const cat = (await client.callTool({ name: 'shell_run', arguments: { command: 'cat', interactive: true } })) as unknown as { structuredContent: { work_id: string; output_path: string } };
      const { work_id: workId, output_path: logPath } = cat.structuredContent;
      // The header is in the log once the command is demoted (before its answer).
      let written = readFileSync(logPath).length;
      const ttyCat = (await client.callTool({ name: 'shell_run', arguments: { command: 'cat', tty: true, interactive: true } })) as unknown as { structuredContent: { work_id: string; output_path: string } };
      const { work_id: ttyWorkId, output_path: ttyLogPath } = ttyCat.structuredContent;
      let ttyWritten = readFileSync(ttyLogPath).length;
      for (let i = -ctx.warmups; i < runs; i++) {
        ctx.log(`doors: run ${i + 1}/${runs}`);
        const s: number[] = [];
        const m: number[] = [];
        const w: number[] = [];
        const tw: number[] = [];
        for (let c = 0; c < CALLS_PER_RUN; c++) {
          let t = now();
          await serve.call('shell.run', { command: 'true' });
          s.push(now() - t);
          t = now();
          await client.callTool({ name: 'shell_run', arguments: { command: 'true' } });
          m.push(now() - t);
          const line = `line ${c}\n`;
          written += line.length;
          t = now();
          void client.callTool({ name: 'background_command', arguments: { operation: 'write', work_id: workId, input: line } });
          // The log holds a byte the moment it is appended (writeSync): polled until it does.
          while (readFileSync(logPath).length < written) await new Promise((resolve) => setImmediate(resolve));
          w.push(now() - t);
          // On a terminal the line comes back twice, each ending \r\n: its echo, then cat's copy.
          ttyWritten += 2 * (line.length + 1);
          t = now();
          void client.callTool({ name: 'background_command', arguments: { operation: 'write', work_id: ttyWorkId, input: line } });
          while (readFileSync(ttyLogPath).length < ttyWritten) await new Promise((resolve) => setImmediate(resolve));
          tw.push(now() - t);
        }
        if (i < 0) continue;
        serveMs.push(median(s));
        mcpMs.push(median(m));
        writeMs.push(median(w));
        ttyWriteMs.push(median(tw));
      }
      await client.callTool({ name: 'background_command', arguments: { operation: 'write', work_id: workId, close_stdin: true } });
      await client.callTool({ name: 'background_command', arguments: { operation: 'stop', work_id: ttyWorkId } });
    } finally {
      await client.close();
      await serve.end();
    }
    const rows: Row[] = [
      { case: 'shell_run of true, one session', subject: 'capsule serve', unit: 'ms', samples: serveMs },
      {
        case: 'shell_run of true, one session',
        subject: 'capsule mcp',
        unit: 'ms',
        samples: mcpMs,
        compare: ['capsule serve'],
        target: { max: 1.5, on: 'ratio', against: 'capsule serve', text: '≤ 1.5× serve' },
      },
      { case: 'write to cat', subject: 'write → bytes in the log', unit: 'ms', samples: writeMs, target: { max: 20, on: 'median', text: '≤ 20 ms' } },
      { case: 'write to cat on a terminal (tty)', subject: 'write → echo and output in the log', unit: 'ms', samples: ttyWriteMs, target: { max: 20, on: 'median', text: '≤ 20 ms' } },
    ];
    return rows;
  },
};
