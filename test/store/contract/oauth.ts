import { describe, expect, test } from 'bun:test';
import type { AuthCode, RefreshToken, Store, User } from '../../../src/store/types.ts';
import { StoreConflictError } from '../../../src/store/types.ts';

const uid = () => crypto.randomUUID().replaceAll('-', '');
/** A time ahead of every clock here (the database's too). */
const B = Date.now() + 3_600_000;

function user(tenant: string, over: Partial<User> = {}): User {
  return {
    id: uid(), tenant, username: 'user-' + uid().slice(0, 8), passwordHash: '$argon2id$fake', name: 'N', email: 'e@example.org',
    emailVerified: true, phone: null, phoneVerified: false, address: null, fhirUser: 'Patient/1', createdAt: 1000, disabled: false, deletedAt: null, tokensRevokedAt: null, ...over,
  };
}

function code(over: Partial<AuthCode> = {}): AuthCode {
  return {
    codeHash: uid(), grantId: uid(), clientId: 'c1', tenant: 't', userId: 'u1', redirectUri: 'https://app/cb', scope: 'openid',
    nonce: 'n', codeChallenge: null, authTime: 1000, expiresAt: 61_000, consumedAt: null, patient: null, encounter: null,
    fhirContext: null, needPatientBanner: true, ...over,
  };
}

function refresh(over: Partial<RefreshToken> = {}): RefreshToken {
  return {
    tokenHash: uid(), grantId: uid(), clientId: 'c1', tenant: 't', userId: 'u1', scope: 'openid offline_access', authTime: 1000,
    createdAt: 1000, expiresAt: 100_000, revokedAt: null, patient: null, encounter: null, fhirContext: null,
    needPatientBanner: true, ...over,
  };
}

/** Users, authorization codes, refresh tokens, revocations, assertion jtis and counters (migration 2). */
export function oauthContract(store: () => Store) {
  describe('users', () => {
    test('create, get by id and by username within a tenant; a taken username is a conflict', async () => {
      const s = store();
      const u = user('ta');
      await s.users.create(u);
      // Read with the number of the user's last revocation (none: 0).
      expect(await s.users.get('ta', u.id)).toEqual({ ...u, revocationSeq: 0 });
      expect(await s.users.byUsername('ta', u.username)).toEqual({ ...u, revocationSeq: 0 });
      expect(await s.users.byUsername('tb', u.username)).toBeNull();
      expect(await s.users.get('tb', u.id)).toBeNull();
      // Several in one read, of one tenant: those found.
      const other = user('ta');
      await s.users.create(other);
      const many = await s.users.getMany('ta', [u.id, other.id, 'missing']);
      expect(many.sort((a, b) => a.id.localeCompare(b.id))).toEqual([u, other].map((x) => ({ ...x, revocationSeq: 0 })).sort((a, b) => a.id.localeCompare(b.id)));
      expect(await s.users.getMany('tb', [u.id, other.id])).toEqual([]);
      expect(await s.users.getMany('ta', [])).toEqual([]);
      await expect(s.users.create(user('ta', { username: u.username }))).rejects.toBeInstanceOf(StoreConflictError);
      await s.users.create(user('tb', { username: u.username }));
    });

    test('update writes every attribute but id, tenant, username and creation time; list is per tenant by username, deleted ones too', async () => {
      const s = store();
      const tenant = 'tl-' + uid().slice(0, 8);
      const [b, a] = [user(tenant, { username: 'bob' }), user(tenant, { username: 'ann' })];
      await s.users.create(b);
      await s.users.create(a);
      const changed: User = {
        ...b, passwordHash: '', name: null, email: "o'brien@example.org", emailVerified: false, phone: '+1 555', phoneVerified: true,
        address: 'Main St', fhirUser: null, disabled: true, deletedAt: 7_000, tokensRevokedAt: 6_000,
      };
      await s.users.update({ ...changed, username: 'renamed', createdAt: 5 });
      expect(await s.users.get(tenant, b.id)).toEqual({ ...changed, revocationSeq: 0 });
      expect(await s.users.get(tenant, a.id)).toEqual({ ...a, revocationSeq: 0 });
      expect((await s.users.list(tenant)).map((u) => [u.username, u.deletedAt])).toEqual([['ann', null], ['bob', 7_000]]);
      expect(await s.users.list('tl-none')).toEqual([]);
    });
  });

  describe('authorization codes', () => {
    test('redeemed once; then reported as a replay', async () => {
      const s = store();
      const c = code();
      await s.oauth.createCode(c);
      const first = await s.oauth.redeemCode(c.codeHash, 'c1', 2000);
      expect(first).toEqual({ status: 'redeemed', code: { ...c, consumedAt: 2000 } });
      expect(await s.oauth.redeemCode(c.codeHash, 'c1', 3000)).toEqual({ status: 'replayed', code: { ...c, consumedAt: 2000 } });
    });

    test('another client, an unknown code or an expired one: invalid, and the code is not consumed', async () => {
      const s = store();
      const c = code();
      await s.oauth.createCode(c);
      expect(await s.oauth.redeemCode(c.codeHash, 'c2', 2000)).toEqual({ status: 'invalid' });
      expect(await s.oauth.redeemCode(uid(), 'c1', 2000)).toEqual({ status: 'invalid' });
      expect(await s.oauth.redeemCode(c.codeHash, 'c1', 61_000)).toEqual({ status: 'invalid' });
      expect((await s.oauth.redeemCode(c.codeHash, 'c1', 60_999)).status).toBe('redeemed');
    });

    test("with a proof, a request not matching the code's redirect URI or challenge is refused and leaves it unused", async () => {
      const s = store();
      const c = code({ codeChallenge: 'x'.repeat(43) });
      await s.oauth.createCode(c);
      for (const proof of [{ redirectUri: c.redirectUri, challenge: null }, { redirectUri: c.redirectUri, challenge: 'y'.repeat(43) }, { redirectUri: 'https://other.example/cb', challenge: c.codeChallenge }]) {
        expect(await s.oauth.redeemCode(c.codeHash, 'c1', 2000, proof)).toEqual({ status: 'refused', code: c });
      }
      expect(await s.oauth.redeemCode(c.codeHash, 'c2', 2000, { redirectUri: c.redirectUri, challenge: c.codeChallenge })).toEqual({ status: 'invalid' });
      expect(await s.oauth.redeemCode(c.codeHash, 'c1', 2000, { redirectUri: c.redirectUri, challenge: c.codeChallenge })).toEqual({ status: 'redeemed', code: { ...c, consumedAt: 2000 } });
      expect((await s.oauth.redeemCode(c.codeHash, 'c1', 3000, { redirectUri: c.redirectUri, challenge: null })).status).toBe('replayed');
      // A code requested without PKCE matches a request without a verifier only.
      const plain = code();
      await s.oauth.createCode(plain);
      expect((await s.oauth.redeemCode(plain.codeHash, 'c1', 2000, { redirectUri: plain.redirectUri, challenge: 'y'.repeat(43) })).status).toBe('refused');
      expect((await s.oauth.redeemCode(plain.codeHash, 'c1', 2000, { redirectUri: plain.redirectUri, challenge: null })).status).toBe('redeemed');
    });

    test('the chosen patient in context is kept, and null stays null', async () => {
      const s = store();
      const chosen = code({ patient: 'pat-7' });
      const none = code();
      await s.oauth.createCode(chosen);
      await s.oauth.createCode(none);
      expect(await s.oauth.redeemCode(chosen.codeHash, 'c1', 2000)).toEqual({ status: 'redeemed', code: { ...chosen, consumedAt: 2000 } });
      const redeemed = await s.oauth.redeemCode(none.codeHash, 'c1', 2000);
      expect(redeemed.status === 'redeemed' && redeemed.code.patient).toBeNull();
    });

    test('the encounter of an EHR launch is kept beside its patient, and null stays null', async () => {
      const s = store();
      const launched = code({ patient: 'pat-7', encounter: 'enc-3' });
      await s.oauth.createCode(launched);
      expect(await s.oauth.redeemCode(launched.codeHash, 'c1', 2000)).toEqual({ status: 'redeemed', code: { ...launched, consumedAt: 2000 } });
      const r = refresh({ patient: 'pat-7', encounter: 'enc-3' });
      await s.oauth.createRefreshToken(r);
      expect(await s.oauth.getRefreshToken(r.tokenHash)).toEqual(r);
      const none = refresh({ patient: 'pat-7' });
      await s.oauth.createRefreshToken(none);
      expect((await s.oauth.getRefreshToken(none.tokenHash))!.encounter).toBeNull();
    });

    test("an EHR launch's fhirContext and need_patient_banner are kept beside its patient; none and true by default", async () => {
      const s = store();
      const fhirContext = [
        { reference: 'ImagingStudy/is-1' },
        { reference: 'List/l-2', role: 'https://example.org/med-list-at-home' },
        { canonical: 'https://example.org/Questionnaire/q|2', type: 'Questionnaire', role: 'https://example.org/role/q' },
        { identifier: { system: 'urn:oid:1.2.3', value: 'A-1', type: { coding: [{ code: 'ACSN' }] } }, type: 'ServiceRequest' },
      ];
      const launched = code({ patient: 'pat-7', encounter: 'enc-3', fhirContext, needPatientBanner: false });
      await s.oauth.createCode(launched);
      expect(await s.oauth.redeemCode(launched.codeHash, 'c1', 2000)).toEqual({ status: 'redeemed', code: { ...launched, consumedAt: 2000 } });
      const r = refresh({ patient: 'pat-7', fhirContext, needPatientBanner: false });
      await s.oauth.createRefreshToken(r);
      expect(await s.oauth.getRefreshToken(r.tokenHash)).toEqual(r);
      const standalone = refresh({ patient: 'pat-7' });
      await s.oauth.createRefreshToken(standalone);
      expect(await s.oauth.getRefreshToken(standalone.tokenHash)).toMatchObject({ fhirContext: null, needPatientBanner: true });
    });

    test('N concurrent redemptions: exactly one wins', async () => {
      const s = store();
      const c = code();
      await s.oauth.createCode(c);
      const results = await Promise.all(Array.from({ length: 16 }, () => s.oauth.redeemCode(c.codeHash, 'c1', 2000)));
      expect(results.filter((r) => r.status === 'redeemed')).toHaveLength(1);
      expect(results.filter((r) => r.status === 'replayed')).toHaveLength(15);
    });
  });

  describe('refresh tokens and revocations', () => {
    test('stored and read back by digest', async () => {
      const s = store();
      const r = refresh();
      await s.oauth.createRefreshToken(r);
      expect(await s.oauth.getRefreshToken(r.tokenHash)).toEqual(r);
      expect(await s.oauth.getRefreshToken(uid())).toBeNull();
      const withPatient = refresh({ patient: 'pat-7' });
      await s.oauth.createRefreshToken(withPatient);
      expect((await s.oauth.getRefreshToken(withPatient.tokenHash))!.patient).toBe('pat-7');
      expect((await s.oauth.getRefreshToken(r.tokenHash))!.patient).toBeNull();
    });

    test('revoking a grant marks its refresh tokens and is listed; revoking twice is harmless', async () => {
      const s = store();
      const r = refresh();
      await s.oauth.createRefreshToken(r);
      const rev = { kind: 'grant' as const, value: r.grantId, revokedAt: B + 5000, expiresAt: B + 200_000 };
      await s.oauth.revoke(rev);
      await s.oauth.revoke({ ...rev, revokedAt: B + 6000 });
      expect((await s.oauth.getRefreshToken(r.tokenHash))!.revokedAt).toBe(B + 5000);
      expect(await s.oauth.isRevoked({ grantId: r.grantId })).toBe(true);
      expect(await s.oauth.isRevoked({ jti: r.grantId })).toBe(false);
      const listed = await s.oauth.revokedSince(-1, B + 10_000);
      expect(listed.revocations).toContainEqual({ ...rev, seq: expect.any(Number) });
      expect((await s.oauth.revokedSince(listed.last, B + 10_000)).revocations).not.toContainEqual(rev); // read already
      expect((await s.oauth.revokedSince(-1, B + 200_000)).revocations).not.toContainEqual(rev); // expired
    });

    test('a client or user revocation: their refresh tokens, and tokens issued up to its time; recorded again, it moves forward', async () => {
      const s = store();
      const [client, userId, other] = [uid(), uid(), uid()];
      const ofClient = refresh({ clientId: client });
      const ofUser = refresh({ userId });
      const bystander = refresh({ clientId: other, userId: other });
      for (const r of [ofClient, ofUser, bystander]) await s.oauth.createRefreshToken(r);
      await s.oauth.revoke({ kind: 'client', value: client, revokedAt: B + 5000, expiresAt: B + 90_000 });
      await s.oauth.revoke({ kind: 'user', value: userId, revokedAt: B + 5000, expiresAt: B + 90_000 });
      expect((await s.oauth.getRefreshToken(ofClient.tokenHash))!.revokedAt).toBe(B + 5000);
      expect((await s.oauth.getRefreshToken(ofUser.tokenHash))!.revokedAt).toBe(B + 5000);
      expect((await s.oauth.getRefreshToken(bystander.tokenHash))!.revokedAt).toBeNull();
      // Asked with the time the client's or user's record was read to issue the token.
      expect(await s.oauth.isRevoked({ client: { id: client, readAt: B + 5000 } })).toBe(true);
      expect(await s.oauth.isRevoked({ client: { id: client, readAt: B + 5001 } })).toBe(false);
      expect(await s.oauth.isRevoked({ jti: client, grantId: client })).toBe(false);
      expect(await s.oauth.isRevoked({ user: { id: userId, readAt: 0 } })).toBe(true);
      expect(await s.oauth.isRevoked({ client: { id: userId, readAt: 0 } })).toBe(false);
      expect(await s.oauth.isRevoked({ client: { id: other, readAt: 0 }, user: { id: other, readAt: 0 }, jti: uid(), grantId: uid() })).toBe(false);
      // Access tokens only: refresh tokens stay.
      const kept = refresh({ clientId: other });
      await s.oauth.createRefreshToken(kept);
      await s.oauth.revoke({ kind: 'client-access', value: other, revokedAt: B + 6000, expiresAt: B + 90_000 });
      expect(await s.oauth.isRevoked({ client: { id: other, readAt: B + 6000 } })).toBe(true);
      expect((await s.oauth.getRefreshToken(kept.tokenHash))!.revokedAt).toBeNull();
      // Disabled again later: the later time, listed for the other processes' poll; an earlier one changes nothing.
      const before = (await s.oauth.revokedSince(-1, B + 10_000)).last;
      await s.oauth.revoke({ kind: 'client', value: client, revokedAt: B + 8000, expiresAt: B + 95_000 });
      await s.oauth.revoke({ kind: 'client', value: client, revokedAt: B + 7000, expiresAt: B + 91_000 });
      expect(await s.oauth.isRevoked({ client: { id: client, readAt: B + 8000 } })).toBe(true);
      const again = await s.oauth.revokedSince(before, B + 10_000);
      expect(again.revocations).toEqual([{ kind: 'client', value: client, revokedAt: B + 8000, expiresAt: B + 95_000, seq: again.last }]);
      expect(again.last).toBeGreaterThan(before);
    });

    test("a client's record is read with the number of its last revocation, which a token's `crs` is compared with, whatever the times say", async () => {
      const s = store();
      const tenant = `t-${uid()}`;
      await s.tenants.create(tenant, B);
      const client = `c-${uid()}`;
      await s.clients.create({
        clientId: client, tenant, name: 'c', secretHash: null, grants: ['client_credentials'], scopes: [], redirectUris: [], jwks: null, jwksUrl: null,
        readAttributes: null, accessTokenTtl: null, createdAt: B, disabled: false, previousSecretHash: null, previousSecretUntil: null, deletedAt: null, tokensRevokedAt: null,
      });
      const unrevoked = (await s.clients.get(client))!.revocationSeq!;
      expect(unrevoked).toBe(0);
      // Recorded by a clock an hour ahead of the reader's.
      const recorded = await s.oauth.revoke({ kind: 'client-access', value: client, revokedAt: B + 3_600_000, expiresAt: B + 7_200_000 });
      const read = (await s.clients.get(client))!;
      expect(read.revocationSeq).toBe(recorded.seq!);
      expect((await s.clients.getMany([client]))[0]!.revocationSeq).toBe(recorded.seq!);
      // A token on the record read before: refused; on the record read after: not, though its time is an hour earlier.
      expect(await s.oauth.isRevoked({ client: { id: client, readAt: B + 1000, seq: unrevoked } })).toBe(true);
      expect(await s.oauth.isRevoked({ client: { id: client, readAt: B + 1000, seq: read.revocationSeq! } })).toBe(false);
      // Without a number (a token of an older release), by time.
      expect(await s.oauth.isRevoked({ client: { id: client, readAt: B + 1000 } })).toBe(true);
      // Revoked again: a higher number, which refuses the token of the record read before it.
      const again = await s.oauth.revoke({ kind: 'client', value: client, revokedAt: B, expiresAt: B + 7_200_000 });
      expect(again.seq!).toBeGreaterThan(recorded.seq!);
      expect(await s.oauth.isRevoked({ client: { id: client, readAt: B + 1000, seq: read.revocationSeq! } })).toBe(true);
      expect((await s.clients.get(client))!.revocationSeq).toBe(again.seq!);
    });

    test("the number kept with a user's or client's last revocation outlives its row: a record read after the row went states it", async () => {
      const s = store();
      const tenant = `t-${uid()}`;
      await s.tenants.create(tenant, B);
      const u = user(tenant);
      await s.users.create(u);
      const client = `c-${uid()}`;
      const c = {
        clientId: client, tenant, name: 'c', secretHash: null, grants: ['client_credentials'], scopes: [], redirectUris: [], jwks: null, jwksUrl: null,
        readAttributes: null, accessTokenTtl: null, createdAt: B, disabled: false, previousSecretHash: null, previousSecretUntil: null, deletedAt: null, tokensRevokedAt: null,
      };
      await s.clients.create(c);
      // Revocations whose tokens expired at 2,000 (the clock of this test stands far before the others').
      const ofUser = await s.oauth.revoke({ kind: 'user', value: u.id, revokedAt: 1000, expiresAt: 2000 });
      const ofClient = await s.oauth.revoke({ kind: 'client', value: client, revokedAt: 1000, expiresAt: 2000 });
      await s.users.update({ ...u, tokensRevokedAt: 1000, tokensRevokedSeq: ofUser.seq! });
      await s.clients.update({ ...c, tokensRevokedAt: 1000, tokensRevokedSeq: ofClient.seq! });
      expect(await s.oauth.purgeExpired(3000)).toBeGreaterThanOrEqual(2);
      expect((await s.users.get(tenant, u.id))!).toMatchObject({ tokensRevokedAt: 1000, tokensRevokedSeq: ofUser.seq!, revocationSeq: ofUser.seq! });
      expect((await s.clients.get(client))!).toMatchObject({ tokensRevokedAt: 1000, tokensRevokedSeq: ofClient.seq!, revocationSeq: ofClient.seq! });
      expect((await s.clients.getMany([client]))[0]!.revocationSeq).toBe(ofClient.seq!);
      expect((await s.users.byUsername(tenant, u.username))!.revocationSeq).toBe(ofUser.seq!);
    });

    test("a user's record is read with the number of their last revocation, which a token's `urs` and a sign-in's are compared with, whatever the times say", async () => {
      const s = store();
      const tenant = `t-${uid()}`;
      const u = user(tenant);
      await s.users.create(u);
      const unrevoked = (await s.users.get(tenant, u.id))!.revocationSeq!;
      expect(unrevoked).toBe(0);
      // Recorded by a clock an hour ahead of the reader's.
      const recorded = await s.oauth.revoke({ kind: 'user', value: u.id, revokedAt: B + 3_600_000, expiresAt: B + 7_200_000 });
      const read = (await s.users.get(tenant, u.id))!;
      expect(read.revocationSeq).toBe(recorded.seq!);
      expect((await s.users.byUsername(tenant, u.username))!.revocationSeq).toBe(recorded.seq!);
      expect((await s.users.getMany(tenant, [u.id]))[0]!.revocationSeq).toBe(recorded.seq!);
      // Another user's revocation, or a client's of the same value, is not theirs.
      await s.oauth.revoke({ kind: 'client', value: u.id, revokedAt: B, expiresAt: B + 7_200_000 });
      expect((await s.users.get(tenant, u.id))!.revocationSeq).toBe(recorded.seq!);
      // A token (or sign-in) on the record read before: refused; on the record read after: not, though its time is an hour earlier.
      expect(await s.oauth.isRevoked({ user: { id: u.id, readAt: B + 1000, seq: unrevoked } })).toBe(true);
      expect(await s.oauth.isRevoked({ user: { id: u.id, readAt: B + 1000, seq: read.revocationSeq! } })).toBe(false);
      // Without a number (a token of an older release), by time.
      expect(await s.oauth.isRevoked({ user: { id: u.id, readAt: B + 1000 } })).toBe(true);
      // Revoked again: a higher number, which refuses the token of the record read before it.
      const again = await s.oauth.revoke({ kind: 'user', value: u.id, revokedAt: B, expiresAt: B + 7_200_000 });
      expect(again.seq!).toBeGreaterThan(recorded.seq!);
      expect(await s.oauth.isRevoked({ user: { id: u.id, readAt: B + 1000, seq: read.revocationSeq! } })).toBe(true);
      expect((await s.users.get(tenant, u.id))!.revocationSeq).toBe(again.seq!);
    });

    test("a code and a refresh token keep the number of the user's last revocation at sign-in; older ones have none", async () => {
      const s = store();
      const signedIn = code({ authRevocationSeq: 41 });
      await s.oauth.createCode(signedIn);
      expect(await s.oauth.redeemCode(signedIn.codeHash, 'c1', 2000)).toEqual({ status: 'redeemed', code: { ...signedIn, consumedAt: 2000 } });
      const older = code();
      await s.oauth.createCode(older);
      const redeemed = await s.oauth.redeemCode(older.codeHash, 'c1', 2000);
      expect(redeemed.status === 'redeemed' && redeemed.code.authRevocationSeq).toBeUndefined();
      const t = refresh({ authRevocationSeq: 2 ** 40 });
      await s.oauth.createRefreshToken(t);
      expect(await s.oauth.getRefreshToken(t.tokenHash)).toEqual(t);
      const o = refresh();
      await s.oauth.createRefreshToken(o);
      expect((await s.oauth.getRefreshToken(o.tokenHash))!.authRevocationSeq).toBeUndefined();
    });

    test("a code keeps the number of the client's last revocation at sign-in; older ones have none", async () => {
      const s = store();
      const signedIn = code({ authRevocationSeq: 41, authClientRevocationSeq: 2 ** 40 });
      await s.oauth.createCode(signedIn);
      expect(await s.oauth.redeemCode(signedIn.codeHash, 'c1', 2000)).toEqual({ status: 'redeemed', code: { ...signedIn, consumedAt: 2000 } });
      const older = code();
      await s.oauth.createCode(older);
      const redeemed = await s.oauth.redeemCode(older.codeHash, 'c1', 2000);
      expect(redeemed.status === 'redeemed' && 'authClientRevocationSeq' in redeemed.code).toBe(false);
    });

    test('an access token jti', async () => {
      const s = store();
      const jti = uid();
      expect(await s.oauth.isRevoked({ jti, grantId: 'g' })).toBe(false);
      await s.oauth.revoke({ kind: 'jti', value: jti, revokedAt: 1, expiresAt: 2 });
      expect(await s.oauth.isRevoked({ jti })).toBe(true);
      expect(await s.oauth.isRevoked({ jti, grantId: 'other' })).toBe(true);
    });
  });

  describe('client assertion jtis', () => {
    test('a jti is accepted once per client until it expires', async () => {
      const s = store();
      const jti = uid();
      expect(await s.oauth.useJti('c1', jti, 10_000, 1000)).toBe(true);
      expect(await s.oauth.useJti('c1', jti, 10_000, 2000)).toBe(false);
      expect(await s.oauth.useJti('c2', jti, 10_000, 2000)).toBe(true);
      expect(await s.oauth.useJti('c1', jti, 20_000, 10_000)).toBe(true);
      expect(await s.oauth.useJti('c1', jti, 30_000, 15_000)).toBe(false);
    });

    test('concurrent uses of one jti: exactly one accepted', async () => {
      const s = store();
      const jti = uid();
      const results = await Promise.all(Array.from({ length: 12 }, () => s.oauth.useJti('c1', jti, 10_000, 1000)));
      expect(results.filter(Boolean)).toHaveLength(1);
    });
  });

  describe('counters', () => {
    test('fixed windows: increment, peek, a new window after reset, clear', async () => {
      const s = store();
      const key = 'k-' + uid();
      expect(await s.counters.peek(key, 1000)).toEqual({ count: 0, resetAt: 1000 });
      expect(await s.counters.increment(key, 60_000, 1000)).toEqual({ count: 1, resetAt: 61_000 });
      expect(await s.counters.increment(key, 60_000, 2000)).toEqual({ count: 2, resetAt: 61_000 });
      expect(await s.counters.peek(key, 3000)).toEqual({ count: 2, resetAt: 61_000 });
      expect(await s.counters.peek(key, 61_000)).toEqual({ count: 0, resetAt: 61_000 });
      expect(await s.counters.increment(key, 60_000, 61_000)).toEqual({ count: 1, resetAt: 121_000 });
      await s.counters.clear(key);
      expect((await s.counters.peek(key, 62_000)).count).toBe(0);
    });

    test('decrement takes one back from the current window, never below 0, and nothing from an ended one', async () => {
      const s = store();
      const key = 'k-' + uid();
      await s.counters.decrement(key, 1000);
      expect(await s.counters.peek(key, 1000)).toEqual({ count: 0, resetAt: 1000 });
      await s.counters.increment(key, 60_000, 1000);
      await s.counters.increment(key, 60_000, 1000);
      await s.counters.decrement(key, 2000);
      expect(await s.counters.peek(key, 2000)).toEqual({ count: 1, resetAt: 61_000 });
      await s.counters.decrement(key, 2000);
      await s.counters.decrement(key, 2000);
      expect(await s.counters.peek(key, 2000)).toEqual({ count: 0, resetAt: 61_000 });
      expect(await s.counters.increment(key, 60_000, 3000)).toEqual({ count: 1, resetAt: 61_000 });
      // A window that has ended keeps its count until the next increment starts a new one.
      await s.counters.decrement(key, 61_000);
      expect(await s.counters.increment(key, 60_000, 61_000)).toEqual({ count: 1, resetAt: 121_000 });
    });

    test('concurrent increments are all counted', async () => {
      const s = store();
      const key = 'k-' + uid();
      await Promise.all(Array.from({ length: 10 }, () => s.counters.increment(key, 60_000, 1000)));
      expect((await s.counters.peek(key, 1000)).count).toBe(10);
    });
  });

  describe('purge', () => {
    test('removes what has expired and keeps the rest', async () => {
      const s = store();
      const live = refresh({ expiresAt: 10 ** 13 });
      await s.oauth.createRefreshToken(live);
      await s.oauth.createRefreshToken(refresh({ expiresAt: 5 }));
      await s.oauth.useJti('c1', uid(), 5, 1);
      await s.oauth.revoke({ kind: 'jti', value: uid(), revokedAt: 1, expiresAt: 5 });
      expect(await s.oauth.purgeExpired(10 ** 12)).toBeGreaterThanOrEqual(3);
      expect(await s.oauth.getRefreshToken(live.tokenHash)).toEqual(live);
    });
  });
}
