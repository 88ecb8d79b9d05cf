/**
 * The citation checker behind `test/architecture/citations.test.ts`: every document a comment, a
 * doc or a message cites must be in this repository, and every section it names must exist.
 *
 * A citation is a path to a `.md` file (`docs/plan-format.md#rule-5`, a markdown link
 * `[cli.md](cli.md#warnings)`) or a link to any file from a doc. What cannot be cited: section
 * numbers (`plan.md §6 rule 5`, `§10.3` — our docs have anchors, not numbers; RFC and JSON-RPC
 * sections excepted), the reference folder's documents (`DESIGN`, `STYLE`, `spec/…`, "the spec"),
 * which users of the repository do not have.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, extname, join, normalize, relative } from 'node:path';

/** One thing wrong: where, and what. */
export interface CitationProblem {
  readonly file: string;
  readonly line: number;
  readonly problem: string;
}

/** Folders whose files are checked (code, tests, benchmarks, scripts, generated charts and schemas, examples). */
const CHECKED_DIRS = ['src', 'machines', 'bench', 'scripts', 'test', 'docs', 'visualizations', 'schema', 'examples'];

/** Top-level files checked as well. */
const CHECKED_TOP_FILES = ['package.json', 'jest.config.js', 'tsconfig.json', 'tsconfig.test.json'];

/**
 * Top-level documents not checked yet: they are being rewritten (the README as a guide, BENCHMARKS
 * trimmed to its method and latest run). Remove a name here once its rewrite has landed.
 * Links *to* them are still checked, anchors included.
 */
export const NOT_CHECKED_YET: readonly string[] = [];

/** Extensions of the text files read. */
const TEXT_EXTENSIONS = new Set(['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs', '.c', '.h', '.sh', '.md', '.json']);

/** Folders never entered (installed packages, build output, what tests and examples write). */
const SKIPPED_DIRS = new Set(['node_modules', 'dist', 'build', '.capsule', 'coverage']);

/**
 * `.md` names that code writes or tests make up, not documents it cites: the benchmark's
 * `latest.md`, the examples' output files, a made-up file name in a test of the wording check.
 */
const NOT_CITATIONS = new Set(['latest.md', 'summary.md', 'RELEASE-NOTES.md', 'out.md', 'x.md']);

/** Section citations of external standards a reader can look up (`RFC 8259 §2, §7`, `JSON-RPC 2.0 §5`). */
const STANDARD_SECTIONS = /(?:RFC \d+|JSON-RPC 2\.0)\s*§\s*[\d.]+(?:(?:,\s*|\s+and\s+)§\s*[\d.]+)*/g;

/** The reference folder's documents, named as users cannot open them: `DESIGN`, `STYLE` (upper case), `spec/…`, "the spec". */
const REFERENCE_DOCS = [/\b(?:DESIGN|STYLE)\b/g, /\bspec(?:\/|'s\b| semantics\b| docs\/)|\b(?:the|a|Murmur's|our) spec\b/gi];

/** A path ending in `.md`, with an optional `#anchor`. */
const MD_PATH = /(?<![\w./-])((?:\.{1,2}\/)*[\w./-]*?[\w-]+\.md)(?:#([\w-]+))?(?![\w-])/g;

/** A markdown link's target: `[text](target)`. */
const MD_LINK = /\]\(([^)\s]+)\)/g;

/** Every file checked, repository-relative. */
export function checkedFiles(root: string): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(root, dir)).flatMap((name) => {
      const path = join(dir, name);
      const stat = statSync(join(root, path));
      if (stat.isDirectory()) return SKIPPED_DIRS.has(name) ? [] : walk(path);
      return TEXT_EXTENSIONS.has(extname(name)) ? [path] : [];
    });
  return [...CHECKED_DIRS.filter((dir) => existsSync(join(root, dir))).flatMap(walk), ...CHECKED_TOP_FILES.filter((file) => existsSync(join(root, file)))];
}

/**
 * GitHub's anchor of a heading: lower case, markup and punctuation dropped (letters, digits,
 * spaces, `-` and `_` kept), spaces turned into `-`.
 */
export function headingSlug(heading: string): string {
  const text = heading
    .replace(/<[^>]*>/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-');
}

/** The anchors a markdown text defines: its headings' slugs (repeats numbered as GitHub does) and every `<a id>` / `<a name>`. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const counts = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading !== null) {
      const slug = headingSlug(heading[1] ?? '');
      const seen = counts.get(slug) ?? 0;
      anchors.add(seen === 0 ? slug : `${slug}-${seen}`);
      counts.set(slug, seen + 1);
    }
  }
  for (const match of markdown.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(match[1] ?? '');
  return anchors;
}

/** Reads files and their anchors once. */
export class Repository {
  readonly root: string;
  readonly #anchors = new Map<string, Set<string>>();

  constructor(root: string) {
    this.root = root;
  }

  exists(path: string): boolean {
    return existsSync(join(this.root, path));
  }

  anchors(path: string): Set<string> {
    let anchors = this.#anchors.get(path);
    if (anchors === undefined) {
      anchors = anchorsOf(readFileSync(join(this.root, path), 'utf8'));
      this.#anchors.set(path, anchors);
    }
    return anchors;
  }
}

/**
 * Resolves a cited path written in `file`: relative to the file's folder, then to the repository
 * root. A doc (`docs/*.md`) may name a sibling page bare (`cancel.md`); code must write
 * `docs/cancel.md`, so that a bare name of the reference folder (`plan.md`) never passes.
 * @returns the repository-relative path, or null when no such file exists.
 */
function resolveCited(repo: Repository, file: string, cited: string): string | null {
  for (const base of [dirname(file), '.']) {
    const path = normalize(join(base, cited));
    if (!path.startsWith('..') && repo.exists(path)) return path;
  }
  return null;
}

/** The problems of a cited path (and anchor), or none. */
function checkTarget(repo: Repository, file: string, cited: string, anchor: string | undefined): string | null {
  const target = resolveCited(repo, file, cited);
  if (target === null) return `cites ${cited}, which is not in the repository`;
  if (anchor === undefined || anchor === '' || !target.endsWith('.md')) return null;
  if (!repo.anchors(target).has(anchor)) return `cites ${cited}#${anchor}, but ${target} has no section with that anchor`;
  return null;
}

/** Problems of one text, as if it were the file `file` (repository-relative). */
export function problemsOfText(repo: Repository, file: string, text: string): CitationProblem[] {
  const problems: CitationProblem[] = [];
  const isDoc = file.endsWith('.md');
  const lines = text.split('\n');
  lines.forEach((raw, index) => {
    const line = index + 1;
    const add = (problem: string): void => void problems.push({ file, line, problem });
    const text = raw.replace(/\bhttps?:\/\/\S+/g, '').replace(STANDARD_SECTIONS, '');
    if (text.includes('§')) add(`cites a numbered section (${excerptAround(text, text.indexOf('§'))}): cite docs/<page>.md#<anchor> instead`);
    for (const pattern of REFERENCE_DOCS) {
      for (const match of text.matchAll(pattern)) add(`names a document users do not have (${excerptAround(text, match.index ?? 0)})`);
    }
    const seen = new Set<string>();
    for (const match of text.matchAll(MD_PATH)) {
      const cited = match[1] ?? '';
      if (NOT_CITATIONS.has(basename(cited))) continue;
      // A path segment handed to `join(…)` is code, not a citation.
      if (/join\([^)]*['"]$/.test(text.slice(0, match.index))) continue;
      seen.add(`${cited}#${match[2] ?? ''}`);
      const problem = checkTarget(repo, file, cited, match[2]);
      if (problem !== null) add(problem);
    }
    if (!isDoc) return;
    for (const match of text.matchAll(MD_LINK)) {
      const targetText = match[1] ?? '';
      if (/^[a-z]+:/.test(targetText)) continue;
      const [path = '', anchor] = targetText.split('#');
      if (seen.has(`${path}#${anchor ?? ''}`)) continue;
      if (path === '') {
        if (anchor !== undefined && !repo.anchors(file).has(anchor)) add(`links #${anchor}, which ${file} does not define`);
        continue;
      }
      const problem = checkTarget(repo, file, path, anchor);
      if (problem !== null) add(problem);
    }
  });
  return problems;
}

function excerptAround(text: string, at: number): string {
  return text.slice(Math.max(0, at - 30), at + 30).trim();
}

/** The checker and its test, which spell out the citations they refuse. */
const CHECKER_FILES = [join('test', 'support', 'citations.ts'), join('test', 'architecture', 'citations.test.ts')];

/** The places history belongs: the changelog and earlier benchmark runs (their citations are still checked). */
const HISTORY_RECORDS = /^(CHANGELOG\.md$|bench\/history\/)/;

/** Round-by-round history and the tracker's numbers, which a reader of the repository cannot look up. */
const HISTORY = /\b[Rr]ound \d+\b|\b[Ii]ssues? \d+\b|\b[Ff]ield reports? \d+/g;

/** Every mention of a round, an issue or a field report by number in the checked files (comments, docs, messages). */
export function historyMentions(root: string): CitationProblem[] {
  return checkedFiles(root)
    .filter((file) => !NOT_CHECKED_YET.includes(file) && !CHECKER_FILES.includes(file) && !HISTORY_RECORDS.test(file))
    .flatMap((file) =>
      readFileSync(join(root, file), 'utf8')
        .split('\n')
        .flatMap((text, index) => [...text.matchAll(HISTORY)].map((match) => ({ file, line: index + 1, problem: `carries history (${excerptAround(text, match.index ?? 0)}): say why, and leave history to CHANGELOG.md and git` }))),
    );
}

/** Every citation problem of the repository's checked files. */
export function citationProblems(root: string): CitationProblem[] {
  const repo = new Repository(root);
  return checkedFiles(root)
    .filter((file) => !NOT_CHECKED_YET.includes(file) && !CHECKER_FILES.includes(file))
    .flatMap((file) => problemsOfText(repo, relative(root, join(root, file)), readFileSync(join(root, file), 'utf8')));
}
