/**
 * A version's search index made in pieces with turns of the event loop between them (storedIndexPaced,
 * prepareVersionPaced): the same rows as storedIndex and prepareVersion, whatever the resource holds
 * (every parameter type, contained resources, words, a large array), a promise only once a turn was taken.
 */
import { describe, expect, test } from 'bun:test';
import { paramsOf } from '../../src/fhir/definitions.ts';
import { DISPLAY_SEPARATOR, storedIndex, storedIndexPaced } from '../../src/fhir/indexer.ts';
import { prepareVersion, prepareVersionPaced } from '../../src/fhir/prepared.ts';
import type { Resource } from '../../src/fhir/resource.ts';

type Json = Record<string, unknown>;
const BASE = 'http://cinder.test/tenants/t1/fhir/R4';

const CASES: Json[] = [
  {
    resourceType: 'CodeSystem', id: 'cs', url: 'http://example.org/cs', status: 'draft', content: 'complete', name: 'Big',
    concept: Array.from({ length: 3000 }, (_, i) => ({ code: `c${i}`, display: `Concept ${i % 100}`, concept: i % 500 === 0 ? [{ code: `n${i}` }] : undefined })),
  },
  {
    resourceType: 'Observation', id: 'o', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '85354-9', display: 'Blood pressure' }] },
    subject: { reference: '#p' }, effectiveDateTime: '2024-05-01T10:00:00Z', performer: [{ reference: `${BASE}/Practitioner/x` }],
    contained: [{ resourceType: 'Patient', id: 'p', name: [{ family: 'Inside', given: ['A'] }], birthDate: '1970-01-01' }],
    component: [
      { code: { coding: [{ system: 'http://loinc.org', code: '8480-6' }] }, valueQuantity: { value: 120, unit: 'mm[Hg]', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' } },
      { code: { coding: [{ system: 'http://loinc.org', code: '8462-4' }] }, valueQuantity: { value: 80, unit: 'mm[Hg]', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' } },
    ],
    text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">Blood pressure 120/80</div>' },
  },
  // Codes given again far apart, each with a display of its own: their rows merge across the pieces of the deduplication.
  {
    resourceType: 'Observation', id: 'many', status: 'final',
    code: { text: 'Many', coding: Array.from({ length: 5000 }, (_, i) => ({ system: 'http://loinc.org', code: `k${i % 2500}`, display: `D${i % 3 === 0 ? 0 : i}` })) },
  },
  { resourceType: 'Location', id: 'l', name: 'Clinic', position: { longitude: -83.69, latitude: 42.25 } },
  {
    resourceType: 'Bundle', id: 'b', type: 'document', timestamp: '2024-05-01T10:00:00Z', identifier: { system: 'urn:ietf:rfc:3986', value: 'urn:uuid:1' },
    entry: [
      { fullUrl: 'urn:uuid:c', resource: { resourceType: 'Composition', status: 'final', type: { text: 'note' }, date: '2024-05-01', author: [{ reference: 'urn:uuid:p' }], title: 'Note', subject: { reference: 'urn:uuid:p' } } },
      { fullUrl: 'urn:uuid:p', resource: { resourceType: 'Patient', name: [{ family: 'Doc' }] } },
    ],
  },
  { resourceType: 'Patient', id: 'small', name: [{ family: 'Small' }] },
];

describe('storedIndexPaced', () => {
  for (const resource of CASES) {
    test(`${resource.resourceType}: the rows of storedIndex, with a turn between every two pieces`, async () => {
      let turns = 0;
      const paced = storedIndexPaced(resource, BASE, () => (turns++, Promise.resolve()));
      expect(paced).toBeInstanceOf(Promise);
      expect(await paced).toEqual(storedIndex(resource, BASE));
      // One piece per parameter of the type, then the contained resources, the deduplication and the words.
      expect(turns).toBeGreaterThanOrEqual(paramsOf(resource.resourceType as string).length + 2);
    });
  }

  test('within the slice, no promise: the rows at once', () => {
    const patient = CASES.at(-1)!;
    const rows = storedIndexPaced(patient, BASE, () => undefined);
    expect(rows).not.toBeInstanceOf(Promise);
    expect(rows).toEqual(storedIndex(patient, BASE));
    // The rows hold what a search finds (the comparison sees rows).
    expect(storedIndex(CASES[0]!, BASE).tokens.filter((e) => e.param === 'code').length).toBe(3000);
    const merged = storedIndex(CASES[2]!, BASE).tokens.find((e) => e.param === 'code' && e.value === 'k1');
    expect(merged?.display?.split(DISPLAY_SEPARATOR)).toEqual(['many', 'd1', 'd2501']);
  });

  test('prepareVersionPaced prepares what prepareVersion does, the id in the URL replacing the body’s', async () => {
    for (const resource of CASES) {
      const paced = await prepareVersionPaced(resource as Resource, 'given', BASE, () => Promise.resolve());
      expect(paced).toEqual(prepareVersion(resource as Resource, 'given', BASE));
    }
  });
});
