/**
 * A large text sent to PostgreSQL a piece at a time, the event loop let turn between two pieces: what a statement's
 * staged texts (staged-content.ts) and an import's COPY of first versions (copy.ts) send of a 50 MiB Binary's 67 Mi
 * characters, which encoded whole held the loop for a few hundred ms.
 */

export { PIECE_CHARS, pieces } from '../../text-pieces.ts';
import { pieces } from '../../text-pieces.ts';

/** A turn of the event loop (an immediate: queued I/O and timers run first). */
export const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The UTF-8 length of `text` in bytes, measured by the same pieces with a turn after each. */
export async function utf8Length(text: string): Promise<number> {
  let bytes = 0;
  for (const [at, end] of pieces(text)) {
    bytes += Buffer.byteLength(text.slice(at, end), 'utf8');
    await turn();
  }
  return bytes;
}
