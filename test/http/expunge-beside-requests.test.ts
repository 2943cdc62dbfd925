/**
 * `$expunge` beside the server's other requests: the event loop turns between its batches, on both stores. On
 * SQLite a batch's statements are synchronous and its promises settled, so an expunge of many batches ran in one
 * stretch of the thread, every other request of the process (reads, `/healthz`) waiting for all of it.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { systemClock } from '../../src/clock.ts';
import { EXPUNGE_BATCH } from '../../src/fhir/expunge.ts';
import { createBatchWriter, DEFAULT_BATCH_LIMITS } from '../../src/fhir/import/batches.ts';
import { createTestApp, fhirInit } from '../helpers/app.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const COUNT = 4 * EXPUNGE_BATCH;

for (const target of targets) {
  describe(`$expunge beside other requests (${target.kind})`, () => {
    test('the event loop turns between the batches of an expunge (a `limit` above the default 1,000 versions)', async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      const t = await createTestApp({ store, env: { CINDER_EXPUNGE: 'on' } });
      try {
        const writer = createBatchWriter({ store, clock: systemClock }, 't1', DEFAULT_BATCH_LIMITS, () => undefined);
        await writer.addPrepared(Array.from({ length: COUNT }, (_, i) => writer.prepare({ resourceType: 'Observation', id: `o${i}`, status: 'final', code: { text: 'x' } })));
        await writer.drain();
        const token = await t.token();
        let turns = 0;
        let open = true;
        const ticking = (async () => {
          while (open) {
            await new Promise((r) => setImmediate(r));
            turns++;
          }
        })();
        const before = turns;
        const res = await t.request(`${t.fhir()}/$expunge`, fhirInit(token, 'POST', { resourceType: 'Parameters', parameter: [
          { name: 'expungeEverything', valueBoolean: true }, { name: 'limit', valueInteger: COUNT },
        ] }));
        const during = turns - before;
        open = false;
        await ticking;
        expect(res.status).toBe(200);
        const body = (await res.json()) as { parameter: { name: string; valueInteger: number }[] };
        expect(body.parameter.find((p) => p.name === 'count')!.valueInteger).toBe(COUNT);
        // Four batches at least (of EXPUNGE_BATCH versions), and a turn after each.
        expect(during).toBeGreaterThanOrEqual(COUNT / EXPUNGE_BATCH);
      } finally {
        await t.close();
      }
    }, 60_000);
  });
}
