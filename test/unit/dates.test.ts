import { describe, expect, test } from 'bun:test';
import { dateRange, parseTimeCriterion } from '../../src/fhir/dates.ts';

const range = (v: string) => {
  const r = dateRange(v);
  return r && [new Date(r.low).toISOString(), new Date(r.high).toISOString()];
};

describe('dateRange (FHIR R4 search 3.1.1.5.9: a value denotes the interval its precision implies)', () => {
  test('each precision', () => {
    expect(range('2026')).toEqual(['2026-01-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z']);
    expect(range('2026-12')).toEqual(['2026-12-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z']);
    expect(range('2026-12-31')).toEqual(['2026-12-31T00:00:00.000Z', '2027-01-01T00:00:00.000Z']);
    expect(range('2026-03-01T11:00+01:00')).toEqual(['2026-03-01T10:00:00.000Z', '2026-03-01T10:01:00.000Z']);
    expect(range('2026-03-01T10:00:00Z')).toEqual(['2026-03-01T10:00:00.000Z', '2026-03-01T10:00:01.000Z']);
    expect(range('2026-03-01T10:00:00.250Z')).toEqual(['2026-03-01T10:00:00.250Z', '2026-03-01T10:00:00.251Z']);
  });

  test('a fraction of a second is as wide as its digits; past the millisecond, the millisecond containing it', () => {
    expect(range('2026-03-01T10:00:00.1Z')).toEqual(['2026-03-01T10:00:00.100Z', '2026-03-01T10:00:00.200Z']);
    expect(range('2026-03-01T10:00:00.12Z')).toEqual(['2026-03-01T10:00:00.120Z', '2026-03-01T10:00:00.130Z']);
    expect(range('2026-03-01T10:00:00.123Z')).toEqual(['2026-03-01T10:00:00.123Z', '2026-03-01T10:00:00.124Z']);
    expect(range('2026-03-01T10:00:00.1234Z')).toEqual(['2026-03-01T10:00:00.123Z', '2026-03-01T10:00:00.124Z']);
    expect(range('2026-03-01T10:00:00.999999999Z')).toEqual(['2026-03-01T10:00:00.999Z', '2026-03-01T10:00:01.000Z']);
    expect(range('2026-03-01T10:00:00.9-05:00')).toEqual(['2026-03-01T15:00:00.900Z', '2026-03-01T15:00:01.000Z']);
  });

  test('years below 100 are not shifted into the 1900s', () => {
    expect(range('0050')).toEqual(['0050-01-01T00:00:00.000Z', '0051-01-01T00:00:00.000Z']);
    expect(range('0001-02-28')).toEqual(['0001-02-28T00:00:00.000Z', '0001-03-01T00:00:00.000Z']);
  });

  test('days beyond the month, bad hours and zones are rejected', () => {
    expect(range('2026-02-29')).toBeNull();
    expect(range('2024-02-29')).not.toBeNull();
    expect(range('2026-04-31')).toBeNull();
    expect(range('2026-03-01T24:00:00Z')).toBeNull();
    expect(range('2026-03-01T10:00:00+15:00')).toBeNull();
    expect(range('2026-3-1')).toBeNull();
  });

  test('prefixes', () => {
    expect(parseTimeCriterion('ge2026').op).toBe('ge');
    expect(parseTimeCriterion('2026').op).toBe('eq');
    expect(() => parseTimeCriterion('sa2026')).toThrow();
  });
});
