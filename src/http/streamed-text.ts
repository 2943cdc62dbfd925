/**
 * An answer written a part at a time: its text given as parts (a history page's entries and the stored texts of its
 * versions, src/fhir/bundle.ts historyParts), each encoded in UTF-8 a piece of at most PIECE_CHARS characters at a time
 * as the client reads, and let go once written. A page of large versions is then held once, as its parts, where a
 * text of the whole page and its bytes held it two more times (docs/PERFORMANCE.md, fifty-seventh session).
 */
import { pieces } from '../text-pieces.ts';
import { rememberStreamed } from './content-coding.ts';

const utf8 = new TextEncoder();

/**
 * Bytes written between two collections the stream asks for (Bun.gc(false): a collection let run, not waited for).
 * Each piece's buffer is garbage once written, but the collector lets them pile up first: a page of 120 MiB held 123 MiB
 * of them at its peak, 31 MiB with a collection every 16 MiB.
 */
const COLLECT_BYTES = 16 << 20;

/** A Response whose body is the concatenation of `parts`, encoded as it is read; compressed as a stream when the client asks (content-coding.ts). */
export function streamedText(parts: Iterator<string>, init: ResponseInit): Response {
  let piece: Generator<[number, number]> | undefined;
  let part = '';
  let sinceCollect = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      for (;;) {
        const next = piece?.next();
        if (next && !next.done) {
          const bytes = utf8.encode(part.slice(...next.value));
          sinceCollect += bytes.byteLength;
          if (sinceCollect >= COLLECT_BYTES) {
            sinceCollect = 0;
            Bun.gc(false);
          }
          return controller.enqueue(bytes);
        }
        const more = parts.next();
        if (more.done) return controller.close();
        part = more.value;
        piece = pieces(part);
      }
    },
    cancel() {
      parts.return?.();
    },
  }, { highWaterMark: 0 });
  const res = new Response(body, init);
  rememberStreamed(res);
  return res;
}
