/**
 * A Patient export's `patient` parameter (POST) naming many Patients: whether each exists is found a chunk
 * of ids at a time, as a Group's members are (src/export/group.ts), not one read per Patient: 10,000
 * named Patients held the kick-off request for 3.7 s on PostgreSQL, one read after another, and a body of
 * the largest size (CINDER_MAX_RESOURCE_BYTES) could name some 200,000. On both databases.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import type { ResourceRepo, Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, patient, put } from '../helpers/export.ts';
import { firstVersions } from '../helpers/versions.ts';

const PATIENTS = 2000;

await eachStore((kind, fresh) => {
  describe(`patient parameter naming many Patients (${kind})`, () => {
    let t: TestApp;
    let reads = 0;
    /** The store, counting its reads of one resource. */
    function counting(store: Store): Store {
      const resources: ResourceRepo = Object.create(store.resources);
      resources.read = (...args) => (reads++, store.resources.read(...args));
      return new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) });
    }
    beforeEach(async () => {
      t = await createTestApp({ store: counting(await fresh()) });
      const written = t.clock.now();
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions(Array.from({ length: PATIENTS }, (_, i) => patient(`p${i}`)), written)));
      t.clock.advance(1000);
      // One changed since: its version as of transactionTime is the one that counts, still a Patient then.
      await put(t, patient('p7', { gender: 'female' }));
      t.clock.advance(1000);
    });
    afterEach(() => t.close());

    const named = (ids: string[]) => ({ resourceType: 'Parameters', parameter: ids.map((id) => ({ name: 'patient', valueReference: { reference: `Patient/${id}` } })) });

    test('each named Patient is checked a chunk at a time; an unknown one is still a 400, or with lenient handling a line of the error file', async () => {
      const token = await t.token();
      const ids = [...Array.from({ length: PATIENTS }, (_, i) => `p${i}`), 'nobody'];
      reads = 0;
      const strict = await t.request(t.fhir() + '/Patient/$export', fhirInit(token, 'POST', named(ids)));
      expect(strict.status).toBe(400);
      expect(JSON.stringify(await strict.json())).toContain('Patient/nobody is not known');
      // Before: one read per named Patient (2,001).
      expect(reads).toBeLessThanOrEqual(10);
      reads = 0;
      const res = await t.request(t.fhir() + '/Patient/$export', fhirInit(token, 'POST', named(ids), { Prefer: 'handling=lenient' }));
      expect(res.status).toBe(202);
      expect(reads).toBeLessThanOrEqual(10);
      const manifest = await finish(t, token, res.headers.get('content-location')!);
      const patients = (await download(t, token, manifest.output)).Patient!;
      expect(patients).toHaveLength(PATIENTS);
      expect(JSON.stringify((await download(t, token, manifest.error)).OperationOutcome)).toContain('Patient/nobody is not known');
    }, 60_000);
  });
});
