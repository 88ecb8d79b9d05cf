/** A plain text table for the CLI's listings (`capsule logs`, `capsule records list`): columns padded to their widest cell, two spaces apart. */
export function textTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((title, column) => rows.reduce((width, row) => Math.max(width, (row[column] ?? '').length), title.length));
  const line = (row: readonly string[]): string => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ').trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}
