/**
 * A grant whose `patient/` scopes keep the filtered `user/` scopes beside them to the patient in context
 * (`patient/Observation.rs user/Observation.rs?category=laboratory`: that patient's laboratory results), and
 * that has no patient in context: a code or refresh token an older release stored before the login page
 * inferred `launch/patient`, or a Patient user whose fhirUser became a Practitioner's. Its tokens carry no
 * `patient/` scope (nothing to bind it to), and must not carry the filtered `user/` one as if unbound either:
 * they read none of what the grant kept to a patient (scopesWithoutPatient), a refresh may not ask it alone,
 * introspection reports what a refresh would issue, and a token that holds such scopes with no patient (a
 * crafted one) reads none of it. Through the token endpoint, introspection and the FHIR API, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { decodeJwt } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { randomToken, sha256Hex } from '../../src/auth/secrets.ts';
import { createUser } from '../../src/auth/users.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { craftToken, fhirClient, ids, type Json } from '../helpers/fhir.ts';
import { basic, PASSWORD, post, redeem, REDIRECT } from '../helpers/oauth.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

type Tokens = { access_token: string; refresh_token?: string; patient?: string; scope: string; error?: string; error_description?: string };

const category = (code: string) => [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code }] }];
const BOUND = 'patient/Observation.rs user/Observation.rs?category=laboratory';

for (const target of targets) {
  describe(`patient/ scopes with no patient in context keep the filtered user/ scopes beside them bound, on ${target.kind}`, () => {
    let t: TestApp;
    let c: { id: string; secret: string };
    let doc: string;
    const auth = () => ({ Authorization: basic(c.id, c.secret) });

    beforeAll(async () => {
      const store = (await target.fresh()).open();
      await store.migrate();
      t = await createTestApp({ store });
      const admin = fhirClient(t, await t.token());
      const client = await createClient(t.store, t.clock, {
        tenant: 't1', name: 'Older app', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT],
        scopes: ['launch/patient', 'patient/*.cruds', 'user/*.cruds'],
      });
      c = { id: client.client.clientId, secret: client.clientSecret! };
      for (const id of ['p1', 'p2']) await admin.put200({ resourceType: 'Patient', id });
      for (const [id, patient, kind] of [['o1-lab', 'p1', 'laboratory'], ['o1-vital', 'p1', 'vital-signs'], ['o2-lab', 'p2', 'laboratory']]) {
        await admin.put200({ resourceType: 'Observation', id, status: 'final', category: category(kind!), code: { text: 'x' }, subject: { reference: `Patient/${patient}` } });
      }
      doc = (await createUser(t.store, t.clock, { tenant: 't1', username: 'doc', password: PASSWORD, fhirUser: 'Practitioner/d-1' })).id;
      await createUser(t.store, t.clock, { tenant: 't1', username: 'pat', password: PASSWORD, fhirUser: 'Patient/p1' });
    }, 120_000);
    afterAll(() => t.close());

    /** A refresh token row as an older release stored it: the grant's scopes, and no patient chosen. */
    async function olderRefreshToken(scope: string, userId = doc): Promise<string> {
      const value = randomToken(32);
      const now = t.clock.now();
      await t.store.oauth.createRefreshToken({
        tokenHash: sha256Hex(value), grantId: crypto.randomUUID(), clientId: c.id, tenant: 't1', userId, scope, authTime: now, createdAt: now,
        expiresAt: now + 86_400_000, revokedAt: null, patient: null, encounter: null, fhirContext: null, needPatientBanner: true,
      });
      return value;
    }
    const refresh = async (token: string, scope?: string) => {
      const res = await post(t, { grant_type: 'refresh_token', refresh_token: token, ...(scope === undefined ? {} : { scope }) }, auth());
      return { status: res.status, body: (await res.json()) as Tokens };
    };
    const introspect = async (token: string) => (await (await post(t, { token }, auth(), '/oauth2/introspect')).json()) as Json;
    const observations = async (token: string) => {
      const res = await fhirClient(t, token).get('Observation?category=laboratory,vital-signs');
      return res.status === 200 ? ids((await res.json()) as Json).sort() : res.status;
    };

    test('a refresh token stored with no patient: its tokens read none of what the patient/ scope bound', async () => {
      const rt = await olderRefreshToken(`openid offline_access ${BOUND}`);
      const whole = await refresh(rt);
      expect(whole.status).toBe(200);
      expect(whole.body.patient).toBeUndefined();
      // Not `user/Observation.rs?category=laboratory` alone, which read o1-lab and o2-lab: every patient's results.
      expect(whole.body.scope).toBe('openid offline_access');
      expect(decodeJwt(whole.body.access_token).scope).toBe('openid offline_access');
      expect(await observations(whole.body.access_token)).toBe(403);
      expect(await introspect(rt)).toMatchObject({ active: true, scope: 'openid offline_access' });
      expect(await introspect(rt)).not.toHaveProperty('patient');

      // Asked alone, the filtered user/ scope would read them all: refused, saying why.
      expect(await refresh(rt, 'user/Observation.rs?category=laboratory')).toEqual({
        status: 400,
        body: expect.objectContaining({
          error: 'invalid_request',
          error_description: 'scope exceeds the original grant: user/Observation.rs?category=laboratory (the grant keeps it to a patient in context by the patient/ scopes beside it, and has no patient: its tokens read none of it)',
        }),
      });
      expect((await refresh(rt, 'user/Observation.r?category=laboratory')).status).toBe(400);
      // Asked with the patient/ scope beside it, it is what the grant is: nothing of Observation.
      expect((await refresh(rt, `openid ${BOUND}`)).body.scope).toBe('openid');
    });

    test('only the permissions a patient/ scope bound are lost; what no patient/ scope bound stays', async () => {
      // The grant kept reads to the patient, never searches: the filtered scope's search stays, its read does not.
      const rt = await olderRefreshToken('offline_access patient/Observation.r user/Observation.rs?category=laboratory patient/Patient.rs user/Patient.rs');
      const whole = await refresh(rt);
      expect(whole.body.scope).toBe('offline_access user/Observation.s?category=laboratory user/Patient.rs');
      expect(await observations(whole.body.access_token)).toEqual(['o1-lab', 'o2-lab']);
      expect((await fhirClient(t, whole.body.access_token).get('Observation/o1-lab')).status).toBe(403);
      expect((await fhirClient(t, whole.body.access_token).get('Patient/p2')).status).toBe(200);
      expect(await introspect(rt)).toMatchObject({ active: true, scope: 'offline_access user/Observation.s?category=laboratory user/Patient.rs' });
    });

    test('a grant left with nothing but offline_access: invalid_grant, and its refresh token is reported inactive', async () => {
      const rt = await olderRefreshToken(`offline_access ${BOUND}`);
      expect(await refresh(rt)).toEqual({ status: 400, body: expect.objectContaining({ error: 'invalid_grant' }) });
      expect(await introspect(rt)).toEqual({ active: false });
    });

    test('a code stored with no patient: its tokens and refresh token read none of what the patient/ scope bound', async () => {
      const value = randomToken(32);
      const now = t.clock.now();
      await t.store.oauth.createCode({
        codeHash: sha256Hex(value), grantId: crypto.randomUUID(), clientId: c.id, tenant: 't1', userId: doc, redirectUri: REDIRECT,
        scope: `openid offline_access ${BOUND} user/Patient.rs`, nonce: null, codeChallenge: null, authTime: now, expiresAt: now + 60_000, consumedAt: null,
        patient: null, encounter: null, fhirContext: null, needPatientBanner: true,
      });
      const res = await redeem(t, value, c);
      expect(res.status).toBe(200);
      const body = (await res.json()) as Tokens;
      expect(body.scope).toBe('openid offline_access user/Patient.rs');
      expect(await observations(body.access_token)).toBe(403);
      const again = await refresh(body.refresh_token!);
      expect(again.body.scope).toBe('openid offline_access user/Patient.rs');
      expect(await observations(again.body.access_token)).toBe(403);
    });

    test('a Patient user whose fhirUser became a Practitioner: their refresh token reads none of what was their own record', async () => {
      const pat = (await t.store.users.list('t1')).find((u) => u.username === 'pat')!;
      const rt = await olderRefreshToken(`openid offline_access ${BOUND}`, pat.id);
      // While they are the Patient: their own record is the patient in context, and the grant reads their results.
      const own = await refresh(rt);
      expect(own.body).toMatchObject({ patient: 'p1', scope: 'openid offline_access patient/Observation.rs patient/Observation.rs?category=laboratory' });
      expect(await observations(own.body.access_token)).toEqual(['o1-lab', 'o1-vital']);
      // As an older release's `user update` wrote it: no revocation of the user's sign-ins.
      await t.store.users.update({ ...pat, fhirUser: 'Practitioner/d-2' });
      const staff = await refresh(rt);
      expect(staff.status).toBe(200);
      expect(staff.body.patient).toBeUndefined();
      expect(staff.body.scope).toBe('openid offline_access');
      expect(await observations(staff.body.access_token)).toBe(403);
    });

    test('a token holding such scopes with no patient (crafted) reads none of what they bound', async () => {
      const token = await craftToken(t, `${BOUND} user/Patient.rs`);
      expect(await observations(token)).toBe(403);
      expect((await fhirClient(t, token).get('Observation/o2-lab')).status).toBe(403);
      expect((await fhirClient(t, token).get('Patient/p2')).status).toBe(200);
      // With a patient named, the bound holds, as always: that patient's Observations, never another's.
      expect(await observations(await craftToken(t, BOUND, { patient: 'p1' }))).toEqual(['o1-lab', 'o1-vital']);
    });
  });
}
