/**
 * private_key_jwt with a JWK Set URL whose host stops answering (connections accepted, no response), through the
 * token endpoint against a real HTTP server on the loopback (CINDER_JWKS_ALLOW_PRIVATE=true). Once the cached copy
 * has expired, one token request waits for the download's timeout and is served from the last good copy; the next
 * ones are answered at once from it, the host left alone during a back-off. Without it every token request of the
 * client waited for the 5 s timeout. The back-off is tested with the app's fetch (AppDeps.fetch) giving up after
 * DEADLINE_MS, as a download that times out does; the 5 s timeout itself once, with the app's own fetch.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { ASSERTION_TYPE } from '../../src/auth/client-assertion.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { post } from '../helpers/oauth.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const { privateKey, publicKey } = await generateKeyPair('ES384', { extractable: true });
const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES384' };

let down = false;
let downloads = 0;
const hung: (() => void)[] = [];
let server: ReturnType<typeof Bun.serve>;
beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch() {
      downloads++;
      if (down) await new Promise<void>((r) => hung.push(r));
      return Response.json({ keys: [jwk] }, { headers: { 'Cache-Control': 'max-age=300' } });
    },
  });
});
afterAll(() => {
  for (const r of hung) r();
  server.stop(true);
});

/** When the test's fetch gives up on a download (the fetcher's own timeout, 5 s, is tested once, below). */
const DEADLINE_MS = 1_000;

/** The global fetch, giving up after DEADLINE_MS as well as when the fetcher's own timeout aborts it. */
const shortDeadline = ((input: string | URL | Request, init: RequestInit = {}) =>
  fetch(input, { ...init, signal: AbortSignal.any([...(init.signal ? [init.signal] : []), AbortSignal.timeout(DEADLINE_MS)]) })) as typeof fetch;

async function tokenRequest(t: TestApp, clientId: string): Promise<{ status: number; error?: string; ms: number }> {
  const now = Math.floor(t.clock.now() / 1000);
  const jwt = await new SignJWT({ iss: clientId, sub: clientId, aud: 'http://cinder.test/oauth2/token', exp: now + 240, iat: now, jti: crypto.randomUUID() })
    .setProtectedHeader({ alg: 'ES384', kid: 'k1', typ: 'JWT' }).sign(privateKey);
  const started = performance.now();
  const res = await post(t, { grant_type: 'client_credentials', client_assertion_type: ASSERTION_TYPE, client_assertion: jwt, scope: 'system/*.read' });
  const body = (await res.json()) as { error?: string };
  return { status: res.status, ms: performance.now() - started, ...(body.error ? { error: body.error } : {}) };
}

for (const target of targets) {
  test(`${target.kind}: a JWK Set host that stops answering holds one token request for the timeout, not each`, async () => {
    const t = await createTestApp({ store: (await target.migrated()).open(), env: { CINDER_JWKS_ALLOW_PRIVATE: 'true' }, fetch: shortDeadline });
    try {
      const base = `http://127.0.0.1:${server.port}`;
      const known = (await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'], jwksUrl: `${base}/known.json` })).client.clientId;
      const unseen = (await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'], jwksUrl: `${base}/unseen.json` })).client.clientId;
      down = false;
      downloads = 0;
      expect((await tokenRequest(t, known)).status).toBe(200);
      expect(downloads).toBe(1);

      down = true;
      t.clock.advance(301_000);
      // The copy expired: one request tries the host, waits for the timeout, and is served from the last good copy.
      const first = await tokenRequest(t, known);
      expect(first.status).toBe(200);
      expect(first.ms).toBeGreaterThan(DEADLINE_MS * 0.9);
      expect(downloads).toBe(2);
      // The next ones are answered at once (well within the deadline each would wait), the host left alone.
      for (let i = 0; i < 3; i++) {
        const next = await tokenRequest(t, known);
        expect(next.status).toBe(200);
        expect(next.ms).toBeLessThan(DEADLINE_MS / 2);
      }
      expect(downloads).toBe(2);

      // A client with no good copy waits once, then is refused at once during the back-off.
      const refused = await tokenRequest(t, unseen);
      expect(refused).toMatchObject({ status: 400, error: 'invalid_client' });
      expect(downloads).toBe(3);
      const again = await tokenRequest(t, unseen);
      expect(again).toMatchObject({ status: 400, error: 'invalid_client' });
      expect(again.ms).toBeLessThan(DEADLINE_MS / 2);
      expect(downloads).toBe(3);

      // The host is back: after the back-off it is downloaded again, and both clients get tokens.
      down = false;
      t.clock.advance(2_000);
      expect((await tokenRequest(t, known)).status).toBe(200);
      expect((await tokenRequest(t, unseen)).status).toBe(200);
      expect(downloads).toBe(5);
    } finally {
      await t.close();
    }
  }, 60_000);
}

// The download's own timeout (src/auth/jwks-fetch.ts, 5 s), with the app's own fetch: a host that accepts the
// connection and never answers holds a token request of a client without a good copy that long, and no longer.
// The store plays no part in it: one is enough.
test('a JWK Set host that never answers holds a token request for the 5 s download timeout, then the client is refused', async () => {
  const t = await createTestApp({ store: (await targets[0]!.migrated()).open(), env: { CINDER_JWKS_ALLOW_PRIVATE: 'true' } });
  try {
    const client = (await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'], jwksUrl: `http://127.0.0.1:${server.port}/never.json` })).client.clientId;
    down = true;
    const refused = await tokenRequest(t, client);
    expect(refused).toMatchObject({ status: 400, error: 'invalid_client' });
    expect(refused.ms).toBeGreaterThan(4_900);
    expect(refused.ms).toBeLessThan(8_000);
  } finally {
    down = false;
    await t.close();
  }
}, 60_000);
