/**
 * Instance `_history` of a large resource reads its current text only with the page: the resource is found by its
 * row (measured), and a patient-context token's reach of its current version is told by the compartment index, not by
 * reading and parsing that text again; older versions are judged on their content, as before. On both databases,
 * through the REST API; the stored texts of MiBs the store hands out are counted (a work count, not a timing), and the
 * versions shown and refused are asserted as before.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { countingLargeReads, largeParses, type LargeReads } from '../helpers/large-reads.ts';

/** 2 MiB of base64 (a multiple of 3 bytes: no padding). */
const DATA = Buffer.from(crypto.getRandomValues(new Uint8Array(1536 * 1024)).buffer as ArrayBuffer).toString('base64');
const LARGE = 1 << 20;

const document = (patient: string, status = 'current'): Json => ({
  resourceType: 'DocumentReference', id: 'h', status, subject: { reference: `Patient/${patient}` },
  content: [{ attachment: { contentType: 'application/pdf', data: DATA } }],
});

await eachStore((kind, fresh) => {
  describe(`instance history of a large resource (${kind})`, () => {
    let t: TestApp;
    let reads: LargeReads;
    let admin: FhirClient;
    let patient: FhirClient;
    let adminToken: string;
    /** The status and the versions of the entries of `client`'s history of DocumentReference/h, with the large texts read. */
    const history = async (client: FhirClient) => {
      let res: Response | undefined;
      let body: Json = {};
      const large = await reads.during(async () => {
        res = await client.get('DocumentReference/h/_history');
        body = (await res.json()) as Json;
      });
      const versions = (body.entry ?? []).map((e: Json) => Number(/W\/"(\d+)"/.exec(e.response.etag)![1]));
      return { status: res!.status, versions, large, code: body.resourceType === 'OperationOutcome' ? body.issue[0].code : undefined };
    };

    beforeAll(async () => {
      reads = countingLargeReads(await fresh(), LARGE);
      t = await createTestApp({ store: reads.store });
      adminToken = await t.token();
      admin = fhirClient(t, adminToken);
      await admin.put200({ resourceType: 'Patient', id: 'pa' });
      await admin.put200({ resourceType: 'Patient', id: 'pb' });
      for (const status of ['current', 'superseded', 'current']) await admin.put200(document('pa', status));
      patient = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'pa' }));
    });
    afterAll(() => t.close());

    test('each version is read once, with the page, for a token that reads the type whole and for its patient', async () => {
      expect(await history(admin)).toEqual({ status: 200, versions: [3, 2, 1], large: 3, code: undefined });
      expect(await history(patient)).toEqual({ status: 200, versions: [3, 2, 1], large: 3, code: undefined });
    });

    test("a patient's history parses only the versions before the current one, and its read of the resource parses nothing", async () => {
      let versions: number[] = [];
      expect(await largeParses(LARGE, async () => ({ versions } = await history(patient)))).toBe(2);
      expect(versions).toEqual([3, 2, 1]);
      let read: Response | undefined;
      expect(await largeParses(LARGE, async () => (read = await patient.get('DocumentReference/h')))).toBe(0);
      expect([read!.status, ((await read!.json()) as Json).content[0].attachment.data === DATA]).toEqual([200, true]);
      const other = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'pb' }));
      let refused: Response | undefined;
      expect(await largeParses(LARGE, async () => (refused = await other.get('DocumentReference/h')))).toBe(0);
      expect(refused!.status).toBe(403);
      expect((await refused!.json()).issue[0].diagnostics).toBe('DocumentReference is outside the patient compartment the token is limited to');
    });

    test('a page of large versions is the same Bundle written a part at a time: identity, gzip, _elements, XML and HEAD', async () => {
      const get = (query: string, headers: Record<string, string> = {}) => t.request(`${t.fhir()}/DocumentReference/h/_history${query}`, { headers: { Authorization: `Bearer ${adminToken}`, ...headers } });
      const plain = await get('', { 'Accept-Encoding': 'identity' });
      expect(plain.headers.get('content-type')).toStartWith('application/fhir+json');
      const text = await plain.text();
      const body = JSON.parse(text) as Json;
      expect(body.entry.map((e: Json) => [e.fullUrl, e.resource.content[0].attachment.data === DATA, e.request, e.response.status, e.response.etag])).toEqual([3, 2, 1].map((v) => [
        `${t.fhir()}/DocumentReference/h`, true, { method: 'PUT', url: 'DocumentReference/h' }, v === 1 ? '201' : '200', `W/"${v}"`,
      ]));
      const zipped = await get('', { 'Accept-Encoding': 'gzip' });
      expect([zipped.status, zipped.headers.get('content-encoding'), zipped.headers.get('vary')]).toEqual([200, 'gzip', 'Accept, Accept-Encoding']);
      const unzipped = JSON.parse(Buffer.from(Bun.gunzipSync(new Uint8Array(await zipped.arrayBuffer()))).toString('utf8')) as Json;
      expect(unzipped.entry).toEqual(body.entry);
      // Shaped entry by entry; `content` is mandatory (1..*), so `_elements` keeps it.
      const shaped = (await (await get('?_elements=status')).json()) as Json;
      expect(shaped.entry.map((e: Json) => Object.keys(e.resource).sort())).toEqual([3, 2, 1].map(() => ['content', 'id', 'meta', 'resourceType', 'status']));
      const xml = await get('?_format=xml');
      expect([xml.status, xml.headers.get('content-type')?.split(';')[0]]).toEqual([200, 'application/fhir+xml']);
      expect((await xml.text()).split('<entry>').length).toBe(4);
      const head = await t.request(`${t.fhir()}/DocumentReference/h/_history`, { method: 'HEAD', headers: { Authorization: `Bearer ${adminToken}`, 'Accept-Encoding': 'identity' } });
      expect([head.status, head.headers.get('content-length'), await head.text()]).toEqual([200, String(Buffer.byteLength(text)), '']);
    });

    test("a current version in another patient's compartment is refused without reading it; one back in the patient's shows the versions in reach", async () => {
      await admin.put200(document('pb'));
      expect(await history(patient)).toEqual({ status: 403, versions: [], large: 0, code: 'forbidden' });
      await admin.put200(document('pa', 'superseded'));
      // Version 4 (pb's) is read with the page and judged on its content, as before.
      expect(await history(patient)).toEqual({ status: 200, versions: [5, 3, 2, 1], large: 5, code: undefined });
      // Deleted: judged by the content it deleted (read by its version), as before.
      expect((await admin.del('DocumentReference/h')).status).toBe(200);
      expect(await history(patient)).toEqual({ status: 200, versions: [6, 5, 3, 2, 1], large: 6, code: undefined });
    });
  });
});
