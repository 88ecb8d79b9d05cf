/**
 * The `--allow <binary>` fix a refusal of a shell command proposes (the plan check's and
 * `shell.run`'s), quoted so that it can be pasted back into a shell as it is.
 */

/**
 * `--allow <value>`, the value quoted for a POSIX shell when it needs it (single quotes, a quote
 * inside written `'\''`), so the flag can be pasted as it is.
 *
 * @example allowFlag('make') // "--allow make"; allowFlag("my tool") // "--allow 'my tool'"
 */
export function allowFlag(value: string): string {
  return `--allow ${hasControlCharacter(value) ? dollarQuote(value) : shellQuote(value)}`;
}

/** Whether `value` holds a C0 control character or DEL (newline, tab, ESC, …): single quotes would keep it, but a terminal line cannot show or paste it. */
export function hasControlCharacter(value: string): boolean {
  return /[\u0000-\u001f\u007f]/u.test(value);
}

/** What a fix says once when one of its `--allow` flags is written `$'…'` ({@link allowFlag}). */
export const DOLLAR_QUOTE_NOTE = "$'…' is bash, zsh and ksh quoting, the control characters written as escapes";

/**
 * `value` as one `$'…'` word (bash, zsh, ksh): printable as it is, `\` and `'` escaped, the
 * control characters written `\n`, `\t`, `\r` or `\xHH`, so that the flag can be shown on one
 * line and pasted back to the same bytes.
 */
export function dollarQuote(value: string): string {
  const named: Record<string, string> = { '\n': '\\n', '\t': '\\t', '\r': '\\r' };
  const body = value.replace(/[\\'\u0000-\u001f\u007f]/gu, (c) =>
    c === '\\' || c === "'" ? `\\${c}` : (named[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`),
  );
  return `$'${body}'`;
}

/**
 * `value` as one word of a POSIX shell (and of a plan's shell string): as it is when it needs no
 * quoting, else in single quotes, a quote inside written `'\''`.
 *
 * @example shellQuote('/usr/bin/make') // "/usr/bin/make"; shellQuote('/opt/my dir/x') // "'/opt/my dir/x'"
 */
export function shellQuote(value: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/u.test(value)) return value;
  return `'${value.replace(/'/gu, "'\\''")}'`;
}
