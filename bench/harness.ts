/**
 * The benchmark harness: what a suite is, what it returns, and how rows become tables.
 *
 * A suite is a module exporting `{ name, title, run(ctx) }` (listed in `suites/index.ts`). `run`
 * measures the runtime and its baselines in this same process run, interleaved run by run, and
 * returns {@link Row}s. The harness turns rows into one table per suite: median, min–max, and the
 * ratio to each named baseline, taken pair by pair (sample i of a row against sample i of its
 * baseline, measured next to each other), then summarised by its own median and min–max.
 */
/** A bound a row's figure must stay under. */
export interface Target {
  /** The bound (same unit as the figure it applies to). */
  readonly max: number;
  /** What is compared with `max`: the row's median, or the median of its pairwise ratio to `against`. */
  readonly on: 'median' | 'ratio';
  /** For `on: 'ratio'`: the baseline subject. */
  readonly against?: string;
  /** How the target is written in the table, e.g. `≤ 40 µs/step`. */
  readonly text: string;
}

/** One measured figure of one subject in one case. */
export interface Row {
  /** What was run, e.g. `wide 10,000`. Rows of one case are compared with each other. */
  readonly case: string;
  /** Who ran it, e.g. `runPlan`, `ready-queue`, `bare actor`. */
  readonly subject: string;
  readonly unit: string;
  /** One sample per measured run, in run order (sample i of every row of a case comes from run i). */
  readonly samples: readonly number[];
  /** Subjects of the same case to report the pairwise ratio against. */
  readonly compare?: readonly string[];
  readonly target?: Target;
  /** Free text shown after the table. */
  readonly note?: string;
  /** Decimals shown (default: by magnitude). */
  readonly digits?: number;
}

/** What a suite is given. */
export interface SuiteContext {
  /** Measured runs per case (medians are of these). */
  readonly runs: number;
  /** Untimed warm-up runs before measuring (JIT). */
  readonly warmups: number;
  /** Smaller plans and fewer runs: a smoke test of the bench itself. */
  readonly quick: boolean;
  /** A scratch directory of this bench run (removed at the end). */
  readonly tmpDir: string;
  /** Progress line on stderr. */
  log(message: string): void;
}

export interface Suite {
  /** Short id, used by `--suite`. */
  readonly name: string;
  /** Heading of its table. */
  readonly title: string;
  run(ctx: SuiteContext): Promise<Row[]>;
}

/** A row with its statistics computed. */
export interface RowResult extends Row {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly ratios: Readonly<Record<string, { readonly median: number; readonly min: number; readonly max: number; readonly samples: readonly number[] }>>;
  /** null when the row has no target. */
  readonly met: boolean | null;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Pairwise ratios `a[i] / b[i]` over the runs both have. */
export function pairwise(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.min(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((a[i] as number) / (b[i] as number));
  return out;
}

export function computeRows(rows: readonly Row[]): RowResult[] {
  return rows.map((row) => {
    const ratios: Record<string, { median: number; min: number; max: number; samples: number[] }> = {};
    for (const subject of row.compare ?? []) {
      const base = rows.find((r) => r.case === row.case && r.subject === subject);
      if (base === undefined) continue;
      const samples = pairwise(row.samples, base.samples);
      ratios[subject] = { median: median(samples), min: Math.min(...samples), max: Math.max(...samples), samples };
    }
    const med = median(row.samples);
    let met: boolean | null = null;
    if (row.target !== undefined) {
      const figure = row.target.on === 'median' ? med : ratios[row.target.against ?? '']?.median;
      met = figure !== undefined && Number.isFinite(figure) && figure <= row.target.max;
    }
    return { ...row, median: med, min: Math.min(...row.samples), max: Math.max(...row.samples), ratios, met };
  });
}

/** A number for a table: 3 significant digits, thousands separated. */
export function fmt(value: number, digits?: number): string {
  if (!Number.isFinite(value)) return '—';
  const abs = Math.abs(value);
  const d = digits ?? (abs >= 100 ? 0 : abs >= 10 ? 1 : abs >= 1 ? 2 : 3);
  return value.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
}

/** A suite's rows as a Markdown table (plus its notes). */
export function renderTable(suite: Suite, rows: readonly RowResult[], runs: number): string {
  const lines = [
    `### ${suite.title}`,
    '',
    `| case | subject | median | min–max | ratio to baseline (pairwise median, min–max) | target | met |`,
    `| --- | --- | ---: | ---: | --- | --- | --- |`,
  ];
  for (const row of rows) {
    const ratio = Object.entries(row.ratios)
      .map(([subject, r]) => `${fmt(r.median, 2)}× ${subject} (${fmt(r.min, 2)}–${fmt(r.max, 2)})`)
      .join('; ');
    lines.push(
      `| ${row.case} | ${row.subject} | ${fmt(row.median, row.digits)} ${row.unit} | ${fmt(row.min, row.digits)}–${fmt(row.max, row.digits)} | ${ratio || '—'} | ${row.target?.text ?? ''} | ${row.met === null ? '' : row.met ? 'yes' : '**no**'} |`,
    );
  }
  const notes = rows.filter((r) => r.note !== undefined).map((r) => `- ${r.case}, ${r.subject}: ${r.note}`);
  const sampleCounts = [...new Set(rows.map((r) => r.samples.length))].join('/');
  lines.push('', `Samples per row: ${sampleCounts || runs}.`);
  if (notes.length > 0) lines.push('', ...notes);
  return lines.join('\n');
}

/**
 * Runs `subjects` once each per run, in a rotating order (so neither side always goes first),
 * `runs` times, after `warmups` untimed rounds. Each function returns its own figure (it times
 * itself, so setup stays outside the figure). Returns the samples by subject, in run order.
 * No forced GC between runs: a full GC shrinks the young generation, and the next (small) run
 * then measured up to 2.5× slower than in steady state; each run pays the GC it causes.
 */
export async function interleave(
  ctx: SuiteContext,
  subjects: ReadonlyArray<readonly [string, () => Promise<number>]>,
  runs = ctx.runs,
  warmups = ctx.warmups,
): Promise<Map<string, number[]>> {
  const samples = new Map<string, number[]>(subjects.map(([name]) => [name, []]));
  for (let w = 0; w < warmups; w++) for (const [, fn] of subjects) await fn();
  for (let run = 0; run < runs; run++) {
    for (let k = 0; k < subjects.length; k++) {
      const [name, fn] = subjects[(run + k) % subjects.length] as readonly [string, () => Promise<number>];
      (samples.get(name) as number[]).push(await fn());
    }
  }
  return samples;
}

/** Milliseconds since an arbitrary origin, sub-millisecond resolution. */
export const now = (): number => performance.now();
