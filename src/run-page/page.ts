/**
 * The run's page (docs/run-page.md): one self-contained HTML file drawn from a {@link SessionModel}
 * — per plan run its outcome, totals and critical path, the graph of its steps coloured by
 * outcome (SVG drawn beforehand, `dag.ts`), a timeline of every attempt grouped by wave, and each
 * step's details, a matrix step's instances grouped under it in each; then the session's
 * background commands and delegations (a child capsule's run nested). Style and script are
 * inline, nothing is fetched. Pure: the model in, the page out (its text, or its bytes).
 */
import { PAGE_SCRIPT, PAGE_STYLE } from './page-assets.js';
import { DAG_MAX_EDGES, DAG_MAX_STEPS, dependencyCount, groupCounts, type RunGraphs } from './dag.js';
import { STEP_STATES, type AttemptModel, type GroupModel, type RunModel, type SessionModel, type StepModel } from './run-model.js';

/** Dependencies a step's details name (a step of a wide layer may depend on hundreds). */
const DEPS_SHOWN = 10;
/** Waves shown open on the timeline when a run has many steps (the rest are one click away). */
const OPEN_WAVES = 20;
/** Steps above which only the first {@link OPEN_WAVES} waves start open. */
const MANY_STEPS = 500;

/** How the page is written. */
export interface PageOptions {
  /** Seconds after which a browser reloads the page while the session runs (`capsule report --watch` rewrites it). */
  readonly refreshSecs?: number;
}

/** The page, whole. `dags[i]` is run i's graphs as SVG (`dag.ts`), or null when none is drawn. */
export function runPageHtml(session: SessionModel, dags: readonly (RunGraphs | null)[], options: PageOptions = {}): string {
  return runPageBytes(session, dags, options).toString('utf8');
}

/** The page, whole, as the UTF-8 bytes of its file (a large page is written without being decoded into one string first). */
export function runPageBytes(session: SessionModel, dags: readonly (RunGraphs | null)[], options: PageOptions = {}): Buffer {
  const title = session.runs.length === 1 ? `plan ${session.runs[0]?.planId ?? ''}` : `session ${session.sessionId}`;
  const out = new HtmlSink();
  out.push(
    '<!DOCTYPE html>',
    '<html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    // Nothing may be fetched: the page is one file, read offline or as a CI artifact.
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">`,
    ...(options.refreshSecs !== undefined && session.state === 'running' ? [`<meta http-equiv="refresh" content="${options.refreshSecs}">`] : []),
    `<title>${esc(`capsule run: ${title}`)}</title>`,
    `<style>${PAGE_STYLE}</style>`,
    '</head><body>',
  );
  sessionBody(out, session, dags, 'r');
  out.push(`<script>${PAGE_SCRIPT}</script>`, '</body></html>');
  return out.bytes();
}

/**
 * The page as it is written: each part encoded at once into one growing buffer, a line each.
 * A 10,000-step page is megabytes in hundreds of thousands of parts; kept as strings until a
 * final join they all outlive the young generation and cost the garbage collector more than
 * writing them; encoded at once, each part dies young.
 */
class HtmlSink {
  #buffer = Buffer.allocUnsafe(1 << 16);
  #length = 0;

  push(...parts: string[]): void {
    for (const part of parts) {
      // At most 3 bytes per UTF-16 unit, and the newline.
      const room = this.#length + part.length * 3 + 1;
      if (room > this.#buffer.length) {
        const grown = Buffer.allocUnsafe(Math.max(room, this.#buffer.length * 2));
        this.#buffer.copy(grown, 0, 0, this.#length);
        this.#buffer = grown;
      }
      this.#length += this.#buffer.write(part, this.#length, 'utf8');
      this.#buffer[this.#length++] = 10;
    }
  }

  /** What was written (a view of the buffer: the sink is not written to again). */
  bytes(): Buffer {
    return this.#buffer.subarray(0, this.#length);
  }

  text(): string {
    return this.#buffer.toString('utf8', 0, this.#length);
  }
}

/** Pushes the session's part of the page onto `parts`. */
function sessionBody(parts: HtmlSink, session: SessionModel, dags: readonly (RunGraphs | null)[], prefix: string, nested = false): void {
  const heading = nested ? 'h3' : 'h1';
  const state = session.state === 'running' ? 'running' : session.state === 'gone' ? 'killed (its runtime is gone and it never ended)' : `ended${session.exitStatus !== null ? ` (${session.exitStatus})` : ''}`;
  parts.push(nested ? '<div class="nested">' : '<header>');
  parts.push(`<${heading}>${esc(session.runs.length === 1 ? `Plan ${session.runs[0]?.planId}` : `Session ${session.sessionId}`)}</${heading}>`);
  parts.push(
    `<div class="muted">session <code>${esc(session.sessionId)}</code> · ${esc(state)} · started ${esc(isoTime(session.startMs))}` +
      `${session.endMs !== null ? ` · ${esc(formatMs(session.endMs - session.startMs))}` : ''} · records <code>${esc(session.recordsDir)}</code></div>`,
  );
  if (session.state === 'running') {
    parts.push(`<p class="banner" role="status" id="${prefix}-still-running">This session is still running: the page shows what was known at ${esc(isoTime(session.madeAtMs))}. Write it again (<code>capsule report</code>) for later news.</p>`);
  } else if (session.state === 'gone') {
    parts.push(`<p class="banner gone" role="status">This session never ended: its runtime is gone (killed or crashed). The page shows what its records say.</p>`);
  }
  if (session.problems.length > 0) {
    parts.push(`<details class="banner"><summary>${session.problems.length} line${session.problems.length === 1 ? '' : 's'} of the records could not be read</summary><pre>${esc(session.problems.slice(0, 50).join('\n'))}</pre></details>`);
  }
  parts.push(nested ? '' : '</header><main>');
  session.runs.forEach((run, i) => runSection(parts, run, dags[i] ?? null, `${prefix}${i}`, session.runs.length > 1, nested, session.madeAtMs));
  if (session.runs.length === 0) parts.push('<p>No plan ran in this session.</p>');
  if (session.backgroundCommands.length > 0) parts.push(backgroundSection(session, prefix));
  if (session.delegations.length > 0) parts.push(delegationSection(session, prefix));
  parts.push(nested ? '</div>' : '</main>');
}

function runSection(parts: HtmlSink, run: RunModel, graphs: RunGraphs | null, key: string, several: boolean, nested: boolean, madeAtMs: number): void {
  const h = nested ? 'h4' : 'h2';
  parts.push(`<section class="run" id="run-${key}" aria-labelledby="run-${key}-title">`);
  parts.push(`<${h} id="run-${key}-title">${several || nested ? `Plan ${esc(run.planId)}: ` : 'Outcome: '}<span class="badge outcome-${run.outcome}" data-outcome="${run.outcome}">${esc(run.outcome)}</span>${run.durationMs !== null ? ` <span class="muted">in ${esc(formatMs(run.durationMs))}</span>` : ''}</${h}>`);
  if (run.failedStep !== null) parts.push(`<p>Stopped by step <a href="#step-${key}-${stepIndex(run, run.failedStep)}"><code>${esc(run.failedStep)}</code></a>${run.reason !== null ? `: ${esc(run.reason)}` : ''}</p>`);
  else if (run.reason !== null) parts.push(`<p>${esc(run.reason)}</p>`);
  const totals = STEP_STATES.filter((state) => run.totals[state] > 0);
  const groups = run.groups.length > 0 ? ` (${run.groups.length} matrix step${run.groups.length === 1 ? '' : 's'}: ${run.groups.map((group) => `<code>${esc(group.id)}</code> ×${group.steps.length}`).join(', ')})` : '';
  parts.push(`<p class="totals">${run.steps.length} step${run.steps.length === 1 ? '' : 's'}${groups}${run.waves > 0 ? ` in ${run.waves} wave${run.waves === 1 ? '' : 's'}` : ''}: ${totals.map((state) => `<span class="badge state-${state}">${run.totals[state]} ${state}</span>`).join(' ')}</p>`);
  if (run.criticalPath.length > 0) {
    const first = run.steps[stepIndex(run, run.criticalPath[0]?.step ?? '')];
    const last = run.steps[stepIndex(run, run.criticalPath.at(-1)?.step ?? '')];
    const span = first?.dispatchedMs != null && last?.endedMs != null ? ` (${formatMs(last.endedMs - first.dispatchedMs)})` : '';
    parts.push(
      `<div class="critical-path" id="critical-${key}"><strong>Critical path${esc(span)}</strong> — the chain of steps that set the run's duration, each waiting for the one before (its dependency, or the wave it ran in):<ol>` +
        run.criticalPath
          .map((link) => `<li><a href="#step-${key}-${stepIndex(run, link.step)}" data-step="${key}-${stepIndex(run, link.step)}"><code>${esc(link.step)}</code></a>${link.gate === 'wave' ? ' <span class="muted">(then its wave)</span>' : ''}</li>`)
          .join('') +
        '</ol></div>',
    );
  }
  if (run.steps.length > 0) {
    parts.push(`<h3>Graph</h3>${legend()}`);
    parts.push(graphSection(run, graphs, key));
    timeline(parts, run, key, madeAtMs);
    stepList(parts, run, key);
  }
  parts.push('</section>');
}

/**
 * The run's graph: its grouped picture (each matrix step one node), and beside it, hidden until
 * the button shows it, the picture of every instance. The graph is a group of buttons to a
 * screen reader, each named by its step (or matrix step) and state; the list of steps is its
 * text alternative.
 */
function graphSection(run: RunModel, graphs: RunGraphs | null, key: string): string {
  const label = `The plan's steps as a graph, each coloured by its outcome${run.groups.length > 0 ? "; each matrix step's instances are one box with their aggregate state" : ''}. The same steps as text are in the list of steps below.`;
  if (graphs === null || graphs.grouped === null) {
    const grouped = run.groups.length > 0 ? " (a matrix step's instances count as one box)" : '';
    return `<p class="muted" id="dag-${key}-note">The graph is drawn for runs of at most ${DAG_MAX_STEPS} steps and ${DAG_MAX_EDGES} dependencies${grouped}; this one has ${run.steps.length} steps and ${dependencyCount(run)} dependencies. The timeline and the list of steps below show every step.</p>`;
  }
  const parts = [`<div class="dag" id="dag-${key}" role="group" aria-label="${esc(label)}">${graphs.grouped}</div>`];
  if (graphs.expanded !== null) {
    parts.unshift(`<p><button type="button" class="dag-toggle" data-dag="${key}" aria-pressed="false" aria-controls="dag-${key} dagx-${key}">Show every matrix instance</button></p>`);
    parts.push(`<div class="dag" id="dagx-${key}" role="group" hidden aria-label="The plan's steps as a graph, every matrix instance a box of its own, boxed with the others of its matrix step. The same steps as text are in the list of steps below.">${graphs.expanded}</div>`);
  }
  return parts.join('\n');
}

function legend(): string {
  return `<div class="legend" aria-hidden="true">${STEP_STATES.map((state) => `<span class="badge state-${state}">${state}</span>`).join('')}<span class="badge" style="border-width:3px">critical path</span><span class="badge" style="border-style:double;border-width:3px">matrix step</span><span class="badge mark">always</span></div>`;
}

/** Where each step's group is: `groupOf[i]` is the index of step i's matrix group, or -1. */
function groupIndexes(run: RunModel): Int32Array {
  const groupOf = new Int32Array(run.steps.length).fill(-1);
  run.groups.forEach((group, g) => {
    for (const i of group.steps) groupOf[i] = g;
  });
  return groupOf;
}

/** Pushes the run's timeline; `madeAtMs` ends the bars of what was still running when the page was made. */
function timeline(out: HtmlSink, run: RunModel, key: string, madeAtMs: number): void {
  let from = run.startMs;
  let to = run.startMs;
  const see = (at: number | null): void => {
    if (at === null) return;
    if (at < from) from = at;
    if (at > to) to = at;
  };
  if (run.outcome === 'running') see(madeAtMs);
  for (const step of run.steps) {
    see(step.readyMs);
    see(step.dispatchedMs);
    see(step.endedMs);
    see(step.settledMs);
    for (const attempt of step.attempts) {
      see(attempt.startMs);
      see(attempt.endMs);
    }
  }
  see(run.endMs);
  if (to < from + 1) to = from + 1;
  const span = to - from;
  const scale = 100 / span;
  // Thousandths of a percent: enough for any screen, and cheaper than toFixed for 10,000 rows.
  const pct = (at: number): string => `${Math.round((at - from) * scale * 1000) / 1000}%`;
  const width = (a: number, b: number): string => `${Math.round(Math.max(0, b - a) * scale * 1000) / 1000}%`;
  const seg = (cls: string, a: number, b: number, label: string, inner = ''): string => `<span class="seg ${cls}" style="left:${pct(a)};width:${width(a, b)}" title="${esc(label)}">${inner}</span>`;
  const endOf = (attempt: AttemptModel, start: number): number => attempt.endMs ?? (run.outcome === 'running' ? madeAtMs : (run.endMs ?? Math.max(to, start)));
  const groupOf = groupIndexes(run);
  const row = (step: StepModel, i: number): string => {
    let segs = '';
    if (step.readyMs !== null && step.dispatchedMs !== null && step.waveWaitMs > 0) segs += seg('wave-wait', step.readyMs, step.dispatchedMs, `waited ${formatMs(step.waveWaitMs)} for its wave`);
    let prev: AttemptModel | undefined;
    for (const attempt of step.attempts) {
      const start = attempt.startMs ?? step.dispatchedMs;
      if (start === null) continue;
      const end = endOf(attempt, start);
      if (prev?.endMs != null && start > prev.endMs) segs += seg('retry-gap', prev.endMs, start, `${formatMs(start - prev.endMs)} between attempts ${prev.attempt} and ${attempt.attempt}`);
      if (attempt.launchedMs !== null && attempt.launchedMs > start) segs += seg('launch-wait', start, attempt.launchedMs, `attempt ${attempt.attempt} waited ${formatMs(attempt.launchedMs - start)} for its launch`);
      const begin = attempt.launchedMs !== null && attempt.launchedMs > start ? attempt.launchedMs : start;
      segs += seg(`attempt ${attempt.status}${attempt.timedOut ? ' timed-out' : ''}`, begin, end, `attempt ${attempt.attempt}: ${attemptText(attempt)}, ${formatMs(end - start)}`, attempt.timedOut ? '<span class="mark">timeout</span>' : '');
      prev = attempt;
    }
    if (step.endedMs !== null && step.settledMs !== null && step.settledMs > step.endedMs + 1) segs += seg('settle-wait', step.endedMs, step.settledMs, `ended; settled ${formatMs(step.settledMs - step.endedMs)} later, with its wave`);
    const summary = `${step.id}: ${step.state}${step.always ? ', always runs' : ''}${step.attempts.length > 0 ? `, ${step.attempts.length} attempt${step.attempts.length === 1 ? '' : 's'}` : ''}${step.waveWaitMs > 0 ? `, waited ${formatMs(step.waveWaitMs)} for its wave` : ''}`;
    const group = groupOf[i] as number;
    return `<button type="button" class="trow state-${step.state}" data-step="${key}-${i}"${group >= 0 ? ` data-group="${key}-g${group}"` : ''} aria-pressed="false" aria-label="${esc(summary)}"><span class="name"${step.matrixGroup !== null ? ` title="${esc(step.id)}"` : ''}><span class="badge state-${step.state}">${step.state}</span> ${esc(shortName(step))}${step.always ? ' <span class="badge mark">always</span>' : ''}</span><span class="track">${segs}</span></button>`;
  };
  /** A matrix group's rows of one wave, under a row of its own: its instances' span, in their aggregate state. */
  const groupRows = (group: GroupModel, g: number, members: readonly number[]): string => {
    let start = Infinity;
    let end = -Infinity;
    for (const i of members) {
      const step = run.steps[i] as StepModel;
      for (const attempt of step.attempts) {
        const begin = attempt.startMs ?? step.dispatchedMs;
        if (begin === null) continue;
        start = Math.min(start, begin);
        end = Math.max(end, endOf(attempt, begin));
      }
    }
    const bar = start <= end ? seg(`attempt group-span state-${group.state}`, start, end, `${group.id}: ${members.length} instances from +${formatMs(start - from)} to +${formatMs(end - from)}`) : '';
    const label = `${group.id}: matrix of ${group.steps.length} instances${members.length < group.steps.length ? ` (${members.length} in this wave)` : ''}, ${group.state} (${groupCounts(group)})`;
    return `<details class="tgroup" data-step="${key}-g${g}"><summary class="trow group-row state-${group.state}" aria-label="${esc(label)}"><span class="name"><span class="badge state-${group.state}">${group.state}</span> ${esc(group.id)} <span class="muted">×${members.length}</span></span><span class="track">${bar}</span></summary>${members.map((i) => row(run.steps[i] as StepModel, i)).join('')}</details>`;
  };
  const ticks: string[] = [];
  const tick = niceStep(span / 8);
  for (let at = 0; at <= span; at += tick) ticks.push(`<span class="tick" style="left:${pct(from + at)}">${esc(formatMs(at))}</span>`);
  // Rows by wave, in declaration order within it; a matrix group's instances together where its first one is.
  const waves = new Map<string, { label: string; items: (number | { group: number; members: number[] })[]; groups: Map<number, number[]>; count: number }>();
  run.steps.forEach((s, i) => {
    const label = s.wave !== null ? `wave ${s.wave}` : s.state === 'skipped' ? 'settled without running' : 'not dispatched';
    let wave = waves.get(label);
    if (wave === undefined) waves.set(label, (wave = { label, items: [], groups: new Map(), count: 0 }));
    wave.count += 1;
    const g = groupOf[i] as number;
    if (g < 0) {
      wave.items.push(i);
      return;
    }
    const members = wave.groups.get(g);
    if (members !== undefined) members.push(i);
    else {
      const item = { group: g, members: [i] };
      wave.groups.set(g, item.members);
      wave.items.push(item);
    }
  });
  const ordered = [...waves.values()].sort((a, b) => waveOrder(a.label) - waveOrder(b.label));
  const many = run.steps.length > MANY_STEPS;
  out.push(
    '<h3>Timeline</h3>',
    `<p class="muted">Each row is a step, grouped by the wave it ran in${run.groups.length > 0 ? " (a matrix step's instances under one row, their span in their aggregate state: open it for each)" : ''}: its attempts as bars (a failed one red, hatched and marked <em>timeout</em> when its timeout_secs ended it), dotted: the time it waited for its wave after its dependencies had ended, amber: the wait for its launch, a thin line: the time between attempts, grey: from its end until its wave settled. Hover a bar for its times.</p>`,
    `<div class="timeline" id="timeline-${key}"><div class="axis" aria-hidden="true"><span class="name muted" style="padding-left:8px">0 = ${esc(isoTime(from))}</span><span class="ticks">${ticks.join('')}</span></div>`,
  );
  ordered.forEach((wave, n) => {
    out.push(`<details class="wave"${!many || n < OPEN_WAVES ? ' open' : ''}><summary>${esc(wave.label)} · ${wave.count} step${wave.count === 1 ? '' : 's'}</summary>`);
    for (const item of wave.items) out.push(typeof item === 'number' ? row(run.steps[item] as StepModel, item) : groupRows(run.groups[item.group] as GroupModel, item.group, item.members));
    out.push('</details>');
  });
  out.push('</div>');
}

/** A step's name on its timeline row: an instance under its group's row by its combination alone (`[cc=gcc,opt=O0]`). */
function shortName(step: StepModel): string {
  return step.matrixGroup !== null && step.id.startsWith(`${step.matrixGroup}[`) ? step.id.slice(step.matrixGroup.length) : step.id;
}

function waveOrder(label: string): number {
  const wave = /^wave (\d+)$/.exec(label);
  if (wave !== null) return Number(wave[1]);
  return label === 'settled without running' ? 1e9 : 1e9 + 1;
}

/** The list of steps in declaration order, a matrix step's instances under one item of their own: the graph's text alternative. */
function stepList(out: HtmlSink, run: RunModel, key: string): void {
  const groupOf = groupIndexes(run);
  out.push(`<h3>Steps</h3><p class="muted">Every step in the order the plan declares them${run.groups.length > 0 ? " (a matrix step's instances under one line with their aggregate state: open it for each)" : ''}; open one for its details. This list is also the graph's text alternative.</p><ul class="steps" id="steps-${key}">`);
  const items = out;
  const listed = new Set<number>();
  run.steps.forEach((step, i) => {
    const g = groupOf[i] as number;
    if (g < 0) {
      items.push(`<li>${stepItem(run, step, i, key, null)}</li>`);
      return;
    }
    if (listed.has(g)) return;
    listed.add(g);
    const group = run.groups[g] as GroupModel;
    const summary = `<span class="badge state-${group.state}" data-group-status="${group.state}">${group.state}</span> <code>${esc(group.id)}</code> <span class="muted">matrix · ${group.steps.length} instances — ${esc(groupCounts(group))}</span>${group.always ? ' <span class="badge mark">always</span>' : ''}${group.critical ? ' <strong>on the critical path</strong>' : ''}`;
    items.push(
      `<li class="group"><details id="step-${key}-g${g}" class="matrix-group state-${group.state}" data-step="${key}-g${g}" data-group-id="${esc(group.id)}"><summary>${summary}</summary><ul class="steps">${group.steps
        .map((m) => `<li>${stepItem(run, run.steps[m] as StepModel, m, key, `${key}-g${g}`)}</li>`)
        .join('\n')}</ul></details></li>`,
    );
  });
  out.push('</ul>');
}

/** One step of the list: a line that opens to its details. */
function stepItem(run: RunModel, step: StepModel, i: number, key: string, group: string | null): string {
  const id = `${key}-${i}`;
  let deps = 'none';
  if (step.dependsOn.length > 0) {
    deps = step.dependsOn
      .slice(0, DEPS_SHOWN)
      .map((dep) => `<a href="#step-${key}-${stepIndex(run, dep)}">${esc(dep)}</a>`)
      .join(', ');
    deps = `<span class="mono">${deps}</span>`;
    if (step.dependsOn.length > DEPS_SHOWN) deps += ` and ${step.dependsOn.length - DEPS_SHOWN} more`;
  }
  let dl = '';
  const row = (term: string, value: string): void => {
    dl += `<dt>${term}</dt><dd>${value}</dd>`;
  };
  if (step.critical) row('critical path', 'on it');
  if (step.reason !== null) row('why', `<span class="reason">${esc(step.reason)}</span>`);
  if (step.restoredFrom !== null) row('restored from', `session <code>${esc(step.restoredFrom.sessionId)}</code>, its record <code>${esc(step.restoredFrom.eventId)}</code>`);
  row('kind', esc(step.kind));
  if (step.matrixGroup !== null && step.matrix !== null) {
    row('matrix', `an instance of <a href="#step-${group ?? ''}"><code>${esc(step.matrixGroup)}</code></a>: ${Object.entries(step.matrix).map(([name, value]) => `<code>${esc(name)}=${esc(String(value))}</code>`).join(' ')}`);
  }
  if (step.command !== null) row(step.kind === 'shell' ? 'command' : esc(step.kind), `<code>${esc(step.command)}</code>`);
  if (step.input !== null) row('input', `<code>${esc(clip(step.input, 2000))}</code>`);
  row('depends on', deps);
  if (step.condition !== null) row('if', `<code>${esc(step.condition)}</code>`);
  const policy = [step.always ? 'always (runs after a stop or a cancel too)' : '', step.retries > 0 ? `retries ${step.retries}` : '', step.timeoutSecs !== null ? `timeout_secs ${step.timeoutSecs}` : '', step.onError !== 'fail' ? `on_error ${step.onError}` : ''].filter((text) => text !== '');
  if (policy.length > 0) row('policy', esc(policy.join(' · ')));
  if (step.wave !== null) row('wave', String(step.wave));
  if (step.durationMs !== null && step.attempts.length > 0) row('duration', formatMs(step.durationMs));
  if (step.waveWaitMs > 0) row('waited for its wave', formatMs(step.waveWaitMs));
  if (step.launchWaitMs > 0) row('waited for its launch', formatMs(step.launchWaitMs));
  if (step.errorGist !== null && step.state !== 'success') row('error', `<pre class="error">${esc(step.errorGist)}</pre>`);
  if (step.attempts.length > 0) {
    let rows = '';
    for (const attempt of step.attempts) {
      const duration = attempt.startMs !== null && attempt.endMs !== null ? formatMs(attempt.endMs - attempt.startMs) : attempt.status === 'running' ? 'running' : '-';
      rows += `<tr class="attempt" data-attempt="${attempt.attempt}" data-outcome="${attempt.status}${attempt.timedOut ? ' timed-out' : ''}"><td>${attempt.attempt}</td><td>${attempt.startMs !== null ? `+${formatMs(attempt.startMs - run.startMs)}` : '-'}</td><td>${duration}</td><td>${esc(attemptText(attempt))}</td><td>${attempt.log !== null ? `<code>${esc(attempt.log)}</code>` : '<span class="muted">printed nothing</span>'}</td></tr>`;
    }
    row('attempts', `<table class="attempts"><thead><tr><th>#</th><th>start</th><th>duration</th><th>ended</th><th>log</th></tr></thead><tbody>${rows}</tbody></table>`);
  }
  if (step.outputTail !== null) row('output (its end)', `<pre class="output">${esc(step.outputTail)}</pre>`);
  if (step.logPath !== null) row('full log', `<code>${esc(step.logPath)}</code>`);
  const why = step.reason !== null && step.state !== 'success' ? ` <span class="muted">— ${esc(clip(step.reason, 160))}</span>` : step.errorGist !== null && step.state === 'failed' ? ` <span class="muted">— ${esc(clip(step.errorGist.split('\n')[0] ?? '', 160))}</span>` : '';
  const summary = `<span class="badge state-${step.state}" data-status="${step.state}">${step.state}</span> <code>${esc(step.id)}</code>${step.always ? ' <span class="badge mark">always</span>' : ''}${step.attempts.length > 1 ? ` <span class="muted">${step.attempts.length} attempts</span>` : ''}${why}`;
  return `<details id="step-${id}" class="step state-${step.state}" data-step="${id}"${group !== null ? ` data-group="${group}"` : ''} data-step-id="${esc(step.id)}"><summary>${summary}</summary><div class="detail"><dl>${dl}</dl></div></details>`;
}

function backgroundSection(session: SessionModel, prefix: string): string {
  const rows = session.backgroundCommands
    .map((command) => `<tr class="background-command" data-work-id="${esc(command.workId)}"><td><code>${esc(command.workId)}</code></td><td><code>${esc(clip(command.command, 300))}</code></td><td>+${esc(formatMs(command.startMs - session.startMs))}</td><td>${command.endMs !== null ? esc(formatMs(command.endMs - command.startMs)) : 'running'}</td><td>${esc(command.ended)}</td><td>${command.log !== null ? `<code>${esc(command.log)}</code>` : ''}</td></tr>`)
    .join('');
  return `<section id="${prefix}-background" class="background-commands"><h2>Background commands</h2><table><thead><tr><th>work id</th><th>command</th><th>started</th><th>ran</th><th>ended</th><th>log</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

function delegationSection(session: SessionModel, prefix: string): string {
  const items = session.delegations.map((delegation, i) => {
    const head = `<code>${esc(delegation.capsule)}</code> ${delegation.delegationId !== null ? `<code>${esc(delegation.delegationId)}</code> ` : ''}<span class="badge">${esc(delegation.outcome)}</span>${delegation.durationMs !== null ? ` in ${esc(formatMs(delegation.durationMs))}` : ''}${delegation.reason !== null ? ` — ${esc(delegation.reason)}` : ''}`;
    const where = delegation.childDir !== null ? `<div class="muted">child records: <code>${esc(delegation.childDir)}</code> (<code>capsule report ${esc(delegation.childDir)}</code> writes its own page)</div>` : '';
    // The child's graph is not drawn here (its page has it); its run, timeline and steps are.
    const child = delegation.child !== null ? `<details class="child-run"><summary>the child capsule's run</summary>${nestedBody(delegation.child, `${prefix}c${i}-`)}</details>` : '';
    return `<li class="delegation"${delegation.delegationId !== null ? ` data-delegation-id="${esc(delegation.delegationId)}"` : ''}>${head}${where}${child}</li>`;
  });
  return `<section id="${prefix}-delegations" class="delegations"><h2>Delegations</h2><ul>${items.join('\n')}</ul></section>`;
}

/** A child capsule's session, nested under its delegation. */
function nestedBody(session: SessionModel, prefix: string): string {
  const parts = new HtmlSink();
  sessionBody(parts, session, [], prefix, true);
  return parts.text();
}

function attemptText(attempt: AttemptModel): string {
  if (attempt.status === 'running') return 'running';
  if (attempt.notStarted) return 'withdrawn before its process started';
  const how = attempt.signal !== null ? `ended by ${attempt.signal}` : attempt.exitCode !== null ? `exit code ${attempt.exitCode}` : attempt.status;
  return `${attempt.status}${how !== attempt.status ? ` (${how})` : ''}${attempt.timedOut ? ', timed out' : ''}`;
}

const indexes = new WeakMap<RunModel, Map<string, number>>();

/** A step's index in its run (a map made once per run: a large plan names its steps many times). */
function stepIndex(run: RunModel, id: string): number {
  let index = indexes.get(run);
  if (index === undefined) {
    index = new Map(run.steps.map((step, i) => [step.id, i]));
    indexes.set(run, index);
  }
  return index.get(id) ?? -1;
}

/** A duration for people: `850ms`, `2.4s`, `3m 05s`. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes}m ${String(Math.round((ms % 60_000) / 1000)).padStart(2, '0')}s`;
}

function niceStep(raw: number): number {
  const steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000, 3_600_000];
  return steps.find((step) => step >= raw) ?? Math.ceil(raw / 3_600_000) * 3_600_000;
}

function isoTime(ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

const ENTITIES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text for HTML: in an element or a quoted attribute (one pass: a large run's page escapes much). */
function esc(text: string): string {
  return /[&<>"']/.test(text) ? text.replace(/[&<>"']/g, (char) => ENTITIES[char] as string) : text;
}
