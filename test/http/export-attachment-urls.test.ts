/**
 * Bulk Data 2.0 (Attachments): "When populated, the url element SHALL be an absolute url that can be
 * de-referenced to the attachment's content". A relative Attachment.url, which R4 lets a resource store
 * (`Binary/b1`), is exported absolute under the tenant's FHIR base: in a DocumentReference's content, an
 * extension's valueAttachment, a contained resource's Attachment; absolute ones, fragments and every
 * other `url` (an extension's, a Device's network address) are left as stored, and so are the bytes of
 * lines holding none. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff, patient, put } from '../helpers/export.ts';

type Json = Record<string, any>;

const document = (id: string, url: string, extra: Json = {}) => ({
  resourceType: 'DocumentReference', id, status: 'current', subject: { reference: 'Patient/p1' },
  content: [{ attachment: { contentType: 'application/pdf', url } }], ...extra,
});

await eachStore((kind, fresh) => {
  describe(`exported Attachment urls (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      await put(t, patient('p1', {
        photo: [{ contentType: 'image/png', url: 'Binary/photo1' }],
        extension: [{ url: 'http://example.org/fhir/StructureDefinition/scan', valueAttachment: { contentType: 'image/png', url: 'Binary/scan1' } }],
      }));
      await put(t, document('relative', 'Binary/b1'));
      await put(t, document('absolute', 'https://files.example.org/b2.pdf'));
      await put(t, document('fragment', '#att', {
        contained: [{ resourceType: 'Binary', id: 'att', contentType: 'application/pdf' }],
      }));
      await put(t, { resourceType: 'Device', id: 'd1', url: 'device-17.local' });
    });
    afterAll(() => t.close());

    test('a relative url is made absolute under the FHIR base; others stay as stored', async () => {
      const base = t.fhir();
      const manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Patient,DocumentReference,Device'));
      const files = await download(t, token, manifest.output);
      const byId = (type: string, id: string) => files[type]!.find((r) => r.id === id) as Json;
      expect(byId('DocumentReference', 'relative').content[0].attachment.url).toBe(`${base}/Binary/b1`);
      expect(byId('DocumentReference', 'absolute').content[0].attachment.url).toBe('https://files.example.org/b2.pdf');
      expect(byId('DocumentReference', 'fragment').content[0].attachment.url).toBe('#att');
      const p1 = byId('Patient', 'p1');
      expect(p1.photo[0].url).toBe(`${base}/Binary/photo1`);
      expect(p1.extension[0]).toEqual({ url: 'http://example.org/fhir/StructureDefinition/scan', valueAttachment: { contentType: 'image/png', url: `${base}/Binary/scan1` } });
      // Not an Attachment: a Device's network address.
      expect(byId('Device', 'd1').url).toBe('device-17.local');
      // The rest of each resource is as stored (read back through REST).
      const stored = (await (await t.request(`${base}/DocumentReference/relative`, fhirInit(token))).json()) as Json;
      const exported: Json = { ...byId('DocumentReference', 'relative'), content: stored.content };
      expect(exported).toEqual(stored);
      expect(stored.content[0].attachment.url).toBe('Binary/b1');
    });

    test('in a contained resource, and in a Patient export', async () => {
      await put(t, document('outer', 'https://files.example.org/x.pdf', {
        contained: [{ resourceType: 'Media', id: 'm', status: 'completed', content: { contentType: 'image/png', url: 'Binary/m1' } }],
        context: { related: [{ reference: '#m' }] },
      }));
      const manifest = await finish(t, token, await kickOff(t, token, '/Patient/$export?_type=DocumentReference'));
      const files = await download(t, token, manifest.output);
      const outer = files.DocumentReference!.find((r) => r.id === 'outer') as Json;
      expect(outer.contained[0].content.url).toBe(`${t.fhir()}/Binary/m1`);
      expect((files.DocumentReference!.find((r) => r.id === 'relative') as Json).content[0].attachment.url).toBe(`${t.fhir()}/Binary/b1`);
    });
  });
});
