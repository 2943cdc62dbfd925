/**
 * A Group export reads its Group's members as of transactionTime once the writes other processes sharing the
 * database stamped before it have committed (KickoffDeps.settleMs), as a job waits before its first page: a
 * member another server added just before the kick-off, whose write committed while the kick-off had begun,
 * is exported, as is a Patient another server created that a Patient export names in `patient`. On both databases.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, secondServer } from '../helpers/app.ts';
import { download, finish, patient, put, refs } from '../helpers/export.ts';
import { craftToken } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/**
 * The settle wait of the tests whose other server writes during it: long enough for that write on a loaded machine
 * (at 1 s, under a load of 18 on two cores, the write committed after the wait had ended: p2 and p3 missing), the
 * other server warmed by a first write (its connections, its token's checks) before the kick-off.
 */
const LONG_SETTLE_MS = 3000;

/**
 * The settle wait of the tests that show a kick-off is answered without it: longer than any test's timeout, so a
 * kick-off that waited for it fails the test by its timeout, however fast or loaded the machine.
 */
const UNWAITED_SETTLE_MS = 3_600_000;

/** Settles with `p`, and tells meanwhile whether it has settled. */
function watch<T>(p: T | Promise<T>) {
  const w = { settled: false, done: Promise.resolve(p).finally(() => (w.settled = true)) };
  return w;
}

const group = (...members: string[]) => ({
  resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: members.map((id) => ({ entity: { reference: `Patient/${id}` } })),
});

for (const target of targets) {
  describe(`Group members read at kick-off (${target.kind})`, () => {
    test('a member another server added, stamped before transactionTime and committed after the kick-off began, is exported', async () => {
      const db = await target.migrated();
      const t = await createTestApp({ store: db.open(), exportSettleMs: LONG_SETTLE_MS });
      try {
        const token = await t.token();
        await put(t, patient('p1'));
        await put(t, patient('p2'));
        await put(t, group('p1'));
        t.clock.advance(1000);
        const second = await secondServer(t, () => db.open());
        expect((await second(t.fhir() + '/Patient/p0', fhirInit(token, 'PUT', patient('p0')))).status).toBe(201);
        const kickOff = watch(t.request(t.fhir() + '/Group/g1/$export?_type=Patient', fhirInit(token)));
        await Bun.sleep(200);
        // The shared clock stands still: the other server stamps its write at the kick-off's time, which the kick-off's safe time (this process's) does not know of.
        const added = await second(t.fhir() + '/Group/g1', fhirInit(token, 'PUT', group('p1', 'p2')));
        expect(added.status).toBe(200);
        // The write committed within the settle wait, as the design has it (else this test would show nothing).
        expect(kickOff.settled).toBe(false);
        const res = await kickOff.done;
        expect(res.status).toBe(202);
        const manifest = await finish(t, token, res.headers.get('content-location')!);
        expect(Date.parse(manifest.transactionTime)).toBe(t.clock.now());
        expect(refs(await download(t, token, manifest.output))).toEqual(['Patient/p1', 'Patient/p2']);
      } finally {
        await t.close();
      }
    });

    test('so is a Patient another server created that a Patient export names in patient (it was a 400, not known)', async () => {
      const db = await target.migrated();
      const t = await createTestApp({ store: db.open(), exportSettleMs: LONG_SETTLE_MS });
      try {
        const token = await t.token();
        await put(t, patient('p1'));
        t.clock.advance(1000);
        const second = await secondServer(t, () => db.open());
        expect((await second(t.fhir() + '/Patient/p0', fhirInit(token, 'PUT', patient('p0')))).status).toBe(201);
        const patients = ['p1', 'p3'].map((id) => ({ name: 'patient', valueReference: { reference: `Patient/${id}` } }));
        const body = { resourceType: 'Parameters', parameter: [{ name: '_type', valueString: 'Patient' }, ...patients] };
        const kickOff = watch(t.request(t.fhir() + '/Patient/$export', fhirInit(token, 'POST', body)));
        await Bun.sleep(200);
        expect((await second(t.fhir() + '/Patient/p3', fhirInit(token, 'PUT', patient('p3')))).status).toBe(201);
        expect(kickOff.settled).toBe(false);
        const res = await kickOff.done;
        expect(res.status).toBe(202);
        const manifest = await finish(t, token, res.headers.get('content-location')!);
        expect(refs(await download(t, token, manifest.output))).toEqual(['Patient/p1', 'Patient/p3']);
      } finally {
        await t.close();
      }
    });

    test('a client gone during the settle wait starts no export (its job counted against the limit unseen), and is let go at once', async () => {
      const db = await target.migrated();
      const t = await createTestApp({ store: db.open(), exportSettleMs: UNWAITED_SETTLE_MS, env: { CINDER_EXPORT_MAX_JOBS_PER_CLIENT: '1' } });
      try {
        const token = await t.token();
        await put(t, patient('p1'));
        await put(t, group('p1'));
        t.clock.advance(1000);
        for (const path of ['/Group/g1/$export?_type=Patient', '/Patient/$export']) {
          const gone = new AbortController();
          const init = path.startsWith('/Patient')
            ? fhirInit(token, 'POST', { resourceType: 'Parameters', parameter: [{ name: 'patient', valueReference: { reference: 'Patient/p1' } }] })
            : fhirInit(token);
          const kickOff = watch(t.request(t.fhir() + path, { ...init, signal: gone.signal }));
          await Bun.sleep(100);
          // Still waiting (an hour's settle) until the client goes; then answered, not at the wait's end.
          expect(kickOff.settled).toBe(false);
          gone.abort();
          expect((await kickOff.done).status).toBe(400);
        }
        // No job was left in progress: the client's only one is free (asked of a server on the same database that
        // does not wait to settle; the limit is counted in the database).
        const second = await secondServer(t, () => db.open());
        const res = await second(t.fhir() + '/Group/g1/$export?_type=Patient', fhirInit(token));
        expect(res.status).toBe(202);
        expect(refs(await download(t, token, (await finish(t, token, res.headers.get('content-location')!)).output))).toEqual(['Patient/p1']);
      } finally {
        await t.close();
      }
    });

    test('a token that may not read Groups is refused without the settle wait', async () => {
      const db = await target.migrated();
      const t = await createTestApp({ store: db.open(), exportSettleMs: UNWAITED_SETTLE_MS });
      try {
        await put(t, patient('p1'));
        await put(t, group('p1'));
        const token = await craftToken(t, 'system/Patient.rs');
        // Answered at all: the settle wait (an hour) was not waited for.
        const res = await t.request(t.fhir() + '/Group/g1/$export?_type=Patient', fhirInit(token));
        expect(res.status).toBe(403);
      } finally {
        await t.close();
      }
    });
  });
}
