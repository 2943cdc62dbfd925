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

    const bundle = (type: string, entries: unknown[]) => (): Promise<Response> | Response =>
      t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type, entry: entries }));
    const putEntry = (r: { id: string; [k: string]: unknown }) => ({ resource: r, request: { method: 'PUT', url: `Observation/${r.id}` } });

    test('a transaction\'s and a batch\'s PUT and DELETE entries are judged on what they write over', async () => {
      const tx = await racing('Observation/b1', bundle('transaction', [putEntry(observation('b1', 'A'))]), () => put(t, observation('b1', 'B')));
      expect(tx.status).toBe(403);
      expect(await stored('b1')).toBe('B');
      const batch = await racing('Observation/b2', bundle('batch', [putEntry(observation('b2', 'A'))]), () => put(t, observation('b2', 'B')));
      expect(((await batch.json()) as { entry: { response: { status: string } }[] }).entry[0]!.response.status).toStartWith('403');
      expect(await stored('b2')).toBe('B');
      await put(t, observation('b3', 'A'));
      const del = await racing('Observation/b3', bundle('transaction', [{ request: { method: 'DELETE', url: 'Observation/b3' } }]), () => put(t, observation('b3', 'B')));
      expect(del.status).toBe(403);
      expect(await stored('b3')).toBe('B');
      // Judged again on what it then finds: still in the filter, it is written, its references rewritten once.
      await put(t, observation('b4', 'A'));
      const ok = await racing('Observation/b4', bundle('transaction', [
        { fullUrl: 'urn:uuid:4b6b1a0e-0c0e-4f57-9c43-0d1f5e7e9a01', resource: { ...observation('x', 'A'), id: undefined }, request: { method: 'POST', url: 'Observation' } },
        putEntry({ ...observation('b4', 'A'), derivedFrom: [{ reference: 'urn:uuid:4b6b1a0e-0c0e-4f57-9c43-0d1f5e7e9a01' }] }),
      ]), () => put(t, { ...observation('b4', 'A'), status: 'preliminary' }));
      expect(ok.status).toBe(200);
      const now = (await (await t.request(t.fhir() + '/Observation/b4', fhirInit(await t.token()))).json()) as { derivedFrom: { reference: string }[]; meta: { versionId: string } };
      expect(now.derivedFrom[0]!.reference).toMatch(/^Observation\/[A-Za-z0-9-]+$/);
      expect(now.meta.versionId).toBe('3');
    });
  });
});
