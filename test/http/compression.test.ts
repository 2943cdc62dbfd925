/**
 * gzip answers (RFC 9110 8.4, 12.5.3): FHIR JSON answers of at least 8 KiB (searches, reads through
 * the hot route and Hono, metadata, `_pretty`) in gzip when Accept-Encoding prefers it, with
 * `Vary: Accept-Encoding`; q-values ranked, `identity;q=0` honoured; shorter answers untouched (no Vary);
 * 304 and HEAD carry no compressed body; FHIR's weak ETags kept; export downloads keep their streamed
 * gzip under the same rules, their strong ETag weakened for it. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { COMPRESS_MIN_CHARS } from '../../src/http/content-coding.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore, finish, kickOff, observation, patient, put } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';

const gunzip = async (res: Response) => new TextDecoder().decode(Bun.gunzipSync(new Uint8Array(await res.arrayBuffer())));

await eachStore((kind, fresh) => {
  describe(`compressed answers (${kind})`, () => {
    let t: TestApp;
    let token: string;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (let i = 0; i < 30; i++) await put(t, patient(`z${i}`, { name: [{ family: `Zeta-${i}`, given: ['Ann', 'Marie'] }], birthDate: `1970-01-${String(1 + (i % 28)).padStart(2, '0')}` }));
      // One resource longer than the threshold by itself.
      await put(t, patient('big', { name: Array.from({ length: 300 }, (_, i) => ({ family: `Family-${i}`, given: ['Given', `Other-${i}`] })) }));
      await put(t, observation('o1', 'z1'));
    });
    afterAll(() => t.close());

    const get = (path: string, encoding?: string, headers: Record<string, string> = {}) =>
      t.request(`${t.fhir()}/${path}`, fhirInit(token, 'GET', undefined, { ...(encoding === undefined ? {} : { 'Accept-Encoding': encoding }), ...headers }));
    /** The `Vary` header's names, sorted (`Accept` on every FHIR JSON answer, `Accept-Encoding` where compression was considered). */
    const vary = (res: Response) => res.headers.get('vary')?.split(/\s*,\s*/).sort().join(', ') ?? null;
    /** The Bundle without what differs between two requests (its id). */
    const stable = (text: string) => ({ ...(JSON.parse(text) as Json), id: undefined });

    test('a search of 8 KiB or more is gzip for a client that prefers it, the same Bundle, Vary either way', async () => {
      const plain = await get('Patient?_count=30');
      const text = await plain.text();
      expect(text.length).toBeGreaterThanOrEqual(COMPRESS_MIN_CHARS);
      expect([plain.headers.get('content-encoding'), vary(plain)]).toEqual([null, 'Accept, Accept-Encoding']);
      for (const encoding of ['gzip', 'gzip, deflate, br', 'br;q=1, gzip;q=0.5', '*', 'x-gzip', 'identity;q=0, gzip;q=0.2', 'gzip, identity;q=0.5']) {
        const res = await get('Patient?_count=30', encoding);
        expect({ encoding, coding: res.headers.get('content-encoding'), vary: vary(res), type: res.headers.get('content-type') })
          .toEqual({ encoding, coding: 'gzip', vary: 'Accept, Accept-Encoding', type: 'application/fhir+json; charset=utf-8' });
        const bytes = (await res.clone().arrayBuffer()).byteLength;
        expect(bytes).toBeLessThan(text.length / 4);
        expect(stable(await gunzip(res))).toEqual(stable(text));
      }
      for (const encoding of ['gzip;q=0', 'br', 'identity', '', 'gzip;q=0.5, identity', 'gzip;q=0.5, *', '*;q=0', 'identity;q=0']) {
        const res = await get('Patient?_count=30', encoding);
        expect({ encoding, coding: res.headers.get('content-encoding'), vary: vary(res) }).toEqual({ encoding, coding: null, vary: 'Accept, Accept-Encoding' });
        expect(stable(await res.text())).toEqual(stable(text));
      }
    });

    test('a shorter answer is left as it is (no coding, Vary: Accept alone), unless the client refuses identity', async () => {
      const small = await get('Patient?_id=z1,z2', 'gzip, deflate, br');
      const text = await small.text();
      expect(text.length).toBeLessThan(COMPRESS_MIN_CHARS);
      expect([small.status, small.headers.get('content-encoding'), vary(small)]).toEqual([200, null, 'Accept']);
      const read = await get('Patient/z1', 'gzip');
      expect([read.headers.get('content-encoding'), vary(read), read.headers.get('etag')]).toEqual([null, 'Accept', 'W/"1"']);
      const refused = await get('Patient?_id=z1,z2', 'identity;q=0, gzip');
      expect([refused.headers.get('content-encoding'), vary(refused)]).toEqual(['gzip', 'Accept, Accept-Encoding']);
      expect(stable(await gunzip(refused))).toEqual(stable(text));
      // An error too: it is FHIR JSON.
      const missing = await get('Patient/nobody', '*;q=0, gzip');
      expect([missing.status, missing.headers.get('content-encoding')]).toEqual([404, 'gzip']);
      expect(JSON.parse(await gunzip(missing)).resourceType).toBe('OperationOutcome');
    });

    test('a long resource read, through the hot route and through Hono: gzip, its weak ETag kept; 304 has no body', async () => {
      const before = t.app.hotRoutes!.answered.read;
      const plain = await (await get('Patient/big')).text();
      expect(plain.length).toBeGreaterThanOrEqual(COMPRESS_MIN_CHARS);
      const hot = await get('Patient/big', 'gzip');
      expect(t.app.hotRoutes!.answered.read).toBe(before + 2);
      expect([hot.headers.get('content-encoding'), hot.headers.get('etag'), vary(hot), hot.headers.get('last-modified')])
        .toEqual(['gzip', 'W/"1"', 'Accept, Accept-Encoding', expect.any(String)]);
      expect(await gunzip(hot)).toBe(plain);
      const viaHono = await get('Patient/big?_summary=false', 'gzip');
      expect([viaHono.headers.get('content-encoding'), viaHono.headers.get('etag')]).toEqual(['gzip', 'W/"1"']);
      expect(await gunzip(viaHono)).toBe(plain);
      for (const path of ['Patient/big', 'Patient/big?_summary=false', 'Patient/big/_history/1']) {
        const notModified = await get(path, 'gzip', { 'If-None-Match': 'W/"1"' });
        // RFC 9110 15.4.5: the Vary a 200 would carry.
        expect([notModified.status, notModified.headers.get('content-encoding'), vary(notModified), await notModified.text()])
          .toEqual([304, null, 'Accept, Accept-Encoding', '']);
      }
      const small = await get('Patient/z1', 'gzip', { 'If-None-Match': 'W/"1"' });
      expect([small.status, vary(small)]).toEqual([304, 'Accept']);
    });

    test('metadata, _pretty and HEAD', async () => {
      const plain = await t.request(`${t.fhir()}/metadata`);
      const text = await plain.text();
      const zipped = await t.request(`${t.fhir()}/metadata`, { headers: { 'Accept-Encoding': 'gzip' } });
      expect(zipped.headers.get('content-encoding')).toBe('gzip');
      const bytes = (await zipped.clone().arrayBuffer()).byteLength;
      expect(bytes).toBeLessThan(text.length / 8);
      expect(await gunzip(zipped)).toBe(text);
      const pretty = await get('Patient?_count=30&_pretty=true', 'gzip');
      expect(pretty.headers.get('content-encoding')).toBe('gzip');
      expect(await gunzip(pretty)).toContain('\n  "resourceType": "Bundle"');
      // HEAD says what GET would send, without compressing or sending anything.
      const head = await t.request(`${t.fhir()}/Patient?_count=30`, fhirInit(token, 'HEAD', undefined, { 'Accept-Encoding': 'gzip' }));
      expect([head.status, head.headers.get('content-encoding'), vary(head), head.headers.get('content-length'), head.headers.get('transfer-encoding'), await head.text()])
        .toEqual([200, 'gzip', 'Accept, Accept-Encoding', null, 'chunked', '']);
      const identityHead = await t.request(`${t.fhir()}/Patient?_count=30`, fhirInit(token, 'HEAD', undefined, { 'Accept-Encoding': 'gzip;q=0' }));
      expect([identityHead.headers.get('content-encoding'), vary(identityHead), Number(identityHead.headers.get('content-length'))])
        .toEqual([null, 'Accept, Accept-Encoding', Buffer.byteLength((await (await get('Patient?_count=30')).text()))]);
    });

    test("metadata in gzip is the statement's text request after request (its entries deflated once), and follows the tenant's topics and a subset", async () => {
      const statement = async (path: string) => {
        const plain = await (await t.request(`${t.fhir()}/${path}`)).text();
        const zipped = [];
        for (let i = 0; i < 2; i++) {
          const res = await t.request(`${t.fhir()}/${path}`, { headers: { 'Accept-Encoding': 'gzip' } });
          expect([res.status, res.headers.get('content-encoding')]).toEqual([200, 'gzip']);
          zipped.push(await gunzip(res));
        }
        expect(zipped).toEqual([plain, plain]);
        return plain;
      };
      const before = await statement('metadata');
      const subset = await statement('metadata?_elements=rest,date');
      expect(subset.length).toBeLessThan(before.length);
      // A SubscriptionTopic: the statement names it on Subscription's entry, in gzip as in plain text.
      const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
      const topic = {
        resourceType: 'Basic', id: 'gz-topic', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: 'http://example.org/topics/gzip-é' }, { url: `${X5}status`, valueCode: 'active' }, { url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: 'Observation' }] }],
      };
      expect((await t.request(`${t.fhir()}/Basic/gz-topic`, fhirInit(token, 'PUT', topic))).status).toBeLessThan(300);
      const after = await statement('metadata');
      expect([after === before, after.includes('http://example.org/topics/gzip-é')]).toEqual([false, true]);
      expect((await statement('metadata?_elements=rest,date')).includes('http://example.org/topics/gzip-é')).toBe(true);
      expect((await t.request(`${t.fhir()}/Basic/gz-topic`, fhirInit(token, 'DELETE'))).status).toBeLessThan(300);
      expect(await statement('metadata')).toBe(before);
    });

    test('export downloads: gzip as Accept-Encoding ranks it, a weak ETag for it that If-None-Match still matches', async () => {
      const manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Patient'));
      const url = manifest.output[0]!.url;
      const download = (headers: Record<string, string>) => t.request(url, fhirInit(token, 'GET', undefined, headers));
      const plain = await download({});
      const strong = plain.headers.get('etag')!;
      expect(strong).toMatch(/^"[^"]+"$/);
      const text = await plain.text();
      const zipped = await download({ 'Accept-Encoding': 'gzip' });
      expect([zipped.headers.get('content-encoding'), zipped.headers.get('etag')]).toEqual(['gzip', `W/${strong}`]);
      expect(await gunzip(zipped)).toBe(text);
      expect((await download({ 'Accept-Encoding': 'gzip;q=0.5, identity' })).headers.get('content-encoding')).toBeNull();
      expect((await download({ 'Accept-Encoding': '*' })).headers.get('content-encoding')).toBe('gzip');
      // A 304 carries the ETag its 200 would (RFC 9110 15.4.5).
      for (const tag of [strong, `W/${strong}`]) {
        const res = await download({ 'Accept-Encoding': 'gzip', 'If-None-Match': tag });
        expect([res.status, res.headers.get('etag'), await res.text()]).toEqual([304, `W/${strong}`, '']);
        const identity = await download({ 'If-None-Match': tag });
        expect([identity.status, identity.headers.get('etag')]).toEqual([304, strong]);
      }
    });
  });
});
