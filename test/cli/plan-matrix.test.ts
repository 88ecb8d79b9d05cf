/**
 * Matrix steps (docs/plan-format.md#matrix): `capsule run` as a real process expanding a step into
 * one real shell step per combination, references to the matrix step's id reading the
 * instances' aggregate, and `capsule replay` of those records.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expectReplayIdentical, killStartedClis, manifestAllowing, parseReport, resultOf, runCli, TempDirs, traceRecords, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

function workdirWith(steps: unknown[]): string {
  const dir = temp.make('matrix');
  writeJson(dir, 'capsule.json', manifestAllowing());
  writeJson(dir, 'plan.json', { id: 'p', steps });
  return dir;
}

/** A shell step that runs `node -e <script>` with more words after it. */
const node = (id: string, script: string, extra: Record<string, unknown> = {}, args = '') => ({ id, shell: `node -e '${script}'${args}`, ...extra });

describe('a 2×2 matrix with an exclude', () => {
  it('runs one step per remaining combination, and a dependent step reads their outputs as a JSON array', async () => {
    const dir = workdirWith([
      node('build', 'process.stdout.write(process.argv[1] + "-" + process.argv[2])', { matrix: { cc: ['gcc', 'clang'], opt: ['O0', 'O2'], exclude: [{ cc: 'clang', opt: 'O0' }] } }, ' $matrix.cc $matrix.opt'),
      node('gather', 'process.stdin.pipe(process.stdout)', { depends_on: ['build'], stdin: '$build.output' }),
      node('one', 'process.stdin.pipe(process.stdout)', { depends_on: ['build[cc=clang,opt=O2]'], stdin: '$build[cc=clang,opt=O2].output' }),
    ]);
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    const report = parseReport(result.stdout);
    expect(report.results.map((r) => r.step_id)).toEqual(expect.arrayContaining(['build[cc=gcc,opt=O0]', 'build[cc=gcc,opt=O2]', 'build[cc=clang,opt=O2]']));
    expect(report.results.map((r) => r.step_id)).not.toContain('build[cc=clang,opt=O0]');
    expect(report.results).toHaveLength(5);
    expect(JSON.parse(resultOf(report, 'gather').output as string)).toEqual(['gcc-O0', 'gcc-O2', 'clang-O2']);
    expect(resultOf(report, 'one').output).toBe('clang-O2');
    // The report and the trace say which matrix step and combination each instance is.
    expect(resultOf(report, 'build[cc=gcc,opt=O2]')).toMatchObject({ matrix_group: 'build', matrix: { cc: 'gcc', opt: 'O2' } });
    expect(resultOf(report, 'gather')).not.toHaveProperty('matrix_group');
    const settled = traceRecords(report.records_dir, 'plan_step').find((record) => record['step_id'] === 'build[cc=clang,opt=O2]');
    expect(settled).toMatchObject({ matrix_group: 'build', matrix: { cc: 'clang', opt: 'O2' } });
    const planned = traceRecords(report.records_dir, 'plan_start')[0]?.['steps'] as Record<string, unknown>[];
    expect(planned.find((step) => step['step_id'] === 'gather')?.['depends_on']).toEqual(['build[cc=gcc,opt=O0]', 'build[cc=gcc,opt=O2]', 'build[cc=clang,opt=O2]']);
    await expectReplayIdentical(dir, report.records_dir);
  });

  it('shows the instances in validate and --dry-run', async () => {
    const dir = workdirWith([node('build', 'process.stdout.write(1)', { matrix: { cc: ['gcc', 'clang'] } }, ' $matrix.cc')]);
    const validated = await runCli(['validate', 'plan.json'], { cwd: dir });
    const dry = await runCli(['run', 'plan.json', '--dry-run'], { cwd: dir });

    expect(validated.code).toBe(0);
    expect(dry.code).toBe(0);
    expect(dry.stdout + dry.stderr).toContain('build[cc=gcc]');
    expect(dry.stdout + dry.stderr).toContain('build[cc=clang]');
  });
});

describe('matrix values in env', () => {
  it('gives each instance its values in its environment, numbers and booleans as their JSON text', async () => {
    const dir = workdirWith([
      node('env', 'process.stdout.write([process.env.CC_NAME, process.env.LEVEL, process.env.STRICT].join(" "))', {
        env: { CC_NAME: '$matrix.cc', LEVEL: 'O$matrix.level', STRICT: '$matrix.strict' },
        matrix: { cc: ['gcc'], level: [0, 2], strict: [true] },
      }),
    ]);
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    const report = parseReport(result.stdout);
    expect(resultOf(report, 'env[cc=gcc,level=0,strict=true]').output).toBe('gcc O0 true');
    expect(resultOf(report, 'env[cc=gcc,level=2,strict=true]').output).toBe('gcc O2 true');
    await expectReplayIdentical(dir, report.records_dir);
  });
});

describe('the status of a matrix step', () => {
  it('is failed when one instance failed under on_error continue, and a condition on it reads so', async () => {
    const dir = workdirWith([
      node('build', 'process.exit(Number(process.argv[1]))', { matrix: { code: [0, 3] }, on_error: 'continue' }, ' $matrix.code'),
      node('report', 'process.stdin.pipe(process.stdout)', { depends_on: ['build'], stdin: '$build.status', if: "$build.status == 'failed'" }),
      node('celebrate', 'process.stdout.write("no")', { depends_on: ['build'], if: "$build.status == 'success'" }),
    ]);
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    const report = parseReport(result.stdout);
    expect(resultOf(report, 'build[code=0]').status).toBe('success');
    expect(resultOf(report, 'build[code=3]').status).toBe('failed');
    expect(resultOf(report, 'report').output).toBe('failed');
    expect(resultOf(report, 'celebrate').status).toBe('skipped');
    await expectReplayIdentical(dir, report.records_dir);
  });
});

describe('--max-parallel with a matrix', () => {
  it('caps the instances like any steps: with 1, no two run at once', async () => {
    const dir = workdirWith([
      node(
        'slow',
        'const fs = require("fs"); fs.appendFileSync("runs.txt", "<"); setTimeout(() => fs.appendFileSync("runs.txt", ">"), 150)',
        { matrix: { n: [1, 2, 3] } },
        ' $matrix.n',
      ),
    ]);
    const result = await runCli(['run', 'plan.json', '--json', '--max-parallel', '1'], { cwd: dir });

    expect(result.code).toBe(0);
    expect(readFileSync(join(dir, 'runs.txt'), 'utf8')).toBe('<>'.repeat(3));
  });
});

describe('validate and a matrix', () => {
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['an empty matrix', { matrix: {} }, /step 'build': matrix: it is empty[^\n]*\n\s+at plan\.json:\d+:\d+, steps\[0\]\.matrix/],
    ['a value that is not an array', { matrix: { cc: 'gcc' } }, /steps\[0\]\.matrix\.cc: expected an array of values[^\n]*\n\s+at plan\.json:\d+:\d+, steps\[0\]\.matrix\.cc/],
    ['a $matrix name that is no key', { matrix: { cc: ['gcc'] }, env: { X: '$matrix.cx' } }, /step 'build': '\$matrix\.cx' names no key of the matrix[^\n]*\n\s+at plan\.json:\d+:\d+, steps\[0\]\.env\.X/],
    ['an exclude naming no key', { matrix: { cc: ['gcc'], exclude: [{ os: 'linux' }] } }, /'exclude' entry 0 names 'os', which is not a key of the matrix \(cc\)\n\s+at plan\.json:\d+:\d+, steps\[0\]\.matrix\.exclude\[0\]\.os/],
    ['an include naming no key', { matrix: { cc: ['gcc'], include: [{}] } }, /'include' entry 0 names no key\n\s+at plan\.json:\d+:\d+, steps\[0\]\.matrix\.include\[0\]/],
    ['more instances than the bound', { matrix: { a: Array.from({ length: 17 }, (_, i) => i), b: Array.from({ length: 16 }, (_, i) => i) } }, /step 'build': matrix: it expands into 272 instances, over the bound of 256 per step/],
  ];
  it.each(cases)('refuses %s, located', async (_name, extra, expected) => {
    const dir = workdirWith([node('build', 'process.stdout.write(1)', extra)]);
    const validated = await runCli(['validate', 'plan.json'], { cwd: dir });

    expect(validated.code).toBe(1);
    expect(validated.stdout + validated.stderr).toMatch(expected);
  });

  it('explains a matrix refusal in validate --json: code matrix, the matrix step, its place', async () => {
    const dir = workdirWith([node('build', 'process.stdout.write(1)', { matrix: { cc: ['gcc'] }, cwd: 'src/$matrix.os' })]);
    const validated = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });

    expect(validated.code).toBe(1);
    expect(JSON.parse(validated.stdout)).toMatchObject({
      valid: false,
      error: "step 'build': '$matrix.os' names no key of the matrix (instance 'build[cc=gcc]' has cc)",
      refusal: { step_id: 'build', code: 'matrix', json_path: 'steps[0].cwd', file: 'plan.json', line: expect.any(Number) },
    });
  });

  it('refuses an instance id that another step has, and locates a later step where it is written', async () => {
    const clash = workdirWith([node('build[cc=gcc]', 'process.stdout.write(1)'), node('build', 'process.stdout.write(1)', { matrix: { cc: ['gcc'] } })]);
    const clashed = await runCli(['validate', 'plan.json'], { cwd: clash });
    expect(clashed.code).toBe(1);
    expect(clashed.stdout + clashed.stderr).toMatch(/the id 'build\[cc=gcc\]' is used by two steps[^\n]*\n\s+at plan\.json:\d+:\d+, steps\[1\]\.id/);

    const later = workdirWith([node('build', 'process.stdout.write(1)', { matrix: { cc: ['gcc', 'clang'] } }), { id: 'x', shell: 'rm -rf y', depends_on: ['build'] }]);
    const refused = await runCli(['validate', 'plan.json'], { cwd: later });
    expect(refused.code).toBe(1);
    expect(refused.stdout + refused.stderr).toMatch(/binary 'rm' is not in capabilities\.shell\.allow\n\s+at plan\.json:\d+:\d+, steps\[1\]\.shell/);
  });
});
