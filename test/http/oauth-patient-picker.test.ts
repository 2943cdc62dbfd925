/**
 * The SMART standalone-launch patient picker (src/auth/picker-flow.ts) through `app.request()`, on both
 * databases: a user who is not a Patient, signing in for `launch/patient`, chooses the patient in
 * context; the choice is checked on the server, goes on the code and the grant, and bounds what the
 * token's patient/ scopes read.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { decodeJwt } from 'jose';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { CLIENT_CACHE_TTL_MS } from '../../src/auth/client-cache.ts';
import { disableClient, enableClient } from '../../src/auth/client-lifecycle.ts';
import { PICKER_PAGE_SIZE } from '../../src/auth/patient-picker.ts';
import { randomToken, sha256Hex } from '../../src/auth/secrets.ts';
import { disableUser, enableUser, updateUser } from '../../src/auth/user-lifecycle.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { fhirClient, ids as matchIds, type FhirClient, type Json } from '../helpers/fhir.ts';
import { basic, csrfCookie, FORM, hiddenFields, makeUser, PASSWORD, post, redeem, REDIRECT, redirectParams, signIn } from '../helpers/oauth.ts';
import { finish } from '../helpers/export.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const SCOPE = 'openid fhirUser offline_access launch/patient patient/*.rs';
const PAGING = Array.from({ length: PICKER_PAGE_SIZE + 5 }, (_, i) => `pg-${String(i + 1).padStart(2, '0')}`);

type Tokens = { access_token: string; id_token: string; refresh_token?: string; patient?: string; scope: string };

/** An open picker: its page, hidden fields and CSRF cookie. */
interface Picker {
  res: Response;
  html: string;
  fields: Record<string, string>;
  cookie: string;
}

/** The radio buttons of a picker page: patient ids and their labels' names, in order. */
function choices(html: string): { id: string; name: string }[] {
  return [...html.matchAll(/<input type="radio" id="patient-\d+" name="patient" value="([^"]*)"><label for="patient-\d+">([^<]*)<span/g)]
    .map((m) => ({ id: m[1]!, name: m[2]! }));
}
const ids = (html: string) => choices(html).map((c) => c.id);


for (const target of targets) {
  describe(`the SMART standalone-launch patient picker, on ${target.kind}`, () => {
    let t: TestApp;
    let admin: FhirClient;
    let c: { id: string; secret: string };

    const user = (username: string, fhirUser: string | null, tenant = 't1', name: string | null = null) =>
      makeUser(t.store, t.clock, { tenant, username, password: PASSWORD, fhirUser, name });

    beforeAll(async () => {
      ({ t, api: admin } = await appOnFresh(target));
      const client = await createClient(t.store, t.clock, {
        tenant: 't1', name: 'Picker <App>', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT],
        scopes: ['launch/patient', 'patient/*.rs', 'user/*.rs'],
      });
      c = { id: client.client.clientId, secret: client.clientSecret! };
      const patients: [string, string, string[], string?][] = [
        ['p-ann', 'Smith', ['Ann'], '1970-01-02'], ['p-bob', 'Smith', ['Bob']], ['p-cat', 'Jones', ['Catherine']],
        ['p-del', 'Smith', ['Deleted']], ['p-alice', 'Example', ['Alice']], ['p-mal', 'Mallory', ['<b>"Eve" O\'Hara</b>']],
        ...PAGING.map((id, i): [string, string, string[]] => ['' + id, 'Paging', [`P${String(i + 1).padStart(2, '0')}`]]),
      ];
      const entry = ([id, family, given, birthDate]: (typeof patients)[number]) => ({
        resource: { resourceType: 'Patient', id, name: [{ family, given }], ...(birthDate ? { birthDate, gender: 'female' } : {}) },
        request: { method: 'PUT', url: `Patient/${id}` },
      });
      const bundle = await admin.post('', { resourceType: 'Bundle', type: 'transaction', entry: patients.map(entry) });
      expect(bundle.status).toBe(200);
      expect((await admin.del('Patient/p-del')).status).toBe(200);
      for (const [id, patient] of [['o-ann', 'p-ann'], ['o-bob', 'p-bob']]) {
        await admin.put200({ resourceType: 'Observation', id, status: 'final', code: { text: 'weight' }, subject: { reference: `Patient/${patient}` } });
      }
      await admin.put200({ resourceType: 'RelatedPerson', id: 'rp-1', patient: { reference: 'Patient/p-bob' } });
      await admin.put200({ resourceType: 'Person', id: 'person-1', link: [{ target: { reference: 'Patient/p-cat' } }] });
      await createTenant(t.store, t.clock, 't2');
      const t2 = fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't2');
      await t2.put200({ resourceType: 'Patient', id: 'other-1', name: [{ family: 'Smith', given: ['Other'] }] });
      await user('doc', 'Practitioner/d-1', 't1', 'Dr <Doc>');
      await user('clerk', null);
      await user('alice', 'Patient/p-alice');
      await user('rel', 'RelatedPerson/rp-1');
      await user('person', 'Person/person-1');
      await user('orphan', 'RelatedPerson/rp-missing');
    }, 120_000);
    afterAll(() => t.close());

    async function open(username: string, scope = SCOPE, state = 'st'): Promise<Picker> {
      const res = await signIn(t, { clientId: c.id, scope, state, nonce: 'n-1' }, username);
      const html = await res.text();
      return { res, html, fields: hiddenFields(html), cookie: csrfCookie(res) };
    }

    /** Posts a picker step with the page's fields and cookie; the page it answers with is the next picker. */
    async function submit(p: Picker, body: Record<string, string>, headers: Record<string, string> = {}): Promise<Picker> {
      const res = await t.request('/oauth2/authorize', {
        method: 'POST', headers: { ...FORM, Cookie: p.cookie, ...headers }, body: new URLSearchParams({ ...p.fields, ...body }),
      });
      const html = res.status === 303 ? '' : await res.text();
      return { res, html, fields: html ? hiddenFields(html) : {}, cookie: res.headers.get('set-cookie') ? csrfCookie(res) : p.cookie };
    }

    const search = (p: Picker, name: string) => submit(p, { action: 'search', patient_name: name });
    const pick = (p: Picker, patient: string) => submit(p, { action: 'pick', patient });

    async function tokensFor(username: string, patient: string, scope = SCOPE): Promise<Tokens> {
      const p = await open(username, scope);
      const code = redirectParams((await pick(p, patient)).res).get('code')!;
      const res = await redeem(t, code, c);
      expect(res.status).toBe(200);
      return (await res.json()) as Tokens;
    }

    test('a Practitioner signing in for launch/patient gets the picker, not a code: the first page by name, escaped, no script', async () => {
      const p = await open('doc');
      expect(p.res.status).toBe(200);
      expect(p.res.headers.get('location')).toBeNull();
      const csp = p.res.headers.get('content-security-policy')!;
      expect(csp).toContain("default-src 'none'");
      expect(csp).not.toContain('script-src');
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).toContain(`form-action 'self' ${new URL(REDIRECT).origin}`);
      expect(p.res.headers.get('x-frame-options')).toBe('DENY');
      expect(p.res.headers.get('cache-control')).toBe('no-store');
      expect(p.res.headers.get('set-cookie')).toMatch(/^cinder_csrf=[A-Za-z0-9_-]{43}; Path=\/oauth2\/authorize; HttpOnly; SameSite=Strict/);
      expect(p.html).not.toContain('<script');
      expect(p.html).toContain('<title>Choose a patient · Cinder</title>');
      expect(p.html).toContain('<strong>Picker &lt;App&gt;</strong>');
      expect(p.html).toContain('Signed in as Dr &lt;Doc&gt;.');
      expect(p.html).toContain('<label for="patient_name">Patient name</label>');
      expect(p.fields.login_ticket).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
      expect(p.fields.csrf_token).toBe(p.cookie.split('=')[1]!);
      expect(p.fields).toMatchObject({ client_id: c.id, scope: SCOPE, state: 'st', nonce: 'n-1', redirect_uri: REDIRECT });
      // By family, then given name; the deleted Patient and the other tenant's are not listed.
      expect(ids(p.html)).toEqual(['p-alice', 'p-cat', 'p-mal', ...PAGING.slice(0, PICKER_PAGE_SIZE - 3)]);
      expect(p.html).toContain('Mallory, &lt;b&gt;&quot;Eve&quot; O&#39;Hara&lt;/b&gt;');
      expect(p.html).not.toContain('<b>"Eve"');
      expect(p.fields.patient_next).toBeDefined();
      expect(p.html).toContain('value="next"');
    });

    test('a user without fhirUser gets the picker too', async () => {
      const p = await open('clerk');
      expect(p.res.status).toBe(200);
      expect(ids(p.html)).toContain('p-alice');
    });

    test('a Patient user skips the picker: a code at once, with their own record in context', async () => {
      const res = await signIn(t, { clientId: c.id, scope: SCOPE }, 'alice');
      const code = redirectParams(res).get('code')!;
      const body = (await (await redeem(t, code, c)).json()) as Tokens;
      expect(body.patient).toBe('p-alice');
      expect(decodeJwt(body.access_token).patient).toBe('p-alice');
      // Their record is not stored on the grant (derived from fhirUser); introspecting the refresh token names it too.
      const info = await post(t, { token: body.refresh_token! }, { Authorization: basic(c.id, c.secret) }, '/oauth2/introspect');
      expect((await info.json()) as Json).toMatchObject({ active: true, token_type: 'refresh_token', patient: 'p-alice' });
    });

    test('patient/ scopes without launch/patient: launch/patient is inferred, the picker asks, the token names the patient', async () => {
      // The scopes an interoperability probe's app asked for (SMART App Launch 2.2: the EHR "MAY infer the launch/patient scope").
      const probe = 'openid fhirUser patient/*.rs offline_access';
      const p = await open('doc', probe);
      expect(p.res.status).toBe(200);
      expect(p.html).toContain('<title>Choose a patient · Cinder</title>');
      expect(ids(p.html)).toContain('p-alice');
      const body = (await (await redeem(t, redirectParams((await pick(p, 'p-bob')).res).get('code')!, c)).json()) as Tokens;
      expect(body.patient).toBe('p-bob');
      expect(body.scope).toBe(probe);
      expect(decodeJwt(body.access_token)).toMatchObject({ patient: 'p-bob', scope: probe });
      expect(matchIds(await fhirClient(t, body.access_token).search('Observation'))).toEqual(['o-bob']);
      const refreshed = await post(t, { grant_type: 'refresh_token', refresh_token: body.refresh_token! }, { Authorization: basic(c.id, c.secret) });
      expect(((await refreshed.json()) as Tokens).patient).toBe('p-bob');
    });

    test('neither launch/patient nor a patient/ scope: no picker, a code at once, no patient', async () => {
      const res = await signIn(t, { clientId: c.id, scope: 'openid fhirUser offline_access user/*.rs' }, 'doc');
      const body = (await (await redeem(t, redirectParams(res).get('code')!, c)).json()) as Tokens;
      expect(body.patient).toBeUndefined();
      expect(body.scope).toBe('openid fhirUser offline_access user/*.rs');
      const info = await post(t, { token: body.refresh_token! }, { Authorization: basic(c.id, c.secret) }, '/oauth2/introspect');
      expect(((await info.json()) as Json).patient).toBeUndefined();
    });

    test('a RelatedPerson whose record names no patient, asking patient/ scopes alone, can only cancel: no token without a patient', async () => {
      const orphan = await open('orphan', 'openid patient/*.rs');
      expect(orphan.html).toContain('No patient record is linked to your account');
      expect(orphan.html).not.toContain('value="pick"');
      expect((await pick(orphan, 'p-bob')).res.status).toBe(400);
    });

    test('a grant stored without a patient (before launch/patient was inferred): its tokens lose the patient/ scopes, or invalid_grant', async () => {
      const doc = (await t.store.users.byUsername('t1', 'doc'))!;
      const alice = (await t.store.users.byUsername('t1', 'alice'))!;
      const now = t.clock.now();
      const auth = { Authorization: basic(c.id, c.secret) };
      const stored = (value: string, userId: string, scope: string) => t.store.oauth.createRefreshToken({
        tokenHash: sha256Hex(value), grantId: randomToken(16), clientId: c.id, tenant: 't1', userId, scope,
        authTime: now, createdAt: now, expiresAt: now + 3_600_000, revokedAt: null, patient: null, encounter: null, fhirContext: null,
        needPatientBanner: true,
      });
      const refresh = async (value: string) => {
        const res = await post(t, { grant_type: 'refresh_token', refresh_token: value }, auth);
        return { status: res.status, body: (await res.json()) as Tokens & { error?: string } };
      };
      await stored('old-mixed', doc.id, 'openid fhirUser offline_access user/*.rs launch/patient patient/*.rs');
      await stored('old-patient-only', doc.id, 'offline_access launch/patient patient/*.rs');
      await stored('old-alice', alice.id, 'openid offline_access patient/*.rs');

      const mixed = await refresh('old-mixed');
      expect(mixed.status).toBe(200);
      expect(mixed.body.patient).toBeUndefined();
      expect(mixed.body.scope).toBe('openid fhirUser offline_access user/*.rs');
      expect(decodeJwt(mixed.body.access_token)).toMatchObject({ scope: 'openid fhirUser offline_access user/*.rs' });
      expect(decodeJwt(mixed.body.access_token).patient).toBeUndefined();
      expect(await refresh('old-patient-only')).toEqual({ status: 400, body: expect.objectContaining({ error: 'invalid_grant' }) });
      // A Patient user's grant stored without one keeps naming their own record, as before.
      expect((await refresh('old-alice')).body).toMatchObject({ patient: 'p-alice', scope: 'openid offline_access patient/*.rs' });

      // A code stored without one: the tokens and the refresh token it gives keep only what needs no patient.
      await t.store.oauth.createCode({
        codeHash: sha256Hex('old-code'), grantId: randomToken(16), clientId: c.id, tenant: 't1', userId: doc.id, redirectUri: REDIRECT,
        scope: 'openid offline_access patient/*.rs', nonce: null, codeChallenge: null, authTime: now, expiresAt: now + 60_000, consumedAt: null, patient: null, encounter: null,
        fhirContext: null, needPatientBanner: true,
      });
      const redeemed = (await (await redeem(t, 'old-code', c)).json()) as Tokens;
      expect(redeemed.scope).toBe('openid offline_access');
      expect(redeemed.patient).toBeUndefined();
      expect((await refresh(redeemed.refresh_token!)).body.scope).toBe('openid offline_access');
      const info = await post(t, { token: redeemed.refresh_token! }, auth, '/oauth2/introspect');
      expect((await info.json()) as Json).toMatchObject({ active: true, token_type: 'refresh_token', scope: 'openid offline_access' });
    });

    test('search by name: each word must match; paging; no match; refused searches are a 400 on the page, never a 500', async () => {
      const p = await open('doc');
      const smith = await search(p, 'smi');
      expect(smith.res.status).toBe(200);
      expect(ids(smith.html)).toEqual(['p-ann', 'p-bob']);
      expect(smith.html).toContain('Patients matching “smi”');
      expect(smith.html).toContain('born 1970-01-02 · female · id p-ann');
      expect(smith.fields.patient_query).toBe('smi');
      expect(smith.fields.patient_next).toBeUndefined();
      expect(ids((await search(p, 'smith  bob')).html)).toEqual(['p-bob']);
      expect(ids((await search(p, 'Bob, Smith')).html)).toEqual(['p-bob']);

      const first = await search(p, 'paging');
      expect(ids(first.html)).toEqual(PAGING.slice(0, PICKER_PAGE_SIZE));
      // The search box may have changed since: "More patients" pages through the search listed.
      const second = await submit(first, { action: 'next', patient_name: 'something else' });
      expect(second.res.status).toBe(200);
      expect(ids(second.html)).toEqual(PAGING.slice(PICKER_PAGE_SIZE));
      expect(second.fields.patient_next).toBeUndefined();
      expect(second.html).not.toContain('value="next"');

      const none = await search(p, 'zzz');
      expect(none.res.status).toBe(200);
      expect(ids(none.html)).toEqual([]);
      expect(none.html).toContain('No patient matches “zzz”.');
      expect(none.html).not.toContain('value="pick"');

      const tooMany = await search(p, 'a b c d e f g');
      expect(tooMany.res.status).toBe(400);
      expect(tooMany.html).toContain('role="alert"');
      expect(tooMany.html).toContain('at most 6 words');
      const control = await search(p, 'smi\u0001th');
      expect(control.res.status).toBe(400);
      expect(control.html).toContain('The search cannot be run');
      const forgedCursor = await submit(p, { action: 'next', patient_next: 'not-a-cursor' });
      expect(forgedCursor.res.status).toBe(400);
      expect(forgedCursor.html).toContain('role="alert"');
    });

    test('the chosen patient goes on the code, the token, introspection and every refresh; auth_time stays the sign-in\'s', async () => {
      const signedInAt = t.clock.now();
      const p = await open('doc');
      t.clock.advance(120_000);
      const params = redirectParams((await pick(p, 'p-bob')).res);
      expect(params.get('state')).toBe('st');
      expect(params.get('iss')).toBe('http://cinder.test');
      const body = (await (await redeem(t, params.get('code')!, c)).json()) as Tokens;
      expect(body.patient).toBe('p-bob');
      expect(body.scope).toBe(SCOPE);
      const access = decodeJwt(body.access_token);
      expect(access).toMatchObject({ patient: 'p-bob', fhirUser: `${t.fhir('t1')}/Practitioner/d-1` });
      const id = decodeJwt(body.id_token);
      expect(id.auth_time).toBe(Math.floor(signedInAt / 1000));
      expect(id.nonce).toBe('n-1');

      const auth = { Authorization: basic(c.id, c.secret) };
      const info = (await (await post(t, { token: body.access_token }, auth, '/oauth2/introspect')).json()) as Json;
      expect(info).toMatchObject({ active: true, patient: 'p-bob', scope: SCOPE });
      const refreshInfo = (await (await post(t, { token: body.refresh_token! }, auth, '/oauth2/introspect')).json()) as Json;
      expect(refreshInfo).toMatchObject({ active: true, token_type: 'refresh_token', patient: 'p-bob', scope: SCOPE });

      t.clock.advance(600_000);
      for (let i = 0; i < 2; i++) {
        const res = await post(t, { grant_type: 'refresh_token', refresh_token: body.refresh_token! }, auth);
        expect(res.status).toBe(200);
        const refreshed = (await res.json()) as Tokens;
        expect(refreshed.patient).toBe('p-bob');
        expect(decodeJwt(refreshed.access_token).patient).toBe('p-bob');
      }
    });

    test('patient/ scopes then read only the chosen patient\'s compartment', async () => {
      const api = fhirClient(t, (await tokensFor('doc', 'p-bob')).access_token);
      expect(matchIds(await api.search('Observation'))).toEqual(['o-bob']);
      expect(matchIds(await api.search('Patient'))).toEqual(['p-bob']);
      expect((await api.get('Patient/p-bob')).status).toBe(200);
      expect((await api.get('Patient/p-ann')).status).toBe(403);
      expect((await api.get('Observation/o-ann')).status).toBe(403);
      const other = fhirClient(t, (await tokensFor('doc', 'p-ann')).access_token);
      expect(matchIds(await other.search('Observation'))).toEqual(['o-ann']);
    });

    test('a forged, unknown, deleted, other tenant\'s or malformed patient id is refused on the page; no code', async () => {
      const p = await open('doc');
      for (const id of ['nope', 'p-del', 'other-1', '../p-ann', 'p-ann,p-bob', 'x'.repeat(65)]) {
        const res = await pick(p, id);
        expect(res.res.status).toBe(400);
        expect(res.res.headers.get('location')).toBeNull();
        expect(res.html).toContain('That patient cannot be chosen.');
        expect(ids(res.html).length).toBeGreaterThan(0);
      }
      const nothing = await submit(p, { action: 'pick' });
      expect(nothing.res.status).toBe(400);
      expect(nothing.html).toContain('Choose a patient from the list first.');
      // The same form and ticket pick an allowed patient: what was refused was the id.
      expect(redirectParams((await pick(p, 'p-ann')).res).get('code')).toMatch(/^[\w-]{43}$/);
    });

    test('a RelatedPerson or Person user may choose only the patients their own record names', async () => {
      const rel = await open('rel');
      expect(ids(rel.html)).toEqual(['p-bob']);
      expect(ids((await search(rel, 'smith')).html)).toEqual(['p-bob']);
      expect((await pick(rel, 'p-ann')).res.status).toBe(400);
      expect(ids((await open('person')).html)).toEqual(['p-cat']);
      const orphan = await open('orphan');
      expect(orphan.res.status).toBe(200);
      expect(orphan.html).toContain('No patient record is linked to your account');
      expect(orphan.html).not.toContain('name="patient_name"');
      expect((await pick(orphan, 'p-bob')).res.status).toBe(400);
      const body = (await (await redeem(t, redirectParams((await pick(rel, 'p-bob')).res).get('code')!, c)).json()) as Tokens;
      expect(body.patient).toBe('p-bob');
    });

    test('CSRF: each picker step needs the cookie and the form\'s token to match, from this origin', async () => {
      const p = await open('doc');
      const refused = [
        await submit({ ...p, cookie: '' }, { action: 'pick', patient: 'p-ann' }),
        await submit({ ...p, cookie: `cinder_csrf=${'x'.repeat(43)}` }, { action: 'pick', patient: 'p-ann' }),
        await submit(p, { action: 'pick', patient: 'p-ann', csrf_token: 'y'.repeat(43) }),
        await submit(p, { action: 'pick', patient: 'p-ann' }, { Origin: 'https://evil.example' }),
        await submit({ ...p, cookie: '' }, { action: 'search', patient_name: 'smith' }),
      ];
      for (const r of refused) {
        expect(r.res.status).toBe(403);
        expect(r.res.headers.get('location')).toBeNull();
        expect(ids(r.html)).toEqual([]);
      }
      expect((await pick(p, 'p-ann')).res.status).toBe(303);
    });

    test('the sign-in ticket: tampered, another request\'s, an access token, or expired -> "Sign-in expired", no code', async () => {
      const a = await open('doc', SCOPE, 'request-a');
      const b = await open('doc', SCOPE, 'request-b');
      const sig = a.fields.login_ticket!;
      const tampered = `${sig.slice(0, -4)}${sig.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
      const token = (await tokensFor('doc', 'p-ann')).access_token;
      for (const ticket of [tampered, b.fields.login_ticket!, token, 'not a ticket', '']) {
        const r = await submit(a, { action: 'pick', patient: 'p-ann', login_ticket: ticket });
        expect(r.res.status).toBe(403);
        expect(r.html).toContain('Sign-in expired');
        expect(r.res.headers.get('location')).toBeNull();
      }
      expect((await pick(b, 'p-ann')).res.status).toBe(303);
      t.clock.advance(15 * 60_000 + 1000);
      const late = await pick(a, 'p-ann');
      expect(late.res.status).toBe(403);
      expect(late.html).toContain('Sign-in expired');
    });

    test("a sign-in before the user's tokens were revoked (a new password; a disable undone) lists and picks nothing more", async () => {
      // PostgreSQL records a revocation no earlier than its own clock: the servers' clock has to be on time (or ahead).
      t.clock.set(Math.max(t.clock.now(), Date.now() + 60_000));
      await user('picker-pw', null);
      await user('picker-off', null);
      const changed = await open('picker-pw');
      expect((await search(changed, 'Smith')).res.status).toBe(200);
      t.clock.advance(1);
      await updateUser(t.store, t.clock, 't1', 'picker-pw', { password: 'a new long password' });
      const off = await open('picker-off');
      t.clock.advance(1);
      await disableUser(t.store, t.clock, 't1', 'picker-off');
      await enableUser(t.store, 't1', 'picker-off');
      for (const p of [changed, off]) {
        for (const r of [await search(p, 'Smith'), await pick(p, 'p-ann')]) {
          expect(r.res.status).toBe(403);
          expect(r.html).toContain('Sign-in expired');
          expect(ids(r.html)).toEqual([]);
        }
      }
      t.clock.advance(1);
      expect((await pick(await open('picker-off'), 'p-ann')).res.status).toBe(303);
    });

    test("a user change recorded by a clock ahead of the server's: a sign-in before it picks nothing, one after it picks at once and its token reads", async () => {
      const ahead = { now: () => t.clock.now() + 10 * 60_000 };
      await user('picker-ahead', null);
      const before = await open('picker-ahead');
      t.clock.advance(1);
      await updateUser(t.store, ahead, 't1', 'picker-ahead', { password: 'a new long password' });
      const r = await pick(before, 'p-ann');
      expect(r.res.status).toBe(403);
      expect(r.html).toContain('Sign-in expired');
      // Signed in after the change, the server's clock ten minutes behind the change's; the ticket carries the sign-in's number.
      const res = await signIn(t, { clientId: c.id, scope: SCOPE, state: 'st', nonce: 'n-1' }, 'picker-ahead', 'a new long password');
      const html = await res.text();
      const after = await search({ res, html, fields: hiddenFields(html), cookie: csrfCookie(res) }, 'Smith');
      expect(after.res.status).toBe(200);
      const code = redirectParams((await pick(after, 'p-ann')).res).get('code')!;
      const redeemed = await redeem(t, code, c);
      expect(redeemed.status).toBe(200);
      const tokens = (await redeemed.json()) as Tokens;
      expect(tokens.patient).toBe('p-ann');
      expect((await fhirClient(t, tokens.access_token).get('Patient/p-ann')).status).toBe(200);
    });

    test("a client change recorded by a clock ahead of the server's: the code of a sign-in after it redeems (its ticket carries the client's number), one before it does not", async () => {
      const ahead = { now: () => t.clock.now() + 10 * 60_000 };
      const other = await createClient(t.store, t.clock, {
        tenant: 't1', name: 'Other picker app', grants: ['authorization_code'], redirectUris: [REDIRECT], scopes: ['launch/patient', 'patient/*.rs', 'user/*.rs'],
      });
      const o = { id: other.client.clientId, secret: other.clientSecret! };
      const opened = async () => {
        const res = await signIn(t, { clientId: o.id, scope: SCOPE, state: 'st', nonce: 'n-1' }, 'doc');
        const html = await res.text();
        return { res, html, fields: hiddenFields(html), cookie: csrfCookie(res) };
      };
      const before = await opened();
      t.clock.advance(1);
      await disableClient(t.store, ahead, o.id);
      await enableClient(t.store, o.id);
      t.clock.advance(1);
      const after = await opened();
      const codeOf = async (p: Picker) => redirectParams((await pick(p, 'p-ann')).res).get('code')!;
      expect((await redeem(t, await codeOf(before), o)).status).toBe(400);
      const redeemed = await redeem(t, await codeOf(after), o);
      expect(redeemed.status).toBe(200);
      expect(((await redeemed.json()) as Tokens).patient).toBe('p-ann');
    });

    test("a RelatedPerson whose record no longer names the grant's patient refreshes nothing for it: invalid_grant, the refresh token inactive", async () => {
      // Earlier tests moved the clock past the suite's admin token.
      const api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-2', patient: { reference: 'Patient/p-ann' } });
      await user('guardian', 'RelatedPerson/rp-2');
      const tokens = await tokensFor('guardian', 'p-ann');
      expect(tokens.patient).toBe('p-ann');
      const auth = { Authorization: basic(c.id, c.secret) };
      const refresh = async () => {
        const res = await post(t, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, auth);
        return { status: res.status, body: (await res.json()) as Tokens & { error?: string } };
      };
      const introspected = async () => (await (await post(t, { token: tokens.refresh_token! }, auth, '/oauth2/introspect')).json()) as Record<string, unknown>;
      expect((await refresh()).body.patient).toBe('p-ann');
      expect(await introspected()).toMatchObject({ active: true, patient: 'p-ann' });
      // The relationship ends (the record now names another patient): the sign-in's patient is no longer the user's to have.
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-2', patient: { reference: 'Patient/p-cat' } });
      expect(await refresh()).toEqual({ status: 400, body: expect.objectContaining({ error: 'invalid_grant' }) });
      expect(await introspected()).toEqual({ active: false });
      // Named again, the grant refreshes again (nothing was revoked: the grant follows the record).
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-2', patient: { reference: 'Patient/p-ann' } });
      expect((await refresh()).body.patient).toBe('p-ann');
      // A Practitioner's grant keeps its patient while the Patient exists.
      const doc = await tokensFor('doc', 'p-cat');
      const docRefresh = await post(t, { grant_type: 'refresh_token', refresh_token: doc.refresh_token! }, auth);
      expect(((await docRefresh.json()) as Tokens).patient).toBe('p-cat');
    });

    // As a refresh is refused (above), so is the access token already issued, within the cache's seconds, not at its expiry an hour later.
    test("an access token whose patient the user may no longer choose reads nothing within seconds (401 invalid_token) and introspects inactive; named again, it reads again", async () => {
      const api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-3', patient: { reference: 'Patient/p-ann' } });
      await user('ward-guardian', 'RelatedPerson/rp-3');
      const tokens = await tokensFor('ward-guardian', 'p-ann');
      const read = (token: string, path = 'Observation/o-ann') => t.request(`${t.fhir()}/${path}`, { headers: { Authorization: `Bearer ${token}` } });
      expect((await read(tokens.access_token)).status).toBe(200);
      const introspected = async () => (await (await post(t, { token: tokens.access_token }, { Authorization: basic(c.id, c.secret) }, '/oauth2/introspect')).json()) as Record<string, unknown>;
      expect(await introspected()).toMatchObject({ active: true, patient: 'p-ann' });
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-3', patient: { reference: 'Patient/p-cat' } });
      // Introspection reads the database: inactive at once.
      expect(await introspected()).toEqual({ active: false });
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      for (const path of ['Observation/o-ann', 'Patient/p-ann', 'Observation?subject=Patient/p-ann']) {
        const res = await read(tokens.access_token, path);
        expect([path, res.status]).toEqual([path, 401]);
        expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
        expect(((await res.json()) as Json).issue[0].diagnostics).toBe('The patient in context of this access token is no longer one its user may choose (their record no longer names it, or it was deleted): sign in again');
      }
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-3', patient: { reference: 'Patient/p-ann' } });
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      expect((await read(tokens.access_token)).status).toBe(200);
      expect(await introspected()).toMatchObject({ active: true, patient: 'p-ann' });
      // A Practitioner's token keeps its patient while the Patient exists; deleted, the token reads nothing more.
      await api.put200({ resourceType: 'Patient', id: 'p-gone', name: [{ family: 'Aaron', given: ['Gone'] }] });
      await api.put200({ resourceType: 'Observation', id: 'o-gone', status: 'final', code: { text: 'weight' }, subject: { reference: 'Patient/p-gone' } });
      const doc = await tokensFor('doc', 'p-gone');
      expect((await read(doc.access_token, 'Observation/o-gone')).status).toBe(200);
      expect((await api.del('Patient/p-gone')).status).toBe(200);
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      expect((await read(doc.access_token, 'Observation/o-gone')).status).toBe(401);
      // A Patient user's own record is not chosen: their token reads as before.
      const code = redirectParams(await signIn(t, { clientId: c.id, scope: SCOPE }, 'alice')).get('code')!;
      const own = (await (await redeem(t, code, c)).json()) as Tokens;
      expect(own.patient).toBe('p-alice');
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      expect((await read(own.access_token, 'Patient/p-alice')).status).toBe(200);
    });

    // An export the guardian started is theirs alone (same client, user and patient): once their record no longer names
    // the child, its status and files are refused with their token, and no token of theirs can name the child again.
    test("a guardian's export outlives the relationship harmlessly: its status and files are refused, its job no other token sees", async () => {
      const api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-5', patient: { reference: 'Patient/p-ann' } });
      await user('export-guardian', 'RelatedPerson/rp-5');
      const tokens = await tokensFor('export-guardian', 'p-ann');
      const get = (path: string, token = tokens.access_token) => t.request(path.startsWith('http') ? path : `${t.fhir()}/${path}`, { headers: { Authorization: `Bearer ${token}` } });
      const kick = await get('Patient/$export?_type=Patient,Observation');
      expect(kick.status).toBe(202);
      const status = kick.headers.get('content-location')!;
      await finish(t, tokens.access_token, status);
      const manifest = (await (await get(status)).json()) as { output: { url: string }[] };
      expect(manifest.output.length).toBeGreaterThan(0);
      expect((await get(manifest.output[0]!.url)).status).toBe(200);
      // The relationship ends: past the gate's cache, the status and every file are a 401 for the token that started it.
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-5', patient: { reference: 'Patient/p-cat' } });
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      expect((await get(status)).status).toBe(401);
      for (const o of manifest.output) expect((await get(o.url)).status).toBe(401);
      expect((await t.request(status, { method: 'DELETE', headers: { Authorization: `Bearer ${tokens.access_token}` } })).status).toBe(401);
      // A new sign-in can no longer choose the child, and with the patient it may choose the job is not theirs (404).
      const other = await tokensFor('export-guardian', 'p-cat');
      expect((await get(status, other.access_token)).status).toBe(404);
      for (const o of manifest.output) expect((await get(o.url, other.access_token)).status).toBe(404);
    });

    // As its token reads nothing more: a Subscription activated with a guardian's token is matched for nothing once the
    // relationship ends, instead of notifying the child's records for as long as it stays active.
    test("a Subscription activated with a guardian's token is matched for nothing once their record no longer names the patient; named again, matched again", async () => {
      const api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-4', patient: { reference: 'Patient/p-ann' } });
      const guardian = await user('sub-guardian', 'RelatedPerson/rp-4');
      const sub = await api.create({ resourceType: 'Subscription', status: 'requested', reason: 'guardian', criteria: 'Observation?code:text=guarded', channel: { type: 'rest-hook', endpoint: 'https://hook.example/guardian' } });
      expect(sub.status).toBe('active');
      // Owned as activating it with the guardian's token records it (owner.ts): their sign-in, the app, the chosen patient.
      const owner = JSON.stringify({ scopes: ['launch/patient', 'patient/*.rs'], clientId: c.id, patient: 'p-ann', user: { id: guardian.id, readAt: t.clock.now() } });
      await t.store.resources.write('t1', (w) => w.ownSubscription(sub.id as string, owner, 'rest-hook'));
      let n = 0;
      const observe = async (patient: string) => api.put200({ resourceType: 'Observation', id: `guarded-${n++}`, status: 'final', code: { text: 'guarded' }, subject: { reference: `Patient/${patient}` } });
      const waiting = async () => (await t.store.subscriptions.pending('t1', sub.id as string, 100)).map((x) => x.id);
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      await observe('p-ann');
      await observe('p-bob');
      expect(await waiting()).toEqual(['guarded-0']);
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-4', patient: { reference: 'Patient/p-cat' } });
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      await observe('p-ann');
      expect(await waiting()).toEqual(['guarded-0']);
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-4', patient: { reference: 'Patient/p-ann' } });
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      await observe('p-ann');
      expect(await waiting()).toEqual(['guarded-0', 'guarded-3']);
    });

    test('cancel on the picker sends access_denied to the redirect URI, with state and iss', async () => {
      const p = await open('doc');
      const params = redirectParams((await submit(p, { action: 'cancel' })).res);
      expect(params.get('error')).toBe('access_denied');
      expect(params.get('error_description')).toBe('the user did not choose a patient');
      expect(params.get('state')).toBe('st');
      expect(params.get('iss')).toBe('http://cinder.test');
      expect(params.get('code')).toBeNull();
    });

    test('a tenant with no Patients: a clear message and Cancel only', async () => {
      await createTenant(t.store, t.clock, 'empty');
      const client = await createClient(t.store, t.clock, {
        tenant: 'empty', name: 'Empty App', grants: ['authorization_code'], redirectUris: [REDIRECT], scopes: ['launch/patient', 'patient/*.rs'],
      });
      await user('doc2', 'Practitioner/d-2', 'empty');
      const res = await signIn(t, { clientId: client.client.clientId, scope: SCOPE, aud: t.fhir('empty') }, 'doc2');
      expect(res.status).toBe(200);
      const html = await res.text();
      expect(html).toContain('There are no patient records here to choose from.');
      expect(html).not.toContain('name="patient_name"');
      expect(html).not.toContain('value="pick"');
      expect(html).toContain('value="cancel"');
      const p: Picker = { res, html, fields: hiddenFields(html), cookie: csrfCookie(res) };
      expect((await pick(p, 'p-ann')).res.status).toBe(400);
    });
  });
}

describe('the patient picker while the search index is being rebuilt', () => {
  test('a name search that would read rows not rebuilt yet is a 503 page with Retry-After and the form kept, never a 500', async () => {
    // Index model 10 folds strings anew: string searches wait for the reindex (src/fhir/reindex.ts gatedStore).
    const t = await createTestApp({ rebuilding: () => ({ from: 9, examined: 7 }) });
    try {
      const client = await createClient(t.store, t.clock, {
        tenant: 't1', name: 'App', grants: ['authorization_code'], redirectUris: [REDIRECT], scopes: ['launch/patient', 'patient/*.rs'],
      });
      await makeUser(t.store, t.clock, { tenant: 't1', username: 'doc', password: PASSWORD, fhirUser: 'Practitioner/d-1' });
      const first = await signIn(t, { clientId: client.client.clientId, scope: SCOPE }, 'doc');
      const html = await first.text();
      const fields = hiddenFields(html);
      expect(fields.login_ticket).toBeDefined();
      const res = await t.request('/oauth2/authorize', {
        method: 'POST', headers: { ...FORM, Cookie: csrfCookie(first) },
        body: new URLSearchParams({ ...fields, action: 'search', patient_name: 'smith' }),
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('30');
      expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      const page = await res.text();
      expect(page).toContain('Patient search is not available for a moment.');
      expect(hiddenFields(page).login_ticket).toBe(fields.login_ticket!);
      expect(page).toContain('value="smith"');
    } finally {
      await t.close();
    }
  });
});
