/**
 * `user/` scopes of a user who acts for patients, through `app.request()`, on both databases. SMART App
 * Launch 2.2 (Scopes and Launch Context): `user/` scopes reach "resources that the current user can
 * access". A user whose fhirUser is a Patient, RelatedPerson or Person can access their own record, or
 * the patients they act for, not the tenant: each `user/` scope their sign-in is granted is granted as its
 * `patient/` form, bound to the patient in context. Staff (Practitioner, PractitionerRole, no fhirUser)
 * keep tenant-wide `user/` scopes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { decodeJwt } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { randomToken, sha256Hex } from '../../src/auth/secrets.ts';
import type { TestApp } from '../helpers/app.ts';
import { fhirClient, ids, type Json } from '../helpers/fhir.ts';
import { basic, csrfCookie, FORM, hiddenFields, makeUser, PASSWORD, post, redeem, REDIRECT, redirectParams, signIn, type AuthorizeParams } from '../helpers/oauth.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

type Tokens = { access_token: string; refresh_token?: string; patient?: string; scope: string; need_patient_banner?: boolean; error?: string };

const category = (code: string) => [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code }] }];

for (const target of targets) {
  describe(`user/ scopes of users who act for patients, on ${target.kind}`, () => {
    let t: TestApp;
    let c: { id: string; secret: string };
    const auth = () => ({ Authorization: basic(c.id, c.secret) });

    const user = (username: string, fhirUser: string | null) => makeUser(t.store, t.clock, { tenant: 't1', username, password: PASSWORD, fhirUser });

    beforeAll(async () => {
      let admin;
      ({ t, api: admin } = await appOnFresh(target));
      const client = await createClient(t.store, t.clock, {
        tenant: 't1', name: 'Portal app', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT],
        scopes: ['launch/patient', 'patient/*.cruds', 'user/*.cruds', 'system/*.rs'],
      });
      c = { id: client.client.clientId, secret: client.clientSecret! };
      for (const [id, family] of [['p1', 'Own'], ['p2', 'Other'], ['p3', 'Third']]) await admin.put200({ resourceType: 'Patient', id, name: [{ family }] });
      for (const [id, patient, kind] of [['o1-vital', 'p1', 'vital-signs'], ['o1-lab', 'p1', 'laboratory'], ['o2-vital', 'p2', 'vital-signs'], ['o3-vital', 'p3', 'vital-signs']]) {
        await admin.put200({ resourceType: 'Observation', id, status: 'final', category: category(kind!), code: { text: 'x' }, subject: { reference: `Patient/${patient}` } });
      }
      await admin.put200({ resourceType: 'RelatedPerson', id: 'rp-1', patient: { reference: 'Patient/p2' } });
      await admin.put200({ resourceType: 'Person', id: 'person-1', link: [{ target: { reference: 'Patient/p3' } }] });
      await user('pat', 'Patient/p1');
      await user('rel', 'RelatedPerson/rp-1');
      await user('person', 'Person/person-1');
      await user('orphan', 'RelatedPerson/rp-missing');
      await user('doc', 'Practitioner/d-1');
      await user('role', 'PractitionerRole/r-1');
      await user('clerk', null);
    }, 120_000);
    afterAll(() => t.close());

    /** Signs in (`username`) for `scope`; picks `patient` when the picker asks; redeems the code. */
    async function tokensFor(username: string, scope: string, patient?: string, o: Partial<AuthorizeParams> = {}): Promise<Tokens> {
      let res = await signIn(t, { clientId: c.id, scope, ...o }, username);
      if (patient !== undefined) {
        expect(res.status).toBe(200);
        const html = await res.text();
        expect(html).toContain('<title>Choose a patient · Cinder</title>');
        res = await t.request('/oauth2/authorize', {
          method: 'POST', headers: { ...FORM, Cookie: csrfCookie(res) }, body: new URLSearchParams({ ...hiddenFields(html), action: 'pick', patient }),
        });
      }
      const answer = await redeem(t, redirectParams(res).get('code')!, c);
      expect(answer.status).toBe(200);
      return (await answer.json()) as Tokens;
    }

    const status = async (token: string, path: string) => (await fhirClient(t, token).get(path)).status;

    test('system/ scopes a client is registered for are held as their patient/ form too; a RelatedPerson user is asked for a patient', async () => {
      const body = await tokensFor('pat', 'openid system/Patient.rs system/Observation.rs');
      expect(body).toMatchObject({ scope: 'openid patient/Patient.rs patient/Observation.rs', patient: 'p1' });
      expect(await status(body.access_token, 'Patient/p1')).toBe(200);
      expect(await status(body.access_token, 'Patient/p2')).toBe(403);
      expect(ids(await fhirClient(t, body.access_token).search('Observation?_count=50')).sort()).toEqual(['o1-lab', 'o1-vital']);
      const rel = await tokensFor('rel', 'openid system/*.rs', 'p2');
      expect(rel).toMatchObject({ scope: 'openid patient/*.rs', patient: 'p2' });
      expect(await status(rel.access_token, 'Patient/p3')).toBe(403);
      // Staff keep what they were granted.
      const doc = await tokensFor('doc', 'openid system/Patient.rs');
      expect(doc.scope).toBe('openid system/Patient.rs');
      expect(await status(doc.access_token, 'Patient/p2')).toBe(200);
    });

    test('the probe: a Patient user granted user/*.read reads their own record only, not Patient/p2; staff still read the tenant', async () => {
      const body = await tokensFor('pat', 'openid fhirUser offline_access user/*.read');
      expect(body).toMatchObject({ scope: 'openid fhirUser offline_access patient/*.read', patient: 'p1', need_patient_banner: true });
      expect(decodeJwt(body.access_token)).toMatchObject({ scope: 'openid fhirUser offline_access patient/*.read', patient: 'p1' });
      expect(await status(body.access_token, 'Patient/p2')).toBe(403);
      expect(await status(body.access_token, 'Patient/p1')).toBe(200);
      const api = fhirClient(t, body.access_token);
      expect(ids(await api.search('Patient'))).toEqual(['p1']);
      expect(ids(await api.search('Observation')).sort()).toEqual(['o1-lab', 'o1-vital']);
      // Every refresh, and the refresh token's introspection, hold the same.
      const refreshed = (await (await post(t, { grant_type: 'refresh_token', refresh_token: body.refresh_token! }, auth())).json()) as Tokens;
      expect(refreshed).toMatchObject({ scope: 'openid fhirUser offline_access patient/*.read', patient: 'p1' });
      expect(await status(refreshed.access_token, 'Patient/p2')).toBe(403);
      const info = (await (await post(t, { token: body.refresh_token! }, auth(), '/oauth2/introspect')).json()) as Json;
      expect(info).toMatchObject({ active: true, scope: 'openid fhirUser offline_access patient/*.read', patient: 'p1' });

      for (const staff of ['doc', 'role', 'clerk']) {
        const wide = await tokensFor(staff, 'openid fhirUser user/*.read');
        expect(wide.scope).toBe('openid fhirUser user/*.read');
        expect(wide.patient).toBeUndefined();
        expect(await status(wide.access_token, 'Patient/p2')).toBe(200);
      }
    });

    test('the patient/ form keeps each scope\'s type, permissions and v2 filter; a user/ scope beside a patient/ one widens nothing', async () => {
      const scope = 'openid user/Observation.rs?category=vital-signs user/Observation.c patient/Patient.rs user/Patient.rs';
      const body = await tokensFor('pat', scope);
      expect(body.scope).toBe('openid patient/Observation.rs?category=vital-signs patient/Observation.c patient/Patient.rs');
      const api = fhirClient(t, body.access_token);
      expect(ids(await api.search('Observation'))).toEqual(['o1-vital']);
      expect(await status(body.access_token, 'Observation/o1-lab')).toBe(403);
      expect(await status(body.access_token, 'Observation/o2-vital')).toBe(403);
      expect(await status(body.access_token, 'Patient/p2')).toBe(403);
      const observation = (patient: string) => ({ resourceType: 'Observation', status: 'final', code: { text: 'self-reported' }, subject: { reference: `Patient/${patient}` } });
      expect((await api.post('Observation', observation('p1'))).status).toBe(201);
      expect((await api.post('Observation', observation('p2'))).status).toBe(403);
    });

    test('a RelatedPerson or Person user with user/ scopes gets the picker of the patients they act for, and that patient\'s compartment', async () => {
      const rel = await tokensFor('rel', 'openid fhirUser offline_access user/*.rs', 'p2');
      expect(rel).toMatchObject({ scope: 'openid fhirUser offline_access patient/*.rs', patient: 'p2' });
      expect(ids(await fhirClient(t, rel.access_token).search('Observation'))).toEqual(['o2-vital']);
      expect(await status(rel.access_token, 'Patient/p1')).toBe(403);
      const refreshed = (await (await post(t, { grant_type: 'refresh_token', refresh_token: rel.refresh_token! }, auth())).json()) as Tokens;
      expect(refreshed).toMatchObject({ scope: 'openid fhirUser offline_access patient/*.rs', patient: 'p2' });

      const person = await tokensFor('person', 'openid user/*.rs', 'p3');
      expect(person).toMatchObject({ scope: 'openid patient/*.rs', patient: 'p3' });
      expect(await status(person.access_token, 'Patient/p2')).toBe(403);

      // The picker lists only the patients their record names and refuses any other.
      const page = await signIn(t, { clientId: c.id, scope: 'openid user/*.rs' }, 'rel');
      const html = await page.text();
      expect([...html.matchAll(/name="patient" value="([^"]*)"/g)].map((m) => m[1])).toEqual(['p2']);
      const refused = await t.request('/oauth2/authorize', {
        method: 'POST', headers: { ...FORM, Cookie: csrfCookie(page) }, body: new URLSearchParams({ ...hiddenFields(html), action: 'pick', patient: 'p1' }),
      });
      expect(refused.status).toBe(400);
      expect(refused.headers.get('location')).toBeNull();
    });

    test('a RelatedPerson whose record names no patient gets no code for user/ scopes: the picker can only cancel', async () => {
      const res = await signIn(t, { clientId: c.id, scope: 'openid fhirUser user/*.rs' }, 'orphan');
      expect(res.status).toBe(200);
      const html = await res.text();
      expect(html).toContain('No patient record is linked to your account');
      expect(html).not.toContain('value="pick"');
    });

    test('an EHR launch: a RelatedPerson user\'s user/ scopes read the launched patient\'s compartment', async () => {
      const minted = await t.request('/oauth2/launch', {
        method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${await t.token()}` },
        body: JSON.stringify({ patient: 'p2', client_id: c.id }),
      });
      expect(minted.status).toBe(201);
      const { launch } = (await minted.json()) as { launch: string };
      const body = await tokensFor('rel', 'launch openid user/*.rs', undefined, { extra: { launch } });
      expect(body).toMatchObject({ scope: 'launch openid patient/*.rs', patient: 'p2' });
      expect(await status(body.access_token, 'Patient/p2')).toBe(200);
      expect(await status(body.access_token, 'Patient/p1')).toBe(403);
    });

    test('codes and refresh tokens stored before hold their user/ scopes as patient/ ones from their next use', async () => {
      const pat = (await t.store.users.byUsername('t1', 'pat'))!;
      const rel = (await t.store.users.byUsername('t1', 'rel'))!;
      const now = t.clock.now();
      const stored = (value: string, userId: string, scope: string) => t.store.oauth.createRefreshToken({
        tokenHash: sha256Hex(value), grantId: randomToken(16), clientId: c.id, tenant: 't1', userId, scope,
        authTime: now, createdAt: now, expiresAt: now + 3_600_000, revokedAt: null, patient: null, encounter: null, fhirContext: null,
        needPatientBanner: true,
      });
      const refresh = async (value: string, extra: Record<string, string> = {}) => {
        const res = await post(t, { grant_type: 'refresh_token', refresh_token: value, ...extra }, auth());
        return { status: res.status, body: (await res.json()) as Tokens };
      };
      await stored('old-pat', pat.id, 'openid offline_access user/*.rs');
      await stored('old-rel', rel.id, 'openid offline_access user/*.rs');
      await stored('old-rel-only', rel.id, 'offline_access user/*.rs');

      const own = await refresh('old-pat');
      expect(own.body).toMatchObject({ scope: 'openid offline_access patient/*.rs', patient: 'p1' });
      expect(await status(own.body.access_token, 'Patient/p2')).toBe(403);
      expect((await refresh('old-pat', { scope: 'user/*.rs' })).body).toMatchObject({ scope: 'patient/*.rs', patient: 'p1' });
      const info = (await (await post(t, { token: 'old-pat' }, auth(), '/oauth2/introspect')).json()) as Json;
      expect(info).toMatchObject({ active: true, scope: 'openid offline_access patient/*.rs', patient: 'p1' });
      // A RelatedPerson never chose a patient for them: they are left out, or the grant is refused with nothing else.
      const left = await refresh('old-rel');
      expect(left.status).toBe(200);
      expect(left.body.scope).toBe('openid offline_access');
      expect(left.body.patient).toBeUndefined();
      expect(await refresh('old-rel-only')).toEqual({ status: 400, body: expect.objectContaining({ error: 'invalid_grant' }) });

      await t.store.oauth.createCode({
        codeHash: sha256Hex('old-code'), grantId: randomToken(16), clientId: c.id, tenant: 't1', userId: pat.id, redirectUri: REDIRECT,
        scope: 'openid user/*.rs', nonce: null, codeChallenge: null, authTime: now, expiresAt: now + 60_000, consumedAt: null, patient: null, encounter: null,
        fhirContext: null, needPatientBanner: true,
      });
      const redeemed = (await (await redeem(t, 'old-code', c)).json()) as Tokens;
      expect(redeemed).toMatchObject({ scope: 'openid patient/*.rs', patient: 'p1' });
    });

    test('a user whose fhirUser names a Patient by an id Cinder cannot use has no patient to choose, never the tenant\'s', async () => {
      // Stored as no `cinder user create` would (an id longer than 64 characters): not their own record, not staff.
      await t.store.users.create({
        id: randomToken(12), tenant: 't1', username: 'odd', passwordHash: await Bun.password.hash(PASSWORD), name: null, email: null, emailVerified: false,
        phone: null, phoneVerified: false, address: null, fhirUser: `Patient/${'x'.repeat(65)}`, createdAt: t.clock.now(), disabled: false, deletedAt: null, tokensRevokedAt: null,
      });
      for (const scope of ['openid patient/*.rs', 'openid user/*.rs']) {
        const res = await signIn(t, { clientId: c.id, scope }, 'odd');
        expect(res.status).toBe(200);
        const html = await res.text();
        expect(html).toContain('No patient record is linked to your account');
        expect(html).not.toContain('value="p2"');
      }
    });

    test('a Patient fhirUser of another server or tenant is no record of this tenant; its URL under this tenant\'s base is', async () => {
      await user('far', 'https://other.example/fhir/Patient/p2');
      await user('twin', `${t.fhir('t2')}/Patient/p2`);
      for (const username of ['far', 'twin']) {
        for (const scope of ['openid patient/*.rs', 'openid user/*.rs']) {
          const res = await signIn(t, { clientId: c.id, scope }, username);
          expect(res.status).toBe(200);
          const html = await res.text();
          expect(html).toContain('No patient record is linked to your account');
          expect(html).not.toContain('value="p2"');
        }
      }
      await user('near', `${t.fhir('t1')}/Patient/p1`);
      const body = await tokensFor('near', 'openid user/*.rs');
      expect(body).toMatchObject({ scope: 'openid patient/*.rs', patient: 'p1' });
    });
  });
}
