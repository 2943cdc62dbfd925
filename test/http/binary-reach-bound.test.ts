/**
 * The bound on reading past Binaries out of a token's reach, on both databases (src/fhir/search.ts
 * PAGE_READ_IN_REACH, countInReach; src/fhir/history-at.ts reachedPage): a page of a Binary search, or of
 * type history, reads on past those whose securityContext the token may not read until it is full, past
 * 20,000 of them at most, beyond which it is a 400 `too-costly` rather than a read of the whole tenant;
 * a count reads 20,000 Binaries at most (as many are counted, one more is a 400). A page that fills before the bound is answered.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';
import { createBatchWriter, DEFAULT_BATCH_LIMITS } from '../../src/fhir/import/batches.ts';

/** PAGE_READ_IN_REACH: the most Binaries out of reach a page reads past. */
const BOUND = 20_000;
const binary = (id: string, context?: string) => ({ resourceType: 'Binary', id, contentType: 'text/plain', data: 'aGk=', ...(context ? { securityContext: { reference: context } } : {}) });
const hidden = (i: number) => binary(`h-${String(i).padStart(5, '0')}`, 'Patient/p2');

await eachStore((kind, fresh) => {
  describe(`Binary pages past ${BOUND} Binaries out of reach (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    let patient: FhirClient;
    let system: FhirClient;
    const clock = testClock();
    /** The first page's ids and whether it links on, or its 400's diagnostics. */
    const page = async (api: FhirClient, query: string) => {
      const res = await api.get(query);
      if (res.status !== 200) return (await expectOutcome(res, 400, 'too-costly')).issue[0].diagnostics as string;
      const b = (await res.json()) as Json;
      return { ids: (b.entry ?? []).map((e: Json) => e.resource.id), next: link(b, 'next') !== undefined };
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), clock });
      admin = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 86_400 }));
      for (const id of ['p1', 'p2']) await admin.put200({ resourceType: 'Patient', id });
      // Two Binaries in both tokens' reach (filed under p1, which both read; a patient's search lists none without a
      // context), written first; a minute later BOUND whose context is p2, which neither token may read: they come
      // first in id order and in history (newest first).
      for (const id of ['v-a', 'v-b']) await admin.put200(binary(id, 'Patient/p1'));
      clock.advance(60_000);
      const writer = createBatchWriter({ store: t.store, clock }, 't1', DEFAULT_BATCH_LIMITS, () => undefined);
      for (let i = 0; i < BOUND; i++) await writer.addPrepared([writer.prepare(hidden(i))]);
      await writer.drain();
      patient = fhirClient(t, await craftToken(t, 'launch/patient patient/Binary.rs patient/Patient.rs', { patient: 'p1', ttl: 86_400 }));
      system = fhirClient(t, await craftToken(t, 'system/Binary.rs system/Patient.rs?_id=p1', { ttl: 86_400 }));
    }, 120_000);
    afterAll(() => t.close());

    test('a page reads past as many as the bound, and past one more is a 400 too-costly', async () => {
      const searches = ['Binary?_count=1', 'Binary?_count=1&_sort=-_lastUpdated', '?_type=Binary&_count=1'];
      for (const api of [patient, system]) {
        for (const query of searches) {
          const expected = { ids: [query.includes('-_lastUpdated') ? 'v-b' : 'v-a'], next: true };
          expect({ query, page: await page(api, query) }).toEqual({ query, page: expected });
        }
      }
      expect(await page(system, 'Binary/_history?_count=1')).toEqual({ ids: ['v-b'], next: true });
      // A count reads as many Binaries as the bound (those written a minute later: all out of reach), and is given.
      const later = `_lastUpdated=ge${new Date(clock.now() - 1).toISOString()}`;
      const counted = async (api: FhirClient) => {
        const res = await api.get(`Binary?_summary=count&${later}`);
        return res.status === 200 ? ((await res.json()) as Json).total : (await expectOutcome(res, 400, 'too-costly')).issue[0].diagnostics;
      };
      for (const api of [patient, system]) expect(await counted(api)).toBe(0);
      // One more out of reach, last of them in id order and newest: the pages that read past BOUND must read past one more.
      await admin.put200(hidden(BOUND));
      for (const api of [patient, system]) {
        for (const query of searches) {
          expect({ query, page: await page(api, query) }).toEqual({ query, page: expect.stringMatching(/more than 20000 Binary resources out of this token's reach/) });
        }
        // Oldest first, the two in reach come before the rest: a full page, and no total, which would read them all.
        const b = (await (await api.get('Binary?_count=1&_sort=_lastUpdated&_total=accurate')).json()) as Json;
        expect({ ids: b.entry.map((e: Json) => e.resource.id), next: link(b, 'next') !== undefined, total: b.total }).toEqual({ ids: ['v-a'], next: true, total: undefined });
        expect(await page(api, 'Binary?_summary=count')).toStartWith('Counting Binary resources this token may read takes reading more than 20000');
        expect(await counted(api)).toStartWith('Counting Binary resources this token may read takes reading more than 20000');
      }
      expect(await page(system, 'Binary/_history?_count=1')).toStartWith('A page of this history takes reading more than 20000 versions');
      // The outcome names what narrows it: `_since` and `_at` a history page, `_lastUpdated` a search's page and its count.
      expect((await expectOutcome(await system.get('Binary/_history?_count=1'), 400, 'too-costly')).issue[0].expression).toEqual(['_since', '_at']);
      for (const query of ['Binary?_count=1', '?_type=Binary&_count=1', 'Binary?_summary=count']) {
        expect({ query, expression: (await expectOutcome(await patient.get(query), 400, 'too-costly')).issue[0].expression }).toEqual({ query, expression: ['_lastUpdated'] });
      }
      // Before the Binaries out of reach were written, history has the two in reach, and `_since` after them nothing to read past.
      expect(await page(system, `Binary/_history?_count=1&_at=${new Date(clock.now() - 30_000).toISOString()}`)).toEqual({ ids: ['v-b'], next: true });
      expect(await page(system, `Binary/_history?_since=${new Date(clock.now() + 1).toISOString()}`)).toEqual({ ids: [], next: false });
    }, 180_000); // about thirty reads past 20,000 Binaries each: over a minute on PostgreSQL beside a busy machine's other work
  });
});
