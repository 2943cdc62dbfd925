/**
 * Transactions changing the same resources at once, each in its own order: the resources an entry
 * changes are locked together, in key order, before the first write, so they wait for each other
 * and all commit; none deadlocks (which PostgreSQL would end after a second, one of them a 409).
 * On both databases (SQLite has one writer, so there only the outcome is checked).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, type Json } from '../helpers/fhir.ts';
import type { ResourceWriter, SearchQuery } from '../../src/store/types.ts';
import { createPostgresStore } from '../../src/store/postgres/index.ts';
import { storeTargets } from '../helpers/stores.ts';

await eachStore((kind, fresh) => {
  describe(`concurrent transactions (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const ids = ['a', 'b', 'c', 'd', 'e', 'f'];

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const id of ids) {
        const res = await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token, 'PUT', { resourceType: 'Patient', id, identifier: [{ system: 'urn:test', value: id }] }));
        expect(res.status).toBe(201);
      }
    });
    afterAll(() => t.close());

    /**
     * A transaction updating `order`'s Patients (by id, or by identifier where `conditional`), in that
     * order, to a birth date of the round's `which`th transaction: each changes them (one that changes
     * nothing writes no version).
     */
    const transaction = (order: string[], round: number, which: number, conditional = false) => t.request(t.fhir(), fhirInit(token, 'POST', {
      resourceType: 'Bundle', type: 'transaction',
      entry: order.map((id) => ({
        resource: { resourceType: 'Patient', ...(conditional ? {} : { id }), identifier: [{ system: 'urn:test', value: id }], birthDate: `${1950 + round}-0${which}` },
        request: { method: 'PUT', url: conditional ? `Patient?identifier=urn:test|${id}` : `Patient/${id}` },
      })),
    }));

    test('the same resources in opposite orders, by id and conditionally: every transaction commits', async () => {
      const rounds = 8;
      const statuses: number[] = [];
      for (let round = 0; round < rounds; round++) {
        const answers = await Promise.all([
          transaction(ids, round, 1), transaction([...ids].reverse(), round, 2),
          transaction(['c', 'a', 'e'], round, 3), transaction(['e', 'c', 'a'], round, 4, true),
        ]);
        for (const res of answers) {
          statuses.push(res.status);
          await res.text();
        }
      }
      expect(statuses).toEqual(new Array(rounds * 4).fill(200));
      // Every transaction wrote a version of each of its Patients: 1 + 2 per round, and 2 more for a, c, e.
      const versions = async (id: string) => (((await (await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token))).json()) as Json).meta.versionId);
      expect(await Promise.all(ids.map(versions))).toEqual(ids.map((id) => String(1 + rounds * (['a', 'c', 'e'].includes(id) ? 4 : 2))));
    });
  });
});

await eachStore((kind, fresh) => {
  describe(`a write by another request between a transaction's validation and its commit (${kind})`, () => {
    let t: TestApp;
    let token: string;
    // Run when the transaction resolves its Subscription's endpoint host: after its entries are planned,
    // rewritten and validated (the steps a large Bundle paces, letting other requests run), before its commit.
    let meanwhile: (() => Promise<unknown>) | undefined;
    beforeAll(async () => {
      const resolveHost = async () => {
        const write = meanwhile;
        meanwhile = undefined;
        if (write) await write();
        return ['198.51.100.1'];
      };
      t = await createTestApp({ store: await fresh(), resolveHost });
      token = await t.token();
    });
    afterAll(() => t.close());

    /** A Subscription entry whose endpoint (a host of its own: hosts resolved are remembered) the transaction resolves before its commit. */
    const hook = (host: string): Json => ({
      resource: { resourceType: 'Subscription', status: 'requested', reason: 'r', criteria: 'Observation?status=final', channel: { type: 'rest-hook', endpoint: `https://${host}.example/notify`, payload: 'application/fhir+json' } },
      request: { method: 'POST', url: 'Subscription' },
    });
    const send = (entry: Json[]) => t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'transaction', entry }));
    const put = (id: string, body: Json) => t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token, 'PUT', { resourceType: 'Patient', id, ...body }));
    const read = async (ref: string) => (await t.request(`${t.fhir()}/${ref}`, fhirInit(token))).json() as Promise<Json>;

    test('its update held to a version is a 412 and writes nothing; its patch applies to what the other request wrote', async () => {
      expect((await put('held-a', { name: [{ family: 'Lee' }] })).status).toBe(201);
      expect((await put('held-b', { name: [{ family: 'Kim' }] })).status).toBe(201);
      const patch = { resource: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'birthDate' }, { name: 'value', valueDate: '1970-01-01' }] }] }, request: { method: 'PATCH', url: 'Patient/held-a' } };
      const update = { resource: { resourceType: 'Patient', id: 'held-b', name: [{ family: 'FromBundle' }] }, request: { method: 'PUT', url: 'Patient/held-b', ifMatch: 'W/"1"' } };
      const statuses: number[] = [];
      meanwhile = async () => {
        for (const [id, body] of [['held-a', { name: [{ family: 'Lee' }], gender: 'female' }], ['held-b', { name: [{ family: 'Kim' }], gender: 'male' }]] as const) statuses.push((await put(id, body)).status);
      };
      const res = await send([patch, update, hook('update-held')]);
      expect(statuses).toEqual([200, 200]);
      expect([res.status, ((await res.json()) as Json).issue[0].expression]).toEqual([412, ['Bundle.entry[1].request.ifMatch']]);
      const [a, b] = [await read('Patient/held-a'), await read('Patient/held-b')];
      expect([a.gender, a.birthDate, b.gender, b.name[0].family]).toEqual(['female', undefined, 'male', 'Kim']);
      // The patch alone: planned on version 2, which another request replaces before the commit; planned again on version 3.
      meanwhile = async () => statuses.push((await put('held-a', { name: [{ family: 'Lee' }], gender: 'other' })).status);
      const patched = await send([patch, hook('patch-held')]);
      expect([patched.status, statuses]).toEqual([200, [200, 200, 200]]);
      const now = await read('Patient/held-a');
      expect([now.meta.versionId, now.gender, now.birthDate]).toEqual(['4', 'other', '1970-01-01']);
    });

    test('its patch with If-Match * (any current version) is planned again on the version another request wrote meanwhile (it was a 412)', async () => {
      expect((await put('held-star', { name: [{ family: 'Lee' }] })).status).toBe(201);
      const patch = { resource: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'birthDate' }, { name: 'value', valueDate: '1970-01-01' }] }] }, request: { method: 'PATCH', url: 'Patient/held-star', ifMatch: '*' } };
      let written = 0;
      meanwhile = async () => (written = (await put('held-star', { name: [{ family: 'Lee' }], gender: 'other' })).status);
      const res = await send([patch, hook('patch-star')]);
      expect([written, res.status]).toEqual([200, 200]);
      const now = await read('Patient/held-star');
      expect([now.meta.versionId, now.gender, now.birthDate]).toEqual(['3', 'other', '1970-01-01']);
    });

    test('its patch with an If-Match list naming the version another request wrote meanwhile is planned again on it, as a REST PATCH is (it was a 412)', async () => {
      expect((await put('held-list', { name: [{ family: 'Lee' }] })).status).toBe(201);
      const patch = (ifMatch: string) => ({ resource: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'telecom' }, { name: 'value', valueContactPoint: { system: 'phone', value: '555' } }] }] }, request: { method: 'PATCH', url: 'Patient/held-list', ifMatch } });
      const statuses: number[] = [];
      meanwhile = async () => statuses.push((await put('held-list', { name: [{ family: 'Lee' }], gender: 'other' })).status);
      const res = await send([patch('W/"1", W/"2"'), hook('patch-list')]);
      expect([statuses, res.status]).toEqual([[200], 200]);
      const now = await read('Patient/held-list');
      expect([now.meta.versionId, now.gender, now.telecom]).toEqual(['3', 'other', [{ system: 'phone', value: '555' }]]);
      // A list that the new version does not meet stays the client's 412, naming its ifMatch, and writes nothing.
      meanwhile = async () => statuses.push((await put('held-list', { name: [{ family: 'Lee' }], gender: 'male' })).status);
      const stale = await send([patch('W/"3", W/"1"'), hook('patch-list-stale')]);
      expect([statuses, stale.status, ((await stale.json()) as Json).issue[0].expression]).toEqual([[200, 200], 412, ['Bundle.entry[0].request.ifMatch']]);
      expect((await read('Patient/held-list')).meta.versionId).toBe('4');
    });

    test('its patch planned again refers to what this attempt creates: a urn:uuid in the patch names the Patient written, not the first attempt\'s id', async () => {
      const obs = (gender: string) => t.request(`${t.fhir()}/Observation/patch-urn`, fhirInit(token, 'PUT', { resourceType: 'Observation', id: 'patch-urn', status: 'final', code: { text: gender } }));
      expect((await obs('a')).status).toBe(201);
      const urn = 'urn:uuid:00000000-0000-4000-8000-0000000000e1';
      const patch = { resource: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Observation' }, { name: 'name', valueString: 'subject' }, { name: 'value', valueReference: { reference: urn } }] }] }, request: { method: 'PATCH', url: 'Observation/patch-urn' } };
      let written = 0;
      meanwhile = async () => (written = (await obs('b')).status);
      const res = await send([{ fullUrl: urn, resource: { resourceType: 'Patient', name: [{ family: 'Urn' }] }, request: { method: 'POST', url: 'Patient' } }, patch, hook('patch-urn')]);
      expect([written, res.status]).toEqual([200, 200]);
      const answer = (await res.json()) as Json;
      const created = `Patient/${answer.entry[0].resource.id}`;
      const now = await read('Observation/patch-urn');
      expect([now.code.text, now.subject]).toEqual(['b', { reference: created }]);
      expect((await read(created)).name).toEqual([{ family: 'Urn' }]);
    });

    test("its conditional create's match, deleted meanwhile, is searched again: the Bundle creates, and its entries refer to what it created", async () => {
      const identifier = [{ system: 'http://example.org/mrn', value: 'held-create' }];
      expect((await put('held-c', { identifier })).status).toBe(201);
      let deleted = 0;
      meanwhile = async () => (deleted = (await t.request(`${t.fhir()}/Patient/held-c`, fhirInit(token, 'DELETE'))).status);
      const res = await send([
        { fullUrl: 'urn:uuid:00000000-0000-4000-8000-00000000000c', resource: { resourceType: 'Patient', identifier }, request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=http://example.org/mrn|held-create' } },
        { resource: { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'urn:uuid:00000000-0000-4000-8000-00000000000c' } }, request: { method: 'POST', url: 'Observation' } },
        hook('create-held'),
      ]);
      expect([deleted, res.status]).toEqual([200, 200]);
      const answer = (await res.json()) as Json;
      // Not 200 for Patient/held-c, deleted before the commit, with an Observation naming it.
      expect(answer.entry[0].response.status).toBe('201 Created');
      const created = `Patient/${answer.entry[0].resource.id}`;
      expect(created).not.toBe('Patient/held-c');
      expect(answer.entry[1].resource.subject).toEqual({ reference: created });
      expect((await read(created)).identifier).toEqual(identifier);
    });

    const observation = (subject: string): Json => ({ resource: { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: subject } }, request: { method: 'POST', url: 'Observation' } });
    const mrn = (value: string) => ({ identifier: [{ system: 'http://example.org/mrn', value }] });
    const matching = async (value: string) => ((await (await t.request(`${t.fhir()}/Patient?identifier=http://example.org/mrn|${value}`, fhirInit(token))).json()) as Json).entry?.map((e: Json) => e.resource.id).sort() ?? [];
    const observations = async (subject: string) => ((await (await t.request(`${t.fhir()}/Observation?subject=${subject}`, fhirInit(token))).json()) as Json).entry?.length ?? 0;

    test("its conditional reference's target, deleted meanwhile, is searched again: 412, nothing written (it was 200, naming the deleted Patient)", async () => {
      expect((await put('ref-r', mrn('ref-r'))).status).toBe(201);
      let deleted = 0;
      meanwhile = async () => (deleted = (await t.request(`${t.fhir()}/Patient/ref-r`, fhirInit(token, 'DELETE'))).status);
      const res = await send([observation('Patient?identifier=http://example.org/mrn|ref-r'), hook('ref-deleted')]);
      expect([deleted, res.status]).toEqual([200, 412]);
      const outcome = (await res.json()) as Json;
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[0].resource.subject']);
      expect(outcome.issue[0].diagnostics).toContain('matches nothing');
      expect(await observations('Patient/ref-r')).toBe(0);
    });

    test('its conditional reference, whose condition another request makes match a second resource meanwhile, is a 412 (it stayed on the first)', async () => {
      expect((await put('ref-s1', mrn('ref-s'))).status).toBe(201);
      let created = 0;
      meanwhile = async () => (created = (await put('ref-s2', mrn('ref-s'))).status);
      const res = await send([observation('Patient?identifier=http://example.org/mrn|ref-s'), hook('ref-second')]);
      expect([created, res.status]).toEqual([201, 412]);
      const outcome = (await res.json()) as Json;
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[0].resource.subject']);
      expect(outcome.issue[0].diagnostics).toContain('matches more than one resource');
      expect(await observations('Patient/ref-s1')).toBe(0);
    });

    test('its conditional reference, whose target another request replaces meanwhile by another of the condition, names the new one', async () => {
      expect((await put('ref-o', mrn('ref-n'))).status).toBe(201);
      const statuses: number[] = [];
      meanwhile = async () => {
        statuses.push((await put('ref-o', { identifier: [{ system: 'http://example.org/mrn', value: 'ref-moved' }] })).status);
        statuses.push((await put('ref-n', mrn('ref-n'))).status);
      };
      const res = await send([observation('Patient?identifier=http://example.org/mrn|ref-n'), hook('ref-new')]);
      expect([statuses, res.status]).toEqual([[200, 201], 200]);
      const answer = (await res.json()) as Json;
      expect(answer.entry[0].resource.subject).toEqual({ reference: 'Patient/ref-n' });
      expect(await observations('Patient/ref-o')).toBe(0);
    });

    test("of its conditional references searched again together, one whose target another request changes to match another's condition too is a 412", async () => {
      for (const id of ['two-a', 'two-b', 'two-c']) expect((await put(id, mrn(id))).status).toBe(201);
      let updated = 0;
      meanwhile = async () => (updated = (await put('two-b', { identifier: [...mrn('two-b').identifier, ...mrn('two-a').identifier] })).status);
      const res = await send([...['two-a', 'two-b', 'two-c'].map((id) => observation(`Patient?identifier=http://example.org/mrn|${id}`)), hook('refs-together')]);
      expect([updated, res.status]).toEqual([200, 412]);
      const outcome = (await res.json()) as Json;
      expect([outcome.issue[0].expression, outcome.issue[0].diagnostics]).toEqual([['Bundle.entry[0].resource.subject'], expect.stringContaining('matches more than one resource')]);
    });

    test("of its conditional references searched again together, one whose target another request moves to the other's condition between their searches is a 412 (it was 200, naming a Patient its condition no longer matches)", async () => {
      expect((await put('ver-p', mrn('ver-a'))).status).toBe(201);
      const resources = t.store.resources;
      const search = resources.search;
      let moved = 0;
      // Right after the planning's search of ver-a: ver-p leaves the first condition for the second's. The planning reads
      // both conditions ahead in one statement (bundle-condition-answers.ts), as the state was before the move, so ver-b
      // matches nothing there; searched one by one, ver-b's search came after the move and found ver-p too.
      resources.search = async (tenant, query) => {
        const rows = await search.call(resources, tenant, query);
        if (moved === 0 && JSON.stringify(query.where).includes('"ver-a"')) moved = (await put('ver-p', mrn('ver-b'))).status;
        return rows;
      };
      try {
        const res = await send(['ver-a', 'ver-b'].map((id) => observation(`Patient?identifier=http://example.org/mrn|${id}`)));
        expect([moved, res.status]).toEqual([200, 412]);
        const outcome = (await res.json()) as Json;
        expect([outcome.issue[0].expression, outcome.issue[0].diagnostics]).toEqual([['Bundle.entry[1].resource.subject'], expect.stringContaining('matches nothing')]);
      } finally {
        resources.search = search;
      }
      expect(await observations('Patient/ver-p')).toBe(0);
    });

    test('of its conditional references through a chain, one that another request makes match a second Patient by changing an Organization (no Patient changed) is a 412', async () => {
      const organization = (id: string, values: string[]) => t.request(`${t.fhir()}/Organization/${id}`, fhirInit(token, 'PUT', { resourceType: 'Organization', id, identifier: values.map((value) => ({ system: 'http://example.org/org', value })) }));
      for (const id of ['chain-x', 'chain-y']) {
        expect((await organization(id, [id])).status).toBe(201);
        expect((await put(`${id}-p`, { managingOrganization: { reference: `Organization/${id}` } })).status).toBe(201);
      }
      let changed = 0;
      meanwhile = async () => (changed = (await organization('chain-x', ['chain-x', 'chain-y'])).status);
      const res = await send([...['chain-x', 'chain-y'].map((id) => observation(`Patient?organization.identifier=http://example.org/org|${id}`)), hook('chain-changed')]);
      expect([changed, res.status]).toEqual([200, 412]);
      const outcome = (await res.json()) as Json;
      expect([outcome.issue[0].expression, outcome.issue[0].diagnostics]).toEqual([['Bundle.entry[1].resource.subject'], expect.stringContaining('matches more than one resource')]);
      expect(await observations('Patient/chain-y-p')).toBe(0);
    });

    test("a conditional reference to a Binary, whose matches a token's reach keeps by their securityContext, is searched again as planned: unchanged it commits, deleted meanwhile it is a 412", async () => {
      const binary = (id: string) => t.request(`${t.fhir()}/Binary/${id}`, fhirInit(token, 'PUT', { resourceType: 'Binary', id, contentType: 'text/plain', data: 'aGk=' }));
      expect((await binary('reach-b')).status).toBe(201);
      // Its scopes leave out types (Patient...) whose records a Binary's securityContext may name: its Binary matches are kept in reach by reads of their own.
      const limited = await craftToken(t, 'system/Observation.crs system/Subscription.c system/Binary.rs');
      const focused = { resource: { resourceType: 'Observation', status: 'final', code: { text: 'x' }, focus: [{ reference: 'Binary?_id=reach-b' }] }, request: { method: 'POST', url: 'Observation' } };
      const sendAs = (entry: Json[]) => t.request(t.fhir(), fhirInit(limited, 'POST', { resourceType: 'Bundle', type: 'transaction', entry }));
      const kept = await sendAs([focused, hook('reach-kept')]);
      expect(kept.status).toBe(200);
      expect(((await kept.json()) as Json).entry[0].resource.focus).toEqual([{ reference: 'Binary/reach-b' }]);
      let deleted = 0;
      meanwhile = async () => (deleted = (await t.request(`${t.fhir()}/Binary/reach-b`, fhirInit(token, 'DELETE'))).status);
      const res = await sendAs([focused, hook('reach-deleted')]);
      expect([deleted, res.status]).toEqual([200, 412]);
      expect(((await res.json()) as Json).issue[0].expression).toEqual(['Bundle.entry[0].resource.focus[0]']);
    });

    test('its conditional update, delete and patch, whose condition another request makes match a second resource meanwhile, are 412s (they wrote the first)', async () => {
      const patch = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'birthDate' }, { name: 'value', valueDate: '1970-01-01' }] }] };
      const cases: [string, Json][] = [
        ['PUT', { resource: { resourceType: 'Patient', ...mrn('cond-put'), gender: 'other' }, request: { method: 'PUT', url: 'Patient?identifier=http://example.org/mrn|cond-put' } }],
        ['DELETE', { request: { method: 'DELETE', url: 'Patient?identifier=http://example.org/mrn|cond-delete' } }],
        ['PATCH', { resource: patch, request: { method: 'PATCH', url: 'Patient?identifier=http://example.org/mrn|cond-patch' } }],
      ];
      for (const [method, entry] of cases) {
        const value = `cond-${method.toLowerCase()}`;
        expect((await put(`${value}-1`, mrn(value))).status).toBe(201);
        let created = 0;
        meanwhile = async () => (created = (await put(`${value}-2`, mrn(value))).status);
        const res = await send([entry, hook(`second-${value}`)]);
        expect([method, created, res.status]).toEqual([method, 201, 412]);
        expect(((await res.json()) as Json).issue[0].diagnostics).toContain('matches more than one resource');
        const first = await read(`Patient/${value}-1`);
        expect([method, first.meta.versionId, first.gender, first.birthDate]).toEqual([method, '1', undefined, undefined]);
      }
    });

    test('its conditional create that matched nothing, whose condition another request makes match meanwhile, finds that resource (it created a second)', async () => {
      let created = 0;
      meanwhile = async () => (created = (await put('late-match', mrn('late-match'))).status);
      const res = await send([
        { fullUrl: 'urn:uuid:00000000-0000-4000-8000-00000000000d', resource: { resourceType: 'Patient', ...mrn('late-match') }, request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=http://example.org/mrn|late-match' } },
        observation('urn:uuid:00000000-0000-4000-8000-00000000000d'),
        hook('create-late'),
      ]);
      expect([created, res.status]).toEqual([201, 200]);
      const answer = (await res.json()) as Json;
      expect([answer.entry[0].response.status, answer.entry[1].resource.subject]).toEqual(['200 OK', { reference: 'Patient/late-match' }]);
      expect(await matching('late-match')).toEqual(['late-match']);
    });

    /** Conditional creates by family and given name (searched again together as one superset: valuesMerged), and what they wrote. */
    const named = (family: string, given: string) => ({ name: [{ family, given: [given] }] });
    const byName = (family: string, given: string, n: number): Json => ({
      fullUrl: `urn:uuid:00000000-0000-4000-8000-0000000001${String(n).padStart(2, '0')}`,
      resource: { resourceType: 'Patient', ...named(family, given) },
      request: { method: 'POST', url: 'Patient', ifNoneExist: `family=${family}&given=${given}` },
    });
    const namedIds = async (family: string) => ((((await read(`Patient?family=${family}&_count=50`)).entry ?? []) as Json[]).map((e) => e.resource.id as string)).sort();
    const statuses = (answer: Json) => (answer.entry as Json[]).map((e) => e.response.status as string);

    test('its conditional creates by family and given, one of which another request makes match meanwhile, find that resource (they created a second)', async () => {
      expect((await put('fg-stored', named('Fgone', 'Anna'))).status).toBe(201);
      let created = 0;
      meanwhile = async () => (created = (await put('fg-late', named('Fgtwo', 'Bert'))).status);
      const res = await send([byName('Fgone', 'Anna', 1), byName('Fgtwo', 'Bert', 2), byName('Fgthree', 'Cara', 3), hook('names-late')]);
      expect([created, res.status]).toEqual([201, 200]);
      const answer = (await res.json()) as Json;
      expect(statuses(answer).slice(0, 3)).toEqual(['200 OK', '200 OK', '201 Created']);
      expect([await namedIds('Fgone'), await namedIds('Fgtwo'), (await namedIds('Fgthree')).length]).toEqual([['fg-stored'], ['fg-late'], 1]);
    });

    test('its conditional creates by family and given commit beside a resource another request writes meanwhile that meets one entry\'s family and another\'s given (none of their conditions)', async () => {
      expect((await put('mx-stored', named('Mxone', 'Dora'))).status).toBe(201);
      let created = 0;
      meanwhile = async () => (created = (await put('mx-cross', named('Mxone', 'Emil'))).status);
      const res = await send([byName('Mxone', 'Dora', 4), byName('Mxtwo', 'Emil', 5), hook('names-cross')]);
      expect([created, res.status]).toEqual([201, 200]);
      const answer = (await res.json()) as Json;
      expect(statuses(answer).slice(0, 2)).toEqual(['200 OK', '201 Created']);
      expect([await namedIds('Mxone'), (await namedIds('Mxtwo')).length]).toEqual([['mx-cross', 'mx-stored'], 1]);
    });

    test('its conditional creates by family and given, whose match another request renames meanwhile, create it again (they found a Patient their condition no longer matches)', async () => {
      expect((await put('rn-stored', named('Rnone', 'Fred'))).status).toBe(201);
      let renamed = 0;
      meanwhile = async () => (renamed = (await put('rn-stored', named('Rnother', 'Fred'))).status);
      const res = await send([byName('Rnone', 'Fred', 6), byName('Rntwo', 'Gus', 7), hook('names-renamed')]);
      expect([renamed, res.status]).toEqual([200, 200]);
      const answer = (await res.json()) as Json;
      expect(statuses(answer).slice(0, 2)).toEqual(['201 Created', '201 Created']);
      expect([(await namedIds('Rnone')).length, await namedIds('Rnother')]).toEqual([1, ['rn-stored']]);
    });

    test('its conditional creates by family and given in halfwidth katakana, one of which another request makes match meanwhile by a longer name, find that resource (they created a second)', async () => {
      // The name after the searched prefix goes on with a character above the surrogates (U+FF80), which the in-memory
      // match of the superset compared by UTF-16 units: the store found the Patient, the match did not.
      let created = 0;
      meanwhile = async () => (created = (await put('kana-late', named('ﾔﾏﾀﾞ', 'ﾀﾛｳ'))).status);
      const res = await send([byName('ﾔﾏ', 'ﾀﾛｳ', 8), byName('ﾀﾅｶ', 'ﾊﾅｺ', 9), hook('names-kana')]);
      expect([created, res.status]).toEqual([201, 200]);
      const answer = (await res.json()) as Json;
      expect(statuses(answer).slice(0, 2)).toEqual(['200 OK', '201 Created']);
      expect([await namedIds('ﾔﾏ'), (await namedIds('ﾀﾅｶ')).length]).toEqual([['kana-late'], 1]);
    });

    test('its conditional updates by family and given in halfwidth katakana, one of which another request makes match meanwhile by a longer name, update that resource (they created a second)', async () => {
      let created = 0;
      meanwhile = async () => (created = (await put('kana-upd', named('ｻﾄｳﾏ', 'ｼﾞﾛｳ'))).status);
      const update = (family: string, given: string): Json => ({
        resource: { resourceType: 'Patient', ...named(family, given), active: true },
        request: { method: 'PUT', url: `Patient?family=${family}&given=${given}` },
      });
      const res = await send([update('ｻﾄｳ', 'ｼﾞﾛｳ'), update('ｽｽﾞｷ', 'ﾊﾅｺ'), hook('names-kana-upd')]);
      expect([created, res.status]).toEqual([201, 200]);
      const answer = (await res.json()) as Json;
      expect(statuses(answer).slice(0, 2)).toEqual(['200 OK', '201 Created']);
      expect([await namedIds('ｻﾄｳ'), (await namedIds('ｽｽﾞｷ')).length]).toEqual([['kana-upd'], 1]);
    });

    test('its conditional deletes by family and given in halfwidth katakana, one of which another request makes match a second Patient meanwhile, are a 412 and delete nothing (it deleted the first)', async () => {
      expect((await put('kd-one', named('ｲﾄｳ', 'ｹﾝ'))).status).toBe(201);
      expect((await put('kd-two', named('ｶﾄｳ', 'ﾕｷ'))).status).toBe(201);
      let created = 0;
      meanwhile = async () => (created = (await put('kd-late', named('ｲﾄｳﾀﾞ', 'ｹﾝ'))).status);
      const remove = (family: string, given: string): Json => ({ request: { method: 'DELETE', url: `Patient?family=${family}&given=${given}` } });
      const res = await send([remove('ｲﾄｳ', 'ｹﾝ'), remove('ｶﾄｳ', 'ﾕｷ'), hook('names-kana-del')]);
      expect([created, res.status]).toEqual([201, 412]);
      expect([await namedIds('ｲﾄｳ'), await namedIds('ｶﾄｳ')]).toEqual([['kd-late', 'kd-one'], ['kd-two']]);
    });

    test("a patient's token's conditional creates under a scope filter, matches of which other requests write meanwhile outside its compartment, outside its filter and inside both, find the one inside both alone", async () => {
      for (const id of ['cp-1', 'cp-2']) expect((await put(id, named('Cp', id))).status).toBe(201);
      const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
      const obs = (n: number, patient: string, category: string): Json => ({
        resourceType: 'Observation', status: 'final', category: [{ coding: [{ system: CAT, code: category }] }],
        code: { coding: [{ system: 'urn:cp', code: `c${n}` }], text: `Cpname${n}x` }, subject: { reference: `Patient/${patient}` },
      });
      const mine = await craftToken(t, `patient/Patient.rs user/Subscription.c patient/Observation.cruds?category=${CAT}|laboratory`, { patient: 'cp-1' });
      const entries = [0, 1, 2, 3].map((n) => ({ resource: obs(n, 'cp-1', 'laboratory'), request: { method: 'POST', url: 'Observation', ifNoneExist: `code=urn:cp|c${n}&code:text=Cpname${n}` } }));
      const written: number[] = [];
      const admin = async (id: string, body: Json) => (await t.request(`${t.fhir()}/Observation/${id}`, fhirInit(token, 'PUT', { ...body, id }))).status;
      meanwhile = async () => {
        written.push(await admin('cp-other', obs(0, 'cp-2', 'laboratory')), await admin('cp-vital', obs(1, 'cp-1', 'vital-signs')), await admin('cp-in', obs(2, 'cp-1', 'laboratory')));
      };
      const res = await t.request(t.fhir(), fhirInit(mine, 'POST', { resourceType: 'Bundle', type: 'transaction', entry: [...entries, hook('cp-scope')] }));
      expect([written, res.status]).toEqual([[201, 201, 201], 200]);
      expect(statuses((await res.json()) as Json).slice(0, 4)).toEqual(['201 Created', '201 Created', '200 OK', '201 Created']);
      const count = async (query: string) => (await read(`Observation?${query}&_summary=count`)).total as number;
      expect(await Promise.all([0, 1, 2, 3].map((n) => count(`code=urn:cp|c${n}`)))).toEqual([2, 2, 1, 1]);
    });

    /**
     * Conditions of one shape (searched again together: tokensMerged, or valuesMerged as a superset matched in memory),
     * the `n`th's search, and a Patient that meets it (with a longer name where the search is by prefix or contains).
     */
    const shapes: Record<string, (n: number) => { search: string; meets: Json }> = {
      identifier: (n) => ({ search: `identifier=urn:race|v${n}`, meets: { identifier: [{ system: 'urn:race', value: `v${n}` }] } }),
      'family and given': (n) => ({ search: `family=Rfam${n}&given=Rgiv${n}`, meets: named(`Rfam${n}x`, `Rgiv${n}`) }),
      'family:exact and gender': (n) => ({ search: `family:exact=Rexact${n}&gender=male`, meets: { ...named(`Rexact${n}`, 'Any'), gender: 'male' } }),
      'given:contains beside a birth date': (n) => ({ search: `given:contains=cont${n}z&birthdate=1990-01-01`, meets: { ...named('Any', `Xcont${n}zY`), birthDate: '1990-01-01' } }),
      'name in kana, active missing': (n) => ({ search: `name=ｶﾅ${n}&active:missing=true`, meets: named(`ｶﾅ${n}ﾀﾞ`, 'ﾊﾅ') }),
      'gender, several values': (n) => ({ search: `gender=other,unknown&family=Rsev${n}`, meets: { ...named(`Rsev${n}`, 'Any'), gender: 'unknown' } }),
    };
    for (const [shape, condition] of Object.entries(shapes)) {
      test(`its conditional creates by ${shape}, several of which other requests make match meanwhile, find those resources: no duplicate`, async () => {
        const entries = Array.from({ length: 8 }, (_, n) => ({ resource: { resourceType: 'Patient', ...condition(n).meets }, request: { method: 'POST', url: 'Patient', ifNoneExist: condition(n).search } }));
        const late = [2, 5];
        const written: number[] = [];
        meanwhile = async () => {
          for (const n of late) written.push((await put(`race-${shape.replace(/[^a-z]/g, '')}-${n}`, condition(n).meets)).status);
        };
        const res = await send([...entries, hook(`race-${shape.replace(/[^a-z]/g, '')}`)]);
        expect([written, res.status]).toEqual([[201, 201], 200]);
        expect(statuses((await res.json()) as Json).slice(0, 8)).toEqual(entries.map((_, n) => (late.includes(n) ? '200 OK' : '201 Created')));
        const counts = await Promise.all(entries.map(async (_, n) => ((await read(`Patient?${condition(n).search}&_summary=count`)).total as number)));
        expect(counts).toEqual(entries.map(() => 1));
      });
    }

    test('its conditional creates by family and given, more than one statement searches again together, find the matches other requests write meanwhile in each', async () => {
      const condition = shapes['family and given']!;
      const entries = Array.from({ length: 80 }, (_, n) => ({ resource: { resourceType: 'Patient', ...condition(100 + n).meets }, request: { method: 'POST', url: 'Patient', ifNoneExist: condition(100 + n).search } }));
      // Beyond the first of the statements the searches are checked in: in one of the middle and in the last.
      const late = [40, 79];
      const written: number[] = [];
      meanwhile = async () => {
        for (const n of late) written.push((await put(`race-many-${n}`, condition(100 + n).meets)).status);
      };
      const res = await send([...entries, hook('race-many')]);
      expect([written, res.status]).toEqual([[201, 201], 200]);
      expect(statuses((await res.json()) as Json).slice(0, 80)).toEqual(entries.map((_, n) => (late.includes(n) ? '200 OK' : '201 Created')));
      const counts = await Promise.all(entries.map(async (_, n) => ((await read(`Patient?${condition(100 + n).search}&_summary=count`)).total as number)));
      expect(counts).toEqual(entries.map(() => 1));
    });

    test('its conditional creates by family and given, whose superset finds more than 100 other Patients, find the matches other requests write meanwhile (searched again as an `or`, a few at a time)', async () => {
      // Each search's family beside six other searches' given names: Patients the merged superset finds and none of the searches does.
      const search = (n: number) => `family=Orf${n}q&given=Org${n}q`;
      const crossed = Array.from({ length: 80 * 6 }, (_, k) => ({
        resource: { resourceType: 'Patient', ...named(`Orf${Math.floor(k / 6)}q`, `Org${(Math.floor(k / 6) + 1 + (k % 6)) % 80}q`) }, request: { method: 'POST', url: 'Patient' },
      }));
      expect((await t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'batch', entry: crossed }))).status).toBe(200);
      const entries = Array.from({ length: 80 }, (_, n) => ({ resource: { resourceType: 'Patient', ...named(`Orf${n}q`, `Org${n}q`) }, request: { method: 'POST', url: 'Patient', ifNoneExist: search(n) } }));
      const late = [40, 79];
      const written: number[] = [];
      meanwhile = async () => {
        for (const n of late) written.push((await put(`or-many-${n}`, named(`Orf${n}q`, `Org${n}q`))).status);
      };
      const res = await send([...entries, hook('or-many')]);
      expect([written, res.status]).toEqual([[201, 201], 200]);
      expect(statuses((await res.json()) as Json).slice(0, 80)).toEqual(entries.map((_, n) => (late.includes(n) ? '200 OK' : '201 Created')));
      const counts = await Promise.all(entries.map(async (_, n) => ((await read(`Patient?${search(n)}&_summary=count`)).total as number)));
      expect(counts).toEqual(entries.map(() => 1));
    });

    /** A resource written by id (PUT), `Type/id`'s status. */
    const write = async (resource: Json) => (await t.request(`${t.fhir()}/${resource.resourceType}/${resource.id}`, fhirInit(token, 'PUT', resource))).status;
    const location = (id: string, parent?: string) => write({ resourceType: 'Location', id, name: id, ...(parent ? { partOf: { reference: `Location/${parent}` } } : {}) });
    const encounter = (id: string, at: string) => ({
      resourceType: 'Encounter', ...(id ? { id } : {}), status: 'in-progress', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' },
      location: [{ location: { reference: `Location/${at}` } }],
    });
    const below = async (ward: string) =>
      (((await read(`Encounter?location:below=Location/${ward}&_count=10`)).entry ?? []) as Json[]).map((e) => e.resource.id as string).sort();

    test('its conditional create by a hierarchy (:below), to which another request adds a room and a match in it meanwhile, finds that match (it created a second)', async () => {
      expect([await location('ward-g'), await location('room-g1', 'ward-g')]).toEqual([201, 201]);
      const statuses: number[] = [];
      // The Encounter is in a room the planning's walk of the ward never reached.
      meanwhile = async () => statuses.push(await location('room-g2', 'ward-g'), await write(encounter('enc-g2', 'room-g2')));
      const res = await send([
        { resource: encounter('', 'room-g1'), request: { method: 'POST', url: 'Encounter', ifNoneExist: 'location:below=Location/ward-g&status=in-progress' } },
        hook('below-grown'),
      ]);
      expect([statuses, res.status]).toEqual([[201, 201], 200]);
      const answer = (await res.json()) as Json;
      expect([answer.entry[0].response.status, answer.entry[0].response.location]).toEqual(['200 OK', expect.stringContaining('Encounter/enc-g2/_history/1')]);
      expect(await below('ward-g')).toEqual(['enc-g2']);
    });

    test('its conditional reference by a hierarchy (:below), whose match another request moves out of it meanwhile (the room, not the match, changed), is a 412 (it was 200)', async () => {
      expect([await location('ward-s'), await location('room-s1', 'ward-s'), await write(encounter('enc-s1', 'room-s1'))]).toEqual([201, 201, 201]);
      let moved = 0;
      meanwhile = async () => (moved = await location('room-s1'));
      const res = await send([
        { resource: { resourceType: 'Observation', status: 'final', code: { text: 'moved' }, encounter: { reference: 'Encounter?location:below=Location/ward-s' } }, request: { method: 'POST', url: 'Observation' } },
        hook('below-shrunk'),
      ]);
      expect([moved, res.status]).toEqual([200, 412]);
      const outcome = (await res.json()) as Json;
      expect([outcome.issue[0].expression, outcome.issue[0].diagnostics]).toEqual([['Bundle.entry[0].resource.encounter'], expect.stringContaining('matches nothing')]);
      expect(await below('ward-s')).toEqual([]);
      expect((await read('Observation?encounter=Encounter/enc-s1')).entry).toBeUndefined();
    });

    test('its conditional reference by a hierarchy, nothing changed meanwhile but another ward, commits as planned', async () => {
      expect([await location('ward-u'), await location('room-u1', 'ward-u'), await write(encounter('enc-u1', 'room-u1'))]).toEqual([201, 201, 201]);
      meanwhile = async () => location('ward-other');
      const res = await send([
        { resource: { resourceType: 'Observation', status: 'final', code: { text: 'kept' }, encounter: { reference: 'Encounter?location:below=Location/ward-u' } }, request: { method: 'POST', url: 'Observation' } },
        hook('below-kept'),
      ]);
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).entry[0].resource.encounter).toEqual({ reference: 'Encounter/enc-u1' });
    });

    test("a batch entry's conditional reference, whose target another request deletes meanwhile, is that entry's 412", async () => {
      expect((await put('batch-r', mrn('batch-r'))).status).toBe(201);
      meanwhile = async () => t.request(`${t.fhir()}/Patient/batch-r`, fhirInit(token, 'DELETE'));
      // The entry's own endpoint is resolved between its planning and its commit: a Subscription naming the Patient in an extension.
      const subscription = hook('batch-deleted');
      const named = { url: 'http://example.org/fhir/StructureDefinition/patient', valueReference: { reference: 'Patient?identifier=http://example.org/mrn|batch-r' } };
      subscription.resource = { ...(subscription.resource as Json), extension: [named] };
      const res = await t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'batch', entry: [subscription] }));
      expect(res.status).toBe(200);
      const answer = (await res.json()) as Json;
      expect([answer.entry[0].response.status, answer.entry[0].response.outcome?.issue[0].expression]).toEqual(['412 Precondition Failed', ['Bundle.entry[0].resource.extension[0].valueReference']]);
      const subscriptions = ((await (await t.request(`${t.fhir()}/Subscription?_count=100`, fhirInit(token))).json()) as Json).entry ?? [];
      expect(subscriptions.filter((e: Json) => e.resource.extension !== undefined)).toEqual([]);
    });
  });
});

await eachStore((kind, fresh) => {
  describe(`a transaction's hierarchy conditions searched again at its commit (${kind})`, () => {
    test('one hierarchy its conditions all walk is walked once at the commit, not once per condition (20 walks of 30 levels held the writer)', async () => {
      const store = await fresh();
      // The Location searches the transactions' writers run (the walks at the commit).
      let walked = 0;
      const bound = <T extends object>(o: T, own: Record<string, unknown>) =>
        new Proxy(o, { get: (target, key) => (typeof key === 'string' && key in own ? own[key] : typeof Reflect.get(target, key) === 'function' ? (Reflect.get(target, key) as Function).bind(target) : Reflect.get(target, key)) });
      const search = (w: ResourceWriter) => (q: SearchQuery) => {
        if (q.type === 'Location') walked++;
        return w.search(q);
      };
      const resources = bound(store.resources, {
        write: (tenant: string, fn: (w: ResourceWriter) => Promise<unknown>) => store.resources.write(tenant, (w) => fn(bound(w, { search: search(w) }))),
      });
      const t = await createTestApp({ store: bound(store, { resources }) });
      try {
        const token = await t.token();
        const write = async (r: Json) => (await t.request(`${t.fhir()}/${r.resourceType}/${r.id}`, fhirInit(token, 'PUT', r))).status;
        const DEPTH = 30;
        for (let i = 0; i < DEPTH; i++) expect(await write({ resourceType: 'Location', id: `deep-${i}`, name: `Level ${i}`, ...(i ? { partOf: { reference: `Location/deep-${i - 1}` } } : {}) })).toBe(201);
        const encounter = { resourceType: 'Encounter', id: 'deep-enc', status: 'in-progress', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' }, location: [{ location: { reference: `Location/deep-${DEPTH - 1}` } }] };
        expect(await write(encounter)).toBe(201);
        // Twenty conditions, each its own (a different second id), all below the same root.
        const entry = Array.from({ length: 20 }, (_, i) => ({
          resource: { resourceType: 'Observation', status: 'final', code: { text: `deep ${i}` }, encounter: { reference: `Encounter?location:below=Location/deep-0&_id=deep-enc,none-${i}` } },
          request: { method: 'POST', url: 'Observation' },
        }));
        walked = 0;
        const res = await t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'transaction', entry }));
        expect(res.status).toBe(200);
        expect(((await res.json()) as Json).entry.map((e: Json) => e.resource.encounter.reference)).toEqual(new Array(20).fill('Encounter/deep-enc'));
        // One walk: a search per level, and the one that finds no further level.
        expect(walked).toBeLessThanOrEqual(DEPTH + 1);
      } finally {
        await t.close();
      }
    });
  });
});

const pooled = await storeTargets({ main: false });
afterAll(() => Promise.all(pooled.map((t) => t.cleanup())), 60_000);
for (const target of pooled) {
  describe(`a transaction's hierarchy condition with codes of a ValueSet, on a pool the commits hold (${target.kind})`, () => {
    test('its walk at the commit reads no code off the pool: they all commit (on PostgreSQL they waited for ever)', async () => {
      const db = await target.migrated();
      // A pool of 2 keeps one connection for the main pool, which the store transactions hold in turn.
      const t = await createTestApp({ store: target.kind === 'postgres' ? createPostgresStore(db.url, { max: 2 }) : db.open() });
      try {
        const token = await t.token();
        const write = async (r: Json) => (await t.request(`${t.fhir()}/${r.resourceType}/${r.id}`, fhirInit(token, 'PUT', r))).status;
        const encounter = (id: string, room: string, code: string) => ({
          resourceType: 'Encounter', id, status: 'in-progress', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code }, location: [{ location: { reference: `Location/${room}` } }],
        });
        const valueSet = {
          resourceType: 'ValueSet', id: 'inpatient', url: 'http://example.org/fhir/ValueSet/inpatient', status: 'active',
          compose: { include: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', concept: [{ code: 'IMP' }] }] },
        };
        expect([
          await write({ resourceType: 'Location', id: 'ward-v', name: 'Ward V' }), await write({ resourceType: 'Location', id: 'room-v1', name: 'Room V1', partOf: { reference: 'Location/ward-v' } }),
          await write(valueSet), await write(encounter('enc-v-imp', 'room-v1', 'IMP')), await write(encounter('enc-v-amb', 'room-v1', 'AMB')),
        ]).toEqual([201, 201, 201, 201, 201]);
        const entry = [{
          resource: { resourceType: 'Observation', status: 'final', code: { text: 'inpatient' }, encounter: { reference: 'Encounter?location:below=Location/ward-v&class:in=http://example.org/fhir/ValueSet/inpatient' } },
          request: { method: 'POST', url: 'Observation' },
        }];
        // Eight transactions and eight batches at once: each commit's walk needs only the connection its transaction holds.
        const send = async (type: string) => {
          const res = await t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type, entry }));
          const answer = (await res.json()) as Json;
          return type === 'batch' ? answer.entry[0].response.status : answer.entry[0].resource.encounter.reference;
        };
        const all = Promise.all([...new Array(8).fill('transaction'), ...new Array(8).fill('batch')].map(send));
        const answers = await Promise.race([all, Bun.sleep(20_000).then(() => 'waited 20 s')]);
        expect(answers).toEqual([...new Array(8).fill('Encounter/enc-v-imp'), ...new Array(8).fill('201 Created')]);
      } finally {
        await t.close();
      }
    }, 60_000);
  });
}
