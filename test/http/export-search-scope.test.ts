/**
 * An export reads every resource of a type, unknown ids included, which is what a search of it reads: a
 * type is exported only to a token that may read and search it (SMART v2 `rs`, as v1 `.read` grants),
 * within the narrower patient bound and filter of the two. A token that may read by id alone
 * (`system/Patient.r`, whose search is a 403) exported every Patient. The status URL and the files are
 * held to the same, as they are to the kick-off's scopes. On both databases.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff, observation, patient, put, refs } from '../helpers/export.ts';

await eachStore((kind, fresh) => {
  describe(`export needs read and search (${kind})`, () => {
    let t: TestApp;
    /** A token of one client registered with `scopes`, asking for `scope`. */
    let tokenOf: (scope: string) => Promise<string>;
    beforeEach(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_EXPORT_MAX_JOBS_PER_CLIENT: '20' } });
      await put(t, patient('p1'));
      await put(t, patient('p2'));
      await put(t, observation('o1', 'p1', 'A'));
      await put(t, observation('o2', 'p2', 'B'));
      t.clock.advance(1000);
      await put(t, { resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p1' } }] });
      t.clock.advance(1000);
      const scopes = ['system/Patient.rs', 'system/Observation.rs', 'system/Patient.r', 'system/Observation.r', 'system/Observation.s?code=http://loinc.org|A', 'system/Group.r'];
      const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes });
      tokenOf = (scope) => t.token(scope, client.clientId, clientSecret!);
    });
    afterEach(() => t.close());

    async function refused(res: Response): Promise<{ text: string; expression?: string[] }> {
      expect(res.status).toBe(403);
      const body = (await res.json()) as { issue: { code: string; details: { text: string }; expression?: string[] }[] };
      expect(body.issue[0]!.code).toBe('forbidden');
      return { text: body.issue[0]!.details.text, ...(body.issue[0]!.expression && { expression: body.issue[0]!.expression }) };
    }

    test('a type the token may read by id but not search is not exported: named, a 403; otherwise left out', async () => {
      const readOnly = await tokenOf('system/Patient.r system/Observation.rs');
      // Its REST search of Patient is a 403 too, as an export of every Patient now is.
      expect((await t.request(t.fhir() + '/Patient', fhirInit(readOnly))).status).toBe(403);
      const named = await refused(await t.request(t.fhir() + '/$export?_type=Patient', fhirInit(readOnly)));
      expect(named.expression).toEqual(['_type']);
      expect(named.text).toContain('Patient');
      for (const path of ['/$export', '/Patient/$export']) {
        const manifest = await finish(t, readOnly, await kickOff(t, readOnly, path));
        expect(manifest.output.map((o) => o.type)).toEqual(['Observation']);
        expect(refs(await download(t, readOnly, manifest.output))).toEqual(['Observation/o1', 'Observation/o2']);
      }
    });

    test('the status URL and the files of a type need read and search too', async () => {
      const status = await kickOff(t, await tokenOf('system/Patient.rs system/Observation.rs'), '/$export?_type=Patient,Observation');
      const manifest = await finish(t, await tokenOf('system/Patient.rs system/Observation.rs'), status);
      const readOnly = await tokenOf('system/Patient.r system/Observation.rs');
      expect((await refused(await t.request(status, fhirInit(readOnly)))).text).toContain('Patient');
      expect((await refused(await t.request(status, fhirInit(readOnly, 'DELETE')))).text).toContain('Patient');
      const file = (type: string) => manifest.output.find((o) => o.type === type)!.url;
      expect((await refused(await t.request(file('Patient'), fhirInit(readOnly)))).text).toContain('Patient');
      expect((await t.request(file('Observation'), fhirInit(readOnly))).status).toBe(200);
    });

    test('a search filter narrows what a read scope exports, as it narrows the search', async () => {
      const token = await tokenOf('system/Observation.r system/Observation.s?code=http://loinc.org|A');
      const search = (await (await t.request(t.fhir() + '/Observation', fhirInit(token))).json()) as { entry?: { resource: { id: string } }[] };
      expect(search.entry?.map((e) => e.resource.id)).toEqual(['o1']);
      const manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Observation'));
      expect(refs(await download(t, token, manifest.output))).toEqual(['Observation/o1']);
    });

    test('the Group of a Group export is read by its id: read access to it suffices, its type exported only with search too', async () => {
      const token = await tokenOf('system/Group.r system/Patient.rs system/Observation.rs');
      const manifest = await finish(t, token, await kickOff(t, token, '/Group/g1/$export'));
      expect(refs(await download(t, token, manifest.output))).toEqual(['Observation/o1', 'Patient/p1']);
    });
  });
});
