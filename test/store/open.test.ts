import { afterEach, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, sqlitePath } from '../../src/store/open.ts';
import { sqliteMigrations } from '../../src/store/sqlite/migrations.ts';
import type { Store } from '../../src/store/types.ts';

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
