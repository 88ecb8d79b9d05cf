/**
 * The `--allow` flag a refusal suggests pastes back to the refused path, also when the path holds
 * control characters (newline, tab, ESC, DEL): such a path is written `$'…'` (bash, zsh, ksh), all
 * printable, and bash given the pasted text gets the original bytes back.
 */
import { execFileSync } from 'node:child_process';
import { allowFlag, DOLLAR_QUOTE_NOTE } from '../../src/plan/allow-flag.js';
import { runPlan } from '../../src/runtime/run-plan.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** What bash makes of `text` as the words after a command: the first word, byte for byte. */
const pasted = (text: string): string => execFileSync('bash', ['-c', `printf '%s' ${text.replace(/^--allow /u, '')}`], { encoding: 'utf8' });

const paths = ['/tmp/a\nb', '/tmp/tab\there', '/tmp/esc\u001b[31mred', "/tmp/it's\n\\x41", '/tmp/del\u007f', '/tmp/trailing newline\n', '/tmp/\u0001\u001f'];

describe('the --allow flag of a refusal', () => {
  it('writes a path with a control character as one printable $\'…\' word that bash pastes back to the same path', () => {
    for (const path of paths) {
      const flag = allowFlag(path);
      expect(flag).toMatch(/^--allow \$'[\x20-\x7e]*'$/u);
      expect(pasted(flag)).toBe(path);
    }
  });

  it('keeps single quotes (POSIX) for a path without control characters, and bash pastes those back too', () => {
    for (const path of ['/opt/my dir/x', "it's", '/usr/bin/make', 'a\\b', 'caf\u00e9 bin']) {
      const flag = allowFlag(path);
      expect(flag.startsWith("--allow $'")).toBe(false);
      expect(pasted(flag)).toBe(path);
    }
  });

  it("says once, in the refusal's fix, that $'…' is bash, zsh and ksh quoting, and its flag pastes back to the refused binary", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'capsule-allow-paste-'));
    try {
      const binary = '/tmp/a\tb\u001bc';
      const report = await runPlan({ plan: { id: 'c', steps: [{ id: 's', shell: `'${binary}' x` }] }, manifest: null, workdir: dir, recordsDir: join(dir, 'r') });
      const fix = report.refusal?.fix ?? '';
      expect(fix).toContain(`--allow $'/tmp/a\\tb\\x1bc'`);
      expect(fix.split(DOLLAR_QUOTE_NOTE)).toHaveLength(2);
      const flag = /--allow \$'[^']*'/u.exec(fix)?.[0] ?? '';
      expect(pasted(flag)).toBe(binary);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
