/**
 * Full case folding (src/fhir/case-fold.ts), which string search and the full-text words share: its shortcut for
 * lower-cased text without a character whose case folding differs gives, for every character, alone, between two
 * letters and ending a word, what upper-casing then lower-casing gives.
 */
import { expect, test } from 'bun:test';
import { foldCase } from '../../src/fhir/case-fold.ts';

const upperLower = (s: string) => s.toUpperCase().toLowerCase().replace(/\u03c2/g, '\u03c3').replace(/\u00df/g, 'ss');

test('the shortcut agrees with upper then lower case for every character', () => {
  const differing: string[] = [];
  for (let cp = 0x80; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const c = String.fromCodePoint(cp);
    for (const s of [c, `x${c}y`, `α${c}`]) {
      // `ﬀ` appended forces the upper-casing: the two paths must give the same text before its `ff`.
      const full = foldCase(`${s}\ufb00`);
      if (full.slice(0, -2) !== foldCase(s)) differing.push(s);
    }
  }
  expect(differing).toEqual([]);
  expect(foldCase('Søren')).toBe('soren');
  expect(foldCase('ΟΔΟΣ Straße ﬁne Işık Þór')).toBe(upperLower('ΟΔΟΣ Straße ﬁne Işık Þór').replace(/þ/g, 'th'));
});
