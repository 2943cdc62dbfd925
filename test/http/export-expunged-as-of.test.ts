/**
 * An export's resource whose version as of transactionTime was expunged ($expunge of one version) after T:
 * it is left out, and named in the manifest's error file, never exported as the version before it (whose
 * content the expunged one had replaced) nor as one written after T. Chains judge such a target as unknown.
 * A Group whose version as of T went so is refused at kick-off. On both databases.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, testClock, type TestApp } from '../helpers/app.ts';
import { download, eachStore, kickOff, patient, put, runExports, type Manifest } from '../helpers/export.ts';

const coded = (id: string, patientId: string) => ({
  resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '1234-5' }] }, subject: { reference: `Patient/${patientId}` },
});
const typeFilter = (f: string) => `_typeFilter=${encodeURIComponent(f)}`;

interface Issue { severity: string; code: string; diagnostics: string }

await eachStore((kind, fresh) => {
  describe(`an export and a version expunged after transactionTime (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeEach(async () => {
      t = await createTestApp({ clock: testClock(), store: await fresh(), env: { CINDER_EXPUNGE: 'on' } });
      token = await t.token();
    });
    afterEach(() => t.close());

    const expungeVersion = async (path: string) => {
      const res = await t.request(`${t.fhir()}/${path}/$expunge`, fhirInit(token, 'POST', { resourceType: 'Parameters', parameter: [{ name: 'expungePreviousVersions', valueBoolean: true }] }));
      expect(res.status).toBe(200);
    };

    /** The lines (`Type/id/version`) and the error file's issues of a finished export. */
    async function finished(url: string): Promise<{ lines: string[]; issues: Issue[] }> {
      const manifest = (await (await t.request(url, fhirInit(token))).json()) as Manifest;
      const files = await download(t, token, manifest.output);
      const lines = Object.values(files).flat().map((r) => `${r.resourceType}/${r.id}/${(r.meta as { versionId: string }).versionId}`).sort();
      const issues = Object.values(await download(t, token, manifest.error)).flat().flatMap((o) => o.issue as Issue[]);
      return { lines, issues };
    }

    test('the resource is left out and named, not exported as the version its expunged one replaced', async () => {
      await put(t, patient('p1', { gender: 'male' }));
      await put(t, patient('p1', { gender: 'female' }));
      // p2: an older version expunged, the one as of T kept: exported as it was (a guard of what held).
      await put(t, patient('p2', { gender: 'male' }));
      await put(t, patient('p2', { gender: 'female' }));
      t.clock.advance(1000);
      const url = await kickOff(t, token, '/$export?_type=Patient');
      t.clock.advance(1000);
      await put(t, patient('p1', { gender: 'other' }));
      await put(t, patient('p2', { gender: 'other' }));
      await expungeVersion('Patient/p1/_history/2');
      await expungeVersion('Patient/p2/_history/1');
      expect(await runExports(t)).toEqual(['completed']);
      const { lines, issues } = await finished(url);
      expect(lines).toEqual(['Patient/p2/2']);
      expect(issues.map((i) => ({ severity: i.severity, code: i.code, names: i.diagnostics.startsWith('Patient/p1 ') }))).toEqual([{ severity: 'information', code: 'deleted', names: true }]);
    });

    test('a chain whose target\'s version as of transactionTime was expunged does not count it as the version before', async () => {
      await put(t, patient('p1', { gender: 'female' }));
      await put(t, patient('p1', { gender: 'male' }));
      await put(t, coded('o1', 'p1'));
      t.clock.advance(1000);
      const url = await kickOff(t, token, `/$export?_type=Observation&${typeFilter('Observation?patient.gender=female')}`);
      t.clock.advance(1000);
      await put(t, patient('p1', { gender: 'female' }));
      await expungeVersion('Patient/p1/_history/2');
      expect(await runExports(t)).toEqual(['completed']);
      const { lines, issues } = await finished(url);
      expect(lines).toEqual([]);
      expect(issues.map((i) => ({ severity: i.severity, code: i.code, names: i.diagnostics.startsWith('Patient/p1 ') }))).toEqual([{ severity: 'information', code: 'deleted', names: true }]);
    });

    test('a Group whose version as of transactionTime was expunged before the kick-off read it is refused, not read as the version before', async () => {
      await put(t, patient('p1'));
      await put(t, patient('p2'));
      const group = (ids: string[]) => ({ resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: ids.map((p) => ({ entity: { reference: `Patient/${p}` } })) });
      await put(t, group(['p1']));
      await put(t, group(['p1', 'p2']));
      t.clock.advance(1000);
      // Between the kick-off's transactionTime and its read of the Group: a new version, and the one as of T expunged.
      const resources = t.store.resources;
      const read = resources.read;
      let fired = false;
      resources.read = async (tenant, type, id) => {
        if (!fired && type === 'Group') {
          fired = true;
          t.clock.advance(10);
          await put(t, group(['p2']));
          await expungeVersion('Group/g1/_history/2');
        }
        return read.call(resources, tenant, type, id);
      };
      try {
        const res = await t.request(`${t.fhir()}/Group/g1/$export`, fhirInit(token, 'GET', undefined, { Prefer: 'respond-async', Accept: 'application/fhir+json' }));
        const body = (await res.json()) as { issue?: Issue[] };
        expect({ status: res.status, expunged: body.issue?.[0]?.diagnostics.includes('expunged') }).toEqual({ status: 409, expunged: true });
      } finally {
        resources.read = read;
      }
    });
  });
});
