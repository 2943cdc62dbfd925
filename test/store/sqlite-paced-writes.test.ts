import { afterEach, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, tryBeginImmediate } from '../../src/store/sqlite/db.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { PACED_ROWS } from '../../src/store/sqlite/writer.ts';
import { NO_INDEX_ROWS, type VersionToWrite } from '../../src/store/types.ts';

// A long write transaction on SQLite lets the event loop turn between slices (src/store/sqlite/pacer.ts).
// What it must keep: reads meanwhile see only what is committed, no other write runs inside it, and it
// commits or rolls back whole.

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A store whose writes are paced with `budgetMs` (by default 0: a turn at every chance). */
async function pacedStore(budgetMs = 0) {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-paced-'));
  dirs.push(dir);
  const path = join(dir, 'c.db');
  const s = createSqliteStore(path, { writeSliceMs: budgetMs });
  await s.migrate();
  return { s, probe: openDatabase(path) };
}

const version = (type: string, id: string, versionId = 1): VersionToWrite => ({
  type, id, versionId, lastUpdated: versionId, deleted: false, content: `{"id":"${id}","v":${versionId}}`,
  index: { ...NO_INDEX_ROWS, strings: [{ param: 'name', value: id, exact: id }] }, compartments: [], method: 'PUT',
});

/** Whether a write transaction holds the database's write lock (tried from another connection). */
function locked(probe: ReturnType<typeof openDatabase>): boolean {
  if (!tryBeginImmediate(probe)) return true;
  probe.exec('ROLLBACK');
  return false;
}

test('a paced bulk write that fails rolls back whole; reads and writes issued meanwhile see and keep only what is committed', async () => {
  const { s, probe } = await pacedStore();
  await s.resources.write('t', (w) => w.put(version('Patient', 'before')));
  let inside = 0;
  let open = true;
  const failing = s.resources.write('t', async (w) => {
    await w.insertNew(Array.from({ length: 1000 }, (_, i) => version('Observation', `o${i}`)));
    await w.put(version('Patient', 'before', 2));
    throw new Error('fails after its rows');
  });
  failing.then(() => (open = false), () => (open = false));
  const during: Promise<unknown>[] = [];
  while (open) {
    await new Promise((r) => setImmediate(r));
    if (!open || !locked(probe)) continue;
    inside++;
    // Reads are answered at once, from what is committed.
    expect(await s.resources.read('t', 'Observation', 'o0')).toBeNull();
    expect((await s.resources.read('t', 'Patient', 'before'))?.versionId).toBe(1);
    // Writes wait behind the open transaction: none runs inside it (its rollback would take them along).
    if (!during.length) during.push(s.resources.write('t', (w) => w.put(version('Patient', 'meanwhile'))), s.tenants.create('t2', 5));
  }
  await expect(failing).rejects.toThrow('fails after its rows');
  await Promise.all(during);
  expect(inside).toBeGreaterThan(0);
  expect(await s.resources.read('t', 'Observation', 'o999')).toBeNull();
  expect((await s.resources.read('t', 'Patient', 'before'))?.versionId).toBe(1);
  expect(await s.resources.read('t', 'Patient', 'meanwhile')).not.toBeNull();
  expect(await s.tenants.get('t2')).toEqual({ id: 't2', createdAt: 5 });
  expect(probe.query<{ n: number }, []>("SELECT count(*) AS n FROM resources WHERE type = 'Observation'").get()!.n).toBe(0);
  probe.close();
  await s.close();
});

test('a paced transaction whose concurrent writes reject part-way writes none of them, nor do its writes still waiting after the rollback', async () => {
  const { s, probe } = await pacedStore();
  const ids = Array.from({ length: 300 }, (_, i) => `p${i}`);
  // Promise.all rejects at the first failure while the other writes wait on the pacer: they must not go on writing
  // on the connection once the savepoint is rolled back (in autocommit, or inside the next transaction).
  const failing = s.resources.write('t', (w) => Promise.all(ids.map(async (id, i) => {
    if (i === 5) {
      await w.current('Patient', id);
      throw new Error('one write fails');
    }
    await w.put(version('Patient', id));
  })));
  await expect(failing).rejects.toThrow('one write fails');
  const next = s.resources.write('t', (w) => w.put(version('Patient', 'next')));
  await next;
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  await Bun.sleep(50);
  const count = (sql: string) => probe.query<{ n: number }, []>(sql).get()!.n;
  expect(count("SELECT count(*) AS n FROM resources WHERE type = 'Patient'")).toBe(1);
  expect(await s.resources.read('t', 'Patient', 'p299')).toBeNull();
  expect((await s.resources.read('t', 'Patient', 'next'))?.versionId).toBe(1);
  probe.close();
  await s.close();
});

test('concurrent updates of one paced transaction all commit, with their index rows and history', async () => {
  const { s, probe } = await pacedStore();
  const ids = Array.from({ length: 300 }, (_, i) => `p${i}`);
  await s.resources.write('t', (w) => w.insertNew(ids.map((id) => version('Patient', id))));
  let open = true;
  let inside = 0;
  const updates = s.resources.write('t', (w) => Promise.all(ids.map(async (id) => {
    const current = await w.current('Patient', id);
    await w.put(version('Patient', id, current!.versionId + 1));
  }))).finally(() => (open = false));
  while (open) {
    await new Promise((r) => setImmediate(r));
    if (open && locked(probe)) inside++;
  }
  await updates;
  expect(inside).toBeGreaterThan(0);
  for (const id of ids) expect((await s.resources.read('t', 'Patient', id))?.versionId).toBe(2);
  // Each update replaced its resource's index row (one a resource, none left of version 1).
  expect(probe.query<{ n: number }, []>('SELECT count(*) AS n FROM search_string').get()!.n).toBe(ids.length);
  expect((await s.resources.history('t', { type: 'Patient', id: 'p7', count: 10 })).map((v) => v.versionId)).toEqual([2, 1]);
  probe.close();
  await s.close();
});

test('concurrent writes of one paced transaction keep to the slice: each goes on only after the one before has worked', async () => {
  // An `$import` batch updates its resources concurrently (Promise.all). Let on all at once at a turn, every waiter
  // passed the budget check before any had run its statements, and the whole batch ran in one slice (seconds).
  const budgetMs = 2;
  const { s, probe } = await pacedStore(budgetMs);
  const ids = Array.from({ length: 1000 }, (_, i) => `p${i}`);
  await s.resources.write('t', (w) => w.insertNew(ids.map((id) => version('Patient', id))));
  let turns = 0;
  let open = true;
  const ticking = (async () => {
    while (open) {
      await new Promise((r) => setImmediate(r));
      turns++;
    }
  })();
  // The event-loop turn each update ran in.
  const ranIn = new Set<number>();
  await s.resources.write('t', (w) => Promise.all(ids.map(async (id) => {
    const current = await w.current('Patient', id);
    await w.put(version('Patient', id, current!.versionId + 1));
    ranIn.add(turns);
  })));
  open = false;
  await ticking;
  // 1,000 updates are far more than a slice of 2 ms: they ran over several turns (all in one or two before; an idle
  // machine ran them in 10 turns of about 4 ms, a busy one in dozens).
  expect(ranIn.size).toBeGreaterThan(4);
  for (const id of ids) expect((await s.resources.read('t', 'Patient', id))?.versionId).toBe(2);
  probe.close();
  await s.close();
});

test('a reindex transaction (replaceIndex) is paced too: the event loop turns while it rewrites the index rows, which it rewrites whole', async () => {
  // `serve` reindexes beside its requests; a batch's rows were rewritten in one stretch of the thread.
  const { s, probe } = await pacedStore();
  const ids = Array.from({ length: 1000 }, (_, i) => `p${i}`);
  await s.resources.write('t', (w) => w.insertNew(ids.map((id) => version('Patient', id))));
  let turns = 0;
  let open = true;
  const ticking = (async () => {
    while (open) {
      await new Promise((r) => setImmediate(r));
      turns++;
    }
  })();
  let during = 0;
  await s.resources.write('t', async (w) => {
    const before = turns;
    await w.replaceIndex(ids.map((id) => ({ type: 'Patient', id, index: { ...NO_INDEX_ROWS, strings: [{ param: 'name', value: `${id}-new`, exact: `${id}-new` }] }, compartments: [] })));
    during = turns - before;
  });
  open = false;
  await ticking;
  // A turn every 64 resources at a budget of 0.
  expect(during).toBeGreaterThanOrEqual(10);
  expect(probe.query<{ n: number }, []>("SELECT count(*) AS n FROM search_string WHERE value LIKE '%-new'").get()!.n).toBe(ids.length);
  expect(probe.query<{ n: number }, []>('SELECT count(*) AS n FROM search_string').get()!.n).toBe(ids.length);
  probe.close();
  await s.close();
});

/** Version `versionId` of `type/id` with `n` string index rows `${prefix}0`, `${prefix}1`, ... */
const wide = (type: string, id: string, n: number, prefix: string, versionId = 1): VersionToWrite => ({
  ...version(type, id, versionId),
  index: { ...NO_INDEX_ROWS, strings: Array.from({ length: n }, (_, i) => ({ param: 'item', value: `${prefix}${i}`, exact: `${prefix}${i}` })) },
});

test("a version of many index rows (a CodeSystem's concepts) is written a slice of rows at a time, the transaction open between them, every row stored", async () => {
  const { s, probe } = await pacedStore();
  const n = PACED_ROWS * 5 + 3;
  let open = true;
  let inside = 0;
  const write = s.resources.write('t', (w) => w.put(wide('List', 'big', n, 'v'))).finally(() => (open = false));
  while (open) {
    await new Promise((r) => setImmediate(r));
    if (open && locked(probe)) inside++;
  }
  await write;
  // One turn before the version's statements, then one after each slice of rows (the last before COMMIT): written in one
  // call, its rows let the loop turn once at most while the lock was held.
  expect(inside).toBeGreaterThanOrEqual(5);
  expect(probe.query<{ n: number }, []>('SELECT count(*) AS n FROM search_string').get()!.n).toBe(n);
  probe.close();
  await s.close();
});

test('two writes of one resource in one paced transaction, the first of many rows: the second waits for its rows, and only its own rows are left', async () => {
  const { s, probe } = await pacedStore();
  await s.resources.write('t', (w) => Promise.all([w.put(wide('List', 'l', PACED_ROWS * 4, 'a')), w.put(wide('List', 'l', 3, 'b', 2))]));
  const rows = probe.query<{ value: string }, []>('SELECT value FROM search_string ORDER BY value').all().map((r) => r.value);
  expect(rows).toEqual(['b0', 'b1', 'b2']);
  expect((await s.resources.read('t', 'List', 'l'))?.versionId).toBe(2);
  probe.close();
  await s.close();
});
