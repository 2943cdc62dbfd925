import { describe, expect, test } from 'bun:test';
import { inputFromParameters, inputFromQuery, splitTypeFilters } from '../../src/export/kickoff-input.ts';
import { parseSince } from '../../src/export/since.ts';
import { parseRange } from '../../src/http/export-file.ts';
import { prefersGzip, refusesIdentity } from '../../src/http/content-coding.ts';
import table from '../../src/export/element-table.json' with { type: 'json' };
import { elementTableFromDefinitions } from '../helpers/element-table.ts';

describe('_since', () => {
  const at = Date.parse('2024-03-01T10:00:00Z');
  test.each([
    '2024-03-01T10:00:00Z', '2024-03-01T10:00:00.000Z', '2024-03-01T12:00:00+02:00', '2024-03-01T12:00:00+0200', '2024-03-01T12:00+02',
    '2024-03-01T12:00:00 02:00', '2024-03-01T05:30:00-04:30', '2024-03-01t10:00:00z',
  ])('%s', (raw) => expect(parseSince(raw)).toBe(at));
  test.each(['2024-03-01', '2024-03-01T10:00:00', '2024-02-30T10:00:00Z', '2024-03-01T25:00:00Z', 'now', '2024-03-01T10:00:00+15:00'])('rejects %s', (raw) => {
    expect(() => parseSince(raw)).toThrow('_since');
  });
});

describe('kick-off input', () => {
  test('_typeFilter: commas between encoded queries separate them, encoded commas stay inside', () => {
    const q = `?_typeFilter=${encodeURIComponent('Observation?code=a,b')},${encodeURIComponent('Condition?_id=1')}&_type=Observation,Condition&_type=Patient`;
    const input = inputFromQuery(q);
    expect(input.typeFilters).toEqual(['Observation?code=a,b', 'Condition?_id=1']);
    expect(input.types).toEqual(['Observation', 'Condition', 'Patient']);
  });
  test('a whole-value-encoded _typeFilter list is split before each Type?', () => {
    expect(splitTypeFilters('MedicationRequest?status=active,MedicationRequest?status=completed&date=gt2018-07-01')).toEqual([
      'MedicationRequest?status=active', 'MedicationRequest?status=completed&date=gt2018-07-01',
    ]);
  });
  test('unknown names are collected; _format passes', () => {
    expect(inputFromQuery('?_format=json&foo=1').unknown).toEqual(['foo']);
  });
  test('Parameters body', () => {
    const input = inputFromParameters({
      resourceType: 'Parameters',
      parameter: [
        { name: '_type', valueString: 'Patient,Observation' },
        { name: '_since', valueInstant: '2024-01-01T00:00:00Z' },
        { name: 'patient', valueReference: { reference: 'Patient/1' } },
        { name: 'includeAssociatedData', valueCode: 'LatestProvenanceResources' },
      ],
    });
    expect(input).toMatchObject({ method: 'POST', types: ['Patient', 'Observation'], since: ['2024-01-01T00:00:00Z'], patients: ['Patient/1'], includeAssociatedData: ['LatestProvenanceResources'] });
    expect(() => inputFromParameters({ resourceType: 'Parameters', parameter: [{ name: '_type' }] })).toThrow('no usable value');
  });
});

describe('download headers', () => {
  test('ranges', () => {
    expect(parseRange('bytes=0-9', 100)).toEqual({ start: 0, end: 9 });
    expect(parseRange('bytes=90-200', 100)).toEqual({ start: 90, end: 99 });
    expect(parseRange('bytes=-10', 100)).toEqual({ start: 90, end: 99 });
    expect(parseRange('bytes=100-', 100)).toBe('unsatisfiable');
    expect(parseRange('bytes=5-1', 100)).toBeNull();
    expect(parseRange('bytes=0-1,5-6', 100)).toBeNull();
    expect(parseRange(null, 100)).toBeNull();
  });
  test('gzip as Accept-Encoding ranks it (RFC 9110 12.5.3)', () => {
    for (const header of ['gzip, deflate', 'x-gzip', 'GZIP;Q=0.8', '*', 'br;q=1, gzip;q=0.5', 'gzip, identity;q=0.5', 'identity;q=0, gzip;q=0.1', 'gzip;q=0.5, identity;q=0.5']) {
      expect({ header, gzip: prefersGzip(header) }).toEqual({ header, gzip: true });
    }
    for (const header of [null, '', 'identity', 'gzip;q=0', 'br', 'gzip;q=0.5, identity', 'gzip;q=0.5, *', '*;q=0', 'identity;q=0', 'gzip;q=0, *']) {
      expect({ header, gzip: prefersGzip(header) }).toEqual({ header, gzip: false });
    }
    expect([refusesIdentity('identity;q=0, gzip'), refusesIdentity('*;q=0'), refusesIdentity('*;q=0, identity'), refusesIdentity('gzip'), refusesIdentity(null)])
      .toEqual([true, true, false, false, false]);
  });
});

test('the _elements table matches the R4 StructureDefinitions (regenerate: bun scripts/gen-element-table.ts)', async () => {
  expect(table as unknown).toEqual(await elementTableFromDefinitions());
});
