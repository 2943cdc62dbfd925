/** One line of an NDJSON stream: 1-based line number, text without the line break. */
export interface Line {
  number: number;
  text: string;
  /** Set (and `text` empty) for a line longer than the limit: how many characters it held. Nothing of it is kept. */
  tooLong?: number;
}

/**
 * The longest line read (characters): four times the largest request body the API takes (CINDER_MAX_BODY_BYTES,
 * 64 MiB). A longer one (a file with no line breaks, a gzip bomb of one line) is counted and skipped, not held:
 * the memory of an import stays bounded whatever its input.
 */
export const MAX_LINE_CHARS = 256 * 1024 * 1024;

/**
 * Splits a byte stream into lines (LF or CRLF), decoding UTF-8 incrementally, so a file of any size is
 * read with memory bounded by its longest line. `onBytes` is told how many bytes each chunk held.
 */
export async function* readLines(stream: ReadableStream<Uint8Array>, onBytes?: (n: number) => void, maxLineChars = MAX_LINE_CHARS): AsyncGenerator<Line[]> {
  const decoder = new TextDecoder('utf-8', { ignoreBOM: false });
  // The start of a line longer than one chunk, in pieces: each chunk is searched for its line break once, so a
  // long line costs time in proportion to its length (joining it to each new chunk made it quadratic).
  let carry: string[] = [];
  // Characters of the current line so far; past maxLineChars its pieces are dropped.
  let held = 0;
  let number = 0;
  const line = (piece: string): Line => {
    const chars = held + piece.length;
    const out: Line = chars > maxLineChars ? { number: ++number, text: '', tooLong: chars } : { number: ++number, text: stripCr(carry.length ? carry.join('') + piece : piece) };
    carry = [];
    held = 0;
    return out;
  };
  for await (const chunk of stream) {
    onBytes?.(chunk.byteLength);
    const text = decoder.decode(chunk, { stream: true });
    const lines: Line[] = [];
    let start = 0;
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
      lines.push(line(text.slice(start, nl)));
      start = nl + 1;
    }
    if (start < text.length) {
      held += text.length - start;
      if (held <= maxLineChars) carry.push(text.slice(start));
      else carry = [];
    }
    if (lines.length) yield lines;
  }
  const last = line(decoder.decode());
  if (last.text.length || last.tooLong !== undefined) yield [last];
}

function stripCr(s: string): string {
  return s.endsWith('\r') ? s.slice(0, -1) : s;
}
