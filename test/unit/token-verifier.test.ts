import { afterAll, describe, expect, test } from 'bun:test';
import { createRevocationList } from '../../src/auth/revocation.ts';
import { createTokenVerifier } from '../../src/auth/tokens.ts';
import { createTestApp } from '../helpers/app.ts';
import { craftToken } from '../helpers/fhir.ts';

const t = await createTestApp();
afterAll(() => t.close());

/** A verifier over the test app's keys, with its own revocation list (polled every 5 s). */
function verifier() {
  const revocations = createRevocationList(t.store, t.clock, 5_000);
  return { verify: createTokenVerifier(t.keys, t.clock, t.config.baseUrl, revocations), revocations };
}

describe('token verifier: the answer without waiting (verify.now)', () => {
  test('only a token verified before, unexpired and known not to be revoked', async () => {
    const { verify } = verifier();
    const token = await craftToken(t, 'system/*.read', { ttl: 60 });
    expect(verify.now(token)).toBeUndefined(); // never verified: the signature check must run
    const verified = await verify(token);
    expect(verify.now(token)).toBe(verified);
    expect(verify.now(`${token}x`)).toBeUndefined();

    t.clock.advance(4_000); // within the revocation poll interval
    expect(verify.now(token)).toBe(verified);
    t.clock.advance(2_000); // the poll is due: verify() must read the revocations first
    try {
      expect(verify.now(token)).toBeUndefined();
      expect(await verify(token)).toBe(verified);
      expect(verify.now(token)).toBe(verified);
    } finally {
      t.clock.advance(-6_000);
    }
  });

  test('an expired token is left to verify(), which refuses it', async () => {
    const { verify, revocations } = verifier();
    const token = await craftToken(t, 'system/*.read', { ttl: 60 });
    const verified = await verify(token);
    t.clock.advance(61_000);
    try {
      // The revocation poll is due as well after 61 s: poll now, so that only expiry explains the answer.
      await revocations.isRevoked(verified);
      expect(verify.now(token)).toBeUndefined();
      expect(verify(token)).rejects.toThrow('expired');
    } finally {
      t.clock.advance(-61_000);
    }
  });

  test('a token revoked in this process is left to verify(), which refuses it', async () => {
    const { verify, revocations } = verifier();
    const token = await craftToken(t, 'system/*.read');
    const verified = await verify(token);
    await revocations.add({ kind: 'jti', value: verified.jti, revokedAt: t.clock.now(), expiresAt: verified.exp * 1000 });
    expect(verify.now(token)).toBeUndefined();
    expect(verify(token)).rejects.toThrow('revoked');
  });
});
