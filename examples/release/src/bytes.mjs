/**
 * Formats a byte count for people, in binary units (1 KiB = 1024 bytes).
 * @param {number} bytes A non-negative integer.
 * @param {number} [digits=1] Digits after the decimal point for KiB and up.
 * @returns {string} e.g. "512 B", "1.5 KiB", "3.0 MiB".
 */
export function formatBytes(bytes, digits = 1) {
  if (!Number.isFinite(bytes) || bytes < 0) throw new RangeError(`bytes must be a non-negative number, got ${bytes}`);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(digits)} ${units[unit]}`;
}

/**
 * Parses "1.5 KiB", "2MiB" or "512" (bytes) back into a byte count.
 * @param {string} text
 * @returns {number}
 */
export function parseBytes(text) {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|TiB)?\s*$/.exec(text);
  if (match === null) throw new SyntaxError(`not a byte size: ${JSON.stringify(text)}`);
  const exponent = ['B', 'KiB', 'MiB', 'GiB', 'TiB'].indexOf(match[2] ?? 'B');
  return Math.round(Number(match[1]) * 1024 ** exponent);
}
