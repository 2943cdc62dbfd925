/**
 * `cinder check` in-process on both stores: a healthy database exits 0; a missing migration, a migration a
 * newer Cinder applied, a pending reindex, a corrupted SQLite file (bytes overwritten in a copy) and a missing
 * SQLite file each exit 3 naming the problem; a PostgreSQL database that cannot be used (unreachable, no such database)
 * fails the check itself (exit 1, one line, as every command); PostgreSQL skips the SQLite-only checks.
 */
import { Database } from 'bun:sqlite';
import { afterAll, describe, expect, test } from 'bun:test';
import { copyFileSync, openSync, writeSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { INDEX_MODEL } from '../../src/fhir/reindex.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { createTestApp } from '../helpers/app.ts';
import { fhirClient } from '../helpers/fhir.ts';
import { migrateUpTo, storeTargets } from '../helpers/stores.ts';
import { sqliteMigrations } from '../../src/store/sqlite/migrations.ts';
import { postgresMigrations } from '../../src/store/postgres/migrations.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/** `cinder check --json` on `url`: the exit code and the report. */
async function check(url: string): Promise<{ code: number; report: { healthy: boolean; checks: Record<string, string>; problems: string[] } }> {
  const cli = createCliEnv({ CINDER_DATABASE_URL: url });
  try {
    const r = await cli.run(['check', '--json']);
    return { code: r.code, report: JSON.parse(r.stdout) };
  } finally {
    cli.close();
  }
}

/** Runs `statement` on the database `url` of `kind`. */
async function execute(kind: string, url: string, statement: string): Promise<void> {
  if (kind === 'sqlite') {
    const db = new Database(url);
    db.exec(statement);
    db.close();
    return;
  }
  const sql = postgres(url, { max: 1, onnotice: () => undefined });
  await sql.unsafe(statement);
  await sql.end();
}

for (const target of targets) {
  const latest = Math.max(...(target.kind === 'sqlite' ? sqliteMigrations : postgresMigrations).map((m) => m.version));
  describe(`cinder check (${target.kind})`, () => {
    test('a migrated database is healthy: exit 0, every check named', async () => {
      const db = await target.migrated();
      await db.open().migrate();
      const { code, report } = await check(db.url);
      expect(report.problems).toEqual([]);
      expect(code).toBe(0);
      expect(report.healthy).toBe(true);
      expect(report.checks.migrations).toBe(`${latest} (this release: ${latest})`);
      expect(report.checks.search_index).toBe(`model ${INDEX_MODEL} (this release: ${INDEX_MODEL})`);
      if (target.kind === 'sqlite') expect(report.checks).toMatchObject({ integrity: 'ok', foreign_keys: 'ok' });
      else expect(report.checks.integrity).toBeUndefined();
    });

    test('a missing migration is a problem (exit 3), and changes nothing', async () => {
      const db = await target.fresh();
      await migrateUpTo(target.kind, db.url, latest - 1);
      const { code, report } = await check(db.url);
      expect(code).toBe(3);
      expect(report.healthy).toBe(false);
      const last = (target.kind === 'sqlite' ? sqliteMigrations : postgresMigrations).find((m) => m.version === latest)!;
      expect(report.problems).toEqual([`migration ${latest}_${last.name} is not applied (cinder migrate, or the next cinder serve, applies it)`]);
      // Still missing: check applies nothing.
      expect((await check(db.url)).code).toBe(3);
    });

    test('a migration this release does not know (a newer Cinder) is a problem', async () => {
      const db = await target.migrated();
      await db.open().migrate();
      await execute(target.kind, db.url, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (${latest + 1}, 'from_the_future', 0)`);
      const { code, report } = await check(db.url);
      expect(code).toBe(3);
      expect(report.problems).toEqual([`migration ${latest + 1}_from_the_future is unknown to this release: a newer Cinder wrote the database; run that version`]);
    });

    test('a pending reindex is a problem', async () => {
      const db = await target.migrated();
      await db.open().migrate();
      await execute(target.kind, db.url, `UPDATE index_state SET value = ${INDEX_MODEL - 1} WHERE name = 'model'`);
      const { code, report } = await check(db.url);
      expect(code).toBe(3);
      expect(report.problems).toEqual([
        `a reindex is pending: the search index follows model ${INDEX_MODEL - 1}, this release writes ${INDEX_MODEL} (cinder reindex --if-needed, or the next cinder serve, runs it)`,
      ]);
    });
  });
}

describe('cinder check on a damaged or missing SQLite file', () => {
  test('bytes overwritten in a copy of a database are found by integrity_check (exit 3); the original stays healthy', async () => {
    const t = await createTestApp();
    const api = fhirClient(t, await t.token());
    for (let i = 0; i < 40; i++) await api.put200({ resourceType: 'Patient', id: `p${i}`, name: [{ family: `Family${i}`, given: ['x'.repeat(300)] }] });
    await t.store.close();
    const original = join(t.dir, 'cinder.db');
    const file = new Database(original, { readonly: true });
    const pageSize = file.query<{ page_size: number }, []>('PRAGMA page_size').get()!.page_size;
    const roots = file.query<{ rootpage: number }, []>("SELECT rootpage FROM sqlite_master WHERE name IN ('resources', 'resources_key')").all().map((r) => r.rootpage);
    file.close();
    /** A copy of the database with 200 bytes at `offset` of the root pages of the resources table and its key index overwritten. */
    const damagedCopy = (name: string, offset: number) => {
      const copy = join(t.dir, name);
      copyFileSync(original, copy);
      const fd = openSync(copy, 'r+');
      for (const root of roots) writeSync(fd, Buffer.alloc(200, 0xa5), 0, 200, (root - 1) * pageSize + offset);
      closeSync(fd);
      return copy;
    };

    // Cells overwritten: integrity_check lists what it finds wrong.
    const cells = await check(damagedCopy('cells.db', 40));
    expect(cells.code).toBe(3);
    expect(cells.report.healthy).toBe(false);
    expect(cells.report.checks.integrity).toMatch(/^\d+ problems$/);
    expect(cells.report.problems.length).toBeGreaterThan(0);
    expect(cells.report.problems.every((p) => p.startsWith('integrity: '))).toBe(true);
    // The pages' headers overwritten: the check itself stops at the damage, reported the same way.
    const headers = await check(damagedCopy('headers.db', 0));
    expect(headers.code).toBe(3);
    expect(headers.report.problems.length).toBeGreaterThan(0);
    expect(headers.report.problems.every((p) => p.startsWith('integrity: '))).toBe(true);
    expect((await check(original)).code).toBe(0);
    await t.close();
  });

  test('a file that is not a database, and a missing one, are problems; the missing one is not created', async () => {
    const cli = createCliEnv({}, { database: false });
    try {
      const path = join(cli.dir, 'data', 'cinder.db');
      const missing = await cli.run(['check']);
      expect(missing.code).toBe(3);
      expect(missing.stdout).toContain(`problem: no SQLite database at ${path}`);
      expect(await Bun.file(path).exists()).toBe(false);
      const junk = join(cli.dir, 'junk.db');
      await Bun.write(junk, 'this is not a SQLite database, just some text that is long enough to have a header'.repeat(100));
      const r = await check(junk);
      expect(r.code).toBe(3);
      expect(r.report.problems[0]).toContain('file is not a database');
    } finally {
      cli.close();
    }
  });

  test('a PostgreSQL database that cannot be used fails the check itself: exit 1 and one line, as every command', async () => {
    // An unreachable server, and (when there is one) a database name the server does not have.
    const pg = targets.find((t) => t.kind === 'postgres');
    const urls = ['postgres://postgres@127.0.0.1:9/nowhere?connect_timeout=2'];
    if (pg) urls.push((await pg.migrated()).url.replace(/\/([^/?]+)(\?|$)/, '/cinder_no_such_database$2'));
    for (const url of urls) {
      const cli = createCliEnv({ CINDER_DATABASE_URL: url });
      try {
        for (const argv of [['check'], ['check', '--json']]) {
          const r = await cli.run(argv).catch((err: Error) => ({ code: 1, stdout: '', stderr: `cinder: ${err.message}\n` }));
          expect([url, r.code, r.stdout]).toEqual([url, 1, '']);
          const database = url.includes(':9/') ? "'nowhere' on 127.0.0.1:9" : "'cinder_no_such_database' on ";
          expect(r.stderr).toStartWith(`cinder: cannot use the PostgreSQL database ${database}`);
          expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
          // The driver's reason follows at once, not the store's own "the database is unreachable".
          expect(r.stderr).not.toContain('unreachable');
        }
      } finally {
        cli.close();
      }
    }
  });
});
