/**
 * A large text handled a piece at a time: sent to PostgreSQL (src/store/postgres/text-pieces.ts) or encoded into an
 * answer's body as it is read (src/http/streamed-text.ts), never encoded whole into one buffer.
 */

/** Characters per piece of a large text (a few ms of work, a MiB or so of UTF-8). */
export const PIECE_CHARS = 1 << 20;

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
