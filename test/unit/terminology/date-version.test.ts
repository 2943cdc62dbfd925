import { describe, expect, test } from 'bun:test';
import { parseDateTime } from '../../../src/terminology/model/date-time.ts';
import { effectiveFrom, pickVersion } from '../../../src/terminology/version.ts';

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
const period = (text: string) => {
  const p = parseDateTime(text);
  return p === null ? null : [iso(p.start), iso(p.end)];
};

describe('parseDateTime (FHIR R4 date / dateTime as a period)', () => {
  test('partial dates cover their whole year, month or day (UTC)', () => {
    expect(period('2021')).toEqual(['2021-01-01T00:00:00.000Z', '2021-12-31T23:59:59.999Z']);
    expect(period('2024-02')).toEqual(['2024-02-01T00:00:00.000Z', '2024-02-29T23:59:59.999Z']);
    expect(period('2021-12-31')).toEqual(['2021-12-31T00:00:00.000Z', '2021-12-31T23:59:59.999Z']);
    expect(period('0099-03-01')).toEqual(['0099-03-01T00:00:00.000Z', '0099-03-01T23:59:59.999Z']);
  });

  test('a dateTime is the second it names in its zone; fractions are exact', () => {
    expect(period('2021-05-10T08:00:00+02:00')).toEqual(['2021-05-10T06:00:00.000Z', '2021-05-10T06:00:00.999Z']);
    expect(period('2021-05-10T08:00:00.25Z')).toEqual(['2021-05-10T08:00:00.250Z', '2021-05-10T08:00:00.250Z']);
    expect(period('2021-05-10T23:30:00-14:00')).toEqual(['2021-05-11T13:30:00.000Z', '2021-05-11T13:30:00.999Z']);
  });

  test('malformed or impossible values are null', () => {
    for (const bad of ['', '21', '2021-1', '2021-00', '2021-02-29', '2100-02-29', '2021-06-31', '2021-01-01T10:00', '2021-01-01T10:00:00', '2021-01-01T25:00:00Z', '2021-01-01T10:60:00Z', '2021-01-01T10:00:00+14:30', '2021-01-01T10:00:00+01:60', '0000', 'now']) {
      expect(parseDateTime(bad)).toBeNull();
    }
    expect(parseDateTime('2000-02-29')).not.toBeNull();
  });
});

describe('pickVersion with a date', () => {
  const v1 = { version: '1.0.0', date: '2020-01-15' };
  const v2 = { version: '2.0.0', date: '2023-06-01' };
  const v10 = { version: '10.0.0', meta: { lastUpdated: '2024-01-01T00:00:00Z' } };
  const timeless = { version: '0.1' };
  const at = (text: string) => parseDateTime(text) ?? undefined;

  test('the latest version in effect at the date; an explicit version ignores the date', () => {
    expect(pickVersion([v1, v2, v10])).toBe(v10);
    expect(pickVersion([v1, v2, v10], undefined, at('2023'))).toBe(v2);
    expect(pickVersion([v1, v2, v10], undefined, at('2023-05-31'))).toBe(v1);
    expect(pickVersion([v1, v2, v10], undefined, at('2019'))).toBeNull();
    expect(pickVersion([v1, v2, v10], '2.0.0', at('2019'))).toBe(v2);
  });

  test('meta.lastUpdated stands in for a missing or malformed date; a version with neither is always in effect', () => {
    expect(effectiveFrom({ date: 'soon', meta: { lastUpdated: '2024-01-01T00:00:00Z' } })).toBe(Date.parse('2024-01-01T00:00:00Z'));
    expect(effectiveFrom(timeless)).toBeUndefined();
    expect(pickVersion([timeless, v1], undefined, at('1999'))).toBe(timeless);
  });

  test('versions that compare equal go to the later dated one', () => {
    const older = { version: '1', date: '2020' };
    const newer = { version: '1', date: '2022' };
    expect(pickVersion([newer, older])).toBe(newer);
    expect(pickVersion([older, newer])).toBe(newer);
    expect(pickVersion([older, newer], undefined, at('2021'))).toBe(older);
  });
});
