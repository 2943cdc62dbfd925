/**
 * A list of every resource of a type that meets a test, unknown ids included, is what a search of the type
 * reads: `$everything`'s compartment rows (Patient and Encounter) and `_revinclude`'s referrers need read and
 * search on their type (SMART v2 `rs`), within the narrower bound and filter of the two, as a Bulk Data
 * export does (export-search-scope.test.ts). A token that may read by id alone (`system/Observation.r`)
 * was given every Observation of a patient. The operation's own Patient or Encounter is read by its id, with
 * read alone; what the matches refer to is included as `_include` includes it, by read. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore, observation, patient, put } from '../helpers/export.ts';

type Json = Record<string, any>;

await eachStore((kind, fresh) => {
  describe(`listing needs read and search (${kind})`, () => {
    let t: TestApp;
    const SCOPES = [
      'system/Patient.rs', 'system/Patient.r', 'system/Observation.rs', 'system/Observation.r', 'system/Observation.s?code=http://loinc.org|A',
      'system/Encounter.r', 'system/Encounter.rs', 'system/Condition.rs', 'system/Practitioner.r', 'system/*.r', 'system/*.rs',
    ];
    const tokenOf = (scope: string) => t.tokenFor('t1', SCOPES, scope);
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      await put(t, { resourceType: 'Practitioner', id: 'dr' });
      await put(t, patient('p1', { generalPractitioner: [{ reference: 'Practitioner/dr' }] }));
      await put(t, patient('p2'));
      await put(t, { resourceType: 'Encounter', id: 'e1', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p1' } });
      await put(t, { ...observation('oa', 'p1', 'A'), encounter: { reference: 'Encounter/e1' } });
      await put(t, { ...observation('ob', 'p1', 'B'), encounter: { reference: 'Encounter/e1' } });
      await put(t, { ...observation('o2', 'p2', 'A'), meta: { tag: [{ system: 'urn:tags', code: 'secret-study' }] } });
      await put(t, { resourceType: 'Condition', id: 'c1', subject: { reference: 'Patient/p1' }, encounter: { reference: 'Encounter/e1' } });
    });
    afterAll(() => t.close());

    async function bundle(token: string, path: string): Promise<{ matches: string[]; included: string[] }> {
      const res = await t.request(t.fhir() + path, fhirInit(token));
      expect(res.status).toBe(200);
      const b = (await res.json()) as Json;
      const of = (mode: string) => ((b.entry ?? []) as Json[]).filter((e) => e.search?.mode === mode).map((e) => `${e.resource.resourceType}/${e.resource.id}`);
      return { matches: of('match'), included: of('include') };
    }

    async function refused(token: string, path: string): Promise<string> {
      const res = await t.request(t.fhir() + path, fhirInit(token));
      expect(res.status).toBe(403);
      const body = (await res.json()) as Json;
      expect(body.issue[0].code).toBe('forbidden');
      return body.issue[0].details.text as string;
    }

    test('Patient/{id}/$everything leaves out a type read by id alone; the Patient itself is read with read alone', async () => {
      const readOnly = await tokenOf('system/Patient.r system/Observation.r system/Condition.rs system/Practitioner.r');
      expect(await refused(readOnly, '/Observation?subject=Patient/p1')).toContain('Observation');
      const page = await bundle(readOnly, '/Patient/p1/$everything');
      expect(page.matches).toEqual(['Patient/p1', 'Condition/c1']);
      // What the matches name is included as an _include includes it: by read.
      expect(page.included).toEqual(['Practitioner/dr']);
      // _type names it: still left out, as it is without read.
      expect((await bundle(readOnly, '/Patient/p1/$everything?_type=Observation')).matches).toEqual([]);
      const both = await tokenOf('system/Patient.r system/Observation.rs system/Condition.rs');
      expect((await bundle(both, '/Patient/p1/$everything')).matches).toEqual(['Patient/p1', 'Condition/c1', 'Observation/oa', 'Observation/ob']);
    });

    test("a type's search filter bounds what $everything lists of it, as it bounds a search", async () => {
      const filtered = await tokenOf('system/Patient.rs system/Observation.r system/Observation.s?code=http://loinc.org|A');
      expect((await bundle(filtered, '/Patient/p1/$everything')).matches).toEqual(['Patient/p1', 'Observation/oa']);
      expect((await bundle(filtered, '/Patient/$everything')).matches).toEqual(['Patient/p1', 'Observation/oa', 'Patient/p2', 'Observation/o2']);
    });

    test('Patient/$everything lists the Patients: it needs their search, a 403 without it', async () => {
      expect(await refused(await tokenOf('system/Patient.r system/Observation.rs'), '/Patient/$everything')).toContain('search of Patient');
      const page = await bundle(await tokenOf('system/Patient.rs system/Observation.r system/Condition.rs'), '/Patient/$everything');
      expect(page.matches).toEqual(['Patient/p1', 'Condition/c1', 'Patient/p2']);
    });

    test('Encounter/{id}/$everything leaves out a type read by id alone; the Encounter itself is read with read alone', async () => {
      const page = await bundle(await tokenOf('system/Encounter.r system/Observation.r system/Condition.rs system/Patient.r'), '/Encounter/e1/$everything');
      expect(page.matches).toEqual(['Encounter/e1', 'Condition/c1']);
      expect(page.included).toEqual(['Patient/p1']);
      const both = await bundle(await tokenOf('system/Encounter.r system/Observation.rs system/Condition.rs'), '/Encounter/e1/$everything');
      expect(both.matches).toEqual(['Encounter/e1', 'Condition/c1', 'Observation/oa', 'Observation/ob']);
    });

    test('_revinclude lists referrers only of a type the token searches; _include reads the ids named with read', async () => {
      const readOnly = await tokenOf('system/Patient.rs system/Observation.r');
      expect((await bundle(readOnly, '/Patient?_id=p1&_revinclude=Observation:subject')).included).toEqual([]);
      expect((await bundle(readOnly, '/Patient?_id=p1&_revinclude=*')).included).toEqual([]);
      const filtered = await tokenOf('system/Patient.rs system/Observation.r system/Observation.s?code=http://loinc.org|A');
      expect((await bundle(filtered, '/Patient?_id=p1&_revinclude=Observation:subject')).included).toEqual(['Observation/oa']);
      const both = await tokenOf('system/Patient.rs system/Observation.rs');
      expect((await bundle(both, '/Patient?_id=p1&_revinclude=Observation:subject')).included).toEqual(['Observation/oa', 'Observation/ob']);
      // The other way, the Patient an Observation names is read by its id: read alone includes it.
      const include = await bundle(await tokenOf('system/Observation.rs system/Patient.r'), '/Observation?_id=oa&_include=Observation:subject');
      expect(include.included).toEqual(['Patient/p1']);
    });

    test('type and system history list every version of their types: they need search too; instance history is a read', async () => {
      const readOnly = await tokenOf('system/Observation.r');
      expect(await refused(readOnly, '/Observation/_history')).toContain('search of Observation');
      expect(await refused(await tokenOf('system/*.r'), '/_history')).toContain('read and search');
      const versions = async (token: string, path: string) => {
        const res = await t.request(t.fhir() + path, fhirInit(token));
        expect(res.status).toBe(200);
        return (((await res.json()) as Json).entry as Json[]).map((e) => `${e.resource.resourceType}/${e.resource.id}`).sort();
      };
      expect(await versions(readOnly, '/Observation/ob/_history')).toEqual(['Observation/ob']);
      const filtered = await tokenOf('system/Observation.r system/Observation.s?code=http://loinc.org|A');
      expect(await versions(filtered, '/Observation/_history')).toEqual(['Observation/o2', 'Observation/oa']);
      expect(await versions(await tokenOf('system/Observation.rs'), '/Observation/_history')).toEqual(['Observation/o2', 'Observation/oa', 'Observation/ob']);
      expect((await versions(await tokenOf('system/*.rs'), '/_history')).length).toBe(8);
    });

    test('type and system $meta tell what every resource of a type carries: they need search too', async () => {
      const tags = async (token: string, path: string) => {
        const res = await t.request(t.fhir() + path, fhirInit(token));
        expect(res.status).toBe(200);
        const meta = ((await res.json()) as Json).parameter[0].valueMeta as Json;
        return ((meta.tag ?? []) as Json[]).map((c) => c.code);
      };
      expect(await refused(await tokenOf('system/Observation.r'), '/Observation/$meta')).toContain('search of Observation');
      expect(await tags(await tokenOf('system/*.r'), '/$meta')).toEqual([]);
      expect(await tags(await tokenOf('system/Observation.rs'), '/Observation/$meta')).toEqual(['secret-study']);
      expect(await tags(await tokenOf('system/*.rs'), '/$meta')).toEqual(['secret-study']);
      // The instance's own is a read.
      expect(await tags(await tokenOf('system/Observation.r'), '/Observation/o2/$meta')).toEqual(['secret-study']);
    });
  });
});
