/**
 * Splits a byte stream into `\n`-terminated lines (a trailing `\r` is kept: JSON ignores it) with a
 * bound on a line's length, so one endless line cannot take the process's memory: past the bound
 * the line is reported once as too long and skipped up to its newline.
 */
import { StringDecoder } from 'node:string_decoder';

export interface LineSplitterHandlers {
  /** A whole line, without its `\n`: as text (bytes that are not UTF-8 read as U+FFFD) and as the bytes that came. */
  readonly line: (text: string, bytes: Buffer) => void;
  /** A line grew past the bound; `bytes`: how much of it was seen. Its rest is skipped. */
  readonly tooLong: (bytes: number) => void;
}

export class LineSplitter {
  readonly #maxBytes: number;
  readonly #handlers: LineSplitterHandlers;
  #parts: Buffer[] = [];
  #bytes = 0;
  #skipping = false;

  /** @param maxBytes longest line taken, bytes (its `\n` not counted). */
  constructor(maxBytes: number, handlers: LineSplitterHandlers) {
    this.#maxBytes = maxBytes;
    this.#handlers = handlers;
  }

  push(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, start);
      const end = newline < 0 ? chunk.length : newline;
      this.#take(chunk.subarray(start, end));
      if (newline < 0) return;
      this.#finishLine();
      start = newline + 1;
    }
  }

  /** The input ended: a last line without a newline counts as a line. */
  end(): void {
    if (this.#bytes > 0 && !this.#skipping) this.#finishLine();
    this.#parts = [];
    this.#bytes = 0;
  }

  #take(part: Buffer): void {
    if (part.length === 0) return;
    if (this.#skipping) return;
    if (this.#bytes + part.length > this.#maxBytes) {
      this.#handlers.tooLong(this.#bytes + part.length);
      this.#skipping = true;
      this.#parts = [];
      this.#bytes = 0;
      return;
    }
    this.#parts.push(part);
    this.#bytes += part.length;
  }

  #finishLine(): void {
    if (this.#skipping) {
      this.#skipping = false;
      return;
    }
    const bytes = Buffer.concat(this.#parts, this.#bytes);
    const text = new StringDecoder('utf8').end(bytes);
    this.#parts = [];
    this.#bytes = 0;
    this.#handlers.line(text, bytes);
  }
}
