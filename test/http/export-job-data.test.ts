/**
 * Export jobs stored by another release: one written before job data had a version is resumed with
 * the plan it was given; one this release cannot read fails cleanly, with an OperationOutcome saying
 * why, and the runner goes on with the next job. On both databases.
 */
import { describe, expect, test } from 'bun:test';
import { JOB_DATA_VERSION } from '../../src/export/job-data.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, eachStore, kickOff, observation, patient, put, runExports, type Manifest } from '../helpers/export.ts';
import v0 from '../fixtures/export/job-v0.json' with { type: 'json' };

async function storedJob(t: TestApp, spec: string, progress: string): Promise<string> {
  const id = crypto.randomUUID();
  const now = t.clock.now();
  const created = await t.store.exports.jobs.create({
    id, tenant: 't1', clientId: t.admin.client.clientId, request: `${t.fhir()}/$export`, spec, transactionTime: now, progress, createdAt: now,
  }, [], 10);
  expect(created).toBe(true);
  return `${t.fhir()}/$export-status/${id}`;
}

async function seed(t: TestApp) {
  await put(t, patient('p1', { gender: 'female', birthDate: '1970-01-01' }));
  await put(t, patient('p2', { gender: 'male' }));
  await put(t, observation('o1', 'p1', '1234-5'));
  await put(t, observation('o2', 'p2', '9999-9'));
  t.clock.advance(5000);
}

await eachStore((kind, fresh) => {
  describe(`export job data on ${kind}`, () => {
    test('a job stored before versioning (data version 0) is resumed and completes as it was planned', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        await seed(t);
        const token = await t.token();
        const status = await storedJob(t, v0.spec, v0.progress);
        expect(await runExports(t)).toEqual(['completed']);
        const res = await t.request(status, fhirInit(token));
        expect(res.status).toBe(200);
        const manifest = (await res.json()) as Manifest;
        const files = await download(t, token, manifest.output);
        expect(files.Patient!.map((p) => p.id).sort()).toEqual(['p1', 'p2']);
        // _elements of the stored spec: gender kept, birthDate dropped.
        expect(files.Patient!.find((p) => p.id === 'p1')).not.toHaveProperty('birthDate');
        expect(files.Patient!.find((p) => p.id === 'p1')!.gender).toBe('female');
        // _typeFilter of the stored spec: only the matching Observation.
        expect(files.Observation!.map((o) => o.id)).toEqual(['o1']);
      } finally {
        await t.close();
      }
    });

    test('a job of a newer data version fails with the reason; the next job runs', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        await seed(t);
        const token = await t.token();
        const newer = JSON.stringify({ ...JSON.parse(v0.spec), version: JOB_DATA_VERSION + 1, steps: [{ kind: 'warp' }] });
        const unreadable = await storedJob(t, newer, v0.progress);
        t.clock.advance(1);
        const ordinary = await kickOff(t, token, '/$export?_type=Patient');
        expect(await runExports(t)).toEqual(['failed', 'completed']);
        const res = await t.request(unreadable, fhirInit(token));
        expect(res.status).toBe(500);
        const outcome = (await res.json()) as { resourceType: string; issue: { details: { text: string } }[] };
        expect(outcome.resourceType).toBe('OperationOutcome');
        expect(outcome.issue[0]!.details.text).toContain('stored by another version of Cinder');
        expect((await t.request(ordinary, fhirInit(token))).status).toBe(200);
      } finally {
        await t.close();
      }
    });

    test('a job whose process ended while running it three times fails with the reason instead of being claimed again for ever', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        await seed(t);
        const token = await t.token();
        const status = await kickOff(t, token, '/$export?_type=Patient');
        // Each claimer died at once: its lease (by the database's clock) is already over.
        for (let i = 0; i < 3; i++) expect(await t.store.exports.jobs.claim(`dead-${i}`, t.clock.now(), -1)).not.toBeNull();
        expect(await runExports(t)).toEqual(['failed']);
        const res = await t.request(status, fhirInit(token));
        expect(res.status).toBe(500);
        const outcome = (await res.json()) as { issue: { details: { text: string } }[] };
        expect(outcome.issue[0]!.details.text).toContain('ended 3 times');
      } finally {
        await t.close();
      }
    });

    test('a running job whose data cannot be read: its status says so instead of failing obscurely', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const token = await t.token();
        const status = await storedJob(t, v0.spec, '{"step":"first"}');
        const job = (await t.store.exports.jobs.claim('elsewhere', t.clock.now(), 60_000))!;
        expect(job.state).toBe('in-progress');
        const res = await t.request(status, fhirInit(token));
        expect(res.status).toBe(500);
        expect(((await res.json()) as { issue: { details: { text: string } }[] }).issue[0]!.details.text).toContain("the job's progress does not match");
      } finally {
        await t.close();
      }
    });
  });
});
