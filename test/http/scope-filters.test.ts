/**
 * SMART v2 scope filters (`patient/Observation.rs?category=laboratory`): granted as requested when a
 * registered scope implies them, and enforced with the search engine on search, read, history,
 * `_include`, writes and bulk export.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { isImpliedBy, parseResourceScope } from '../../src/auth/scopes.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, finish, kickOff, refs } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
let t: TestApp;
let admin: FhirClient;
let lab: FhirClient;

const obs = (id: string, category: string, status = 'final'): Json => ({
  resourceType: 'Observation', id, status, subject: { reference: 'Patient/p1' },
  category: [{ coding: [{ system: CAT, code: category }] }], code: { text: id },
});

beforeAll(async () => {
  t = await createTestApp();
  admin = fhirClient(t, await t.token());
  await admin.put200({ resourceType: 'Patient', id: 'p1' });
  for (const o of [obs('lab1', 'laboratory'), obs('lab2', 'laboratory', 'preliminary'), obs('vs1', 'vital-signs')]) await admin.put200(o);
  const token = await t.tokenFor('t1', ['system/Observation.rs', 'system/Patient.rs'], 'system/Observation.rs?category=laboratory system/Patient.rs');
  lab = fhirClient(t, token);
});
afterAll(() => t.close());

describe('scope filters', () => {
  test('parsing and implication: a filter is a v2 scope on one type with a valid search', () => {
    expect(parseResourceScope('patient/Observation.rs?category=laboratory')).toMatchObject({ type: 'Observation', query: 'category=laboratory' });
    expect(parseResourceScope('patient/Observation.read?category=laboratory')).toBeNull();
    expect(parseResourceScope('patient/*.rs?category=laboratory')).toBeNull();
    expect(parseResourceScope('patient/Observation.rs?nonsense=1')).toBeNull();
    expect(parseResourceScope('patient/Observation.rs?date=yesterday')).toBeNull();
    // A parameter with no value, which a search ignores, would widen the grant to what it was to narrow.
    expect(parseResourceScope('patient/Observation.rs?category=')).toBeNull();
    expect(parseResourceScope('patient/Observation.rs?category=laboratory&status=')).toBeNull();
    expect(isImpliedBy('patient/Observation.rs?category=laboratory', ['patient/*.read'])).toBe(true);
    expect(isImpliedBy('patient/Observation.rs', ['patient/Observation.rs?category=laboratory'])).toBe(false);
    expect(isImpliedBy('patient/Observation.rs?status=final', ['patient/Observation.rs?category=laboratory'])).toBe(false);
  });

  test('search returns only what the filter admits, ANDed with the query', async () => {
    const ids = async (q: string) => ((await lab.search(q)).entry ?? []).map((e: Json) => e.resource.id).sort();
    expect(await ids('Observation')).toEqual(['lab1', 'lab2']);
    expect(await ids('Observation?status=final')).toEqual(['lab1']);
    expect(await ids('Observation?category=vital-signs')).toEqual([]);
    expect(await ids('Patient?_id=p1&_revinclude=Observation:patient')).toEqual(['lab1', 'lab2', 'p1']);
  });

  test('read and history of a resource outside the filter are 403', async () => {
    expect((await lab.get('Observation/lab1')).status).toBe(200);
    await expectOutcome(await lab.get('Observation/vs1'), 403);
    await expectOutcome(await lab.get('Observation/vs1/_history'), 403);
    await expectOutcome(await lab.get('Observation/vs1/_history/1'), 403);
  });

  test('type history shows the versions the filter admits, each on its own content, paged', async () => {
    // hx1: laboratory, then vital signs (v2 hidden); hx2: laboratory, deleted (both shown); hx3: vital signs, deleted (neither).
    await admin.put200(obs('hx1', 'laboratory'));
    await admin.put200(obs('hx1', 'vital-signs'));
    await admin.put200(obs('hx2', 'laboratory'));
    expect((await admin.del('Observation/hx2')).status).toBe(200);
    await admin.put200(obs('hx3', 'vital-signs'));
    expect((await admin.del('Observation/hx3')).status).toBe(200);
    const versions = (b: Json) => (b.entry ?? []).map((e: Json) => `${e.fullUrl.split('/').at(-1)}@${e.request.method === 'DELETE' ? 'deleted' : e.resource.meta.versionId}`);
    const all = await lab.search('Observation/_history');
    expect(versions(all).sort()).toEqual(['hx1@1', 'hx2@1', 'hx2@deleted', 'lab1@1', 'lab2@1']);
    // A page at a time: the same versions, whatever the hidden ones between them.
    const paged: string[] = [];
    for (let url: string | undefined = 'Observation/_history?_count=1'; url;) {
      const page = await lab.search(url);
      expect((page.entry ?? []).length).toBeLessThanOrEqual(1);
      paged.push(...versions(page));
      url = page.link?.find((l: Json) => l.relation === 'next')?.url;
    }
    expect(paged).toEqual(versions(all));
    // The token without a filter sees every version.
    expect(versions(await admin.search('Observation/_history')).length).toBe(9);
    // Later exports' transaction time after these writes (the test clock stands still otherwise).
    t.clock.advance(1000);
  });

  test('a filtered write scope admits only resources meeting it', async () => {
    const token = await t.tokenFor('t1', ['system/Observation.cruds?category=laboratory']);
    const w = fhirClient(t, token);
    expect((await w.put('Observation/lab3', obs('lab3', 'laboratory'))).status).toBe(201);
    await expectOutcome(await w.put('Observation/vs2', obs('vs2', 'vital-signs')), 403);
    await expectOutcome(await w.put('Observation/lab3', obs('lab3', 'vital-signs')), 403);
  });

  test('bulk export of a filtered type exports what the filter admits, ANDed with _typeFilter', async () => {
    const c = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Observation.rs', 'system/Patient.rs', 'system/Group.rs'] });
    const token = await t.token('system/Observation.rs?category=laboratory system/Patient.rs system/Group.rs', c.client.clientId, c.clientSecret!);
    const exported = async (query: string) => {
      const manifest = await finish(t, token, await kickOff(t, token, `/$export?${query}`, { Prefer: 'respond-async' }));
      return refs(await download(t, token, manifest.output));
    };
    // What the token's own searches find (the earlier tests' writes included).
    const api = fhirClient(t, token);
    const found = async (query: string) => ((await api.search(query)).entry ?? []).map((e: Json) => `Observation/${e.resource.id}`).sort();
    const labs = await found('Observation');
    expect(labs).toContain('Observation/lab1');
    expect(labs).not.toContain('Observation/vs1');
    expect(await exported('_type=Observation,Patient')).toEqual([...labs, 'Patient/p1']);
    // Every type the token may read, unfiltered ones whole.
    expect(await exported('')).toEqual([...labs, 'Patient/p1']);
    expect(await exported(`_type=Observation&_typeFilter=${encodeURIComponent('Observation?status=final')}`)).toEqual(await found('Observation?status=final'));
    // ORed queries, each ANDed with the filter: the vital signs stay out.
    const either = ['Observation?status=preliminary', 'Observation?category=vital-signs'].map(encodeURIComponent).join(',');
    expect(await exported(`_type=Observation&_typeFilter=${either}`)).toEqual(['Observation/lab2']);
    await admin.put200({ resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p1' } }] });
    const manifest = await finish(t, token, await kickOff(t, token, '/Group/g1/$export?_type=Observation', { Prefer: 'respond-async' }));
    expect(refs(await download(t, token, manifest.output))).toEqual(labs);
    // The Group itself must meet a filter on Group.
    const animals = await t.token('system/Observation.rs system/Group.rs?type=animal', c.client.clientId, c.clientSecret!);
    await expectOutcome(await t.request(t.fhir() + '/Group/g1/$export?_type=Observation', fhirInit(animals, 'GET', undefined, { Prefer: 'respond-async' })), 403);
  });

  test("a filtered export's files are downloaded under the same filter, or none", async () => {
    const c = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Observation.rs'] });
    const token = (scope: string) => t.token(scope, c.client.clientId, c.clientSecret!);
    const labToken = await token('system/Observation.rs?category=laboratory');
    const manifest = await finish(t, labToken, await kickOff(t, labToken, '/$export?_type=Observation', { Prefer: 'respond-async' }));
    const url = manifest.output[0]!.url;
    expect((await t.request(url, fhirInit(await token('system/Observation.rs?category=laboratory')))).status).toBe(200);
    expect((await t.request(url, fhirInit(await token('system/Observation.rs')))).status).toBe(200);
    await expectOutcome(await t.request(url, fhirInit(await token('system/Observation.rs?category=vital-signs'))), 403);
  });

  test(':in and a reference :below in a scope filter are completed once for the token, as search completes them', async () => {
    expect(parseResourceScope(`system/Observation.rs?category:in=${encodeURIComponent('http://example.org/fhir/ValueSet/lab')}`)).toMatchObject({ type: 'Observation' });
    await admin.put200({
      resourceType: 'ValueSet', id: 'lab-cats', status: 'active', url: 'http://example.org/fhir/ValueSet/lab',
      compose: { include: [{ system: CAT, concept: [{ code: 'laboratory' }] }] },
    });
    const scoped = async (filter: string) =>
      fhirClient(t, await t.tokenFor('t1', ['system/Observation.rs', 'system/Patient.rs', 'system/Location.rs'], `system/Observation.rs?${filter} system/Patient.rs system/Location.rs`));
    const ids = async (c: FhirClient, q: string) => ((await c.search(q)).entry ?? []).map((e: Json) => e.resource.id).sort();
    const labs = await ids(admin, 'Observation?category=laboratory');
    expect(labs).toContain('lab1');
    const inLab = await scoped(`category:in=${encodeURIComponent('http://example.org/fhir/ValueSet/lab')}`);
    expect(await ids(inLab, 'Observation')).toEqual(labs);
    expect((await inLab.get('Observation/lab1')).status).toBe(200);
    await expectOutcome(await inLab.get('Observation/vs1'), 403);
    const notInLab = await scoped(`category:not-in=${encodeURIComponent('http://example.org/fhir/ValueSet/lab')}`);
    expect(await ids(notInLab, 'Observation')).toEqual(await ids(admin, 'Observation?category:not=laboratory'));
    expect(await ids(notInLab, 'Observation')).toContain('vs1');
    // A ValueSet the server does not know: the scope grants nothing.
    const unknown = await scoped(`category:in=${encodeURIComponent('http://example.org/fhir/ValueSet/nope')}`);
    expect(await ids(unknown, 'Observation')).toEqual([]);
    await expectOutcome(await unknown.get('Observation/lab1'), 403);
    // A hierarchy: the Observations of Encounters at a ward of the hospital.
    await admin.put200({ resourceType: 'Location', id: 'hosp' });
    await admin.put200({ resourceType: 'Location', id: 'ward', partOf: { reference: 'Location/hosp' } });
    await admin.put200({ resourceType: 'Encounter', id: 'enc', status: 'finished', class: { code: 'AMB' }, location: [{ location: { reference: 'Location/ward' } }] });
    await admin.put200({ ...obs('at-ward', 'laboratory'), encounter: { reference: 'Encounter/enc' } });
    const hospital = fhirClient(t, await t.tokenFor('t1', ['system/Observation.rs', 'system/Encounter.rs', 'system/Location.rs'],
      'system/Observation.rs?encounter.location:below=Location/hosp system/Encounter.rs system/Location.rs'));
    expect(await ids(hospital, 'Observation')).toEqual(['at-ward']);
    expect((await admin.call('DELETE', 'Observation/at-ward')).ok).toBe(true);
  });

  test('Provenance found by its targets is exported only with access to all of it', async () => {
    const c = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Observation.rs', 'system/Provenance.rs'] });
    const token = await t.token('system/Observation.rs system/Provenance.rs?agent=Practitioner/x', c.client.clientId, c.clientSecret!);
    await expectOutcome(await t.request(t.fhir() + '/$export?_type=Observation&includeAssociatedData=LatestProvenanceResources', fhirInit(token, 'GET', undefined, { Prefer: 'respond-async' })), 403);
  });
  test('an update, patch or delete may not reach a stored resource outside the filter, whatever the new content', async () => {
    for (const o of [obs('vs-d1', 'vital-signs'), obs('vs-d2', 'vital-signs'), obs('vs-d3', 'vital-signs'), obs('lab-d1', 'laboratory')]) await admin.put200(o);
    const w = fhirClient(t, await t.tokenFor('t1', ['system/Observation.cruds?category=laboratory']));
    const stillThere = async (id: string) => expect((await admin.get(`Observation/${id}`)).status).toBe(200);
    // Delete: by id, conditional, in a batch and in a transaction.
    await expectOutcome(await w.del('Observation/vs-d1'), 403);
    // A conditional delete searches as the token may: the resource is not found there, and stays.
    const conditional = await w.del('Observation?_id=vs-d1');
    expect(conditional.status).toBe(200);
    expect(await conditional.text()).toContain('nothing to delete');
    const bundle = (type: string) => ({ resourceType: 'Bundle', type, entry: [{ request: { method: 'DELETE', url: 'Observation/vs-d1' } }] });
    const batch = (await (await w.post('', bundle('batch'))).json()) as Json;
    expect(batch.entry[0].response.status).toStartWith('403');
    expect((await w.post('', bundle('transaction'))).status).toBe(403);
    await stillThere('vs-d1');
    // Update to content inside the filter: the stored version is outside it.
    await expectOutcome(await w.put('Observation/vs-d2', obs('vs-d2', 'laboratory')), 403);
    await expectOutcome(await w.put('Observation?_id=vs-d2', obs('vs-d2', 'laboratory')), 403);
    const patch = [{ op: 'replace', path: '/category/0/coding/0/code', value: 'laboratory' }];
    await expectOutcome(await w.call('PATCH', 'Observation/vs-d3', JSON.stringify(patch), { 'Content-Type': 'application/json-patch+json' }), 403);
    expect(JSON.parse((await (await admin.get('Observation/vs-d2')).text())).category[0].coding[0].code).toBe('vital-signs');
    expect(JSON.parse((await (await admin.get('Observation/vs-d3')).text())).category[0].coding[0].code).toBe('vital-signs');
    // Inside the filter all three work.
    expect((await w.put('Observation/lab-d1', { ...obs('lab-d1', 'laboratory'), status: 'amended' })).status).toBe(200);
    expect((await w.del('Observation/lab-d1')).status).toBe(200);
    // A filter on delete alone: reading everything does not widen it.
    const d = fhirClient(t, await t.tokenFor('t1', ['system/Observation.rs', 'system/Observation.d?category=laboratory'], 'system/Observation.rs system/Observation.d?category=laboratory'));
    await expectOutcome(await d.del('Observation/vs-d1'), 403);
    await stillThere('vs-d1');
  });
});
