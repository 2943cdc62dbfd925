import { NO_INDEX_ROWS } from '../../src/store/types.ts';
import { Database } from 'bun:sqlite';
import { afterEach, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function path(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-pages-'));
  dirs.push(dir);
  return join(dir, 'c.db');
}

const pageSize = (file: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return db.query<{ page_size: number }, []>('PRAGMA page_size').get()!.page_size;
  } finally {
    db.close();
  }
};

test('a new database file gets 16 KiB pages', async () => {
  const file = path();
  const s = createSqliteStore(file);
  await s.migrate();
  await s.close();
  expect(pageSize(file)).toBe(16384);
});

test('an existing database keeps its page size and works', async () => {
  const file = path();
  const old = new Database(file, { create: true });
  old.exec('PRAGMA page_size = 4096');
  old.exec('PRAGMA journal_mode = WAL');
  old.exec('CREATE TABLE before_cinder (x)');
  old.close();
  const s = createSqliteStore(file);
  await s.migrate();
  await s.resources.write('t', (w) => w.put({
    type: 'Patient', id: 'p', versionId: 1, lastUpdated: 1, deleted: false, content: '{}', index: NO_INDEX_ROWS, compartments: [], method: 'PUT',
  }));
  expect((await s.resources.read('t', 'Patient', 'p'))!.versionId).toBe(1);
  await s.close();
  expect(pageSize(file)).toBe(4096);
});
