/** One line of an NDJSON stream: 1-based line number, text without the line break. */
export interface Line {
  number: number;
  text: string;
}

/**
 * Splits a byte stream into lines (LF or CRLF), decoding UTF-8 incrementally, so a file of any size is
 * read with memory bounded by its longest line. `onBytes` is told how many bytes each chunk held.
 */
export async function* readLines(stream: ReadableStream<Uint8Array>, onBytes?: (n: number) => void): AsyncGenerator<Line[]> {
  const decoder = new TextDecoder('utf-8', { ignoreBOM: false });
  // The start of a line longer than one chunk, in pieces: each chunk is searched for its line break once, so a
  // long line costs time in proportion to its length (joining it to each new chunk made it quadratic).
  let carry: string[] = [];
  let number = 0;
  for await (const chunk of stream) {
    onBytes?.(chunk.byteLength);
    const text = decoder.decode(chunk, { stream: true });
    const lines: Line[] = [];
    let start = 0;
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
      const piece = text.slice(start, nl);
      lines.push({ number: ++number, text: stripCr(carry.length ? carry.join('') + piece : piece) });
      carry = [];
      start = nl + 1;
    }
    if (start < text.length) carry.push(text.slice(start));
    if (lines.length) yield lines;
  }
  const rest = carry.join('') + decoder.decode();
  if (rest.length) yield [{ number: ++number, text: stripCr(rest) }];
}

function stripCr(s: string): string {
  return s.endsWith('\r') ? s.slice(0, -1) : s;
}
