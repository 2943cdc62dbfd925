/**
 * Conditional entries inside one transaction (FHIR R4 http 3.1.0.11.2), on both databases: entries that
 * create through the same condition write one resource, conditional references find the resources the
 * transaction writes, and errors name their entry (or its element) and show conditions decoded.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, countVersions, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

const tx = (entry: Json[], type = 'transaction') => ({ resourceType: 'Bundle', type, entry });
const U = (n: number) => `urn:uuid:5d0c7a3e-7b1f-4b8e-9c2a-0000000000${String(n).padStart(2, '0')}`;
const patient = (value: string, extra: Json = {}) => ({ resourceType: 'Patient', identifier: [{ system: 'urn:x', value }], ...extra });
const create = (fullUrl: string | undefined, resource: Json, ifNoneExist?: string) => ({
  ...(fullUrl ? { fullUrl } : {}), resource, request: { method: 'POST', url: resource.resourceType, ...(ifNoneExist ? { ifNoneExist } : {}) },
});
const update = (fullUrl: string | undefined, url: string, resource: Json) => ({ ...(fullUrl ? { fullUrl } : {}), resource, request: { method: 'PUT', url } });
const observation = (subject: string) => ({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: subject } });

await eachStore((kind, fresh) => {
  describe(`conditional entries in one transaction (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const { send, ok, nothingWritten } = bundlePoster(() => t, () => api);
    const matching = async (value: string) => ids(await api.search(`Patient?identifier=urn:x|${value}`));
    const subjectOf = async (location: string) => ((await (await api.get(location.replace(/\/_history\/\d+$/, ''))).json()) as Json).subject.reference;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('two conditional creates of one condition create one resource; the second finds it, its fullUrl too', async () => {
      const before = await countVersions(t);
      const res = await ok(tx([
        create(U(1), patient('dup-1', { name: [{ family: 'First' }] }), 'identifier=urn:x|dup-1'),
        create(U(2), patient('dup-1', { name: [{ family: 'Second' }] }), 'Patient?identifier=urn:x|dup-1&_count=1'),
        create(undefined, observation(U(2))),
      ]));
      expect(res.entry.map((e: Json) => e.response.status)).toEqual(['201 Created', '200 OK', '201 Created']);
      const [id] = await matching('dup-1');
      expect(await matching('dup-1')).toEqual([id!]);
      expect(res.entry[1].resource).toEqual(res.entry[0].resource);
      expect(res.entry[1].response.location).toBe(res.entry[0].response.location);
      expect(res.entry[1].resource.name[0].family).toBe('First');
      expect(await subjectOf(res.entry[2].response.location)).toBe(`Patient/${id}`);
      expect(await countVersions(t)).toBe(before + 2);
    });

    test('two conditional updates of one condition with the same content write once; with other content they are a 400', async () => {
      const res = await ok(tx([
        update(U(3), 'Patient?identifier=urn:x|dup-2', patient('dup-2', { active: true })),
        update(U(4), 'Patient?identifier=urn:x|dup-2', patient('dup-2', { active: true })),
        create(undefined, observation(U(4))),
      ]));
      expect(res.entry.map((e: Json) => e.response.status)).toEqual(['201 Created', '200 OK', '201 Created']);
      const [id] = await matching('dup-2');
      expect(await matching('dup-2')).toEqual([id!]);
      expect(res.entry[1].resource.meta.versionId).toBe('1');
      expect(await subjectOf(res.entry[2].response.location)).toBe(`Patient/${id}`);
      const outcome = await nothingWritten(tx([
        update(undefined, 'Patient?identifier=urn:x|dup-3', patient('dup-3', { active: true })),
        update(undefined, 'Patient?identifier=urn:x|dup-3', patient('dup-3', { active: false })),
      ]), 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1]']);
    });

    test('a conditional create and a conditional update of one condition: the update writes, the create finds its resource', async () => {
      for (const [value, order] of [['both-1', 'create first'], ['both-2', 'update first']] as const) {
        const entries = [create(U(5), patient(value, { active: false }), `identifier=urn:x|${value}`), update(U(6), `Patient?identifier=urn:x|${value}`, patient(value, { active: true }))];
        if (order === 'update first') entries.reverse();
        const res = await ok(tx([...entries, create(undefined, observation(U(5)))]));
        const [created, found] = order === 'create first' ? [res.entry[1], res.entry[0]] : [res.entry[0], res.entry[1]];
        expect([created.response.status, found.response.status]).toEqual(['201 Created', '200 OK']);
        expect(found.resource).toEqual(created.resource);
        expect(created.resource.active).toBe(true);
        expect(await matching(value)).toEqual([created.resource.id]);
        expect(await subjectOf(res.entry[2].response.location)).toBe(`Patient/${created.resource.id}`);
      }
      // With a stored match: the update changes it, and the create answers the updated version.
      const stored = await api.create(patient('both-3'));
      const res = await ok(tx([create(undefined, patient('both-3'), 'identifier=urn:x|both-3'), update(undefined, 'Patient?identifier=urn:x|both-3', patient('both-3', { active: true }))]));
      expect(res.entry.map((e: Json) => [e.response.status, e.resource.id, e.resource.meta.versionId])).toEqual([['200 OK', stored.id, '2'], ['200 OK', stored.id, '2']]);
    });

    test('a conditional create after a PUT by id whose content meets its condition finds that resource, created or updated (it created a second)', async () => {
      const put = (id: string, value: string) => ({ resource: { ...patient(value), id }, request: { method: 'PUT', url: `Patient/${id}` } });
      const res = await ok(tx([put('by-id-1', 'by-id-1'), create(U(7), patient('by-id-1', { active: true }), 'identifier=urn:x|by-id-1'), create(undefined, observation(U(7)))]));
      expect(res.entry.map((e: Json) => e.response.status)).toEqual(['201 Created', '200 OK', '201 Created']);
      expect(res.entry[1].resource).toEqual(res.entry[0].resource);
      expect(await matching('by-id-1')).toEqual(['by-id-1']);
      expect(await subjectOf(res.entry[2].response.location)).toBe('Patient/by-id-1');
      // A stored Patient the PUT gives the identifier: one by one, the create would find it.
      await api.put('Patient/by-id-2', { resourceType: 'Patient', id: 'by-id-2' });
      const updated = await ok(tx([put('by-id-2', 'by-id-2'), create(undefined, patient('by-id-2'), 'identifier=urn:x|by-id-2')]));
      expect(updated.entry.map((e: Json) => [e.response.status, e.resource.id, e.resource.meta.versionId])).toEqual([['200 OK', 'by-id-2', '2'], ['200 OK', 'by-id-2', '2']]);
      expect(await matching('by-id-2')).toEqual(['by-id-2']);
      // Before the PUT in the Bundle, the create is processed first and creates, as one by one.
      const before = await ok(tx([create(undefined, patient('by-id-3'), 'identifier=urn:x|by-id-3'), put('by-id-3', 'by-id-3')]));
      expect(before.entry.map((e: Json) => e.response.status)).toEqual(['201 Created', '201 Created']);
    });

    test('a conditional patch whose condition meets what an earlier entry writes: 400, two entries changing one resource, as for a conditional update (it was a 404)', async () => {
      const patch = (url: string) => ({
        resource: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'active' }, { name: 'value', valueBoolean: true }] }] },
        request: { method: 'PATCH', url },
      });
      for (const first of [create(U(8), patient('patched-1')), { resource: { ...patient('patched-1'), id: 'patched-1' }, request: { method: 'PUT', url: 'Patient/patched-1' } }]) {
        const outcome = await nothingWritten(tx([first, patch('Patient?identifier=urn:x|patched-1')]), 400);
        expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].request.url']);
        expect(outcome.issue[0].diagnostics).toContain('matches the resource Bundle.entry[0] writes');
      }
      // By a reference to the created resource's fullUrl too.
      const byUrn = await nothingWritten(tx([create(U(9), patient('patched-2')), create(undefined, observation(U(9))), { ...patch(`Observation?subject=${U(9)}`), resource: {
        resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Observation' }, { name: 'name', valueString: 'valueString' }, { name: 'value', valueString: 'v' }] }],
      } }]), 400);
      expect(byUrn.issue[0].expression).toEqual(['Bundle.entry[2].request.url']);
      // Nothing the Bundle writes or stores meets it: 404.
      const none = await nothingWritten(tx([create(undefined, patient('patched-3')), patch('Patient?identifier=urn:x|patched-4')]), 404);
      expect(none.issue[0].expression).toEqual(['Bundle.entry[1].request.url']);
    });

    test('a conditional reference finds the resource the transaction creates, with or without ifNoneExist, or updates', async () => {
      for (const [value, entry] of [
        ['ref-1', create(undefined, patient('ref-1'))],
        ['ref-2', create(undefined, patient('ref-2'), 'identifier=urn:x|ref-2')],
        ['ref-3', update(undefined, 'Patient/ref-3', patient('ref-3', { id: 'ref-3' }))],
      ] as const) {
        const res = await ok(tx([create(undefined, observation(`Patient?identifier=urn:x|${value}`)), entry]));
        expect(await subjectOf(res.entry[0].response.location)).toBe(`Patient/${res.entry[1].resource.id}`);
        expect(await matching(value)).toEqual([res.entry[1].resource.id]);
      }
    });

    test("a conditional reference under this server's FHIR base is searched here, as If-None-Exist takes it", async () => {
      const stored = await api.create(patient('abs-1'));
      const res = await ok(tx([create(undefined, observation(`${t.fhir()}/Patient?identifier=urn:x|abs-1`)), create(U(60), patient('abs-2')), create(undefined, observation(`${t.fhir()}/Patient?identifier=urn:x|abs-2`))]));
      expect(await subjectOf(res.entry[0].response.location)).toBe(`Patient/${stored.id}`);
      const [written] = await matching('abs-2');
      expect(await subjectOf(res.entry[2].response.location)).toBe(`Patient/${written}`);
    });

    test('a fullUrl inside a conditional reference is searched as the resource its entry writes (as in conditions)', async () => {
      const encounter = (value: string) => ({ resourceType: 'Encounter', status: 'finished', class: { code: 'AMB' }, identifier: [{ system: 'urn:enc', value }], subject: { reference: U(20) } });
      // Another Encounter of the same identifier, of another patient: the subject is what tells them apart.
      await api.create({ ...encounter('visit-1'), subject: { reference: `Patient/${(await api.create(patient('other-20'))).id}` } });
      const condition = `Encounter?identifier=urn:enc|visit-1&subject=${encodeURIComponent(U(20))}`;
      const res = await ok(tx([
        create(undefined, { ...observation(U(20)), encounter: { reference: condition } }),
        create(U(21), encounter('visit-1')),
        create(U(20), patient('enc-20')),
        // By the subject alone (percent-encoded): the same Encounter.
        create(undefined, { ...observation(U(20)), encounter: { reference: `Encounter?subject=${encodeURIComponent(U(20))}` } }),
      ]));
      const enc = `Encounter/${res.entry[1].resource.id}`;
      const obs = async (n: number) => (await (await api.get(res.entry[n].response.location.replace(/\/_history\/\d+$/, ''))).json()) as Json;
      expect((await obs(0)).encounter.reference).toBe(enc);
      expect((await obs(3)).encounter.reference).toBe(enc);
      expect((await obs(0)).subject.reference).toBe(`Patient/${res.entry[2].resource.id}`);
      // A token's `urn:oid:` system is a value, not a fullUrl.
      await api.create({ ...patient('oid-1'), identifier: [{ system: 'urn:oid:1.2.3', value: 'oid-1' }] });
      const oid = await ok(tx([create(undefined, observation('Patient?identifier=urn:oid:1.2.3|oid-1'))]));
      expect(await subjectOf(oid.entry[0].response.location)).toMatch(/^Patient\//);
    });

    test('many conditional references to many written resources each find theirs (by token value, or by any parameter)', async () => {
      const n = 12;
      const patients = Array.from({ length: n }, (_, i) => create(undefined, patient(`many-${i}`, { name: [{ family: `Many${i}` }] }), `identifier=urn:x|many-${i}`));
      const observations = Array.from({ length: n }, (_, i) => create(undefined, observation(`Patient?identifier=urn:x|many-${i}`)));
      // A name (no token to narrow by), and a token with the system left out.
      observations.push(create(undefined, observation('Patient?name=Many7')), create(undefined, observation('Patient?identifier=many-9')));
      const res = await ok(tx([...observations, ...patients]));
      const idOf = (i: number) => res.entry[observations.length + i].resource.id;
      for (let i = 0; i < n; i++) expect(await subjectOf(res.entry[i].response.location)).toBe(`Patient/${idOf(i)}`);
      expect(await subjectOf(res.entry[n].response.location)).toBe(`Patient/${idOf(7)}`);
      expect(await subjectOf(res.entry[n + 1].response.location)).toBe(`Patient/${idOf(9)}`);
      // Two values of one condition, each a written Patient's: several matches, 412.
      const two = await nothingWritten(tx([
        ...Array.from({ length: n }, (_, i) => create(undefined, patient(`pair-${i}`), `identifier=urn:x|pair-${i}`)),
        create(undefined, observation('Patient?identifier=urn:x|pair-3,urn:x|pair-4')),
      ]), 412);
      expect(two.issue[0].diagnostics).toContain('matches more than one resource');
    });

    test('a conditional reference counts the stored resources as the transaction leaves them; none or several are 412', async () => {
      const stored = await api.create(patient('ref-4'));
      let outcome = await nothingWritten(tx([create(undefined, observation('Patient?identifier=urn:x|ref-4')), create(undefined, patient('ref-4'))]), 412);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[0].resource.subject']);
      expect(outcome.issue[0].diagnostics).toContain("'Patient?identifier=urn:x|ref-4' matches more than one resource");
      // The stored match is updated out of the condition, and the new one is found.
      const res = await ok(tx([
        create(undefined, observation('Patient?identifier=urn:x|ref-4')),
        create(undefined, patient('ref-4')),
        update(undefined, `Patient/${stored.id}`, patient('moved', { id: stored.id })),
      ]));
      expect(await subjectOf(res.entry[0].response.location)).toBe(`Patient/${res.entry[1].resource.id}`);
      // A stored match the transaction deletes matches nothing.
      const gone = await api.create(patient('ref-5'));
      outcome = await nothingWritten(tx([
        create(undefined, { ...observation('Patient?identifier=urn:x|ref-5'), performer: [{ reference: 'Patient?identifier=urn:x|ref-5' }] }),
        { request: { method: 'DELETE', url: `Patient/${gone.id}` } },
      ]), 412);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[0].resource.subject']);
      expect(outcome.issue[0].diagnostics).toBe("Bundle.entry[0]: conditional reference 'Patient?identifier=urn:x|ref-5' matches nothing");
    });

    test('a conditional create whose match another entry deletes creates (DELETEs come first); one another entry updates is a 400', async () => {
      for (const order of ['delete first', 'create first']) {
        const gone = await api.create(patient('del-1'));
        const entries = [{ request: { method: 'DELETE', url: `Patient/${gone.id}` } }, create(U(7), patient('del-1'), 'identifier=urn:x|del-1')];
        if (order === 'create first') entries.reverse();
        const res = await ok(tx(entries));
        const created = res.entry.find((e: Json) => e.resource)!;
        expect(created.response.status).toBe('201 Created');
        expect(await matching('del-1')).toEqual([created.resource.id]);
        await api.del(`Patient/${created.resource.id}`);
      }
      // A conditional delete of the match too.
      const gone = await api.create(patient('del-2'));
      const res = await ok(tx([create(undefined, patient('del-2'), 'identifier=urn:x|del-2'), { request: { method: 'DELETE', url: 'Patient?identifier=urn:x|del-2' } }]));
      expect(res.entry.map((e: Json) => e.response.status)).toEqual(['201 Created', '204 No Content']);
      expect(await matching('del-2')).toEqual([res.entry[0].resource.id]);
      expect((await api.get(`Patient/${gone.id}`)).status).toBe(410);
      // Matched by content, a resource another entry updates stays a 400.
      const kept = await api.create(patient('del-3'));
      const outcome = await nothingWritten(tx([create(undefined, patient('del-3'), 'identifier=urn:x|del-3'), update(undefined, `Patient/${kept.id}`, patient('del-3', { id: kept.id, active: true }))]), 400);
      expect(outcome.issue[0].diagnostics).toBe(`Bundle.entry[0]: ifNoneExist matches Patient/${kept.id}, which another entry changes`);
    });

    test("errors name their entry: duplicate targets, version conflicts, a conditional reference's unknown type, criteria decoded", async () => {
      await api.put200({ resourceType: 'Patient', id: 'loc-1' });
      let outcome = await nothingWritten(tx([update(undefined, 'Patient/loc-1', { resourceType: 'Patient', id: 'loc-1' }), { request: { method: 'DELETE', url: 'Patient/loc-1' } }]), 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1]']);
      outcome = await nothingWritten(tx([create(undefined, patient('loc')), { ...update(undefined, 'Patient/loc-1', { resourceType: 'Patient', id: 'loc-1', active: true }), request: { method: 'PUT', url: 'Patient/loc-1', ifMatch: 'W/"4"' } }]), 412);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].request.ifMatch']);
      // A patch's If-Match, judged as it is planned, names its element too.
      const patch = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'active' }, { name: 'value', valueBoolean: true }] }] };
      outcome = await nothingWritten(tx([create(undefined, patient('loc')), { resource: patch, request: { method: 'PATCH', url: 'Patient/loc-1', ifMatch: 'W/"4"' } }]), 412);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].request.ifMatch']);
      outcome = await nothingWritten(tx([create(undefined, { ...observation('Patient/loc-1'), performer: [{ reference: 'Foo?x=1' }] })]), 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[0].resource.performer[0]']);
      await api.create(patient('loc-2'));
      await api.create(patient('loc-2'));
      outcome = await nothingWritten(tx([update(undefined, 'Patient?identifier=urn%3Ax%7Cloc-2', patient('loc-2'))]), 412);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[0].request.url']);
      expect(outcome.issue[0].diagnostics).toContain("'Patient?identifier=urn:x|loc-2'");
      const batch = await ok(tx([{ ...update(undefined, 'Patient/loc-1', { resourceType: 'Patient', id: 'loc-1' }), request: { method: 'PUT', url: 'Patient/loc-1', ifMatch: 'W/"4"' } }], 'batch'));
      expect(batch.entry[0].response.status).toBe('412 Precondition Failed');
      expect(batch.entry[0].response.outcome.issue[0].expression).toEqual(['Bundle.entry[0].request.ifMatch']);
    });

    test("a condition's failures name the element holding it, in a transaction, a batch, and an If-None-Exist header", async () => {
      await api.create(patient('el-2'));
      await api.create(patient('el-2'));
      const kept = await api.create(patient('el-1'));
      const patch = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'active' }, { name: 'value', valueBoolean: true }] }] };
      const filler = create(undefined, patient('el-filler'));
      const failing: [Json, number, string][] = [
        // Several matches: 412, for each method.
        [create(undefined, patient('el-2'), 'identifier=urn:x|el-2'), 412, 'request.ifNoneExist'],
        [update(undefined, 'Patient?identifier=urn:x|el-2', patient('el-2')), 412, 'request.url'],
        [{ request: { method: 'DELETE', url: 'Patient?identifier=urn:x|el-2' } }, 412, 'request.url'],
        [{ resource: patch, request: { method: 'PATCH', url: 'Patient?identifier=urn:x|el-2' } }, 412, 'request.url'],
        // A conditional patch matching nothing: 404.
        [{ resource: patch, request: { method: 'PATCH', url: 'Patient?identifier=urn:x|el-none' } }, 404, 'request.url'],
        // The body's id other than the match's.
        [update(undefined, 'Patient?identifier=urn:x|el-1', patient('el-1', { id: 'other-id' })), 400, 'resource.id'],
      ];
      for (const [entry, status, element] of failing) {
        const outcome = await nothingWritten(tx([filler, entry]), status);
        expect([outcome.issue[0].code, outcome.issue[0].expression]).toEqual([status === 404 ? 'not-found' : status === 412 ? 'conflict' : 'invalid', [`Bundle.entry[1].${element}`]]);
        const batch = await ok(tx([filler, entry], 'batch'));
        expect([batch.entry[1].response.status.slice(0, 3), batch.entry[1].response.outcome.issue[0].expression]).toEqual([String(status), [`Bundle.entry[1].${element}`]]);
      }
      // A conditional create matching what another entry updates.
      const changed = await nothingWritten(tx([create(undefined, patient('el-1'), 'identifier=urn:x|el-1'), update(undefined, `Patient/${kept.id}`, patient('el-1', { id: kept.id, active: true }))]), 400);
      expect(changed.issue[0].expression).toEqual(['Bundle.entry[0].request.ifNoneExist']);
      // A conditional update and a conditional delete of one resource.
      const twice = await nothingWritten(tx([update(undefined, 'Patient?identifier=urn:x|el-1', patient('el-1', { active: false })), { request: { method: 'DELETE', url: 'Patient?identifier=urn:x|el-1' } }]), 400);
      expect(twice.issue[0].expression).toEqual(['Bundle.entry[1].request.url']);
      // The REST header: several matches name it.
      const rest = await api.post('Patient', patient('el-2'), { 'If-None-Exist': 'identifier=urn:x|el-2' });
      expect(rest.status).toBe(412);
      expect(((await rest.json()) as Json).issue[0].expression).toEqual(['If-None-Exist']);
    });

  });
});
