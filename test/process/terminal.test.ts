/**
 * `SpawnRequest.tty` (src/process/containment.ts, the spawn helper's `--tty`): the command's
 * stdio is a pseudo-terminal of the asked size, made inside the tree's containment, on both
 * backends, with and without a PID namespace; typed input reaches it, and ending the tree
 * leaves nothing of it. Real processes.
 */
import { Containment, type ContainedProcess, type SpawnRequest } from '../../src/process/containment.js';
import { readCgroupProcs } from '../../src/process/cgroups.js';
import { groupMembers } from '../../src/process/process-groups.js';
import { eachBackend, pidNamespaceUnavailable } from '../support/backends.js';
import { TEST_ENV, waitFor } from './helpers.js';

const opened: Containment[] = [];
let sessionCounter = 0;
afterAll(async () => {
  for (const containment of opened) await containment.close(200);
});

for (const isolation of ['none', 'pid-namespace'] as const) {
  const skip = isolation === 'pid-namespace' ? pidNamespaceUnavailable : null;
  (skip === null ? describe : describe.skip)(`with isolation ${isolation}${skip === null ? '' : ` (skipped: ${skip})`}`, () => {
    eachBackend((backend) => {
      const open = async (): Promise<Containment> => {
        const containment = Containment.open({ sessionId: `tty-${process.pid}-${++sessionCounter}`, backend: backend.containment, isolation });
        opened.push(containment);
        await containment.readyToSpawn();
        return containment;
      };
      const bash = (script: string): SpawnRequest => ({
        owner: { kind: 'other', label: 'tty' },
        file: 'bash',
        args: ['-c', script],
        cwd: '/tmp',
        env: TEST_ENV,
        stdinPipe: true,
        tty: { cols: 100, rows: 30 },
      });
      const membersOf = (tree: ContainedProcess): number[] =>
        tree.identity?.cgroup != null ? readCgroupProcs(tree.identity.cgroup) : groupMembers(tree.identity?.pgid ?? -1);

      it('gives the command a terminal of the asked size as stdin, stdout and stderr, and its exit code', async () => {
        const containment = await open();
        const tree = containment.spawn(bash('tty -s <&0 && tty -s <&1 && tty -s <&2 && stty size; echo err >&2; exit 7'));
        const result = await tree.done;
        expect(result).toMatchObject({ spawnError: null, exitCode: 7 });
        expect(result.stdout.toString()).toBe('30 100\r\nerr\r\n');
        expect(result.stderr.toString()).toBe('');
      });

      it('types stdin into the terminal; its end is the end of file', async () => {
        const containment = await open();
        const tree = containment.spawn(bash('read -r line; echo "got:$line"; cat >/dev/null; echo eof'));
        tree.stdin?.write('typed\n');
        tree.stdin?.end();
        const result = await tree.done;
        expect(result.exitCode).toBe(0);
        expect(result.stdout.toString()).toBe('typed\r\ngot:typed\r\neof\r\n');
      });

      it('ends the whole tree, what the command left on its terminal included', async () => {
        const containment = await open();
        const tree = containment.spawn(bash('sleep 300 & echo started; wait'));
        let output = '';
        tree.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
        await waitFor(() => output.includes('started'), 10_000, 'the command to print started');
        expect(membersOf(tree).length).toBeGreaterThan(0);
        await expect(tree.end(1000)).resolves.toMatchObject({ survivors: [] });
        expect(membersOf(tree)).toEqual([]);
      });
    }, isolation);
  });
}
