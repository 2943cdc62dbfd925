/**
 * `$expunge` (HAPI FHIR's operation) through HTTP on both stores: what each level and parameter removes,
 * with exact counts; that nothing a removed version owned is left in any table; that searches, history,
 * `_include`, compartments, `$everything` and export no longer see it; that writes go on afterwards; the
 * access rule and the switch (CINDER_EXPUNGE).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { download, finish, kickOff } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';
import { storeTargets, type StoreDatabase } from '../helpers/stores.ts';
import { orphans, rawSql } from '../helpers/expunge.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const ON = { CINDER_EXPUNGE: 'on' };
const params = (p: Record<string, boolean | number>) => ({
  resourceType: 'Parameters',
  parameter: Object.entries(p).map(([name, v]) => (typeof v === 'boolean' ? { name, valueBoolean: v } : { name, valueInteger: v })),
});

async function count(res: Response): Promise<number> {
  const body = (await res.json()) as Json;
  expect({ status: res.status, body }).toMatchObject({ status: 200, body: { resourceType: 'Parameters' } });
  return body.parameter.find((p: Json) => p.name === 'count').valueInteger as number;
}

const none = (o: Record<string, number>) => Object.fromEntries(Object.keys(o).map((k) => [k, 0]));

for (const target of targets) {
  describe(`$expunge (${target.kind})`, () => {
    let db: StoreDatabase;
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      db = await target.migrated();
      const store = db.open();
      await store.migrate();
      t = await createTestApp({ store, env: { ...ON, CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      api = fhirClient(t, await t.token());
      // Its notifications wait in the outbox (nothing delivers them here).
      await api.put200({ resourceType: 'Subscription', id: 's1', status: 'requested', reason: 'test', criteria: 'Observation?status=final', channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } });
      // p1: live, three versions; p2: two versions, then deleted (three); o1 refers to p2 and stays live;
      // o2 (two versions) refers to p1; o3 deleted; b1 a deleted Binary.
      await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Alpha' }] });
      await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Alpha' }], gender: 'female' });
      await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Alpha' }], gender: 'male' });
      await api.put200({ resourceType: 'Patient', id: 'p2', name: [{ family: 'Bravo' }], text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">Bravo narrative</div>' } });
      await api.put200({ resourceType: 'Patient', id: 'p2', name: [{ family: 'Bravo' }], gender: 'other' });
      const obs = (id: string, patient: string, code: string) => ({ resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: 'http://loinc.org', code }] }, subject: { reference: `Patient/${patient}` } });
      await api.put200(obs('o1', 'p2', '1-8'));
      await api.put200(obs('o2', 'p1', '2-6'));
      await api.put200({ ...obs('o2', 'p1', '2-6'), status: 'amended' });
      await api.put200(obs('o3', 'p2', '3-4'));
      await api.put200({ resourceType: 'Binary', id: 'b1', contentType: 'text/plain', data: btoa('secret') });
      for (const path of ['Patient/p2', 'Observation/o3', 'Binary/b1']) expect((await api.del(path)).status).toBe(200);
      // A client's own AuditEvent: $expunge never takes AuditEvents.
      await api.create({
        resourceType: 'AuditEvent', type: { system: 'http://dicom.nema.org/resources/ontology/DCM', code: '110110' }, recorded: '2026-01-15T10:00:00Z',
        agent: [{ requestor: true, who: { display: 'app' } }], source: { observer: { display: 'app' } },
      });
    });
    afterAll(() => t.close());

    /** `Type/id/version` of the notifications waiting for s1. */
    const outbox = async () => (await t.store.subscriptions.pending('t1', 's1', 100)).map((n) => `${n.type}/${n.id}/${n.versionId}`).sort();

    const expungeAt = async (path: string, p: Record<string, boolean | number>, token?: string) => {
      const client = token ? fhirClient(t, token) : api;
      return client.post(`${path}$expunge`, params(p));
    };

    test('refuses bad input with an OperationOutcome naming the parameter', async () => {
      expect((await expectOutcome(await expungeAt('', {}), 400)).issue[0].expression).toEqual(['expungeDeletedResources']);
      expect((await expectOutcome(await expungeAt('', { expungeDeletedResources: true, limit: 0 }), 400)).issue[0].expression).toEqual(['limit']);
      expect((await expectOutcome(await api.post('$expunge', { resourceType: 'Parameters', parameter: [{ name: 'bogus', valueBoolean: true }] }), 400)).issue[0].expression).toEqual(['bogus']);
      expect((await expectOutcome(await api.post('$expunge', { resourceType: 'Parameters', parameter: [{ name: 'expungeDeletedResources', valueString: 'yes' }] }), 400)).issue[0].expression).toEqual(['expungeDeletedResources']);
      expect((await expectOutcome(await expungeAt('Patient/', { expungeEverything: true }), 400)).issue[0].expression).toEqual(['expungeEverything']);
      await expectOutcome(await expungeAt('AuditEvent/', { expungeDeletedResources: true }), 405);
      await expectOutcome(await expungeAt('Bogus/', { expungeDeletedResources: true }), 404);
      await expectOutcome(await expungeAt('Patient/nope/', { expungeDeletedResources: true }), 404);
      await expectOutcome(await expungeAt('Patient/p1/_history/9/', { expungePreviousVersions: true }), 404);
      // The current version: a live resource's never goes; a deleted one's goes with its resource.
      await expectOutcome(await expungeAt('Patient/p1/_history/3/', { expungePreviousVersions: true }), 409);
      await expectOutcome(await expungeAt('Patient/p2/_history/3/', { expungeDeletedResources: true }), 409);
      expect((await api.get('$expunge')).status).toBe(405);
    });

    test('only unfiltered system/ or user/ delete scopes on every type touched', async () => {
      const patientScoped = await craftToken(t, 'patient/*.*', { patient: 'p2' });
      await expectOutcome(await expungeAt('Patient/p2/', { expungeDeletedResources: true }, patientScoped), 403, 'forbidden');
      const patientsOnly = await craftToken(t, 'system/Patient.cruds');
      await expectOutcome(await expungeAt('', { expungeDeletedResources: true }, patientsOnly), 403, 'forbidden');
      await expectOutcome(await expungeAt('Observation/', { expungeDeletedResources: true }, patientsOnly), 403, 'forbidden');
      const filtered = await craftToken(t, 'system/Patient.d?gender=other');
      await expectOutcome(await expungeAt('Patient/p2/', { expungeDeletedResources: true }, filtered), 403, 'forbidden');
      const readOnly = await craftToken(t, 'system/*.rs');
      await expectOutcome(await expungeAt('', { expungeDeletedResources: true }, readOnly), 403, 'forbidden');
      // Nothing went.
      expect((await api.get('Patient/p2/_history')).status).toBe(200);
      // A type-level token of that type may (no deleted Observation left to take yet? o3 is one): counted below.
    });

    test('one previous version (instance-version level): vread and history answer 404 for it', async () => {
      expect(await count(await expungeAt('Patient/p1/_history/1/', { expungePreviousVersions: true }))).toBe(1);
      await expectOutcome(await api.get('Patient/p1/_history/1'), 404);
      const h = await api.search('Patient/p1/_history');
      expect(h.entry.map((e: Json) => e.resource.meta.versionId)).toEqual(['3', '2']);
      // Gone: naming it again is a 404.
      await expectOutcome(await expungeAt('Patient/p1/_history/1/', { expungePreviousVersions: true }), 404);
      // Version 2 stays with expungeDeletedResources alone (p1 is live).
      expect(await count(await expungeAt('Patient/p1/_history/2/', { expungeDeletedResources: true }))).toBe(0);
      expect((await api.get('Patient/p1/_history/2')).status).toBe(200);
    });

    test('deleted resources, whole, within the limit, with a token of that type', async () => {
      expect(await outbox()).toEqual(['Observation/o1/1', 'Observation/o2/1', 'Observation/o3/1']);
      const observations = await craftToken(t, 'user/Observation.d');
      // o3: two versions (the write and the deletion).
      expect(await count(await expungeAt('Observation/', { expungeDeletedResources: true, limit: 1 }, observations))).toBe(1);
      expect((await api.get('Observation/o3')).status).toBe(410);
      expect(await count(await expungeAt('Observation/', { expungeDeletedResources: true }, observations))).toBe(1);
      await expectOutcome(await api.get('Observation/o3'), 404);
      await expectOutcome(await api.get('Observation/o3/_history/1'), 404);
      expect(await outbox()).toEqual(['Observation/o1/1', 'Observation/o2/1']);
      // p2: three versions; Binary b1 two.
      expect(await count(await expungeAt('Patient/p2/', { expungeDeletedResources: true }))).toBe(3);
      expect(await count(await expungeAt('', { expungeDeletedResources: true }))).toBe(2);
      await expectOutcome(await api.get('Patient/p2'), 404);
      await expectOutcome(await api.get('Binary/b1'), 404);
      const history = await api.search('_history?_count=100');
      expect(history.entry.map((e: Json) => e.fullUrl.replace(/^.*R4\//, ''))).not.toContainEqual(expect.stringMatching(/^(Patient\/p2|Observation\/o3|Binary\/b1)/));
      expect(await orphans(target.kind, db.url)).toEqual(none(await orphans(target.kind, db.url)));
      // The live o1 still refers to p2, as after the delete; p2's id is free again.
      expect(ids(await api.search('Observation?subject=Patient/p2'))).toEqual(['o1']);
      const again = await api.call('PUT', 'Patient/p2', { resourceType: 'Patient', id: 'p2', name: [{ family: 'Charlie' }] });
      expect(again.status).toBe(201);
      expect(((await again.json()) as Json).meta.versionId).toBe('1');
      expect(ids(await api.search('Patient?name=Bravo'))).toEqual([]);
      expect(ids(await api.search('Patient?_content=bravo'))).toEqual([]);
      expect(ids(await api.search('Patient?name=Charlie'))).toEqual(['p2']);
    });

    test('previous versions (system level): the current versions stay, searchable', async () => {
      // p1: version 2 left; o2: version 1; everything else holds one version.
      expect(await count(await expungeAt('', { expungePreviousVersions: true }))).toBe(2);
      expect((await api.search('Patient/p1/_history')).entry.map((e: Json) => e.resource.meta.versionId)).toEqual(['3']);
      expect((await api.search('Observation/o2/_history')).total ?? (await api.search('Observation/o2/_history')).entry.length).toBe(1);
      expect(ids(await api.search('Patient?gender=male'))).toEqual(['p1']);
      expect(ids(await api.search('Observation?status=amended'))).toEqual(['o2']);
      expect(await outbox()).toEqual(['Observation/o1/1']);
      const inc = await api.search('Observation?_id=o2&_include=Observation:subject');
      expect(inc.entry.map((e: Json) => `${e.search.mode}:${e.resource.id}`).sort()).toEqual(['include:p1', 'match:o2']);
      // A write after expunge: the next version number.
      expect((await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Alpha' }], gender: 'unknown' })).meta.versionId).toBe('4');
      expect(await count(await expungeAt('', { expungePreviousVersions: true }))).toBe(1);
      expect(await orphans(target.kind, db.url)).toEqual(none(await orphans(target.kind, db.url)));
    });

    test('everything (system level): searches, compartments, $everything and export see nothing; AuditEvents stay', async () => {
      const exported = async () => {
        const status = await kickOff(t, await t.token(), '/$export?_type=Patient,Observation');
        return Object.keys(await download(t, await t.token(), (await finish(t, await t.token(), status)).output));
      };
      expect((await exported()).length).toBeGreaterThan(0);
      expect(ids(await api.search('Patient/p1/$everything')).sort()).toEqual(['o2', 'p1']);
      // Types in order: o1 and o2 first (the limit stops there: o1's notification goes, s1 stays)...
      expect(await count(await expungeAt('', { expungeEverything: true, limit: 2 }))).toBe(2);
      expect(await outbox()).toEqual([]);
      expect((await t.store.subscriptions.owners('t1')).size).toBe(1);
      // ...then p1 and p2 (version 1 each) and the Subscription s1, its state and outbox with it.
      expect(await count(await expungeAt('', { expungeEverything: true }))).toBe(3);
      expect(await outbox()).toEqual([]);
      expect((await t.store.subscriptions.owners('t1')).size).toBe(0);
      expect(ids(await api.search('?_type=Patient,Observation,Binary'))).toEqual([]);
      expect(ids(await api.search('Patient/p1/Observation'))).toEqual([]);
      expect(ids(await api.search('Observation?_revinclude=Observation:subject'))).toEqual([]);
      await expectOutcome(await api.get('Patient/p1/$everything'), 404);
      expect(await exported()).toEqual([]);
      expect((await api.search('_history')).entry?.map((e: Json) => e.resource?.resourceType)).toEqual(['AuditEvent']);
      expect((await api.search('AuditEvent')).entry).toHaveLength(1);
      expect(await orphans(target.kind, db.url)).toEqual(none(await orphans(target.kind, db.url)));
      // Writes go on.
      expect((await api.create({ resourceType: 'Patient', name: [{ family: 'Delta' }] })).meta.versionId).toBe('1');
      expect(ids(await api.search('Patient?name=Delta'))).toHaveLength(1);
    });
  });
}

describe('SQLite: a resource row\'s number given again', () => {
  test('carries none of the expunged resource\'s words', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cinder-expunge-'));
    // A bulk write puts its words in FTS5 directly; the deletion then lists z as stale, and the words of
    // single writes wait in the recent rows until two rows wait.
    const t = await createTestApp({ store: createSqliteStore(join(dir, 'cinder.db'), { text: { moveAt: 2, moveAfterMs: 60_000 } }), env: ON });
    try {
      const api = fhirClient(t, await t.token());
      const entry = (id: string, family: string) => ({ resource: { resourceType: 'Patient', id, name: [{ family }] }, request: { method: 'PUT', url: `Patient/${id}` } });
      const bulk = [...Array.from({ length: 70 }, (_, i) => entry(`n${i}`, 'Other')), entry('z', 'Zulu')];
      expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: bulk })).status).toBe(200);
      expect(ids(await api.search('Patient?_content=zulu'))).toEqual(['z']);
      expect((await api.del('Patient/z')).status).toBe(200);
      expect(await count(await api.post('$expunge', params({ expungeDeletedResources: true })))).toBe(2);
      // The highest row number is free: SQLite gives it to the next resource, whose words then move into FTS5.
      await api.put200({ resourceType: 'Patient', id: 'y', name: [{ family: 'Yankee' }] });
      await api.put200({ resourceType: 'Patient', id: 'x', name: [{ family: 'Xray' }] });
      await Bun.sleep(50);
      expect(ids(await api.search('Patient?_content=zulu'))).toEqual([]);
      expect(ids(await api.search('Patient?_content=yankee'))).toEqual(['y']);
      expect(ids(await api.search('Patient?_content=xray'))).toEqual(['x']);
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

for (const target of targets) {
  describe(`a batch that fails (${target.kind})`, () => {
    test('removes nothing of its resources: the transaction rolls back whole', async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      const t = await createTestApp({ store, env: ON });
      try {
        const api = fhirClient(t, await t.token());
        for (const id of ['x', 'y']) {
          await api.put200({ resourceType: 'Patient', id, gender: 'male' });
          await api.put200({ resourceType: 'Patient', id, gender: 'female' });
          expect((await api.del(`Patient/${id}`)).status).toBe(200);
        }
        // The database refuses to remove y's row, after the batch has removed x's and both histories.
        await rawSql(target.kind, db.url, target.kind === 'sqlite'
          ? ["CREATE TRIGGER refuse BEFORE DELETE ON resources WHEN old.id = 'y' BEGIN SELECT RAISE(ABORT, 'refused'); END"]
          : ["CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF old.id = 'y' THEN RAISE EXCEPTION 'refused'; END IF; RETURN old; END $$",
             'CREATE TRIGGER refuse BEFORE DELETE ON resources FOR EACH ROW EXECUTE FUNCTION refuse()']);
        expect((await api.post('Patient/$expunge', params({ expungeDeletedResources: true }))).status).toBe(500);
        for (const id of ['x', 'y']) {
          expect((await api.get(`Patient/${id}`)).status).toBe(410);
          expect(((await api.search(`Patient/${id}/_history`)).entry ?? []).length).toBe(3);
          expect((await api.get(`Patient/${id}/_history/2`)).status).toBe(200);
        }
        await rawSql(target.kind, db.url, target.kind === 'sqlite' ? ['DROP TRIGGER refuse'] : ['DROP TRIGGER refuse ON resources']);
        expect(await count(await api.post('Patient/$expunge', params({ expungeDeletedResources: true })))).toBe(6);
      } finally {
        await t.close();
      }
    });
  });
}

describe('$expunge in the audit trail', () => {
  test('each call is one operation event ($expunge, action E), the version level included', async () => {
    const t = await createTestApp({ env: { ...ON, CINDER_AUDIT: 'on' } });
    try {
      const api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'a', gender: 'male' });
      await api.put200({ resourceType: 'Patient', id: 'a', gender: 'female' });
      expect(await count(await api.post('Patient/a/_history/1/$expunge', params({ expungePreviousVersions: true })))).toBe(1);
      expect((await api.del('Patient/a')).status).toBe(200);
      expect(await count(await api.post('Patient/a/$expunge', params({ expungeDeletedResources: true })))).toBe(2);
      await t.app.audit!.flush();
      const events = ((await api.search('AuditEvent?subtype=operation&_sort=date')).entry ?? []).map((e: Json) => e.resource);
      expect(events.map((e: Json) => [e.action, e.outcome, e.outcomeDesc])).toEqual([['E', '0', '$expunge'], ['E', '0', '$expunge']]);
      expect(t.app.audit!.counts.failed).toBe(0);
    } finally {
      await t.close();
    }
  });
});

describe('$expunge off (the default)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  test('answers 403 and is not in the CapabilityStatement', async () => {
    const api = fhirClient(t, await t.token());
    const res = await api.post('$expunge', params({ expungeDeletedResources: true }));
    const outcome = await expectOutcome(res, 403, 'forbidden');
    expect(outcome.issue[0].diagnostics).toContain('CINDER_EXPUNGE=on');
    await expectOutcome(await api.post('Patient/$expunge', params({ expungeDeletedResources: true })), 403);
    const statement = (await (await t.request(`${t.fhir()}/metadata`)).json()) as Json;
    expect(JSON.stringify(statement)).not.toContain('expunge');
  });

  test('listed at the system level and on every type but AuditEvent when on', async () => {
    const on = await createTestApp({ env: ON });
    try {
      const statement = (await (await on.request(`${on.fhir()}/metadata`)).json()) as Json;
      expect(statement.rest[0].operation.filter((o: Json) => o.name === 'expunge')).toHaveLength(1);
      const withIt = statement.rest[0].resource.filter((r: Json) => r.operation?.some((o: Json) => o.name === 'expunge')).map((r: Json) => r.type);
      expect(withIt).toContain('Patient');
      expect(withIt).not.toContain('AuditEvent');
    } finally {
      await on.close();
    }
  });
});

for (const target of targets) {
  describe(`an id given again after its resource was expunged (${target.kind})`, () => {
    test('a CodeSystem re-created from version 1 is what terminology operations read, not the expunged one', async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      const t = await createTestApp({ store, env: ON });
      try {
        const api = fhirClient(t, await t.token());
        const codeSystem = (code: string) => ({ resourceType: 'CodeSystem', id: 'cs1', url: 'http://example.org/cs', status: 'active', content: 'complete', concept: [{ code }] });
        const valid = async (code: string) => {
          const body = (await (await api.get(`CodeSystem/$validate-code?url=http://example.org/cs&code=${code}`)).json()) as Json;
          return body.parameter.find((p: Json) => p.name === 'result').valueBoolean as boolean;
        };
        await api.put200(codeSystem('a'));
        expect(await valid('a')).toBe(true);
        expect((await api.del('CodeSystem/cs1')).status).toBe(200);
        expect(await count(await api.post('CodeSystem/cs1/$expunge', params({ expungeDeletedResources: true })))).toBe(2);
        t.clock.advance(1000);
        expect((await api.put200(codeSystem('b'))).meta.versionId).toBe('1');
        expect([await valid('a'), await valid('b')]).toEqual([false, true]);
      } finally {
        await t.close();
      }
    });
  });
}
