/**
 * primeStrings reads a large string in slices (src/fhir/validation/large-strings.ts): a validation answered
 * from them gives the issues the checks give of the whole value, whatever falls at the slices' edges.
 */
import { describe, expect, test } from 'bun:test';
import { characterIssues } from '../../src/fhir/validation/characters.ts';
import { LARGE_STRING, primeStrings, withPrimed } from '../../src/fhir/validation/large-strings.ts';
import { validateResource } from '../../src/fhir/validation/validate.ts';

const A = 'QUJD'.repeat(LARGE_STRING / 2);
/** `text` put at the edge of the first slice (its last character the slice's last). */
const atEdge = (text: string) => A.slice(0, LARGE_STRING - text.length + 1) + text + A.slice(LARGE_STRING + 1);

describe('large strings read in slices', () => {
  const values: Record<string, string> = {
    valid: A,
    'padding ending the first slice, a line break after it': `${A.slice(0, LARGE_STRING - 2)}==\n`,
    'padding across the edge': `${A.slice(0, LARGE_STRING - 1)}==`,
    'padding then more text': atEdge('=') + 'QUJD',
    'three pads': `${A.slice(0, LARGE_STRING * 2 - 1)}===`,
    'whitespace everywhere': A.replace(/.{76}/g, '$& \r\n\t'),
    'a no-break space (JavaScript whitespace)': atEdge('\u00A0'),
    'a surrogate pair split by the edge': atEdge('\uD83D') + '\uDE00' + A,
    'an unpaired high surrogate at the end': `${A}\uD83D`,
    'an unpaired low surrogate after the edge': atEdge('x') + '\uDE00',
    'U+FFFF past the first slice': `${A}\uFFFF`,
    'a control character past the first slice': `${A}\u0007`,
    'not a multiple of four': `${A}QUJ`,
    'a character outside the alphabet': `${A}-AAA`,
  };
  for (const [what, data] of Object.entries(values)) {
    test(what, async () => {
      const binary = { resourceType: 'Binary', contentType: 'text/plain', data };
      const doc = { resourceType: 'DocumentReference', status: 'current', content: [{ attachment: { data, size: 3 } }], description: data };
      for (const r of [binary, doc]) {
        const primed = await primeStrings(r, { turn: () => Promise.resolve(), budgetMs: 0 });
        expect(primed.length).toBe(r === doc ? 2 : 1);
        expect(withPrimed(primed, () => validateResource(r, 'strict'))).toEqual(validateResource(r, 'strict'));
        expect(withPrimed(primed, () => characterIssues(r))).toEqual(characterIssues(r));
      }
    });
  }
});

describe('large strings read in slices, generated', () => {
  test('strings of one to three slices changed near the edges (padding, whitespace, surrogates, noncharacters, control characters, characters outside the alphabet) answer as the whole', async () => {
    let seed = 20261130;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;
    const specials = ['=', '==', '===', ' ', '\n', '\uD83D', '\uDE00', '\uD83D\uDE00', '\uFFFF', '\uFFFE', '\u0007', '-', '\u00A0', '\u2028', '\uFEFF', 'Q', '\t', '\u0000'];
    for (let c = 0; c < 150; c++) {
      let data = A.slice(0, LARGE_STRING + 1 + Math.floor(rnd() * LARGE_STRING * 2));
      for (let j = 1 + Math.floor(rnd() * 3); j > 0; j--) {
        const at = Math.max(0, Math.min(data.length, pick([0, LARGE_STRING, 2 * LARGE_STRING, data.length]) + Math.floor(rnd() * 4) - 2));
        const put = pick(specials);
        data = data.slice(0, at) + put + data.slice(rnd() < 0.5 ? at : at + put.length);
      }
      if (rnd() < 0.3) data = data.replace(/=+/g, '') + pick(['', '=', '==', '= =', '=\n']);
      const r = { resourceType: 'DocumentReference', status: 'current', content: [{ attachment: { data, size: 3 } }], description: data };
      const primed = await primeStrings(r, { turn: () => Promise.resolve(), budgetMs: 0 });
      expect(withPrimed(primed, () => validateResource(r, 'strict'))).toEqual(validateResource(r, 'strict'));
      expect(withPrimed(primed, () => characterIssues(r))).toEqual(characterIssues(r));
    }
  });
});
