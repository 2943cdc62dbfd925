/**
 * paramEntries (src/fhir/indexer.ts): the index rows of the parameters named alone, as indexEntries gives them, for a
 * pinned sorted page's places (src/fhir/search-pin.ts sortPlace): strings, dates, tokens, quantities' sort rows, and a
 * reference to a contained resource.
 */
import { describe, expect, test } from 'bun:test';
import { indexEntries, paramEntries } from '../../src/fhir/indexer.ts';
import type { IndexRows } from '../../src/store/types.ts';

type Json = Record<string, unknown>;

/** The rows of `rows` of the parameters named, sorted, duplicates once. */
function only(rows: IndexRows, params: string[]): string[] {
  const all = [...rows.tokens, ...rows.strings, ...rows.ranges, ...rows.composites] as { param: string }[];
  return [...new Set(all.filter((r) => params.includes(r.param)).map((r) => JSON.stringify(r)))].sort();
}

const CASES: [string, Json, string[]][] = [
  ['a Patient by family and birthdate', { resourceType: 'Patient', id: 'p', name: [{ family: 'Ávila', given: ['Ana'] }, { family: 'Zorn' }], birthDate: '1970-02' }, ['family', 'birthdate']],
  ['an Observation by code, date and quantity', {
    resourceType: 'Observation', id: 'o', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '1-8' }, { system: 's', code: 'x' }] },
    effectivePeriod: { start: '2020-01-01' }, valueQuantity: { value: 500, unit: 'mg', system: 'http://unitsofmeasure.org', code: 'mg' },
  }, ['code', 'date', 'value-quantity:sort']],
  ['a subject that is a contained Patient', {
    resourceType: 'Observation', id: 'c', status: 'final', code: { text: 't' }, contained: [{ resourceType: 'Patient', id: 'cp' }], subject: { reference: '#cp' },
  }, ['subject']],
];

describe('paramEntries', () => {
  for (const [name, resource, params] of CASES) {
    test(`${name}: the rows indexEntries gives of those parameters`, () => {
      const whole = only(indexEntries(resource, 'https://x/fhir'), params);
      expect(whole.length).toBeGreaterThan(0);
      expect(only(paramEntries(resource, params, 'https://x/fhir'), params)).toEqual(whole);
    });
  }
});
