/**
 * `cinder keys rotate` beside a running server (another process on the same database), as applications and resource
 * servers see it through /oauth2/jwks with jose: the new keys are published at once and sign only from the hand-over
 * (--delay), so a JWK Set cached as the server allows (max-age) verifies every token; a token forged with the old
 * key and dated after the hand-over is refused (a leaked key); `--compromised` withdraws the old keys at once.
 * Both stores.
 */
import { afterAll, beforeAll, describe, expect, setSystemTime, test } from 'bun:test';
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, importJWK, jwtVerify, SignJWT, type JSONWebKeySet, type JWTPayload } from 'jose';
import { issueDeviceCookie } from '../../src/auth/device-cookie.ts';
import { DEFAULT_ROTATION_DELAY_MS, MIN_ROTATION_DELAY_MS, type KeyRing } from '../../src/auth/keys.ts';
import { createSealer } from '../../src/auth/sealed.ts';
import { MAX_TOKEN_TTL } from '../../src/auth/tokens.ts';
import { BASE, createTestApp, fhirInit, type TestApp, type TestClock } from '../helpers/app.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { authorizeQuery, csrfCookie, FORM, getCode, hiddenFields, PASSWORD, redeem, testUser, userClient } from '../helpers/oauth.ts';
import { StoreUnavailableError } from '../../src/store/interface/errors.ts';
import type { Store } from '../../src/store/types.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/** The system clock, moved by the tests: the app and the command line (systemClock) both read it. */
const systemTime: TestClock = {
  now: () => Date.now(),
  advance: (ms) => void setSystemTime(new Date(Date.now() + ms)),
  set: (ms) => void setSystemTime(new Date(ms)),
};
afterAll(() => void setSystemTime());

/** How long /oauth2/jwks may be cached (its Cache-Control max-age). */
const JWKS_MAX_AGE_MS = 300_000;
/** The shortest --delay the command takes. */
const SHORTEST = String(MIN_ROTATION_DELAY_MS / 1000);

for (const target of targets) {
  describe(`signing keys rotated with the command line, on ${target.kind}`, () => {
    let t: TestApp;
    let cli: ReturnType<typeof createCliEnv>;
    let app: Awaited<ReturnType<typeof userClient>>;

    beforeAll(async () => {
      setSystemTime(new Date('2026-03-02T09:00:00Z'));
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      t = await createTestApp({ store, clock: systemTime });
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      app = await userClient(t);
      await testUser(t);
    }, 60_000);
    afterAll(async () => {
      await t.close();
      cli.close();
    });

    async function rotate(...flags: string[]): Promise<Record<string, string | string[]>> {
      const r = await cli.run(['keys', 'rotate', ...flags, '--json']);
      if (r.code !== 0) throw new Error(`cinder keys rotate: ${r.code} ${r.stderr}`);
      return JSON.parse(r.stdout);
    }
    /** The JWK Set as a relying party fetches it, with the Cache-Control it is told. */
    async function fetchJwks(): Promise<JSONWebKeySet> {
      const res = await t.request('/oauth2/jwks');
      expect(res.headers.get('cache-control')).toBe(`public, max-age=${JWKS_MAX_AGE_MS / 1000}`);
      return (await res.json()) as JSONWebKeySet;
    }
    const kids = (jwks: JSONWebKeySet) => jwks.keys.map((k) => k.kid);
    /** An access token and an id_token, through the login page and the token endpoint. */
    async function signedIn(): Promise<{ access_token: string; id_token: string }> {
      const code = await getCode(t, { clientId: app.id, scope: 'openid fhirUser patient/*.read' });
      const res = await redeem(t, code, app);
      expect(res.status).toBe(200);
      return (await res.json()) as { access_token: string; id_token: string };
    }
    /** Verifies both tokens with jose against `jwks` (a relying party's cached copy); returns their kids. */
    async function verifyWith(jwks: JSONWebKeySet, tokens: { access_token: string; id_token: string }): Promise<string[]> {
      const keySet = createLocalJWKSet(jwks);
      await jwtVerify(tokens.access_token, keySet, { issuer: BASE, typ: 'at+jwt', algorithms: ['ES256'] });
      await jwtVerify(tokens.id_token, keySet, { issuer: BASE, audience: app.id, algorithms: ['RS256'] });
      return [decodeProtectedHeader(tokens.access_token).kid!, decodeProtectedHeader(tokens.id_token).kid!];
    }
    const readWith = async (token: string) => (await t.request(`${t.fhir('t1')}/Patient`, fhirInit(token))).status;
    async function forger(kid: string, claims: JWTPayload) {
      const leaked = (await importJWK((await t.store.keys.list(0)).find((k) => k.kid === kid)!.privateJwk, 'ES256')) as CryptoKey;
      return (iat: number, exp: number) =>
        new SignJWT({ ...claims, iat, exp, jti: crypto.randomUUID() }).setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' }).sign(leaked);
    }

    test('the new keys are published at once and sign from the hand-over: a JWK Set cached as allowed verifies every token', async () => {
      const cached = await fetchJwks();
      const before = await signedIn();
      const oldKids = await verifyWith(cached, before);
      const started = Date.now();
      const rotation = await rotate();
      expect(rotation.new_kids).toHaveLength(2);
      expect([...rotation.retired_kids!].sort()).toEqual([...oldKids].sort());
      expect(Date.parse(rotation.signs_from as string)).toBeGreaterThanOrEqual(started + DEFAULT_ROTATION_DELAY_MS);
      expect(Date.parse(rotation.signs_from as string)).toBeLessThan(started + DEFAULT_ROTATION_DELAY_MS + 60_000);
      // Published at once, beside the keys signing.
      expect(kids(await fetchJwks())).toEqual(expect.arrayContaining([...rotation.new_kids!, ...oldKids]));
      // Past the server's key reload, and up to the end of the cached copy's max-age: still the old keys.
      systemTime.advance(JWKS_MAX_AGE_MS - 1000);
      expect(await verifyWith(cached, await signedIn())).toEqual(oldKids);
      // The relying party fetches the set again (max-age over), and has the new keys before they sign.
      systemTime.advance(1000);
      const refreshed = await fetchJwks();
      systemTime.set(Date.parse(rotation.signs_from as string));
      const after = await signedIn();
      expect([...(await verifyWith(refreshed, after))].sort()).toEqual([...rotation.new_kids!].sort());
      // The old keys stay published, and what they signed is taken, until it has expired.
      expect(kids(await fetchJwks())).toEqual(expect.arrayContaining(oldKids));
      expect(await readWith(before.access_token)).toBe(200);
      expect(await readWith(after.access_token)).toBe(200);
      systemTime.advance((MAX_TOKEN_TTL + 3600) * 1000);
      expect(kids(await fetchJwks())).not.toContain(oldKids[0]);
      expect(kids(await fetchJwks())).toEqual(expect.arrayContaining(rotation.new_kids as string[]));
    });

    test('the shortest --delay outlasts a JWK Set fetched just before the rotation, with a server whose clock runs a minute ahead', async () => {
      const cached = await fetchJwks();
      const fetchedAt = Date.now();
      const rotation = await rotate('--delay', SHORTEST);
      // A server a minute ahead signs with the new keys when its clock reads signs_from: a minute earlier in truth.
      const firstSigned = Date.parse(rotation.signs_from as string) - 60_000;
      expect(firstSigned).toBeGreaterThanOrEqual(fetchedAt + JWKS_MAX_AGE_MS);
      // Up to then the copy verifies what is signed; from then on the relying party holds a copy fetched after the rotation.
      systemTime.set(firstSigned - 1000);
      expect(rotation.retired_kids).toEqual(expect.arrayContaining(await verifyWith(cached, await signedIn())));
      const refreshed = await fetchJwks();
      expect(kids(refreshed)).toEqual(expect.arrayContaining(rotation.new_kids as string[]));
      systemTime.set(Date.parse(rotation.signs_from as string));
      expect([...(await verifyWith(refreshed, await signedIn()))].sort()).toEqual([...(rotation.new_kids as string[])].sort());
    });

    test('a token forged with a retired key is refused when dated from its hand-over on', async () => {
      const current = await t.token();
      const kid = decodeProtectedHeader(current).kid!;
      const forge = await forger(kid, decodeJwt(current));
      const rotation = await rotate('--delay', SHORTEST);
      const handOver = Date.parse(rotation.signs_from as string) / 1000;
      systemTime.set(handOver * 1000 + 5000);
      expect(decodeProtectedHeader(await t.token()).kid).not.toBe(kid);
      // Dated before the hand-over, as the server dated what it signed with the key: taken.
      expect(await readWith(await forge(handOver - 1, handOver + 300))).toBe(200);
      // Dated at or after it (the first two minutes after it were taken): forged.
      for (const iat of [handOver, handOver + 1, handOver + 4]) expect(await readWith(await forge(iat, iat + 300))).toBe(401);
    });

    test('--compromised withdraws every key signing before at once; the new keys sign at once and verify against the set', async () => {
      const before = await signedIn();
      const forge = await forger(decodeProtectedHeader(before.access_token).kid!, decodeJwt(before.access_token));
      expect(await readWith(before.access_token)).toBe(200);
      const asked = Date.now();
      const rotation = await rotate('--compromised');
      expect(rotation.withdrawn_kids).toEqual(expect.arrayContaining([decodeProtectedHeader(before.access_token).kid!, decodeProtectedHeader(before.id_token).kid!]));
      // From the moment of the command by the clock the command line and the server share, with no hand-over delay.
      expect(Date.parse(rotation.signs_from as string)).toBeGreaterThanOrEqual(asked);
      expect(Date.parse(rotation.signs_from as string)).toBeLessThanOrEqual(Date.now());
      const jwks = await fetchJwks();
      expect(kids(jwks).sort()).toEqual([...rotation.new_kids!].sort());
      // Every running server reads the keys again within a minute; requests that come in while it reads them wait for
      // the read (they were answered with the keys as last read, the withdrawn one included, as if the read had failed).
      systemTime.advance(61_000);
      expect(await Promise.all([1, 2, 3].map(() => readWith(before.access_token)))).toEqual([401, 401, 401]);
      const nowS = Math.floor(Date.now() / 1000);
      expect(await readWith(await forge(nowS - 120, nowS + 300))).toBe(401);
      const after = await signedIn();
      expect([...(await verifyWith(jwks, after))].sort()).toEqual([...rotation.new_kids!].sort());
      expect(await readWith(after.access_token)).toBe(200);
    });

    test('a bad --delay, or --delay with --compromised, is a usage error that changes nothing', async () => {
      const published = kids(await fetchJwks());
      // Under the JWK Set's max-age (300 s) and a minute of clock skew: a copy fetched just before would refuse the new keys.
      for (const flags of [['--delay', '30'], ['--delay', '120'], ['--delay', '300'], ['--delay', '359'], ['--delay', 'soon'], ['--delay', String(8 * 86400)], ['--delay', '600', '--compromised']]) {
        const r = await cli.run(['keys', 'rotate', ...flags]);
        expect(r.code).toBe(2);
        expect(r.stderr).toContain('--delay');
      }
      expect(kids(await fetchJwks())).toEqual(published);
    });

    test('a rotation during the hand-over of another hands over at its own time: every key signing before stops then', async () => {
      const signing = decodeProtectedHeader(await t.token()).kid!;
      const first = await rotate();
      const second = await rotate('--delay', SHORTEST);
      expect(second.retired_kids).toEqual(expect.arrayContaining([signing, ...(first.new_kids as string[])]));
      const handOver = Date.parse(second.signs_from as string);
      expect(handOver).toBeLessThan(Date.parse(first.signs_from as string));
      systemTime.set(handOver - 1000);
      expect(decodeProtectedHeader(await t.token()).kid).toBe(signing);
      systemTime.set(handOver);
      const after = await signedIn();
      expect([decodeProtectedHeader(after.access_token).kid, decodeProtectedHeader(after.id_token).kid].sort()).toEqual([...(second.new_kids as string[])].sort());
      expect(await readWith(after.access_token)).toBe(200);
      // Nothing the keys retired earlier sign dated from then on is taken.
      const forge = await forger(signing, decodeJwt(after.access_token));
      const nowS = Math.ceil(handOver / 1000);
      expect(await readWith(await forge(nowS, nowS + 300))).toBe(401);
      expect(await readWith(await forge(nowS - 2, nowS + 300))).toBe(200);
    });

    // Last: it spends the sign-in failures of the in-process address for alice.
    test('a device cookie sealed with a retired key and dated from its hand-over on is no device (forged with the leaked key)', async () => {
      const kid = decodeProtectedHeader(await t.token()).kid!;
      const record = (await t.store.keys.list(0)).find((k) => k.kid === kid)!;
      // Whoever holds the key's private half seals what it likes, dated as it likes.
      const leaked = createSealer({ currentKey: async () => ({ record }) } as unknown as KeyRing, 'sign-in device');
      const rotation = await rotate('--delay', SHORTEST);
      const handOver = Date.parse(rotation.signs_from as string);
      systemTime.set(handOver + 5000);
      const datedBefore = await issueDeviceCookie(leaked, 't1', 'alice', handOver - 1000);
      const datedAfter = await issueDeviceCookie(leaked, 't1', 'alice', handOver);
      const attempt = async (password: string, device?: string) => {
        const page = await t.request(`/oauth2/authorize?${authorizeQuery({ clientId: app.id })}`);
        const cookie = [csrfCookie(page), ...(device === undefined ? [] : [`cinder_device=${device}`])].join('; ');
        const res = await t.request('/oauth2/authorize', {
          method: 'POST', headers: { ...FORM, Cookie: cookie }, body: new URLSearchParams({ ...hiddenFields(await page.text()), username: 'alice', password, action: 'login' }),
        });
        return res.status;
      };
      // The address has spent its failures for alice: it waits, unless it holds a device of hers.
      for (let i = 0; i < 5; i++) expect(await attempt('nope-nope')).toBe(200);
      expect(await attempt(PASSWORD)).toBe(429);
      expect(await attempt(PASSWORD, datedAfter)).toBe(429);
      // Dated before the hand-over, as the key sealed while it signed: taken, as a token so dated is.
      expect(await attempt(PASSWORD, datedBefore)).toBe(303);
    });
  });
}

for (const target of targets) {
  describe(`a server whose read of the keys failed before a hand-over, on ${target.kind}`, () => {
    let t: TestApp;
    let cli: ReturnType<typeof createCliEnv>;
    /** Whether the server's reads of the signing keys fail (a database outage). */
    let keysDown = false;

    beforeAll(async () => {
      setSystemTime(new Date('2026-03-09T09:00:00Z'));
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      const keys = new Proxy(store.keys, {
        get: (repo, name) => (name === 'list' && keysDown ? () => Promise.reject(new StoreUnavailableError('the database is unreachable')) : Reflect.get(repo, name)),
      });
      const flaky = new Proxy(store, { get: (s, name) => (name === 'keys' ? keys : Reflect.get(s, name)) }) as Store;
      t = await createTestApp({ store: flaky, clock: systemTime });
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
    }, 60_000);
    afterAll(async () => {
      await t.close();
      cli.close();
    });

    test('reads them again at its next use, not a reload interval later: it never signs past the hand-over with keys it read before the rotation', async () => {
      const readWith = async (token: string) => (await t.request(`${t.fhir('t1')}/Patient`, fhirInit(token))).status;
      const oldKid = decodeProtectedHeader(await t.token()).kid!;
      const r = await cli.run(['keys', 'rotate', '--delay', String(MIN_ROTATION_DELAY_MS / 1000), '--json']);
      expect(r.code).toBe(0);
      const rotation = JSON.parse(r.stdout) as { new_kids: string[]; signs_from: string };
      // Its reload interval is over; the keys cannot be read at that moment.
      systemTime.advance(61_000);
      keysDown = true;
      const failed = await t.request('/oauth2/token', {
        method: 'POST', headers: { ...FORM, Authorization: `Basic ${btoa(`${t.admin.client.clientId}:${t.admin.clientSecret}`)}` },
        body: new URLSearchParams({ grant_type: 'client_credentials' }),
      });
      expect(failed.status).toBe(503);
      keysDown = false;
      // Back up: from the hand-over on, the new key signs, and what it signed is taken (then and after its next reload).
      systemTime.set(Date.parse(rotation.signs_from) + 500);
      const token = await t.token();
      expect(decodeProtectedHeader(token).kid).not.toBe(oldKid);
      expect(rotation.new_kids).toContain(decodeProtectedHeader(token).kid!);
      systemTime.advance(61_000);
      expect(await readWith(token)).toBe(200);
    });
  });
}

