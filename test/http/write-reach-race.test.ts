/**
 * An update or delete by a token whose reach depends on what is stored (a SMART v2 scope filter, a patient's
 * compartment, a Binary's securityContext) is judged on the version it then writes over: a resource another
 * request created or changed between the judgement and the write's transaction is judged again (a 403 when it is
 * out of reach). The judgement read the committed state before the transaction, and a write that meanwhile created
 * the resource (on PostgreSQL, the clash writeTx now runs again) or moved it out of the filter was written over,
 * or deleted. On both databases, the other write made between the two by holding the judgement's read.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore, put } from '../helpers/export.ts';

const LOINC = 'http://loinc.org';
const observation = (id: string, code: string) => ({ resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: LOINC, code }] } });

await eachStore((kind, fresh) => {
  describe(`an update or delete is judged on what it writes over (${kind})`, () => {
    let t: TestApp;
    let token: string;
    /** Set to `Type/id`: the next read of it for the judgement waits, after it read, until `release` is called. */
    let hold: { key: string; reached: () => void; released: Promise<void> } | undefined;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      const scope = `system/Observation.cruds?code=${LOINC}|A`;
      const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: [scope] });
      token = await t.token(scope, client.clientId, clientSecret!);
      const resources = t.store.resources;
      const read = resources.read.bind(resources);
      resources.read = async (tenant: string, type: string, id: string) => {
        const v = await read(tenant, type, id);
        const h = hold;
        if (h && h.key === `${type}/${id}`) {
          hold = undefined;
          h.reached();
          await h.released;
        }
        return v;
      };
    });
    afterAll(() => t.close());

    /** Runs `request` with its judgement's read of `key` held while `between` writes. */
    async function racing(key: string, request: () => Promise<Response> | Response, between: () => Promise<unknown>): Promise<Response> {
      let reached!: () => void;
      let release!: () => void;
      const atRead = new Promise<void>((r) => (reached = r));
      hold = { key, reached, released: new Promise<void>((r) => (release = r)) };
      const pending = Promise.resolve(request());
      await atRead;
      await between();
      release();
      return pending;
    }
    const stored = async (id: string) => ((await (await t.request(t.fhir() + `/Observation/${id}`, fhirInit(await t.token()))).json()) as { code: { coding: { code: string }[] } }).code.coding[0]!.code;

    test('an update as create does not write over a resource created meanwhile out of the filter', async () => {
      const res = await racing('Observation/r1', () => t.request(t.fhir() + '/Observation/r1', fhirInit(token, 'PUT', observation('r1', 'A'))), () => put(t, observation('r1', 'B')));
      expect(res.status).toBe(403);
      expect(await stored('r1')).toBe('B');
    });

    test('an update does not write over a resource moved out of the filter meanwhile; one still in it is updated', async () => {
      await put(t, observation('r2', 'A'));
      const res = await racing('Observation/r2', () => t.request(t.fhir() + '/Observation/r2', fhirInit(token, 'PUT', { ...observation('r2', 'A'), status: 'amended' })), () => put(t, observation('r2', 'B')));
      expect(res.status).toBe(403);
      expect(await stored('r2')).toBe('B');
      await put(t, observation('r3', 'A'));
      const ok = await racing('Observation/r3', () => t.request(t.fhir() + '/Observation/r3', fhirInit(token, 'PUT', { ...observation('r3', 'A'), status: 'amended' })), () => put(t, { ...observation('r3', 'A'), status: 'preliminary' }));
      expect(ok.status).toBe(200);
    });

    test('a delete does not delete a resource moved out of the filter meanwhile', async () => {
      await put(t, observation('r4', 'A'));
      const res = await racing('Observation/r4', () => t.request(t.fhir() + '/Observation/r4', fhirInit(token, 'DELETE')), () => put(t, observation('r4', 'B')));
      expect(res.status).toBe(403);
      expect(await stored('r4')).toBe('B');
    });
  });
});
