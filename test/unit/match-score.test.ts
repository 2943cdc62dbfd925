/**
 * The scoring of `Patient/$match` (src/fhir/match-score.ts): what each field compares as, the grade
 * rules and the score bands.
 */
import { describe, expect, test } from 'bun:test';
import { BANDS, matchFacts, scoreMatch } from '../../src/fhir/match-score.ts';
import { blocks } from '../../src/fhir/match.ts';

const MRN = 'http://hospital.example/mrn';
const p = (extra: Record<string, unknown>) => matchFacts({ resourceType: 'Patient', ...extra });
/** A grade and a score: `evidence` placed in the grade's band. */
const expectScore = (m: ReturnType<typeof scoreMatch>, grade: keyof typeof BANDS, evidence: number) => {
  expect(m?.grade).toBe(grade);
  const [low, high] = BANDS[grade];
  expect(m!.score).toBeCloseTo(low + (high - low) * evidence, 4);
};
const score = (q: Record<string, unknown>, c: Record<string, unknown>) => scoreMatch(p(q), p(c));

describe('Patient/$match scoring', () => {
  test('names: case, accents and punctuation aside; Soundex; an initial', () => {
    const base = { birthDate: '1980-04-12' };
    expect(score({ ...base, name: [{ family: 'Müller-Smith', given: ['Zoë'] }] }, { ...base, name: [{ family: 'MULLER SMITH', given: ['zoe'] }] })?.grade).toBe('probable');
    // Soundex (M460) and an initial: 0.08 + 0.04 + 0.15.
    expectScore(score({ ...base, name: [{ family: 'Muller', given: ['Zoe'] }] }, { ...base, name: [{ family: 'Moller', given: ['Z'] }] }), 'possible', 0.27);
    // Another given name of the same family and birth date (twins): 0.15 - 0.05 + 0.15.
    expect(score({ ...base, name: [{ family: 'Twin', given: ['Tom'] }] }, { ...base, name: [{ family: 'Twin', given: ['Tim'] }] })?.grade).toBe('possible');
  });

  test('birth dates: a part of the other agrees partly; another day disagrees', () => {
    const name = [{ family: 'Lee', given: ['Kim'] }];
    expectScore(score({ name, birthDate: '1980' }, { name, birthDate: '1980-04-12' }), 'possible', 0.3);
    expect(score({ name, birthDate: '1980-04-12' }, { name, birthDate: '1980-04-13' })).toBeUndefined();
  });

  test('gender: male and female disagree, other and unknown do not', () => {
    const q = { name: [{ family: 'Lee', given: ['Kim'] }], birthDate: '1980-04-12' };
    expect(score({ ...q, gender: 'male' }, { ...q, gender: 'female' })?.grade).toBe('possible');
    expect(score({ ...q, gender: 'male' }, { ...q, gender: 'unknown' })?.grade).toBe('probable');
  });

  test('identifiers: the same system and value is certain unless a field disagrees', () => {
    const q = { identifier: [{ system: MRN, value: '1' }], name: [{ family: 'Lee' }], birthDate: '1980-04-12' };
    expect(score(q, q)?.grade).toBe('certain');
    expect(score(q, { ...q, birthDate: '1990-01-01' })?.grade).toBe('probable');
    expect(score(q, { ...q, birthDate: '1990-01-01', name: [{ family: 'Park' }] })?.grade).toBe('possible');
    // Another system with the same value: no identifier evidence to speak of.
    expect(score(q, { ...q, identifier: [{ system: 'urn:other', value: '1' }] })?.grade).toBe('possible');
    // A value in the same system that differs disagrees.
    expect(score(q, { ...q, identifier: [{ system: MRN, value: '2' }] })).toBeUndefined();
    // Everything else agreeing, never probable: -0.15 + 0.15 + 0.15 + 0.03 + 0.07.
    const more = { ...q, gender: 'male', telecom: [{ value: 'a@b.org' }] };
    expectScore(score(more, { ...more, identifier: [{ system: MRN, value: '2' }] }), 'possible', 0.25);
  });

  test('telecoms by digits, postal codes as ZIPs; scores stay in their grade\'s band', () => {
    const name = [{ family: 'Okafor', given: ['Ada'] }];
    expectScore(score({ name, telecom: [{ system: 'phone', value: '+1 (555) 010-2000' }] }, { name, telecom: [{ value: '555.010.2000' }] }), 'possible', 0.32);
    expectScore(score({ name, address: [{ postalCode: '12345-6789', line: ['1 Main St.'] }] }, { name, address: [{ postalCode: '12345', line: ['1 MAIN ST'] }] }), 'possible', 0.35);
    const all = { identifier: [{ system: MRN, value: '1' }], name, birthDate: '1980-04-12', gender: 'female', telecom: [{ value: 'a@b.org' }], address: [{ postalCode: '1', line: ['x'] }] };
    expect(score(all, all)).toEqual({ grade: 'certain', score: BANDS.certain[1] });
  });

  test('the blocking searches of a Patient; a name without a letter or digit is searched by nothing', () => {
    const all = blocks({
      resourceType: 'Patient', identifier: [{ system: 'urn:a|b', value: '1,2' }, { value: '9' }], name: [{ family: 'Lee', given: ['Kim', 'Jo'] }],
      birthDate: '1980-04-12', telecom: [{ system: 'email', value: 'k@x.org' }], address: [{ postalCode: '12345' }],
    }).map(String);
    expect(all).toEqual([
      'identifier=urn%3Aa%5C%7Cb%7C1%5C%2C2', 'identifier=1%5C%2C2', 'identifier=9',
      'family=Lee&birthdate=1980-04-12', 'phonetic=Lee&birthdate=1980-04-12', 'given=Kim&birthdate=1980-04-12', 'family=Lee&given=Kim',
      'family=Lee&address-postalcode=12345', 'telecom=k%40x.org',
    ]);
    expect(blocks({ resourceType: 'Patient', name: [{ family: 'Lee' }] }).map(String)).toEqual(['family=Lee']);
    expect(blocks({ resourceType: 'Patient', name: [{ family: '--', given: ['?'] }], birthDate: '1980' }).map(String)).toEqual([]);
  });
});
