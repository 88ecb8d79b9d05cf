import { readSync } from 'node:fs';

/** Up to `length` bytes of `fd` from `position` (fewer at the file's end): short reads are read on. */
export function readAt(fd: number, position: number, length: number): Buffer {
  const buffer = Buffer.alloc(length);
  let read = 0;
  while (read < length) {
    const n = readSync(fd, buffer, read, length - read, position + read);
    if (n <= 0) break;
    read += n;
  }
  return buffer.subarray(0, read);
}
