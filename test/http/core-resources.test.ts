/**
 * The FHIR R4 core CodeSystems and ValueSets as every tenant's resources (src/fhir/core-layer.ts,
 * core-search.ts), on both databases: read, vread, instance history, search merged and paged with the
 * tenant's own, shadowing by a stored resource of the same id, deletion refused, left out of exports,
 * and no other type's search touching them.
 */
import { afterAll, afterEach, beforeAll, describe, expect, spyOn, test } from 'bun:test';
import { CoreLayer } from '../../src/fhir/core-layer.ts';
import { indexEntries } from '../../src/fhir/indexer.ts';
import { parseSort } from '../../src/fhir/search-compile.ts';
import { searchOrder, type Key } from '../../src/fhir/search-order.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff, refs } from '../helpers/export.ts';
import { expectOutcome, fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const GENDER_VS = 'http://hl7.org/fhir/ValueSet/administrative-gender';
const GENDER_CS = 'http://hl7.org/fhir/administrative-gender';
const R4_PUBLISHED = '2019-10-30T00:00:00.000Z';
/** Some core ValueSet ids, and stored ones that fall between them in every order tested. */
const CORE_IDS = ['administrative-gender', 'jurisdiction', 'observation-status', 'v2-0203'];
const STORED = [
  { id: 'aa-local', name: 'Aardvark' },
  { id: 'm-local', name: 'Mango' },
  { id: 'zz-local', name: 'Zulu' },
];
const SOME = [...CORE_IDS, ...STORED.map((s) => s.id)];

const localValueSet = (id: string, name: string): Json => ({
  resourceType: 'ValueSet', id, url: `http://example.org/ValueSet/${id}`, name, status: 'active',
  compose: { include: [{ system: GENDER_CS, concept: [{ code: 'male' }] }] },
});

/** Every page of `query` (following `next`), as ids. */
async function walk(api: FhirClient, query: string): Promise<string[]> {
  const out: string[] = [];
  let next: string | undefined = query;
  while (next !== undefined) {
    const bundle = await api.search(next);
    out.push(...ids(bundle));
    next = link(bundle, 'next');
  }
  return out;
}

async function validate(api: FhirClient, code: string): Promise<boolean> {
  const res = await api.get(`ValueSet/$validate-code?url=${GENDER_VS}&system=${GENDER_CS}&code=${code}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as Json).parameter.find((p: Json) => p.name === 'result').valueBoolean;
}

await eachStore((kind, fresh) => {
  describe(`core CodeSystems and ValueSets on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const s of STORED) await api.put200(localValueSet(s.id, s.name));
    });
    afterAll(() => t.close());

    test('read: version 1 of 2019-10-30, as the bundle holds it without the narrative', async () => {
      const res = await api.get('ValueSet/administrative-gender');
      expect(res.status).toBe(200);
      expect(res.headers.get('etag')).toBe('W/"1"');
      expect(res.headers.get('last-modified')).toBe(new Date(R4_PUBLISHED).toUTCString());
      const vs = (await res.json()) as Json;
      expect(vs).toMatchObject({ resourceType: 'ValueSet', id: 'administrative-gender', url: GENDER_VS, version: '4.0.1', status: 'active' });
      expect(vs.meta).toMatchObject({ versionId: '1', lastUpdated: R4_PUBLISHED });
      expect(vs.text).toBeUndefined();
      expect(vs.compose.include[0].system).toBe(GENDER_CS);
      for (const id of ['administrative-gender', 'v3-ActCode', 'v2-0203']) {
        expect(((await (await api.get(`CodeSystem/${id}`)).json()) as Json).id).toBe(id);
      }
    });

    test('vread of version 1 and the instance history; other versions and ids are 404', async () => {
      const read = await (await api.get('ValueSet/administrative-gender')).text();
      const vread = await api.get('ValueSet/administrative-gender/_history/1');
      expect(vread.status).toBe(200);
      expect(await vread.text()).toBe(read);
      await expectOutcome(await api.get('ValueSet/administrative-gender/_history/2'), 404, 'not-found');
      const history = await api.search('ValueSet/administrative-gender/_history');
      expect(history.type).toBe('history');
      expect(history.entry.map((e: Json) => [e.resource.meta.versionId, e.request.method])).toEqual([['1', 'POST']]);
      expect((await api.search('ValueSet/administrative-gender/_history?_since=2020-01-01')).entry ?? []).toEqual([]);
      await expectOutcome(await api.get('ValueSet/no-such-value-set'), 404, 'not-found');
      await expectOutcome(await api.get('CodeSystem/no-such-code-system/_history/1'), 404, 'not-found');
      await expectOutcome(await api.get('ValueSet/no-such-value-set/_history'), 404, 'not-found');
      // Only CodeSystem and ValueSet come from the core.
      await expectOutcome(await api.get('Patient/administrative-gender'), 404, 'not-found');
    });

    test('search by url, url and version, name, title, status, _id, reference; CodeSystem by url and code', async () => {
      const one = await api.search(`ValueSet?url=${GENDER_VS}`);
      expect(one.total).toBe(1);
      expect(one.entry[0]).toMatchObject({ fullUrl: `${api.base}/ValueSet/administrative-gender`, search: { mode: 'match' } });
      expect(one.entry[0].resource.meta.versionId).toBe('1');
      expect(ids(await api.search(`ValueSet?url=${GENDER_VS}&version=4.0.1`))).toEqual(['administrative-gender']);
      expect(ids(await api.search(`ValueSet?url=${GENDER_VS}&version=9.9`))).toEqual([]);
      expect(ids(await api.search('ValueSet?name=AdministrativeGender'))).toEqual(['administrative-gender']);
      expect(ids(await api.search('ValueSet?title:exact=v2 Identifier Type'))).toEqual(['v2-0203']);
      expect(ids(await api.search(`ValueSet?_id=${SOME.join(',')}&status=active`)).sort()).toEqual([...SOME].sort());
      expect(ids(await api.search(`ValueSet?reference=${GENDER_CS}`))).toEqual(['aa-local', 'administrative-gender', 'm-local', 'zz-local']);
      expect(ids(await api.search(`CodeSystem?url=${GENDER_CS}`))).toEqual(['administrative-gender']);
      expect(ids(await api.search(`CodeSystem?code=unknown&system=${GENDER_CS}`))).toEqual(['administrative-gender']);
      expect(ids(await api.search('ValueSet?url:below=http://example.org/'))).toEqual(['aa-local', 'm-local', 'zz-local']);
    });

    test('_include reaches core resources; _revinclude finds what refers to them', async () => {
      await api.put200({ resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' }, focus: [{ reference: 'CodeSystem/v3-ActCode' }] });
      const bundle = await api.search('Observation?_id=o1&_include=Observation:focus');
      expect(bundle.entry.map((e: Json) => [e.search.mode, `${e.resource.resourceType}/${e.resource.id}`])).toEqual([['match', 'Observation/o1'], ['include', 'CodeSystem/v3-ActCode']]);
      const rev = await api.search('CodeSystem?_id=v3-ActCode&_revinclude=Observation:focus');
      expect(rev.entry.map((e: Json) => [e.search.mode, `${e.resource.resourceType}/${e.resource.id}`])).toEqual([['match', 'CodeSystem/v3-ActCode'], ['include', 'Observation/o1']]);
    });

    test('counts: _summary=count, _total and _count=0 add the core to the stored', async () => {
      const all = (await api.search('ValueSet?_summary=count')).total;
      expect(all).toBeGreaterThan(1300);
      expect((await api.search('ValueSet?_count=0')).total).toBe(all);
      expect((await api.search('ValueSet?_count=1&_total=accurate')).total).toBe(all);
      expect((await api.search(`ValueSet?_id=${SOME.join(',')}&_summary=count`)).total).toBe(SOME.length);
      expect((await api.search(`ValueSet?reference=${GENDER_CS}&_total=accurate`)).total).toBe(4);
      expect(await walk(api, 'ValueSet?_count=400&_elements=id')).toHaveLength(all);
    });

    test('paging merges core and stored resources in the sort order, by keyset and by offset', async () => {
      const query = `ValueSet?_id=${SOME.join(',')}`;
      const byId = [...SOME].sort();
      expect(await walk(api, `${query}&_count=2`)).toEqual(byId);
      expect(await walk(api, `${query}&_sort=-_id&_count=3`)).toEqual([...byId].reverse());
      // The stored ones were written in 2026: after the core in time, ties by id (descending here).
      expect(await walk(api, `${query}&_sort=-_lastUpdated&_count=2`)).toEqual(['zz-local', 'm-local', 'aa-local', 'v2-0203', 'observation-status', 'jurisdiction', 'administrative-gender']);
      // Names: AdministrativeGender, Jurisdiction ValueSet, ObservationStatus, v2.0203 and Aardvark, Mango, Zulu.
      const byName = ['aa-local', 'administrative-gender', 'jurisdiction', 'm-local', 'observation-status', 'v2-0203', 'zz-local'];
      expect(await walk(api, `${query}&_sort=name&_count=2`)).toEqual(byName);
      expect(await walk(api, `${query}&_sort=-name&_count=3`)).toEqual([...byName].reverse());
      expect(await walk(api, `${query}&_sort=name&_count=1`)).toEqual(byName);
    });

    test('the in-memory order of merged pages is the database\'s: names with accents, case, astral characters; dates; missing values last', async () => {
      const names = ['éclair', 'Eclair', 'zeta', 'Zeta', 'a\u{1F600}', 'a\uFF21', 'ab', 'a', undefined, 'Éclair'];
      const dates = ['2020', '2019-05-01', '2020-01-01T10:00:00Z', undefined, '2021-02', '2019', '2020-06-30', undefined, '2018', '2020-01'];
      for (const [i, name] of names.entries()) {
        await api.put200({ resourceType: 'ValueSet', id: `order-${i}`, url: `http://example.org/order/${i}`, status: 'draft', ...(name ? { name } : {}), ...(dates[i] ? { date: dates[i] } : {}) });
      }
      const rows = (await api.search('ValueSet?url:below=http://example.org/order/&_count=100')).entry.map((e: Json) => e.resource as Json);
      for (const sort of ['name', '-name', 'date', '-date', 'name,-date', '-_lastUpdated']) {
        const fromDb = ids(await api.search(`ValueSet?url:below=http://example.org/order/&_sort=${sort}&_count=100`));
        const order = searchOrder(parseSort('ValueSet', sort));
        const inMemory = rows
          .map((r: Json) => ({ id: r.id as string, keys: order.keys({ version: { type: 'ValueSet', id: r.id, versionId: 1, lastUpdated: Date.parse(r.meta.lastUpdated), deleted: false, content: '' }, rows: () => indexEntries(r) }) }))
          .sort((a: { keys: Key[] }, b: { keys: Key[] }) => order.compare(a.keys, b.keys))
          .map((r: { id: string }) => r.id);
        expect({ sort, order: inMemory }).toEqual({ sort, order: fromDb });
      }
    });

    test("a stored resource of a core id shadows it for its tenant: read, search, $validate-code; its deletion too", async () => {
      const own = {
        resourceType: 'ValueSet', id: 'administrative-gender', url: GENDER_VS, version: '4.0.1', name: 'LocalGender', title: 'Local gender', status: 'active',
        compose: { include: [{ system: GENDER_CS, concept: [{ code: 'male' }, { code: 'female' }] }] },
      };
      expect(await validate(api, 'other')).toBe(true);
      const put = await api.put('ValueSet/administrative-gender', own);
      expect(put.status).toBe(201);
      // Version 2: version 1 is the core one it replaces.
      expect(put.headers.get('etag')).toBe('W/"2"');
      const read = (await (await api.get('ValueSet/administrative-gender')).json()) as Json;
      expect(read.title).toBe('Local gender');
      expect(read.meta.lastUpdated).not.toBe(R4_PUBLISHED);
      const found = await api.search(`ValueSet?url=${GENDER_VS}`);
      expect(found.entry.map((e: Json) => e.resource.title)).toEqual(['Local gender']);
      expect(ids(await api.search('ValueSet?name=AdministrativeGender'))).toEqual([]);
      expect(ids(await api.search('ValueSet?name=LocalGender'))).toEqual(['administrative-gender']);
      expect(await validate(api, 'other')).toBe(false);
      expect(await validate(api, 'female')).toBe(true);
      // Another tenant still has the core one.
      const other = fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't2');
      expect(((await (await other.get('ValueSet/administrative-gender')).json()) as Json).title).toBe('AdministrativeGender');
      expect(await validate(other, 'other')).toBe(true);

      expect((await api.del('ValueSet/administrative-gender')).status).toBe(200);
      await expectOutcome(await api.get('ValueSet/administrative-gender'), 410);
      expect(ids(await api.search(`ValueSet?url=${GENDER_VS}`))).toEqual([]);
      expect(ids(await api.search('ValueSet?_id=administrative-gender'))).toEqual([]);
      const history = await api.search('ValueSet/administrative-gender/_history');
      expect(history.entry.map((e: Json) => [e.request.method, e.response.etag])).toEqual([['DELETE', 'W/"3"'], ['PUT', 'W/"2"']]);
      // A deleted resource of that id is nothing to delete again; the URL falls back to the core's.
      expect((await api.del('ValueSet/administrative-gender')).status).toBe(200);
      expect(await validate(api, 'other')).toBe(true);
      expect(ids(await other.search(`ValueSet?url=${GENDER_VS}`))).toEqual(['administrative-gender']);
    });

    test("a version id names one content: the tenant's own of a core id is version 2 (PUT, PATCH, conditional update, transaction), so the core's ETag no longer matches", async () => {
      const core = await api.get('CodeSystem/address-type');
      expect(core.headers.get('etag')).toBe('W/"1"');
      const coreText = await core.text();
      const patched = await api.call('PATCH', 'CodeSystem/address-type', [{ op: 'replace', path: '/title', value: 'Local address type' }], { 'Content-Type': 'application/json-patch+json' });
      expect(patched.status).toBe(200);
      expect(patched.headers.get('etag')).toBe('W/"2"');
      // The client that cached the core version (W/"1") is told it changed, not 304.
      const cached = await api.get('CodeSystem/address-type', { 'If-None-Match': 'W/"1"' });
      expect(cached.status).toBe(200);
      expect(((await cached.json()) as Json).title).toBe('Local address type');
      // Version 1 never names the tenant's content (the core one it replaced is not kept).
      const v1 = await api.get('CodeSystem/address-type/_history/1');
      if (v1.status === 200) expect(await v1.text()).toBe(coreText);
      else await expectOutcome(v1, 404, 'not-found');
      expect(((await (await api.get('CodeSystem/address-type/_history/2')).json()) as Json).title).toBe('Local address type');

      const vs = (await (await api.get('ValueSet/address-type')).json()) as Json;
      const put = await api.put('ValueSet/address-type', { ...vs, meta: undefined, title: 'Mine' });
      expect(put.headers.get('etag')).toBe('W/"2"');
      expect((await api.get('ValueSet/address-type', { 'If-None-Match': 'W/"1"' })).status).toBe(200);

      const cond = await api.put('CodeSystem?url=http://hl7.org/fhir/address-use', {
        resourceType: 'CodeSystem', url: 'http://hl7.org/fhir/address-use', status: 'active', content: 'complete', concept: [{ code: 'home' }],
      });
      expect([cond.status, cond.headers.get('etag'), ((await cond.json()) as Json).id]).toEqual([201, 'W/"2"', 'address-use']);

      // In a transaction, with a version-specific reference to the entry's resource.
      const bundle = {
        resourceType: 'Bundle', type: 'transaction', entry: [
          { fullUrl: 'http://other.example.org/fhir/ValueSet/address-use', resource: { resourceType: 'ValueSet', id: 'address-use', status: 'draft' }, request: { method: 'PUT', url: 'ValueSet/address-use' } },
          { resource: { resourceType: 'ValueSet', id: 'refers', status: 'draft', extension: [{ url: 'http://example.org/x', valueReference: { reference: 'http://other.example.org/fhir/ValueSet/address-use/_history/1' } }] }, request: { method: 'PUT', url: 'ValueSet/refers' } },
        ],
      };
      const out = await api.post('', bundle);
      expect(out.status).toBe(200);
      const answer = (await out.json()) as Json;
      expect(answer.entry[0].response.etag).toBe('W/"2"');
      expect(answer.entry[1].resource.extension[0].valueReference.reference).toBe('ValueSet/address-use/_history/2');
      for (const path of ['CodeSystem/address-type', 'ValueSet/address-type', 'CodeSystem/address-use', 'ValueSet/address-use', 'ValueSet/refers']) {
        expect((await api.del(path)).status).toBe(200);
      }
    });

    test("If-Match and If-None-Match on a core resource the tenant never stored judge the version a read gave (W/\"1\"): PUT, PATCH and a transaction's entries agree", async () => {
      const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };
      const retitle = [{ op: 'replace', path: '/title', value: 'Local' }];
      for (const [method, path] of [['PUT', 'CodeSystem/link-type'], ['PATCH', 'ValueSet/link-type'], ['PUT', 'ValueSet/name-use']] as const) {
        const core = await api.get(path);
        expect(core.headers.get('etag')).toBe('W/"1"');
        const body = { ...((await core.json()) as Json), meta: undefined, title: 'Local' };
        const send = (headers: Record<string, string>) => (method === 'PUT' ? api.put(path, body, headers) : api.call('PATCH', path, retitle, { ...JSON_PATCH, ...headers }));
        await expectOutcome(await send({ 'If-Match': 'W/"2"' }), 412, 'conflict');
        await expectOutcome(await send({ 'If-None-Match': '*' }), 412);
        await expectOutcome(await send({ 'If-None-Match': 'W/"1"' }), 412);
        const res = await send({ 'If-Match': 'W/"1"' });
        expect([method, path, res.status, res.headers.get('etag')]).toEqual([method, path, method === 'PUT' ? 201 : 200, 'W/"2"']);
        // The ETag the client had no longer matches: the tenant's own version 2 is current.
        await expectOutcome(await send({ 'If-Match': 'W/"1"' }), 412, 'conflict');
      }
      // In a transaction, request.ifMatch likewise.
      const entry = (method: string, url: string, ifMatch: string, resource?: Json) => ({ ...(resource ? { resource } : {}), request: { method, url, ifMatch } });
      const vs = { ...((await (await api.get('ValueSet/contact-point-use')).json()) as Json), meta: undefined, title: 'Local' };
      await expectOutcome(await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [entry('PUT', 'ValueSet/contact-point-use', 'W/"2"', vs)] }), 412);
      const ok = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [entry('PUT', 'ValueSet/contact-point-use', 'W/"1"', vs)] });
      expect(ok.status).toBe(200);
      expect(((await ok.json()) as Json).entry[0].response.etag).toBe('W/"2"');
      // A core resource is never deleted, whatever If-Match says.
      await expectOutcome(await api.del('CodeSystem/contact-point-use', { 'If-Match': 'W/"1"' }), 409, 'conflict');
      for (const path of ['CodeSystem/link-type', 'ValueSet/link-type', 'ValueSet/name-use', 'ValueSet/contact-point-use']) expect((await api.del(path)).status).toBe(200);
    });

    test('deleting a core resource the tenant never stored is 409; conditionally and in a transaction too', async () => {
      const outcome = await expectOutcome(await api.del('CodeSystem/administrative-gender'), 409, 'conflict');
      expect(outcome.issue[0].details.text).toContain('part of the built-in FHIR R4 terminology');
      await expectOutcome(await api.del(`CodeSystem?url=${GENDER_CS}`), 409, 'conflict');
      const bundle = { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: 'CodeSystem/v2-0203' } }] };
      await expectOutcome(await api.post('', bundle), 409, 'conflict');
      expect((await api.get('CodeSystem/administrative-gender')).status).toBe(200);
      expect((await api.get('CodeSystem/v2-0203')).status).toBe(200);
      expect((await api.del('CodeSystem/no-such-code-system')).status).toBe(200);
    });

    test('conditional interactions see the core: an update stores the tenant\'s own of that id, a create finds it; If-Match judges the core\'s version; a transaction reads the core', async () => {
      const res = await api.put(`CodeSystem?url=http://terminology.hl7.org/CodeSystem/v2-0203`, {
        resourceType: 'CodeSystem', url: 'http://terminology.hl7.org/CodeSystem/v2-0203', status: 'active', content: 'complete', concept: [{ code: 'MR' }],
      });
      expect(res.status).toBe(201);
      expect(((await res.json()) as Json).id).toBe('v2-0203');
      const read = (await (await api.get('CodeSystem/v2-0203')).json()) as Json;
      expect(read.concept).toEqual([{ code: 'MR' }]);
      const ifNoneExist = await api.post('ValueSet', localValueSet('ignored', 'Ignored'), { 'If-None-Exist': 'url=http://hl7.org/fhir/ValueSet/jurisdiction' });
      expect(ifNoneExist.status).toBe(200);
      expect(((await ifNoneExist.json()) as Json).id).toBe('jurisdiction');
      const ifMatch = await api.put('ValueSet/observation-status', { resourceType: 'ValueSet', id: 'observation-status', status: 'draft' }, { 'If-Match': 'W/"2"' });
      await expectOutcome(ifMatch, 412);
      const bundle = { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'GET', url: 'CodeSystem/v3-ActCode' } }] };
      const out = await api.post('', bundle);
      expect(out.status).toBe(200);
      expect(((await out.json()) as Json).entry[0].resource.id).toBe('v3-ActCode');
    });

    test('bulk export leaves the core out: it is not the tenant\'s data', async () => {
      const token = await t.token();
      t.clock.advance(1000);
      const status = await kickOff(t, token, '/$export?_type=ValueSet,CodeSystem');
      const manifest = await finish(t, token, status);
      const files = await download(t, token, manifest.output);
      // The tenant's own: its ValueSets and the CodeSystem stored over v2-0203 by the conditional update.
      expect(refs(files).filter((r) => !r.startsWith('ValueSet/order-'))).toEqual(['CodeSystem/v2-0203', 'ValueSet/aa-local', 'ValueSet/m-local', 'ValueSet/zz-local']);
      expect(Object.values(files).flat().every((r) => (r.meta as Json).lastUpdated !== R4_PUBLISHED)).toBe(true);
    });
  });
});

describe('other types never touch the core', () => {
  let t: TestApp;
  let api: FhirClient;
  beforeAll(async () => {
    t = await createTestApp();
    api = fhirClient(t, await t.token());
    await api.put200({ resourceType: 'Patient', id: 'p1', gender: 'female' });
  });
  afterAll(() => t.close());
  const spies: { mockRestore(): void }[] = [];
  afterEach(() => spies.splice(0).forEach((s) => s.mockRestore()));

  test('a Patient search, count, read and 404 read neither the core layer nor the tenant\'s shadowing rows', async () => {
    const search = spyOn(CoreLayer.prototype, 'search');
    const read = spyOn(CoreLayer.prototype, 'read');
    const present = spyOn(t.store.resources, 'present');
    spies.push(search, read, present);
    expect(ids(await api.search('Patient?gender=female'))).toEqual(['p1']);
    expect((await api.search('Patient?_summary=count')).total).toBe(1);
    expect((await api.search('Patient?_count=1&_total=accurate&_sort=birthdate')).total).toBe(1);
    expect((await api.get('Patient/p1')).status).toBe(200);
    expect((await api.get('Patient/nope')).status).toBe(404);
    expect((await api.get('Patient/p1/_history/1')).status).toBe(200);
    expect(search).not.toHaveBeenCalled();
    expect(read).not.toHaveBeenCalled();
    expect(present).not.toHaveBeenCalled();
    expect(ids(await api.search(`ValueSet?url=${GENDER_VS}`))).toEqual(['administrative-gender']);
    expect(search).toHaveBeenCalled();
    expect(present).toHaveBeenCalled();
  });
});
