/**
 * Conditional reads (FHIR R4 http.html#cread): If-None-Match and If-Modified-Since answer 304 on read
 * and vread, through the hot route and through Hono alike; Last-Modified on reads; Prefer on deletes.
 * On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`conditional read (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const clock = testClock(Date.parse('2026-03-01T08:30:15.250Z'));
    let v1: Json;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), clock });
      api = fhirClient(t, await t.token());
      v1 = await api.put200({ resourceType: 'Patient', id: 'p1', active: true });
    });
    afterAll(() => t.close());

    /** The read through the hot route (plain path) and through Hono (a query string takes it there). */
    const reads = (headers: Record<string, string>) => Promise.all([api.get('Patient/p1', headers), api.get('Patient/p1?_format=json', headers)]);

    test('Last-Modified is the HTTP date of meta.lastUpdated; ETag the version', async () => {
      for (const res of await reads({})) {
        expect(res.status).toBe(200);
        expect(res.headers.get('etag')).toBe('W/"1"');
        expect(res.headers.get('last-modified')).toBe('Sun, 01 Mar 2026 08:30:15 GMT');
        expect(((await res.json()) as Json).meta.lastUpdated).toBe(v1.meta.lastUpdated);
      }
    });

    test('If-None-Match naming the current version, weak or strong, in a list, or *: 304 without a body', async () => {
      for (const tag of ['W/"1"', '"1"', 'W/"7", W/"1"', '*']) {
        for (const res of await reads({ 'If-None-Match': tag })) {
          expect({ tag, status: res.status }).toEqual({ tag, status: 304 });
          expect(await res.text()).toBe('');
          expect(res.headers.get('etag')).toBe('W/"1"');
          expect(res.headers.get('last-modified')).toBe('Sun, 01 Mar 2026 08:30:15 GMT');
        }
      }
    });

    test('If-None-Match naming another version: 200 with the resource', async () => {
      for (const res of await reads({ 'If-None-Match': 'W/"2"' })) {
        expect(res.status).toBe(200);
        expect(((await res.json()) as Json).id).toBe('p1');
      }
    });

    test('If-Modified-Since, an HTTP-date at or after the last update (whole seconds): 304; before it, or not an HTTP-date: 200', async () => {
      for (const [since, status] of [
        ['Sun, 01 Mar 2026 08:30:15 GMT', 304], // the same second (lastUpdated has milliseconds; HTTP dates do not)
        ['Mon, 02 Mar 2026 00:00:00 GMT', 304],
        ['Sun, 01 Mar 2026 08:30:14 GMT', 200],
        ['Sunday, 01-Mar-26 08:30:15 GMT', 304], // the obsolete forms a recipient must accept (RFC 9110 5.6.7)
        ['Sun Mar  1 08:30:15 2026', 304],
        ['yesterday', 200],
        // Not an HTTP-date, so ignored (RFC 9110 13.1.3), however late it is.
        ['2030-01-01', 200],
        ['2030-01-01T00:00:00Z', 200],
        ['Tue, 01 Jan 2030 00:00:00 +0000', 200],
      ] as const) {
        for (const res of await reads({ 'If-Modified-Since': since })) expect({ since, status: res.status }).toEqual({ since, status });
      }
    });

    test('If-None-Match decides alone when both are sent (RFC 9110 13.2.2)', async () => {
      for (const res of await reads({ 'If-None-Match': 'W/"9"', 'If-Modified-Since': 'Mon, 02 Mar 2026 00:00:00 GMT' })) expect(res.status).toBe(200);
    });

    test('after an update the old ETag no longer matches; the new one does', async () => {
      clock.advance(5_000);
      await api.put200({ resourceType: 'Patient', id: 'p1', active: false });
      for (const res of await reads({ 'If-None-Match': 'W/"1"' })) {
        expect(res.status).toBe(200);
        expect(res.headers.get('etag')).toBe('W/"2"');
        expect(((await res.json()) as Json).active).toBe(false);
      }
      for (const res of await reads({ 'If-None-Match': 'W/"2"' })) expect(res.status).toBe(304);
      for (const res of await reads({ 'If-Modified-Since': 'Sun, 01 Mar 2026 08:30:15 GMT' })) expect(res.status).toBe(200);
    });

    test('vread: 304 for the version asked about when the tag matches it', async () => {
      expect((await api.get('Patient/p1/_history/1', { 'If-None-Match': 'W/"1"' })).status).toBe(304);
      const res = await api.get('Patient/p1/_history/1', { 'If-None-Match': 'W/"2"' });
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).active).toBe(true);
    });

    test('a deleted or missing resource is 410/404 whatever the conditions', async () => {
      await api.put200({ resourceType: 'Patient', id: 'gone' });
      expect((await api.del('Patient/gone')).status).toBe(200);
      expect((await api.get('Patient/gone', { 'If-None-Match': '*' })).status).toBe(410);
      expect((await api.get('Patient/nobody', { 'If-None-Match': '*' })).status).toBe(404);
    });

    test('Prefer: return=minimal on a delete is 204 without a body, with the deletion ETag', async () => {
      await api.put200({ resourceType: 'Patient', id: 'quiet' });
      const res = await api.del('Patient/quiet', { Prefer: 'return=minimal' });
      expect(res.status).toBe(204);
      expect(await res.text()).toBe('');
      expect(res.headers.get('etag')).toBe('W/"2"');
      const loud = await api.del('Patient/quiet');
      expect(loud.status).toBe(200);
      expect(((await loud.json()) as Json).resourceType).toBe('OperationOutcome');
    });
  });
});
