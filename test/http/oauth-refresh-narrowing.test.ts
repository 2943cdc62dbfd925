/**
 * A refresh that asks for a `scope` narrower than its grant, by meaning, through `app.request()`, on both
 * databases. SMART App Launch 2.2 (Refresh access token): the scopes requested "SHALL be ... equal to or a
 * subset of the scopes granted"; RFC 6749 6: none "not originally granted by the resource owner". A resource
 * scope asked is granted when the grant implies it (`patient/*.read` implies `patient/Patient.read`,
 * `patient/*.rs` and `patient/Observation.rs?category=laboratory`; a `user/` scope implies its `patient/` form
 * while the grant has a patient in context); any other scope only when it was granted as it is. The new
 * access token carries the scopes asked, and the grant's context; the refresh token keeps its grant.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { decodeJwt } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { createUser } from '../../src/auth/users.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { fhirClient, ids, type Json } from '../helpers/fhir.ts';
import { basic, csrfCookie, FORM, hiddenFields, PASSWORD, post, redeem, redirectParams, REDIRECT, signIn } from '../helpers/oauth.ts';
import { receiver } from '../helpers/rest-hook.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

type Tokens = { access_token: string; refresh_token?: string; patient?: string; encounter?: string; scope: string; error?: string; error_description?: string };

const category = (code: string) => [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code }] }];

for (const target of targets) {
  describe(`refresh narrowing by meaning, on ${target.kind}`, () => {
    let t: TestApp;
    let c: { id: string; secret: string };
    const auth = () => ({ Authorization: basic(c.id, c.secret) });

    beforeAll(async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      t = await createTestApp({ store, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      const admin = fhirClient(t, await t.token());
      const client = await createClient(t.store, t.clock, {
        tenant: 't1', name: 'Refreshing app', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT],
        scopes: ['launch/patient', 'patient/*.cruds', 'user/*.cruds'],
      });
      c = { id: client.client.clientId, secret: client.clientSecret! };
      for (const id of ['p1', 'p2']) await admin.put200({ resourceType: 'Patient', id });
      for (const [id, patient, kind] of [['o1-lab', 'p1', 'laboratory'], ['o1-vital', 'p1', 'vital-signs'], ['o2-lab', 'p2', 'laboratory']]) {
        await admin.put200({ resourceType: 'Observation', id, status: 'final', category: category(kind!), code: { text: 'x' }, subject: { reference: `Patient/${patient}` } });
      }
      await admin.put200({ resourceType: 'Encounter', id: 'e2', status: 'in-progress', class: { code: 'AMB' }, subject: { reference: 'Patient/p2' } });
      for (const [username, fhirUser] of [['pat', 'Patient/p1'], ['doc', 'Practitioner/d-1']] as const) {
        await createUser(t.store, t.clock, { tenant: 't1', username, password: PASSWORD, fhirUser });
      }
    }, 120_000);
    afterAll(() => t.close());

    /** Signs in (`username`) for `scope`, picks `patient` when the picker asks, redeems the code; the refresh token. */
    async function grant(username: string, scope: string, patient?: string, extra: Record<string, string> = {}): Promise<string> {
      let res = await signIn(t, { clientId: c.id, scope, extra }, username);
      if (patient !== undefined) {
        const html = await res.text();
        res = await t.request('/oauth2/authorize', {
          method: 'POST', headers: { ...FORM, Cookie: csrfCookie(res) }, body: new URLSearchParams({ ...hiddenFields(html), action: 'pick', patient }),
        });
      }
      const body = (await (await redeem(t, redirectParams(res).get('code')!, c)).json()) as Tokens;
      expect(body.refresh_token).toBeDefined();
      return body.refresh_token!;
    }

    const refresh = async (token: string, scope?: string) => {
      const res = await post(t, { grant_type: 'refresh_token', refresh_token: token, ...(scope === undefined ? {} : { scope }) }, auth());
      return { status: res.status, body: (await res.json()) as Tokens };
    };
    const refused = async (token: string, scope: string) => {
      expect(await refresh(token, scope)).toEqual({ status: 400, body: expect.objectContaining({ error: 'invalid_request' }) });
    };
    const introspect = async (token: string) => (await (await post(t, { token }, auth(), '/oauth2/introspect')).json()) as Json;
    const status = async (token: string, path: string) => (await fhirClient(t, token).get(path)).status;
    const search = async (token: string, query: string) => ids(await fhirClient(t, token).search(query)).sort();

    test('from user/*.read (a Patient user: patient/*.read), narrower scopes by meaning are granted as asked, and bound the token', async () => {
      const rt = await grant('pat', 'openid fhirUser offline_access user/*.read patient/Observation.write');

      const one = await refresh(rt, 'openid patient/Patient.read');
      expect(one.status).toBe(200);
      expect(one.body).toMatchObject({ scope: 'openid patient/Patient.read', patient: 'p1' });
      expect(decodeJwt(one.body.access_token)).toMatchObject({ scope: 'openid patient/Patient.read', patient: 'p1', fhirUser: `${t.fhir()}/Patient/p1` });
      expect(await status(one.body.access_token, 'Patient/p1')).toBe(200);
      expect(await status(one.body.access_token, 'Observation/o1-lab')).toBe(403);
      expect(await introspect(one.body.access_token)).toMatchObject({ active: true, scope: 'openid patient/Patient.read', patient: 'p1' });

      const v2 = await refresh(rt, 'patient/*.rs');
      expect(v2.status).toBe(200);
      expect(v2.body).toMatchObject({ scope: 'patient/*.rs', patient: 'p1' });
      expect(await search(v2.body.access_token, 'Observation')).toEqual(['o1-lab', 'o1-vital']);
      expect(await status(v2.body.access_token, 'Patient/p2')).toBe(403);

      const lab = await refresh(rt, 'patient/Observation.rs?category=laboratory');
      expect(lab.status).toBe(200);
      expect(lab.body).toMatchObject({ scope: 'patient/Observation.rs?category=laboratory', patient: 'p1' });
      expect(await search(lab.body.access_token, 'Observation')).toEqual(['o1-lab']);
      expect(await status(lab.body.access_token, 'Observation/o1-vital')).toBe(403);
      expect(await status(lab.body.access_token, 'Patient/p1')).toBe(403);
      expect(await introspect(lab.body.access_token)).toMatchObject({ active: true, scope: 'patient/Observation.rs?category=laboratory' });

      // Read from patient/*.read and write from patient/Observation.write: each permission implied by one of them.
      const both = await refresh(rt, 'patient/Observation.cruds');
      expect(both.body.scope).toBe('patient/Observation.cruds');
      const observation = (patient: string) => ({ resourceType: 'Observation', status: 'final', code: { text: 'self-reported' }, subject: { reference: `Patient/${patient}` } });
      expect((await fhirClient(t, both.body.access_token).post('Observation', observation('p1'))).status).toBe(201);
      expect((await fhirClient(t, both.body.access_token).post('Observation', observation('p2'))).status).toBe(403);

      // Wider than the grant, or a scope not granted as it is: refused, as before.
      await refused(rt, 'patient/*.cruds');
      await refused(rt, 'patient/Patient.write');
      await refused(rt, 'openid profile');
      await refused(rt, 'launch/patient patient/*.rs');

      // The refresh token keeps its grant: a later refresh, and its introspection, have the original scopes.
      const again = await refresh(rt);
      expect(again.body).toMatchObject({ scope: 'openid fhirUser offline_access patient/*.read patient/Observation.write', patient: 'p1' });
      expect((await refresh(rt, 'openid fhirUser offline_access user/*.read patient/Observation.write')).body.scope)
        .toBe('openid fhirUser offline_access patient/*.read patient/Observation.write');
      expect(await introspect(rt)).toMatchObject({ active: true, scope: 'openid fhirUser offline_access patient/*.read patient/Observation.write' });
    });

    test('staff with a patient in context: user/*.read narrows to patient/ scopes bound to that patient, or to filtered user/ ones', async () => {
      const rt = await grant('doc', 'openid fhirUser offline_access launch/patient user/*.read', 'p2');

      const narrowed = await refresh(rt, 'openid patient/Observation.rs');
      expect(narrowed.status).toBe(200);
      expect(narrowed.body).toMatchObject({ scope: 'openid patient/Observation.rs', patient: 'p2' });
      expect(decodeJwt(narrowed.body.access_token)).toMatchObject({ scope: 'openid patient/Observation.rs', patient: 'p2', fhirUser: `${t.fhir()}/Practitioner/d-1` });
      expect(await search(narrowed.body.access_token, 'Observation')).toEqual(['o2-lab']);
      expect(await status(narrowed.body.access_token, 'Observation/o1-lab')).toBe(403);
      expect(await status(narrowed.body.access_token, 'Patient/p2')).toBe(403);
      expect(await introspect(narrowed.body.access_token)).toMatchObject({ active: true, scope: 'openid patient/Observation.rs', patient: 'p2' });

      const labs = await refresh(rt, 'user/Observation.rs?category=laboratory');
      expect(labs.body.scope).toBe('user/Observation.rs?category=laboratory');
      expect(await search(labs.body.access_token, 'Observation')).toEqual(['o1-lab', 'o2-lab']);
      expect(await status(labs.body.access_token, 'Observation/o1-vital')).toBe(403);

      await refused(rt, 'user/*.write');
      await refused(rt, 'patient/Observation.c');
      expect((await refresh(rt)).body).toMatchObject({ scope: 'openid fhirUser offline_access launch/patient user/*.read', patient: 'p2' });
    });

    test('a grant that keeps filtered user/ scopes to the patient in context: a refresh keeps them there, never asks them alone', async () => {
      const rt = await grant('doc', 'offline_access launch/patient patient/Observation.rs user/Observation.rs?category=vital-signs', 'p1');
      // The grant's own token reads p1's Observations only: the patient/ scope beside the filtered user/ one binds it.
      // (Its categories: the first test adds an uncategorised one to p1.)
      const whole = await refresh(rt);
      expect(await search(whole.body.access_token, 'Observation?category=laboratory,vital-signs')).toEqual(['o1-lab', 'o1-vital']);
      // The filtered user/ scope alone would read every patient's vital signs: not a narrowing.
      await refused(rt, 'user/Observation.rs?category=vital-signs');
      expect((await refresh(rt, 'user/Observation.rs?category=vital-signs')).body.error_description).toBe(
        'scope exceeds the original grant: user/Observation.rs?category=vital-signs (asked without the patient/ scopes the grant holds beside it, it would reach beyond the patient in context, to which the grant keeps it)',
      );
      await refused(rt, 'user/Observation.r?category=vital-signs');
      // With the patient/ scope beside it, or in its patient/ form, it narrows as any scope does.
      const kept = await refresh(rt, 'patient/Observation.rs user/Observation.rs?category=vital-signs');
      expect(kept.status).toBe(200);
      expect(await search(kept.body.access_token, 'Observation?category=laboratory,vital-signs')).toEqual(['o1-lab', 'o1-vital']);
      const vitals = await refresh(rt, 'patient/Observation.rs?category=vital-signs');
      expect(vitals.status).toBe(200);
      expect(await search(vitals.body.access_token, 'Observation?category=laboratory,vital-signs')).toEqual(['o1-vital']);
    });

    test('staff without a patient in context: a patient/ scope is not implied by user/ ones (it would read nothing)', async () => {
      const rt = await grant('doc', 'openid offline_access user/*.read');
      await refused(rt, 'openid patient/Patient.rs');
      expect((await refresh(rt, 'openid patient/Patient.rs')).body).toMatchObject({
        error_description: 'scope exceeds the original grant: patient/Patient.rs (the grant has no patient in context for a patient/ scope)',
      });
      const narrowed = await refresh(rt, 'openid user/Patient.rs');
      expect(narrowed.body).toMatchObject({ scope: 'openid user/Patient.rs' });
      expect(narrowed.body.patient).toBeUndefined();
      expect(await status(narrowed.body.access_token, 'Patient/p1')).toBe(200);
      expect(await status(narrowed.body.access_token, 'Observation/o1-lab')).toBe(403);
    });

    test('a filtered grant implies the same filter with more conditions, never another filter or none', async () => {
      const rt = await grant('doc', 'openid offline_access user/Observation.rs?category=laboratory');
      const mine = await refresh(rt, 'user/Observation.rs?subject=Patient/p1&category=laboratory');
      expect(mine.status).toBe(200);
      expect(mine.body.scope).toBe('user/Observation.rs?subject=Patient/p1&category=laboratory');
      expect(await search(mine.body.access_token, 'Observation')).toEqual(['o1-lab']);
      expect(await status(mine.body.access_token, 'Observation/o2-lab')).toBe(403);
      await refused(rt, 'user/Observation.rs?category=vital-signs');
      await refused(rt, 'user/Observation.rs');
      await refused(rt, 'user/Observation.rs?category=laboratory,vital-signs');
      await refused(rt, 'user/Observation.rsu?category=laboratory');
    });

    test('a grant within a registration narrowed since, by meaning, is kept whole, and narrows as any grant', async () => {
      const other = await createClient(t.store, t.clock, {
        tenant: 't1', name: 'Narrowed app', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT], scopes: ['user/Observation.rs'],
      });
      const o = { id: other.client.clientId, secret: other.clientSecret! };
      const scope = 'openid offline_access user/Observation.rs?subject=Patient/p1&category=laboratory';
      const signedIn = await signIn(t, { clientId: o.id, scope }, 'doc');
      const rt = ((await (await redeem(t, redirectParams(signedIn).get('code')!, o)).json()) as Tokens).refresh_token!;
      // The grant's filter has every pair of the new registration's: still within it. (The record is written as
      // `cinder client update --scope` writes it, without its revocation row, which PostgreSQL dates by its own
      // clock, months after this test's: it would refuse the new access tokens too.)
      const narrowTo = async (scopes: string[]) => {
        await t.store.clients.update({ ...(await t.store.clients.get(o.id))!, scopes });
        t.clock.advance(5_001); // client records are cached for five seconds
      };
      await narrowTo(['user/Observation.rs?category=laboratory']);
      const ask = async (extra: Record<string, string> = {}) =>
        (await (await post(t, { grant_type: 'refresh_token', refresh_token: rt, ...extra }, { Authorization: basic(o.id, o.secret) })).json()) as Tokens;
      const whole = await ask();
      expect(whole.scope).toBe(scope);
      expect(await search(whole.access_token, 'Observation')).toEqual(['o1-lab']);
      const info = (await (await post(t, { token: rt }, { Authorization: basic(o.id, o.secret) }, '/oauth2/introspect')).json()) as Json;
      expect(info).toMatchObject({ active: true, scope });
      expect((await ask({ scope: 'user/Observation.rs?subject=Patient/p1&category=laboratory&status=final' })).scope)
        .toBe('user/Observation.rs?subject=Patient/p1&category=laboratory&status=final');
      await narrowTo(['user/Observation.rs?category=vital-signs']);
      expect((await ask()).scope).toBe('openid offline_access');
    });

    test('an EHR launch: the narrowed token keeps the patient and the encounter in context', async () => {
      const minted = await t.request('/oauth2/launch', {
        method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${await t.token()}` },
        body: JSON.stringify({ patient: 'p2', encounter: 'e2', client_id: c.id }),
      });
      expect(minted.status).toBe(201);
      const { launch } = (await minted.json()) as { launch: string };
      const rt = await grant('doc', 'launch openid offline_access user/*.read', undefined, { launch });
      const narrowed = await refresh(rt, 'launch patient/Observation.rs?category=laboratory');
      expect(narrowed.status).toBe(200);
      expect(narrowed.body).toMatchObject({ scope: 'launch patient/Observation.rs?category=laboratory', patient: 'p2', encounter: 'e2' });
      expect(decodeJwt(narrowed.body.access_token)).toMatchObject({ patient: 'p2', encounter: 'e2' });
      expect(await search(narrowed.body.access_token, 'Observation')).toEqual(['o2-lab']);
    });

    test("a Subscription activated with a narrowed token reads what the token reads, within the client's filtered registration", async () => {
      const hook = receiver();
      try {
        const other = await createClient(t.store, t.clock, {
          tenant: 't1', name: 'Subscribing app', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT],
          scopes: ['user/Subscription.cruds', 'user/Observation.rs?category=laboratory'],
        });
        const o = { id: other.client.clientId, secret: other.clientSecret! };
        const signedIn = await signIn(t, { clientId: o.id, scope: 'offline_access user/Subscription.cruds user/Observation.rs?category=laboratory' }, 'doc');
        const rt = ((await (await redeem(t, redirectParams(signedIn).get('code')!, o)).json()) as Tokens).refresh_token!;
        const scope = 'user/Subscription.cruds user/Observation.rs?category=laboratory&subject=Patient/p2';
        const narrowed = (await (await post(t, { grant_type: 'refresh_token', refresh_token: rt, scope }, { Authorization: basic(o.id, o.secret) })).json()) as Tokens;
        expect(narrowed.scope).toBe(scope);
        const api = fhirClient(t, narrowed.access_token);
        expect(await search(narrowed.access_token, 'Observation')).toEqual(['o2-lab']);
        const sub = await api.post('Subscription', {
          resourceType: 'Subscription', status: 'requested', reason: 'labs', criteria: 'Observation?category=laboratory',
          channel: { type: 'rest-hook', endpoint: hook.url },
        });
        expect(sub.status).toBe(201);
        const admin = fhirClient(t, await t.token());
        for (const [id, patient] of [['o2-lab-new', 'p2'], ['o1-lab-new', 'p1']]) {
          await admin.put200({ resourceType: 'Observation', id, status: 'final', category: category('laboratory'), code: { text: 'x' }, subject: { reference: `Patient/${patient}` } });
        }
        for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
        // p2's new lab result notifies (a ping); p1's, which the token may not read, does not.
        expect(hook.got.length).toBe(1);
      } finally {
        hook.stop();
      }
    });
  });
}
