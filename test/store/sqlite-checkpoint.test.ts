/** SQLite background checkpoints (src/store/sqlite/checkpointer.ts) and bulk writes through them. */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCheckpointer } from '../../src/store/sqlite/checkpointer.ts';
import { openDatabase } from '../../src/store/sqlite/db.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { tokens, version } from './contract/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'cinder-checkpoint-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('a requested checkpoint copies committed WAL frames into the database file, on another thread', async () => {
  const path = join(dir, 'a.db');
  const db = openDatabase(path);
  db.exec('PRAGMA wal_autocheckpoint = 0');
  db.exec('CREATE TABLE t (x TEXT)');
  db.transaction(() => {
    for (let i = 0; i < 2_000; i++) db.query('INSERT INTO t VALUES (?)').run('x'.repeat(1_000));
  })();
  const checkpointer = createCheckpointer(path);
  const before = statSync(path).size;
  expect(checkpointer.walBytes()).toBeGreaterThan(2_000_000);
  await checkpointer.request();
  expect(statSync(path).size).toBeGreaterThan(before + 2_000_000);
  await checkpointer.close();
  expect((db.query('SELECT count(*) AS n FROM t').get() as { n: number }).n).toBe(2_000);
  db.close();
});

test('bulk transactions of the store: every row readable from another connection, the thread closed with the store', async () => {
  const path = join(dir, 'b.db');
  const store = createSqliteStore(path);
  await store.migrate();
  for (let batch = 0; batch < 3; batch++) {
    const vs = Array.from({ length: 1_200 }, (_, i) => version('Patient', `p${batch}-${i}`, { index: [{ param: 'identifier', system: 's', value: String(batch) }] }));
    await store.resources.write('t', (w) => w.insertNew(vs));
  }
  const other = createSqliteStore(path);
  expect(await other.resources.count('t', { type: 'Patient', sort: [], count: 0 })).toBe(3_600);
  expect(await other.resources.count('t', { type: 'Patient', sort: [], count: 0, where: tokens([{ param: 'identifier', values: [{ value: '2' }] }]) })).toBe(1_200);
  await other.close();
  // Resolves once the checkpoint thread has closed its connection (it never holds the process open).
  await store.close();
  const reopened = createSqliteStore(path);
  expect(await reopened.resources.count('t', { type: 'Patient', sort: [], count: 0 })).toBe(3_600);
  await reopened.close();
});
