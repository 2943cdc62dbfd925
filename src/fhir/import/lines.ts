import { firstIllFormed, NotUtf8Error, startsWithBom } from '../utf8.ts';

/** One line of an NDJSON stream: 1-based line number, text without the line break. */
export interface Line {
  number: number;
  text: string;
  /** Set (and `text` empty) for a line longer than the limit: how many bytes it held. Nothing of it is kept. */
  tooLong?: number;
  /** Set (and `text` empty) for a line that is not UTF-8: where its first bad byte is, in the line (`offset`) and in the input (`inInput`). */
  notUtf8?: { error: NotUtf8Error; inInput: number };
}

/**
 * The longest line read (bytes): four times the largest request body the API takes (CINDER_MAX_BODY_BYTES,
 * 64 MiB). A longer one (a file with no line breaks, a gzip bomb of one line) is counted and skipped, not held:
 * the memory of an import stays bounded whatever its input.
 */
export const MAX_LINE_BYTES = 256 * 1024 * 1024;

/** Refuses bytes that are not UTF-8 (src/fhir/utf8.ts); a BOM is dropped by hand, at the input's start only. */
const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const lenient = new TextDecoder('utf-8', { ignoreBOM: true });
const LF = 0x0a;

/**
 * Splits a byte stream into lines (LF or CRLF) and decodes each from UTF-8, so a file of any size is read with
 * memory bounded by its longest line. The split is made on the bytes (a LF byte is never part of a longer UTF-8
 * sequence), so a line that is not UTF-8 is that line's failure alone (`notUtf8`): the lines around it are read.
 * The whole lines of a chunk are decoded at once; only when that refuses is each decoded on its own. A byte
 * order mark at the start of the input is dropped. `onBytes` is told how many bytes each chunk held.
 */
export async function* readLines(stream: ReadableStream<Uint8Array>, onBytes?: (n: number) => void, maxLineBytes = MAX_LINE_BYTES): AsyncGenerator<Line[]> {
  // The start of a line longer than one chunk, in pieces (copies: a stream may reuse a chunk's memory), each chunk
  // searched for its line break once, so a long line costs time in proportion to its length.
  let carry: Uint8Array[] = [];
  // Bytes of the current line so far; past maxLineBytes its pieces are dropped.
  let held = 0;
  let number = 0;
  // The input's offset of the current line's first byte, and of the chunk being read.
  let lineAt = 0;
  let read = 0;
  /** The line of `bytes` (without its LF), which starts at `at` in the input. */
  const line = (bytes: Uint8Array, at: number): Line => {
    number++;
    if (bytes.length > maxLineBytes) return { number, text: '', tooLong: bytes.length };
    const from = at === 0 && startsWithBom(bytes) ? 3 : 0;
    try {
      return { number, text: stripCr(strict.decode(from === 0 ? bytes : bytes.subarray(from))) };
    } catch {
      return { number, text: '', notUtf8: notUtf8(bytes, from, at) };
    }
  };
  /** The line that began in earlier chunks (`carry`, `held` bytes) and ends with `end`. */
  const carried = (end: Uint8Array): Line => {
    const size = held + end.length;
    const out: Line = size > maxLineBytes ? { number: ++number, text: '', tooLong: size } : line(joined(carry, end, size), lineAt);
    carry = [];
    held = 0;
    return out;
  };
  for await (const chunk of stream) {
    onBytes?.(chunk.byteLength);
    const lines: Line[] = [];
    let start = 0;
    const first = chunk.indexOf(LF);
    if (first >= 0) {
      lines.push(carried(chunk.subarray(0, first)));
      start = first + 1;
      lineAt = read + start;
      const last = chunk.lastIndexOf(LF);
      if (last > first) {
        wholeLines(chunk.subarray(start, last), read + start, lines);
        start = last + 1;
        lineAt = read + start;
      }
    }
    if (start < chunk.length) {
      held += chunk.length - start;
      if (held <= maxLineBytes) carry.push(chunk.slice(start));
      else carry = [];
    }
    read += chunk.length;
    if (lines.length) yield lines;
  }
  if (held > 0) yield [carried(new Uint8Array(0))];

  /**
   * The lines of `region` (whole lines of a chunk after its first, parted by LF bytes, at the input's `at`: never
   * its start), decoded at once unless that refuses.
   */
  function wholeLines(region: Uint8Array, at: number, out: Line[]): void {
    let text: string | undefined;
    try {
      text = strict.decode(region);
    } catch {
      text = undefined;
    }
    if (text !== undefined) {
      let from = 0;
      for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', from)) {
        out.push(textLine(text.slice(from, nl)));
        from = nl + 1;
      }
      out.push(textLine(text.slice(from)));
      return;
    }
    let from = 0;
    for (let nl = region.indexOf(LF); nl >= 0; nl = region.indexOf(LF, from)) {
      out.push(line(region.subarray(from, nl), at + from));
      from = nl + 1;
    }
    out.push(line(region.subarray(from), at + from));
  }

  /** A line of a chunk's decoded text; one of more bytes than the limit is told as such. */
  function textLine(text: string): Line {
    // A character is at most 3 bytes per UTF-16 unit: only a line of more than a third of the limit's units is counted.
    if (text.length * 3 > maxLineBytes) {
      const size = Buffer.byteLength(text, 'utf8');
      if (size > maxLineBytes) return { number: ++number, text: '', tooLong: size };
    }
    return { number: ++number, text: stripCr(text) };
  }
}

/** Where `bytes`, a line at the input's `at` that the strict decoder refused, stop being UTF-8 (`from`: after its BOM). */
function notUtf8(bytes: Uint8Array, from: number, at: number): { error: NotUtf8Error; inInput: number } {
  const bad = firstIllFormed(bytes, from) ?? { at: bytes.length, length: 0 };
  const error = new NotUtf8Error(bad.at, bytes.slice(bad.at, bad.at + bad.length), lenient.decode(bytes.subarray(from, bad.at)));
  return { error, inInput: at + bad.at };
}

/** The pieces and `end` as one array of `size` bytes. */
function joined(pieces: Uint8Array[], end: Uint8Array, size: number): Uint8Array {
  if (pieces.length === 0) return end;
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.length;
  }
  out.set(end, at);
  return out;
}

function stripCr(s: string): string {
  return s.endsWith('\r') ? s.slice(0, -1) : s;
}
