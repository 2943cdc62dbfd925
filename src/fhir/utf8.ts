/**
 * Strict UTF-8 decoding of client bytes. FHIR content is UTF-8 (R4 http.html, "UTF-8 SHALL be used"; RFC 8259
 * 8.1 for JSON): bytes that are not (a Latin-1 `ü`, 0xFC) are refused where they are found, never replaced by
 * U+FFFD and stored as if the client had sent that character (the WHATWG decoder's default, which `text()` uses).
 * The decoder itself validates (TextDecoder `fatal`); where the first bad byte is, which it does not say, is
 * worked out only once it has refused.
 */

/** Bytes that are not UTF-8, where the first ill-formed sequence starts. */
export class NotUtf8Error extends Error {
  override name = 'NotUtf8Error';
  constructor(
    /** Offset (from 0) of its first byte in the input read. */
    readonly offset: number,
    /** The ill-formed sequence (its maximal subpart, Unicode 3.9: one to three bytes). */
    readonly bad: Uint8Array,
    /** The text before it, decoded (to say in which element of a JSON text it falls). */
    readonly before: string,
    /** The end of `before` that came with the chunk refused (a stream's reader may hand it on before it fails). */
    readonly partial = before,
  ) {
    super(`${describeBad(bad)} at byte offset ${offset} (counting from 0)`);
  }
}

/** `byte 0xFC`, `bytes 0xE2 0x82`. */
function describeBad(bad: Uint8Array): string {
  const hex = Array.from(bad, (b) => `0x${b.toString(16).toUpperCase().padStart(2, '0')}`);
  return `${hex.length === 1 ? 'byte' : 'bytes'} ${hex.join(' ')}`;
}

/** Refuses what is not UTF-8; keeps a BOM (the caller decides where one is dropped). */
const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
/** For the text before a bad byte only: the bytes up to it are well formed, so nothing is replaced. */
const lenient = new TextDecoder('utf-8', { ignoreBOM: true });

/** How many continuation bytes a lead byte takes (Unicode 3.9 Table 3-7), or -1 for a byte no character starts with. */
function trailOf(lead: number): number {
  if (lead < 0x80) return 0;
  if (lead < 0xc2) return -1;
  if (lead < 0xe0) return 1;
  if (lead < 0xf0) return 2;
  if (lead < 0xf5) return 3;
  return -1;
}

/** The range the second byte of a sequence led by `lead` must be in (Table 3-7: no overlong forms, surrogates or code points past U+10FFFF). */
function secondRange(lead: number): [number, number] {
  if (lead === 0xe0) return [0xa0, 0xbf];
  if (lead === 0xed) return [0x80, 0x9f];
  if (lead === 0xf0) return [0x90, 0xbf];
  if (lead === 0xf4) return [0x80, 0x8f];
  return [0x80, 0xbf];
}

/**
 * The first ill-formed sequence of `bytes` from `from` (its offset and length: its maximal subpart, as a decoder
 * replacing it would count it), or undefined when all of it is UTF-8. A sequence cut off by the end is ill formed.
 */
export function firstIllFormed(bytes: Uint8Array, from = 0): { at: number; length: number } | undefined {
  const n = bytes.length;
  for (let i = from; i < n; ) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i++;
      continue;
    }
    const trail = trailOf(lead);
    if (trail < 0) return { at: i, length: 1 };
    const [lo, hi] = secondRange(lead);
    let k = 1;
    for (; k <= trail; k++) {
      const b = bytes[i + k];
      if (b === undefined || b < (k === 1 ? lo : 0x80) || b > (k === 1 ? hi : 0xbf)) return { at: i, length: k };
    }
    i += k;
  }
  return undefined;
}

/**
 * The error for `bytes`, which the strict decoder refused: `base` is their offset in the input, `before` the text
 * decoded before them; a BOM at their start is left out of the text when `dropBom`.
 */
function refusal(bytes: Uint8Array, base: number, before: string, dropBom: boolean): NotUtf8Error {
  // The decoder refused them, so one is found (an end cut short included).
  const bad = firstIllFormed(bytes) ?? { at: bytes.length, length: 0 };
  const from = dropBom && startsWithBom(bytes) && bad.at >= 3 ? 3 : 0;
  const partial = lenient.decode(bytes.subarray(from, bad.at));
  return new NotUtf8Error(base + bad.at, bytes.slice(bad.at, bad.at + bad.length), before + partial, partial);
}

/** Whether `bytes` start with the UTF-8 byte order mark (EF BB BF). */
export function startsWithBom(bytes: Uint8Array, at = 0): boolean {
  return bytes[at] === 0xef && bytes[at + 1] === 0xbb && bytes[at + 2] === 0xbf;
}

/** `bytes` decoded from UTF-8, a leading byte order mark dropped (as fetch's `text()` drops it); NotUtf8Error at the first ill-formed sequence. */
export function decodeUtf8(bytes: Uint8Array): string {
  const from = startsWithBom(bytes) ? 3 : 0;
  try {
    return strict.decode(from === 0 ? bytes : bytes.subarray(from));
  } catch {
    throw refusal(bytes, 0, '', from > 0);
  }
}

/** A decoder of a byte stream handed on in chunks: the text of each, NotUtf8Error at the first ill-formed sequence. */
export interface Utf8Stream {
  /** The text of `chunk` (a character split between chunks comes with the chunk that completes it). */
  decode(chunk: Uint8Array): string;
  /** The end of the input: NotUtf8Error when it cuts a character short. */
  end(): string;
}

/**
 * A streaming strict decoder (a leading byte order mark dropped). Beside the decoder it keeps the offset of the
 * next chunk, the last three bytes read (where a character split between chunks starts) and, to say where a
 * bad byte falls in a JSON text, a function giving the text decoded before (`before`; none: the error's
 * `before` holds only the text of the chunk that failed).
 */
export function utf8Stream(before?: () => string): Utf8Stream {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let read = 0;
  // The last bytes read (at most 3): the start of a character the next chunk completes lies in them.
  let tail = new Uint8Array(0);
  const pending = (): Uint8Array => {
    // The text so far is well formed: the bytes after the last lead byte are a character cut short, or none.
    for (let j = tail.length - 1; j >= 0; j--) {
      const b = tail[j]!;
      if (b >= 0x80 && b < 0xc0) continue;
      return trailOf(b) > tail.length - 1 - j ? tail.subarray(j) : new Uint8Array(0);
    }
    return new Uint8Array(0);
  };
  const fail = (bytes: Uint8Array): NotUtf8Error => {
    const carried = pending();
    const joined = new Uint8Array(carried.length + bytes.length);
    joined.set(carried);
    joined.set(bytes, carried.length);
    // A BOM the decoder dropped counts in the offsets (they are the input's bytes), not in the text.
    const base = read - carried.length;
    return refusal(joined, base, before?.() ?? '', base === 0);
  };
  return {
    decode(chunk) {
      let text: string;
      try {
        text = decoder.decode(chunk, { stream: true });
      } catch {
        throw fail(chunk);
      }
      read += chunk.length;
      if (chunk.length >= 3) tail = chunk.slice(chunk.length - 3);
      else {
        const t = new Uint8Array(Math.min(3, tail.length + chunk.length));
        const keep = t.length - chunk.length;
        t.set(tail.subarray(tail.length - keep));
        t.set(chunk, keep);
        tail = t;
      }
      return text;
    },
    end() {
      try {
        return decoder.decode();
      } catch {
        throw fail(new Uint8Array(0));
      }
    },
  };
}
