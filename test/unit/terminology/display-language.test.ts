import { describe, expect, test } from 'bun:test';
import type { ConceptDefinition } from '../../../src/terminology/model/code-system.ts';
import { displayIn } from '../../../src/terminology/ops/display-language.ts';

const SYNONYM = { system: 'http://snomed.info/sct', code: '900000000000013009' };
const DISPLAY = { system: 'http://terminology.hl7.org/CodeSystem/designation-usage', code: 'display' };

const cat: ConceptDefinition = {
  code: 'cat',
  display: 'Cat',
  designation: [
    { language: 'de', use: SYNONYM, value: 'Mieze' },
    { language: 'de', value: 'Katze' },
    { language: 'de-CH', use: DISPLAY, value: 'Chatz' },
    { language: 'en-GB', value: 'Moggy' },
    { value: 'no language' },
  ],
};

describe('displayIn (R4 displayLanguage)', () => {
  test('no language asked: the display', () => {
    expect(displayIn(cat, 'en', undefined)).toBe('Cat');
  });

  test('exact tag first, then the primary language; display use before synonyms; case-insensitive', () => {
    expect(displayIn(cat, 'en', 'de')).toBe('Katze');
    expect(displayIn(cat, 'en', 'de-ch')).toBe('Chatz');
    expect(displayIn(cat, 'en', 'de-AT')).toBe('Katze');
    expect(displayIn({ code: 'x', display: 'X', designation: [{ language: 'de', use: SYNONYM, value: 'Ix' }] }, 'en', 'de')).toBe('Ix');
  });

  test("the CodeSystem's language counts for its display", () => {
    expect(displayIn(cat, 'en', 'en')).toBe('Cat');
    expect(displayIn(cat, 'en', 'en-GB')).toBe('Moggy');
    expect(displayIn(cat, undefined, 'en')).toBe('Moggy');
    expect(displayIn(cat, 'de', 'de')).toBe('Cat');
  });

  test('nothing in that language: the display (or none)', () => {
    expect(displayIn(cat, 'en', 'fr')).toBe('Cat');
    expect(displayIn({ code: 'x' }, undefined, 'fr')).toBeUndefined();
  });
});
