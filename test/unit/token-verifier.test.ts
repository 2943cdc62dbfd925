import { afterAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { disableClient } from '../../src/auth/client-lifecycle.ts';
import { createRevocationList } from '../../src/auth/revocation.ts';
import { revocationClock } from '../../src/cli/context.ts';
import { createTokenVerifier, signAccessToken } from '../../src/auth/tokens.ts';
import type { Clock } from '../../src/clock.ts';
import { createTestApp, testClock } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken } from '../helpers/fhir.ts';

const t = await createTestApp();
afterAll(() => t.close());

/** A verifier over the test app's keys, with its own revocation list (polled every 5 s). */
function verifier() {
  const revocations = createRevocationList(t.store, t.clock, 5_000);
  return { verify: createTokenVerifier(t.keys, t.clock, t.config.baseUrl, revocations), revocations };
}

/** What verify() answers: the value itself when it is there at once, or what its promise resolves to. */
async function settled<T>(answer: T | Promise<T>) {
  return answer instanceof Promise ? { at: 'later', value: await answer } : { at: 'once', value: answer };
}

describe('token verifier: one function, answering at once in the steady state', () => {
  test('a token verified before, unexpired and known not to be revoked is answered without a promise', async () => {
    const { verify } = verifier();
    const token = await craftToken(t, 'system/*.read', { ttl: 60 });
    const first = verify(token);
    expect(first).toBeInstanceOf(Promise); // never verified: the signature check must run
    const verified = await first;
    expect(verify(token)).toBe(verified); // a plain value, not a promise
    const forged = verify(`${token}x`);
    expect(forged).toBeInstanceOf(Promise);
    await expect(forged).rejects.toThrow('invalid');

    t.clock.advance(4_000); // within the revocation poll interval
    expect(verify(token)).toBe(verified);
    t.clock.advance(2_000); // the poll is due: the revocations are read first
    try {
      expect(await settled(verify(token))).toEqual({ at: 'later', value: verified });
      expect(verify(token)).toBe(verified);
    } finally {
      t.clock.advance(-6_000);
    }
  });

  test('an expired token is refused at once', async () => {
    const { verify, revocations } = verifier();
    const token = await craftToken(t, 'system/*.read', { ttl: 60 });
    const verified = await verify(token);
    t.clock.advance(61_000);
    try {
      // The revocation poll is due as well after 61 s: poll now, so that only expiry explains the answer.
      await revocations.isRevoked(verified);
      expect(() => verify(token)).toThrow('expired');
    } finally {
      t.clock.advance(-61_000);
    }
  });

  test('a token revoked in this process is refused at once', async () => {
    const { verify, revocations } = verifier();
    const token = await craftToken(t, 'system/*.read');
    const verified = await verify(token);
    await revocations.add({ kind: 'jti', value: verified.jti, revokedAt: t.clock.now(), expiresAt: verified.exp * 1000 });
    expect(() => verify(token)).toThrow('revoked');
  });

  test('a token revoked by another process is refused after the next poll', async () => {
    const { verify } = verifier();
    const token = await craftToken(t, 'system/*.read');
    const verified = await verify(token);
    await t.store.oauth.revoke({ kind: 'jti', value: verified.jti, revokedAt: t.clock.now(), expiresAt: verified.exp * 1000 });
    expect(verify(token)).toBe(verified); // not read yet: the poll interval has not passed
    t.clock.advance(5_000);
    try {
      const answer = verify(token);
      expect(answer).toBeInstanceOf(Promise);
      await expect(answer).rejects.toThrow('revoked');
    } finally {
      t.clock.advance(-5_000);
    }
  });
});

describe('client and user revocations: tokens issued on records read before them', () => {
  const sign = (claims: Partial<Parameters<typeof signAccessToken>[3]>) =>
    signAccessToken(t.keys, t.clock, t.config.baseUrl, { sub: 'u-1', aud: t.fhir(), client_id: 'c-1', scope: 'user/*.read', tenant: 't1', ...claims }, 300).then((r) => r.token);
  const refused = async (verify: (token: string) => unknown, token: string) => {
    try {
      await verify(token);
      return false;
    } catch (err) {
      expect(String(err)).toContain('revoked');
      return true;
    }
  };

  test('a client revocation refuses what was issued on a record read at or before it, and nothing read after', async () => {
    const { verify, revocations } = verifier();
    const at = t.clock.now();
    const clientId = `c-${crypto.randomUUID()}`;
    const before = await sign({ client_id: clientId, crt: at - 3_000 }); // issued after the revocation on a cached record
    const after = await sign({ client_id: clientId, crt: at + 1 });
    const other = await sign({ client_id: 'someone-else', crt: at - 3_000 });
    const legacy = await sign({ client_id: clientId }); // an older release's token: read 5 s before its iat
    await revocations.add({ kind: 'client-access', value: clientId, revokedAt: at, expiresAt: at + 600_000 });
    expect(await refused(verify, before)).toBe(true);
    expect(await refused(verify, legacy)).toBe(true);
    expect(await refused(verify, after)).toBe(false);
    expect(await refused(verify, other)).toBe(false);
  });

  test("a user revocation refuses their grants' tokens read before it; a client-credentials token whose sub is the same id is not a user's", async () => {
    const { verify, revocations } = verifier();
    const at = t.clock.now();
    const userId = `u-${crypto.randomUUID()}`;
    const before = await sign({ sub: userId, gid: 'g-1', urt: at - 1, crt: at + 1 });
    const after = await sign({ sub: userId, gid: 'g-2', urt: at + 1, crt: at + 1 });
    const noGrant = await sign({ sub: userId, client_id: userId, crt: at + 1 });
    await revocations.add({ kind: 'user', value: userId, revokedAt: at, expiresAt: at + 600_000 });
    expect(await refused(verify, before)).toBe(true);
    expect(await refused(verify, after)).toBe(false);
    expect(await refused(verify, noGrant)).toBe(false);
  });
});

await eachStore((kind, fresh) => {
  describe(`revocations recorded by a command line whose clock is behind, on ${kind}`, () => {
    const SKEW_MS = 5 * 60_000;

    test("a client disabled from a machine 5 minutes behind is still seen by a server's poll, and refuses the token", async () => {
      const store = await fresh();
      const app = await createTestApp({ store, clock: testClock(Date.now()) });
      try {
        const revocations = createRevocationList(app.store, app.clock, 5_000);
        const verify = createTokenVerifier(app.keys, app.clock, app.config.baseUrl, revocations);
        const refused = (token: string) => Promise.resolve().then(() => verify(token)).then(() => false, (err) => String(err).includes('revoked'));
        const { client } = await createClient(app.store, app.clock, { tenant: 't1', scopes: ['system/*.read'] });
        const sign = (crt: number) =>
          signAccessToken(app.keys, app.clock, app.config.baseUrl, { sub: client.clientId, aud: app.fhir(), client_id: client.clientId, scope: 'system/*.read', tenant: 't1', crt }, 600).then((r) => r.token);
        const early = await sign(app.clock.now() - 2 * SKEW_MS); // on a record read well before the disable
        const recent = await sign(app.clock.now() - 1_000); // on a record read a second before it
        expect(await refused(early)).toBe(false); // the server has polled
        app.clock.advance(5_000);
        expect(await refused(recent)).toBe(false);

        const behind: Clock = { now: () => app.clock.now() - SKEW_MS };
        await disableClient(app.store, await revocationClock({ store: app.store, clock: behind }), client.clientId); // as `cinder client disable`
        app.clock.advance(5_000); // the next poll
        expect(await refused(early)).toBe(true);
        // On PostgreSQL the command line raises its clock to the database's. SQLite has none of its own: every process on
        // the file runs on one machine and reads one clock, so a command line 5 minutes behind the server cannot happen there.
        if (kind === 'postgres') expect(await refused(recent)).toBe(true);
        expect(await app.store.oauth.isRevoked({ client: { id: client.clientId, readAt: app.clock.now() - 2 * SKEW_MS } })).toBe(true);
      } finally {
        await app.close();
      }
    });
  });
});
