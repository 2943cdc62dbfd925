/**
 * Version-specific references to an entry's fullUrl in a transaction (FHIR R4 http 3.1.0.11.2: when the
 * server assigns an id it "SHALL also update any references to that resource in the same bundle ...
 * Version-specific references should remain as version-specific references"; bundle.html strips the
 * version before matching a fullUrl), on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const OTHER = 'http://other.example.org/fhir';
const tx = (entry: Json[]) => ({ resourceType: 'Bundle', type: 'transaction', entry });
const observation = (subject: string, focus: string[] = []) => ({
  resourceType: 'Observation', status: 'final', code: { text: 'versioned' }, subject: { reference: subject },
  ...(focus.length ? { focus: focus.map((reference) => ({ reference })) } : {}),
});
const createObs = (resource: Json) => ({ resource, request: { method: 'POST', url: 'Observation' } });

await eachStore((kind, fresh) => {
  describe(`version-specific references to entries (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const { ok, nothingWritten } = bundlePoster(() => t, () => api);
    const stored = async (location: string) => (await (await api.get(location.replace(/\/_history\/\d+$/, ''))).json()) as Json;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test("a POSTed entry's fullUrl, absolute or relative, with a version becomes the new id at version 1", async () => {
      for (const fullUrl of [`${OTHER}/Patient/vX`, `${api.base}/Patient/vX`]) {
        const res = await ok(tx([
          { fullUrl, resource: { resourceType: 'Patient', active: true }, request: { method: 'POST', url: 'Patient' } },
          { fullUrl: fullUrl.replace('Patient/vX', 'Observation/o1'), ...createObs(observation(`${fullUrl}/_history/1`, ['Patient/vX/_history/1', 'Patient/vX'])) },
        ]));
        const id = res.entry[0].resource.id;
        const obs = await stored(res.entry[1].response.location);
        expect(obs.subject.reference).toBe(`Patient/${id}/_history/1`);
        expect(obs.focus.map((f: Json) => f.reference)).toEqual([`Patient/${id}/_history/1`, `Patient/${id}`]);
      }
    });

    test('a conditional create that finds its resource, or an update, is referred to at the version the transaction leaves', async () => {
      const p = await api.create({ resourceType: 'Patient', identifier: [{ system: 'urn:x', value: 'v-1' }] });
      await api.put200({ ...p, active: true });
      const found = await ok(tx([
        { fullUrl: `${OTHER}/Patient/a`, resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=urn:x|v-1' } },
        createObs(observation(`${OTHER}/Patient/a/_history/7`)),
      ]));
      expect((await stored(found.entry[1].response.location)).subject.reference).toBe(`Patient/${p.id}/_history/2`);
      // A conditional update writes version 3; one whose content is what is stored writes none and leaves 3.
      const updated = { resourceType: 'Patient', identifier: [{ system: 'urn:x', value: 'v-1' }], active: false };
      for (const expected of ['3', '3']) {
        const res = await ok(tx([
          createObs(observation(`${OTHER}/Patient/b/_history/1`)),
          { fullUrl: `${OTHER}/Patient/b`, resource: updated, request: { method: 'PUT', url: 'Patient?identifier=urn:x|v-1' } },
        ]));
        expect(res.entry[1].resource.meta.versionId).toBe(expected);
        expect((await stored(res.entry[0].response.location)).subject.reference).toBe(`Patient/${p.id}/_history/3`);
      }
      // A PUT by id under another server's fullUrl creates version 1 of its id.
      const created = await ok(tx([
        createObs(observation(`${OTHER}/Patient/vc-1/_history/5`)),
        { fullUrl: `${OTHER}/Patient/vc-1`, resource: { resourceType: 'Patient', id: 'vc-1' }, request: { method: 'PUT', url: 'Patient/vc-1' } },
      ]));
      expect((await stored(created.entry[0].response.location)).subject.reference).toBe('Patient/vc-1/_history/1');
    });

    test("this server's URL of the resource keeps the version it names; a versioned urn:uuid is no reference", async () => {
      await api.put200({ resourceType: 'Patient', id: 'vk-1' });
      await api.put200({ resourceType: 'Patient', id: 'vk-1', active: true });
      const res = await ok(tx([
        { fullUrl: `${api.base}/Patient/vk-1`, resource: { resourceType: 'Patient', id: 'vk-1', active: false }, request: { method: 'PUT', url: 'Patient/vk-1' } },
        createObs(observation('Patient/vk-1/_history/1')),
      ]));
      expect((await stored(res.entry[1].response.location)).subject.reference).toBe('Patient/vk-1/_history/1');
      const outcome = await nothingWritten(tx([
        { fullUrl: 'urn:uuid:0b6c3c1e-1d2e-4f3a-8b4c-5d6e7f8a9b0c', resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
        createObs(observation('urn:uuid:0b6c3c1e-1d2e-4f3a-8b4c-5d6e7f8a9b0c/_history/1')),
      ]), 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].resource.subject']);
    });
  });

  describe(`version-specific references to a Subscription entry, which activation rewrites (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const { ok } = bundlePoster(() => t, () => api);
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('a Subscription entry referred to by version writes a new version whatever activation makes of it, and is referred to at it', async () => {
      const subscription = {
        resourceType: 'Subscription', id: 'vs-1', status: 'requested', reason: 'versioned', criteria: 'Observation?code=urn:x|1',
        channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook', payload: 'application/fhir+json' },
      };
      await api.put200({ resourceType: 'Patient', id: 'vs-p' });
      expect((await api.put200(subscription)).status).toBe('active');
      // Stored active: the same with an error text (activation drops it, leaving what is stored), `requested`
      // (activated anew) and the same as stored: each a new version (the version was settled before activation: a 500).
      for (const [sent, expected] of [[{ ...subscription, status: 'active', error: 'stale' }, '2'], [subscription, '3'], [{ ...subscription, status: 'active' }, '4']] as const) {
        const res = await ok(tx([
          { fullUrl: `${OTHER}/Subscription/vs-1`, resource: sent, request: { method: 'PUT', url: 'Subscription/vs-1' } },
          createObs(observation('Patient/vs-p', [`${OTHER}/Subscription/vs-1/_history/9`])),
        ]));
        expect(res.entry[0].response.etag).toBe(`W/"${expected}"`);
        const obs = (await (await api.get(res.entry[1].response.location.replace(/\/_history\/\d+$/, ''))).json()) as Json;
        expect(obs.focus[0].reference).toBe(`Subscription/vs-1/_history/${expected}`);
      }
    });
  });
});
