import { describe, expect, test } from 'bun:test';
import type { Client, SigningKey, Store } from '../../../src/store/types.ts';
import { StoreConflictError } from '../../../src/store/types.ts';
import { uniqueTenant } from './fixtures.ts';

function client(tenant: string, clientId: string, over: Partial<Client> = {}): Client {
  return {
    tenant,
    clientId,
    name: `Client ${clientId}`,
    secretHash: 'ab'.repeat(32),
    grants: ['client_credentials'],
    scopes: ['system/*.read', 'system/Patient.rs'],
    redirectUris: [],
    jwks: null,
    jwksUrl: null,
    readAttributes: null,
    accessTokenTtl: null,
    createdAt: 1_000,
    disabled: false,
    previousSecretHash: null,
    previousSecretUntil: null,
    deletedAt: null,
    tokensRevokedAt: null,
    ...over,
  };
}

function key(kid: string, createdAt: number, retiredAt: number | null = null): SigningKey {
  return {
    kid,
    alg: 'ES256',
    privateJwk: { kty: 'EC', crv: 'P-256', x: 'x-' + kid, y: 'y', d: 'd' },
    publicJwk: { kty: 'EC', crv: 'P-256', x: 'x-' + kid, y: 'y', kid },
    createdAt,
    retiredAt,
  };
}

/** Tenants, clients and signing keys. */
export function accountsContract(store: () => Store) {
  describe('tenants', () => {
    test('create, get, list in bytewise id order, and a duplicate is a conflict', async () => {
      const s = store();
      const p = uniqueTenant('ten');
      // Bytewise order: upper case before lower case, '-' before digits.
      const made = [`${p}-b`, `${p}-B`, `${p}-a`, `${p}-9`, `${p}--`];
      for (const [i, id] of made.entries()) expect(await s.tenants.create(id, 100 + i)).toEqual({ id, createdAt: 100 + i });
      expect(await s.tenants.get(`${p}-a`)).toEqual({ id: `${p}-a`, createdAt: 102 });
      expect(await s.tenants.get(`${p}-zz`)).toBeNull();
      const listed = (await s.tenants.list()).filter((t) => t.id.startsWith(p));
      expect(listed.map((t) => t.id)).toEqual([`${p}--`, `${p}-9`, `${p}-B`, `${p}-a`, `${p}-b`]);
      await expect(s.tenants.create(`${p}-a`, 999)).rejects.toBeInstanceOf(StoreConflictError);
      expect(await s.tenants.get(`${p}-a`)).toEqual({ id: `${p}-a`, createdAt: 102 });
    });
  });

  describe('validation debt', () => {
    test('marking counts generations; clearing needs the generation read, so a later mark survives it', async () => {
      const s = store();
      const t = uniqueTenant('debt');
      await s.tenants.create(t, 1);
      expect(await s.tenants.validationDebt(t)).toBeNull();
      await s.tenants.markUnvalidated(t);
      expect(await s.tenants.validationDebt(t)).toBe(1);
      await s.tenants.markUnvalidated(t);
      const seen = await s.tenants.validationDebt(t);
      expect(seen).toBe(2);
      await s.tenants.markUnvalidated(t);
      expect(await s.tenants.clearValidationDebt(t, seen!)).toBe(false);
      expect(await s.tenants.validationDebt(t)).toBe(3);
      expect(await s.tenants.clearValidationDebt(t, 3)).toBe(true);
      expect(await s.tenants.validationDebt(t)).toBeNull();
      expect(await s.tenants.clearValidationDebt(t, 3)).toBe(false);
    });
  });

  describe('clients', () => {
    test('every field round-trips, including nulls, JWKS and disabled', async () => {
      const s = store();
      const t = uniqueTenant();
      const full = client(t, `${t}-full`, {
        secretHash: null,
        grants: ['authorization_code', 'refresh_token'],
        redirectUris: ['https://app.example/cb?x=1&y=2', "https://o'brien.example/cb"],
        jwks: { keys: [{ kty: 'EC', crv: 'P-256', x: 'x', y: 'y', kid: 'k1' }] },
        jwksUrl: 'https://app.example/jwks.json',
        readAttributes: ['email', 'fhirUser'],
        accessTokenTtl: 300,
        disabled: true,
      });
      const plain = client(t, `${t}-plain`);
      await s.clients.create(full);
      await s.clients.create(plain);
      // Read with the number of the client's last revocation (none: 0).
      expect(await s.clients.get(full.clientId)).toEqual({ ...full, revocationSeq: 0 });
      expect(await s.clients.get(plain.clientId)).toEqual({ ...plain, revocationSeq: 0 });
      expect(await s.clients.get(`${t}-missing`)).toBeNull();
      // Several in one read: those found, whatever the order asked, none for an empty list.
      const many = await s.clients.getMany([`${t}-missing`, plain.clientId, full.clientId]);
      expect(many.sort((a, b) => a.clientId.localeCompare(b.clientId))).toEqual([full, plain].map((c) => ({ ...c, revocationSeq: 0 })).sort((a, b) => a.clientId.localeCompare(b.clientId)));
      expect(await s.clients.getMany([])).toEqual([]);
    });

    test('update writes every field but id, tenant and creation time; deleted clients are still read and listed', async () => {
      const s = store();
      const [t, other] = [uniqueTenant(), uniqueTenant()];
      const before = client(t, `${t}-u`);
      const bystander = client(t, `${t}-v`);
      await s.clients.create(before);
      await s.clients.create(bystander);
      const after = client(t, before.clientId, {
        name: "O'Brien's app", secretHash: 'cd'.repeat(32), grants: ['authorization_code'], scopes: ['user/*.rs'], redirectUris: ['https://a.example/cb'],
        jwks: { keys: [{ kty: 'OKP', crv: 'Ed25519', x: 'x' }] }, readAttributes: ['email'], accessTokenTtl: 60, disabled: true,
        previousSecretHash: 'ab'.repeat(32), previousSecretUntil: 9_000, deletedAt: 8_000, tokensRevokedAt: 7_500,
      });
      await s.clients.update({ ...after, tenant: other, createdAt: 5 });
      expect(await s.clients.get(before.clientId)).toEqual({ ...after, revocationSeq: 0 });
      expect(await s.clients.get(bystander.clientId)).toEqual({ ...bystander, revocationSeq: 0 });
      expect((await s.clients.list(t)).map((c) => [c.clientId, c.deletedAt])).toEqual([[before.clientId, 8_000], [bystander.clientId, null]]);
      await s.clients.update({ ...after, jwks: null, jwksUrl: 'https://a.example/jwks', readAttributes: null, accessTokenTtl: null, previousSecretHash: null, previousSecretUntil: null });
      expect(await s.clients.get(before.clientId)).toMatchObject({ jwks: null, jwksUrl: 'https://a.example/jwks', readAttributes: null, accessTokenTtl: null, previousSecretHash: null });
    });

    test('list is per tenant, oldest first (ties by client id); a duplicate id is a conflict', async () => {
      const s = store();
      const [t, other] = [uniqueTenant(), uniqueTenant()];
      await s.clients.create(client(t, `${t}-c`, { createdAt: 20 }));
      await s.clients.create(client(t, `${t}-b`, { createdAt: 10 }));
      await s.clients.create(client(t, `${t}-a`, { createdAt: 20 }));
      await s.clients.create(client(other, `${other}-x`, { createdAt: 1 }));
      expect((await s.clients.list(t)).map((c) => c.clientId)).toEqual([`${t}-b`, `${t}-a`, `${t}-c`]);
      expect((await s.clients.list(other)).map((c) => c.clientId)).toEqual([`${other}-x`]);
      expect(await s.clients.list(uniqueTenant())).toEqual([]);
      await expect(s.clients.create(client(other, `${t}-a`))).rejects.toBeInstanceOf(StoreConflictError);
      expect((await s.clients.get(`${t}-a`))!.tenant).toBe(t);
    });
  });

  describe('signing keys', () => {
    test('list newest first, retired keys only while published; retiring; duplicate kid conflicts', async () => {
      const s = store();
      const p = uniqueTenant('kid');
      const mine = async (since: number) => (await s.keys.list(since)).filter((k) => k.kid.startsWith(p));
      await s.keys.add(key(`${p}-old`, 1_000, 5_000));
      await s.keys.add(key(`${p}-mid`, 2_000));
      await s.keys.add(key(`${p}-new`, 3_000));
      expect((await mine(5_000)).map((k) => k.kid)).toEqual([`${p}-new`, `${p}-mid`, `${p}-old`]);
      expect((await mine(5_001)).map((k) => k.kid)).toEqual([`${p}-new`, `${p}-mid`]);
      expect((await mine(0))[0]).toEqual(key(`${p}-new`, 3_000));
      await expect(s.keys.add(key(`${p}-mid`, 9_000))).rejects.toBeInstanceOf(StoreConflictError);
      await s.keys.retire([`${p}-mid`, `${p}-old`, `${p}-unknown`], 7_000);
      const after = await mine(0);
      expect(after.map((k) => [k.kid, k.retiredAt])).toEqual([[`${p}-new`, null], [`${p}-mid`, 7_000], [`${p}-old`, 5_000]]);
      expect((await mine(7_001)).map((k) => k.kid)).toEqual([`${p}-new`]);
      await s.keys.retire([], 8_000);
      expect((await mine(7_001)).map((k) => k.kid)).toEqual([`${p}-new`]);
      // A retirement scheduled later is brought forward; one earlier stays.
      await s.keys.retire([`${p}-mid`], 6_000);
      await s.keys.retire([`${p}-mid`, `${p}-old`], 9_000);
      expect((await mine(0)).map((k) => [k.kid, k.retiredAt])).toEqual([[`${p}-new`, null], [`${p}-mid`, 6_000], [`${p}-old`, 5_000]]);
    });

    test('remove deletes the keys named (retired or not), and nothing else', async () => {
      const s = store();
      const p = uniqueTenant('kid');
      const mine = async () => (await s.keys.list(0)).filter((k) => k.kid.startsWith(p)).map((k) => k.kid);
      await s.keys.add(key(`${p}-a`, 1_000, 5_000));
      await s.keys.add(key(`${p}-b`, 2_000));
      await s.keys.add(key(`${p}-c`, 3_000));
      await s.keys.remove([`${p}-a`, `${p}-b`, `${p}-unknown`]);
      expect(await mine()).toEqual([`${p}-c`]);
      await s.keys.remove([]);
      expect(await mine()).toEqual([`${p}-c`]);
      // The row is gone: the kid may be added anew without a conflict.
      await s.keys.add(key(`${p}-a`, 9_000));
      expect(await mine()).toEqual([`${p}-a`, `${p}-c`]);
    });
  });
}
