/**
 * All three grants, private_key_jwt, revocation, introspection and userinfo driven by a real OAuth
 * client library (oauth4webapi) against Cinder listening on a real port.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { exportJWK, generateKeyPair, type CryptoKey } from 'jose';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as oauth from 'oauth4webapi';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { createUser } from '../../src/auth/users.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { csrfCookie, hiddenFields } from '../helpers/oauth.ts';
import { startCinder, type Cinder } from '../helpers/server.ts';

const insecure = { [oauth.allowInsecureRequests]: true } as const;
const REDIRECT = 'http://127.0.0.1:9/callback';
const dir = mkdtempSync(join(tmpdir(), 'cinder-e2e-'));
const store = createSqliteStore(join(dir, 'cinder.db'));
let cinder: Cinder;
let as: oauth.AuthorizationServer;
let jwksServer: ReturnType<typeof Bun.serve>;
const clients = {} as Record<'backend' | 'asymmetric' | 'app' | 'resourceServer', { id: string; secret: string | null }>;
let privateKey: CryptoKey;

beforeAll(async () => {
  // The client's JWK Set is served on the loopback, beside Cinder.
  cinder = await startCinder({ store, env: { CINDER_JWKS_ALLOW_PRIVATE: 'true' } });
  await createTenant(store, cinder.clock, 'acme');
  const pair = await generateKeyPair('RS384', { extractable: true });
  privateKey = pair.privateKey;
  const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'backend-key-1', alg: 'RS384' };
  jwksServer = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => Response.json({ keys: [jwk] }, { headers: { 'Cache-Control': 'max-age=60' } }) });
  const mk = async (o: Parameters<typeof createClient>[2]) => {
    const r = await createClient(store, cinder.clock, o);
    return { id: r.client.clientId, secret: r.clientSecret };
  };
  clients.backend = await mk({ tenant: 'acme', scopes: ['system/*.read', 'system/*.write'] });
  clients.asymmetric = await mk({ tenant: 'acme', scopes: ['system/*.rs'], jwksUrl: `http://127.0.0.1:${jwksServer.port}/jwks.json` });
  clients.app = await mk({ tenant: 'acme', grants: ['authorization_code', 'refresh_token'], scopes: ['user/*.read'], redirectUris: [REDIRECT] });
  clients.resourceServer = await mk({ tenant: 'acme', scopes: ['introspect'] });
  await createUser(store, cinder.clock, { tenant: 'acme', username: 'carol', password: 'a long password', name: 'Carol', email: 'carol@example.org', emailVerified: true });
  const issuer = new URL(cinder.url);
  as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oidc', ...insecure }));
});

afterAll(async () => {
  cinder.stop();
  jwksServer.stop(true);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

async function readPatients(accessToken: string): Promise<Response> {
  return oauth.protectedResourceRequest(accessToken, 'GET', new URL(`${cinder.fhir('acme')}/Patient`), undefined, undefined, insecure);
}

describe('oauth4webapi against a listening Cinder', () => {
  test('discovery: issuer and endpoints', () => {
    expect(as.issuer).toBe(cinder.url);
    expect(as.token_endpoint).toBe(`${cinder.url}/oauth2/token`);
    expect(as.code_challenge_methods_supported).toEqual(['S256']);
  });

  test('client_credentials with client_secret_basic; the token is a valid RFC 9068 access token', async () => {
    const client: oauth.Client = { client_id: clients.backend.id };
    const res = await oauth.clientCredentialsGrantRequest(as, client, oauth.ClientSecretBasic(clients.backend.secret!), { scope: 'system/*.read' }, insecure);
    const tokens = await oauth.processClientCredentialsResponse(as, client, res);
    expect(tokens.token_type).toBe('bearer');
    expect(tokens.scope).toBe('system/*.read');
    expect(tokens.id_token).toBeUndefined();
    expect(tokens.refresh_token).toBeUndefined();
    const req = new Request(cinder.fhir('acme'), { headers: { Authorization: `Bearer ${tokens.access_token}` } });
    const claims = await oauth.validateJwtAccessToken(as, req, cinder.fhir('acme'), { signingAlgorithms: ['ES256'], ...insecure });
    expect(claims.client_id).toBe(clients.backend.id);
    expect((await readPatients(tokens.access_token)).status).toBe(200);
  });

  test('client_credentials with private_key_jwt (RS384, JWK Set URL)', async () => {
    const client: oauth.Client = { client_id: clients.asymmetric.id };
    const auth = oauth.PrivateKeyJwt({ key: privateKey, kid: 'backend-key-1' });
    for (let i = 0; i < 2; i++) {
      const res = await oauth.clientCredentialsGrantRequest(as, client, auth, { scope: 'system/*.rs' }, insecure);
      const tokens = await oauth.processClientCredentialsResponse(as, client, res);
      expect(tokens.scope).toBe('system/*.rs');
      expect((await readPatients(tokens.access_token)).status).toBe(200);
    }
  });

  test('authorization_code with PKCE and OpenID Connect, then refresh_token, userinfo, introspection, revocation', async () => {
    const client: oauth.Client = { client_id: clients.app.id };
    const auth = oauth.ClientSecretBasic(clients.app.secret!);
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const nonce = oauth.generateRandomNonce();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      client_id: client.client_id, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid profile email offline_access user/*.read',
      aud: cinder.fhir('acme'), code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state, nonce,
    }).toString();
    const page = await fetch(url);
    const login = await fetch(as.authorization_endpoint!, {
      method: 'POST', redirect: 'manual',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', Cookie: csrfCookie(page) },
      body: new URLSearchParams({ ...hiddenFields(await page.text()), username: 'carol', password: 'a long password' }),
    });
    expect(login.status).toBe(303);
    const params = oauth.validateAuthResponse(as, client, new URL(login.headers.get('location')!), state);
    const res = await oauth.authorizationCodeGrantRequest(as, client, auth, params, REDIRECT, verifier, insecure);
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, res, { expectedNonce: nonce, requireIdToken: true });
    await oauth.validateApplicationLevelSignature(as, res, insecure);
    const idClaims = oauth.getValidatedIdTokenClaims(tokens)!;
    expect(idClaims).toMatchObject({ iss: cinder.url, aud: clients.app.id, nonce, email: 'carol@example.org', email_verified: true, name: 'Carol' });
    expect(typeof idClaims.auth_time).toBe('number');
    expect(tokens.refresh_token).toBeString();
    expect((await readPatients(tokens.access_token)).status).toBe(200);

    const info = await oauth.processUserInfoResponse(as, client, idClaims.sub, await oauth.userInfoRequest(as, client, tokens.access_token, insecure));
    expect(info.email).toBe('carol@example.org');

    const refreshed = await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, auth, tokens.refresh_token!, insecure));
    expect(refreshed.refresh_token).toBeUndefined();
    expect(oauth.getValidatedIdTokenClaims(refreshed)!.sub).toBe(idClaims.sub);

    const rs: oauth.Client = { client_id: clients.resourceServer.id };
    const rsAuth = oauth.ClientSecretBasic(clients.resourceServer.secret!);
    const introspected = await oauth.processIntrospectionResponse(as, rs, await oauth.introspectionRequest(as, rs, rsAuth, refreshed.access_token, insecure));
    expect(introspected.active).toBe(true);
    expect(introspected.client_id).toBe(clients.app.id);

    await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, auth, tokens.refresh_token!, insecure));
    const after = await oauth.refreshTokenGrantRequest(as, client, auth, tokens.refresh_token!, insecure);
    await expect(oauth.processRefreshTokenResponse(as, client, after)).rejects.toMatchObject({ error: 'invalid_grant' });
    const gone = await oauth.processIntrospectionResponse(as, rs, await oauth.introspectionRequest(as, rs, rsAuth, refreshed.access_token, insecure));
    expect(gone.active).toBe(false);
    const refused = fetch(`${cinder.fhir('acme')}/Patient`, { headers: { Authorization: `Bearer ${refreshed.access_token}` } });
    expect((await refused).status).toBe(401);
  });
});
