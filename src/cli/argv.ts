/** Reading the command line before commander does (the entry point and the command table use it). */

/** The first word of the command line that is not a global option (or its value): the command, `--version`, or undefined. */
export function commandName(argv: readonly string[]): string | undefined {
  for (let i = 2; i < argv.length; i++) {
    const word = argv[i] as string;
    if (word === '--log-level' || word === '--log-file') i++;
    else if (!word.startsWith('--log-')) return word;
  }
  return undefined;
}
