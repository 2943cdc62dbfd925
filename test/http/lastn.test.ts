/**
 * `Observation/$lastn` (R4 Observation-lastn) on both databases: the most recent `max` per code and
 * subject, groups joined by Observations of several codings, ties and Observations without
 * effective[x], the search parameters that narrow it, several subjects, errors, and a search's access.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
const LOINC = 'http://loinc.org';

/** The `Observation/id`s of a Bundle's matches, in order. */
const matches = (b: Json) => (b.entry ?? []).filter((e: Json) => e.search.mode === 'match').map((e: Json) => e.resource.id);

await eachStore((kind, fresh) => {
  describe(`Observation/$lastn (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const obs = (id: string, codes: string[], effective: string | undefined, opts: { subject?: string; cat?: string; extra?: Json; text?: string } = {}) => api.put200({
      resourceType: 'Observation', id, status: 'final', subject: { reference: `Patient/${opts.subject ?? 'p1'}` },
      category: [{ coding: [{ system: CAT, code: opts.cat ?? 'laboratory' }] }],
      code: codes.length ? { coding: codes.map((code) => ({ system: LOINC, code })) } : { text: opts.text ?? 'text alone' },
      ...(effective ? { effectiveDateTime: effective } : {}), ...opts.extra,
    });
    const lastn = async (query: string, client = api) => {
      const res = await client.get(`Observation/$lastn?${query}`);
      const body = (await res.json()) as Json;
      expect({ query, status: res.status, body }).toMatchObject({ status: 200 });
      expect(body.type).toBe('searchset');
      return body;
    };
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const p of ['p1', 'p2']) await api.put200({ resourceType: 'Patient', id: p });
      await obs('a1', ['A'], '2024-01-01');
      await obs('a2', ['A'], '2024-03-01');
      await obs('a3', ['A'], '2024-02-01');
      // A tie on effective[x]: the later update first; without effective[x]: after every one with it.
      await obs('b1', ['B'], '2024-05-01T10:00:00Z', { cat: 'vital-signs' });
      t.clock.advance(1000);
      await obs('b2', ['B'], '2024-05-01T10:00:00Z', { cat: 'vital-signs' });
      await obs('b0', ['B'], undefined, { cat: 'vital-signs' });
      // C and D are one group: cd holds both.
      await obs('c1', ['C'], '2023-01-01');
      await obs('d1', ['D'], '2023-06-01');
      await obs('cd', ['D', 'C'], '2023-03-01');
      // A group with no effective[x] at all: by last update, the latest first.
      await obs('e1', ['E'], undefined);
      t.clock.advance(1000);
      await obs('e2', ['E'], undefined);
      // Codes of text alone: grouped by their text as written ('Text alone' is another group), after the coded ones.
      await obs('text-only', [], '2024-06-01');
      await obs('text-older', [], '2024-01-01');
      await obs('text-case', [], '2020-01-01', { text: 'Text alone' });
      await obs('a-p2', ['A'], '2025-01-01', { subject: 'p2' });
    });
    afterAll(() => t.close());

    test('max=1 (the default): the most recent of each code group, groups by their first coding', async () => {
      const b = await lastn('patient=p1&category=laboratory,vital-signs');
      expect(matches(b)).toEqual(['a2', 'b2', 'd1', 'e2', 'text-case', 'text-only']);
      expect(b.total).toBe(6);
      expect(b.link.find((l: Json) => l.relation === 'self').url).toContain('Observation/$lastn?patient=p1');
      const self = (await lastn('patient=p1&category=vital-signs&_lastUpdated=ge2000&_count=3')).link.find((l: Json) => l.relation === 'self').url;
      expect(self).toEndWith('Observation/$lastn?patient=p1&category=vital-signs&_lastUpdated=ge2000');
    });

    test('max=3: each group newest first; ties by the last update; no effective[x] last', async () => {
      expect(matches(await lastn('patient=Patient/p1&category=laboratory,vital-signs&max=3'))).toEqual(['a2', 'a3', 'a1', 'b2', 'b1', 'b0', 'd1', 'cd', 'c1', 'e2', 'e1', 'text-case', 'text-only', 'text-older']);
    });

    test('the search parameters narrow it: category, code, date; several subjects; POST', async () => {
      expect(matches(await lastn('patient=p1&category=vital-signs&max=5'))).toEqual(['b2', 'b1', 'b0']);
      // The category's forms (with its system, with a modifier, twice) select the same groups.
      expect(matches(await lastn(`patient=p1&category=${CAT}|vital-signs&max=5`))).toEqual(['b2', 'b1', 'b0']);
      expect(matches(await lastn('patient=p1&category:not=laboratory&max=5'))).toEqual(['b2', 'b1', 'b0']);
      expect(matches(await lastn('patient=p1&category=vital-signs,laboratory&category=vital-signs&max=5'))).toEqual(['b2', 'b1', 'b0']);
      expect(matches(await lastn(`patient=p1&code=${LOINC}|A&max=5`))).toEqual(['a2', 'a3', 'a1']);
      expect(matches(await lastn(`subject=Patient/p1&code=${LOINC}|C&max=5`))).toEqual(['cd', 'c1']);
      expect(matches(await lastn('patient=p1&category=laboratory&date=lt2024-02-15'))).toEqual(['a3', 'd1', 'text-case', 'text-older']);
      expect(matches(await lastn('patient=p1&code:text=alone&max=5'))).toEqual(['text-case', 'text-only', 'text-older']);
      expect(matches(await lastn(`patient=p1,p2&code=${LOINC}|A`))).toEqual(['a2', 'a-p2']);
      const res = await api.post('Observation/$lastn', { resourceType: 'Parameters', parameter: [{ name: 'patient', valueString: 'p1' }, { name: 'category', valueString: 'vital-signs' }, { name: 'max', valueInteger: 2 }] });
      expect(res.status).toBe(200);
      expect(matches((await res.json()) as Json)).toEqual(['b2', 'b1']);
    });

    test('groups are those of the Observations the query matches (R4): an Observation other parameters drop joins no groups', async () => {
      for (const p of ['p3', 'p4']) await api.put200({ resourceType: 'Patient', id: p });
      // r1 holds RA and RC but is outside `date`: the matches (r2, r3) are two groups.
      await obs('r1', ['RA', 'RC'], '2020-01-01', { subject: 'p3' });
      await obs('r2', ['RA'], '2024-01-01', { subject: 'p3' });
      await obs('r3', ['RC'], '2024-02-01', { subject: 'p3' });
      expect(matches(await lastn(`patient=p3&code=${LOINC}|RA,${LOINC}|RC&date=ge2023`))).toEqual(['r2', 'r3']);
      expect(matches(await lastn(`patient=p3&code=${LOINC}|RA,${LOINC}|RC&status=final&_lastUpdated=ge2000&date=ge2023&max=2`))).toEqual(['r2', 'r3']);
      // Without `date`, r1 matches and joins them: one group, its newest.
      expect(matches(await lastn(`patient=p3&code=${LOINC}|RA,${LOINC}|RC`))).toEqual(['r3']);
      expect(matches(await lastn('patient=p3&category=laboratory&date=ge2023'))).toEqual(['r2', 'r3']);
      // Full-text and `_filter` conditions keep the matches as a search does.
      expect(matches(await lastn('patient=p1&category=laboratory&_content=alone&max=5'))).toEqual(['text-case', 'text-only', 'text-older']);
      expect(matches(await lastn('patient=p3&category=laboratory&_filter=date ge 2023-01-01'))).toEqual(['r2', 'r3']);
    });

    test('the groups are those of the matches a scope filter and a patient context keep', async () => {
      // A scope filter drops s1 (vital signs) from the matches: its codes are not joined.
      await obs('s1', ['SA', 'SC'], '2025-06-01', { subject: 'p4', cat: 'vital-signs' });
      await obs('s2', ['SA'], '2024-01-01', { subject: 'p4' });
      await obs('s3', ['SC'], '2024-02-01', { subject: 'p4' });
      const labs = fhirClient(t, await craftToken(t, `system/Observation.rs?category=${CAT}|laboratory`));
      expect(matches(await lastn(`patient=p4&code=${LOINC}|SA,${LOINC}|SC`, labs))).toEqual(['s2', 's3']);
      expect(matches(await lastn(`patient=p4&code=${LOINC}|SA,${LOINC}|SC`))).toEqual(['s1']);
      // A patient-context token asking for another patient: no groups, nothing read.
      const own = fhirClient(t, await craftToken(t, 'patient/Observation.rs', { patient: 'p4' }));
      expect(matches(await lastn(`patient=p3&code=${LOINC}|RA&date=ge2023`, own))).toEqual([]);
      expect(matches(await lastn(`code=${LOINC}|SA,${LOINC}|SC&date=le2024-12-31`, own))).toEqual(['s2', 's3']);
    });

    test('a deleted or changed Observation: the next most recent', async () => {
      await obs('a4', ['A'], '2024-12-01');
      expect(matches(await lastn(`patient=p1&code=${LOINC}|A`))).toEqual(['a4']);
      await api.del('Observation/a4');
      expect(matches(await lastn(`patient=p1&code=${LOINC}|A`))).toEqual(['a2']);
      await obs('a2', ['Z'], '2024-03-01');
      expect(matches(await lastn(`patient=p1&code=${LOINC}|A`))).toEqual(['a3']);
      await obs('a2', ['A'], '2024-03-01');
    });

    test('bounds: at most 1,000 codes over all the subjects of a call, refused before any search; a subject named twice is read once', async () => {
      const many = (patient: string, n: number) => Array.from({ length: n }, (_, i) => ({
        request: { method: 'POST', url: 'Observation' },
        resource: { resourceType: 'Observation', status: 'final', subject: { reference: `Patient/${patient}` }, category: [{ coding: [{ system: CAT, code: 'bulk' }] }], code: { coding: [{ system: LOINC, code: `bulk-${i}` }] }, effectiveDateTime: '2024-01-01' },
      }));
      for (const p of ['m1', 'm2']) {
        await api.put200({ resourceType: 'Patient', id: p });
        expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: many(p, 600) })).status).toBe(200);
      }
      expect((await lastn(`patient=m1&category=${CAT}|bulk`)).total).toBe(600);
      expect((await lastn(`patient=m1,m1,Patient/m1&category=${CAT}|bulk`)).total).toBe(600);
      // 1,200 codes over two subjects: each search is about 10 ms on PostgreSQL; refused before any.
      let searches = 0;
      const resources = t.store.resources;
      const search = resources.search.bind(resources);
      resources.search = (...args: Parameters<typeof search>) => (searches++, search(...args));
      try {
        const outcome = await expectOutcome(await api.get(`Observation/$lastn?patient=m1,m2&category=${CAT}|bulk`), 422, 'too-costly');
        expect(outcome.issue[0].diagnostics).toContain('its subjects have 1200 or more codes');
        expect(searches).toBe(0);
      } finally {
        resources.search = search;
      }
    }, 60_000);

    test('bounds: at most 100 subjects a call, refused before reading any (each costs index reads, with Observations or without)', async () => {
      const resources = t.store.resources;
      const codingPairs = resources.codingPairs.bind(resources);
      let reads = 0;
      resources.codingPairs = (...args: Parameters<typeof codingPairs>) => (reads++, codingPairs(...args));
      try {
        // By POST, a list of subjects is bounded only by the body's size.
        const body = { resourceType: 'Parameters', parameter: [{ name: 'patient', valueString: Array.from({ length: 101 }, (_, i) => `s${i}`).join(',') }, { name: 'category', valueString: 'vital-signs' }] };
        const outcome = await expectOutcome(await api.post('Observation/$lastn', body), 422, 'too-costly');
        expect(outcome.issue[0].expression).toEqual(['patient']);
        expect(reads).toBe(0);
        await expectOutcome(await api.get(`Observation/$lastn?subject=${Array.from({ length: 101 }, (_, i) => `Group/g${i}`).join(',')}&category=vital-signs`), 422, 'too-costly');
        expect(reads).toBe(0);
      } finally {
        resources.codingPairs = codingPairs;
      }
    });

    test('errors: no subject, no category or code, a bad max or subject; search\'s result parameters', async () => {
      expect((await expectOutcome(await api.get('Observation/$lastn?category=laboratory'), 400)).issue[0].expression).toEqual(['patient']);
      expect((await expectOutcome(await api.get('Observation/$lastn?patient=p1'), 400)).issue[0].expression).toEqual(['category']);
      for (const max of ['0', '-1', 'x', '1001']) expect((await expectOutcome(await api.get(`Observation/$lastn?patient=p1&category=laboratory&max=${max}`), 400)).issue[0].expression).toEqual(['max']);
      expect((await expectOutcome(await api.get('Observation/$lastn?subject=p1&category=laboratory'), 400)).issue[0].expression).toEqual(['subject']);
      expect((await expectOutcome(await api.get('Observation/$lastn?patient=Group/g&category=laboratory'), 400)).issue[0].expression).toEqual(['patient']);
      expect((await expectOutcome(await api.get('Observation/$lastn?patient=p1&category=laboratory&_sort=date', { Prefer: 'handling=strict' }), 400)).issue[0].expression).toEqual(['_sort']);
      const lenient = await lastn('patient=p1&category=vital-signs&_count=7');
      expect(matches(lenient)).toEqual(['b2']);
      expect(JSON.stringify(lenient.entry.find((e: Json) => e.search.mode === 'outcome'))).toContain('_count');
      expect((await expectOutcome(await api.get('Observation/$lastn?patient=p1&category=laboratory&bogus=1', { Prefer: 'handling=strict' }), 400)).issue[0].expression).toEqual(['bogus']);
    });

    test('a coding of a system without a code is no code: it forms no group and joins none (`system|` finds every code of the system)', async () => {
      await api.put200({ resourceType: 'Patient', id: 'p5' });
      await obs('sys-k', [], '2020-01-01', { subject: 'p5', extra: { code: { coding: [{ system: 'urn:cs', code: 'k' }] } } });
      // Joins k's group alone: urn:cs2 has no code.
      await obs('sys-kk', [], '2019-01-01', { subject: 'p5', extra: { code: { coding: [{ system: 'urn:cs', code: 'k' }, { system: 'urn:cs2', display: 'Other' }] } } });
      // No coding with a code: a code of text alone, grouped by its text.
      await obs('sys-t', [], '2021-01-01', { subject: 'p5', extra: { code: { coding: [{ system: 'urn:cs' }], text: 'T' } } });
      expect(matches(await lastn('patient=p5&category=laboratory&max=3'))).toEqual(['sys-k', 'sys-kk', 'sys-t']);
      expect(matches(await lastn('patient=p5&category=laboratory'))).toEqual(['sys-k', 'sys-t']);
      expect(matches(await lastn('patient=p5&code=urn:cs|&max=3'))).toEqual(['sys-k', 'sys-kk', 'sys-t']);
      // No code and no text: grouped by its coding's display (after the coded groups), as a coding of a display alone.
      await obs('sys-d', [], '2022-01-01', { subject: 'p5', extra: { code: { coding: [{ system: 'urn:cs3', display: 'Lumbago' }] } } });
      expect(matches(await lastn('patient=p5&category=laboratory'))).toEqual(['sys-k', 'sys-d', 'sys-t']);
      // A display of neither code nor system beside a coded coding is no text group of its own.
      await obs('sys-kd', [], '2018-01-01', { subject: 'p5', extra: { code: { coding: [{ system: 'urn:cs', code: 'k' }, { display: 'Aside' }] } } });
      expect(matches(await lastn('patient=p5&category=laboratory&max=4'))).toEqual(['sys-k', 'sys-kk', 'sys-kd', 'sys-d', 'sys-t']);
    });

    test('access: a search\'s; a patient-context token defaults to its patient and reads no other', async () => {
      const own = fhirClient(t, await craftToken(t, 'patient/Observation.rs', { patient: 'p2' }));
      expect(matches(await lastn('category=laboratory', own))).toEqual(['a-p2']);
      // As `Observation?subject=Patient/p1` for that token: nothing of another patient.
      expect(matches(await lastn('patient=p1&category=laboratory', own))).toEqual([]);
      const labs = fhirClient(t, await craftToken(t, `system/Observation.rs?category=${CAT}|laboratory`));
      expect(matches(await lastn('patient=p1&category=laboratory,vital-signs', labs))).toEqual(['a2', 'd1', 'e2', 'text-case', 'text-only']);
      await expectOutcome(await fhirClient(t, await craftToken(t, 'system/Patient.rs')).get('Observation/$lastn?patient=p1&category=laboratory'), 403);
      await expectOutcome(await fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't1').get('Observation/$lastn?patient=p1&category=laboratory'), 403);
    });
  });
});
