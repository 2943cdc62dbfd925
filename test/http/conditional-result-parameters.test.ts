/**
 * A condition's result parameters (`_summary`, `_elements`, `_cursor`, `_offset`, `_count`) select nothing: a
 * condition matches what its criteria match, whatever they ask of a search's page. `_summary=count` made the
 * condition's search return no rows, so a conditional create wrote a duplicate beside its match (201), a
 * conditional update created a second resource, and a conditional delete deleted nothing. In REST and in a
 * transaction, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

const patient = (value: string, extra: Json = {}): Json => ({ resourceType: 'Patient', identifier: [{ system: 'urn:s', value }], ...extra });
const bundle = (entry: Json[]) => ({ resourceType: 'Bundle', type: 'transaction', entry });
const RESULT_PARAMETERS = ['_summary=count', '_summary=true', '_elements=gender', '_count=0', '_offset=5', '_sort=-_lastUpdated', '_total=accurate'];

await eachStore((kind, fresh) => {
  describe(`a condition's result parameters select nothing (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const found = async (value: string) => ids(await api.search(`Patient?identifier=urn:s|${value}`));
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('a conditional create finds its match, whatever result parameters its condition carries', async () => {
      const stored = await api.create(patient('create'));
      for (const extra of RESULT_PARAMETERS) {
        const condition = `identifier=urn:s|create&${extra}`;
        const rest = await api.post('Patient', patient('create'), { 'If-None-Exist': condition });
        expect([extra, rest.status, ((await rest.json()) as Json).id]).toEqual([extra, 200, stored.id]);
        const tx = (await (await api.post('', bundle([{ request: { method: 'POST', url: 'Patient', ifNoneExist: condition }, resource: patient('create') }]))).json()) as Json;
        expect([extra, tx.entry[0].response.status]).toEqual([extra, '200 OK']);
      }
      expect(await found('create')).toEqual([stored.id]);
    });

    test('a conditional update updates its match, and a conditional delete deletes it', async () => {
      const stored = await api.create(patient('update'));
      const rest = await api.put('Patient?identifier=urn:s|update&_summary=count', patient('update', { active: true }));
      expect([rest.status, ((await rest.json()) as Json).id]).toEqual([200, stored.id]);
      const tx = (await (await api.post('', bundle([{ request: { method: 'PUT', url: 'Patient?identifier=urn:s|update&_summary=count' }, resource: patient('update', { active: false }) }]))).json()) as Json;
      expect(tx.entry[0].response.status).toBe('200 OK');
      expect(await found('update')).toEqual([stored.id]);

      await api.create(patient('delete'));
      expect((await api.del('Patient?identifier=urn:s|delete&_summary=count')).ok).toBe(true);
      expect(await found('delete')).toEqual([]);
      await api.create(patient('tx-delete'));
      expect((await api.post('', bundle([{ request: { method: 'DELETE', url: 'Patient?identifier=urn:s|tx-delete&_summary=count' } }]))).status).toBe(200);
      expect(await found('tx-delete')).toEqual([]);
    });

    test("a conditional reference finds its one match, whatever result parameters it carries", async () => {
      const stored = await api.create(patient('reference'));
      const res = await api.post('', bundle([{
        request: { method: 'POST', url: 'Observation' },
        resource: { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient?identifier=urn:s|reference&_summary=count' } },
      }]));
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).entry[0].resource.subject.reference).toBe(`Patient/${stored.id}`);
    });
  });
});

await eachStore((kind, fresh) => {
  describe(`a transaction's condition past a page of what it deletes (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('a conditional create beside more deleted matches than a search page holds is refused, neither a duplicate nor a 409', async () => {
      const family = { name: [{ family: 'paged' }] };
      const made = (await (await api.post('', bundle(Array.from({ length: 1001 }, (_, i) => ({ request: { method: 'POST', url: 'Patient' }, resource: patient(`paged-${i}`, family) }))))).json()) as Json;
      const created = made.entry.map((e: Json) => e.resource.id as string);
      // The transaction deletes all but one: the page of its condition's search may hold only deleted matches, and the one left
      // past it. The search cannot tell, so the transaction is a 400 naming the entry, and nothing is written.
      const res = await api.post('', bundle([
        ...created.slice(0, 1000).map((id: string) => ({ request: { method: 'DELETE', url: `Patient/${id}` } })),
        { request: { method: 'POST', url: 'Patient', ifNoneExist: 'family=paged' }, resource: patient('paged-new', family) },
      ]));
      const outcome = await expectOutcome(res, 400, 'too-costly');
      expect(outcome.issue[0].diagnostics).toContain("condition 'Patient?family=paged' matches more than 998 resources the transaction deletes");
      // Named where it is written, as the transaction's other refusals of a condition are.
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1000].request.ifNoneExist']);
      expect((await api.search('Patient?family=paged&_summary=count')).total).toBe(1001);
      // A conditional reference beside the same deletes: the reference's element named.
      const referring = await api.post('', bundle([
        ...created.slice(0, 1000).map((id: string) => ({ request: { method: 'DELETE', url: `Patient/${id}` } })),
        { request: { method: 'POST', url: 'Observation' }, resource: { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient?family=paged' } } },
      ]));
      const refused = await expectOutcome(referring, 400, 'too-costly');
      expect(refused.issue[0].expression).toEqual(['Bundle.entry[1000].resource.subject']);
      expect((await api.search('Patient?family=paged&_summary=count')).total).toBe(1001);
      // Fewer deletes fit a page: the 501 matches left are seen, a 412 as any condition matching several.
      const fewer = await api.post('', bundle([
        ...created.slice(0, 500).map((id: string) => ({ request: { method: 'DELETE', url: `Patient/${id}` } })),
        { request: { method: 'POST', url: 'Patient', ifNoneExist: 'family=paged' }, resource: patient('paged-new', family) },
      ]));
      expect(fewer.status).toBe(412);
    }, 120_000);
  });
});
