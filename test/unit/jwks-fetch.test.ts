import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cacheSeconds, createJwksFetcher, JwksFetchError } from '../../src/auth/jwks-fetch.ts';
import { testClock } from '../helpers/app.ts';

describe('cacheSeconds', () => {
  test('reads max-age, bounded; no-store and no-cache mean zero; a default otherwise', () => {
    expect(cacheSeconds('public, max-age=600', 300, 86400)).toBe(600);
    expect(cacheSeconds('max-age=9999999', 300, 86400)).toBe(86400);
    expect(cacheSeconds('no-store', 300, 86400)).toBe(0);
    expect(cacheSeconds('private, no-cache', 300, 86400)).toBe(0);
    expect(cacheSeconds(null, 300, 86400)).toBe(300);
  });
});

// The server is on the loopback: these tests allow private addresses (the check: oauth-hardening.test.ts).
describe('createJwksFetcher against a real server', () => {
  let server: ReturnType<typeof Bun.serve>;
  let hits = 0;
  let streamed = 0;
  beforeAll(() => {
    server = Bun.serve({
      port: 0,
      async fetch(req) {
        const path = new URL(req.url).pathname;
        hits++;
        if (path === '/slow') await Bun.sleep(500);
        if (path === '/redirect') return Response.redirect('/jwks', 302);
        if (path === '/huge') return new Response(JSON.stringify({ keys: [{ kty: 'EC', x: 'a'.repeat(300_000) }] }));
        if (path === '/not-a-set') return Response.json({ hello: 'world' });
        if (path === '/latin1') return new Response(Buffer.from('{"keys":[{"kty":"EC","crv":"P-256","x":"x","y":"y","kid":"schl\xfcssel"}]}', 'latin1'));
        if (path === '/endless') {
          // Chunked, no Content-Length, and no end: only the size limit stops the reading.
          const chunk = new TextEncoder().encode(' '.repeat(64 * 1024));
          streamed = 0;
          return new Response(new ReadableStream({ pull: (c) => void (streamed += chunk.byteLength, c.enqueue(chunk)) }), { headers: { 'Content-Type': 'application/json' } });
        }
        return Response.json({ keys: [{ kty: 'EC', crv: 'P-256', x: 'x', y: 'y', kid: 'k1' }] }, { headers: { 'Cache-Control': 'max-age=60' } });
      },
    });
  });
  afterAll(() => server.stop(true));
  const url = (p: string) => `http://127.0.0.1:${server.port}${p}`;

  test('downloads once, concurrent callers share it, cache follows max-age', async () => {
    const clock = testClock();
    const f = createJwksFetcher(clock, { allowPrivate: true });
    hits = 0;
    const sets = await Promise.all([f.get(url('/jwks')), f.get(url('/jwks')), f.get(url('/jwks'))]);
    expect(sets[0]!.keys[0]!.kid).toBe('k1');
    expect(hits).toBe(1);
    clock.advance(61_000);
    await f.get(url('/jwks'));
    expect(hits).toBe(2);
  });

  test('a forced refresh is honoured at most once per cooldown', async () => {
    const clock = testClock();
    const f = createJwksFetcher(clock, { minRefetchMs: 10_000, allowPrivate: true });
    hits = 0;
    await f.get(url('/jwks'));
    await f.get(url('/jwks'), true);
    expect(hits).toBe(1);
    clock.advance(10_000);
    await f.get(url('/jwks'), true);
    expect(hits).toBe(2);
  });

  test('timeout, redirects, oversized and non-JWKS answers fail', async () => {
    const f = createJwksFetcher(testClock(), { timeoutMs: 100, allowPrivate: true });
    for (const p of ['/slow', '/redirect', '/huge', '/not-a-set']) {
      await expect(f.get(url(p))).rejects.toBeInstanceOf(JwksFetchError);
    }
  });

  test('a JWK Set that is not UTF-8 fails, naming the byte (its key ids are not read with U+FFFD)', async () => {
    const f = createJwksFetcher(testClock(), { allowPrivate: true });
    await expect(f.get(url('/latin1'))).rejects.toThrow(`the JWK Set at ${url('/latin1')} is not valid UTF-8: byte 0xFC at byte offset 62 (counting from 0)`);
  });

  test('a chunked answer is read no further than the size limit', async () => {
    const f = createJwksFetcher(testClock(), { timeoutMs: 5_000, allowPrivate: true });
    // It stops at the limit (256 KiB), not at the timeout: the error is the size's, not the timeout's.
    await expect(f.get(url('/endless'))).rejects.toThrow('exceeds');
    expect(streamed).toBeGreaterThan(256 * 1024);
  });

  test('a failed download falls back to the last good copy', async () => {
    const clock = testClock();
    let fail = false;
    const f = createJwksFetcher(clock, {
      allowPrivate: true,
      fetch: (async (input: string | URL | Request) => (fail ? Promise.reject(new Error('down')) : fetch(input as string))) as typeof fetch,
    });
    await f.get(url('/jwks'));
    fail = true;
    clock.advance(120_000);
    expect((await f.get(url('/jwks'))).keys[0]!.kid).toBe('k1');
  });
});

// A host that stops answering (connections accepted, no response): without a back-off every request after the
// copy expired waited for the timeout; the loopback is allowed here as above.
describe('createJwksFetcher when the host stops answering', () => {
  let server: ReturnType<typeof Bun.serve>;
  let down = false;
  let requests = 0;
  const hung: (() => void)[] = [];
  beforeAll(() => {
    server = Bun.serve({
      port: 0,
      async fetch() {
        requests++;
        if (down) await new Promise<void>((r) => hung.push(r));
        return Response.json({ keys: [{ kty: 'EC', crv: 'P-256', x: 'x', y: 'y', kid: 'k1' }] }, { headers: { 'Cache-Control': 'max-age=60' } });
      },
    });
  });
  afterAll(() => {
    for (const r of hung) r();
    server.stop(true);
  });
  const url = (p: string) => `http://127.0.0.1:${server.port}${p}`;
  /** Downloads the fetcher started (counted as it calls fetch, before any answer or timeout). */
  let fetches = 0;
  const counting = (async (input: string | URL | Request, init?: RequestInit) => (fetches++, fetch(input as string, init))) as typeof fetch;
  /** What `f.get(...)` gave (the kid, or the error's class), and how many downloads it started. */
  async function timed(get: () => Promise<{ keys: { kid?: string }[] }>): Promise<{ started: number; got: string }> {
    const before = fetches;
    const got = await get().then((s) => s.keys[0]!.kid!, (err: unknown) => (err as Error).name);
    return { started: fetches - before, got };
  }

  test('the last good copy is used at once during a back-off that doubles up to its bound, and the host is tried again after it', async () => {
    const clock = testClock();
    const f = createJwksFetcher(clock, { allowPrivate: true, fetch: counting, timeoutMs: 300, backoffMs: 2_000, maxBackoffMs: 5_000 });
    down = false;
    requests = 0;
    await f.get(url('/a'));
    down = true;
    clock.advance(61_000);
    // The first request after expiry tries, waits for the timeout, and gets the last good copy.
    const first = await timed(() => f.get(url('/a')));
    // It tried the host (which holds the request and never answers), so the copy came after the timeout.
    expect(first).toEqual({ started: 1, got: 'k1' });
    expect(requests).toBe(2);
    // During the back-off: the copy at once, and no request to the host (a forced refresh neither).
    for (const refresh of [false, true, false]) {
      const next = await timed(() => f.get(url('/a'), refresh));
      // No download started, so nothing waited for the hung host's timeout.
      expect(next).toEqual({ started: 0, got: 'k1' });
    }
    clock.advance(1_999);
    await f.get(url('/a'));
    expect(requests).toBe(2);
    // After it: tried again, and failing again the back-off doubles (4 s), then stays at its bound (5 s).
    clock.advance(1);
    expect(await timed(() => f.get(url('/a')))).toEqual({ started: 1, got: 'k1' });
    expect(requests).toBe(3);
    clock.advance(3_999);
    await f.get(url('/a'));
    expect(requests).toBe(3);
    clock.advance(1);
    await f.get(url('/a'));
    expect(requests).toBe(4);
    clock.advance(4_999);
    await f.get(url('/a'));
    expect(requests).toBe(4);
    clock.advance(1);
    await f.get(url('/a'));
    expect(requests).toBe(5);
    // The host answers again: downloaded after the back-off, and cached as usual from then on.
    down = false;
    clock.advance(5_000);
    expect((await timed(() => f.get(url('/a')))).got).toBe('k1');
    expect(requests).toBe(6);
    clock.advance(30_000);
    await f.get(url('/a'));
    expect(requests).toBe(6);
  });

  test('without a good copy: refused at once during the back-off, tried again after it', async () => {
    const clock = testClock();
    const f = createJwksFetcher(clock, { allowPrivate: true, fetch: counting, timeoutMs: 300, backoffMs: 2_000 });
    down = true;
    requests = 0;
    expect((await timed(() => f.get(url('/b')))).got).toBe('JwksFetchError');
    expect(requests).toBe(1);
    for (const refresh of [false, true]) {
      const next = await timed(() => f.get(url('/b'), refresh));
      expect(next).toEqual({ started: 0, got: 'JwksFetchError' });
    }
    await expect(f.get(url('/b'))).rejects.toThrow('not tried again for 2 s');
    expect(requests).toBe(1);
    down = false;
    clock.advance(2_000);
    expect((await timed(() => f.get(url('/b')))).got).toBe('k1');
    expect(requests).toBe(2);
  });
});
