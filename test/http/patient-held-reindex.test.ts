/**
 * The check that a user token's patient in context is still one its user may choose (src/auth/patient-held.ts)
 * while a reindex runs beside the server: it searches, and a reindex's gate refuses searches of rows not rebuilt yet
 * (src/fhir/reindex.ts gatedStore). A user's reads, which the gate does not refuse, and every write of the tenant
 * (which matches its Subscriptions), must not fail for it; nor is the token refused. Introspection answers as the FHIR
 * API does, and an EHR launch's sign-in checks its patient by reads (src/auth/patient-picker.ts choosableByReads). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { CLIENT_CACHE_TTL_MS } from '../../src/auth/client-cache.ts';
import { createUser } from '../../src/auth/users.ts';
import type { Rebuilding } from '../../src/fhir/reindex.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { fhirClient, type FhirClient } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';
import { basic, csrfCookie, FORM, hiddenFields, PASSWORD, REDIRECT, post, redeem, redirectParams, signIn } from '../helpers/oauth.ts';

const LAUNCH_SCOPE = 'launch openid fhirUser patient/*.rs';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const SCOPE = 'openid fhirUser launch/patient patient/*.rs';

for (const target of targets) describe(`a user token with a chosen patient while the search index is being rebuilt, on ${target.kind}`, () => {
  let t: TestApp;
  let api: FhirClient;
  let c: { id: string; secret: string };
  let guardianId: string;
  // Index model 1 named no searches it spares: a reindex from model 0 refuses every search until it ends.
  let rebuilding: Rebuilding | undefined;

  beforeAll(async () => {
    const store = (await target.migrated()).open();
    await store.migrate();
    t = await createTestApp({ store, rebuilding: () => rebuilding });
    api = fhirClient(t, await t.token());
    const client = await createClient(t.store, t.clock, {
      tenant: 't1', name: 'App', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT], scopes: ['launch/patient', 'patient/*.rs'],
    });
    c = { id: client.client.clientId, secret: client.clientSecret! };
    await api.put200({ resourceType: 'Patient', id: 'p-1', name: [{ family: 'Smith', given: ['Ann'] }] });
    await api.put200({ resourceType: 'Observation', id: 'o-1', status: 'final', code: { text: 'weight' }, subject: { reference: 'Patient/p-1' } });
    await api.put200({ resourceType: 'RelatedPerson', id: 'rp-1', patient: { reference: 'Patient/p-1' } });
    await createUser(t.store, t.clock, { tenant: 't1', username: 'doc', password: PASSWORD, fhirUser: 'Practitioner/d-1' });
    guardianId = (await createUser(t.store, t.clock, { tenant: 't1', username: 'rel', password: PASSWORD, fhirUser: 'RelatedPerson/rp-1' })).id;
  }, 60_000);
  afterAll(() => t.close());

  async function tokensOf(username: string, scope = SCOPE): Promise<{ access_token: string; refresh_token?: string }> {
    const first = await signIn(t, { clientId: c.id, scope }, username);
    const fields = hiddenFields(await first.text());
    const res = await t.request('/oauth2/authorize', {
      method: 'POST', headers: { ...FORM, Cookie: csrfCookie(first) }, body: new URLSearchParams({ ...fields, action: 'pick', patient: 'p-1' }),
    });
    const code = redirectParams(res).get('code')!;
    const tokens = await redeem(t, code, c);
    expect(tokens.status).toBe(200);
    return (await tokens.json()) as { access_token: string; refresh_token?: string };
  }
  const tokenOf = async (username: string) => (await tokensOf(username)).access_token;

  test("a Practitioner's and a guardian's reads go on (no 503, no 401), and introspection answers, never a 500", async () => {
    const doc = await tokenOf('doc');
    const rel = await tokenOf('rel');
    rebuilding = { from: 0, examined: 3 };
    try {
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      for (const token of [doc, rel]) {
        const res = await t.request(`${t.fhir()}/Observation/o-1`, { headers: { Authorization: `Bearer ${token}` } });
        const inspected = await post(t, { token }, { Authorization: basic(c.id, c.secret) }, '/oauth2/introspect');
        expect(`${res.status} ${inspected.status}`).toBe("200 200");
        expect(await inspected.json()).toMatchObject({ active: true, patient: 'p-1' });
      }
    } finally {
      rebuilding = undefined;
    }
  });

  test("a write of the tenant goes on while a guardian's Subscription is active, and notifies it", async () => {
    const sub = await api.create({ resourceType: 'Subscription', status: 'requested', reason: 'guardian', criteria: 'Observation?code:text=guarded', channel: { type: 'rest-hook', endpoint: 'https://hook.example/guardian' } });
    expect(sub.status).toBe('active');
    const owner = JSON.stringify({ scopes: ['launch/patient', 'patient/*.rs'], clientId: c.id, patient: 'p-1', user: { id: guardianId, readAt: t.clock.now() } });
    await t.store.resources.write('t1', (w) => w.ownSubscription(sub.id as string, owner, 'rest-hook'));
    rebuilding = { from: 0, examined: 3 };
    try {
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      const res = await api.put('Observation/guarded-1', { resourceType: 'Observation', id: 'guarded-1', status: 'final', code: { text: 'guarded' }, subject: { reference: 'Patient/p-1' } });
      expect(res.status).toBe(201);
      expect((await t.store.subscriptions.pending('t1', sub.id as string, 100)).map((x) => x.id)).toEqual(['guarded-1']);
    } finally {
      rebuilding = undefined;
    }
  });

  test('a token refused before the reindex stays refused during it (the last answer known), and reads again once its user may choose the patient', async () => {
    await api.put200({ resourceType: 'RelatedPerson', id: 'rp-2', patient: { reference: 'Patient/p-1' } });
    await createUser(t.store, t.clock, { tenant: 't1', username: 'rel-2', password: PASSWORD, fhirUser: 'RelatedPerson/rp-2' });
    const token = await tokenOf('rel-2');
    const read = async () => (await t.request(`${t.fhir()}/Observation/o-1`, { headers: { Authorization: `Bearer ${token}` } })).status;
    expect(await read()).toBe(200);
    await api.put200({ resourceType: 'RelatedPerson', id: 'rp-2', patient: { reference: 'Patient/p-other' } });
    t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
    expect(await read()).toBe(401);
    rebuilding = { from: 0, examined: 3 };
    try {
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      expect(await read()).toBe(401);
    } finally {
      rebuilding = undefined;
    }
    await api.put200({ resourceType: 'RelatedPerson', id: 'rp-2', patient: { reference: 'Patient/p-1' } });
    t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
    expect(await read()).toBe(200);
  });

  // A refresh refused during a reindex (a 503 OperationOutcome, not even an OAuth error) signs the user out of many apps.
  test("a Practitioner's refresh of a grant with a chosen patient is granted, and its refresh token introspects active", async () => {
    const tokens = await tokensOf('doc', `offline_access ${SCOPE}`);
    rebuilding = { from: 0, examined: 3 };
    try {
      const refreshed = await post(t, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, { Authorization: basic(c.id, c.secret) });
      expect(refreshed.status).toBe(200);
      expect(await refreshed.json()).toMatchObject({ patient: 'p-1' });
      const inspected = await post(t, { token: tokens.refresh_token! }, { Authorization: basic(c.id, c.secret) }, '/oauth2/introspect');
      expect(inspected.status).toBe(200);
      expect(await inspected.json()).toMatchObject({ active: true, patient: 'p-1' });
    } finally {
      rebuilding = undefined;
    }
  });

  // Introspection read the database anew and, during a reindex, answered that the choice held, while the FHIR API kept
  // its last refusal (and within the 5 s cache, its last grant): one token, two answers.
  test('introspection and the FHIR API give one answer: at once after a change, and during a reindex', async () => {
    await api.put200({ resourceType: 'RelatedPerson', id: 'rp-3', patient: { reference: 'Patient/p-1' } });
    await createUser(t.store, t.clock, { tenant: 't1', username: 'rel-3', password: PASSWORD, fhirUser: 'RelatedPerson/rp-3' });
    const token = await tokenOf('rel-3');
    const read = async () => (await t.request(`${t.fhir()}/Observation/o-1`, { headers: { Authorization: `Bearer ${token}` } })).status;
    const active = async () => {
      const res = await post(t, { token }, { Authorization: basic(c.id, c.secret) }, '/oauth2/introspect');
      expect(res.status).toBe(200);
      return ((await res.json()) as { active: boolean }).active;
    };
    expect(`${await read()} ${await active()}`).toBe('200 true');
    // The guardian's record stops naming the child: introspection reads it anew, and the API answers as it did.
    await api.put200({ resourceType: 'RelatedPerson', id: 'rp-3', patient: { reference: 'Patient/p-other' } });
    expect(`${await active()} ${await read()}`).toBe('false 401');
    rebuilding = { from: 0, examined: 3 };
    try {
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      expect(`${await active()} ${await read()}`).toBe('false 401');
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      expect(`${await read()} ${await active()}`).toBe('401 false');
    } finally {
      rebuilding = undefined;
    }
    await api.put200({ resourceType: 'RelatedPerson', id: 'rp-3', patient: { reference: 'Patient/p-1' } });
    expect(`${await active()} ${await read()}`).toBe('true 200');
  });

  test("an EHR launch's sign-in during a reindex checks the launched patient by reads: the guardian's own is signed in, another is access_denied", async () => {
    await api.put200({ resourceType: 'Patient', id: 'p-2', name: [{ family: 'Jones', given: ['Bo'] }] });
    const launched = async (patient: string) => {
      const minted = await t.request('/oauth2/launch', {
        method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${await t.token()}` }, body: JSON.stringify({ patient, client_id: c.id }),
      });
      expect(minted.status).toBe(201);
      const { launch } = (await minted.json()) as { launch: string };
      return { clientId: c.id, scope: LAUNCH_SCOPE, state: 'st-1', extra: { launch } };
    };
    const own = await launched('p-1');
    const other = await launched('p-2');
    rebuilding = { from: 0, examined: 3 };
    let signedIn: Response;
    let refused: Response;
    try {
      // The reindex refuses the search the picker's rules run: the patient and the guardian's RelatedPerson are read instead.
      signedIn = await signIn(t, own, 'rel');
      refused = await signIn(t, other, 'rel');
    } finally {
      rebuilding = undefined;
    }
    const code = redirectParams(signedIn).get('code')!;
    const tokens = await redeem(t, code, c);
    expect(tokens.status).toBe(200);
    expect(await tokens.json()).toMatchObject({ patient: 'p-1' });
    expect(redirectParams(refused).get('error')).toBe('access_denied');
    expect(redirectParams(refused).get('code')).toBeNull();
  });
});
