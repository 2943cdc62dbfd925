/**
 * Searching across types (src/fhir/search-system.ts) on both databases: `GET [base]?...` with and
 * without `_type`, `POST [base]/_search`, and `Patient/{id}/*`. Every answer is checked against the
 * type-level searches it merges: the same resources, in the merged order (type by type by default,
 * by `_lastUpdated` and then type when sorted), through every page; and the 400s and 403s for
 * parameters not common to the types, unknown types, sorts across types and types the token may not
 * search.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { generatePatients } from '../../bench/lib/generator.ts';
import type { TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const DATA = [...generatePatients({ patients: 4, seed: 'system-search' })] as Json[];
const of = (type: string) => DATA.filter((r) => r.resourceType === type);

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`search across types on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    /** When the updates below began. */
    let since = 0;
    const all = (query: string) => matchesOfAllPages(api, query);
    /** A type's resources in the store's order, with their last update (ms). */
    const rowsOf = async (type: string, compartment = ''): Promise<{ type: string; id: string; lu: number }[]> => ((await api.search(`${compartment}${type}?_count=1000`)).entry ?? [])
      .map((e: Json) => ({ type, id: e.resource.id as string, lu: Date.parse(e.resource.meta.lastUpdated) }));

    beforeAll(async () => {
      ({ t, api } = await appOnFresh(target));
      const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: DATA.map((resource) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } })) });
      expect(res.status).toBe(200);
      // Later updates, some at the same instant, so that `_lastUpdated` orders across types with ties.
      t.clock.advance(60_000);
      since = t.clock.now();
      for (const [i, r] of [...of('Patient').slice(0, 2), ...of('Condition').slice(0, 3), ...of('Observation').slice(0, 4)].entries()) {
        if (i % 2 === 0) t.clock.advance(1000);
        await api.put200({ ...r, meta: undefined, id: r.id, language: 'en' });
      }
    });
    afterAll(() => t.close());

    test('by default type after type, each in id order, through every page', async () => {
      const expected = [...(await rowsOf('Patient')), ...(await rowsOf('Condition')), ...(await rowsOf('Observation'))].map((r) => r.id);
      expect(expected.length).toBeGreaterThan(20);
      expect(await all('?_type=Patient,Condition,Observation&_count=7')).toEqual(expected);
      const page = await api.search('?_type=Patient,Condition,Observation&_count=7');
      expect(page.entry.map((e: Json) => e.resource.resourceType)).toEqual(Array(of('Patient').length).fill('Patient').concat(Array(7 - of('Patient').length).fill('Condition')));
      expect(page.entry[0].fullUrl).toBe(`${api.base}/Patient/${page.entry[0].resource.id}`);
      expect(page.link.find((l: Json) => l.relation === 'self').url).toBe(`${api.base}?_type=Patient%2CCondition%2CObservation&_count=7`);
      // `_type` sets the order.
      expect(await all('?_type=Condition,Patient&_count=5')).toEqual([...(await rowsOf('Condition')), ...(await rowsOf('Patient'))].map((r) => r.id));
      // A type the tenant holds nothing of is searched too (and found empty), a deleted resource's type as well.
      expect(await all('?_type=Basic,Patient&_count=5')).toEqual((await rowsOf('Patient')).map((r) => r.id));
      expect((await api.search('?_type=Basic&_summary=count')).total).toBe(0);
      await api.put200({ resourceType: 'Basic', id: 'gone-soon', code: { text: 'x' } });
      expect(await all('?_type=Basic')).toEqual(['gone-soon']);
      expect((await api.del('Basic/gone-soon')).status).toBe(200);
      expect(await all('?_type=Basic,Patient&_count=5')).toEqual((await rowsOf('Patient')).map((r) => r.id));
      // The core CodeSystems and ValueSets, merged into their types' searches, page the same way.
      const core = [...(await all('ValueSet?_count=400')), ...(await all('CodeSystem?_count=400'))];
      expect(core.length).toBeGreaterThan(1000);
      expect(await all('?_type=ValueSet,CodeSystem&_count=400')).toEqual(core);
    });

    for (const descending of [false, true]) {
      test(`sorted by ${descending ? '-' : ''}_lastUpdated, ties by type, through every page`, async () => {
        const types = ['Observation', 'Patient', 'Condition'];
        const rows = (await Promise.all(types.map((type) => rowsOf(type)))).flatMap((list, t) => list.map((r, n) => ({ ...r, t, n })));
        const sign = descending ? -1 : 1;
        rows.sort((a, b) => sign * (a.lu - b.lu || a.t - b.t) || (descending ? (b.id < a.id ? -1 : b.id > a.id ? 1 : 0) : 0) || a.n - b.n);
        const got = await all(`?_type=${types.join(',')}&_sort=${descending ? '-' : ''}_lastUpdated&_count=4`);
        expect(got).toEqual(rows.map((r) => r.id));
        expect(new Set(got).size).toBe(got.length);
      });
    }

    test('without _type: every type the token may search, with parameters every type has', async () => {
      const [patient, condition] = [of('Patient')[0]!, of('Condition')[0]!];
      expect((await all(`?_id=${patient.id},${condition.id}`)).sort()).toEqual([patient.id, condition.id].sort());
      const updated = [...of('Patient').slice(0, 2), ...of('Condition').slice(0, 3), ...of('Observation').slice(0, 4)];
      const recent = await api.search(`?_lastUpdated=ge${new Date(since).toISOString()}&_sort=-_lastUpdated&_count=100`);
      expect(recent.entry.map((e: Json) => e.resource.id).sort()).toEqual(updated.map((r) => r.id).sort());
      expect(recent.total).toBe(updated.length);
      // Every type's count: the core CodeSystems and ValueSets are in theirs, as in a type-level search.
      const counted = await api.search('?_summary=count');
      const core = (await api.search('CodeSystem?_summary=count')).total + (await api.search('ValueSet?_summary=count')).total;
      expect(core).toBeGreaterThan(0);
      expect(counted.total).toBe(DATA.length + core);
      expect(counted.entry ?? []).toEqual([]);
      expect((await api.search('?_type=Patient,Observation&_total=accurate&_count=3')).total).toBe(of('Patient').length + of('Observation').length);
      // POST [base]/_search takes the same parameters as a form.
      const form = await api.call('POST', `${api.base}/_search`, `_id=${patient.id},${condition.id}`, { 'Content-Type': 'application/x-www-form-urlencoded' });
      expect(form.status).toBe(200);
      expect(((await form.json()) as Json).entry.map((e: Json) => e.resource.id).sort()).toEqual([patient.id, condition.id].sort());
    });

    test('type parameters across the types that all have them; a parameter some lack is a 400', async () => {
      const family = of('Patient')[0]!.name[0].family as string;
      const practitioner = of('Practitioner')[0]!;
      const pname = practitioner.name[0].family as string;
      const both = await all(`?_type=Patient,Practitioner&name=${family},${pname}`);
      expect(both.sort()).toEqual([...(await all(`Patient?name=${family},${pname}`)), ...(await all(`Practitioner?name=${family},${pname}`))].sort());
      const lacking = await expectOutcome(await api.get('?name=x'), 400, 'invalid');
      expect(lacking.issue[0].expression).toEqual(['name']);
      expect(lacking.issue[0].details.text).toContain('_type');
      await expectOutcome(await api.get('?_type=Patient,Observation&name=x'), 400, 'invalid');
      await expectOutcome(await api.get('?_type=Patient,Nope'), 400, 'invalid');
      await expectOutcome(await api.get('?_type=Patient,Practitioner&_sort=name'), 400, 'not-supported');
      await expectOutcome(await api.get('?_type=Patient&_cursor=bad'), 400, 'invalid');
      // Unknown everywhere: a warning when lenient, a 400 when strict, as for a type.
      const lenient = await api.search('?_type=Patient,Observation&nonsense=1&_count=1');
      expect(lenient.entry.filter((e: Json) => e.search.mode === 'outcome').length).toBe(1);
      await expectOutcome(await api.get('?_type=Patient,Observation&nonsense=1', { Prefer: 'handling=strict' }), 400);
      // `_filter` and `_has` are compiled for each type.
      expect(await all(`?_type=Patient,Practitioner&_filter=${encodeURIComponent(`name eq "${pname}"`)}`)).toEqual(await all(`Practitioner?name:exact=${pname}`));
    });

    test('_include follows the references of the types it names', async () => {
      const observation = of('Observation')[0]!;
      const condition = of('Condition')[0]!;
      const bundle = await api.search(`?_type=Observation,Condition&_id=${observation.id},${condition.id}&_include=Observation:subject&_include=Condition:encounter`);
      const included = bundle.entry.filter((e: Json) => e.search.mode === 'include').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();
      const wanted = [...new Set([observation.subject.reference, condition.encounter.reference])].sort();
      expect(included).toEqual(wanted);
      // Another source type follows nothing without :iterate: a 400 under strict handling, else a warning.
      await expectOutcome(await api.get('?_type=Observation&_include=Patient:general-practitioner', { Prefer: 'handling=strict' }), 400, 'invalid');
      const lenient = await api.search(`?_type=Observation&_id=${observation.id}&_include=Patient:general-practitioner`);
      expect(lenient.entry.map((e: Json) => e.search.mode)).toEqual(['match', 'outcome']);
    });

    test('_revinclude brings what refers to any type searched; one that can refer to none is a 400 under strict, else a warning', async () => {
      const patient = of('Patient')[0]!;
      const encounter = of('Encounter').find((e) => e.subject.reference === `Patient/${patient.id}`)!;
      const bundle = await api.search(`?_type=Patient,Encounter&_id=${patient.id},${encounter.id}&_revinclude=Observation:encounter`);
      const included = bundle.entry.filter((e: Json) => e.search.mode === 'include').map((e: Json) => e.resource.encounter.reference);
      expect(included.length).toBeGreaterThan(0);
      expect(new Set(included)).toEqual(new Set([`Encounter/${encounter.id}`]));
      // Observation.encounter refers to Encounters alone: on Patients and Conditions it can include nothing.
      const strict = await expectOutcome(await api.get('?_type=Patient,Condition&_revinclude=Observation:encounter', { Prefer: 'handling=strict' }), 400, 'invalid');
      expect(strict.issue[0].expression).toEqual(['_revinclude']);
      expect(strict.issue[0].diagnostics).toContain('cannot include anything on Patient, Condition');
      const lenient = await api.search('?_type=Patient,Condition&_revinclude=Observation:encounter&_count=1');
      const outcome = lenient.entry.find((e: Json) => e.resource.resourceType === 'OperationOutcome');
      expect(outcome.resource.issue[0]).toMatchObject({ severity: 'warning', expression: ['_revinclude'] });
      expect(lenient.entry.some((e: Json) => e.search.mode === 'include')).toBe(false);
    });

    test('the self link holds the parameters used alone: no ignored one, _count as applied, a repeated _sort or _count once', async () => {
      // R4 search.html: "servers SHALL return the parameters that were actually used to process a search".
      const self = (b: Json) => decodeURIComponent(b.link.find((l: Json) => l.relation === 'self').url.slice(api.base.length));
      const warned = (b: Json) => b.entry.filter((e: Json) => e.search.mode === 'outcome').flatMap((e: Json) => e.resource.issue.map((i: Json) => i.expression[0]));
      const patient = of('Patient')[0]!;
      const ignored = await api.search('?_type=Patient,Condition&foo=bar&_revinclude=Observation:encounter&_count=5000&_lastUpdated=gt2000-01-01');
      expect(self(ignored)).toBe('?_type=Patient,Condition&_count=1000&_lastUpdated=gt2000-01-01');
      expect([...new Set(warned(ignored))].sort()).toEqual(['_revinclude', 'foo']);
      expect(self(await api.search(`Patient/${patient.id}/*?foo=bar&_count=3`))).toBe(`/Patient/${patient.id}/*?_count=3`);
      const repeated = await api.search('?_type=Patient&_count=2&_count=3&_sort=_lastUpdated&_sort=-_lastUpdated');
      expect(self(repeated)).toBe('?_type=Patient&_count=2&_sort=_lastUpdated');
      expect(repeated.entry.filter((e: Json) => e.search.mode === 'match')).toHaveLength(2);
      expect(warned(repeated)).toEqual(['_count', '_sort']);
      expect(decodeURIComponent(repeated.link.find((l: Json) => l.relation === 'next').url)).toContain('?_type=Patient&_count=2&_sort=_lastUpdated&_cursor=');
      const type = await api.search('Patient?_sort=family&_sort=-_id&_summary=count&_summary=false&_total=none&_total=accurate');
      expect(self(type)).toBe('/Patient?_sort=family&_summary=count&_total=none');
      expect(warned(type)).toEqual(['_sort', '_summary', '_total']);
      await expectOutcome(await api.get('Patient?_count=1&_count=2', { Prefer: 'handling=strict' }), 400, 'invalid');
      await expectOutcome(await api.get('?_type=Patient&_sort=_lastUpdated&_sort=-_lastUpdated', { Prefer: 'handling=strict' }), 400, 'invalid');
    });

    test('Patient/{id}/* is every compartment type\'s compartment search, merged', async () => {
      const patient = of('Patient')[1]!;
      const compartment = `Patient/${patient.id}/`;
      const types = ['Patient', 'Encounter', 'Condition', 'Observation', 'Procedure', 'MedicationRequest', 'Immunization', 'DiagnosticReport', 'AllergyIntolerance'];
      const expected = (await Promise.all(types.map((type) => rowsOf(type, compartment)))).flat().map((r) => `${r.type}/${r.id}`).sort();
      expect(expected.length).toBeGreaterThan(10);
      const bundle = await api.search(`${compartment}*?_count=1000`);
      expect(bundle.entry.map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort()).toEqual(expected);
      expect(bundle.link[0].url).toBe(`${api.base}/Patient/${patient.id}/*?_count=1000`);
      const paged = await all(`${compartment}*?_type=Observation,Condition&_count=6`);
      expect(paged).toEqual([...(await rowsOf('Observation', compartment)), ...(await rowsOf('Condition', compartment))].map((r) => r.id));
      await expectOutcome(await api.get(`${compartment}*?_type=Practitioner`), 400, 'invalid');
      // The same by POST (`Patient/{id}/{type}/_search`, `Patient/{id}/*/_search`), the form's parameters with the URL's.
      const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
      const posted = await api.call('POST', `${api.base}/${compartment}*/_search?_count=1000`, '_type=Observation,Condition', form);
      expect(posted.status).toBe(200);
      expect(((await posted.json()) as Json).entry.map((e: Json) => e.resource.id)).toEqual(paged);
      const typed = await api.call('POST', `${api.base}/${compartment}Observation/_search`, '_count=1000', form);
      expect(((await typed.json()) as Json).entry.map((e: Json) => e.resource.id)).toEqual((await rowsOf('Observation', compartment)).map((r) => r.id));
      // Practitioner is a compartment too (compartments-other.test.ts); a type that is none is no path.
      const practitioner = await api.call('POST', `${api.base}/Practitioner/x/Observation/_search`, '', form);
      expect(practitioner.status).toBe(200);
      await expectOutcome(await api.call('POST', `${api.base}/Observation/x/Patient/_search`, '', form), 404);
      await expectOutcome(await api.call('POST', `${api.base}/${compartment}Observation/_search`, '{}', { 'Content-Type': 'application/fhir+json' }), 415);
    });

    test('a token sees the types it may search; naming another is a 403', async () => {
      const token = await t.tokenFor('t1', ['system/Patient.rs', 'system/Condition.rs']);
      const narrow = fhirClient(t, token);
      const ids = (await matchesOfAllPages(narrow, '?_count=50')).sort();
      expect(ids).toEqual([...of('Patient'), ...of('Condition')].map((r) => r.id as string).sort());
      await expectOutcome(await narrow.get('?_type=Patient,Observation'), 403);
      const none = fhirClient(t, await t.tokenFor('t1', ['system/Group.c']));
      await expectOutcome(await none.get(''), 403);
    });

    test('the CapabilityStatement says so', async () => {
      const cs = (await (await t.request(`${api.base}/metadata`)).json()) as Json;
      expect(cs.rest[0].interaction.map((i: Json) => i.code)).toContain('search-system');
      expect(cs.rest[0].searchParam.map((p: Json) => p.name)).toEqual(expect.arrayContaining(['_type', '_id', '_lastUpdated', '_filter', '_tag']));
    });
  });
}
