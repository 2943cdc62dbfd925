/**
 * History's `_at` on both databases (FHIR R4 http 3.1.0.11, src/fhir/history-at.ts currentSince): the
 * versions current at some point in the period its date names. A version is current from its write until
 * the next version's; a deletion is current at no time, and is listed only when made within the period
 * (it ends the version before it there). Prefixes eq, ge, gt, le, lt open the period as search's do;
 * several `_at` are the period all name.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { BASE, createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const base = `${BASE}/tenants/t1/fhir/R4`;
const noon = (day: string) => Date.parse(`2026-01-${day}T12:00:00Z`);

await eachStore((kind, fresh) => {
  describe(`history _at (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const clock = testClock(noon('01'));

    /** `id/version` of every entry of every page from `path`, in order. */
    const walk = async (path: string): Promise<string[]> => {
      const keys: string[] = [];
      for (let url: string | undefined = path; url; ) {
        const res = await api.get(url);
        expect(res.status).toBe(200);
        const bundle = (await res.json()) as Json;
        for (const e of bundle.entry ?? []) keys.push(`${e.fullUrl.slice(base.length + 1).replace('Patient/', '')}/${e.response.etag.replace(/\D/g, '')}`);
        url = link(bundle, 'next');
      }
      return keys;
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), clock });
      api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 365 * 86400 }));
      // 01-01 noon: a/1, gone/1, re/1. 01-05: gone and re deleted (v2). 01-10: a/2. 01-20: a deleted (a/3), re written again (re/3).
      for (const id of ['a', 'gone', 're']) await api.put200({ resourceType: 'Patient', id });
      clock.set(noon('05'));
      for (const id of ['gone', 're']) expect((await api.del(`Patient/${id}`)).status).toBeLessThan(300);
      clock.set(noon('10'));
      await api.put200({ resourceType: 'Patient', id: 'a', active: true });
      clock.set(noon('20'));
      expect((await api.del('Patient/a')).status).toBeLessThan(300);
      await api.put200({ resourceType: 'Patient', id: 're', active: true });
      clock.set(noon('25'));
    });
    afterAll(() => t.close());

    test('a resource deleted before the period is on no history of it; one deleted within it is', async () => {
      // On 01-12 only a/2 was current: gone and re had been deleted on 01-05.
      for (const path of ['Patient/_history', '_history']) {
        expect((await walk(`${path}?_at=2026-01-12`)).sort()).toEqual(['a/2']);
        expect((await walk(`${path}?_at=2026-01-12T08:00:00Z&_count=1`)).sort()).toEqual(['a/2']);
      }
      expect(await walk('Patient/gone/_history?_at=2026-01-12')).toEqual([]);
      expect(await walk('Patient/re/_history?_at=2026-01-12')).toEqual([]);
      // During 01-05 the first versions were current until noon, when gone and re were deleted.
      expect((await walk('Patient/_history?_at=2026-01-05')).sort()).toEqual(['a/1', 'gone/1', 'gone/2', 're/1', 're/2']);
      expect(await walk('Patient/gone/_history?_at=2026-01-05')).toEqual(['gone/2', 'gone/1']);
      // A month: every version current in it, the deletions made in it.
      expect((await walk('_history?_at=2026-01')).sort()).toEqual(['a/1', 'a/2', 'a/3', 'gone/1', 'gone/2', 're/1', 're/2', 're/3']);
      // After 01-20 noon: re/3 only, and a's deletion made on the day.
      expect((await walk('Patient/_history?_at=2026-01-20')).sort()).toEqual(['a/2', 'a/3', 're/3']);
      expect((await walk('Patient/_history?_at=2026-01-22')).sort()).toEqual(['re/3']);
      expect(await walk('Patient/a/_history?_at=2026-01-22')).toEqual([]);
    });

    test('prefixes open the period as search date prefixes do; several _at are the period all name', async () => {
      expect((await walk('Patient/_history?_at=ge2026-01-12')).sort()).toEqual(['a/2', 'a/3', 're/3']);
      expect((await walk('Patient/_history?_at=gt2026-01-10')).sort()).toEqual(['a/2', 'a/3', 're/3']);
      expect((await walk('Patient/_history?_at=lt2026-01-05')).sort()).toEqual(['a/1', 'gone/1', 're/1']);
      expect((await walk('Patient/_history?_at=le2026-01-05')).sort()).toEqual(['a/1', 'gone/1', 'gone/2', 're/1', 're/2']);
      expect((await walk('Patient/_history?_at=eq2026-01-12')).sort()).toEqual(['a/2']);
      expect((await walk('Patient/_history?_at=ge2026-01-06&_at=le2026-01-12')).sort()).toEqual(['a/1', 'a/2']);
      expect((await walk('_history?_at=ge2026-01-06&_at=le2026-01-12&_count=1')).sort()).toEqual(['a/1', 'a/2']);
      // A period of no time: nothing was current in it.
      expect(await walk('Patient/_history?_at=lt2026-01-05&_at=gt2026-01-06')).toEqual([]);
      // The self link keeps every _at.
      const bundle = (await (await api.get('Patient/_history?_at=ge2026-01-06&_at=le2026-01-12')).json()) as Json;
      expect(new URL(link(bundle, 'self')!).searchParams.getAll('_at')).toEqual(['ge2026-01-06', 'le2026-01-12']);
    });

    test('a version whose successor was expunged is still current only until the version after it', async () => {
      // x/1 on 01-25, x/2 on 01-26, x/3 on 01-27; then x/2 is expunged: x/1 was replaced by 01-27 noon at the latest.
      const expunging = await createTestApp({ store: t.store, clock, env: { CINDER_EXPUNGE: 'on' } });
      const admin = fhirClient(expunging, await craftToken(expunging, 'system/*.*', { ttl: 365 * 86400 }));
      for (const [day, active] of [['25', true], ['26', false], ['27', true]] as const) {
        clock.set(noon(day));
        await admin.put200({ resourceType: 'Patient', id: 'x', active, gender: day === '27' ? 'male' : 'female' });
      }
      clock.set(noon('28'));
      expect((await admin.post('Patient/x/_history/2/$expunge', { resourceType: 'Parameters', parameter: [{ name: 'expungePreviousVersions', valueBoolean: true }] })).status).toBe(200);
      expect(await walk('Patient/x/_history')).toEqual(['x/3', 'x/1']);
      expect(await walk('Patient/x/_history?_at=2026-01-28')).toEqual(['x/3']);
      expect((await walk('Patient/_history?_at=2026-01-28')).sort()).toEqual(['re/3', 'x/3']);
      expect((await walk('_history?_at=2026-01-28&_count=1')).sort()).toEqual(['re/3', 'x/3']);
      expect(await walk('Patient/x/_history?_at=2026-01-25')).toEqual(['x/1']);
    });

    test('a prefix naming no one period, or a bad date, is a 400 naming _at', async () => {
      for (const bad of ['ne2026-01-12', 'sa2026-01-12', 'ap2026-01-12', 'xx2026', 'ge', 'ge2026-13', '2026-01-12&_at=bad']) {
        const outcome = await expectOutcome(await api.get(`Patient/_history?_at=${bad}`), 400, 'invalid');
        expect(outcome.issue[0].expression).toEqual(['_at']);
      }
    });
  });
});
