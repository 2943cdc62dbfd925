/**
 * An instance `$meta` of a large resource reads the start of its stored text (its meta), not the whole text, for a token
 * that reads the type whole and for a patient's token where the patient's compartment decides; a patient's vread of the
 * current version and its update or delete of a large resource are judged by the compartment index, their texts not
 * parsed (a delete's or update's not read either). On both databases, through the REST API; the stored texts of MiBs
 * the store hands out and those given to JSON.parse are counted (a work count, not a timing), the answers asserted.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { countingLargeReads, largeParses, type LargeReads } from '../helpers/large-reads.ts';

/** 2 MiB of base64 (a multiple of 3 bytes: no padding). */
const DATA = Buffer.from(crypto.getRandomValues(new Uint8Array(1536 * 1024)).buffer as ArrayBuffer).toString('base64');
const LARGE = 1 << 20;
/** A tag whose display holds what a scan for the end of meta must read as a string's characters. */
const TAG = { system: 'http://example.org/tags', code: 'scan', display: 'a "quoted" }] \\ display' };

const document = (id: string, patient: string, meta: Json | undefined = { tag: [TAG] }, data = DATA): Json => ({
  resourceType: 'DocumentReference', id, ...(meta && { meta }), status: 'current', subject: { reference: `Patient/${patient}` },
  content: [{ attachment: { contentType: 'application/pdf', data } }],
});

await eachStore((kind, fresh) => {
  describe(`instance reads and writes of a large resource (${kind})`, () => {
    let t: TestApp;
    let reads: LargeReads;
    let admin: FhirClient;
    let patient: FhirClient;
    let other: FhirClient;
    /** The status and body of `fn`'s response, with the large texts it read and parsed. */
    const counted = async (fn: () => Promise<Response> | Response) => {
      let res: Response | undefined;
      let body: Json | undefined;
      let read = 0;
      const parsed = await largeParses(LARGE, async () => {
        read = await reads.during(async () => {
          res = await fn();
          body = res.status === 204 ? undefined : ((await res.json()) as Json);
        });
      });
      return { status: res!.status, body, read, parsed };
    };
    const metaOf = (body: Json | undefined) => body?.parameter?.[0]?.valueMeta as Json | undefined;

    beforeAll(async () => {
      reads = countingLargeReads(await fresh(), LARGE);
      t = await createTestApp({ store: reads.store });
      admin = fhirClient(t, await t.token());
      for (const id of ['pa', 'pb']) await admin.put200({ resourceType: 'Patient', id });
      await admin.put200(document('d', 'pa', { tag: [{ system: TAG.system, code: 'first' }] }));
      await admin.put200(document('d', 'pa'));
      patient = fhirClient(t, await craftToken(t, 'patient/*.cruds', { patient: 'pa' }));
      other = fhirClient(t, await craftToken(t, 'patient/*.cruds', { patient: 'pb' }));
    });
    afterAll(() => t.close());

    test("$meta reads the version's meta alone: current and older versions, the admin's token and the patient's", async () => {
      for (const client of [() => admin, () => patient]) {
        const current = await counted(() => client().get('DocumentReference/d/$meta'));
        expect([current.status, current.read, current.parsed]).toEqual([200, 0, 0]);
        expect(metaOf(current.body)).toEqual({ versionId: '2', lastUpdated: expect.any(String), tag: [TAG] });
      }
      const older = await counted(() => admin.get('DocumentReference/d/_history/1/$meta'));
      expect([older.status, older.read, older.parsed]).toEqual([200, 0, 0]);
      expect(metaOf(older.body)).toEqual({ versionId: '1', lastUpdated: expect.any(String), tag: [{ system: TAG.system, code: 'first' }] });
    });

    test("$meta of another patient's large resource is refused without its text read; 404 and 410 as a read answers", async () => {
      const refused = await counted(() => other.get('DocumentReference/d/$meta'));
      expect([refused.status, refused.read, refused.parsed, refused.body?.issue[0].code]).toEqual([403, 0, 0, 'forbidden']);
      expect((await admin.get('DocumentReference/nothing/$meta')).status).toBe(404);
      expect((await admin.get('DocumentReference/d/_history/9/$meta')).status).toBe(404);
      await admin.put200(document('gone', 'pa', undefined, 'AAAA'));
      expect((await admin.del('DocumentReference/gone')).status).toBe(200);
      expect((await admin.get('DocumentReference/gone/$meta')).status).toBe(410);
    });

    test('a meta longer than the start read is read with the whole text, and answers the same (a guard)', async () => {
      const tag = Array.from({ length: 2000 }, (_, i) => ({ system: TAG.system, code: `c${i}`, display: 'x'.repeat(40) }));
      await admin.put200(document('tags', 'pa', { tag }));
      const long = await counted(() => admin.get('DocumentReference/tags/$meta'));
      expect([long.status, long.read]).toEqual([200, 1]);
      expect(metaOf(long.body)).toEqual({ versionId: '1', lastUpdated: expect.any(String), tag });
    });

    test('$meta-add answers the meta of the version it wrote without parsing that version again', async () => {
      await admin.put200(document('m', 'pa'));
      const added = { system: TAG.system, code: 'added' };
      const body = { resourceType: 'Parameters', parameter: [{ name: 'meta', valueMeta: { tag: [added] } }] };
      const answer = await counted(() => admin.post('DocumentReference/m/$meta-add', body));
      // The patch reads and parses the stored version (1); the answer's meta is the written text's start.
      expect([answer.status, answer.parsed]).toEqual([200, 1]);
      expect(metaOf(answer.body)).toEqual({ versionId: '2', lastUpdated: expect.any(String), tag: [TAG, added] });
      expect(metaOf((await counted(() => admin.get('DocumentReference/m/$meta'))).body)).toEqual(metaOf(answer.body));
    });

    test("a patient's vread of the current version parses nothing; another patient's is refused unparsed", async () => {
      const mine = await counted(() => patient.get('DocumentReference/d/_history/2'));
      expect([mine.status, mine.parsed, mine.body?.content[0].attachment.data === DATA]).toEqual([200, 0, true]);
      const refused = await counted(() => other.get('DocumentReference/d/_history/2'));
      expect([refused.status, refused.parsed, refused.body?.issue[0].diagnostics]).toEqual([403, 0, 'DocumentReference is outside the patient compartment the token is limited to']);
      // An older version is judged on its content, as before.
      const older = await counted(() => patient.get('DocumentReference/d/_history/1'));
      expect([older.status, older.parsed]).toEqual([200, 1]);
    });

    test("a patient's update and delete of a large resource read none of its text; another patient's are refused unread", async () => {
      await admin.put200(document('w', 'pa'));
      await admin.put200(document('x', 'pa'));
      const refused = await counted(() => other.del('DocumentReference/w'));
      expect([refused.status, refused.read, refused.parsed, refused.body?.issue[0].code]).toEqual([403, 0, 0, 'forbidden']);
      const refusedUpdate = await counted(() => other.put('DocumentReference/w', document('w', 'pb', undefined, 'AAAA')));
      expect([refusedUpdate.status, refusedUpdate.read, refusedUpdate.parsed]).toEqual([403, 0, 0]);
      const updated = await counted(() => patient.put('DocumentReference/x', document('x', 'pa', undefined, 'AAAA')));
      expect([updated.status, updated.read, updated.parsed, updated.body?.meta.versionId]).toEqual([200, 0, 0, '2']);
      const deleted = await counted(() => patient.del('DocumentReference/w'));
      expect([deleted.status, deleted.read, deleted.parsed]).toEqual([200, 0, 0]);
      expect((await admin.get('DocumentReference/w')).status).toBe(410);
      expect(((await (await admin.get('DocumentReference/x')).json()) as Json).content[0].attachment.data).toBe('AAAA');
    });
  });
});
