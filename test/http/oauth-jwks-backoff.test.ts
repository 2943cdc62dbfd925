/**
 * private_key_jwt with a JWK Set URL whose host stops answering (connections accepted, no response), through the
 * token endpoint against a real HTTP server on the loopback (CINDER_JWKS_ALLOW_PRIVATE=true). Once the cached copy
 * has expired, one token request waits for the download's timeout and is served from the last good copy; the next
 * ones are answered from it without a download (nothing to wait for), the host left alone during a back-off. Without
 * it every token request of the client waited for the 5 s timeout. The back-off is tested with the app's fetch
 * (AppDeps.fetch) giving up as soon as the host holds the request, as a download that times out does; the fetcher's
 * own 5 s timeout once, the timer it asks for elapsing when the host holds the request. No time is measured: the
 * downloads the host sees and the downloads given up are counted.
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
/** Called when the host holds a request: the download's deadline comes (the host will not answer). */
let onHung: (() => void) | undefined;
let server: ReturnType<typeof Bun.serve>;
beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch() {
      downloads++;
      if (down) {
        const held = new Promise<void>((r) => hung.push(r));
        onHung?.();
        await held;
      }
      return Response.json({ keys: [jwk] }, { headers: { 'Cache-Control': 'max-age=300' } });
    },
  });
});
afterAll(() => {
  for (const r of hung) r();
  server.stop(true);
});

/** A download's deadline, come. */
const timedOut = () => new DOMException('The operation timed out.', 'TimeoutError');

/** Downloads the test's fetch gave up on. */
let gaveUp = 0;
/**
 * The global fetch, giving up as a download that times out does as soon as the host holds the request (the
 * fetcher's own timeout, 5 s, is tested once, below), as well as when the fetcher's own timeout aborts it.
 */
const shortDeadline = ((input: string | URL | Request, init: RequestInit = {}) => {
  const deadline = new AbortController();
  onHung = () => {
    gaveUp++;
    deadline.abort(timedOut());
  };
  return fetch(input, { ...init, signal: AbortSignal.any([...(init.signal ? [init.signal] : []), deadline.signal]) }).finally(() => (onHung = undefined));
}) as typeof fetch;

async function tokenRequest(t: TestApp, clientId: string): Promise<{ status: number; error?: string }> {
  const now = Math.floor(t.clock.now() / 1000);
  const jwt = await new SignJWT({ iss: clientId, sub: clientId, aud: 'http://cinder.test/oauth2/token', exp: now + 240, iat: now, jti: crypto.randomUUID() })
    .setProtectedHeader({ alg: 'ES384', kid: 'k1', typ: 'JWT' }).sign(privateKey);
  const res = await post(t, { grant_type: 'client_credentials', client_assertion_type: ASSERTION_TYPE, client_assertion: jwt, scope: 'system/*.read' });
  const body = (await res.json()) as { error?: string };
  return { status: res.status, ...(body.error ? { error: body.error } : {}) };
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
      gaveUp = 0;
      expect((await tokenRequest(t, known)).status).toBe(200);
      expect(downloads).toBe(1);

      down = true;
      t.clock.advance(301_000);
      // The copy expired: one request tries the host, waits for the download's deadline, and is served from the last good copy.
      expect(await tokenRequest(t, known)).toEqual({ status: 200 });
      expect({ downloads, gaveUp }).toEqual({ downloads: 2, gaveUp: 1 });
      // The next ones are answered from it with no download (nothing to wait for), the host left alone.
      for (let i = 0; i < 3; i++) expect(await tokenRequest(t, known)).toEqual({ status: 200 });
      expect({ downloads, gaveUp }).toEqual({ downloads: 2, gaveUp: 1 });

      // A client with no good copy waits once, then is refused with no download during the back-off.
      expect(await tokenRequest(t, unseen)).toEqual({ status: 400, error: 'invalid_client' });
      expect({ downloads, gaveUp }).toEqual({ downloads: 3, gaveUp: 2 });
      expect(await tokenRequest(t, unseen)).toEqual({ status: 400, error: 'invalid_client' });
      expect({ downloads, gaveUp }).toEqual({ downloads: 3, gaveUp: 2 });

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

// The download's own timeout (src/auth/jwks-fetch.ts, 5 s), with the global fetch: a host that accepts the
// connection and never answers holds a token request of a client without a good copy until the timer the download
// asks for elapses (here at once, when the host holds the request), then the client is refused. The store plays no
// part in it: one is enough.
test('a JWK Set host that never answers holds a token request until the 5 s download timeout, then the client is refused', async () => {
  const timeout = AbortSignal.timeout;
  const timers = new Map<AbortSignal, { ms: number; elapse(): void }>();
  AbortSignal.timeout = (ms: number) => {
    const timer = new AbortController();
    timers.set(timer.signal, { ms, elapse: () => timer.abort(timedOut()) });
    return timer.signal;
  };
  const asked: number[] = [];
  let downloading: AbortSignal | undefined;
  const recording = ((input: string | URL | Request, init: RequestInit = {}) => {
    downloading = init.signal ?? undefined;
    return fetch(input, init);
  }) as typeof fetch;
  onHung = () => {
    const timer = downloading && timers.get(downloading);
    if (!timer) return;
    asked.push(timer.ms);
    timer.elapse();
  };
  const t = await createTestApp({ store: (await targets[0]!.migrated()).open(), env: { CINDER_JWKS_ALLOW_PRIVATE: 'true' }, fetch: recording });
  try {
    const client = (await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'], jwksUrl: `http://127.0.0.1:${server.port}/never.json` })).client.clientId;
    down = true;
    expect(await tokenRequest(t, client)).toEqual({ status: 400, error: 'invalid_client' });
    // The download was cut by its own timer, of 5 s, and by nothing else.
    expect(asked).toEqual([5_000]);
    expect(downloading?.aborted).toBe(true);
  } finally {
    AbortSignal.timeout = timeout;
    onHung = undefined;
    down = false;
    await t.close();
  }
}, 60_000);
