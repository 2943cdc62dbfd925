import { describe, expect, test } from 'bun:test';
import { postgresMigrations } from '../../../src/store/postgres/migrations.ts';
import { sqliteMigrations } from '../../../src/store/sqlite/migrations.ts';
import type { SearchQuery } from '../../../src/store/types.ts';
import { migrateUpTo, migrationVersion, rawStatements, type StoreDatabase, type StoreTarget } from '../../helpers/stores.ts';
import { ids } from './fixtures.ts';

type OldRow = [type: string, id: string, index: [param: string, system: string, value: string][]];

/**
 * Writes current resources and their index rows with the columns of migration 1 (raw SQL, as an
 * older Cinder wrote them; today's writer fills columns that later migrations add).
 */
async function writeAsOldCinder(target: StoreTarget, db: StoreDatabase, rows: OldRow[]) {
  const statements: [string, string[]][] = [];
  rows.forEach(([type, id, index], n) => {
    const content = JSON.stringify({ resourceType: type, id, meta: { versionId: '1' } });
    statements.push([`INSERT INTO resources (tenant, type, id, version_id, last_updated, deleted, seq, content) VALUES ('t', $1, $2, 1, 1000, ${target.kind === 'sqlite' ? 0 : false}, ${n + 1}, $3)`, [type, id, content]]);
    for (const [param, system, value] of index) {
      statements.push([`INSERT INTO search_index (res, tenant, type, param, system, value)
        SELECT pk, tenant, type, $3, $4, $5 FROM resources WHERE tenant = 't' AND type = $1 AND id = $2`, [type, id, param, system, value]]);
    }
  });
  await rawStatements(target.kind, db.url, statements);
}

/** Versioned migrations: applied once, recorded, safe when several processes start together. */
export function migrationContract(target: StoreTarget) {
  const all = (target.kind === 'sqlite' ? sqliteMigrations : postgresMigrations).map((m) => `${m.version}_${m.name}`);
  describe('migrations', () => {
    test('the first migrate applies every migration; later ones, from any instance, apply nothing', async () => {
      const db = await target.fresh();
      const a = db.open();
      expect(await a.migrate()).toEqual({ applied: all });
      expect(await a.migrate()).toEqual({ applied: [] });
      expect(await db.open().migrate()).toEqual({ applied: [] });
      await a.tenants.create('after-migrate', 5);
      expect(await a.tenants.get('after-migrate')).toEqual({ id: 'after-migrate', createdAt: 5 });
    });

    test('two instances migrating one fresh database at once apply each migration exactly once', async () => {
      const db = await target.fresh();
      const stores = [db.open(), db.open(), db.open()];
      const results = await Promise.all(stores.map((s) => s.migrate()));
      expect(results.flatMap((r) => r.applied)).toEqual(all);
      await stores[0]!.tenants.create('shared', 1);
      for (const s of stores) expect(await s.tenants.get('shared')).toEqual({ id: 'shared', createdAt: 1 });
    });

    test('migration 4 drops the patient rows that subject rows already hold, and only those', async () => {
      const db = await target.fresh();
      await migrateUpTo(target.kind, db.url, 3);
      const s = db.open();
      const ref = { system: 'Patient', value: 'p1' };
      await writeAsOldCinder(target, db, [
        ['Observation', 'o1', [['patient', 'Patient', 'p1'], ['subject', 'Patient', 'p1']]],
        ['AllergyIntolerance', 'a1', [['patient', 'Patient', 'p1']]],
      ]);
      const q = (type: string, param: string): SearchQuery => ({ type, sort: [], count: 10, where: [{ kind: 'token', param, values: [ref] }] });
      const [[patientRows]] = await rawStatements(target.kind, db.url, [["SELECT COUNT(*) AS n FROM search_index WHERE param = 'patient'", []]]);
      expect(Number(patientRows!.n)).toBe(2);
      expect(await s.migrate()).toEqual({ applied: all.slice(3) });
      expect(ids(await s.resources.search('t', q('Observation', 'patient')))).toEqual([]);
      expect(ids(await s.resources.search('t', q('Observation', 'subject')))).toEqual(['o1']);
      expect(ids(await s.resources.search('t', q('AllergyIntolerance', 'patient')))).toEqual(['a1']);
    });

    test("the job owner migration gives the waiting and running jobs their spec's user, and the others none", async () => {
      const db = await target.fresh();
      const version = migrationVersion(target.kind, 'job_owner_user');
      await migrateUpTo(target.kind, db.url, version - 1);
      const statements: [string, string[]][] = [];
      const spec = (user?: string) => JSON.stringify({ version: 1, types: [], ...(user === undefined ? {} : { ownerUser: user }) });
      for (const [id, state, s] of [['e1', 'accepted', spec('alice')], ['e2', 'in-progress', spec('alice')], ['e3', 'completed', spec('alice')], ['e4', 'accepted', spec()], ['e5', 'accepted', '{not json "ownerUser":']]) {
        statements.push([`INSERT INTO export_jobs (id, tenant, client_id, state, request, spec, transaction_time, created_at, updated_at, progress) VALUES ($1, 't1', 'c1', $2, 'r', $3, 1, 1, 1, '{}')`, [id!, state!, s!]]);
      }
      statements.push([`INSERT INTO import_jobs (id, tenant, client_id, state, request, spec, created_at, updated_at, progress) VALUES ('i1', 't1', 'c1', 'accepted', 'r', $1, 1, 1, '{}')`, [spec('alice')]]);
      await rawStatements(target.kind, db.url, statements);
      const s = db.open();
      expect((await s.migrate()).applied[0]).toBe(`${version}_job_owner_user`);
      expect([await s.exports.jobs.activeCount('t1', 'c1', 'alice'), await s.exports.jobs.activeCount('t1', 'c1')]).toEqual([2, 2]);
      const next = { tenant: 't1', clientId: 'c1', request: 'r', spec: '{}', progress: '{}', createdAt: 2 };
      expect(await s.imports.create({ ...next, id: 'i2', ownerUser: 'alice' }, 1)).toBe(false);
      expect(await s.imports.create({ ...next, id: 'i3' }, 1)).toBe(true);
    });

    // PostgreSQL finds the user in the spec's text (a pattern), SQLite through JSON: a text inside the spec (a
    // `_typeFilter` value, quoted with escapes) that reads like the member is no owner on either.
    test("the job owner migration takes the spec's own ownerUser, not a text in it that quotes one", async () => {
      const db = await target.fresh();
      const version = migrationVersion(target.kind, 'job_owner_user');
      await migrateUpTo(target.kind, db.url, version - 1);
      const quoting = { Patient: [[{ name: 'name', value: '"ownerUser":"mallory"' }]] };
      const specs: [string, string][] = [
        ['e1', JSON.stringify({ version: 1, types: ['Patient'], filters: quoting })],
        ['e2', JSON.stringify({ version: 1, types: ['Patient'], filters: quoting, ownerUser: 'alice' })],
      ];
      await rawStatements(target.kind, db.url, specs.map(([id, spec]) => [
        `INSERT INTO export_jobs (id, tenant, client_id, state, request, spec, transaction_time, created_at, updated_at, progress) VALUES ($1, 't1', 'c1', 'accepted', 'r', $2, 1, 1, 1, '{}')`, [id, spec],
      ]));
      const s = db.open();
      expect((await s.migrate()).applied[0]).toBe(`${version}_job_owner_user`);
      const counts = async () => [await s.exports.jobs.activeCount('t1', 'c1'), await s.exports.jobs.activeCount('t1', 'c1', 'alice'), await s.exports.jobs.activeCount('t1', 'c1', 'mallory')];
      expect(await counts()).toEqual([1, 1, 0]);
    });

    test('the validation debt migration marks the tenants that hold resources, and only those', async () => {
      const db = await target.fresh();
      const version = migrationVersion(target.kind, 'validation_debt');
      await migrateUpTo(target.kind, db.url, version - 1);
      const s = db.open();
      await s.tenants.create('t', 1);
      await s.tenants.create('empty', 1);
      await writeAsOldCinder(target, db, [['Patient', 'p1', []]]);
      expect((await s.migrate()).applied[0]).toBe(`${version}_validation_debt`);
      expect(await s.tenants.validationDebt('t')).toBe(1);
      expect(await s.tenants.validationDebt('empty')).toBeNull();
    });

    test('the older-writers revocation migration: a revocation an older Cinder wrote after revocation_sequence is read by a poll past it', async () => {
      const db = await target.fresh();
      const version = migrationVersion(target.kind, 'revocation_sequence_for_older_writers');
      await migrateUpTo(target.kind, db.url, version - 1);
      const s = db.open();
      await s.oauth.revoke({ kind: 'client', value: 'new', revokedAt: 1000, expiresAt: Date.now() + 100_000 });
      const past = (await s.oauth.revokedSince(-1, 0)).last;
      // As a release from before revocation_sequence writes it: no seq (the column's default).
      await rawStatements(target.kind, db.url, [[`INSERT INTO revocations (kind, value, revoked_at, expires_at) VALUES ('client', 'old', 2000, ${Date.now() + 100_000})`, []]]);
      expect((await s.migrate()).applied[0]).toBe(`${version}_revocation_sequence_for_older_writers`);
      const read = await s.oauth.revokedSince(past, 0);
      expect(read.revocations.map((r) => r.value)).toContain('old');
    });

    test('the context patient migration: codes and refresh tokens an older Cinder stored read as having no chosen patient', async () => {
      const db = await target.fresh();
      const version = migrationVersion(target.kind, 'context_patient');
      await migrateUpTo(target.kind, db.url, version - 1);
      await rawStatements(target.kind, db.url, [
        [`INSERT INTO auth_codes (code_hash, grant_id, client_id, tenant, user_id, redirect_uri, scope, nonce, code_challenge, auth_time, expires_at, consumed_at)
          VALUES ('old-code', 'g1', 'c1', 't', 'u1', 'https://app/cb', 'openid launch/patient', NULL, NULL, 1000, 61000, NULL)`, []],
        [`INSERT INTO refresh_tokens (token_hash, grant_id, client_id, tenant, user_id, scope, auth_time, created_at, expires_at, revoked_at)
          VALUES ('old-refresh', 'g1', 'c1', 't', 'u1', 'openid offline_access', 1000, 1000, 100000, NULL)`, []],
      ]);
      const s = db.open();
      expect((await s.migrate()).applied[0]).toBe(`${version}_context_patient`);
      const redeemed = await s.oauth.redeemCode('old-code', 'c1', 2000);
      expect(redeemed).toMatchObject({ status: 'redeemed', code: { grantId: 'g1', userId: 'u1', patient: null } });
      expect(await s.oauth.getRefreshToken('old-refresh')).toMatchObject({ grantId: 'g1', patient: null, revokedAt: null });
    });

    test('the context encounter migration: codes and refresh tokens an older Cinder stored read as having no encounter, their patient kept', async () => {
      const db = await target.fresh();
      const version = migrationVersion(target.kind, 'context_encounter');
      await migrateUpTo(target.kind, db.url, version - 1);
      await rawStatements(target.kind, db.url, [
        [`INSERT INTO auth_codes (code_hash, grant_id, client_id, tenant, user_id, redirect_uri, scope, nonce, code_challenge, auth_time, expires_at, consumed_at, patient)
          VALUES ('old-code', 'g1', 'c1', 't', 'u1', 'https://app/cb', 'openid launch/patient', NULL, NULL, 1000, 61000, NULL, 'p1')`, []],
        [`INSERT INTO refresh_tokens (token_hash, grant_id, client_id, tenant, user_id, scope, auth_time, created_at, expires_at, revoked_at, patient)
          VALUES ('old-refresh', 'g1', 'c1', 't', 'u1', 'openid offline_access launch/patient', 1000, 1000, 100000, NULL, 'p1')`, []],
      ]);
      const s = db.open();
      expect((await s.migrate()).applied[0]).toBe(`${version}_context_encounter`);
      const redeemed = await s.oauth.redeemCode('old-code', 'c1', 2000);
      expect(redeemed).toMatchObject({ status: 'redeemed', code: { grantId: 'g1', patient: 'p1', encounter: null } });
      expect(await s.oauth.getRefreshToken('old-refresh')).toMatchObject({ grantId: 'g1', patient: 'p1', encounter: null });
      // New rows hold one.
      await s.oauth.createRefreshToken({
        tokenHash: 'new-refresh', grantId: 'g2', clientId: 'c1', tenant: 't', userId: 'u1', scope: 'openid launch', authTime: 1000,
        createdAt: 1000, expiresAt: 100_000, revokedAt: null, patient: 'p1', encounter: 'e1', fhirContext: null, needPatientBanner: true,
      });
      expect((await s.oauth.getRefreshToken('new-refresh'))!.encounter).toBe('e1');
    });

    test('the launch context migration: codes and refresh tokens an older Cinder stored read as having no fhirContext and needing a banner', async () => {
      const db = await target.fresh();
      const version = migrationVersion(target.kind, 'launch_context');
      await migrateUpTo(target.kind, db.url, version - 1);
      await rawStatements(target.kind, db.url, [
        [`INSERT INTO auth_codes (code_hash, grant_id, client_id, tenant, user_id, redirect_uri, scope, nonce, code_challenge, auth_time, expires_at, consumed_at, patient, encounter)
          VALUES ('old-code', 'g1', 'c1', 't', 'u1', 'https://app/cb', 'openid launch', NULL, NULL, 1000, 61000, NULL, 'p1', 'e1')`, []],
        [`INSERT INTO refresh_tokens (token_hash, grant_id, client_id, tenant, user_id, scope, auth_time, created_at, expires_at, revoked_at, patient, encounter)
          VALUES ('old-refresh', 'g1', 'c1', 't', 'u1', 'openid offline_access launch', 1000, 1000, 100000, NULL, 'p1', 'e1')`, []],
      ]);
      const s = db.open();
      expect((await s.migrate()).applied[0]).toBe(`${version}_launch_context`);
      const redeemed = await s.oauth.redeemCode('old-code', 'c1', 2000);
      expect(redeemed).toMatchObject({ status: 'redeemed', code: { patient: 'p1', encounter: 'e1', fhirContext: null, needPatientBanner: true } });
      expect(await s.oauth.getRefreshToken('old-refresh')).toMatchObject({ patient: 'p1', encounter: 'e1', fhirContext: null, needPatientBanner: true });
      // New rows hold them.
      await s.oauth.createRefreshToken({
        tokenHash: 'new-refresh', grantId: 'g2', clientId: 'c1', tenant: 't', userId: 'u1', scope: 'openid launch', authTime: 1000,
        createdAt: 1000, expiresAt: 100_000, revokedAt: null, patient: 'p1', encounter: null, fhirContext: [{ reference: 'List/l1' }], needPatientBanner: false,
      });
      expect(await s.oauth.getRefreshToken('new-refresh')).toMatchObject({ fhirContext: [{ reference: 'List/l1' }], needPatientBanner: false });
    });

    test("the sign-in revocation number migration: codes and refresh tokens an older Cinder stored read without one (judged by time)", async () => {
      const db = await target.fresh();
      const version = migrationVersion(target.kind, 'sign_in_revocation_seq');
      await migrateUpTo(target.kind, db.url, version - 1);
      await rawStatements(target.kind, db.url, [
        [`INSERT INTO auth_codes (code_hash, grant_id, client_id, tenant, user_id, redirect_uri, scope, nonce, code_challenge, auth_time, expires_at, consumed_at)
          VALUES ('old-code', 'g1', 'c1', 't', 'u1', 'https://app/cb', 'openid', NULL, NULL, 1000, 61000, NULL)`, []],
        [`INSERT INTO refresh_tokens (token_hash, grant_id, client_id, tenant, user_id, scope, auth_time, created_at, expires_at, revoked_at)
          VALUES ('old-refresh', 'g1', 'c1', 't', 'u1', 'openid offline_access', 1000, 1000, 100000, NULL)`, []],
      ]);
      const s = db.open();
      expect((await s.migrate()).applied[0]).toBe(`${version}_sign_in_revocation_seq`);
      const redeemed = await s.oauth.redeemCode('old-code', 'c1', 2000);
      expect(redeemed).toMatchObject({ status: 'redeemed', code: { grantId: 'g1', authTime: 1000 } });
      expect(redeemed.status === 'redeemed' && 'authRevocationSeq' in redeemed.code).toBe(false);
      expect('authRevocationSeq' in (await s.oauth.getRefreshToken('old-refresh'))!).toBe(false);
      // New rows hold one.
      await s.oauth.createRefreshToken({
        tokenHash: 'new-refresh', grantId: 'g2', clientId: 'c1', tenant: 't', userId: 'u1', scope: 'openid', authTime: 1000, authRevocationSeq: 7,
        createdAt: 1000, expiresAt: 100_000, revokedAt: null, patient: null, encounter: null, fhirContext: null, needPatientBanner: true,
      });
      expect((await s.oauth.getRefreshToken('new-refresh'))!.authRevocationSeq).toBe(7);
    });

    test("the revocation number kept on users and clients: none in older rows; one an older release's revocation leaves stale is cleared", async () => {
      const db = await target.fresh();
      const version = migrationVersion(target.kind, 'tokens_revoked_seq');
      await migrateUpTo(target.kind, db.url, version - 1);
      await rawStatements(target.kind, db.url, [
        [`INSERT INTO tenants (id, created_at) VALUES ('t', 1000)`, []],
        [`INSERT INTO users (id, tenant, username, password_hash, email_verified, phone_verified, created_at, disabled, tokens_revoked_at)
          VALUES ('u1', 't', 'ann', 'x', ${target.kind === 'sqlite' ? '0' : 'false'}, ${target.kind === 'sqlite' ? '0' : 'false'}, 1000, ${target.kind === 'sqlite' ? '0' : 'false'}, 1500)`, []],
      ]);
      const s = db.open();
      expect((await s.migrate()).applied[0]).toBe(`${version}_tokens_revoked_seq`);
      const old = (await s.users.get('t', 'u1'))!;
      expect(old.tokensRevokedAt).toBe(1500);
      expect('tokensRevokedSeq' in old).toBe(false);
      // This release keeps the number with the time.
      await s.users.update({ ...old, tokensRevokedAt: 2000, tokensRevokedSeq: 9 });
      expect((await s.users.get('t', 'u1'))!).toMatchObject({ tokensRevokedAt: 2000, tokensRevokedSeq: 9 });
      // A change that revokes nothing keeps it.
      await s.users.update({ ...(await s.users.get('t', 'u1'))!, name: 'Ann' });
      expect((await s.users.get('t', 'u1'))!.tokensRevokedSeq).toBe(9);
      // An older release revokes again: its time without a number; the stale number goes, so the time decides.
      await rawStatements(target.kind, db.url, [[`UPDATE users SET tokens_revoked_at = 3000, name = 'Ann' WHERE id = 'u1'`, []]]);
      const after = (await s.users.get('t', 'u1'))!;
      expect(after.tokensRevokedAt).toBe(3000);
      expect('tokensRevokedSeq' in after).toBe(false);
      // A client's likewise.
      const f = target.kind === 'sqlite' ? '0' : 'false';
      await rawStatements(target.kind, db.url, [[`INSERT INTO clients (client_id, tenant, name, grants, scopes, redirect_uris, created_at, disabled)
        VALUES ('c1', 't', 'c', '[]', '[]', '[]', 1000, ${f})`, []]]);
      await s.clients.update({ ...(await s.clients.get('c1'))!, tokensRevokedAt: 2000, tokensRevokedSeq: 11 });
      expect((await s.clients.get('c1'))!).toMatchObject({ tokensRevokedAt: 2000, tokensRevokedSeq: 11, revocationSeq: 11 });
      await rawStatements(target.kind, db.url, [[`UPDATE clients SET tokens_revoked_at = 3000, disabled = ${target.kind === 'sqlite' ? '1' : 'true'} WHERE client_id = 'c1'`, []]]);
      const client = (await s.clients.get('c1'))!;
      expect([client.tokensRevokedAt, 'tokensRevokedSeq' in client, client.revocationSeq]).toEqual([3000, false, 0]);
    });

    test("the sign-in client revocation number migration: codes an older Cinder stored read without one (judged by time)", async () => {
      const db = await target.fresh();
      const version = migrationVersion(target.kind, 'sign_in_client_revocation_seq');
      await migrateUpTo(target.kind, db.url, version - 1);
      await rawStatements(target.kind, db.url, [
        [`INSERT INTO auth_codes (code_hash, grant_id, client_id, tenant, user_id, redirect_uri, scope, nonce, code_challenge, auth_time, expires_at, consumed_at, auth_revocation_seq)
          VALUES ('old-code', 'g1', 'c1', 't', 'u1', 'https://app/cb', 'openid', NULL, NULL, 1000, 61000, NULL, 3)`, []],
      ]);
      const s = db.open();
      expect((await s.migrate()).applied[0]).toBe(`${version}_sign_in_client_revocation_seq`);
      const redeemed = await s.oauth.redeemCode('old-code', 'c1', 2000);
      expect(redeemed).toMatchObject({ status: 'redeemed', code: { grantId: 'g1', authTime: 1000, authRevocationSeq: 3 } });
      expect(redeemed.status === 'redeemed' && 'authClientRevocationSeq' in redeemed.code).toBe(false);
    });

    test('ping succeeds on a reachable database', async () => {
      expect(await target.open().ping()).toBeUndefined();
    });
  });
}
