import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createLocalJWKSet, decodeJwt, jwtVerify } from 'jose';
import { createHash } from 'node:crypto';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { basic, getCode, pkce, post, redeem, REDIRECT, testUser, userClient } from '../helpers/oauth.ts';

let t: TestApp;
let c: Awaited<ReturnType<typeof userClient>>;
beforeEach(async () => {
  t = await createTestApp();
  c = await userClient(t);
  // Alice is a Patient (Patient/p1): her `user/` scopes are granted as `patient/` ones (oauth-user-scopes.test.ts).
  await testUser(t);
});
afterEach(() => t.close());

async function error(res: Response): Promise<string> {
  expect(res.status).toBe(400);
  expect(res.headers.get('content-type')).toBe('application/json;charset=UTF-8');
  return ((await res.json()) as { error: string }).error;
}

type Tokens = { access_token: string; id_token: string; refresh_token?: string; scope: string; token_type: string; expires_in: number; patient?: string };

describe('authorization_code', () => {
  test('PKCE code -> access_token, id_token (RS256, nonce, at_hash, auth_time, claims per scope), scope', async () => {
    const { verifier, challenge } = pkce();
    const code = await getCode(t, { clientId: c.id, challenge, scope: 'openid profile email fhirUser user/*.read', nonce: 'n-123' });
    const res = await redeem(t, code, c, { code_verifier: verifier });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('pragma')).toBe('no-cache');
    const body = (await res.json()) as Tokens;
    expect(Object.keys(body).sort()).toEqual(['access_token', 'expires_in', 'id_token', 'need_patient_banner', 'patient', 'scope', 'token_type']);
    expect(body.token_type).toBe('Bearer');
    expect(body.expires_in).toBe(3600);
    expect(body.scope).toBe('openid profile email fhirUser patient/*.read');
    expect(body.patient).toBe('p1');
    const jwks = createLocalJWKSet((await (await t.request('/oauth2/jwks')).json()) as never);
    const { payload, protectedHeader } = await jwtVerify(body.id_token, jwks, {
      issuer: 'http://cinder.test', audience: c.id, algorithms: ['RS256'], currentDate: new Date(t.clock.now()),
    });
    expect(protectedHeader.alg).toBe('RS256');
    expect(payload.nonce).toBe('n-123');
    expect(payload.auth_time).toBe(Math.floor(t.clock.now() / 1000));
    const digest = createHash('sha256').update(body.access_token).digest();
    expect(payload.at_hash).toBe(digest.subarray(0, 16).toString('base64url'));
    expect(payload).toMatchObject({ name: 'Alice Example', email: 'alice@example.org', email_verified: true, fhirUser: `${t.fhir('t1')}/Patient/p1` });
    expect(payload.phone_number).toBeUndefined();
    const access = decodeJwt(body.access_token);
    expect(access).toMatchObject({ sub: payload.sub, client_id: c.id, tenant: 't1', scope: body.scope, fhirUser: `${t.fhir('t1')}/Patient/p1` });
    expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(body.access_token))).status).toBe(200);
  });

  test('refresh_token only when the sign-in asked for offline_access or offline', async () => {
    for (const [scope, expected] of [['openid offline_access', true], ['openid offline', true], ['openid user/*.read', false]] as const) {
      const code = await getCode(t, { clientId: c.id, scope });
      const body = (await (await redeem(t, code, c)).json()) as Tokens;
      expect(body.refresh_token !== undefined).toBe(expected);
    }
  });

  test('online_access is not granted (no sign-in session to bound its refresh token by): no refresh_token, and the scope does not claim it', async () => {
    const code = await getCode(t, { clientId: c.id, scope: 'openid online_access user/*.read' });
    const body = (await (await redeem(t, code, c)).json()) as Tokens;
    expect(body.refresh_token).toBeUndefined();
    expect(body.scope).toBe('openid patient/*.read');
    const discovery = (await (await t.request('/.well-known/openid-configuration')).json()) as { scopes_supported: string[] };
    expect(discovery.scopes_supported).toContain('offline_access');
    expect(discovery.scopes_supported).not.toContain('online_access');
  });

  test('no refresh_token for a client not allowed the refresh_token grant (offline scope not granted)', async () => {
    const noRefresh = await userClient(t, { grants: ['authorization_code'] });
    const code = await getCode(t, { clientId: noRefresh.id, scope: 'openid offline_access user/*.read' });
    const body = (await (await redeem(t, code, noRefresh)).json()) as Tokens;
    expect(body.refresh_token).toBeUndefined();
    expect(body.scope).toBe('openid patient/*.read');
  });

  test('patient-context scopes name the signed-in patient', async () => {
    const code = await getCode(t, { clientId: c.id, scope: 'openid launch/patient patient/*.read' });
    const body = (await (await redeem(t, code, c)).json()) as Tokens;
    expect(body.patient).toBe('p1');
    expect(decodeJwt(body.access_token).patient).toBe('p1');
  });

  test('a code is single use; the replay revokes the refresh token and access token issued from it', async () => {
    const code = await getCode(t, { clientId: c.id, scope: 'openid offline_access user/*.read' });
    const first = (await (await redeem(t, code, c)).json()) as Tokens;
    expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(first.access_token))).status).toBe(200);
    expect(await error(await redeem(t, code, c))).toBe('invalid_grant');
    const refresh = await post(t, { grant_type: 'refresh_token', refresh_token: first.refresh_token! }, { Authorization: basic(c.id, c.secret!) });
    expect(await error(refresh)).toBe('invalid_grant');
    expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(first.access_token))).status).toBe(401);
  });

  test('N concurrent redemptions of one code: exactly one succeeds', async () => {
    const code = await getCode(t, { clientId: c.id });
    const results = await Promise.all(Array.from({ length: 12 }, () => redeem(t, code, c)));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 400)).toHaveLength(11);
    for (const r of results.filter((r) => r.status === 400)) expect(((await r.json()) as { error: string }).error).toBe('invalid_grant');
  });

  test('unknown code -> invalid_grant', async () => {
    expect(await error(await redeem(t, 'not-a-code', c))).toBe('invalid_grant');
  });

  test('expired code -> invalid_grant', async () => {
    const code = await getCode(t, { clientId: c.id });
    t.clock.advance(61_000);
    expect(await error(await redeem(t, code, c))).toBe('invalid_grant');
  });

  test("another client's code -> invalid_grant, and the code stays usable by its client", async () => {
    const other = await userClient(t);
    const code = await getCode(t, { clientId: c.id });
    expect(await error(await redeem(t, code, other))).toBe('invalid_grant');
    expect((await redeem(t, code, c)).status).toBe(200);
  });

  test('redirect_uri missing -> invalid_request; different -> invalid_grant', async () => {
    const code = await getCode(t, { clientId: c.id });
    const missing = await post(t, { grant_type: 'authorization_code', code }, { Authorization: basic(c.id, c.secret!) });
    expect(await error(missing)).toBe('invalid_request');
    expect(await error(await redeem(t, code, c, { redirect_uri: REDIRECT + '/other' }))).toBe('invalid_grant');
  });

  test('code missing -> invalid_request', async () => {
    expect(await error(await post(t, { grant_type: 'authorization_code', redirect_uri: REDIRECT }, { Authorization: basic(c.id, c.secret!) }))).toBe('invalid_request');
  });

  // The contract: code_verifier is required when the code was requested with PKCE, and a required parameter missing is
  // invalid_request; the code stays unused for the request that sends it.
  test('PKCE: missing verifier -> invalid_request, the code left unused; wrong verifier -> invalid_grant; malformed verifier -> invalid_request', async () => {
    const { verifier, challenge } = pkce();
    const code = await getCode(t, { clientId: c.id, challenge });
    expect(await error(await redeem(t, code, c))).toBe('invalid_request');
    expect((await redeem(t, code, c, { code_verifier: verifier })).status).toBe(200);
    expect(await error(await redeem(t, await getCode(t, { clientId: c.id, challenge }), c, { code_verifier: pkce().verifier }))).toBe('invalid_grant');
    expect(await error(await redeem(t, await getCode(t, { clientId: c.id, challenge }), c, { code_verifier: 'short' }))).toBe('invalid_request');
    expect(await error(await redeem(t, await getCode(t, { clientId: c.id, challenge }), c, { code_verifier: 'a'.repeat(42) + '!' }))).toBe('invalid_request');
  });

  test('PKCE downgrade: a verifier for a code requested without PKCE -> invalid_grant', async () => {
    expect(await error(await redeem(t, await getCode(t, { clientId: c.id }), c, { code_verifier: pkce().verifier }))).toBe('invalid_grant');
  });

  test('public client: PKCE and client_id, no secret', async () => {
    const pub = await userClient(t, { secret: false, grants: ['authorization_code'] });
    const { verifier, challenge } = pkce();
    const code = await getCode(t, { clientId: pub.id, challenge });
    const res = await redeem(t, code, pub, { code_verifier: verifier });
    expect(res.status).toBe(200);
  });

  test('a client without the authorization_code grant -> unauthorized_client', async () => {
    const code = await getCode(t, { clientId: c.id });
    const { createClient } = await import('../../src/auth/admin.ts');
    const cc = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'] });
    const res = await post(t, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT }, { Authorization: basic(cc.client.clientId, cc.clientSecret!) });
    expect(await error(res)).toBe('unauthorized_client');
  });

  test('scope/attribute rule: email scope but the client cannot read email_verified -> invalid_grant', async () => {
    const limited = await userClient(t, { readAttributes: ['email', 'name'] });
    const denied = await getCode(t, { clientId: limited.id, scope: 'openid email' });
    const res = await redeem(t, denied, limited);
    expect(await error(res)).toBe('invalid_grant');
    const allowed = await getCode(t, { clientId: limited.id, scope: 'openid profile' });
    const ok = (await (await redeem(t, allowed, limited)).json()) as Tokens;
    expect(decodeJwt(ok.id_token).name).toBe('Alice Example');
  });

  test('claims the client may not read stay out of the tokens', async () => {
    const limited = await userClient(t, { readAttributes: ['name'] });
    const code = await getCode(t, { clientId: limited.id, scope: 'openid profile' });
    const body = (await (await redeem(t, code, limited)).json()) as Tokens;
    expect(decodeJwt(body.access_token).fhirUser).toBeUndefined();
    expect(decodeJwt(body.id_token).fhirUser).toBeUndefined();
  });

  test('a disabled or deleted user -> invalid_grant', async () => {
    const code = await getCode(t, { clientId: c.id });
    const user = (await t.store.users.byUsername('t1', 'alice'))!;
    const { Database } = await import('bun:sqlite');
    const db = new Database(`${t.dir}/cinder.db`);
    db.query('UPDATE users SET disabled = 1 WHERE id = ?').run(user.id);
    db.close();
    expect(await error(await redeem(t, code, c))).toBe('invalid_grant');
  });
});
