/**
 * `capsule cache prune` (docs/cache.md#prune): shrinks the step cache's store by age and by size.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import { defaultCacheDir } from '../cache/cache-dir.js';
import { parseSize, pruneCache } from '../cache/prune.js';
import { formatBytes } from './progress.js';
import { EXIT, usageError, type ExitCode } from './program.js';
import { parseDuration } from './records.js';

/** Options of `capsule cache prune`, as commander parses them. */
export interface CachePruneOptions {
  readonly cacheDir?: string;
  readonly maxSize?: number;
  readonly olderThan?: number;
}

/** Registers `capsule cache` and its subcommands on the program. */
export function registerCache(program: Command): void {
  const cache = program.command('cache').description("Manage the step cache's store (docs/cache.md).");
  cache
    .command('prune')
    .description('Remove stored step results not used for a while, then the least recently used until the store fits a size.')
    .option('--cache-dir <dir>', 'the store (default: $XDG_CACHE_HOME/capsule-runtime/steps, ~/.cache when unset)')
    .option('--max-size <size>', 'keep at most this much: 500M, 2G, 100k (powers of 1024), or bytes', sizeOption)
    .option('--older-than <duration>', 'remove what was not stored or restored for longer than this: 90s, 30m, 12h, 7d, 2w', parseDuration)
    .addHelpText('after', '\nWith both, the old entries go first, then the least recently used until the store fits. Exit codes: 0 done; 2 usage error or no store there.')
    .action((options: CachePruneOptions) => {
      process.exitCode = pruneCommand(options, process.stdout);
    });
}

function sizeOption(text: string): number {
  const bytes = parseSize(text);
  if (bytes === null) throw new InvalidArgumentError('expected a size: a number and K, M, G or T (500M, 2G), or bytes.');
  return bytes;
}

/** Runs `capsule cache prune`. */
export function pruneCommand(options: CachePruneOptions, stdout: { write(text: string): unknown }): ExitCode {
  if (options.maxSize === undefined && options.olderThan === undefined) return usageError('say what to remove: --max-size SIZE (e.g. 2G) or --older-than DURATION (e.g. 7d)');
  const dir = options.cacheDir !== undefined ? resolve(options.cacheDir) : defaultCacheDir();
  if (!existsSync(dir)) return usageError(`there is no step cache at ${dir} (a run of a step with "cache" makes it; or name it with --cache-dir)`);
  const outcome = pruneCache(dir, { ...(options.maxSize !== undefined ? { maxBytes: options.maxSize } : {}), ...(options.olderThan !== undefined ? { olderThanMs: options.olderThan } : {}) });
  stdout.write(
    `cache: ${dir}\nremoved ${outcome.removedEntries} ${outcome.removedEntries === 1 ? 'entry' : 'entries'} and ${outcome.removedFiles} stored ${outcome.removedFiles === 1 ? 'file' : 'files'}, freed ${formatBytes(outcome.freedBytes)}; kept ${outcome.keptEntries} ${outcome.keptEntries === 1 ? 'entry' : 'entries'}, ${formatBytes(outcome.keptBytes)}\n`,
  );
  return EXIT.OK;
}
