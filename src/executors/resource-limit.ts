/**
 * Which `capabilities.resources` limit ended a command, from kernel evidence only
 * (`docs/shell-commands.md#resource-limits`): the killing signal. No cgroup event counters are read here, so nothing else is
 * attributed (an absent limit is ambiguous on purpose).
 */

/** SIGXCPU → `cpu_seconds`, SIGXFSZ → `max_file_size_bytes`; null for any other ending. */
export function resourceLimitOfSignal(signal: string | null): string | null {
  if (signal === 'SIGXCPU') return 'cpu_seconds';
  if (signal === 'SIGXFSZ') return 'max_file_size_bytes';
  return null;
}
