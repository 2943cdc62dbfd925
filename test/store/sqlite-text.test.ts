/**
 * SQLite's full-text words outside FTS5 (src/store/sqlite/text.ts): small transactions leave their
 * words in search_text_recent and list what they change in search_text_stale; the mover brings both
 * into FTS5. Searches answer the same before, during and after, through the REST API.
 */
import { Database } from 'bun:sqlite';
import { afterEach, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { BULK_TEXT_ROWS } from '../../src/store/sqlite/text.ts';
import { countSql, DRIVER_MAX_ROWS, DRIVER_TAKE_AT, driverCandidates, SQLITE } from '../../src/store/search-sql.ts';
import type { SearchQuery } from '../../src/store/types.ts';
import { createTestApp } from '../helpers/app.ts';
import { put } from '../helpers/export.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';
import { firstVersions } from '../helpers/versions.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function dbPath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-text-'));
  dirs.push(dir);
  return join(dir, 'c.db');
}

/**
 * Rows in each place words can be once a mover has run: read again as each move commits (a move is a transaction,
 * so nothing waits once one has run), up to MOVE_WAIT_ROUNDS times; what still waits then is what no mover took.
 */
async function placesMoved(path: string) {
  for (let round = 0; round < MOVE_WAIT_ROUNDS; round++) {
    const now = places(path);
    if (now.recent === 0 && now.stale === 0) return now;
    await Bun.sleep(20);
  }
  return places(path);
}
const MOVE_WAIT_ROUNDS = 500;

/** Rows in each place words can be. */
function places(path: string) {
  const db = new Database(path, { readonly: true });
  try {
    const n = (sql: string) => db.query<{ n: number }, []>(sql).get()!.n;
    return {
      recent: n('SELECT COUNT(*) AS n FROM search_text_recent'),
      stale: n('SELECT COUNT(*) AS n FROM search_text_stale'),
      fts: n("SELECT COUNT(*) AS n FROM search_text WHERE search_text MATCH '{content} : \"condition\"'"),
    };
  } finally {
    db.close();
  }
}

const condition = (id: string, text: string): Json => ({ resourceType: 'Condition', id, subject: { reference: 'Patient/p1' }, code: { text: `Condition ${text}` } });

test('words of small writes wait outside FTS5, count as searched, and move in once; stale FTS5 rows never match', async () => {
  const path = dbPath();
  // A mover that never runs on its own.
  const store = createSqliteStore(path, { text: { moveAt: 1e9, moveAfterMs: 1e9 } });
  const t = await createTestApp({ store });
  const api = fhirClient(t, await t.token());
  const found = async (q: string) => ((await api.search(`Condition?${q}`)).entry ?? []).map((e: Json) => e.resource.id).sort();
  try {
    // In bulk: FTS5 directly.
    await t.store.resources.write('t1', (w) =>
      w.insertNew(firstVersions(Array.from({ length: BULK_TEXT_ROWS }, (_, i) => condition(`b${i}`, i % 2 ? 'asthma' : 'rhinitis')), 1_000)));
    expect(places(path)).toEqual({ recent: 0, stale: 0, fts: BULK_TEXT_ROWS });
    // Small writes: a create, and updates of a resource whose words are in FTS5.
    await api.put200(condition('s1', 'asthma'));
    await api.put200(condition('b0', 'eczema'));
    expect((await api.del('Condition/b2')).status).toBe(200);
    expect(places(path)).toEqual({ recent: 2, stale: 2, fts: BULK_TEXT_ROWS });
    const expectAnswers = async () => {
      expect(await found('_content=eczema')).toEqual(['b0']);
      expect(await found('_content=rhinitis&_id=b0,b2,b4')).toEqual(['b4']);
      expect((await found('_content=asthma')).length).toBe(BULK_TEXT_ROWS / 2 + 1);
      expect(await found('_content=asthma&_id=s1')).toEqual(['s1']);
      expect(await found('_content=ecz*,zzz')).toEqual(['b0']);
      expect((await api.search('Condition?_content=condition&_total=accurate')).total).toBe(BULK_TEXT_ROWS);
      expect(await found('patient=p1&_content=eczema')).toEqual(['b0']);
    };
    await expectAnswers();
    // An update of a resource whose words are recent replaces them there.
    await api.put200(condition('s1', 'asthma flare'));
    expect(await found('_content=flare')).toEqual(['s1']);
    expect(places(path)).toEqual({ recent: 2, stale: 2, fts: BULK_TEXT_ROWS });

    // Another instance on the file moves what waits (a process that ended left it), once.
    const other = createSqliteStore(path, { text: { moveAfterMs: 10 } });
    try {
      await other.migrate();
      void other.resources;
      // The old words of b0 and b2 are gone from FTS5; s1 and b0's new words are in.
      expect(await placesMoved(path)).toEqual({ recent: 0, stale: 0, fts: BULK_TEXT_ROWS });
    } finally {
      await other.close();
    }
    await expectAnswers();
    expect(await found('_content=flare')).toEqual(['s1']);
  } finally {
    await t.close();
  }
});

test('the mover runs once enough rows wait, or after a while', async () => {
  const path = dbPath();
  const t = await createTestApp({ store: createSqliteStore(path, { text: { moveAt: 3, moveAfterMs: 60_000 } }) });
  const api = fhirClient(t, await t.token());
  try {
    await api.put200(condition('a', 'one'));
    await api.put200(condition('b', 'two'));
    expect(places(path).recent).toBe(2);
    await api.put200(condition('c', 'three'));
    // The move is queued behind the commit: the next write runs after it.
    await api.put200({ resourceType: 'Patient', id: 'p1' });
    expect(places(path)).toEqual({ recent: 0, stale: 0, fts: 3 });
    expect(((await api.search('Condition?_content=two')).entry ?? []).map((e: Json) => e.resource.id)).toEqual(['b']);
  } finally {
    await t.close();
  }
  const path2 = dbPath();
  const u = await createTestApp({ store: createSqliteStore(path2, { text: { moveAt: 1e9, moveAfterMs: 20 } }) });
  try {
    const api2 = fhirClient(u, await u.token());
    await api2.put200(condition('a', 'one'));
    expect(places(path2).recent).toBe(1);
    // No further write comes: the row waits moveAfterMs, then the timer moves it.
    expect(await placesMoved(path2)).toEqual({ recent: 0, stale: 0, fts: 1 });
    expect(((await api2.search('Condition?_content=one')).entry ?? []).length).toBe(1);
  } finally {
    await u.close();
  }
});

test('a word common in one type but rare in another: the rare type is driven by its own few matches, and counted right', async () => {
  const path = dbPath();
  const t = await createTestApp({ store: createSqliteStore(path) });
  const api = fhirClient(t, await t.token());
  try {
    const many = DRIVER_MAX_ROWS + 100;
    await t.store.resources.write('t1', (w) =>
      w.insertNew(firstVersions(Array.from({ length: many }, (_, i) => condition(`c${i}`, 'diabetes')), 1_000)));
    for (const id of ['o1', 'o2', 'o3']) await api.put200({ resourceType: 'Observation', id, status: 'final', code: { text: 'Diabetes screening' } });
    const query: SearchQuery = { type: 'Observation', where: [{ kind: 'text', field: 'content', values: [[{ word: 'diabetes', prefix: false }]] }], sort: [], count: 10 };
    const [candidate] = driverCandidates(SQLITE, 't1', query);
    const db = new Database(path, { readonly: true });
    try {
      const { sql, values } = candidate!.count(DRIVER_TAKE_AT + 1);
      // Counted among Observations only (the words of the other types' resources are in the same table).
      expect(db.query<{ n: number }, (string | number)[]>(sql).get(...values)!.n).toBe(3);
    } finally {
      db.close();
    }
    // A count over the whole type reads the matching rows once, as a set.
    expect(countSql(SQLITE, 't1', { ...query, where: [...query.where!, { kind: 'token', param: 'status', values: [{ value: 'final' }] }] }, {}).sql).toContain('r.pk IN (SELECT t.rowid');
    expect((await api.search('Observation?_content=diabetes&_total=accurate')).total).toBe(3);
    expect((await api.search('Observation?_content=diabetes&status=final&_total=accurate')).total).toBe(3);
    expect((await api.search('Condition?_content=diabetes&_total=accurate&_count=1')).total).toBe(many);
    expect((await api.search('Condition?_content=diabetes&subject=Patient/p1&_total=accurate&_count=1')).total).toBe(many);
  } finally {
    await t.close();
  }
});

test('two instances on one file: small writes of each, updates by the other and both movers keep one answer', async () => {
  const path = dbPath();
  const a = await createTestApp({ store: createSqliteStore(path, { text: { moveAt: 2, moveAfterMs: 10 } }) });
  const bStore = createSqliteStore(path, { text: { moveAt: 1e9, moveAfterMs: 1e9 } });
  await bStore.migrate();
  const b = { ...a, store: bStore } as typeof a;
  try {
    const api = fhirClient(a, await a.token());
    const ids = async (q: string) => ((await api.search(`Condition?${q}`)).entry ?? []).map((e: Json) => e.resource.id).sort();
    const idsOnB = async (word: string) =>
      (await bStore.resources.search('t1', { type: 'Condition', where: [{ kind: 'text', field: 'content', values: [[{ word, prefix: false }]] }], sort: [], count: 100 })).map((v) => v.id).sort();
    for (let round = 0; round < 5; round++) {
      await api.put200(condition('x', `alpha${round}`));
      await put(b, condition('x', `beta${round}`) as never);
      await put(b, condition(`y${round}`, 'gamma') as never);
      expect(await ids(`_content=beta${round}`)).toEqual(['x']);
      expect(await ids(`_content=alpha${round}`)).toEqual([]);
      expect((await ids('_content=gamma')).length).toBe(round + 1);
      expect(await idsOnB(`beta${round}`)).toEqual(['x']);
      expect(await idsOnB(`alpha${round}`)).toEqual([]);
      await Bun.sleep(20);
    }
    // A's next write starts its mover, which takes B's rows too.
    await api.put200(condition('z', 'delta'));
    expect(await placesMoved(path)).toEqual({ recent: 0, stale: 0, fts: 7 });
    expect(await idsOnB('beta4')).toEqual(['x']);
  } finally {
    await a.close();
    await bStore.close();
  }
});

/**
 * Each `BEGIN IMMEDIATE` a connection of this process asks SQLite for, with the connection's busy timeout at the
 * time (what SQLite's busy handler would sleep for, blocking the thread), and whether it found the lock taken.
 */
function watchImmediateBegins() {
  const exec = Database.prototype.exec;
  const seen: { busyTimeout: number; busy: boolean }[] = [];
  let refused!: () => void;
  const firstRefusal = new Promise<void>((r) => (refused = r));
  Database.prototype.exec = function (this: Database, sql: string, ...rest: unknown[]) {
    if (sql !== 'BEGIN IMMEDIATE') return (exec as (...a: unknown[]) => unknown).call(this, sql, ...rest);
    const busyTimeout = this.query<{ timeout: number }, []>('PRAGMA busy_timeout').get()!.timeout;
    try {
      const result = (exec as (...a: unknown[]) => unknown).call(this, sql, ...rest);
      seen.push({ busyTimeout, busy: false });
      return result;
    } catch (err) {
      const busy = /^SQLITE_BUSY/.test(String((err as { code?: unknown }).code));
      seen.push({ busyTimeout, busy });
      if (busy) refused();
      throw err;
    }
  } as typeof exec;
  return { seen, firstRefusal, restore: () => void (Database.prototype.exec = exec) };
}

test('the mover waits for no lock: another connection of the thread holding it across an await neither blocks the thread nor loses the move', async () => {
  // The mover must come due while `b` holds the lock; on a loaded machine it may run before `b` takes it, when
  // the run proves nothing and is made again on a new file.
  for (let attempt = 1; ; attempt++) {
    const path = dbPath();
    const a = createSqliteStore(path, { text: { moveAt: 1e9, moveAfterMs: 100 } });
    const b = createSqliteStore(path, { text: { moveAt: 1e9, moveAfterMs: 1e9 } });
    await a.migrate();
    await b.migrate();
    const begins = watchImmediateBegins();
    try {
      // A small write of `a`: its words wait outside FTS5, and its mover runs 100 ms later.
      await a.resources.write('t1', (w) => w.insertNew(firstVersions([condition('c1', 'asthma')])));
      expect(places(path).recent).toBe(1);
      // Meanwhile `b` holds the write lock across an await (its transaction waits on `release`).
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const writing = b.resources.write('t1', async (w) => {
        await w.insertNew(firstVersions([condition('c2', 'gout')]));
        locked();
        await held;
      });
      await isLocked;
      if (places(path).recent === 0 && attempt < 5) {
        release();
        await writing;
        continue;
      }
      expect(places(path).recent).toBe(1);
      // The mover's turn comes while the lock is held. It asks for the lock with a busy timeout of 0, so SQLite
      // refuses at once: waiting for it (the busy handler sleeps, up to the 10 s busy timeout) would stall this
      // thread, and `b` with it, and could never succeed.
      await begins.firstRefusal;
      expect(begins.seen.filter((s) => s.busy)).toEqual([{ busyTimeout: 0, busy: true }]);
      expect(places(path).recent).toBe(1);
      release();
      await writing;
      // Tried again once the lock is free: both writes' words end up in FTS5.
      for (let i = 0; i < 100 && places(path).recent > 0; i++) await Bun.sleep(20);
      expect(places(path)).toEqual({ recent: 0, stale: 0, fts: 2 });
      expect(begins.seen.at(-1)).toEqual({ busyTimeout: 0, busy: false });
      return;
    } finally {
      begins.restore();
      await a.close();
      await b.close();
    }
  }
});

test('a reindex writes the words with FTS5 eager merging off, and the analysis after it merges them once', async () => {
  const path = dbPath();
  const store = createSqliteStore(path, { text: { moveAt: 1e9, moveAfterMs: 1e9 } });
  const t = await createTestApp({ store });
  const api = fhirClient(t, await t.token());
  const count = async (q: string) => (await api.search(`Condition?${q}&_summary=count`)).total;
  const state = () => {
    const db = new Database(path, { readonly: true });
    try {
      return {
        due: db.query<{ value: number }, []>("SELECT value FROM index_state WHERE name = 'text_merge_due'").get()?.value ?? 0,
        deletemerge: db.query<{ v: number }, []>("SELECT v FROM search_text_config WHERE k = 'deletemerge'").get()?.v,
        segments: db.query<{ n: number }, []>('SELECT COUNT(*) AS n FROM search_text_data').get()!.n,
      };
    } finally {
      db.close();
    }
  };
  try {
    const ids = Array.from({ length: 3 * BULK_TEXT_ROWS }, (_, i) => `r${i}`);
    await t.store.resources.write('t1', (w) => w.insertNew(firstVersions(ids.map((id, i) => condition(id, i % 3 ? 'asthma' : 'rhinitis')), 1_000)));
    expect(state()).toMatchObject({ due: 0 });
    const { reindex } = await import('../../src/fhir/reindex.ts');
    // Three transactions of a reindex: each deletes its resources' words and writes them again.
    const result = await reindex(t.store, { force: true, batch: BULK_TEXT_ROWS });
    expect(result).toEqual({ ran: true, done: ids.length, rebuilt: ids.length });
    // The reindex's analysis merged the index: nothing due, the default restored, the answers unchanged.
    expect(state()).toMatchObject({ due: 0, deletemerge: 10 });
    expect(await count('_content=rhinitis')).toBe(BULK_TEXT_ROWS);
    expect(await count('_content=asthma')).toBe(2 * BULK_TEXT_ROWS);

    // A reindex interrupted before its analysis leaves the merge due, and the answers right meanwhile.
    await t.store.resources.write('t1', async (w) => {
      const page = await t.store.resources.indexing.page(0, BULK_TEXT_ROWS);
      const { storedIndex } = await import('../../src/fhir/indexer.ts');
      await w.replaceIndex(page.map((r) => ({ type: r.type, id: r.id, index: storedIndex(JSON.parse(r.content)), compartments: [] })));
    });
    const before = state();
    expect(before).toMatchObject({ due: 1, deletemerge: 10 });
    expect(await count('_content=rhinitis')).toBe(BULK_TEXT_ROWS);
    expect(await t.store.resources.indexing.analyze()).toEqual([]);
    const after = state();
    expect(after).toMatchObject({ due: 0, deletemerge: 10 });
    expect(after.segments).toBeLessThan(before.segments);
    expect(await count('_content=rhinitis')).toBe(BULK_TEXT_ROWS);
    expect(await count('_content=asthma')).toBe(2 * BULK_TEXT_ROWS);
  } finally {
    await t.close();
  }
});
