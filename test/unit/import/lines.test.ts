import { describe, expect, test } from 'bun:test';
import { MAX_LINE_BYTES, readLines } from '../../../src/fhir/import/lines.ts';

/** `bytes` as a stream of chunks of `size` bytes. */
function chunked(bytes: Uint8Array, size: number): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.slice(at, (at += size)));
    },
  });
}

async function lines(text: string, size: number, max?: number): Promise<[number, string, number?][]> {
  const out: [number, string, number?][] = [];
  for await (const batch of readLines(chunked(new TextEncoder().encode(text), size), undefined, max)) {
    for (const l of batch) out.push(l.tooLong === undefined ? [l.number, l.text] : [l.number, l.text, l.tooLong]);
  }
  return out;
}

describe('readLines', () => {
  const text = 'first\r\n\r\n{"a":"é€😀"}\r\nlast without break';
  const expected: [number, string][] = [[1, 'first'], [2, ''], [3, '{"a":"é€😀"}'], [4, 'last without break']];
  test.each([1, 2, 3, 5, 7, 64])('lines split across chunks of %d bytes (CR LF and UTF-8 sequences split too)', async (size) => {
    expect(await lines(text, size)).toEqual(expected);
  });

  test('a line of many chunks is read whole (its cost is measured by bench/hostile-input.ts)', async () => {
    const long = 'x'.repeat(64 * 1024 * 1024);
    expect((await lines(`${long}\nnext`, 64 * 1024)).map(([n, t]) => [n, t.length])).toEqual([[1, long.length], [2, 4]]);
  });

  test('a line longer than the limit is counted, not held; the lines after it are read', async () => {
    expect(MAX_LINE_BYTES).toBe(256 * 1024 * 1024);
    for (const size of [1, 4, 64]) {
      expect(await lines('short\n0123456789abcdef\nok\n0123456789abcdef', size, 10)).toEqual([[1, 'short'], [2, '', 16], [3, 'ok'], [4, '', 16]]);
      expect(await lines('0123456789\n01234567890\n', size, 10)).toEqual([[1, '0123456789'], [2, '', 11]]);
    }
  });
});

describe('readLines of bytes that are not UTF-8', () => {
  // A BOM, a line with a Latin-1 ü (0xFC) and CR LF, a line with € split wherever the chunks fall, a last line cut short.
  const bytes = new Uint8Array([0xef, 0xbb, 0xbf, 0x61, 0x0a, 0x62, 0xfc, 0x63, 0x0d, 0x0a, 0xe2, 0x82, 0xac, 0x0a, 0x64, 0xe2, 0x82]);
  test.each([1, 2, 3, 5, 7, 64])('a bad line is told with the offsets of its first bad byte, the lines around it read (chunks of %d bytes)', async (size) => {
    const out: unknown[] = [];
    for await (const batch of readLines(chunked(bytes, size))) {
      for (const l of batch) out.push(l.notUtf8 ? [l.number, l.text, l.notUtf8.error.offset, l.notUtf8.inInput, [...l.notUtf8.error.bad], l.notUtf8.error.before] : [l.number, l.text]);
    }
    expect(out).toEqual([[1, 'a'], [2, '', 1, 6, [0xfc], 'b'], [3, '\u20ac'], [4, '', 1, 15, [0xe2, 0x82], 'd']]);
  });
});
