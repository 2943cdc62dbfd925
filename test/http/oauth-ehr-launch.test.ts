/**
 * The SMART EHR launch through `app.request()`, on both databases: an EHR front-end mints a `launch` at
 * `POST /oauth2/launch` with its own token (what it may read, as REST reads), the app sends it to
 * `/oauth2/authorize` with the `launch` scope, and the user who signs in gets the launch's patient and
 * encounter in context, without a picker, when the picker's rules let them have that patient.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { LAUNCH_TTL_S } from '../../src/auth/launch.ts';
import { LOGIN_TICKET_TTL_S } from '../../src/auth/login-ticket.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';
import { authorizeQuery, basic, csrfCookie, FORM, hiddenFields, makeUser, PASSWORD, pkce, post, redeem, REDIRECT, redirectParams, signIn, type AuthorizeParams } from '../helpers/oauth.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const SCOPE = 'launch launch/encounter openid fhirUser offline_access patient/*.rs';

type Tokens = {
  access_token: string; refresh_token?: string; patient?: string; encounter?: string; scope: string; fhirContext?: Json[]; need_patient_banner?: boolean;
};
type Body = { patient?: string; encounter?: string; client_id?: string } | Record<string, unknown>;

/** The further context of the launches below (SMART App Launch 2.2 fhirContext): a reference, roles, a canonical, an identifier, another Patient. */
const CONTEXT = [
  { reference: 'List/l-home', role: 'https://example.org/med-list-at-home' },
  { reference: 'Observation/o-ann' },
  { canonical: 'https://example.org/Questionnaire/intake|2', type: 'Questionnaire', role: 'https://example.org/role/questionnaire-to-display' },
  { identifier: { system: 'urn:oid:2.16.840.1.113883.19.5', value: 'ACC-1', type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0203', code: 'ACSN' }] } }, type: 'ImagingStudy' },
  { reference: 'Patient/p-bob', role: 'https://example.org/role/sibling', type: 'Patient' },
];


for (const target of targets) {
  describe(`the SMART EHR launch, on ${target.kind}`, () => {
    let t: TestApp;
    let c: { id: string; secret: string };
    let other: { id: string; secret: string };
    let t2Client: { id: string; secret: string };
    let adminToken: string;

    const user = (username: string, fhirUser: string | null, tenant = 't1') => makeUser(t.store, t.clock, { tenant, username, password: PASSWORD, fhirUser });

    /** POST /oauth2/launch with `token` and a JSON body. */
    const mint = (token: string | null, body: Body | string, headers: Record<string, string> = {}) =>
      t.request('/oauth2/launch', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}), ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });

    /** A launch the admin token mints. */
    async function launchFor(body: Body, token = adminToken): Promise<string> {
      const res = await mint(token, body);
      if (res.status !== 201) throw new Error(`mint: ${res.status} ${await res.text()}`);
      return ((await res.json()) as { launch: string }).launch;
    }

    const params = (launch: string | null, o: Partial<AuthorizeParams> = {}): AuthorizeParams =>
      ({ clientId: c.id, scope: SCOPE, state: 'st-1', nonce: 'n-1', ...o, extra: { ...(launch === null ? {} : { launch }), ...o.extra } });

    /** Signs in for an EHR launch (or, with null, a standalone one) and redeems the code, with PKCE. */
    async function launchedTokens(launch: string | null, username = 'doc', o: Partial<AuthorizeParams> = {}, client = c): Promise<Tokens> {
      const { verifier, challenge } = pkce();
      const res = await signIn(t, params(launch, { clientId: client.id, challenge, ...o }), username);
      const code = redirectParams(res).get('code');
      expect(code).not.toBeNull();
      const tokens = await redeem(t, code!, client, { code_verifier: verifier });
      expect(tokens.status).toBe(200);
      return (await tokens.json()) as Tokens;
    }

    beforeAll(async () => {
      let api: FhirClient;
      ({ t, api } = await appOnFresh(target));
      adminToken = await t.token();
      const client = await createClient(t.store, t.clock, {
        tenant: 't1', name: 'Chart app', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT],
        scopes: ['launch/patient', 'patient/*.rs', 'user/*.rs'],
      });
      c = { id: client.client.clientId, secret: client.clientSecret! };
      const second = await createClient(t.store, t.clock, { tenant: 't1', name: 'Other app', grants: ['authorization_code'], redirectUris: [REDIRECT], scopes: ['patient/*.rs'] });
      other = { id: second.client.clientId, secret: second.clientSecret! };
      for (const [id, family] of [['p-ann', 'Smith'], ['p-bob', 'Jones'], ['p-del', 'Gone']]) {
        await api.put200({ resourceType: 'Patient', id, name: [{ family }] });
      }
      expect((await api.del('Patient/p-del')).status).toBe(200);
      await api.put200({ resourceType: 'Encounter', id: 'e-ann', status: 'in-progress', class: { code: 'AMB' }, subject: { reference: 'Patient/p-ann' } });
      await api.put200({ resourceType: 'Encounter', id: 'e-bob', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p-bob' } });
      await api.put200({ resourceType: 'Encounter', id: 'e-none', status: 'finished', class: { code: 'AMB' } });
      for (const [id, patient] of [['o-ann', 'p-ann'], ['o-bob', 'p-bob']]) {
        await api.put200({ resourceType: 'Observation', id, status: 'final', code: { text: 'weight' }, subject: { reference: `Patient/${patient}` } });
      }
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-1', patient: { reference: 'Patient/p-bob' } });
      await api.put200({ resourceType: 'List', id: 'l-home', status: 'current', mode: 'working', subject: { reference: 'Patient/p-ann' } });
      await api.put200({ resourceType: 'Observation', id: 'o-del', status: 'final', code: { text: 'weight' }, subject: { reference: 'Patient/p-ann' } });
      expect((await api.del('Observation/o-del')).status).toBe(200);
      await createTenant(t.store, t.clock, 't2');
      const t2 = fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't2');
      await t2.put200({ resourceType: 'Patient', id: 'other-1' });
      await t2.put200({ resourceType: 'Patient', id: 'p-ann' });
      const inT2 = await createClient(t.store, t.clock, { tenant: 't2', name: 'T2 app', grants: ['authorization_code'], redirectUris: [REDIRECT], scopes: ['patient/*.rs'] });
      t2Client = { id: inT2.client.clientId, secret: inT2.clientSecret! };
      await user('doc', 'Practitioner/d-1');
      await user('clerk', null);
      await user('rel', 'RelatedPerson/rp-1');
      await user('ann', 'Patient/p-ann');
    }, 120_000);
    afterAll(() => t.close());

    test('minting: 201 with a short-lived signed launch naming nothing stored, not cached', async () => {
      const res = await mint(adminToken, { patient: 'p-ann', encounter: 'e-ann', client_id: c.id });
      expect(res.status).toBe(201);
      expect(res.headers.get('content-type')).toBe('application/json;charset=UTF-8');
      expect(res.headers.get('cache-control')).toBe('no-store');
      const body = (await res.json()) as { launch: string; expires_in: number };
      expect(Object.keys(body).sort()).toEqual(['expires_in', 'launch']);
      expect(body.expires_in).toBe(LAUNCH_TTL_S);
      expect(LAUNCH_TTL_S).toBe(300);
      expect(decodeProtectedHeader(body.launch)).toMatchObject({ alg: 'ES256', typ: 'cinder-launch+jwt' });
      const claims = decodeJwt(body.launch);
      expect(claims).toMatchObject({ tenant: 't1', patient: 'p-ann', encounter: 'e-ann', client_id: c.id, aud: 'http://cinder.test/oauth2/authorize' });
      expect(claims.exp! - claims.iat!).toBe(LAUNCH_TTL_S);
      // A launch is no access token.
      expect((await t.request('/tenants/t1/fhir/R4/Patient/p-ann', { headers: { Authorization: `Bearer ${body.launch}` } })).status).toBe(401);
      expect((await t.request('/oauth2/launch')).status).toBe(405);
    });

    test('minting needs a valid token: 401 invalid_token with its challenge', async () => {
      const none = await mint(null, { patient: 'p-ann' });
      expect(none.status).toBe(401);
      expect(none.headers.get('www-authenticate')).toBe('Bearer realm="cinder"');
      expect(((await none.json()) as Json).error).toBe('invalid_token');
      const launch = await launchFor({ patient: 'p-ann' });
      const forged = await mint(launch, { patient: 'p-ann' });
      expect(forged.status).toBe(401);
      expect(forged.headers.get('www-authenticate')).toContain('error="invalid_token"');
    });

    test('minting reads as the FHIR API would: scopes, the token patient in context, and the tenant decide (403, 404)', async () => {
      const observationsOnly = await t.tokenFor('t1', ['system/Observation.rs']);
      const refused = await mint(observationsOnly, { patient: 'p-ann' });
      expect(refused.status).toBe(403);
      expect(refused.headers.get('www-authenticate')).toContain('error="insufficient_scope"');
      expect((await refused.json()) as Json).toEqual({ error: 'insufficient_scope', error_description: "The access token's scopes do not allow read of Patient" });
      // Patient without Encounter: the Encounter is refused.
      const patientsOnly = await t.tokenFor('t1', ['system/Patient.rs']);
      expect((await mint(patientsOnly, { patient: 'p-ann' })).status).toBe(201);
      expect((await mint(patientsOnly, { patient: 'p-ann', encounter: 'e-ann' })).status).toBe(403);

      // A patient's own token (Ann signed in as herself) reaches her record only.
      const ann = await launchedTokens(await launchFor({ patient: 'p-ann' }), 'ann');
      expect(ann.patient).toBe('p-ann');
      expect((await mint(ann.access_token, { patient: 'p-ann', encounter: 'e-ann' })).status).toBe(201);
      expect((await mint(ann.access_token, { patient: 'p-bob' })).status).toBe(403);
      expect((await mint(ann.access_token, { patient: 'p-ann', encounter: 'e-bob' })).status).toBe(403);

      // Unknown, deleted, and another tenant's: 404, whichever side the token is on.
      for (const patient of ['nobody', 'p-del', 'other-1']) {
        const res = await mint(adminToken, { patient });
        expect(res.status).toBe(404);
        expect(((await res.json()) as Json).error).toBe('not_found');
      }
      const t2Token = await t.tokenFor('t2', ['system/*.rs']);
      expect((await mint(t2Token, { patient: 'p-bob' })).status).toBe(404);
      // The same id in t2 is t2's Patient: the launch is for tenant t2.
      const t2Launch = await mint(t2Token, { patient: 'p-ann' });
      expect(t2Launch.status).toBe(201);
      expect(decodeJwt(((await t2Launch.json()) as { launch: string }).launch).tenant).toBe('t2');
      expect((await mint(adminToken, { patient: 'p-ann', encounter: 'e-nope' })).status).toBe(404);
    });

    test("minting refuses an encounter of another patient, a client of another tenant, and bodies that are not the request's (400)", async () => {
      const refused = async (body: Body | string, contains: string, headers: Record<string, string> = {}) => {
        const res = await mint(adminToken, body, headers);
        expect(res.status).toBe(400);
        const json = (await res.json()) as Json;
        expect(json.error).toBe('invalid_request');
        expect(json.error_description).toContain(contains);
      };
      await refused({ patient: 'p-ann', encounter: 'e-bob' }, 'Encounter/e-bob is not an encounter of Patient/p-ann');
      await refused({ patient: 'p-ann', encounter: 'e-none' }, 'Encounter/e-none is not an encounter of Patient/p-ann');
      await refused({ patient: 'p-ann', client_id: t2Client.id }, 'names no application of this tenant');
      await refused({ patient: 'p-ann', client_id: 'no-such-client' }, 'names no application of this tenant');
      await refused({}, 'patient');
      await refused({ patient: 'Patient/p-ann' }, 'patient: must be a FHIR resource id');
      await refused({ patient: 'p-ann', encouter: 'e-ann' }, 'encouter');
      await refused('{"patient":', 'not JSON');
      await refused('patient=p-ann', 'application/json', { 'Content-Type': 'application/x-www-form-urlencoded' });
      // A Latin-1 body: refused as the launch request it is, not as a FHIR body.
      const latin1 = await t.request('/oauth2/launch', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json; charset=ISO-8859-1', Authorization: `Bearer ${adminToken}` },
        body: Buffer.from('{"patient":"p-ann","fhirContext":[{"reference":"Patient/p-ann","role":"caf\xe9"}]}', 'latin1'),
      });
      expect(latin1.status).toBe(400);
      const description = ((await latin1.json()) as Json).error_description as string;
      expect(description).toContain('declares charset ISO-8859-1: the launch request (JSON) is read in UTF-8 only');
      expect(description).not.toContain('FHIR');
    });

    test('minting with fhirContext and need_patient_banner: the launch carries them as given', async () => {
      const res = await mint(adminToken, { patient: 'p-ann', encounter: 'e-ann', fhirContext: CONTEXT, need_patient_banner: false });
      expect(res.status).toBe(201);
      const claims = decodeJwt(((await res.json()) as { launch: string }).launch);
      expect(claims).toMatchObject({ patient: 'p-ann', encounter: 'e-ann', fhirContext: CONTEXT, need_patient_banner: false });
      // Without them: none, and a banner (the claim is left out).
      const plain = decodeJwt(await launchFor({ patient: 'p-ann', fhirContext: [] }));
      expect(plain.fhirContext).toBeUndefined();
      expect(plain.need_patient_banner).toBeUndefined();
      expect(decodeJwt(await launchFor({ patient: 'p-ann', need_patient_banner: true })).need_patient_banner).toBeUndefined();
    });

    test('minting refuses a fhirContext item that is not one of SMART 2.2, naming the item and field (400)', async () => {
      const refused = async (fhirContext: unknown, description: string, extra: Record<string, unknown> = {}) => {
        const res = await mint(adminToken, { patient: 'p-ann', encounter: 'e-ann', fhirContext, ...extra });
        expect(res.status).toBe(400);
        expect((await res.json()) as Json).toEqual({ error: 'invalid_request', error_description: `the body is not valid: ${description}` });
      };
      await refused({ reference: 'List/l-home' }, 'fhirContext: Invalid input: expected array, received object');
      await refused([{}], 'fhirContext[0]: needs a reference, a canonical or an identifier');
      await refused([{ role: 'https://example.org/r' }], 'fhirContext[0]: needs a reference, a canonical or an identifier');
      await refused([{ reference: 'List/l-home' }, { reference: 'List' }], 'fhirContext[1].reference: must be a relative reference Type/id to a FHIR resource type');
      await refused([{ reference: 'http://cinder.test/tenants/t1/fhir/R4/List/l-home' }], 'fhirContext[0].reference: must be a relative reference Type/id to a FHIR resource type');
      await refused([{ reference: 'Nothing/1' }], 'fhirContext[0].reference: must be a relative reference Type/id to a FHIR resource type');
      await refused([{ reference: 'List/l-home/_history/1' }], 'fhirContext[0].reference: must be a relative reference Type/id to a FHIR resource type');
      await refused([{ reference: 'List/l-home', type: 'Observation' }], 'fhirContext[0].type: is not the type of the reference (List)');
      await refused([{ canonical: 'https://example.org/Questionnaire/q', type: 'Questionary' }], 'fhirContext[0].type: must be a FHIR resource type');
      await refused([{ canonical: 'Questionnaire/q' }], 'fhirContext[0].canonical: must be a canonical URL (an absolute URI, optionally with |version)');
      await refused([{ canonical: 'https://example.org/Q|1|2' }], 'fhirContext[0].canonical: must be a canonical URL (an absolute URI, optionally with |version)');
      await refused([{ identifier: { system: 'urn:oid:1.2.3' } }], 'fhirContext[0].identifier.value: Invalid input: expected string, received undefined');
      await refused([{ identifier: { system: 'not a uri', value: 'x' } }], 'fhirContext[0].identifier.system: must be an absolute URI');
      await refused([{ reference: 'List/l-home', role: '' }], "fhirContext[0].role: must be an absolute URI (or 'launch')");
      await refused([{ reference: 'List/l-home', role: 'med-list' }], "fhirContext[0].role: must be an absolute URI (or 'launch')");
      await refused([{ reference: 'List/l-home', display: 'Meds' }], 'fhirContext[0]: Unrecognized key: "display"');
      // The launch's patient and encounter are the top-level parameters, not fhirContext items (SMART 2.2).
      const topLevel = (type: string, field: string) =>
        `the launch's ${type} goes in '${field}', not in fhirContext (SMART App Launch 2.2); another ${type} needs a role other than 'launch'`;
      await refused([{ reference: 'Encounter/e-ann' }], `fhirContext[0].reference: ${topLevel('Encounter', 'encounter')}`);
      await refused([{ reference: 'Patient/p-ann', role: 'launch' }], `fhirContext[0].reference: ${topLevel('Patient', 'patient')}`);
      await refused([{ identifier: { value: 'V-1' }, type: 'Encounter' }], `fhirContext[0].type: ${topLevel('Encounter', 'encounter')}`);
      // Small enough to travel in the launch URL and every access token.
      const many = Array.from({ length: 40 }, (_, n) => ({ reference: `Observation/o-${String(n).padStart(40, '0')}` }));
      await refused(many, 'fhirContext: must be at most 2048 characters as JSON');
      await refused(CONTEXT, 'need_patient_banner: Invalid input: expected boolean, received string', { need_patient_banner: 'false' });
    });

    test('fhirContext references are read as the FHIR API reads them: 403 and 404 name the item; canonicals and identifiers are not looked up', async () => {
      const answer = async (token: string, fhirContext: unknown[]) => {
        const res = await mint(token, { patient: 'p-ann', fhirContext });
        return { status: res.status, body: (await res.json()) as Json };
      };
      const patientsOnly = await t.tokenFor('t1', ['system/Patient.rs']);
      expect(await answer(patientsOnly, [{ reference: 'Patient/p-bob', role: 'https://example.org/role/sibling' }, { reference: 'List/l-home' }])).toEqual({
        status: 403, body: { error: 'insufficient_scope', error_description: "fhirContext[1].reference: The access token's scopes do not allow read of List" },
      });
      expect(await answer(adminToken, [{ reference: 'List/l-home' }, { reference: 'Observation/nope' }])).toEqual({
        status: 404, body: { error: 'not_found', error_description: 'fhirContext[1].reference: Observation/nope is not known' },
      });
      expect(await answer(adminToken, [{ reference: 'Observation/o-del' }])).toEqual({
        status: 404, body: { error: 'not_found', error_description: 'fhirContext[0].reference: Observation/o-del was deleted' },
      });
      // Another tenant's resource is unknown here.
      expect((await answer(adminToken, [{ reference: 'Patient/other-1', role: 'https://example.org/role/sibling' }])).status).toBe(404);
      // A patient's own token reads her compartment alone.
      const ann = await launchedTokens(await launchFor({ patient: 'p-ann' }), 'ann');
      expect((await answer(ann.access_token, [{ reference: 'Observation/o-ann' }, { reference: 'List/l-home' }])).status).toBe(201);
      expect((await answer(ann.access_token, [{ reference: 'Observation/o-bob' }])).status).toBe(403);
      // What names no resource here is taken as given, whatever the token reads.
      const canonical = [{ canonical: 'https://example.org/Questionnaire/intake|2' }, { identifier: { value: 'ACC-1' }, type: 'ImagingStudy' }];
      expect((await answer(patientsOnly, canonical)).status).toBe(201);
    });

    test('the token response, the access token, introspection and every refresh carry fhirContext and need_patient_banner; they widen no access', async () => {
      const launch = await launchFor({ patient: 'p-ann', encounter: 'e-ann', fhirContext: CONTEXT, need_patient_banner: false });
      const body = await launchedTokens(launch);
      expect(body).toMatchObject({ patient: 'p-ann', encounter: 'e-ann', fhirContext: CONTEXT, need_patient_banner: false, scope: SCOPE });
      // The encounter is the top-level `encounter`, never a fhirContext item.
      expect(body.fhirContext!.some((i) => String(i.reference).startsWith('Encounter/'))).toBe(false);
      expect(decodeJwt(body.access_token)).toMatchObject({ patient: 'p-ann', encounter: 'e-ann', fhirContext: CONTEXT, need_patient_banner: false });

      const auth = { Authorization: basic(c.id, c.secret) };
      const launched = { active: true, patient: 'p-ann', encounter: 'e-ann', fhirContext: CONTEXT, need_patient_banner: false };
      expect((await (await post(t, { token: body.access_token }, auth, '/oauth2/introspect')).json()) as Json).toMatchObject(launched);
      expect((await (await post(t, { token: body.refresh_token! }, auth, '/oauth2/introspect')).json()) as Json).toMatchObject({ ...launched, token_type: 'refresh_token' });
      const refreshed = (await (await post(t, { grant_type: 'refresh_token', refresh_token: body.refresh_token! }, auth)).json()) as Tokens;
      expect(refreshed).toMatchObject({ patient: 'p-ann', encounter: 'e-ann', fhirContext: CONTEXT, need_patient_banner: false, scope: SCOPE });
      expect(decodeJwt(refreshed.access_token)).toMatchObject({ fhirContext: CONTEXT, need_patient_banner: false });
      // Narrowed to scopes without `launch`: the EHR's context is not released; the banner still says how the app is shown.
      const narrowed = (await (await post(t, { grant_type: 'refresh_token', refresh_token: body.refresh_token!, scope: 'openid patient/*.rs' }, auth)).json()) as Tokens;
      expect(narrowed).toMatchObject({ patient: 'p-ann', need_patient_banner: false, scope: 'openid patient/*.rs' });
      expect(narrowed.fhirContext).toBeUndefined();
      expect(decodeJwt(narrowed.access_token).fhirContext).toBeUndefined();

      // A Patient or an Observation of another patient in fhirContext is no permission to read it.
      const app = fhirClient(t, body.access_token);
      expect((await app.get('Observation/o-ann')).status).toBe(200);
      expect((await app.get('Patient/p-bob')).status).toBe(403);
    });

    test('need_patient_banner is true unless the EHR said otherwise, and in a standalone launch; nothing without a patient', async () => {
      const plain = await launchedTokens(await launchFor({ patient: 'p-bob' }), 'clerk');
      expect(plain).toMatchObject({ patient: 'p-bob', need_patient_banner: true });
      expect(plain.fhirContext).toBeUndefined();
      // `launch` beside user/ scopes alone names the patient, and so the banner and fhirContext.
      const user = await launchedTokens(await launchFor({ patient: 'p-bob', fhirContext: [{ reference: 'List/l-home' }] }), 'doc', { scope: 'launch openid user/*.rs' });
      expect(user).toMatchObject({ patient: 'p-bob', need_patient_banner: true, fhirContext: [{ reference: 'List/l-home' }] });

      // Standalone: the picker's choice, and a Patient user's own record.
      const { verifier, challenge } = pkce();
      const picker = await signIn(t, params(null, { scope: 'launch/patient openid patient/*.rs', challenge }), 'doc');
      const fields = hiddenFields(await picker.text());
      const chosen = await t.request('/oauth2/authorize', {
        method: 'POST', headers: { ...FORM, Cookie: csrfCookie(picker) }, body: new URLSearchParams({ ...fields, patient: 'p-ann', action: 'pick' }),
      });
      const picked = (await (await redeem(t, redirectParams(chosen).get('code')!, c, { code_verifier: verifier })).json()) as Tokens;
      expect(picked).toMatchObject({ patient: 'p-ann', need_patient_banner: true });
      expect(picked.fhirContext).toBeUndefined();
      const own = await launchedTokens(null, 'ann', { scope: 'openid offline_access patient/*.rs' });
      expect(own).toMatchObject({ patient: 'p-ann', need_patient_banner: true });
      const auth = { Authorization: basic(c.id, c.secret) };
      expect((await (await post(t, { token: own.refresh_token! }, auth, '/oauth2/introspect')).json()) as Json).toMatchObject({ patient: 'p-ann', need_patient_banner: true });
      // No patient in context: no banner to speak of.
      const none = await launchedTokens(null, 'doc', { scope: 'openid fhirUser user/*.rs' });
      expect(none.patient).toBeUndefined();
      expect(none.need_patient_banner).toBeUndefined();
      expect(decodeJwt(none.access_token).need_patient_banner).toBeUndefined();
    });

    test('an EHR launch: no picker, the code at once; the token names the patient and encounter, which bound nothing but the patient/ scopes', async () => {
      const launch = await launchFor({ patient: 'p-ann', encounter: 'e-ann' });
      const page = await t.request(`/oauth2/authorize?${authorizeQuery(params(launch))}`);
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(hiddenFields(html).launch).toBe(launch);
      expect(html).toContain('Know which patient record it was opened for (and the encounter and other records open with it)');
      const res = await signIn(t, params(launch), 'doc');
      const back = redirectParams(res);
      expect(back.get('state')).toBe('st-1');
      const body = (await (await redeem(t, back.get('code')!, c)).json()) as Tokens;
      expect(body).toMatchObject({ patient: 'p-ann', encounter: 'e-ann', scope: SCOPE });
      expect(decodeJwt(body.access_token)).toMatchObject({ patient: 'p-ann', encounter: 'e-ann', scope: SCOPE });
      // patient/ scopes read the launched patient's compartment, as with the picker.
      const app = fhirClient(t, body.access_token);
      expect(ids(await app.search('Observation'))).toEqual(['o-ann']);
      expect((await app.get('Encounter/e-bob')).status).toBe(403);
      expect((await app.get('Encounter/e-ann')).status).toBe(200);

      const auth = { Authorization: basic(c.id, c.secret) };
      const access = (await (await post(t, { token: body.access_token }, auth, '/oauth2/introspect')).json()) as Json;
      expect(access).toMatchObject({ active: true, patient: 'p-ann', encounter: 'e-ann' });
      const refreshInfo = (await (await post(t, { token: body.refresh_token! }, auth, '/oauth2/introspect')).json()) as Json;
      expect(refreshInfo).toMatchObject({ active: true, token_type: 'refresh_token', patient: 'p-ann', encounter: 'e-ann' });
      const refreshed = (await (await post(t, { grant_type: 'refresh_token', refresh_token: body.refresh_token! }, auth)).json()) as Tokens;
      expect(refreshed).toMatchObject({ patient: 'p-ann', encounter: 'e-ann', scope: SCOPE });
      expect(decodeJwt(refreshed.access_token)).toMatchObject({ patient: 'p-ann', encounter: 'e-ann' });
      // A refresh narrowed to scopes that release no encounter: the patient alone.
      const narrowed = (await (await post(t, { grant_type: 'refresh_token', refresh_token: body.refresh_token!, scope: 'openid patient/*.rs' }, auth)).json()) as Tokens;
      expect(narrowed).toMatchObject({ patient: 'p-ann', scope: 'openid patient/*.rs' });
      expect(narrowed.encounter).toBeUndefined();
    });

    test('a launch without an encounter: the patient alone; launch/encounter is not granted', async () => {
      const body = await launchedTokens(await launchFor({ patient: 'p-bob' }), 'clerk');
      expect(body.patient).toBe('p-bob');
      expect(body.encounter).toBeUndefined();
      expect(body.scope).toBe('launch openid fhirUser offline_access patient/*.rs');
      expect(decodeJwt(body.access_token).encounter).toBeUndefined();
      // `launch` with user/ scopes alone still names the launch's patient.
      const user = await launchedTokens(await launchFor({ patient: 'p-bob' }), 'doc', { scope: 'launch openid user/*.rs' });
      expect(user).toMatchObject({ patient: 'p-bob', scope: 'launch openid user/*.rs' });
    });

    test('a launch bound to a client is good for that client only', async () => {
      const bound = await launchFor({ patient: 'p-ann', client_id: c.id });
      expect((await launchedTokens(bound)).patient).toBe('p-ann');
      const res = await t.request(`/oauth2/authorize?${authorizeQuery(params(bound, { clientId: other.id }))}`);
      const back = redirectParams(res);
      expect(back.get('error')).toBe('invalid_request');
      expect(back.get('error_description')).toBe('the launch parameter was issued for another application');
      expect(back.get('state')).toBe('st-1');
      expect(back.get('code')).toBeNull();
    });

    test('a tampered, foreign or expired launch goes back with invalid_request, state kept, no login page', async () => {
      const launch = await launchFor({ patient: 'p-ann', encounter: 'e-ann' });
      const [h, p, s] = launch.split('.') as [string, string, string];
      const payload = JSON.parse(Buffer.from(p, 'base64url').toString()) as Json;
      const tampered = [
        `${h}.${Buffer.from(JSON.stringify({ ...payload, patient: 'p-bob' })).toString('base64url')}.${s}`,
        `${h}.${p}.${s.slice(0, -4)}AAAA`,
        'not-a-launch',
      ];
      for (const value of tampered) {
        const back = redirectParams(await t.request(`/oauth2/authorize?${authorizeQuery(params(value))}`));
        expect(back.get('error')).toBe('invalid_request');
        expect(back.get('error_description')).toMatch(/^the launch parameter /);
        expect(back.get('state')).toBe('st-1');
      }
      // An empty launch is no launch (RFC 6749 3.1): the login page of a standalone launch.
      expect((await t.request(`/oauth2/authorize?${authorizeQuery(params(''))}`)).status).toBe(200);
      // Another tenant's launch (the same patient id in t2) with this tenant's client.
      const t2Launch = await launchFor({ patient: 'p-ann' }, await t.tokenFor('t2', ['system/*.rs']));
      const foreign = redirectParams(await t.request(`/oauth2/authorize?${authorizeQuery(params(t2Launch))}`));
      expect(foreign.get('error')).toBe('invalid_request');
      expect(foreign.get('error_description')).toBe("the launch parameter was issued for another tenant than this client's");
      // A login ticket of the picker is no launch, nor a launch a ticket (their JWS types differ).
      const picker = await signIn(t, { clientId: c.id, scope: 'openid patient/*.rs' }, 'doc');
      const ticket = hiddenFields(await picker.text()).login_ticket!;
      expect(redirectParams(await t.request(`/oauth2/authorize?${authorizeQuery(params(ticket))}`)).get('error')).toBe('invalid_request');

      const start = t.clock.now();
      try {
        t.clock.advance((LAUNCH_TTL_S + 1) * 1000);
        const expired = redirectParams(await t.request(`/oauth2/authorize?${authorizeQuery(params(launch))}`));
        expect(expired.get('error')).toBe('invalid_request');
        expect(expired.get('error_description')).toBe('the launch parameter is invalid or has expired');
      } finally {
        t.clock.set(start);
      }
    });

    test('a login form shown while the launch was valid may be submitted for as long as a sign-in may take', async () => {
      const launch = await launchFor({ patient: 'p-ann' });
      const submitAfter = async (ms: number) => {
        const page = await t.request(`/oauth2/authorize?${authorizeQuery(params(launch))}`);
        const fields = hiddenFields(await page.text());
        const start = t.clock.now();
        t.clock.advance(ms);
        try {
          return await t.request('/oauth2/authorize', {
            method: 'POST', headers: { ...FORM, Cookie: csrfCookie(page) }, body: new URLSearchParams({ ...fields, username: 'doc', password: PASSWORD, action: 'login' }),
          });
        } finally {
          t.clock.set(start);
        }
      };
      expect(redirectParams(await submitAfter((LAUNCH_TTL_S + 60) * 1000)).get('code')).not.toBeNull();
      const late = redirectParams(await submitAfter((LAUNCH_TTL_S + LOGIN_TICKET_TTL_S + 1) * 1000));
      expect(late.get('error')).toBe('invalid_request');
      expect(late.get('code')).toBeNull();
    });

    test('who may have the launched patient in context: the picker rules; otherwise access_denied and no code', async () => {
      const bobLaunch = await launchFor({ patient: 'p-bob', encounter: 'e-bob' });
      const annLaunch = await launchFor({ patient: 'p-ann' });
      const denied = async (launch: string, username: string) => {
        const back = redirectParams(await signIn(t, params(launch), username));
        expect(back.get('error')).toBe('access_denied');
        expect(back.get('error_description')).toBe("the signed-in user may not open the launched patient's record");
        expect(back.get('state')).toBe('st-1');
        expect(back.get('code')).toBeNull();
      };
      // A RelatedPerson acts for the patient their record names (p-bob), not another.
      await denied(annLaunch, 'rel');
      expect(await launchedTokens(bobLaunch, 'rel')).toMatchObject({ patient: 'p-bob', encounter: 'e-bob' });
      // A Patient user only for themself.
      await denied(bobLaunch, 'ann');
      expect((await launchedTokens(annLaunch, 'ann')).patient).toBe('p-ann');
      // Staff (Practitioner, or no fhirUser) any patient of the tenant.
      expect((await launchedTokens(bobLaunch, 'doc')).patient).toBe('p-bob');
      expect((await launchedTokens(annLaunch, 'clerk')).patient).toBe('p-ann');
      // A patient deleted since the launch was minted cannot be put in context.
      await fhirClient(t, adminToken).put200({ resourceType: 'Patient', id: 'p-gone' });
      const goneLaunch = await launchFor({ patient: 'p-gone' });
      expect((await fhirClient(t, adminToken).del('Patient/p-gone')).status).toBe(200);
      await denied(goneLaunch, 'doc');
    });

    test('the launch scope without a launch is not granted (a standalone launch); a launch without the launch scope is ignored', async () => {
      // Without `launch`, `launch/patient` asks the picker, as in a standalone launch.
      const standalone = await signIn(t, params(null, { scope: 'launch launch/patient openid patient/*.rs' }), 'doc');
      expect(standalone.status).toBe(200);
      const html = await standalone.text();
      expect(html).toContain('<title>Choose a patient · Cinder</title>');
      expect(hiddenFields(html).scope).toBe('launch launch/patient openid patient/*.rs');
      // A Patient user needs no picker: the token's scope says `launch` was not granted.
      const own = redirectParams(await signIn(t, params(null, { scope: 'launch openid patient/*.rs' }), 'ann'));
      const ownTokens = (await (await redeem(t, own.get('code')!, c)).json()) as Tokens;
      expect(ownTokens).toMatchObject({ patient: 'p-ann', scope: 'openid patient/*.rs' });
      // Nothing else requested: nothing to grant.
      const nothing = redirectParams(await t.request(`/oauth2/authorize?${authorizeQuery(params(null, { scope: 'launch' }))}`));
      expect(nothing.get('error')).toBe('invalid_scope');
      // A launch parameter (even a forged one) without the launch scope is not read.
      const ignored = await signIn(t, params('forged', { scope: 'openid patient/*.rs' }), 'doc');
      expect(ignored.status).toBe(200);
      expect(await ignored.text()).toContain('<title>Choose a patient · Cinder</title>');
    });

    test('discovery advertises the EHR launch, its patient and encounter context and the patient banner, and no style', async () => {
      for (const path of ['/.well-known/smart-configuration', '/tenants/t1/fhir/R4/.well-known/smart-configuration']) {
        const body = (await (await t.request(path)).json()) as { capabilities: string[]; scopes_supported: string[] };
        expect(body.capabilities).toEqual(expect.arrayContaining(['launch-ehr', 'context-ehr-patient', 'context-ehr-encounter', 'context-banner', 'launch-standalone']));
        expect(body.capabilities).not.toContain('context-style');
        expect(body.scopes_supported).toEqual(expect.arrayContaining(['launch', 'launch/patient', 'launch/encounter']));
      }
    });
  });
}

describe('the EHR launch endpoint from a browser front-end', () => {
  test('CORS: a preflight and the POST are answered for an allowed origin', async () => {
    const t = await createTestApp({ env: { CINDER_CORS_ORIGINS: 'https://ehr.example' } });
    try {
      const pre = await t.request('/oauth2/launch', {
        method: 'OPTIONS', headers: { Origin: 'https://ehr.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' },
      });
      expect(pre.status).toBe(204);
      expect(pre.headers.get('access-control-allow-origin')).toBe('https://ehr.example');
      const res = await t.request('/oauth2/launch', { method: 'POST', headers: { Origin: 'https://ehr.example', 'Content-Type': 'application/json' }, body: '{}' });
      expect(res.status).toBe(401);
      expect(res.headers.get('access-control-allow-origin')).toBe('https://ehr.example');
    } finally {
      await t.close();
    }
  });
});
