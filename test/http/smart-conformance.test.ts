/**
 * What ONC's Inferno SMART App Launch test kit (inferno-framework/smart-app-launch-test-kit, suites STU1,
 * STU2 and STU2.2) checks of an authorization server, and what the Backend Services authorization suites
 * (smart-on-fhir/bdt `authorization.test.ts`, Inferno's backend_services_* tests) check of the token
 * endpoint, reproduced check by check through `app.request()` on both databases. Each test names the
 * Inferno test ids it reproduces; its assertions are those tests' assertions, plus what Cinder promises
 * beside them. Where the contract (interface.md) says otherwise, the contract is followed and the test
 * says so (all token errors are HTTP 400; no refresh_token on refresh; an unknown scope is ignored).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, importJWK, jwtVerify, SignJWT, type CryptoKey, type JWK } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { ASSERTION_TYPE } from '../../src/auth/client-assertion.ts';
import { createUser } from '../../src/auth/users.ts';
import { MIN_ROTATION_DELAY_MS } from '../../src/auth/keys.ts';
import { BASE, type TestApp } from '../helpers/app.ts';
import { type Json } from '../helpers/fhir.ts';
import { authorizeQuery, basic, FORM, hiddenFields, csrfCookie, PASSWORD, pkce, post, REDIRECT, type AuthorizeParams } from '../helpers/oauth.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const FHIR = `${BASE}/tenants/t1/fhir/R4`;
const TOKEN_URL = `${BASE}/oauth2/token`;
const INFERNO_ORIGIN = 'https://inferno.example';
/** Inferno STU2/2.2 default requested scopes of the standalone and the EHR launch. */
const STANDALONE_SCOPES = 'launch/patient openid fhirUser offline_access patient/*.rs';
const EHR_SCOPES = 'launch openid fhirUser offline_access patient/*.rs';
/** The resource types Inferno's openid_fhir_user_claim test accepts in `fhirUser`. */
const FHIR_USER_TYPES = ['Patient', 'Practitioner', 'RelatedPerson', 'Person'];
/** Inferno token_payload_validation FHIR_ID_REGEX. */
const FHIR_ID = /[A-Za-z0-9\-.]{1,64}(\/_history\/[A-Za-z0-9\-.]{1,64})?(#[A-Za-z0-9\-.]{1,64})?/;

type Tokens = Json & { access_token: string; token_type: string; expires_in: number; scope: string; id_token?: string; refresh_token?: string; patient?: string; encounter?: string };
type Pair = { alg: string; kid: string; privateKey: CryptoKey; jwk: JWK };
type AppClient = { id: string; secret: string | null; kind: 'symmetric' | 'asymmetric' | 'public' };

async function keyPair(alg: string): Promise<Pair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = `${alg}-${crypto.randomUUID().slice(0, 8)}`;
  return { alg, kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg } };
}

/** Inferno ClientAssertionBuilder: {iss, sub, aud, exp: now + 5 minutes, jti: 64 hex}, header {alg, kid, typ: JWT}. */
function clientAssertion(t: TestApp, key: Pair, clientId: string, o: { claims?: Json; header?: Json } = {}): Promise<string> {
  const now = Math.floor(t.clock.now() / 1000);
  const claims = { iss: clientId, sub: clientId, aud: TOKEN_URL, exp: now + 300, jti: Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('hex'), ...o.claims };
  return new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT', ...o.header }).sign(key.privateKey);
}

/** The URL a relative or absolute endpoint names, as Inferno's make_url_absolute (URI.join with `url/`). */
const absolute = (endpoint: string | undefined) => (endpoint ? new URL(endpoint, `${FHIR}/`).href : endpoint);

/** Inferno validate_required_fields_present + validate_token_field_types + validate_token_type. */
function checkTokenBody(body: Tokens): void {
  for (const field of ['access_token', 'token_type', 'expires_in', 'scope']) expect(body[field] ?? '').not.toBe('');
  for (const field of ['access_token', 'token_type', 'scope', 'refresh_token']) if (body[field] !== undefined) expect(typeof body[field]).toBe('string');
  expect(typeof body.expires_in).toBe('number');
  expect(body.token_type.toLowerCase()).toBe('bearer');
}

/** Inferno validate_fhir_context_stu2_2: an array of objects with a relative reference, a canonical or an identifier. */
function checkFhirContext(context: unknown): void {
  if (context === undefined) return;
  expect(Array.isArray(context)).toBe(true);
  for (const item of context as Json[]) {
    expect(typeof item).toBe('object');
    expect(item.reference ?? item.canonical ?? item.identifier).toBeDefined();
    if (item.reference) {
      expect(item.reference.startsWith('http')).toBe(false);
      const [type, id] = item.reference.split('/');
      expect(type).toMatch(/^[A-Z][A-Za-z]+$/);
      expect(id).toMatch(FHIR_ID);
    }
    if (item.type) expect(item.type).toMatch(/^[A-Z][A-Za-z]+$/);
  }
}

for (const target of targets) {
  describe(`Inferno SMART App Launch and Backend Services checks, on ${target.kind}`, () => {
    let t: TestApp;
    let adminToken: string;
    let symmetric: AppClient;
    let asymmetric: AppClient;
    let publicApp: AppClient;
    let backend: string;
    let appKey: Pair;
    const backendKeys: Record<string, Pair> = {};

    beforeAll(async () => {
      let api;
      ({ t, api } = await appOnFresh(target));
      adminToken = await t.token();
      await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Example', given: ['Alice'] }] });
      await api.put200({ resourceType: 'Practitioner', id: 'dr1', name: [{ family: 'Who' }] });
      await api.put200({ resourceType: 'Encounter', id: 'e1', status: 'in-progress', class: { code: 'AMB' }, subject: { reference: 'Patient/p1' } });
      await createUser(t.store, t.clock, { tenant: 't1', username: 'alice', password: PASSWORD, fhirUser: 'Patient/p1' });
      await createUser(t.store, t.clock, { tenant: 't1', username: 'doc', password: PASSWORD, fhirUser: 'Practitioner/dr1' });
      const app = { tenant: 't1', name: 'Inferno', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT], scopes: ['launch/patient', 'patient/*.rs', 'user/*.rs'] };
      const sym = await createClient(t.store, t.clock, app);
      symmetric = { id: sym.client.clientId, secret: sym.clientSecret!, kind: 'symmetric' };
      appKey = await keyPair('RS384');
      const asym = await createClient(t.store, t.clock, { ...app, secret: false, jwks: { keys: [appKey.jwk] } });
      asymmetric = { id: asym.client.clientId, secret: null, kind: 'asymmetric' };
      const pub = await createClient(t.store, t.clock, { ...app, grants: ['authorization_code'], secret: false });
      publicApp = { id: pub.client.clientId, secret: null, kind: 'public' };
      for (const alg of ['RS384', 'ES384']) backendKeys[alg] = await keyPair(alg);
      // Registered as Inferno publishes its keys (smart_jwks.json's public halves): `use`, `key_ops` and `ext` beside kid and alg.
      const published = Object.values(backendKeys).map((k) => ({ ...k.jwk, use: 'sig', key_ops: ['verify'], ext: true }));
      const be = await createClient(t.store, t.clock, { tenant: 't1', name: 'Bulk client', grants: ['client_credentials'], secret: false, scopes: ['system/*.rs'], jwks: { keys: published } });
      backend = be.client.clientId;
    }, 120_000);
    afterAll(() => t.close());

    /** Inferno smart_app_redirect(_stu2) + code_received: GET (or POST, `authorize-post`) the request, sign in, read the redirect. */
    async function authorize(p: AuthorizeParams, username = 'alice', method: 'GET' | 'POST' = 'GET'): Promise<URLSearchParams> {
      const query = authorizeQuery(p);
      const page = method === 'GET'
        ? await t.request(`/oauth2/authorize?${query}`)
        : await t.request('/oauth2/authorize', { method: 'POST', headers: FORM, body: query });
      expect(page.status).toBe(200);
      const res = await t.request('/oauth2/authorize', {
        method: 'POST', headers: { ...FORM, Cookie: csrfCookie(page) },
        body: new URLSearchParams({ ...hiddenFields(await page.text()), username, password: PASSWORD, action: 'login' }),
      });
      expect(res.status).toBe(303);
      const location = new URL(res.headers.get('location')!);
      expect(`${location.origin}${location.pathname}`).toBe(REDIRECT);
      return location.searchParams;
    }

    /** How Inferno authenticates each kind of client at the token endpoint (token_exchange(_stu2|_stu2_2), token_refresh(_stu2)). */
    async function credentials(c: AppClient, form: Record<string, string>, headers: Record<string, string> = {}): Promise<[Record<string, string>, Record<string, string>]> {
      if (c.kind === 'symmetric') return [form, { ...headers, Authorization: basic(c.id, c.secret!) }];
      if (c.kind === 'asymmetric') return [{ ...form, client_assertion_type: ASSERTION_TYPE, client_assertion: await clientAssertion(t, appKey, c.id) }, headers];
      return [{ ...form, client_id: c.id }, { ...headers, Origin: INFERNO_ORIGIN }];
    }

    /** A whole launch as Inferno runs it: state and PKCE S256 always, `aud` = the FHIR base; the token response. */
    async function launch(c: AppClient, scope: string, o: { username?: string; launch?: string; method?: 'GET' | 'POST' } = {}) {
      const state = crypto.randomUUID();
      const { verifier, challenge } = pkce();
      const extra: Record<string, string> = o.launch ? { launch: o.launch } : {};
      const redirect = await authorize({ clientId: c.id, scope, state, challenge, aud: FHIR, extra }, o.username, o.method);
      const [form, headers] = await credentials(c, { code: redirect.get('code')!, redirect_uri: REDIRECT, grant_type: 'authorization_code', code_verifier: verifier });
      const res = await post(t, form, headers);
      return { state, redirect, res };
    }

    async function launchTokens(c: AppClient, scope = STANDALONE_SCOPES, o: { username?: string; launch?: string } = {}): Promise<Tokens> {
      const { res } = await launch(c, scope, o);
      expect(res.status).toBe(200);
      return (await res.json()) as Tokens;
    }

    async function mintLaunch(body: Json): Promise<string> {
      const res = await t.request('/oauth2/launch', { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${adminToken}` }, body: JSON.stringify(body) });
      expect(res.status).toBe(201);
      return ((await res.json()) as { launch: string }).launch;
    }

    describe('discovery (smart_discovery, smart_discovery_stu2, smart_discovery_stu2_2)', () => {
      let config: Json;

      test('well_known_endpoint: 200 JSON at {fhir}/.well-known/smart-configuration, Content-Type application/json', async () => {
        const res = await t.request(`${FHIR}/.well-known/smart-configuration`, { headers: { Accept: 'application/json' } });
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')!.startsWith('application/json')).toBe(true);
        config = (await res.json()) as Json;
        // The host-root copy (DESIGN.md) is the same document.
        expect(await (await t.request('/.well-known/smart-configuration')).json()).toEqual(config);
      });

      test('well_known_capabilities_stu1 / _stu2: required fields and types, S256 without plain, issuer and jwks_uri with sso-openid-connect', async () => {
        for (const [key, type] of [['authorization_endpoint', 'string'], ['token_endpoint', 'string'], ['capabilities', 'array'], ['grant_types_supported', 'array'], ['code_challenge_methods_supported', 'array']] as const) {
          expect(config[key]).toBeDefined();
          expect(type === 'array' ? Array.isArray(config[key]) && config[key].length > 0 : typeof config[key] === 'string' && config[key] !== '').toBe(true);
        }
        expect(config.grant_types_supported).toContain('authorization_code');
        expect(config.code_challenge_methods_supported).toContain('S256');
        expect(config.code_challenge_methods_supported).not.toContain('plain');
        expect(config.capabilities.every((c: unknown) => typeof c === 'string')).toBe(true);
        expect(config.capabilities).toContain('sso-openid-connect');
        expect(typeof config.issuer).toBe('string');
        expect(typeof config.jwks_uri).toBe('string');
        // Each capability Inferno's launches exercise is claimed.
        for (const c of ['launch-ehr', 'launch-standalone', 'client-public', 'client-confidential-symmetric', 'client-confidential-asymmetric', 'context-standalone-patient', 'permission-v2', 'authorize-post']) {
          expect(config.capabilities).toContain(c);
        }
      });

      test('smart_discovery (STU1) capability statement: the oauth-uris extension of the SMART-on-FHIR security service, with authorize and token', async () => {
        const res = await t.request(`${FHIR}/metadata`, { headers: { Accept: 'application/fhir+json' } });
        expect(res.status).toBe(200);
        const cs = (await res.json()) as Json;
        const security = (cs.rest as Json[]).map((r) => r.security).filter(Boolean)
          .find((s: Json) => s.service?.some((sv: Json) => sv.coding?.some((c: Json) => c.code === 'SMART-on-FHIR')));
        const ext = security?.extension?.find((e: Json) => e.url === 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris');
        expect(ext).toBeDefined();
        const uri = (name: string) => absolute(ext.extension.find((e: Json) => e.url === name)?.valueUri);
        expect(uri('authorize')).toBeTruthy();
        expect(uri('token')).toBeTruthy();
        // "OAuth 2.0 Endpoints in the conformance statement match those from the well-known configuration":
        // each of the six compared, absent on both sides counting as a match.
        const pairs: [string, string][] = [
          ['authorization_endpoint', 'authorize'], ['token_endpoint', 'token'], ['introspection_endpoint', 'introspect'],
          ['management_endpoint', 'manage'], ['registration_endpoint', 'register'], ['revocation_endpoint', 'revoke'],
        ];
        for (const [wk, cap] of pairs) expect([wk, uri(cap)]).toEqual([wk, absolute(config[wk])]);
      });

      test('smart_cors_well_known_endpoint / smart_cors_metadata_request: Access-Control-Allow-Origin for an Origin', async () => {
        for (const path of [`${FHIR}/.well-known/smart-configuration`, `${FHIR}/metadata`]) {
          const res = await t.request(path, { headers: { Accept: 'application/json', Origin: INFERNO_ORIGIN } });
          expect(res.status).toBe(200);
          expect([INFERNO_ORIGIN, '*']).toContain(res.headers.get('access-control-allow-origin')!);
        }
      });
    });

    describe('standalone launch (smart_standalone_launch, _stu2, _stu2_2)', () => {
      for (const kind of ['symmetric', 'asymmetric', 'public'] as const) {
        const c = () => ({ symmetric, asymmetric, public: publicApp })[kind];
        test(`client-${kind === 'public' ? 'public' : `confidential-${kind}`}: redirect with code and the state echoed; token exchange; token_response_body(_stu2_2); token_response_headers`, async () => {
          const { state, redirect, res } = await launch(c(), STANDALONE_SCOPES);
          // smart_code_received: a code and no error; Inferno matches the redirect by its state.
          expect(redirect.get('error')).toBeNull();
          expect(redirect.get('code')).toBeTruthy();
          expect(redirect.get('state')).toBe(state);
          // smart_token_exchange
          expect(res.status).toBe(200);
          const body = (await res.json()) as Tokens;
          checkTokenBody(body);
          // check_for_missing_scopes (a warning in Inferno): every requested scope granted, a public client's offline_access aside
          // (Cinder gives public clients no refresh tokens: they are not rotated, RFC 9700 2.2.2).
          const granted = body.scope.split(' ');
          const expected = STANDALONE_SCOPES.split(' ').filter((s) => kind !== 'public' || s !== 'offline_access');
          expect(expected.filter((s) => !granted.includes(s))).toEqual([]);
          expect(body.patient).toBe('p1');
          checkFhirContext(body.fhirContext);
          expect(body.id_token).toBeString();
          expect(body.refresh_token !== undefined).toBe(kind !== 'public');
          // smart_token_response_headers
          expect(res.headers.get('cache-control')!.toLowerCase()).toContain('no-store');
          expect(res.headers.get('pragma')!.toLowerCase()).toContain('no-cache');
          // smart_cors_token_exchange (public clients only)
          if (kind === 'public') expect([INFERNO_ORIGIN, '*']).toContain(res.headers.get('access-control-allow-origin')!);
        });
      }

      test('authorize-post (smart_app_redirect_stu2 with a POST authorization request): the same code flow', async () => {
        const { state, redirect, res } = await launch(symmetric, STANDALONE_SCOPES, { method: 'POST' });
        expect(redirect.get('state')).toBe(state);
        expect(res.status).toBe(200);
        checkTokenBody((await res.json()) as Tokens);
      });

      test('the FHIR API answers the token (Inferno reads Patient/{patient} next)', async () => {
        const body = await launchTokens(symmetric);
        const res = await t.request(`${FHIR}/Patient/${body.patient}`, { headers: { Authorization: `Bearer ${body.access_token}`, Accept: 'application/fhir+json', Origin: INFERNO_ORIGIN } });
        expect(res.status).toBe(200);
        expect([INFERNO_ORIGIN, '*']).toContain(res.headers.get('access-control-allow-origin')!);
      });
    });

    describe('STU1 defaults (smart_standalone_launch, smart_ehr_launch with v1 scopes)', () => {
      test('standalone `launch/patient openid fhirUser offline_access patient/*.read`: every scope granted, the patient in context', async () => {
        const body = await launchTokens(symmetric, 'launch/patient openid fhirUser offline_access patient/*.read');
        checkTokenBody(body);
        expect(body.scope.split(' ').sort()).toEqual(['fhirUser', 'launch/patient', 'offline_access', 'openid', 'patient/*.read']);
        expect(body.patient).toBe('p1');
        expect(body.refresh_token).toBeString();
      });

      test('EHR `launch openid fhirUser offline_access user/*.read` by a Practitioner: granted, and the fhirUser read answers 200', async () => {
        const launchValue = await mintLaunch({ patient: 'p1', client_id: symmetric.id });
        const body = await launchTokens(symmetric, 'launch openid fhirUser offline_access user/*.read', { username: 'doc', launch: launchValue });
        expect(body.scope.split(' ').sort()).toEqual(['fhirUser', 'launch', 'offline_access', 'openid', 'user/*.read']);
        expect(body.patient).toBe('p1');
        const fhirUser = String(decodeJwt(body.id_token!).fhirUser);
        expect(fhirUser).toBe(`${FHIR}/Practitioner/dr1`);
        expect((await t.request(fhirUser, { headers: { Authorization: `Bearer ${body.access_token}` } })).status).toBe(200);
      });
    });

    describe('the authorization request: state, PKCE S256, aud, redirect_uri, launch (SMART App Launch 2.2, RFC 6749 4.1.2.1)', () => {
      const open = (p: Partial<AuthorizeParams>) => t.request(`/oauth2/authorize?${authorizeQuery({ clientId: symmetric.id, scope: STANDALONE_SCOPES, state: 's-1', challenge: pkce().challenge, aud: FHIR, ...p })}`);
      /** An error sent back to the app: a 303 to its redirect URI with `error`, the state echoed and `iss` (RFC 9207). */
      async function redirectedError(res: Response, error: string): Promise<void> {
        expect(res.status).toBe(303);
        const location = new URL(res.headers.get('location')!);
        expect(`${location.origin}${location.pathname}`).toBe(REDIRECT);
        expect(location.searchParams.get('error')).toBe(error);
        expect(location.searchParams.get('state')).toBe('s-1');
        expect(location.searchParams.get('iss')).toBe(BASE);
        expect(location.searchParams.get('code')).toBeNull();
      }

      test('aud: the FHIR base with a trailing slash is accepted; another server, or none with FHIR scopes, is refused', async () => {
        expect((await open({ aud: `${FHIR}/` })).status).toBe(200);
        await redirectedError(await open({ aud: 'https://counterfeit.example/fhir' }), 'invalid_request');
        await redirectedError(await open({ aud: `${BASE}/tenants/t2/fhir/R4` }), 'invalid_request');
        await redirectedError(await open({ aud: null }), 'invalid_request');
      });

      test('PKCE: only S256; a public client must use it; the verifier must match at the token endpoint', async () => {
        const { challenge } = pkce();
        await redirectedError(await open({ extra: { code_challenge: challenge, code_challenge_method: 'plain' } }), 'invalid_request');
        await redirectedError(await open({ clientId: publicApp.id, challenge: null }), 'invalid_request');
        const redirect = await authorize({ clientId: symmetric.id, scope: STANDALONE_SCOPES, state: 's-2', challenge, aud: FHIR });
        const res = await post(t, { grant_type: 'authorization_code', code: redirect.get('code')!, redirect_uri: REDIRECT, code_verifier: pkce().verifier }, { Authorization: basic(symmetric.id, symmetric.secret!) });
        expect(res.status).toBe(400);
        expect(((await res.json()) as Json).error).toBe('invalid_grant');
      });

      test('redirect_uri not registered, or an unknown client: an error page, never a redirect', async () => {
        for (const res of [await open({ redirectUri: 'https://evil.example/callback' }), await open({ clientId: 'no-such-client' })]) {
          expect(res.status).toBe(400);
          expect(res.headers.get('location')).toBeNull();
          expect(res.headers.get('content-type')).toStartWith('text/html');
        }
      });

      test('a launch that is not this server\'s is refused; a code is single-use and its redirect_uri must match', async () => {
        await redirectedError(await open({ scope: EHR_SCOPES, extra: { launch: 'not-a-launch' } }), 'invalid_request');
        const { verifier, challenge } = pkce();
        const redirect = await authorize({ clientId: symmetric.id, scope: STANDALONE_SCOPES, state: 's-3', challenge, aud: FHIR });
        const auth = { Authorization: basic(symmetric.id, symmetric.secret!) };
        const exchange = (redirectUri: string) => post(t, { grant_type: 'authorization_code', code: redirect.get('code')!, redirect_uri: redirectUri, code_verifier: verifier }, auth);
        expect(((await (await exchange('https://app.example/other')).json()) as Json).error).toBe('invalid_grant');
        // A refused attempt does not use the code up (Inferno allows either; node-oidc-provider checks the redirect URI
        // and verifier before consuming): whoever intercepted it cannot spend it before its client. It is single use
        // (RFC 6749 4.1.2): once redeemed, a replay is invalid_grant.
        expect((await exchange(REDIRECT)).status).toBe(200);
        const replay = await exchange(REDIRECT);
        expect(replay.status).toBe(400);
        expect(((await replay.json()) as Json).error).toBe('invalid_grant');
      });
    });

    describe('EHR launch (smart_ehr_launch, _stu2, _stu2_2)', () => {
      test('launch received, redirect, token exchange: the launch patient and encounter in the token response', async () => {
        const launchValue = await mintLaunch({ patient: 'p1', encounter: 'e1', client_id: symmetric.id });
        // smart_launch_received: the EHR opens the app with `iss` and `launch`; the app sends `launch` back.
        expect(launchValue).toBeTruthy();
        const body = await launchTokens(symmetric, `${EHR_SCOPES} launch/encounter`, { username: 'doc', launch: launchValue });
        checkTokenBody(body);
        expect(body.patient).toBe('p1');
        expect(body.encounter).toBe('e1');
        checkFhirContext(body.fhirContext);
      });
    });

    describe('OpenID Connect (smart_openid_connect, _stu2_2)', () => {
      for (const [username, fhirUser] of [['alice', 'Patient/p1'], ['doc', 'Practitioner/dr1']] as const) {
        test(`${fhirUser} signed in: decode, openid-configuration from iss, required fields, JWKS RSA keys, RS256 header, payload, fhirUser read`, async () => {
          const launchValue = username === 'doc' ? await mintLaunch({ patient: 'p1', client_id: symmetric.id }) : undefined;
          const body = await launchTokens(symmetric, username === 'doc' ? EHR_SCOPES : STANDALONE_SCOPES, { username, ...(launchValue ? { launch: launchValue } : {}) });
          // smart_openid_decode_id_token
          const payload = decodeJwt(body.id_token!);
          const header = decodeProtectedHeader(body.id_token!);
          // smart_openid_retrieve_configuration: {iss}/.well-known/openid-configuration, 200, application/json
          const res = await t.request(`${String(payload.iss).replace(/\/$/, '')}/.well-known/openid-configuration`);
          expect(res.status).toBe(200);
          expect(res.headers.get('content-type')!.split(';')[0]).toBe('application/json');
          const oidc = (await res.json()) as Json;
          // smart_openid_required_configuration_fields
          for (const f of ['issuer', 'authorization_endpoint', 'token_endpoint', 'jwks_uri', 'response_types_supported', 'subject_types_supported', 'id_token_signing_alg_values_supported']) {
            expect([f, oidc[f] !== undefined]).toEqual([f, true]);
          }
          expect(oidc.id_token_signing_alg_values_supported).toContain('RS256');
          // smart_openid_retrieve_jwks: keys an array, with RSA keys, each importable
          const jwksRes = await t.request(oidc.jwks_uri);
          expect(jwksRes.status).toBe(200);
          const jwks = (await jwksRes.json()) as { keys: JWK[] };
          expect(Array.isArray(jwks.keys)).toBe(true);
          const rsa = jwks.keys.filter((k) => k.kty === 'RSA');
          expect(rsa.length).toBeGreaterThan(0);
          for (const k of rsa) await importJWK(k, 'RS256');
          // smart_openid_token_header: RS256; a kid naming one of the RSA keys when there are several
          expect(header.alg).toBe('RS256');
          if (rsa.length > 1) expect(rsa.some((k) => k.kid === header.kid)).toBe(true);
          else expect(header.kid === undefined || rsa[0]!.kid === header.kid).toBe(true);
          // smart_openid_token_payload: signature, iss = the configuration's issuer, aud = client_id, exp; sub under 256 characters
          const verified = await jwtVerify(body.id_token!, createLocalJWKSet({ keys: rsa }), {
            algorithms: ['RS256'], issuer: oidc.issuer, audience: symmetric.id, clockTolerance: 60, currentDate: new Date(t.clock.now()),
          });
          for (const claim of ['iss', 'sub', 'aud', 'exp', 'iat']) expect(verified.payload[claim]).toBeDefined();
          expect(String(verified.payload.sub).length).toBeGreaterThan(0);
          expect(String(verified.payload.sub).length).toBeLessThan(256);
          // smart_openid_fhir_user_claim: fhirUser of an allowed type, read with the access token: 200 of that type
          const claim = String(verified.payload.fhirUser);
          const [type, id] = claim.split('/').slice(-2) as [string, string];
          expect(`${type}/${id}`).toBe(fhirUser);
          expect(FHIR_USER_TYPES).toContain(type);
          const read = await t.request(`${FHIR}/${type}/${id}`, { headers: { Authorization: `Bearer ${body.access_token}`, Accept: 'application/fhir+json', Origin: INFERNO_ORIGIN } });
          expect(read.status).toBe(200);
          expect(((await read.json()) as Json).resourceType).toBe(type);
          // smart_cors_openid_fhir_user_claim
          expect([INFERNO_ORIGIN, '*']).toContain(read.headers.get('access-control-allow-origin')!);
        });
      }

      test('after a key rotation the JWKS holds two RSA keys and the id_token header names its kid (smart_openid_token_header)', async () => {
        await t.keys.rotate({ delayMs: MIN_ROTATION_DELAY_MS });
        const body = await launchTokens(symmetric);
        const jwks = (await (await t.request('/oauth2/jwks')).json()) as { keys: JWK[] };
        const rsa = jwks.keys.filter((k) => k.kty === 'RSA');
        expect(rsa.length).toBe(2);
        const { kid } = decodeProtectedHeader(body.id_token!);
        expect(rsa.filter((k) => k.kid === kid).length).toBe(1);
      });
    });

    describe('token refresh (smart_token_refresh, _stu2; without and with scopes)', () => {
      for (const kind of ['symmetric', 'asymmetric'] as const) {
        test(`client-confidential-${kind}: 200, token_refresh_body (required fields, types, bearer, scopes a subset), no-store headers`, async () => {
          const c = kind === 'symmetric' ? symmetric : asymmetric;
          const first = await launchTokens(c);
          let refreshToken = first.refresh_token!;
          let received = first.scope;
          for (const withScopes of [false, true]) {
            const [form, headers] = await credentials(c, { grant_type: 'refresh_token', refresh_token: refreshToken, ...(withScopes ? { scope: received } : {}) });
            const res = await post(t, form, headers);
            expect(res.status).toBe(200);
            const body = (await res.json()) as Tokens;
            checkTokenBody(body);
            // validate_scope_subset
            expect(body.scope.split(' ').filter((s) => !received.split(' ').includes(s))).toEqual([]);
            expect(res.headers.get('cache-control')!.toLowerCase()).toContain('no-store');
            expect(res.headers.get('pragma')!.toLowerCase()).toContain('no-cache');
            // The contract returns no refresh_token on refresh (Inferno keeps the one it has); the old one stays usable.
            expect(body.refresh_token).toBeUndefined();
            refreshToken = body.refresh_token ?? refreshToken;
            received = body.scope;
            expect((await t.request(`${FHIR}/Patient/p1`, { headers: { Authorization: `Bearer ${body.access_token}` } })).status).toBe(200);
          }
        });
      }

      test('a scope narrower than the grant (a subset of its scopes) is granted as asked; a wider one is refused (the contract: invalid_request)', async () => {
        const first = await launchTokens(symmetric);
        const auth = { Authorization: basic(symmetric.id, symmetric.secret!) };
        const narrower = await post(t, { grant_type: 'refresh_token', refresh_token: first.refresh_token!, scope: 'openid patient/*.rs' }, auth);
        expect(narrower.status).toBe(200);
        expect(((await narrower.json()) as Tokens).scope).toBe('openid patient/*.rs');
        const wider = await post(t, { grant_type: 'refresh_token', refresh_token: first.refresh_token!, scope: `${first.scope} patient/*.cruds` }, auth);
        expect(wider.status).toBe(400);
        expect(((await wider.json()) as Json).error).toBe('invalid_request');
      });
    });

    describe('token introspection (smart_token_introspection, _stu2_2)', () => {
      const introspect = (token: string) =>
        post(t, { token }, { Authorization: basic(symmetric.id, symmetric.secret!), Accept: 'application/json' }, '/oauth2/introspect');

      test('an active token: active, client_id, the same scopes, exp, patient, and iss, sub and fhirUser as in the id_token', async () => {
        const launchValue = await mintLaunch({ patient: 'p1', encounter: 'e1', client_id: symmetric.id });
        const tokens = await launchTokens(symmetric, `${EHR_SCOPES} launch/encounter`, { username: 'doc', launch: launchValue });
        const res = await introspect(tokens.access_token);
        expect(res.status).toBe(200);
        const body = (await res.json()) as Json;
        expect(body.active).toBe(true);
        expect(body.client_id).toBe(symmetric.id);
        expect(body.scope.split(' ').sort()).toEqual(tokens.scope.split(' ').sort());
        expect(body.exp).toBeGreaterThanOrEqual(Math.floor(t.clock.now() / 1000) - 600);
        expect(body.patient).toBe(tokens.patient!);
        expect(body.encounter).toBe(tokens.encounter!);
        const idToken = decodeJwt(tokens.id_token!);
        expect(body.iss).toBe(idToken.iss!);
        expect(body.sub).toBe(idToken.sub!);
        expect(body.fhirUser).toBe(idToken.fhirUser);
      });

      test('an invalid token: 200 and exactly {"active":false}', async () => {
        const res = await introspect('invalid_token_value');
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({ active: false });
      });

      test('a revoked access token and a revoked refresh token are inactive (RFC 7009, RFC 7662)', async () => {
        const tokens = await launchTokens(symmetric);
        for (const token of [tokens.access_token, tokens.refresh_token!]) {
          const revoked = await post(t, { token }, { Authorization: basic(symmetric.id, symmetric.secret!) }, '/oauth2/revoke');
          expect(revoked.status).toBe(200);
          expect(await (await introspect(token)).json()).toEqual({ active: false });
        }
        const refresh = await post(t, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, { Authorization: basic(symmetric.id, symmetric.secret!) });
        expect(refresh.status).toBe(400);
        expect(((await refresh.json()) as Json).error).toBe('invalid_grant');
      });
    });

    describe('backend services (backend_services_authorization; bdt Authorization / Token endpoint)', () => {
      const form = async (o: { key?: Pair; claims?: Json; header?: Json; body?: Record<string, string | undefined> } = {}) => {
        const key = o.key ?? backendKeys.RS384!;
        const base: Record<string, string | undefined> = {
          scope: 'system/*.rs', grant_type: 'client_credentials', client_assertion_type: ASSERTION_TYPE,
          client_assertion: await clientAssertion(t, key, backend, { claims: o.claims, header: o.header }), ...o.body,
        };
        return Object.fromEntries(Object.entries(base).filter(([, v]) => v !== undefined)) as Record<string, string>;
      };
      /** bdt expectOAuthError: a JSON client error whose `error` is an OAuth code (the contract: HTTP 400). */
      async function oauthError(res: Response, code?: string): Promise<void> {
        expect(res.status).toBe(400);
        expect(res.headers.get('content-type')!.startsWith('application/json')).toBe(true);
        const body = (await res.json()) as Json;
        expect(['invalid_request', 'invalid_client', 'invalid_grant', 'unauthorized_client', 'unsupported_grant_type', 'invalid_scope']).toContain(body.error);
        if (code) expect(body.error).toBe(code);
      }

      for (const alg of ['RS384', 'ES384']) {
        test(`backend_services_auth_request_success / _response_body with ${alg}: access_token, bearer, numeric expires_in, scope`, async () => {
          const res = await post(t, await form({ key: backendKeys[alg] }), { Accept: 'application/json' });
          expect(res.status).toBe(200);
          const body = (await res.json()) as Tokens;
          expect(body.access_token).toBeTruthy();
          expect(body.token_type.toLowerCase()).toBe('bearer');
          expect(typeof body.expires_in).toBe('number');
          expect(body.expires_in).toBeGreaterThan(0);
          expect(body.scope).toBe('system/*.rs');
          expect(body.id_token).toBeUndefined();
          expect(body.refresh_token).toBeUndefined();
        });
      }

      test('backend_services_invalid_grant_type: 400 (unsupported_grant_type)', async () => {
        await oauthError(await post(t, await form({ body: { grant_type: 'not_a_grant_type' } })), 'unsupported_grant_type');
      });

      test('backend_services_invalid_client_assertion / _invalid_jwt: a wrong client_assertion_type is 400', async () => {
        await oauthError(await post(t, await form({ body: { client_assertion_type: 'not_an_assertion_type' } })), 'invalid_request');
      });

      test('bdt: a JSON body instead of application/x-www-form-urlencoded is refused', async () => {
        await oauthError(await t.request('/oauth2/token', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(await form()) }), 'invalid_request');
      });

      test("bdt: 'grant_type', 'client_assertion_type' and 'client_assertion' must be present and valid", async () => {
        for (const param of ['grant_type', 'client_assertion_type', 'client_assertion']) {
          await oauthError(await post(t, await form({ body: { [param]: undefined } })));
          await oauthError(await post(t, await form({ body: { [param]: 'invalid test value' } })));
        }
      });

      test('bdt: aud, iss, an unregistered client id, a bad jku, an unknown signing key are refused with invalid_client', async () => {
        await oauthError(await post(t, await form({ claims: { aud: 'test-bad-aud-value' } })), 'invalid_client');
        await oauthError(await post(t, await form({ claims: { iss: 'test-iss-value' } })), 'invalid_client');
        await oauthError(await post(t, await form({ claims: { iss: 'test-bad-client-id', sub: 'test-bad-client-id' } })), 'invalid_client');
        await oauthError(await post(t, await form({ header: { jku: 'test-bad-jku' } })), 'invalid_client');
        const stranger = await keyPair('ES384');
        await oauthError(await post(t, await form({ key: { ...stranger, kid: backendKeys.ES384!.kid } })), 'invalid_client');
        await oauthError(await post(t, await form({ key: stranger })), 'invalid_client');
      });

      test('an assertion expiring more than five minutes ahead, or already used (jti), is refused with invalid_client', async () => {
        const now = Math.floor(t.clock.now() / 1000);
        await oauthError(await post(t, await form({ claims: { exp: now + 600 } })), 'invalid_client');
        const once = await form();
        expect((await post(t, once)).status).toBe(200);
        await oauthError(await post(t, once), 'invalid_client');
      });

      test('bdt scopes, under the contract: no scope gives the client its scopes; v1, v2 and mixed read scopes are granted as asked', async () => {
        const granted = async (scope: string | undefined) => {
          const res = await post(t, await form({ body: { scope } }));
          expect(res.status).toBe(200);
          return ((await res.json()) as Tokens).scope;
        };
        // The contract: "If no scope is requested, all custom scopes associated with the client are used" (bdt: invalid_scope).
        expect(await granted(undefined)).toBe('system/*.rs');
        expect(await granted('system/*.read')).toBe('system/*.read');
        expect(await granted('system/Patient.rs')).toBe('system/Patient.rs');
        // "Supports mixed v1 and v2 scopes": both granted.
        expect(await granted('system/Patient.read system/Observation.rs')).toBe('system/Patient.read system/Observation.rs');
        // A requested scope the client lacks is ignored (the contract), the others granted.
        expect(await granted('system/Patient.cruds system/Observation.rs launch fhirUser')).toBe('system/Observation.rs');
      });

      test('bdt scopes, under the contract: nothing grantable (empty, unknown action or type, write, non-system) is invalid_request, not invalid_scope', async () => {
        // bdt expects invalid_scope; the contract's token errors do not name it, and a scope value the client may not have
        // is its "parameter value is unsupported": invalid_request.
        for (const scope of ['', 'system/Patient.unknownAction', 'system/Patient.xyz', 'system/UnknownResource.read', 'system/UnknownResource.r', 'system/Patient.write', 'system/Patient.cud', 'system/Patient.u', 'launch fhirUser']) {
          const res = await post(t, await form({ body: { scope } }));
          await oauthError(res, 'invalid_request');
        }
      });
    });
  });
}
