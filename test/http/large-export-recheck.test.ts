/**
 * A bulk export's versions changed after its transactionTime are judged in code on their content as of then
 * (src/export/select.ts recheck): a large one is parsed only where a condition needs it (a patient's compartment, a
 * `_typeFilter`), one at a time, not every version of the page together whatever the conditions. On both databases,
 * through kick-off, the job run and the downloads; the texts of MiBs given to JSON.parse are counted (a work count,
 * not a timing), and the files hold the versions as of transactionTime.
 */
import { describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit } from '../helpers/app.ts';
import { download, eachStore, kickOff, put, runExports, type Manifest } from '../helpers/export.ts';
import { largeParses } from '../helpers/large-reads.ts';

/** 2 MiB of base64 (a multiple of 3 bytes: no padding). */
const DATA = Buffer.from(crypto.getRandomValues(new Uint8Array(1536 * 1024)).buffer as ArrayBuffer).toString('base64');
const LARGE = 1 << 20;

const document = (id: string, status: string) => ({
  resourceType: 'DocumentReference', id, status, subject: { reference: 'Patient/pa' },
  content: [{ attachment: { contentType: 'application/pdf', data: DATA } }],
});

await eachStore((kind, fresh) => {
  describe(`an export of large versions changed after its transactionTime (${kind})`, () => {
    test('parsed only for the conditions that need them: none for a type alone, once each for a compartment or a _typeFilter', async () => {
      const t = await createTestApp({ store: await fresh() });
      const admin = await t.token();
      await put(t, { resourceType: 'Patient', id: 'pa' });
      const queries = ['/$export?_type=DocumentReference', '/Patient/$export?_type=DocumentReference', `/$export?_type=DocumentReference&_typeFilter=${encodeURIComponent('DocumentReference?status=current')}`];
      const parsed: number[] = [];
      for (const [round, q] of queries.entries()) {
        for (const id of ['a', 'b', 'c']) await put(t, document(id, 'current'));
        const status = await kickOff(t, admin, q);
        // Changed after the job's transactionTime: the versions exported are the earlier ones, judged in code.
        t.clock.advance(1000);
        for (const id of ['a', 'b', 'c']) await put(t, document(id, 'superseded'));
        parsed.push(await largeParses(LARGE, () => runExports(t, { pageSize: 2 })));
        const manifest = (await (await t.request(status, fhirInit(admin))).json()) as Manifest;
        const lines = Object.values(await download(t, admin, manifest.output)).flat() as { id: string; status: string; meta: { versionId: string }; content: { attachment: { data: string } }[] }[];
        expect(lines.map((r) => [r.id, r.meta.versionId, r.status, r.content[0]!.attachment.data === DATA]).sort()).toEqual(['a', 'b', 'c'].map((id) => [id, String(2 * round + 1), 'current', true]));
        t.clock.advance(1000);
      }
      expect(parsed).toEqual([0, 3, 3]);
      await t.close();
    });
  });
});
