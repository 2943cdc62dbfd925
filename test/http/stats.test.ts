/**
 * `Observation/$stats` (R4 Observation-stats) on both databases: every statistic of R4's list (but
 * regression) over valueQuantity and component values, per code, `total-count` against `count`,
 * entered-in-error left out, period and duration, include/limit, GET and POST (Coding, Period), units,
 * each error naming its parameter, and access (a search's).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';
const UCUM = 'http://unitsofmeasure.org';
const STATS = 'http://hl7.org/fhir/observation-statistics';
const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
const ALL = 'average,maximum,minimum,count,total-count,median,std-dev,sum,variance,20-percent,80-percent,4-lower,4-upper,4-dev,5-1,5-2,5-3,5-4,skew,kurtosis';

/** The statistics Observations of a $stats answer, each as {code: value}. */
function statistics(p: Json): { code: string; values: Record<string, number>; obs: Json }[] {
  return (p.parameter as Json[]).filter((x) => x.name === 'statistics').map((x) => ({
    code: x.resource.code.coding[0].code,
    obs: x.resource,
    values: Object.fromEntries(((x.resource.component ?? []) as Json[]).map((c) => [c.code.coding[0].code, c.valueInteger ?? c.valueQuantity.value])),
  }));
}

await eachStore((kind, fresh) => {
  describe(`Observation/$stats (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const obs = (id: string, code: string, value: Json, date: string, extra: Json = {}) => api.put200({
      resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: LOINC, code }] }, subject: { reference: 'Patient/p1' }, effectiveDateTime: date, ...value, ...extra,
    });
    const mg = (value: number) => ({ valueQuantity: { value, unit: 'mg/dL', system: UCUM, code: 'mg/dL' } });
    const mmHg = (value: number) => ({ valueQuantity: { value, unit: 'mmHg', system: UCUM, code: 'mm[Hg]' } });
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const p of ['p1', 'p2']) await api.put200({ resourceType: 'Patient', id: p });
      // The first three are laboratory results (for a scope filter).
      const lab = { category: [{ coding: [{ system: CAT, code: 'laboratory' }] }] };
      for (const [i, v] of [1, 2, 3, 4, 10].entries()) await obs(`g${i}`, '2339-0', mg(v), `2026-01-0${i + 1}T08:00:00Z`, i < 3 ? lab : {});
      await obs('g-err', '2339-0', mg(1000), '2026-01-06', { status: 'entered-in-error' });
      await obs('g-text', '2339-0', { valueString: 'hemolysed' }, '2026-01-07');
      await obs('g-old', '2339-0', mg(999), '2020-05-01');
      await obs('g-other', '2339-0', mg(500), '2026-01-02', { subject: { reference: 'Patient/p2' } });
      for (const [i, [sys, dia]] of [[120, 80], [130, 90]].entries()) {
        await obs(`bp${i}`, '85354-9', {
          component: [
            { code: { coding: [{ system: LOINC, code: '8480-6' }] }, ...mmHg(sys!) },
            { code: { coding: [{ system: LOINC, code: '8462-4' }] }, ...mmHg(dia!) },
          ],
        }, `2026-01-0${i + 1}`, { category: [{ coding: [{ system: CAT, code: 'vital-signs' }] }] });
      }
      // A lipid panel by hasMember: two panels, one member of another patient (out of a p1 token's reach).
      await obs('chol1', '2093-3', mg(200), '2026-01-03');
      await obs('chol2', '2093-3', mg(220), '2026-01-04');
      await obs('hdl1', '2085-9', mg(50), '2026-01-03');
      await obs('hdl-other', '2085-9', mg(70), '2026-01-04', { subject: { reference: 'Patient/p2' } });
      await obs('lipid1', '57698-3', { hasMember: [{ reference: 'Observation/chol1' }, { reference: 'Observation/hdl1' }] }, '2026-01-03');
      await obs('lipid2', '57698-3', { hasMember: [{ reference: `${t.fhir()}/Observation/chol2` }, { reference: 'Observation/hdl-other' }, { reference: 'Observation/missing' }] }, '2026-01-04');
      // The test clock stands at 2026-01-15T10:00Z.
      await obs('r-recent', 'recent', mg(5), '2026-01-15T09:30:00Z');
      await obs('r-earlier', 'recent', mg(7), '2026-01-15T08:00:00Z');
      await obs('m1', 'mixed', { valueQuantity: { value: 1, unit: 'mg', system: UCUM, code: 'mg' } }, '2026-01-02');
      await obs('m2', 'mixed', { valueQuantity: { value: 1, unit: 'g', system: UCUM, code: 'g' } }, '2026-01-03');
    });
    afterAll(() => t.close());

    test('every statistic of R4\'s list, exactly, over a code\'s values in a period; total-count counts the Observations without a value', async () => {
      const res = await api.get(`Observation/$stats?subject=Patient/p1&system=${encodeURIComponent(LOINC)}&code=2339-0&period=2026-01-01,2026-12-31&statistic=${ALL}`);
      expect(res.status).toBe(200);
      const p = (await res.json()) as Json;
      expect(p.resourceType).toBe('Parameters');
      const [s] = statistics(p);
      expect(s!.obs.status).toBe('final');
      expect(s!.obs.code.coding).toEqual([{ system: LOINC, code: '2339-0' }]);
      expect(s!.obs.subject).toEqual({ reference: 'Patient/p1' });
      expect(s!.obs.effectivePeriod).toEqual({ start: '2026-01-01', end: '2026-12-31' });
      const v = s!.values;
      expect({ count: v.count, total: v['total-count'], sum: v.sum, average: v.average, min: v.minimum, max: v.maximum, median: v.median }).toEqual({ count: 5, total: 6, sum: 20, average: 4, min: 1, max: 10, median: 3 });
      expect(v.variance).toBeCloseTo(10, 12);
      expect(v['std-dev']).toBeCloseTo(Math.sqrt(10), 12);
      expect([v['20-percent'], v['80-percent'], v['4-lower'], v['4-upper'], v['4-dev']].map((x) => Number(x!.toFixed(10)))).toEqual([1.8, 5.2, 2, 4, 1]);
      expect([v['5-1'], v['5-2'], v['5-3'], v['5-4']].map((x) => Number(x!.toFixed(10)))).toEqual([1.8, 2.6, 3.4, 5.2]);
      expect(v.skew).toBeCloseTo(36 / 10 ** 1.5, 12);
      expect(v.kurtosis).toBeCloseTo(2.788, 12);
      // Each component's code is the statistic's; value statistics carry the unit, counts are integers.
      const average = (s!.obs.component as Json[]).find((c) => c.code.coding[0].code === 'average')!;
      expect(average).toEqual({ code: { coding: [{ system: STATS, code: 'average', display: 'Average' }] }, valueQuantity: { value: 4, unit: 'mg/dL', system: UCUM, code: 'mg/dL' } });
      expect((s!.obs.component as Json[]).find((c) => c.code.coding[0].code === 'count')!.valueInteger).toBe(5);
      // The components follow R4's order of the statistics, whatever the request's.
      expect((s!.obs.component as Json[]).map((c) => c.code.coding[0].code)).toEqual(ALL.split(','));
      // Without the period, the old value counts too; entered-in-error and another patient's never.
      const all = statistics(await api.search(`Observation/$stats?patient=p1&coding=${encodeURIComponent(`${LOINC}|2339-0`)}&statistic=count,maximum`));
      expect(all[0]!.values).toEqual({ maximum: 999, count: 6 });
      expect(all[0]!.obs.effectivePeriod).toBeUndefined();
    });

    test('component values per code, one Observation per code; POST with Codings and a Period', async () => {
      const res = await api.post('Observation/$stats', {
        resourceType: 'Parameters', parameter: [
          { name: 'subject', valueUri: 'Patient/p1' },
          { name: 'coding', valueCoding: { system: LOINC, code: '8480-6' } },
          { name: 'coding', valueCoding: { system: LOINC, code: '8462-4' } },
          { name: 'period', valuePeriod: { start: '2026-01-01', end: '2026-02-01' } },
          { name: 'statistic', valueCode: 'average' },
          { name: 'statistic', valueCode: 'count' },
        ],
      });
      expect(res.status).toBe(200);
      const s = statistics((await res.json()) as Json);
      expect(s.map((x) => [x.code, x.values])).toEqual([['8480-6', { average: 125, count: 2 }], ['8462-4', { average: 85, count: 2 }]]);
      // A code with no Observations: the counts, nothing undefined.
      const none = statistics(await api.search('Observation/$stats?subject=Patient/p1&code=nothing&statistic=average,count,total-count'));
      expect(none[0]!.values).toEqual({ count: 0, 'total-count': 0 });
      // Values that do not vary: skew and kurtosis are left out.
      const one = statistics(await api.search('Observation/$stats?subject=Patient/p1&code=8480-6&statistic=std-dev,skew,kurtosis,median&period=2026-01-01,2026-01-01'));
      expect(one[0]!.values).toEqual({ median: 120, 'std-dev': 0 });
    });

    test('a panel: statistics for each of its measurements, by component or member, each under its own code', async () => {
      const bp = statistics(await api.search('Observation/$stats?subject=Patient/p1&code=85354-9&statistic=average,count,total-count'));
      expect(bp.map((x) => [x.code, x.values])).toEqual([['8480-6', { average: 125, count: 2, 'total-count': 2 }], ['8462-4', { average: 85, count: 2, 'total-count': 2 }]]);
      const lipid = await api.search('Observation/$stats?subject=Patient/p1&code=57698-3&statistic=average,count&include=true');
      expect(statistics(lipid).map((x) => [x.code, x.values])).toEqual([['2093-3', { average: 210, count: 2 }], ['2085-9', { average: 60, count: 2 }]]);
      // The sources: the panels, newest first, then their members.
      expect((lipid.parameter as Json[]).filter((x) => x.name === 'source').map((x) => x.resource.id).sort()).toEqual(['chol1', 'chol2', 'hdl-other', 'hdl1', 'lipid1', 'lipid2']);
      // A member the token may not read is not counted.
      const own = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p1' }));
      expect(statistics(await own.search('Observation/$stats?subject=Patient/p1&code=57698-3&statistic=average,count')).map((x) => [x.code, x.values])).toEqual([['2093-3', { average: 210, count: 2 }], ['2085-9', { average: 50, count: 1 }]]);
    });

    test('duration: the hours before now', async () => {
      expect(statistics(await api.search('Observation/$stats?subject=Patient/p1&code=recent&duration=1&statistic=sum,count'))[0]!.values).toEqual({ sum: 5, count: 1 });
      const three = statistics(await api.search('Observation/$stats?subject=Patient/p1&code=recent&duration=3&statistic=sum,count'));
      expect(three[0]!.values).toEqual({ sum: 12, count: 2 });
      expect(three[0]!.obs.effectivePeriod).toEqual({ start: '2026-01-15T07:00:00.000Z', end: '2026-01-15T10:00:00.000Z' });
    });

    test('a period counts the Observations whose effective time overlaps it, at either side and open-ended', async () => {
      const span = (id: string, value: number, effective: Json) => api.put200({
        resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: LOINC, code: 'span' }] }, subject: { reference: 'Patient/p1' }, ...mg(value), ...effective,
      });
      // Across the period's first day and across its last; over the whole period; a day (its precision) inside.
      await span('s-start', 1, { effectivePeriod: { start: '2026-02-28T22:00:00Z', end: '2026-03-01T02:00:00Z' } });
      await span('s-end', 2, { effectivePeriod: { start: '2026-03-31T23:00:00Z', end: '2026-04-01T01:00:00Z' } });
      await span('s-over', 4, { effectivePeriod: { start: '2026-02-01', end: '2026-05-01' } });
      await span('s-day', 8, { effectiveDateTime: '2026-03-15' });
      // Ending the instant before the period starts, starting the day after it ends, and open before it.
      await span('s-before', 16, { effectivePeriod: { start: '2026-02-27', end: '2026-02-28T23:59:59Z' } });
      await span('s-after', 32, { effectiveDateTime: '2026-04-01' });
      await span('s-open', 64, { effectivePeriod: { end: '2026-03-01T00:30:00Z' } });
      const sum = async (period: string) => statistics(await api.search(`Observation/$stats?subject=Patient/p1&code=span&period=${period}&statistic=sum,count`))[0]!.values;
      expect(await sum('2026-03-01,2026-03-31')).toEqual({ sum: 1 + 2 + 4 + 8 + 64, count: 5 });
      // By POST, the same Period.
      const posted = await api.post('Observation/$stats', {
        resourceType: 'Parameters', parameter: [
          { name: 'subject', valueUri: 'Patient/p1' }, { name: 'code', valueCode: 'span' },
          { name: 'period', valuePeriod: { start: '2026-03-01', end: '2026-03-31' } }, { name: 'statistic', valueCode: 'sum' },
        ],
      });
      expect(posted.status).toBe(200);
      expect(statistics((await posted.json()) as Json)[0]!.values).toEqual({ sum: 79 });
      // One side open: everything overlapping what is given.
      expect(await sum('2026-03-01,')).toEqual({ sum: 1 + 2 + 4 + 8 + 32 + 64, count: 6 });
      expect(await sum(',2026-02-28')).toEqual({ sum: 1 + 4 + 16 + 64, count: 4 });
      // A period of an instant: what holds that instant.
      expect(await sum('2026-03-31T23:30:00Z,2026-03-31T23:30:00Z')).toEqual({ sum: 2 + 4, count: 2 });
    });

    test('include returns the source Observations, newest first, at most limit (ignored without include)', async () => {
      const p = await api.search('Observation/$stats?subject=Patient/p1&code=2339-0&period=2026-01-01,2026-12-31&statistic=count&include=true&limit=2');
      expect((p.parameter as Json[]).filter((x) => x.name === 'source').map((x) => x.resource.id)).toEqual(['g-text', 'g4']);
      const all = await api.search('Observation/$stats?subject=Patient/p1&code=2339-0&period=2026-01-01,2026-12-31&statistic=count&include=true');
      expect((all.parameter as Json[]).filter((x) => x.name === 'source').length).toBe(6);
      const without = await api.search('Observation/$stats?subject=Patient/p1&code=2339-0&statistic=count&limit=0');
      expect((without.parameter as Json[]).filter((x) => x.name === 'source')).toEqual([]);
      // A source is answered as it is stored: its decimals as written (a JavaScript literal would already have lost them).
      const text = '{"resourceType":"Observation","id":"exact","status":"final","code":{"coding":[{"system":"http://example.org/exact","code":"e"}]},"subject":{"reference":"Patient/p1"},"effectiveDateTime":"2026-03-01","valueQuantity":{"value":2.50,"unit":"mg"},"referenceRange":[{"low":{"value":12345678901234567890.50}}]}';
      expect((await api.put('Observation/exact', text)).status).toBe(201);
      const exact = await api.get('Observation/$stats?subject=Patient/p1&coding=http://example.org/exact|e&statistic=count&include=true');
      expect(exact.status).toBe(200);
      const answer = await exact.text();
      expect(answer).toContain('"valueQuantity":{"value":2.50,"unit":"mg"},"referenceRange":[{"low":{"value":12345678901234567890.50}}]');
    });

    test('values of several units are refused, naming them', async () => {
      const o = await expectOutcome(await api.get('Observation/$stats?subject=Patient/p1&code=mixed&statistic=average'), 422);
      expect(o.issue[0].expression).toEqual(['code']);
      expect(o.issue[0].diagnostics).toContain('(g, mg)');
    });

    test('errors name their parameter', async () => {
      const q = 'subject=Patient/p1&code=2339-0&statistic=average';
      const cases: [string, number, string][] = [
        ['code=2339-0&statistic=average', 400, 'subject'],
        [`${q}&patient=p1`, 400, 'subject'],
        ['subject=p1&code=2339-0&statistic=average', 400, 'subject'],
        ['patient=Group/x&code=2339-0&statistic=average', 400, 'patient'],
        ['subject=Patient/p1&statistic=average', 400, 'code'],
        ['subject=Patient/p1&system=http://loinc.org&statistic=average', 400, 'system'],
        ['subject=Patient/p1&coding=a|b|c&statistic=average', 400, 'coding'],
        ['subject=Patient/p1&code=2339-0', 400, 'statistic'],
        [`${q},bogus`, 400, 'statistic'],
        [`${q},regression`, 400, 'statistic'],
        [`${q}&duration=0`, 400, 'duration'],
        // Past the year 1, no dateTime writes the period's start (a 500 before).
        [`${q}&duration=99999999999999999999`, 400, 'duration'],
        [`${q}&duration=17800000`, 400, 'duration'],
        [`${q}&duration=1&period=2026,2027`, 400, 'period'],
        [`${q}&period=2026`, 400, 'period'],
        [`${q}&period=2027,2026`, 400, 'period'],
        [`${q}&period=x,`, 400, 'period'],
        [`${q}&period=ge2026,`, 400, 'period'],
        [`${q}&include=yes`, 400, 'include'],
        [`${q}&include=true&limit=0`, 400, 'limit'],
        // More codes than one search takes: named, before any search (498 of them are answered, with a period too).
        [`subject=Patient/p1&statistic=count&code=${Array.from({ length: 500 }, (_, i) => `c${i}`).join(',')}`, 400, 'code'],
      ];
      expect((await api.get(`Observation/$stats?subject=Patient/p1&statistic=count&period=2026-01-01,2026-12-31&code=${Array.from({ length: 498 }, (_, i) => `c${i}`).join(',')}`)).status).toBe(200);
      // A parameter $stats does not take is ignored, or a 400 naming it under strict handling.
      expect((await api.get(`Observation/$stats?${q}&_count=5`)).status).toBe(200);
      // A duration back to the year 100 is every Observation since.
      expect((await api.get(`Observation/$stats?${q}&duration=17000000`)).status).toBe(200);
      expect((await expectOutcome(await api.get(`Observation/$stats?${q}&_count=5`, { prefer: 'handling=strict' }), 400)).issue[0].expression).toEqual(['_count']);
      for (const [query, status, expression] of cases) {
        const o = await expectOutcome(await api.get(`Observation/$stats?${query}`), status);
        expect({ query, expression: o.issue[0].expression }).toEqual({ query, expression: [expression] });
      }
      expect((await expectOutcome(await api.post('Observation/$stats', { resourceType: 'Parameters', parameter: [{ name: 'coding', valueCoding: { system: LOINC } }] }), 400)).issue[0].expression).toEqual(['coding']);
      await expectOutcome(await api.post('Observation/$stats', { resourceType: 'Patient' }), 400);
      // A Coding or a Period that is not one is refused, naming it: never read as a code, nor a member dropped (a coding of any system).
      const posted = (value: Json) => api.post('Observation/$stats', { resourceType: 'Parameters', parameter: [
        { name: 'subject', valueString: 'Patient/p1' }, { name: 'statistic', valueCode: 'count' }, { name: 'code', valueString: '2339-0' }, value,
      ] });
      for (const [value, expression] of [
        [{ name: 'coding', valueCoding: 2339 }, 'Parameters.parameter[3].valueCoding'],
        [{ name: 'coding', valueCoding: [{ code: '2339-0' }] }, 'Parameters.parameter[3].valueCoding'],
        [{ name: 'coding', valueCoding: { system: 5, code: '2339-0' } }, 'Parameters.parameter[3].valueCoding.system'],
        [{ name: 'period', valuePeriod: '2026' }, 'Parameters.parameter[3].valuePeriod'],
        [{ name: 'period', valuePeriod: { start: '2026', end: 2027 } }, 'Parameters.parameter[3].valuePeriod.end'],
      ] as [Json, string][]) {
        expect({ value, expression: (await expectOutcome(await posted(value), 400)).issue[0].expression }).toEqual({ value, expression: [expression] });
      }
    });

    test('access is a search\'s: scopes, patient context', async () => {
      await expectOutcome(await fhirClient(t, await craftToken(t, 'system/Patient.rs')).get('Observation/$stats?subject=Patient/p1&code=2339-0&statistic=count'), 403);
      const own = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p1' }));
      expect(statistics(await own.search('Observation/$stats?subject=Patient/p1&code=2339-0&statistic=count'))[0]!.values).toEqual({ count: 6 });
      // Another patient's Observations are not in a patient-context token's search: none to count.
      const other = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p2' }));
      expect(statistics(await other.search('Observation/$stats?subject=Patient/p1&code=2339-0&statistic=count,total-count'))[0]!.values).toEqual({ count: 0, 'total-count': 0 });
      expect(statistics(await other.search('Observation/$stats?subject=Patient/p2&code=2339-0&statistic=sum'))[0]!.values).toEqual({ sum: 500 });
      // A SMART v2 scope filter bounds the Observations as it bounds a search of them.
      const labs = fhirClient(t, await craftToken(t, `system/Observation.rs?category=${CAT}|laboratory`));
      expect(statistics(await labs.search('Observation/$stats?subject=Patient/p1&code=2339-0&statistic=sum,count,total-count'))[0]!.values).toEqual({ sum: 6, count: 3, 'total-count': 3 });
    });

    test('values near the ends of the double range: every statistic exact or left out, never null, Infinity or NaN', async () => {
      // Far apart: the median of -1e308 and 1e308 is 0, their standard deviation 1e308; their variance (1e616) is no double.
      await obs('huge1', 'huge', mg(-1e308), '2026-01-02');
      await obs('huge2', 'huge', mg(1e308), '2026-01-03');
      // Tiny: their deviations' squares underflow, but their standard deviation, skew and kurtosis do not.
      for (const [i, v] of [1e-200, 2e-200, 4e-200].entries()) await obs(`tiny${i}`, 'tiny', mg(v), `2026-01-0${i + 2}`);
      const ask = (code: string) => api.get(`Observation/$stats?subject=Patient/p1&code=${code}&statistic=${ALL}`);
      for (const code of ['huge', 'tiny']) {
        const res = await ask(code);
        expect(res.status).toBe(200);
        const p = (await res.json()) as Json;
        for (const c of statistics(p)[0]!.obs.component as Json[]) {
          const value = c.valueInteger ?? c.valueQuantity.value;
          expect({ code: c.code.coding[0].code, finite: Number.isFinite(value) }).toEqual({ code: c.code.coding[0].code, finite: true });
        }
      }
      const huge = statistics((await (await ask('huge')).json()) as Json)[0]!.values;
      const { '20-percent': p20, '80-percent': p80, '5-1': q1, '5-2': q2, '5-3': q3, '5-4': q4, ...exact } = huge;
      expect(exact).toEqual({
        average: 0, sum: 0, maximum: 1e308, minimum: -1e308, count: 2, 'total-count': 2, median: 0, 'std-dev': 1e308,
        '4-lower': -5e307, '4-upper': 5e307, '4-dev': 5e307, skew: 0, kurtosis: 1,
      });
      for (const [got, want] of [[p20, -6], [p80, 6], [q1, -6], [q2, -2], [q3, 2], [q4, 6]] as const) expect(got! / 1e307).toBeCloseTo(want, 12);
      const tiny = statistics((await (await ask('tiny')).json()) as Json)[0]!.values;
      // As for 1, 2 and 4, scaled: the skew and kurtosis do not depend on the scale.
      expect(tiny['std-dev']! / 1e-200).toBeCloseTo(Math.sqrt(14 / 9), 12);
      expect(tiny.skew).toBeCloseTo(((-64 - 1 + 125) / 81) / (42 / 27) ** 1.5, 12);
      expect(tiny.kurtosis).toBeCloseTo(((256 + 1 + 625) / 243) / (42 / 27) ** 2, 12);
      expect(tiny.variance).toBeUndefined();
      expect(tiny.average! / 1e-200).toBeCloseTo(7 / 3, 12);
    });

    test('the CapabilityStatement lists $stats on Observation', async () => {
      const cs = (await (await api.get('metadata')).json()) as Json;
      const o = cs.rest[0].resource.find((r: Json) => r.type === 'Observation');
      expect(o.operation).toContainEqual({ name: 'stats', definition: 'http://hl7.org/fhir/OperationDefinition/Observation-stats' });
    });
  });
});
