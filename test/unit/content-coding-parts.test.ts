/**
 * An answer in parts (src/http/content-coding.ts gzipOfParts): a head, a part shared with other answers whose
 * deflated form is kept, and a tail, joined as one gzip member that any gunzip reads as the whole text (its
 * CRC-32 and length those of the whole UTF-8 text), however the parts cut the text and whatever they hold.
 */
import { describe, expect, test } from 'bun:test';
import { gunzipSync } from 'node:zlib';
import { gzipOfParts, SHARED_KEPT } from '../../src/http/content-coding.ts';

const decoded = (bytes: Uint8Array<ArrayBuffer>) => new TextDecoder().decode(Bun.gunzipSync(bytes));

describe('gzip of an answer in parts', () => {
  const shared = JSON.stringify(Array.from({ length: 5_000 }, (_, i) => ({ name: `p-${i}`, documentation: `Modifiers: :not — €${i} 🜂` })));

  test('reads as the whole text, in Bun and in zlib, whatever the head and tail', () => {
    for (const [head, tail] of [['{"date":"2026-11-30T10:00:00.000Z","resource":', '}'], ['{"date":"2026-11-30T10:00:00.001Z","é":', '"ü"}'], ['', ''], ['x'.repeat(70_000), '']] as const) {
      const bytes = gzipOfParts([head, shared, tail]);
      expect(decoded(bytes) === head + shared + tail).toBe(true);
      expect(gunzipSync(bytes).toString('utf8') === head + shared + tail).toBe(true);
      expect(bytes.byteLength).toBeLessThan(Buffer.byteLength(head + shared + tail) / 4);
    }
  });

  test('a shared part of another text is another answer; more shared parts than are kept are each still right', () => {
    const others = Array.from({ length: SHARED_KEPT + 2 }, (_, i) => `${shared.slice(0, 10_000)}${i}]`);
    for (let round = 0; round < 2; round++) {
      for (const other of others) expect(decoded(gzipOfParts(['[', other, ''])) === `[${other}`).toBe(true);
    }
    expect(decoded(gzipOfParts(['[', shared, ']'])) === `[${shared}]`).toBe(true);
  });
});
