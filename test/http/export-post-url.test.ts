/**
 * A POST kick-off with its parameters in the URL and no body (MedplumClient's `bulkExport` posts
 * `$export?_type=...` so): read as a GET's, by the same rules and with the same errors; with a
 * Parameters body too, a 400 naming the URL's parameters. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { BASE, createTestApp, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, patient, put, observation, refs } from '../helpers/export.ts';

await eachStore((kind, fresh) => {
  describe(`POST kick-off with URL parameters on ${kind}`, () => {
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      await put(t, patient('p1', { gender: 'female' }));
      await put(t, patient('p2', { gender: 'male' }));
      await put(t, observation('o1', 'p1', 'A'));
    });
    afterAll(() => t.close());

    /** A POST to `path` with no body, or `body` as sent (a string), with the headers a client such as Medplum sends. */
    const post = (path: string, body?: string, headers: Record<string, string> = {}) =>
      t.request(t.fhir() + path, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, Accept: 'application/fhir+json', Prefer: 'respond-async', ...(body === undefined ? {} : { 'Content-Type': 'application/fhir+json' }), ...headers },
        ...(body === undefined ? {} : { body }),
      });
    const outcome = async (res: Response) => (await res.json()) as { issue: { details: { text: string }; expression?: string[] }[] };

    test('no body: the URL parameters are the export, and the manifest request carries them', async () => {
      const res = await post('/$export?_type=Patient&_typeFilter=Patient%3Fgender%3Dfemale');
      expect(res.status).toBe(202);
      const manifest = await finish(t, token, res.headers.get('content-location')!);
      expect(manifest.request).toBe(`${BASE}/tenants/t1/fhir/R4/$export?_type=Patient&_typeFilter=Patient%3Fgender%3Dfemale`);
      expect(refs(await download(t, token, manifest.output))).toEqual(['Patient/p1']);
    });

    test('an empty body, or a Parameters holding none, is no body; Patient and Group levels too', async () => {
      for (const body of ['', '{"resourceType":"Parameters"}', '{"resourceType":"Parameters","parameter":[]}']) {
        const res = await post('/Patient/$export?_type=Observation', body);
        expect({ body, status: res.status }).toEqual({ body, status: 202 });
        const manifest = await finish(t, token, res.headers.get('content-location')!);
        expect(refs(await download(t, token, manifest.output))).toEqual(['Observation/o1']);
      }
      await put(t, { resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p2' } }] });
      const group = await post('/Group/g1/$export?_type=Patient');
      expect(group.status).toBe(202);
      expect(refs(await download(t, token, (await finish(t, token, group.headers.get('content-location')!)).output))).toEqual(['Patient/p2']);
    });

    test('the URL parameters are read by the rules of a GET, with its errors', async () => {
      const bad = await post('/$export?_type=Nope');
      expect(bad.status).toBe(400);
      const unknown = await post('/$export?_nope=1');
      expect(unknown.status).toBe(400);
      expect((await outcome(unknown)).issue[0]!.expression).toEqual(['_nope']);
      // `patient` is a Parameters body's (a reference), as for a GET.
      const patientInUrl = await post('/Patient/$export?patient=Patient/p1');
      expect(patientInUrl.status).toBe(400);
      expect((await outcome(patientInUrl)).issue[0]!.details.text).toContain('Parameters body');
      expect((await post('/$export?_type=')).status).toBe(400);
    });

    test('URL parameters and a Parameters body holding some: a 400 naming the URL parameters', async () => {
      const body = JSON.stringify({ resourceType: 'Parameters', parameter: [{ name: '_type', valueString: 'Observation' }] });
      const res = await post('/$export?_type=Patient&_since=2020-01-01T00:00:00Z', body);
      expect(res.status).toBe(400);
      const out = await outcome(res);
      expect(out.issue[0]!.expression).toEqual(['_type', '_since']);
      expect(out.issue[0]!.details.text).toContain('not both');
      // The FHIR layer's own parameters are no export parameters.
      expect((await post('/$export?_format=json', body)).status).toBe(202);
    });
  });
});
