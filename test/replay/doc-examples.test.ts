/**
 * Every hand-written replay script the docs show replays as they say: each fenced `jsonl` block of
 * README.md and docs/*.md, copied into a file exactly as written, replays `identical` with
 * `capsule replay FILE` (exit 0). A block that starts with a script's root line but is not fenced
 * as `jsonl` would escape the check, so none may exist.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { replayCommand } from '../../src/cli/replay.js';

const root = process.cwd();
const pages = ['README.md', ...readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).map((name) => join('docs', name))];

interface Block {
  readonly page: string;
  readonly line: number;
  readonly lang: string;
  readonly text: string;
}

/** The fenced blocks of a Markdown page (``` fences, any indentation), with their info string and first line. */
function fencedBlocks(page: string): Block[] {
  const lines = readFileSync(join(root, page), 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\S*)\s*$/.exec(lines[i] ?? '');
    if (open === null) continue;
    const indent = open[1] ?? '';
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !/^\s*```\s*$/.test(lines[j] ?? ''); j++) body.push((lines[j] ?? '').startsWith(indent) ? (lines[j] ?? '').slice(indent.length) : (lines[j] ?? ''));
    blocks.push({ page, line: i + 1, lang: open[2] ?? '', text: body.join('\n') + '\n' });
    i = j;
  }
  return blocks;
}

const blocks = pages.flatMap(fencedBlocks);
const scripts = blocks.filter((b) => b.lang === 'jsonl');
const scratch = mkdtempSync(join(tmpdir(), 'capsule-doc-scripts-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function capture() {
  const sink = () => ({ text: '', write(chunk: string) { this.text += chunk; return true; } });
  return { stdout: sink(), stderr: sink() };
}

describe('the replay scripts the docs show', () => {
  it('are found: docs/event-log.md shows at least the retry and the shell-call examples', () => {
    expect(scripts.filter((s) => s.page === join('docs', 'event-log.md')).length).toBeGreaterThanOrEqual(2);
  });

  it('are all fenced as jsonl (a script root line in another block would not be replayed here)', () => {
    const unfenced = blocks.filter((b) => b.lang !== 'jsonl' && /^\{\s*"kind"\s*:\s*"(plan|machine)"/.test(b.text.trimStart()));
    expect(unfenced.map((b) => `${b.page}:${b.line}`)).toEqual([]);
  });

  it.each(scripts.map((s) => [`${s.page}:${s.line}`, s] as const))('%s replays identical, copied as written', async (name, script) => {
    const file = join(scratch, `${name.replace(/[^A-Za-z0-9]+/g, '-')}.jsonl`);
    writeFileSync(file, script.text);
    const out = capture();
    const code = await replayCommand(file, {}, out);
    expect({ code, stdout: out.stdout.text, stderr: out.stderr.text }).toEqual({ code: 0, stdout: expect.stringMatching(/^identical: /), stderr: '' });
  });
});
