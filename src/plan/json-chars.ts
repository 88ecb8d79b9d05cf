/**
 * The UTF-16 code units of JSON's structural characters, as `String.prototype.charCodeAt` returns
 * them (RFC 8259 §2, §7): shared by the scanners that read plan and manifest text without parsing it
 * (`json-bounds.ts`: nesting depth; `json-location.ts`: positions, JSON paths, duplicate keys).
 */
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const COMMA = 0x2c;
export const OPEN_ARRAY = 0x5b;
export const CLOSE_ARRAY = 0x5d;
export const OPEN_OBJECT = 0x7b;
export const CLOSE_OBJECT = 0x7d;
