/**
 * Updates of a resource whose stored text is large (a DocumentReference with MiBs of base64 in
 * `content.attachment.data`): the current version's text is read only when the update may store it again
 * (ResourceWriter.measured, prepared.ts storesSameMeasured). An update to another length is a new version
 * without reading it; one of the same length (a change inside the large string's tail) or the same resource
 * is read and compared as before. On both databases, through PUT and transaction entries; the texts the
 * writer returns are counted (a work count, not a timing).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import type { ResourceRepo, ResourceWriter, Store } from '../../src/store/types.ts';

/** Base64 of `n` bytes that repeat nowhere within a MiB. */
function base64(n: number, seed: number): string {
  const bytes = new Uint8Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    bytes[i] = x >>> 24;
  }
  return Buffer.from(bytes).toString('base64');
}

const DATA = base64(1536 * 1024, 7);

const document = (id: string, data = DATA, extra: Json = {}): Json => ({
  resourceType: 'DocumentReference', id, status: 'current',
  subject: { display: 'Peter Chalmers' },
  content: [{ attachment: { contentType: 'application/pdf', title: 'discharge summary', data } }],
  ...extra,
});

/** `data` with its last four characters (one base64 quantum) replaced: the same length, another value. */
const tailChanged = (data: string) => data.slice(0, -4) + (data.endsWith('AAAA') ? 'BBBB' : 'AAAA');

await eachStore((kind, fresh) => {
  describe(`updates of a large resource (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const clock = testClock();
    /** The lengths of the stored texts the writers returned (current() and measured()) while counting. */
    const read: number[] = [];
    const counted = (store: Store): Store => {
      const resources: ResourceRepo = Object.create(store.resources);
      resources.write = (tenant, fn) => store.resources.write(tenant, (w) => {
        const counting: ResourceWriter = {
          ...w,
          current: async (type, id) => {
            const v = await w.current(type, id);
            if (v) read.push(v.content.length);
            return v;
          },
          measured: async (type, id) => {
            const v = await w.measured(type, id);
            if (v?.content !== undefined) read.push(v.content.length);
            return v;
          },
        };
        return fn(counting);
      });
      return new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) });
    };
    /** The largest stored text read during `write` (0: none). */
    const largestRead = async (write: () => Response | Promise<Response>): Promise<{ status: number; etag: string | null; largest: number }> => {
      read.length = 0;
      clock.advance(5_000);
      const res = await write();
      await res.arrayBuffer();
      return { status: res.status, etag: res.headers.get('etag'), largest: Math.max(0, ...read) };
    };
    const history = async (id: string) => (await t.store.resources.history('t1', { type: 'DocumentReference', id, count: 100 })).map((v) => v.versionId);
    const stored = async (id: string) => ((await (await api.get(`DocumentReference/${id}`)).json()) as Json);

    beforeAll(async () => {
      t = await createTestApp({ store: counted(await fresh()), clock });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('a change to another length is a new version, the large stored text unread', async () => {
      expect((await api.put('DocumentReference/longer', document('longer'))).status).toBe(201);
      const changed = await largestRead(() => api.put('DocumentReference/longer', document('longer', DATA + 'QUJD')));
      expect(changed).toEqual({ status: 200, etag: 'W/"2"', largest: 0 });
      const shorter = await largestRead(() => api.put('DocumentReference/longer', document('longer', DATA, { description: 'x' })));
      expect(shorter).toEqual({ status: 200, etag: 'W/"3"', largest: 0 });
      expect(await history('longer')).toEqual([3, 2, 1]);
      const doc = await stored('longer');
      expect([doc.description, doc.content[0].attachment.data === DATA]).toEqual(['x', true]);
    });

    test('the same resource again is read, compared and kept: no version', async () => {
      expect((await api.put('DocumentReference/same', document('same'))).status).toBe(201);
      const again = await largestRead(() => api.put('DocumentReference/same', document('same')));
      expect(again.status).toBe(200);
      expect(again.etag).toBe('W/"1"');
      expect(again.largest).toBeGreaterThan(DATA.length);
      // Its members in another order: the same value, a text of the same length.
      const { resourceType, id, status, subject, content } = document('same');
      const reordered = { content, subject, status, id, resourceType };
      expect((await largestRead(() => api.put('DocumentReference/same', reordered))).etag).toBe('W/"1"');
      expect(await history('same')).toEqual([1]);
    });

    test('a change only inside the large string\'s tail keeps the length and is a new version', async () => {
      expect((await api.put('DocumentReference/tail', document('tail'))).status).toBe(201);
      const changed = tailChanged(DATA);
      expect(changed.length).toBe(DATA.length);
      const res = await largestRead(() => api.put('DocumentReference/tail', document('tail', changed)));
      expect([res.status, res.etag]).toEqual([200, 'W/"2"']);
      expect((await stored('tail')).content[0].attachment.data === changed).toBe(true);
      // And that content sent again is the current version.
      expect((await largestRead(() => api.put('DocumentReference/tail', document('tail', changed)))).etag).toBe('W/"2"');
      expect(await history('tail')).toEqual([2, 1]);
    });

    test('characters of several UTF-8 lengths and escaped ones: the same text is kept, one of another length is a version', async () => {
      // 2-, 3- and 4-byte characters, and characters JSON escapes (a quote, a newline): the stored length is in bytes.
      const title = 'Entlassungsbrief für Zoë — 退院 🏥 "final"\n'.repeat(3000);
      const doc = (t2: string) => document('utf8', DATA, { description: t2 });
      expect((await api.put('DocumentReference/utf8', doc(title))).status).toBe(201);
      expect((await largestRead(() => api.put('DocumentReference/utf8', doc(title)))).etag).toBe('W/"1"');
      // One UTF-16 unit more, as many bytes ('ü' is two of them, 'ue' two): read, and another version.
      const longer = title.replace('für', 'fuer');
      expect((await largestRead(() => api.put('DocumentReference/utf8', doc(longer)))).etag).toBe('W/"2"');
      // As many UTF-16 units, other bytes: another version, unread.
      const other = title.replace('退', 'x');
      const res = await largestRead(() => api.put('DocumentReference/utf8', doc(other)));
      expect(res).toEqual({ status: 200, etag: 'W/"3"', largest: 0 });
      expect((await largestRead(() => api.put('DocumentReference/utf8', doc(other)))).etag).toBe('W/"3"');
      expect((await stored('utf8')).description).toBe(other);
    });

    test('a transaction\'s PUT entry: another length is a version, the large text unread; the same is kept', async () => {
      expect((await api.put('DocumentReference/bundled', document('bundled'))).status).toBe(201);
      const bundle = (resource: Json): Json => ({
        resourceType: 'Bundle', type: 'transaction',
        entry: [{ fullUrl: `${api.base}/DocumentReference/bundled`, resource, request: { method: 'PUT', url: 'DocumentReference/bundled' } }],
      });
      const changed = await largestRead(() => api.post(api.base, bundle(document('bundled', DATA, { description: 'amended' }))));
      expect([changed.status, changed.largest]).toEqual([200, 0]);
      const same = await largestRead(() => api.post(api.base, bundle(document('bundled', DATA, { description: 'amended' }))));
      expect(same.status).toBe(200);
      expect(await history('bundled')).toEqual([2, 1]);
    });
  });
});
