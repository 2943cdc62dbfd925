/**
 * A large text sent to PostgreSQL a piece at a time, the event loop let turn between two pieces: what a statement's
 * staged texts (staged-content.ts) and an import's COPY of first versions (copy.ts) send of a 50 MiB Binary's 67 Mi
 * characters, which encoded whole held the loop for a few hundred ms.
 */

/** Characters encoded and written per piece of a large text (a few ms of work), the event loop let turn between two. */
export const PIECE_CHARS = 1 << 20;

/** A turn of the event loop (an immediate: queued I/O and timers run first). */
export const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The ends of `text`'s pieces: PIECE_CHARS characters each, never between the two halves of a surrogate pair. */
export function* pieces(text: string): Generator<[number, number]> {
  for (let at = 0; at < text.length; ) {
    let end = Math.min(text.length, at + PIECE_CHARS);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end++;
    yield [at, end];
    at = end;
  }
}

/** The UTF-8 length of `text` in bytes, measured by the same pieces with a turn after each. */
export async function utf8Length(text: string): Promise<number> {
  let bytes = 0;
  for (const [at, end] of pieces(text)) {
    bytes += Buffer.byteLength(text.slice(at, end), 'utf8');
    await turn();
  }
  return bytes;
}
