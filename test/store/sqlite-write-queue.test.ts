import { NO_INDEX_ROWS } from '../../src/store/types.ts';
import { afterEach, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/store/sqlite/db.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { createSqliteResources } from '../../src/store/sqlite/resources.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function store() {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-queue-'));
  dirs.push(dir);
  const path = join(dir, 'c.db');
  const s = createSqliteStore(path);
  await s.migrate();
  return Object.assign(s, { path });
}

test('an account write issued while a resource transaction is open is not swallowed by its rollback', async () => {
  const s = await store();
  let release!: () => void;
  let opened!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const open = new Promise<void>((r) => (opened = r));
  const tx = s.resources.write('t', async (w) => {
    await w.put({ type: 'Patient', id: 'p', versionId: 1, lastUpdated: 1, deleted: false, content: '{}', index: NO_INDEX_ROWS, compartments: [], method: 'PUT' });
    opened();
    await held;
    throw new Error('roll back');
  });
  await open;
  // Issued while the transaction above holds the writer connection.
  const created = s.tenants.create('t2', 5);
  release();
  await expect(tx).rejects.toThrow('roll back');
  await created;
  expect(await s.tenants.get('t2')).toEqual({ id: 't2', createdAt: 5 });
  expect(await s.resources.read('t', 'Patient', 'p')).toBeNull();
  await s.close();
});

const patient = (id: string, versionId = 1) => ({
  type: 'Patient', id, versionId, lastUpdated: versionId, deleted: false, content: `{"v":${versionId}}`, index: NO_INDEX_ROWS, compartments: [], method: 'PUT' as const,
});

test('an error that ends the whole group transaction fails the writes before it; later ones commit', async () => {
  const { path } = await store();
  const writer = openDatabase(path);
  const resources = createSqliteResources(writer, openDatabase(path));
  // Issued together, so they share one group commit; the second one's error rolls back the transaction
  // (as SQLite does on a full disk or an I/O error).
  const ended = new Error('transaction ended');
  const [a, b, c] = await Promise.allSettled([
    resources.write('t', (w) => w.put(patient('a'))),
    resources.write('t', async (w) => {
      await w.put(patient('b'));
      writer.exec('ROLLBACK');
      throw ended;
    }),
    resources.write('t', (w) => w.put(patient('c'))),
  ]);
  expect(a).toEqual({ status: 'rejected', reason: ended });
  expect(b).toEqual({ status: 'rejected', reason: ended });
  expect(c.status).toBe('fulfilled');
  expect(await resources.read('t', 'Patient', 'a')).toBeNull();
  expect(await resources.read('t', 'Patient', 'b')).toBeNull();
  expect((await resources.read('t', 'Patient', 'c'))!.content).toBe('{"v":1}');
  expect(writer.inTransaction).toBe(false);
});

test('a group whose BEGIN fails fails every write in it, and the queue goes on', async () => {
  const { path } = await store();
  // Another connection holds the write lock past the writer's busy timeout.
  const other = openDatabase(path);
  other.exec('PRAGMA busy_timeout = 0');
  other.exec('BEGIN IMMEDIATE');
  const writer = openDatabase(path);
  writer.exec('PRAGMA busy_timeout = 50');
  const resources = createSqliteResources(writer, openDatabase(path));
  const results = await Promise.allSettled([1, 2, 3].map((n) => resources.write('t', (w) => w.put(patient(`p${n}`)))));
  expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
  expect(String((results[0] as PromiseRejectedResult).reason)).toMatch(/locked|busy/i);
  other.exec('ROLLBACK');
  await resources.write('t', (w) => w.put(patient('p4')));
  expect(await resources.read('t', 'Patient', 'p4')).not.toBeNull();
  expect(writer.inTransaction).toBe(false);
});

test('an in-memory database moves its change token on every write', async () => {
  const s = createSqliteStore(':memory:');
  await s.migrate();
  const token = () => s.resources.changeToken('t', ['CodeSystem']);
  const seen = new Set([await token()]);
  for (let v = 1; v <= 3; v++) {
    await s.resources.write('t', (w) => w.put({ ...patient('cs', v), type: 'CodeSystem' }));
    seen.add(await token());
  }
  expect(seen.size).toBe(4);
  await s.close();
});
