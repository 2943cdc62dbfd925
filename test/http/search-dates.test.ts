/**
 * Date search against the ranges R4 search.html gives values ("date"), on both databases: a Timing is
 * one range over its outer limits (earliest event or bounds start to latest event or bounds end, an
 * open bound infinite), and a fraction of a second is as wide as its precision (`.1` 100 ms, `.12`
 * 10 ms, `.123` 1 ms; digits past the millisecond dropped), stored and searched, for every prefix. The
 * in-memory matcher (a read under a SMART scope filter) agrees with the SQL; and a database indexed by
 * model 8, which took each event for a range of its own and every fraction for 1 ms, reindexed. A leap
 * second is the last millisecond of its minute (model 13; model 12 gave it no row).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { dateRange } from '../../src/fhir/dates.ts';
import { storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, reindex } from '../../src/fhir/reindex.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, readableUnder, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';
const obs = (id: string, code: string, value: Json): Json => ({
  resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: LOINC, code }] }, subject: { reference: 'Patient/p1' }, ...value,
});
const at = (t: string) => `2020-03-01T10:30:00${t}`;

const DATA: Json[] = [
  { resourceType: 'Patient', id: 'p1' },
  // Timings (code `timing`). tev: [2020-03-05T08:00:00Z, 2020-04-05T08:00:01Z).
  obs('tev', 'timing', { effectiveTiming: { event: ['2020-03-05T08:00:00Z', '2020-04-05T08:00:00Z'] } }),
  // tbp: an event before its bounds: [2020-02-25T08:00:00Z, 2020-03-21).
  obs('tbp', 'timing', { effectiveTiming: { event: ['2020-02-25T08:00:00Z'], repeat: { boundsPeriod: { start: '2020-03-01', end: '2020-03-20' }, frequency: 1, period: 1, periodUnit: 'd' } } }),
  // topen: bounds with an open end: [2020-03-10, infinity).
  obs('topen', 'timing', { effectiveTiming: { repeat: { boundsPeriod: { start: '2020-03-10' }, frequency: 2, period: 1, periodUnit: 'd' } } }),
  // Fractions (code `fraction`), in ms past 10:30:00: f1 [100, 200), f2 [120, 130), f3 and f4 [123, 124), s0 [0, 1000).
  obs('f1', 'fraction', { effectiveDateTime: at('.1Z') }),
  obs('f2', 'fraction', { effectiveDateTime: '2020-03-01T11:30:00.12+01:00' }),
  obs('f3', 'fraction', { effectiveDateTime: at('.123Z') }),
  obs('f4', 'fraction', { effectiveDateTime: at('.1234Z') }),
  obs('s0', 'fraction', { effectiveDateTime: at('Z') }),
  // A composite's date component (code-value-date, searched as code and value-date): [100, 200).
  obs('v1', 'value', { valueDateTime: at('.1Z') }),
  // Timings near the test clock (2026-01-15T10:00Z), where `ap` widens little: [2025-12-01T08:00Z, 2026-01-10T08:00:01Z) and
  // [2025-11-01T08:00Z, 2025-11-05T08:00:01Z).
  { resourceType: 'ServiceRequest', id: 'sra', status: 'active', intent: 'order', subject: { reference: 'Patient/p1' }, occurrenceTiming: { event: ['2025-12-01T08:00:00Z', '2026-01-10T08:00:00Z'] } },
  { resourceType: 'ServiceRequest', id: 'srb', status: 'active', intent: 'order', subject: { reference: 'Patient/p1' }, occurrenceTiming: { event: ['2025-11-01T08:00:00Z', '2025-11-05T08:00:00Z'] } },
];

/** Searches of Timings (`date` of Observations coded `timing`) and the ids each finds. */
const TIMING_CASES: [string, string[]][] = [
  // The probe: each event lay in a range of its own, so these matched tev.
  ['2020-03', []],
  ['eb2020-04-01', ['tbp']],
  ['sa2020-03-10', []],
  ['sa2020-03-09', ['topen']],
  ['2020', ['tbp', 'tev']],
  ['ne2020-03', ['tbp', 'tev', 'topen']],
  ['ne2020', ['topen']],
  ['gt2020-03', ['tev', 'topen']],
  ['gt2020-04-04', ['tev', 'topen']],
  ['gt2020-04-05', ['topen']],
  ['ge2020-04-05', ['topen']],
  ['ge2020', ['tbp', 'tev', 'topen']],
  ['lt2020-03', ['tbp']],
  ['lt2020-03-05', ['tbp']],
  ['lt2020-03-06', ['tbp', 'tev']],
  ['le2020-03-05', ['tbp']],
  ['le2020', ['tbp', 'tev']],
  ['eb2020-04-06', ['tbp', 'tev']],
  ['ap2020-03-20', ['tbp', 'tev', 'topen']],
];

/** Searches of fractions of a second (`date` of Observations coded `fraction`) and the ids each finds. */
const FRACTION_CASES: [string, string[]][] = [
  [at('.1Z'), ['f1', 'f2', 'f3', 'f4']],
  [at('.12Z'), ['f2', 'f3', 'f4']],
  ['2020-03-01T11:30:00.12+01:00', ['f2', 'f3', 'f4']],
  [at('.123Z'), ['f3', 'f4']],
  // Past the millisecond: the millisecond containing it.
  [at('.1234Z'), ['f3', 'f4']],
  [at('.1239Z'), ['f3', 'f4']],
  [at('.124Z'), []],
  [at('Z'), ['f1', 'f2', 'f3', 'f4', 's0']],
  [`ne${at('.12Z')}`, ['f1', 's0']],
  [`ne${at('.1Z')}`, ['s0']],
  [`gt${at('.12Z')}`, ['f1', 's0']],
  [`gt${at('.15Z')}`, ['f1', 's0']],
  [`ge${at('.12Z')}`, ['f1', 'f2', 'f3', 'f4', 's0']],
  [`lt${at('.12Z')}`, ['f1', 's0']],
  [`lt${at('.123Z')}`, ['f1', 'f2', 's0']],
  [`ge${at('.15Z')}`, ['f1', 's0']],
  [`le${at('.11Z')}`, ['f1', 's0']],
  [`le${at('.12Z')}`, ['f1', 'f2', 'f3', 'f4', 's0']],
  [`sa${at('.1Z')}`, []],
  [`sa${at('.11Z')}`, ['f2', 'f3', 'f4']],
  [`sa${at('.0Z')}`, ['f1', 'f2', 'f3', 'f4']],
  [`eb${at('.125Z')}`, ['f3', 'f4']],
  [`eb${at('.13Z')}`, ['f2', 'f3', 'f4']],
  [`eb${at('.2Z')}`, ['f1', 'f2', 'f3', 'f4']],
  [`ap${at('.12Z')}`, ['f1', 'f2', 'f3', 'f4', 's0']],
];

await eachStore((kind, fresh) => {
  describe(`date ranges on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ids = async (query: string) => ((await api.search(query)).entry ?? []).map((e: Json) => e.resource.id as string).sort();
    /** The ids of `code`'s Observations that `date=value` finds, by search (SQL) and by reads under a scope filter (in memory). */
    const both = async (code: string, value: string) => {
      const query = `date=${encodeURIComponent(value)}`;
      const found = await ids(`Observation?code=${code}&${query}`);
      const readable = await readableUnder(t, 'Observation', query, DATA.filter((x) => x.code?.coding[0].code === code).map((r) => r.id));
      return { found, readable };
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('a Timing is one range over its events and bounds Period, for every prefix, in SQL and in memory', async () => {
      for (const [value, expected] of TIMING_CASES) {
        expect({ value, ...(await both('timing', value)) }).toEqual({ value, found: expected, readable: expected });
      }
    });

    test('a fraction of a second is as wide as its digits, stored and searched, for every prefix, in SQL and in memory', async () => {
      for (const [value, expected] of FRACTION_CASES) {
        expect({ value, ...(await both('fraction', value)) }).toEqual({ value, found: expected, readable: expected });
      }
    });

    test('a composite\'s date component and another Timing parameter follow the same ranges', async () => {
      const cvd = (v: string) => ids(`Observation?code-value-date=${encodeURIComponent(`${LOINC}|value$${v}`)}`);
      expect(await cvd(at('.1Z'))).toEqual(['v1']);
      expect(await cvd(at('.12Z'))).toEqual([]);
      expect(await cvd(`eb${at('.15Z')}`)).toEqual([]);
      expect(await cvd(`gt${at('.15Z')}`)).toEqual(['v1']);
      expect(await cvd(`sa${at('.05Z')}`)).toEqual(['v1']);
      // ap widens 2025-12-20 by 10% of its distance from now (about 2.6 days): it meets sra between its events.
      expect(await ids('ServiceRequest?occurrence=ap2025-12-20')).toEqual(['sra']);
      expect(await ids('ServiceRequest?occurrence=2025-12')).toEqual([]);
      expect(await ids('ServiceRequest?occurrence=2025-11')).toEqual(['srb']);
      expect(await ids('ServiceRequest?occurrence=ge2026-01-09')).toEqual(['sra']);
      expect(await ids('ServiceRequest?occurrence=lt2025-11-02')).toEqual(['srb']);
      expect(await ids('ServiceRequest?occurrence=eb2025-12-02')).toEqual(['srb']);
    });

    test('a database indexed by model 8 is reindexed from its resources holding Timing events or short fractions', async () => {
      const page = await t.store.resources.indexing.page(0, 1000);
      // As model 8 wrote them: a range per Timing event and one for its bounds, every fraction 1 ms wide.
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const resource = JSON.parse(r.content) as Json;
        const index = storedIndex(resource);
        const values: Record<string, unknown> = resource.resourceType === 'ServiceRequest'
          ? { occurrence: resource.occurrenceTiming }
          : { date: resource.effectiveTiming ?? resource.effectiveDateTime, 'value-date': resource.valueDateTime };
        index.ranges = index.ranges.filter((e) => values[e.param] === undefined);
        for (const [param, value] of Object.entries(values)) {
          for (const x of value === undefined ? [] : model8Ranges(value)) index.ranges.push({ param, system: '', code: '', ...x });
        }
        return { type: r.type, id: r.id, versionId: r.versionId, index, compartments: [] };
      }), ['search_range']));
      await t.store.resources.indexing.setState({ model: 8, after: 0 });
      expect(await ids('Observation?code=timing&date=2020-03')).toEqual(['tbp', 'tev']);
      expect(await ids(`Observation?code=fraction&date=eb${encodeURIComponent(at('.125Z'))}`)).toEqual(['f1', 'f2', 'f3', 'f4']);
      expect(await ids(`Observation?code-value-date=${encodeURIComponent(`${LOINC}|value$eb${at('.15Z')}`)}`)).toEqual(['v1']);

      const run = await reindex(t.store);
      // Only those with a Timing's events or a fraction of one or two digits: tev, tbp, f1, f2, v1, sra and srb.
      expect(run).toEqual({ ran: true, done: page.length, rebuilt: 7 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      const cases = [...TIMING_CASES.map(([v, e]) => ['timing', v, e] as const), ...FRACTION_CASES.map(([v, e]) => ['fraction', v, e] as const)];
      for (const [code, value, expected] of cases) {
        expect({ value, found: await ids(`Observation?code=${code}&date=${encodeURIComponent(value)}`) }).toEqual({ value, found: expected });
      }
      expect(await ids(`Observation?code-value-date=${encodeURIComponent(`${LOINC}|value$eb${at('.15Z')}`)}`)).toEqual([]);
      expect(await ids('ServiceRequest?occurrence=ap2025-12-20')).toEqual(['sra']);
    });
  });
});

/** The date ranges index model 8 gave a value: one per Timing event and one for its bounds; a fraction 1 ms wide. */
function model8Ranges(value: unknown): { low: number; high: number }[] {
  const point = (s: string) => {
    const r = dateRange(s)!;
    return s.includes('.') ? { low: r.low, high: r.low + 1 } : r;
  };
  if (typeof value === 'string') return [point(value)];
  const v = value as Json;
  if ('start' in v || 'end' in v) return [{ low: v.start ? point(v.start).low : -Infinity, high: v.end ? point(v.end).high : Infinity }];
  return [...(v.event ?? []).map(point), ...(v.repeat?.boundsPeriod ? model8Ranges(v.repeat.boundsPeriod) : [])];
}

/**
 * A leap second (`23:59:60`, which the R4 dateTime and instant regexes allow) is the last millisecond of
 * its minute, [23:59:59.999, 24:00), stored and searched: in its day and year, not in the next; a search
 * value may carry one too.
 */
const LEAP: Json[] = [
  obs('ls', 'leap', { effectiveDateTime: '2016-12-31T23:59:60Z' }),
  obs('lz', 'leap', { effectiveDateTime: '2017-01-01T00:59:60.5+01:00' }),
  obs('l59', 'leap', { effectiveDateTime: '2016-12-31T23:59:59Z' }),
  obs('lnext', 'leap', { effectiveDateTime: '2017-01-01T00:00:00Z' }),
];

const LEAP_CASES: [string, string[]][] = [
  ['2016', ['l59', 'ls', 'lz']],
  ['2016-12-31', ['l59', 'ls', 'lz']],
  ['2016-12-31T23:59:60Z', ['ls', 'lz']],
  ['2016-12-31T23:59:59Z', ['l59', 'ls', 'lz']],
  ['2017', ['lnext']],
  ['sa2016-12-31T23:59:59Z', ['lnext']],
  ['gt2016-12-31T23:59:60Z', ['lnext']],
  ['lt2016-12-31T23:59:60Z', ['l59']],
  ['eb2017-01-01', ['l59', 'ls', 'lz']],
];

await eachStore((kind, fresh) => {
  describe(`a leap second on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ids = async (q: string) => ((await api.search(q)).entry ?? []).map((e: Json) => e.resource.id as string).sort();

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1' });
      for (const r of LEAP) await api.put200(r);
    });
    afterAll(() => t.close());

    test('is the last millisecond of its minute, stored and searched, in SQL and in memory', async () => {
      expect(dateRange('2016-12-31T23:59:60Z')).toEqual({ low: Date.UTC(2016, 11, 31, 23, 59, 59, 999), high: Date.UTC(2017, 0, 1) });
      expect(dateRange('2016-12-31T23:59:61Z')).toBeNull();
      for (const [value, expected] of LEAP_CASES) {
        const query = `code=leap&date=${encodeURIComponent(value)}`;
        const found = await ids(`Observation?${query}`);
        const readable = await readableUnder(t, 'Observation', query, LEAP.map((r) => r.id as string));
        expect({ value, found, readable }).toEqual({ value, found: expected, readable: expected });
      }
      expect(await ids('Observation?code=leap&date:missing=true')).toEqual([]);
      expect(await ids(`Observation?_lastUpdated=${encodeURIComponent('le2016-12-31T23:59:60Z')}`)).toEqual([]);
    });

    test('a database indexed by model 12, which gave it no row, is reindexed from its resources holding one', async () => {
      const page = await t.store.resources.indexing.page(0, 1000);
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const resource = JSON.parse(r.content) as Json;
        const index = storedIndex(resource);
        if (String(resource.effectiveDateTime).includes(':60')) index.ranges = index.ranges.filter((e) => e.param !== 'date');
        return { type: r.type, id: r.id, versionId: r.versionId, index, compartments: [] };
      }), ['search_range']));
      await t.store.resources.indexing.setState({ model: 12, after: 0 });
      expect(await ids('Observation?code=leap&date=2016')).toEqual(['l59']);

      const run = await reindex(t.store);
      // ls and lz alone.
      expect(run).toEqual({ ran: true, done: page.length, rebuilt: 2 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      for (const [value, expected] of LEAP_CASES) {
        expect({ value, found: await ids(`Observation?code=leap&date=${encodeURIComponent(value)}`) }).toEqual({ value, found: expected });
      }
    });
  });
});
