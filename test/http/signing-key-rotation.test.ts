/**
 * `cinder keys rotate` run while servers are running (another process: a key ring of its own on the same database)
 * ends the trust in every key signing before it, in every process, whatever each process did meanwhile: a process
 * that read no keys between the rotation and the end of the old key's publication (no new token came, none was
 * issued) read nothing of the old key at its next reload, kept its record as active, and took tokens forged with
 * it; one that had verified such a token before kept taking it from its cache without reading the keys at all; and
 * a rotation retired only the newest unretired key of each algorithm (two processes' first start at once, or two
 * rotations at once, leave two), so the other stayed trusted for good. Both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, importJWK, SignJWT, type JWTPayload } from 'jose';
import { createKeyRing, MIN_ROTATION_DELAY_MS } from '../../src/auth/keys.ts';
import { MAX_TOKEN_TTL } from '../../src/auth/tokens.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())));

/** Past the publication of a key retired now: the longest token lifetime and the reload intervals. */
const PUBLICATION_ENDS_MS = (MAX_TOKEN_TTL + 3600) * 1000;

for (const target of targets) {
  describe(`signing keys rotated by another process, on ${target.kind}`, () => {
    let t: TestApp;
    let claims: JWTPayload;

    beforeAll(async () => {
      const store = (await target.migrated()).open();
      t = await createTestApp({ store });
      claims = decodeJwt(await t.token());
    }, 120_000);
    afterAll(() => t.close());

    const nowS = () => Math.floor(t.clock.now() / 1000);
    /** What `cinder keys rotate` does, in a process of its own. */
    const rotateElsewhere = async () => {
      const cli = createKeyRing(t.store, t.clock, MAX_TOKEN_TTL);
      await cli.init();
      return (await cli.rotate({ delayMs: MIN_ROTATION_DELAY_MS })).newKids;
    };
    const active = async () => (await t.store.keys.list(t.clock.now())).find((k) => k.alg === 'ES256' && k.retiredAt === null)!;
    const forger = async (kid: string) => {
      const leaked = (await importJWK((await t.store.keys.list(0)).find((k) => k.kid === kid)!.privateJwk, 'ES256')) as CryptoKey;
      return (iat: number, exp: number) =>
        new SignJWT({ ...claims, iat, exp, jti: crypto.randomUUID() }).setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' }).sign(leaked);
    };
    const readWith = async (token: string) => (await t.request(`${t.fhir('t1')}/Patient`, fhirInit(token))).status;
    const published = async () => ((await (await t.request('/oauth2/jwks')).json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);

    test('a process that read no keys while the old key was published takes nothing it signs, verified before or not', async () => {
      const { kid } = await active();
      const forge = await forger(kid);
      const verifiedBefore = await forge(nowS(), nowS() + 10 * 365 * 86400);
      expect(await readWith(verifiedBefore)).toBe(200);
      await rotateElsewhere();
      t.clock.advance(PUBLICATION_ENDS_MS);
      expect(await published()).not.toContain(kid);
      expect(await readWith(verifiedBefore)).toBe(401);
      expect(await readWith(await forge(nowS(), nowS() + 600))).toBe(401);
      // The server signs with the new key, and takes what it signs.
      expect(await readWith(await t.token())).toBe(200);
    });

    test('a rotation retires every key that signed before it, not only the newest of each algorithm', async () => {
      // A second active ES256 key, older than the one signing, as two processes starting at once on an empty database, or
      // two rotations at once, leave.
      const signing = await active();
      const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
      const kid = `second-${target.kind}`;
      await t.store.keys.add({
        kid, alg: 'ES256', privateJwk: { ...(await exportJWK(privateKey)), kid, alg: 'ES256' }, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' },
        createdAt: signing.createdAt - 1000, retiredAt: null,
      });
      const forge = await forger(kid);
      t.clock.advance(2000);
      expect(await readWith(await forge(nowS(), nowS() + 600))).toBe(200);
      const kids = await rotateElsewhere();
      expect((await t.store.keys.list(0)).filter((k) => k.retiredAt === null).map((k) => k.kid).sort()).toEqual([...kids].sort());
      t.clock.advance(PUBLICATION_ENDS_MS);
      expect(await published()).not.toContain(kid);
      expect(await readWith(await forge(nowS(), nowS() + 600))).toBe(401);
    });
  });
}
