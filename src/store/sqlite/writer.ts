import type { Database, Statement } from 'bun:sqlite';
import type { CurrentVersion, IndexTable, MeasuredVersion, ReindexTable, ResourceVersion, ResourceWriter, VersionToWrite } from '../types.ts';
import { CLAIM_KEPT_MS, MEASURED_TEXT_BYTES, EVENTS_KEPT, inKeyOrder, StoreConflictError } from '../types.ts';
import { columnsOf, INDEX_TABLES, onlyTables, rowsOf } from '../index-tables.ts';
import type { KeyOf } from '../search-keys.ts';
import { textScope } from '../text-scope.ts';
import { UNPACED, type Pacer } from './pacer.ts';
import { BULK_TEXT_ROWS, TEXT_MERGE_DUE } from './text.ts';
import { DB_NOW } from './export-jobs.ts';
import { utf8LengthOfContent } from './text-length.ts';

/** Moves a tenant's write mark (ResourceRepo.writeMark) by one: in every transaction that changes its resources or index rows. */
export const MARK_WRITE = 'INSERT INTO tenant_writes (tenant, shard, n) VALUES (?, 0, 1) ON CONFLICT (tenant, shard) DO UPDATE SET n = n + 1';

/**
 * A current row as a writer knows it; `content` only once current() (or a write) has needed it, `bytes` (its length in
 * UTF-8, null when the database cannot tell it without reading it: text-length.ts) when it was looked up.
 */
type CurrentRow = { pk: number; version_id: number; last_updated: number; deleted: number; content?: string; bytes?: number | null };
/** A version as vread() selects it. */
type VersionRow = { type: string; id: string; version_id: number; last_updated: number; deleted: number; content: string };
type Value = string | number;
/** A version as its index, compartment and word rows need it: a reindex writes those rows and no version (nor its method). */
type IndexedVersion = Omit<VersionToWrite, 'method'>;

/** Index and compartment rows per INSERT statement in bulk creation (4 values a row, mostly). */
const ROWS_PER_INSERT = 64;

/**
 * Resources insertNew() inserts between two looks at its pacer (about 0.7 ms of work); a slice then writes
 * their index, compartment and word rows, about as long again, so a slice lasts up to about twice its budget.
 */
const INSERT_STEP = 64;

/**
 * Index and compartment rows put() writes between two looks at its pacer, when a version has more (a CodeSystem of
 * 100,000 concepts has as many `code` rows: written in one call they held the thread 60-130 ms).
 */
export const PACED_ROWS = ROWS_PER_INSERT * 32;

/**
 * Multi-row `INSERT OR IGNORE INTO table (cols) VALUES (...), (...)` statements (`verb` INSERT for a
 * virtual table, which has no conflict clause), by row count; values are collected flat and written
 * `perStatement` rows at a time (the rest in one shorter statement). An FTS5 table takes one row a
 * statement: SQLite writes a multi-row VALUES into a virtual table about three times slower
 * (docs/PERFORMANCE.md, seventeenth session), where a B-tree table takes 64 a third faster than one.
 */
function rowInserter(db: Database, table: string, cols: string[], verb = 'INSERT OR IGNORE', perStatement = ROWS_PER_INSERT) {
  const statements = new Map<number, Statement>();
  const one = `(${cols.map(() => '?').join(', ')})`;
  const statement = (rows: number) => {
    let s = statements.get(rows);
    if (!s) statements.set(rows, (s = db.prepare(`${verb} INTO ${table} (${cols.join(', ')}) VALUES ${Array(rows).fill(one).join(', ')}`)));
    return s;
  };
  return (values: Value[]) => {
    const per = perStatement * cols.length;
    let at = 0;
    for (; at + per <= values.length; at += per) statement(perStatement).run(...values.slice(at, at + per));
    if (at < values.length) statement((values.length - at) / cols.length).run(...values.slice(at));
  };
}

/**
 * A transaction's writer. The transaction holds SQLite's write lock, so rows change only through this
 * writer: current rows it has looked up or written are remembered, and `seq` values are counted here
 * and stored once, by finish() before COMMIT. `insertNew()` inserts without a lookup (the unique key
 * finds an existing row) and writes index and compartment rows many per statement. `keyOf` gives
 * each index row its key (search_keys), creating it in this transaction when it is new. `pacer` lets the
 * event loop turn between slices of a long transaction (pacer.ts): insertNew() and replaceIndex() ask it every
 * INSERT_STEP resources, current() and put() before their statements; the transaction stays open meanwhile.
 */
export function createWriter(
  db: Database, tenant: string, keyOf: KeyOf, search: ResourceWriter['search'], pacer: Pacer = UNPACED,
): ResourceWriter & { finish(): number; textWaiting(): number; close(): void } {
  // Closed once the transaction's function has settled (close()): a call still under way then (one of the writes it ran
  // with Promise.all, waiting on the pacer, after another rejected) would otherwise go on writing on this connection after
  // the savepoint was rolled back, in autocommit or inside the next transaction.
  let closed = false;
  const ended = () => new Error('The transaction this writer belongs to has ended: nothing more is written through it');
  const q = {
    locate: db.query<CurrentRow, [string, string, string]>(
      `SELECT pk, version_id, last_updated, deleted, ${utf8LengthOfContent(db)} AS bytes FROM resources WHERE tenant = ? AND type = ? AND id = ?`,
    ),
    current: db.query<CurrentRow, [string, string, string]>(
      'SELECT pk, version_id, last_updated, deleted, content FROM resources WHERE tenant = ? AND type = ? AND id = ?',
    ),
    vreadCurrent: db.query<VersionRow, [string, string, string, number]>(
      'SELECT type, id, version_id, last_updated, deleted, content FROM resources WHERE tenant = ? AND type = ? AND id = ? AND version_id = ?',
    ),
    vreadHistory: db.query<VersionRow, [string, string, string, number]>(
      'SELECT type, id, version_id, last_updated, deleted, content FROM resource_history WHERE tenant = ? AND type = ? AND id = ? AND version_id = ?',
    ),
    readSeq: db.query<{ value: number }, []>("SELECT value FROM counters WHERE name = 'resource_seq'"),
    storeSeq: db.query("UPDATE counters SET value = ? WHERE name = 'resource_seq'"),
    markWrite: db.query(MARK_WRITE),
    toHistory: db.query(
      'INSERT INTO resource_history (tenant, type, id, version_id, last_updated, deleted, seq, content, method) ' +
        'SELECT tenant, type, id, version_id, last_updated, deleted, seq, content, method FROM resources WHERE pk = ?',
    ),
    update: db.query(
      'UPDATE resources SET version_id = ?, last_updated = ?, deleted = ?, seq = ?, content = ?, method = ? WHERE pk = ?',
    ),
    insert: db.query(
      'INSERT INTO resources (tenant, type, id, version_id, last_updated, deleted, seq, content, method) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ' +
        'ON CONFLICT (tenant, type, id) DO NOTHING',
    ),
    clearCompartments: db.query('DELETE FROM compartments WHERE res = ?'),
    patientsOf: db.query<{ id: string; patient: string }, [string, string, string]>(
      'SELECT x.id, c.patient FROM json_each(?3) i CROSS JOIN resources x ON x.tenant = ?1 AND x.type = ?2 AND x.id = i.value ' +
        'CROSS JOIN compartments c ON c.res = x.pk WHERE x.deleted = 0',
    ),
  };
  // Full-text words (sqlite/text.ts): bulk calls write FTS5 (search_text, rowid = pk); small ones the
  // recent rows, and mark what they change as stale. `textWaiting` counts the rows left for the mover.
  let textWaiting = 0;
  const clearText = (pk: number, bulk: boolean) => {
    const wasRecent = db.query('DELETE FROM search_text_recent WHERE res = ?').run(pk).changes === 1;
    if (bulk) {
      db.query('DELETE FROM search_text WHERE rowid = ?').run(pk);
      db.query('DELETE FROM search_text_stale WHERE res = ?').run(pk);
    } else if (!wasRecent) {
      // A resource with a recent row is stale already if FTS5 holds older words of it.
      textWaiting += db.query('INSERT OR IGNORE INTO search_text_stale (res) VALUES (?)').run(pk).changes;
    }
  };
  const addIndexed = rowInserter(db, 'search_text', ['rowid', 'narrative', 'content', 'scope'], 'INSERT', 1);
  const addRecent = rowInserter(db, 'search_text_recent', ['res', 'narrative', 'content', 'scope'], 'INSERT');
  const addText = (values: Value[], bulk: boolean) => {
    if (!values.length) return;
    if (bulk) return addIndexed(values);
    addRecent(values);
    textWaiting += values.length / 4;
  };
  const scopes = new Map<string, string>();
  const textValues = (v: IndexedVersion, pk: number, out: Value[]) => {
    if (!v.index.text) return;
    let scope = scopes.get(v.type);
    if (scope === undefined) scopes.set(v.type, (scope = textScope(tenant, v.type)));
    out.push(pk, v.index.text.narrative, v.index.text.content, scope);
  };
  // Prepared on first use (db.query caches them): a database part-way through its migrations has not every table.
  const clearIndex = (pk: number) => INDEX_TABLES.forEach((t) => db.query(`DELETE FROM ${t.table} WHERE res = ?`).run(pk));
  const columns = INDEX_TABLES.map(columnsOf);
  const inserters = INDEX_TABLES.map((t, i) => rowInserter(db, t.table, ['res', 'k', ...columns[i]!]));
  const addIndex = (values: Value[][]) => inserters.forEach((insert, i) => values[i]!.length && insert(values[i]!));
  const newIndexValues = (): Value[][] => INDEX_TABLES.map(() => []);
  const addCompartments = rowInserter(db, 'compartments', ['res', 'tenant', 'patient', 'type']);
  const known = new Map<string, CurrentRow | null>();
  // Existence checks and reindexing never read the stored text (a reference check would read every target's).
  function lookup(type: string, id: string): CurrentRow | null {
    const key = `${type}/${id}`;
    let row = known.get(key);
    if (row === undefined) known.set(key, (row = q.locate.get(tenant, type, id)));
    return row;
  }
  /** lookup() with the stored text; the write lock keeps both as read until COMMIT. */
  function lookupContent(type: string, id: string): CurrentRow | null {
    const row = lookup(type, id);
    if (row === null || row.content !== undefined) return row;
    const read = q.current.get(tenant, type, id);
    known.set(`${type}/${id}`, read);
    return read;
  }
  let seq: number | undefined;
  let written = 0;
  /** Whether replaceIndex changed index rows (a reindex), which moves the tenant's write mark as a version does. */
  let reindexed = false;
  /**
   * A put() writing its rows with turns of the event loop between them (pacedRows): another put() of this
   * transaction waits for it, so that no write of the same resource clears or adds rows in between.
   */
  let rowsUnderWay: Promise<void> | undefined;

  /** Inserts `v` unless its resource has a row; returns the new row's pk, or undefined. */
  function insert(v: VersionToWrite): number | undefined {
    if (known.get(`${v.type}/${v.id}`)) return undefined;
    const next = (seq ?? q.readSeq.get()!.value) + 1;
    const r = q.insert.run(tenant, v.type, v.id, v.versionId, v.lastUpdated, v.deleted ? 1 : 0, next, v.content, v.method);
    if (r.changes !== 1) return undefined;
    seq = next;
    written++;
    return Number(r.lastInsertRowid);
  }

  function remember(v: VersionToWrite, pk: number): void {
    known.set(`${v.type}/${v.id}`, { pk, version_id: v.versionId, last_updated: v.lastUpdated, deleted: v.deleted ? 1 : 0, content: v.content });
  }

  /**
   * Asks the pacer every INSERT_STEP items of a reindex (replaceIndex) whether to let the event loop turn, first
   * writing the rows collected (`rows`): a reindex batch beside `serve` (500 resources) held the thread for
   * 0.2-0.65 s at a time otherwise.
   */
  async function paceItems(i: number, rows: () => void): Promise<void> {
    if (i === 0 || i % INSERT_STEP !== 0 || !pacer.due()) return;
    rows();
    const turn = pacer.pace();
    if (turn) await turn;
    if (closed) throw ended();
  }

  /** replaceIndex of the rows of `tables` alone: the compartments stay, and the words unless `search_text` is one. */
  async function replaceTables(items: Parameters<ResourceWriter['replaceIndex']>[0], tables: readonly ReindexTable[]): Promise<void> {
    const specs = INDEX_TABLES.filter((t) => tables.includes(t.table));
    const words = tables.includes('search_text');
    // The words go to FTS5 directly, their merge left to after the run (as replaceIndex's of every row).
    if (words) db.exec("INSERT INTO search_text (search_text, rank) VALUES ('deletemerge', 0)");
    let index = newIndexValues();
    let text: Value[] = [];
    const rows = () => {
      addIndex(index);
      addText(text, true);
      index = newIndexValues();
      text = [];
    };
    for (const [i, item] of items.entries()) {
      await paceItems(i, rows);
      const row = lookup(item.type, item.id);
      if (!row || row.deleted || (item.versionId !== undefined && row.version_id !== item.versionId)) continue;
      for (const t of specs) db.query(`DELETE FROM ${t.table} WHERE res = ?`).run(row.pk);
      const v = { ...item, index: onlyTables(item.index, tables), compartments: [], versionId: row.version_id, lastUpdated: row.last_updated, deleted: false, content: '' };
      entryValues(v, row.pk, index, []);
      if (words) {
        clearText(row.pk, true);
        textValues(v, row.pk, text);
      }
    }
    rows();
    if (words) {
      db.exec("INSERT INTO search_text (search_text, rank) VALUES ('deletemerge', 10)");
      db.exec(`INSERT OR REPLACE INTO index_state (name, value) VALUES ('${TEXT_MERGE_DUE}', 1)`);
    }
  }

  /**
   * The index, compartment and word rows of a slice of versions (`add`), written many per statement by `flush`
   * (at the slice's end, and before the pacer lets the event loop turn); `bulkText`: the words go to FTS5 at once.
   */
  function sliceRows(bulkText: boolean) {
    let index = newIndexValues();
    let compartments: Value[] = [];
    let text: Value[] = [];
    return {
      add(v: IndexedVersion, pk: number): void {
        entryValues(v, pk, index, compartments);
        textValues(v, pk, text);
      },
      flush(): void {
        addIndex(index);
        addCompartments(compartments);
        addText(text, bulkText);
        index = newIndexValues();
        compartments = [];
        text = [];
      },
    };
  }

  /**
   * Writes `index` and `compartments` (entryValues) PACED_ROWS rows at a time, asking the pacer between two: the
   * transaction stays open meanwhile (other writes of it wait, rowsUnderWay), so it still commits or rolls back whole.
   */
  async function pacedRows(index: Value[][], compartments: Value[]): Promise<void> {
    const tables: [insert: (values: Value[]) => void, values: Value[], width: number][] = [
      ...inserters.map((insert, i) => [insert, index[i]!, 2 + columns[i]!.length] as [(values: Value[]) => void, Value[], number]),
      [addCompartments, compartments, 4],
    ];
    for (const [insert, values, width] of tables) {
      const step = PACED_ROWS * width;
      for (let at = 0; at < values.length; at += step) {
        insert(values.length <= step ? values : values.slice(at, at + step));
        const turn = pacer.pace();
        if (turn) await turn;
        if (closed) throw ended();
      }
    }
  }

  /** Flat index and compartment row values of `v` stored under `pk`. */
  function entryValues(v: IndexedVersion, pk: number, index: Value[][], compartments: Value[]): void {
    INDEX_TABLES.forEach((t, i) => {
      const out = index[i]!;
      const cols = columns[i]!;
      for (const e of rowsOf(v.index, t)) {
        out.push(pk, keyOf(t, v.type, e));
        for (const c of cols) out.push(e[c] ?? '');
      }
    });
    for (const p of v.compartments) compartments.push(pk, tenant, p, v.type);
  }

  const writer: ResourceWriter & { finish(): number; textWaiting(): number } = {
    async current(type, id): Promise<CurrentVersion | null> {
      const turn = pacer.pace();
      if (turn) await turn;
      if (closed) throw ended();
      const row = lookupContent(type, id);
      return row ? { versionId: row.version_id, lastUpdated: row.last_updated, deleted: row.deleted === 1, content: row.content! } : null;
    },
    async measured(type, id): Promise<MeasuredVersion | null> {
      const turn = pacer.pace();
      if (turn) await turn;
      if (closed) throw ended();
      let row = lookup(type, id);
      if (row === null) return null;
      const head = { versionId: row.version_id, lastUpdated: row.last_updated, deleted: row.deleted === 1 };
      if (row.content === undefined && typeof row.bytes === 'number' && row.bytes >= MEASURED_TEXT_BYTES) return { ...head, bytes: row.bytes };
      row = lookupContent(type, id)!;
      return { ...head, content: row.content! };
    },
    async exists(type, id) {
      const row = lookup(type, id);
      return !!row && row.deleted === 0;
    },
    // The transaction holds the write lock: indexed lookups on this connection, no round trips to batch.
    async existing(keys) {
      return keys.map(({ type, id }) => {
        const row = lookup(type, id);
        return !!row && row.deleted === 0;
      });
    },
    async present(type, ids) {
      return [...new Set(ids)].filter((id) => lookup(type, id) !== null);
    },
    async compartmentPatients(type, ids) {
      return ids.length ? q.patientsOf.all(tenant, type, JSON.stringify([...new Set(ids)])) : [];
    },
    async vread(type, id, versionId) {
      const row = q.vreadCurrent.get(tenant, type, id, versionId) ?? q.vreadHistory.get(tenant, type, id, versionId);
      return row ? { type: row.type, id: row.id, versionId: row.version_id, lastUpdated: row.last_updated, deleted: row.deleted === 1, content: row.content } : null;
    },
    /** Stores the seq counter and moves the tenant's write mark (ResourceRepo.writeMark); returns how many versions this transaction wrote. */
    finish() {
      if (seq !== undefined) q.storeSeq.run(seq);
      if (written > 0 || reindexed) q.markWrite.run(tenant);
      return written;
    },
    /** Rows this writer left in search_text_recent and search_text_stale. */
    textWaiting: () => textWaiting,
    async put(v: VersionToWrite) {
      const turn = pacer.pace();
      if (turn) await turn;
      if (closed) throw ended();
      while (rowsUnderWay !== undefined) {
        await rowsUnderWay;
        if (closed) throw ended();
      }
      const existing = lookup(v.type, v.id);
      if (existing && v.versionId <= existing.version_id) {
        // Equal or older version numbers would corrupt history (its key is type/id/version).
        throw new StoreConflictError(`${v.type}/${v.id}: version ${v.versionId} is not newer than stored version ${existing.version_id}`);
      }
      const next = (seq ?? q.readSeq.get()!.value) + 1;
      let pk: number;
      if (existing) {
        pk = existing.pk;
        q.toHistory.run(pk);
        q.update.run(v.versionId, v.lastUpdated, v.deleted ? 1 : 0, next, v.content, v.method, pk);
        written++;
        clearIndex(pk);
        clearText(pk, false);
        q.clearCompartments.run(pk);
      } else {
        const created = insert(v);
        if (created === undefined) throw new StoreConflictError(`${v.type}/${v.id} was created during the write`);
        pk = created;
      }
      seq = next;
      remember(v, pk);
      if (v.deleted) return;
      const index = newIndexValues();
      const compartments: Value[] = [];
      entryValues(v, pk, index, compartments);
      if (index.reduce((n, values, i) => n + values.length / (2 + columns[i]!.length), compartments.length / 4) <= PACED_ROWS) {
        addIndex(index);
        addCompartments(compartments);
      } else {
        const rows = pacedRows(index, compartments);
        rowsUnderWay = rows.catch(() => {});
        try {
          await rows;
        } finally {
          rowsUnderWay = undefined;
        }
      }
      const text: Value[] = [];
      textValues(v, pk, text);
      addText(text, false);
    },
    async insertNew(versions) {
      // Whether the words go to FTS5 at once is decided once for the call (by the versions given), not per slice.
      const bulkText = versions.reduce((n, v) => n + (!v.deleted && v.index.text ? 1 : 0), 0) >= BULK_TEXT_ROWS;
      const inserted: boolean[] = [];
      // A slice's index, compartment and word rows are written at its end, many per statement.
      const rows = sliceRows(bulkText);
      for (const [i, v] of versions.entries()) {
        if (i > 0 && i % INSERT_STEP === 0 && pacer.due()) {
          rows.flush();
          const turn = pacer.pace();
          if (turn) await turn;
          if (closed) throw ended();
        }
        const pk = insert(v);
        inserted.push(pk !== undefined);
        if (pk === undefined) continue;
        remember(v, pk);
        if (!v.deleted) rows.add(v, pk);
      }
      rows.flush();
      return inserted;
    },
    async notify(notifications, now) {
      const add = db.query('INSERT INTO subscription_notifications (tenant, subscription_id, type, resource_id, version_id, created_at, event, event_number) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
      const count = db.query<{ events: number }, [number, string, string]>('UPDATE subscription_state SET events = events + 1, last_notified_at = ? WHERE tenant = ? AND id = ? RETURNING events');
      const keep = db.query('INSERT INTO subscription_events (tenant, subscription_id, event_number, type, resource_id, version_id, event, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
      const forget = db.query('DELETE FROM subscription_events WHERE tenant = ? AND subscription_id = ? AND event_number <= ?');
      const previous = db.query<{ created_at: number }, [string, string, number]>('SELECT created_at FROM subscription_events WHERE tenant = ? AND subscription_id = ? AND event_number = ?');
      const owner = db.query<{ owner: string }, [string, string]>('SELECT owner FROM subscription_state WHERE tenant = ? AND id = ?');
      const counted = db.query('UPDATE subscription_state SET events = events + 1 WHERE tenant = ? AND id = ?');
      for (const n of notifications) {
        // A topic event is numbered by its subscription's count, moved here (under the write lock), and kept for $events;
        // stamped no earlier than the event before it (`now` was taken before the write waited for the lock).
        const numbered = n.event !== undefined && n.event !== 'handshake' && n.event !== 'heartbeat';
        const number = numbered ? (count.get(now, tenant, n.subscriptionId)?.events ?? null) : null;
        const at = number === null || number === 1 ? now : Math.max(now, previous.get(tenant, n.subscriptionId, number - 1)?.created_at ?? 0);
        // Matched with another owner's reach than the one stored (another process's set, read before an activation committed): not queued.
        const otherOwner = n.matchedFor !== undefined && owner.get(tenant, n.subscriptionId)?.owner !== n.matchedFor;
        if (n.unsent !== true && !otherOwner) {
          add.run(tenant, n.subscriptionId, n.type, n.id, n.versionId, at, n.event ?? null, number);
          // A criteria Subscription's event (a topic's was counted as it was numbered), for $status.
          if (n.event === undefined && n.matchedFor !== undefined) counted.run(tenant, n.subscriptionId);
        }
        if (number === null) continue;
        keep.run(tenant, n.subscriptionId, number, n.type, n.id, n.versionId, n.event!, at);
        if (number > EVENTS_KEPT) forget.run(tenant, n.subscriptionId, number - EVENTS_KEPT);
      }
    },
    async ownSubscription(id, owner, channel, heartbeat, restart) {
      // An activation anew, or by another owner than the one stored: what waits was matched with the earlier owner's reach.
      db.query(
        `DELETE FROM subscription_notifications WHERE tenant = ? AND subscription_id = ?
         AND (? OR EXISTS (SELECT 1 FROM subscription_state WHERE tenant = ? AND id = ? AND owner <> ?))`,
      ).run(tenant, id, restart ? 1 : 0, tenant, id, owner);
      db.query(
        `INSERT INTO subscription_state (tenant, id, owner, channel, heartbeat_ms, last_notified_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (tenant, id) DO UPDATE SET owner = excluded.owner, channel = excluded.channel, failures = 0, next_attempt_at = 0, last_error = NULL,
           heartbeat_ms = excluded.heartbeat_ms, last_notified_at = excluded.last_notified_at`,
      ).run(tenant, id, owner, channel, heartbeat?.periodMs ?? 0, heartbeat?.now ?? 0);
    },
    // On this connection, in the transaction (resources.ts searchInWrite).
    search,
    async subscriptionOwned(id) {
      return db.query('SELECT 1 FROM subscription_state WHERE tenant = ? AND id = ?').get(tenant, id) !== null;
    },
    // The write holds SQLite's one write lock (BEGIN IMMEDIATE): activations count one after the other already.
    async lockActivations() {},
    async handshakeWaiting(id) {
      return db.query("SELECT 1 FROM subscription_notifications WHERE tenant = ? AND subscription_id = ? AND event = 'handshake' LIMIT 1").get(tenant, id) !== null;
    },
    async holdImportLease(job, owner, now, leaseMs) {
      return db
        .query(`UPDATE import_jobs SET lease_until = ${DB_NOW} + ?, updated_at = ? WHERE id = ? AND state = 'in-progress' AND lease_owner = ?`)
        .run(leaseMs, now, job, owner).changes > 0;
    },
    async endSubscription(id) {
      for (const table of ['subscription_notifications', 'subscription_events']) db.query(`DELETE FROM ${table} WHERE tenant = ? AND subscription_id = ?`).run(tenant, id);
      db.query('DELETE FROM subscription_state WHERE tenant = ? AND id = ?').run(tenant, id);
    },
    async claim(claims, now) {
      for (const { key, seen } of inKeyOrder(claims)) {
        if (seen === 0) {
          if (db.query('INSERT INTO condition_claims (tenant, key, n, at) VALUES (?, ?, 1, ?) ON CONFLICT DO NOTHING').run(tenant, key, now).changes !== 1) return false;
          db.query('DELETE FROM condition_claims WHERE (tenant, key) IN (SELECT tenant, key FROM condition_claims WHERE at < ? ORDER BY at LIMIT 8)').run(now - CLAIM_KEPT_MS);
        } else if (db.query('UPDATE condition_claims SET n = n + 1, at = ? WHERE tenant = ? AND key = ? AND n = ?').run(now, tenant, key, seen).changes !== 1) {
          return false;
        }
      }
      return true;
    },
    async replaceIndex(items, tables) {
      if (!items.length) return;
      reindexed = true;
      if (tables) return replaceTables(items, tables);
      // A reindex deletes and writes again every resource's words. FTS5 rewrites a segment once a
      // tenth of its rows are deleted (`deletemerge`), so the segments of a large index were rewritten
      // again and again: about 40% of a reindex. The merge is left to one `optimize` after the run
      // (indexing.analyze), which index_state marks as due; 10 is FTS5's default.
      db.exec("INSERT INTO search_text (search_text, rank) VALUES ('deletemerge', 0)");
      const rows = sliceRows(true);
      for (const [i, item] of items.entries()) {
        await paceItems(i, rows.flush);
        const row = lookup(item.type, item.id);
        if (!row || row.deleted || (item.versionId !== undefined && row.version_id !== item.versionId)) continue;
        clearIndex(row.pk);
        clearText(row.pk, true);
        q.clearCompartments.run(row.pk);
        const v = { ...item, versionId: row.version_id, lastUpdated: row.last_updated, deleted: false, content: '' };
        rows.add(v, row.pk);
      }
      rows.flush();
      db.exec("INSERT INTO search_text (search_text, rank) VALUES ('deletemerge', 10)");
      db.exec(`INSERT OR REPLACE INTO index_state (name, value) VALUES ('${TEXT_MERGE_DUE}', 1)`);
    },
  };
  // Every call but finish() and textWaiting() (commitGroup's, after the function) is refused once closed.
  const guarded = { ...writer, close: () => void (closed = true) };
  for (const [name, fn] of Object.entries(writer)) {
    if (typeof fn !== 'function' || name === 'finish' || name === 'textWaiting') continue;
    (guarded as Record<string, unknown>)[name] = (...args: unknown[]) => {
      if (closed) return Promise.reject(ended());
      return (fn as (...a: unknown[]) => unknown)(...args);
    };
  }
  return guarded;
}
