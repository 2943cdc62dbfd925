/**
 * SubscriptionTopics under a patient's token, on both databases. A topic is a Basic coded SubscriptionTopic, and a
 * Basic whose `subject` or `author` is the patient is in the patient's compartment: a token of `patient/*.cruds`
 * created one with the url of the tenant's topic, and from then on every app's active Subscription to that url was
 * sent nothing and a new one was refused (two active topics of one url). A topic is the tenant's, not a patient's
 * record: a patient-context token may not create, update, patch or delete one, nor turn a Basic into one (403).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, type Json } from '../helpers/fhir.ts';
import { receiver } from '../helpers/rest-hook.ts';

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const URL = 'http://example.org/topics/encounter-changes';
const CODE = { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] };

/** A topic of every change to an Encounter. */
const topic = (extra: Json = {}): Json => ({
  resourceType: 'Basic', code: CODE, ...extra,
  extension: [
    { url: `${X5}url`, valueUri: URL },
    { url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: 'Encounter' }] },
    { url: `${X5}status`, valueCode: 'active' },
  ],
});
const subscription = (endpoint: string): Json => ({
  resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: URL,
  channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] } },
});
const encounter = { resourceType: 'Encounter', status: 'planned', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: 'Patient/pa' } };

await eachStore((kind, fresh) => {
  describe(`a patient's token writes no SubscriptionTopic (${kind})`, () => {
    let t: TestApp;
    let hook: ReturnType<typeof receiver>;
    let admin: string;
    let patient: string;
    let tenantTopic: Json;
    const call = (method: string, path: string, body: unknown, token: string, headers: Record<string, string> = {}) =>
      t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body, headers));
    const drain = async () => {
      for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
    };
    /** The Encounters the app's Subscription is notified of, after one is created. */
    const notifiedOfNew = async () => {
      hook.got.length = 0;
      expect((await call('POST', 'Encounter', encounter, admin)).status).toBe(201);
      await drain();
      return hook.got.length;
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      hook = receiver();
      admin = await t.token();
      patient = await craftToken(t, 'launch/patient patient/*.cruds', { patient: 'pa' });
      expect((await call('PUT', 'Patient/pa', { resourceType: 'Patient', id: 'pa' }, admin)).status).toBe(201);
      // The tenant's topic names the patient as its author (in the patient's compartment), and an app subscribes to it.
      const res = await call('POST', 'Basic', topic({ author: { reference: 'Patient/pa' } }), admin);
      expect(res.status).toBe(201);
      tenantTopic = (await res.json()) as Json;
      expect((await call('POST', 'Subscription', subscription(hook.url), admin)).status).toBe(201);
      await drain();
      expect(await notifiedOfNew()).toBe(1);
    });
    afterAll(async () => {
      hook.stop();
      await t.close();
    });

    test('creating a topic of the same url, by any write path, is refused; the app is still notified and may subscribe again', async () => {
      const mine = { subject: { reference: 'Patient/pa' } };
      await expectOutcome(await call('POST', 'Basic', topic(mine), patient), 403, 'forbidden');
      await expectOutcome(await call('POST', 'Basic', topic({ author: { reference: 'Patient/pa' } }), patient), 403, 'forbidden');
      await expectOutcome(await call('PUT', 'Basic/patients-topic', { ...topic(mine), id: 'patients-topic' }, patient), 403, 'forbidden');
      await expectOutcome(await call('PUT', 'Basic?subject=Patient/pa&code=SubscriptionTopic', topic(mine), patient), 403, 'forbidden');
      const tx = { resourceType: 'Bundle', type: 'transaction', entry: [{ fullUrl: 'urn:uuid:4f1c7c0e-2b0a-4a51-9a57-1d1b5f6c9e01', resource: topic(mine), request: { method: 'POST', url: 'Basic' } }] };
      await expectOutcome(await call('POST', '', tx, patient), 403, 'forbidden');
      expect(await notifiedOfNew()).toBe(1);
      expect((await call('POST', 'Subscription', subscription(hook.url), admin)).status).toBe(201);
      await drain();
    });

    test("a Basic of the patient's is not turned into a topic by an update or a patch", async () => {
      const res = await call('POST', 'Basic', { resourceType: 'Basic', code: { text: 'a note' }, subject: { reference: 'Patient/pa' } }, patient);
      expect(res.status).toBe(201);
      const note = (await res.json()) as Json;
      await expectOutcome(await call('PUT', `Basic/${note.id}`, { ...topic({ subject: { reference: 'Patient/pa' } }), id: note.id }, patient), 403, 'forbidden');
      const patch = [{ op: 'replace', path: '/code', value: CODE }, { op: 'add', path: '/extension', value: topic().extension }];
      await expectOutcome(await call('PATCH', `Basic/${note.id}`, patch, patient, { 'Content-Type': 'application/json-patch+json' }), 403, 'forbidden');
      expect(((await (await call('GET', `Basic/${note.id}`, undefined, patient)).json()) as Json).meta.versionId).toBe('1');
    });

    test("the tenant's topic in the patient's compartment is neither changed nor deleted by the patient's token", async () => {
      await expectOutcome(await call('PUT', `Basic/${tenantTopic.id}`, { ...tenantTopic, extension: tenantTopic.extension.slice(0, 2) }, patient), 403, 'forbidden');
      await expectOutcome(await call('DELETE', `Basic/${tenantTopic.id}`, undefined, patient), 403, 'forbidden');
      await expectOutcome(await call('DELETE', 'Basic?code=SubscriptionTopic', undefined, patient), 403, 'forbidden');
      expect((await call('GET', `Basic/${tenantTopic.id}`, undefined, patient)).status).toBe(200);
      expect(await notifiedOfNew()).toBeGreaterThan(0);
    });

    test('a user/ scope on Basic writes topics as before', async () => {
      const user = await craftToken(t, 'user/Basic.cruds');
      const res = await call('POST', 'Basic', { ...topic(), extension: [{ url: `${X5}url`, valueUri: 'http://example.org/topics/other' }, ...topic().extension.slice(1)] }, user);
      expect(res.status).toBe(201);
      expect((await call('DELETE', `Basic/${((await res.json()) as Json).id}`, undefined, user)).status).toBe(200);
    });
  });
});
