/**
 * Bulk Data 2.0 (Privacy and Security Considerations): a status request is "protected the same way the
 * Bulk Data Kick-off Request, including an access token with scopes that cover all resources being
 * exported". A token of the job's own client whose scopes no longer cover every exported type is
 * refused (403) at the status URL, whatever the job's state, as its files of those types are, and so is
 * its cancel (DELETE of the status URL). On both databases.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore, finish, kickOff, observation, patient, put, runExports } from '../helpers/export.ts';
import { craftToken } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`status request scopes (${kind})`, () => {
    let t: TestApp;
    let wide: string;
    let narrow: string;
    let clientId: string;
    let secret: string;
    beforeEach(async () => {
      t = await createTestApp({ store: await fresh() });
      await put(t, patient('p1'));
      await put(t, observation('o1', 'p1'));
      await put(t, { resourceType: 'Provenance', id: 'pr1', target: [{ reference: 'Observation/o1' }], recorded: '2025-01-01T00:00:00Z', agent: [{ who: { reference: 'Patient/p1' } }] });
      const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.rs', 'system/Patient.rs', 'system/Observation.rs'] });
      clientId = client.clientId;
      secret = clientSecret!;
      wide = await t.token('system/*.rs', clientId, secret);
      narrow = await t.token('system/Patient.rs system/Observation.rs', clientId, secret);
    });
    afterEach(() => t.close());

    async function refused(status: string, token: string, method = 'GET'): Promise<string> {
      const res = await t.request(status, fhirInit(token, method));
      expect(res.status).toBe(403);
      expect(res.headers.get('content-type')).toContain('application/fhir+json');
      const body = (await res.json()) as { resourceType: string; issue: { code: string; details: { text: string } }[] };
      expect(body.resourceType).toBe('OperationOutcome');
      expect(body.issue[0]!.code).toBe('forbidden');
      return body.issue[0]!.details.text;
    }

    test('a token of the same client that does not cover every exported type gets 403, running or complete', async () => {
      const status = await kickOff(t, wide, '/$export?_type=Patient,Observation');
      const patientOnly = await t.token('system/Patient.rs', clientId, secret);
      expect(await refused(status, patientOnly)).toContain('Observation');
      expect((await t.request(status, fhirInit(wide))).status).toBe(202);
      await runExports(t);
      expect(await refused(status, patientOnly)).toContain('Observation');
      // A token whose scopes cover exactly the exported types reads the manifest, as the kick-off token does.
      const manifest = (await (await t.request(status, fhirInit(narrow))).json()) as { output: { type: string }[] };
      expect(manifest.output.map((o) => o.type)).toEqual(['Patient', 'Observation']);
      expect((await t.request(status, fhirInit(wide))).status).toBe(200);
    });

    test('a cancel (DELETE of the status URL) needs the same: a narrower token gets 403 and the job and its files stay', async () => {
      const status = await kickOff(t, wide, '/$export?_type=Patient,Observation');
      const patientOnly = await t.token('system/Patient.rs', clientId, secret);
      expect(await refused(status, patientOnly, 'DELETE')).toContain('Observation');
      expect((await t.request(status, fhirInit(wide))).status).toBe(202);
      await runExports(t);
      expect(await refused(status, patientOnly, 'DELETE')).toContain('Observation');
      const manifest = (await (await t.request(status, fhirInit(wide))).json()) as { output: { type: string; url: string }[] };
      expect((await t.request(manifest.output.find((o) => o.type === 'Observation')!.url, fhirInit(wide))).status).toBe(200);
      // A token covering every exported type cancels, as the kick-off token would.
      expect((await t.request(status, fhirInit(narrow, 'DELETE'))).status).toBe(202);
      expect((await t.request(status, fhirInit(wide))).status).toBe(404);
    });

    test("a Patient export's Provenance (found by its targets) is one of the types a status token must cover", async () => {
      const status = await kickOff(t, wide, '/Patient/$export?_type=Patient,Observation,Provenance');
      const manifest = await finish(t, wide, status);
      expect(manifest.output.map((o) => o.type)).toEqual(['Patient', 'Observation', 'Provenance']);
      expect(await refused(status, narrow)).toContain('Provenance');
    });

    test("a patient-context token bound to the job's patient covers the types bound to it", async () => {
      const mine = await craftToken(t, 'patient/*.rs', { patient: 'p1' });
      const status = await kickOff(t, mine, '/Patient/$export?_type=Patient,Observation');
      await runExports(t);
      expect((await t.request(status, fhirInit(mine))).status).toBe(200);
      expect(await refused(status, await craftToken(t, 'patient/Patient.rs', { patient: 'p1' }))).toContain('Observation');
    });
  });
});
