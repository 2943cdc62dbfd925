/**
 * A `_typeFilter`'s chains and `_has` judged as of the export's transactionTime: the resources on their
 * other side changed after it (during the export) count as they were then, not as they are now.
 * Every line of an export is the resource's version as of transactionTime, selected as of it. On both databases.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import type { ResourceRepo, Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, testClock, type TestApp } from '../helpers/app.ts';
import { download, eachStore, kickOff, patient, put, remove, runExports, type Manifest } from '../helpers/export.ts';
import { firstVersions } from '../helpers/versions.ts';

const coded = (id: string, patientId: string, code: string, status = 'final') => ({
  resourceType: 'Observation', id, status, code: { coding: [{ system: 'http://loinc.org', code }] }, subject: { reference: `Patient/${patientId}` },
});
const typeFilter = (f: string) => `_typeFilter=${encodeURIComponent(f)}`;

await eachStore((kind, fresh) => {
  describe(`_typeFilter chains and _has as of transactionTime (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeEach(async () => {
      t = await createTestApp({ clock: testClock(), store: await fresh() });
      token = await t.token();
      await put(t, patient('p1', { gender: 'male' }));
      await put(t, patient('p2', { gender: 'female' }));
      await put(t, patient('p3', { gender: 'female' }));
      await put(t, coded('o1', 'p1', '1234-5'));
      await put(t, coded('o2', 'p2', '1234-5'));
      await put(t, coded('o3', 'p3', '9999-9'));
      await put(t, { resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: ['p1', 'p2', 'p3'].map((p) => ({ entity: { reference: `Patient/${p}` } })) });
      t.clock.advance(1000);
    });
    afterEach(() => t.close());

    /** Kicks off each export, then changes the data, then runs them: `Type/id/versionId` of every line, per export. */
    async function exportedAcross(queries: string[], change: () => Promise<void>): Promise<string[][]> {
      const urls = [];
      for (const q of queries) urls.push(await kickOff(t, token, q));
      t.clock.advance(1000);
      await change();
      expect(await runExports(t)).toEqual(urls.map(() => 'completed'));
      const out: string[][] = [];
      for (const url of urls) {
        const manifest = (await (await t.request(url, fhirInit(token))).json()) as Manifest;
        const files = await download(t, token, manifest.output);
        out.push(Object.values(files).flat().map((r) => `${r.resourceType}/${r.id}/${(r.meta as { versionId: string }).versionId}`).sort());
      }
      return out;
    }

    test('a chain reads its targets as they were: a Patient changed since neither joins nor leaves', async () => {
      const chain = typeFilter('Observation?patient.gender=male');
      const [system, group] = await exportedAcross([`/$export?_type=Observation&${chain}`, `/Group/g1/$export?_type=Observation&${chain}`], async () => {
        await put(t, patient('p1', { gender: 'female' }));
        await put(t, patient('p2', { gender: 'male' }));
        // o2 itself changed too: judged in code on its version as of transactionTime.
        await put(t, coded('o2', 'p2', '1234-5', 'amended'));
      });
      expect(system).toEqual(['Observation/o1/1']);
      expect(group).toEqual(['Observation/o1/1']);
    });

    test('_has reads the referring resources as they were: one changed or deleted since still counts, one changed into a match does not', async () => {
      const has = typeFilter('Patient?_has:Observation:patient:code=1234-5');
      const [system, group] = await exportedAcross([`/$export?_type=Patient&${has}`, `/Group/g1/$export?_type=Patient&${has}`], async () => {
        await put(t, coded('o1', 'p1', '9999-9'));
        await remove(t, 'Observation', 'o2');
        await put(t, coded('o3', 'p3', '1234-5'));
      });
      expect(system).toEqual(['Patient/p1/1', 'Patient/p2/1']);
      expect(group).toEqual(['Patient/p1/1', 'Patient/p2/1']);
    });

    test('_list reads the List as it was: its entries changed since count as they were', async () => {
      const list = (ids: string[]) => ({ resourceType: 'List', id: 'l1', status: 'current', mode: 'working', entry: ids.map((id) => ({ item: { reference: `Patient/${id}` } })) });
      await put(t, list(['p1', 'p2']));
      t.clock.advance(1000);
      const [listed] = await exportedAcross([`/$export?_type=Patient&${typeFilter('Patient?_list=l1')}`], async () => {
        await put(t, list(['p3']));
      });
      expect(listed).toEqual(['Patient/p1/1', 'Patient/p2/1']);
    });

    test('a chain within a chain, and a filter ORing a chain with a code, hold as of transactionTime too', async () => {
      await put(t, { resourceType: 'Organization', id: 'org1', name: 'North' });
      await put(t, patient('p1', { gender: 'male', managingOrganization: { reference: 'Organization/org1' } }));
      t.clock.advance(1000);
      const nested = typeFilter('Observation?patient.organization.name=North');
      const ored = `${typeFilter('Observation?patient.gender=male')}&${typeFilter('Observation?code=9999-9')}`;
      const [a, b] = await exportedAcross([`/$export?_type=Observation&${nested}`, `/$export?_type=Observation&${ored}`], async () => {
        await put(t, { resourceType: 'Organization', id: 'org1', name: 'South' });
        await put(t, patient('p1', { gender: 'female', managingOrganization: { reference: 'Organization/org1' } }));
      });
      expect(a).toEqual(['Observation/o1/1']);
      expect(b).toEqual(['Observation/o1/1', 'Observation/o3/1']);
    });

    test('the targets changed since are read past a page of history: one changed before 1,500 others still counts as it was', async () => {
      const chain = typeFilter('Observation?patient.gender=male');
      const [system] = await exportedAcross([`/$export?_type=Observation&${chain}`], async () => {
        await put(t, patient('p1', { gender: 'female' }));
        t.clock.advance(1000);
        const created = Array.from({ length: 1500 }, (_, i) => patient(`late${i}`, { gender: 'male' }));
        await t.store.resources.write('t1', (w) => w.insertNew(firstVersions(created, t.clock.now())));
      });
      expect(system).toEqual(['Observation/o1/1']);
    });

    test('past 10,000 versions of the targets written since, the chain and _has are judged as they are now, and the error file says so', async () => {
      const chain = `/$export?_type=Observation&${typeFilter('Observation?patient.gender=male')}`;
      const has = `/$export?_type=Patient&${typeFilter('Patient?_has:Observation:patient:code=1234-5')}`;
      const urls = [await kickOff(t, token, chain), await kickOff(t, token, has)];
      t.clock.advance(1000);
      await put(t, patient('p1', { gender: 'female' }));
      await put(t, coded('o1', 'p1', '9999-9'));
      const late = (type: string, make: (i: number) => Record<string, unknown>) =>
        t.store.resources.write('t1', (w) => w.insertNew(firstVersions(Array.from({ length: 10_001 }, (_, i) => make(i)), t.clock.now())));
      await late('Patient', (i) => patient(`late${i}`, { gender: 'female' }));
      await late('Observation', (i) => coded(`late${i}`, 'p3', '9999-9'));
      expect(await runExports(t)).toEqual(['completed', 'completed']);
      const warnings: unknown[] = [];
      for (const url of urls) {
        const manifest = (await (await t.request(url, fhirInit(token))).json()) as Manifest;
        const outcomes = Object.values(await download(t, token, manifest.error)).flat();
        warnings.push(...outcomes.flatMap((o) => (o.issue as { severity: string; code: string; expression?: string[]; diagnostics: string }[])
          .map((i) => ({ severity: i.severity, code: i.code, expression: i.expression, names: /more than 10000 versions of (Patient|Observation)/.exec(i.diagnostics)?.[1] }))));
      }
      expect(warnings).toEqual([
        { severity: 'warning', code: 'too-costly', expression: ['_typeFilter'], names: 'Patient' },
        { severity: 'warning', code: 'too-costly', expression: ['_typeFilter'], names: 'Observation' },
      ]);
    }, 120_000);

    test('a reference :below in _typeFilter walks the hierarchy as of transactionTime: a Location moved under it after T, before the walk, is not in it', async () => {
      const location = (id: string, partOf?: string) => ({ resourceType: 'Location', id, name: id, ...(partOf && { partOf: { reference: `Location/${partOf}` } }) });
      const encounter = (id: string, at: string) => ({ resourceType: 'Encounter', id, status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, location: [{ location: { reference: `Location/${at}` } }] });
      await put(t, location('l1'));
      await put(t, location('l2', 'l1'));
      await put(t, location('l3'));
      await put(t, location('l4', 'l1'));
      for (const [id, at] of [['e2', 'l2'], ['e3', 'l3'], ['e4', 'l4']]) await put(t, encounter(id!, at!));
      t.clock.advance(1000);
      // Between the kick-off's transactionTime and its walk of the hierarchy: l3 moves under l1, l4 leaves it.
      const resources = t.store.resources;
      const search = resources.search;
      let fired = false;
      resources.search = async (tenant, query) => {
        if (!fired && query.type === 'Location') {
          fired = true;
          t.clock.advance(10);
          await put(t, location('l3', 'l1'));
          await put(t, location('l4'));
        }
        return search.call(resources, tenant, query);
      };
      let url: string;
      try {
        url = await kickOff(t, token, `/$export?_type=Encounter&${typeFilter('Encounter?location:below=Location/l1')}`);
      } finally {
        resources.search = search;
      }
      expect(fired).toBe(true);
      expect(await runExports(t)).toEqual(['completed']);
      const manifest = (await (await t.request(url, fhirInit(token))).json()) as Manifest;
      const lines = Object.values(await download(t, token, manifest.output)).flat().map((r) => `${r.resourceType}/${r.id}`).sort();
      expect(lines).toEqual(['Encounter/e2', 'Encounter/e4']);
    });

    test('past 10,000 versions of the walked type written between transactionTime and the walk, the kick-off is a 503, lenient or not, never an unfiltered export', async () => {
      await put(t, { resourceType: 'Location', id: 'l1', name: 'l1' });
      t.clock.advance(1000);
      const resources = t.store.resources;
      const search = resources.search;
      let fired = false;
      resources.search = async (tenant, query) => {
        if (!fired && query.type === 'Location') {
          fired = true;
          t.clock.advance(10);
          const created = Array.from({ length: 10_001 }, (_, i) => ({ resourceType: 'Location', id: `late${i}`, name: 'late' }));
          await t.store.resources.write('t1', (w) => w.insertNew(firstVersions(created, t.clock.now())));
        }
        return search.call(resources, tenant, query);
      };
      try {
        const res = await t.request(`${t.fhir()}/$export?_type=Encounter&${typeFilter('Encounter?location:below=Location/l1')}`, fhirInit(token, 'GET', undefined, { Prefer: 'respond-async, handling=lenient' }));
        expect(res.status).toBe(503);
        expect(((await res.json()) as { issue: { expression?: string[] }[] }).issue[0]!.expression).toEqual(['_typeFilter']);
      } finally {
        resources.search = search;
      }
    }, 120_000);

    test('chains and _has through canonical references read the targets\' urls as they were', async () => {
      const questionnaire = (id: string, url: string, name: string) => ({ resourceType: 'Questionnaire', id, url, name, status: 'active' });
      const response = (id: string, url: string, status: string) => ({ resourceType: 'QuestionnaireResponse', id, questionnaire: url, status });
      await put(t, questionnaire('q1', 'http://example.org/q1', 'intake'));
      await put(t, questionnaire('q2', 'http://example.org/q2', 'other'));
      await put(t, response('r1', 'http://example.org/q1', 'completed'));
      await put(t, response('r2', 'http://example.org/q2', 'in-progress'));
      t.clock.advance(1000);
      const chain = `/$export?_type=QuestionnaireResponse&${typeFilter('QuestionnaireResponse?questionnaire.name=intake')}`;
      const has = `/$export?_type=Questionnaire&${typeFilter('Questionnaire?_has:QuestionnaireResponse:questionnaire:status=completed')}`;
      const [chained, had] = await exportedAcross([chain, has], async () => {
        // q1 moves to another url (r1 names it no more), q2 takes the name; r1 leaves the status, r2 takes it.
        await put(t, questionnaire('q1', 'http://example.org/q1-moved', 'intake'));
        await put(t, questionnaire('q2', 'http://example.org/q2', 'intake'));
        await put(t, response('r1', 'http://example.org/q1', 'in-progress'));
        await put(t, response('r2', 'http://example.org/q2', 'completed'));
      });
      expect({ chained, had }).toEqual({ chained: ['QuestionnaireResponse/r1/1'], had: ['Questionnaire/q1/1'] });
    });

    test('a target changed between two pages of the export counts as it was on every page', async () => {
      for (let i = 0; i < 6; i++) await put(t, coded(`q${i}`, i % 2 ? 'p1' : 'p2', '1234-5'));
      t.clock.advance(1000);
      const url = await kickOff(t, token, `/$export?_type=Observation&${typeFilter('Observation?patient.gender=male')}`);
      t.clock.advance(1000);
      // After the first page of Observations: p1 leaves the filter, p2 joins it (as they are now).
      let pages = 0;
      const resources: ResourceRepo = Object.create(t.store.resources);
      resources.snapshot = async (tenant, q) => {
        const page = await t.store.resources.snapshot(tenant, q);
        if (q.type === 'Observation' && ++pages === 1) {
          await put(t, patient('p1', { gender: 'female' }));
          await put(t, patient('p2', { gender: 'male' }));
        }
        return page;
      };
      const store = new Proxy(t.store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) }) as Store;
      expect(await runExports(t, { store, pageSize: 2 })).toEqual(['completed']);
      expect(pages).toBeGreaterThan(2);
      const manifest = (await (await t.request(url, fhirInit(token))).json()) as Manifest;
      const lines = Object.values(await download(t, token, manifest.output)).flat().map((r) => `${r.resourceType}/${r.id}`).sort();
      expect(lines).toEqual(['Observation/o1', 'Observation/q1', 'Observation/q3', 'Observation/q5']);
    });
  });
});
