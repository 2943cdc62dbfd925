/**
 * The strict decoder finds the bad byte where the WHATWG decoder (fetch's `text()`) would have put its first
 * U+FFFD, read whole or in any chunking, and decodes what is UTF-8 as that decoder does (a BOM dropped).
 */
import { describe, expect, test } from 'bun:test';
import { decodeUtf8, NotUtf8Error, utf8Stream } from '../../src/fhir/utf8.ts';
import { prng } from '../helpers/prng.ts';

const replacing = new TextDecoder('utf-8');

/** Bytes that are mostly UTF-8 (ASCII, 2-, 3- and 4-byte characters) with, at random, a byte or a sequence cut or bent. */
function sample(random: () => number): Uint8Array {
  const text = Array.from({ length: 1 + Math.floor(random() * 40) }, () => ['a', '\u00fc', '\u20ac', '\ud83d\ude00', '\u0800', '\uffef'][Math.floor(random() * 6)]).join('');
  const bytes = [...new TextEncoder().encode(text)];
  if (random() < 0.8) bytes[Math.floor(random() * bytes.length)] = Math.floor(random() * 256);
  if (random() < 0.2) bytes.length = Math.max(1, bytes.length - 1 - Math.floor(random() * 3));
  return new Uint8Array(bytes);
}

function strictly(read: () => string): { text: string } | { offset: number; bad: number[]; before: string } {
  try {
    return { text: read() };
  } catch (err) {
    if (!(err instanceof NotUtf8Error)) throw err;
    return { offset: err.offset, bad: [...err.bad], before: err.before };
  }
}

function streamed(bytes: Uint8Array, random: () => number): ReturnType<typeof strictly> {
  const parts: string[] = [];
  const utf8 = utf8Stream(() => parts.join(''));
  return strictly(() => {
    for (let at = 0; at < bytes.length; ) {
      const end = at + 1 + Math.floor(random() * 5);
      parts.push(utf8.decode(bytes.subarray(at, end)));
      at = end;
    }
    parts.push(utf8.end());
    return parts.join('');
  });
}

describe('strict UTF-8 decoding', () => {
  test('5,000 samples: the first bad byte is where the replacing decoder puts its first U+FFFD, whole and in random chunks', () => {
    const random = prng(50);
    for (let n = 0; n < 5000; n++) {
      const bytes = sample(random);
      const replaced = replacing.decode(bytes);
      const whole = strictly(() => decodeUtf8(bytes));
      const expected = replaced.includes('\ufffd') ? replaced.slice(0, replaced.indexOf('\ufffd')) : undefined;
      if (expected === undefined) expect(whole).toEqual({ text: replaced });
      else {
        if (!('offset' in whole)) throw new Error(`sample ${n}: not refused`);
        expect(whole.before).toBe(expected);
        expect(new TextEncoder().encode(whole.before).length + (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0)).toBe(whole.offset);
        // The maximal subpart: one U+FFFD for it, and the replacing decoder goes on after it.
        expect(replacing.decode(bytes.subarray(whole.offset, whole.offset + whole.bad.length))).toBe('\ufffd');
      }
      expect(streamed(bytes, random)).toEqual(whole);
    }
  });

  test('a BOM is dropped at the start only, and counts in the offsets', () => {
    expect(decodeUtf8(new Uint8Array([0xef, 0xbb, 0xbf, 0x61, 0xef, 0xbb, 0xbf]))).toBe('a\ufeff');
    expect(strictly(() => decodeUtf8(new Uint8Array([0xef, 0xbb, 0xbf, 0x61, 0xff])))).toEqual({ offset: 4, bad: [0xff], before: 'a' });
    for (const size of [1, 2, 4]) expect(streamed(new Uint8Array([0xef, 0xbb, 0xbf, 0x61, 0xff]), () => (size - 1) / 5)).toEqual({ offset: 4, bad: [0xff], before: 'a' });
  });
});
