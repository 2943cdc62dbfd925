import { afterAll, afterEach, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, sqlitePath } from '../../src/store/open.ts';
import { sqliteMigrations } from '../../src/store/sqlite/migrations.ts';
import type { Store } from '../../src/store/types.ts';
import { storeTargets } from '../helpers/stores.ts';

describe('openStore', () => {
  const opened: Store[] = [];
  afterEach(async () => {
    for (const s of opened.splice(0)) await s.close();
  });

  test('postgres:// and postgresql:// URLs pick the Postgres adapter (connecting lazily)', () => {
    for (const url of ['postgres://u@127.0.0.1:1/db', 'postgresql://u:p@db.example:5432/cinder?max=3', 'POSTGRES://h/db']) {
      const s = openStore(url);
      opened.push(s);
      expect(s.kind).toBe('postgres');
    }
  });

  test('sqlite:, file: and plain paths pick SQLite on that file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cinder-open-'));
    try {
      for (const url of [`sqlite:${dir}/a.db`, `sqlite://${dir}/b.db`, `file:${dir}/c.db`, join(dir, 'd.db')]) {
        const s = openStore(url);
        opened.push(s);
        expect(s.kind).toBe('sqlite');
        expect(await s.migrate()).toEqual({ applied: sqliteMigrations.map((m) => `${m.version}_${m.name}`) });
      }
      expect(await Bun.file(join(dir, 'b.db')).exists()).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('sqlitePath strips the scheme; unknown schemes and empty paths are refused', () => {
    expect(sqlitePath('sqlite:/data/c.db')).toBe('/data/c.db');
    expect(sqlitePath('sqlite:///data/c.db')).toBe('/data/c.db');
    expect(sqlitePath('sqlite:./rel.db')).toBe('./rel.db');
    expect(sqlitePath('file:./rel.db')).toBe('./rel.db');
    expect(sqlitePath('sqlite::memory:')).toBe(':memory:');
    expect(sqlitePath('./cinder-data/cinder.db')).toBe('./cinder-data/cinder.db');
    expect(() => sqlitePath('mysql://h/db')).toThrow('unsupported database URL scheme');
    expect(() => sqlitePath('sqlite:')).toThrow('missing path');
  });

  test('an invalid Postgres pool size fails at construction', () => {
    expect(() => openStore('postgres://h/db?max=0')).toThrow(RangeError);
    expect(() => openStore('postgres://h/db?max=lots')).toThrow(RangeError);
  });

  test('an invalid connect_timeout fails at construction (postgres.js took a negative one as an instant timeout, any other as none)', () => {
    for (const v of ['99999999999', 'abc', '', '5s']) {
      expect(() => openStore(`postgres://h/db?connect_timeout=${v}`)).toThrow(`invalid connect_timeout '${v}' in the database URL`);
    }
    // Whole or decimal seconds, 0 or a negative number (libpq's) for none, are taken.
    for (const v of ['0', '1', '2.5', '-1']) {
      const s = openStore(`postgres://h/db?max=3&connect_timeout=${v}`);
      opened.push(s);
      expect(s.kind).toBe('postgres');
    }
  });
});

/**
 * The query's values the server is sent (application_name, options, any setting) are percent-decoded as libpq decodes
 * them, a '+' kept: the driver read them as a form's, a '+' a blank (`application_name=etl+nightly` named `etl nightly`).
 */
describe('the server settings of a PostgreSQL URL', async () => {
  const targets = await storeTargets({ main: false });
  const pg = targets.find((t) => t.kind === 'postgres');
  afterAll(async () => {
    for (const t of targets) await t.cleanup();
  });
  test.skipIf(!pg)("application_name and a setting with a '+' reach the server with it", async () => {
    const db = await pg!.migrated();
    const sep = db.url.includes('?') ? '&' : '?';
    const store = openStore(`${db.url}${sep}application_name=etl+nightly&search_path=a%2Bb`);
    try {
      await store.ping();
      const admin = postgres(db.url, { max: 1, onnotice: () => undefined });
      const rows = await admin<{ application_name: string }[]>`SELECT application_name FROM pg_stat_activity WHERE application_name LIKE 'etl%'`;
      await admin.end();
      expect(rows.map((r) => r.application_name)).toContain('etl+nightly');
    } finally {
      await store.close();
    }
  });
});
