import postgres from 'postgres';
import type { CurrentVersion, MeasuredVersion, ResourceVersion, ResourceWriter, SearchQuery, VersionToWrite } from '../types.ts';
import { CLAIM_KEPT_MS, inKeyOrder, StoreConflictError } from '../types.ts';
import { onlyTables } from '../index-tables.ts';
import { copyVersions, reserveNumbers } from './copy.ts';
import { createSubscriptionWrites } from './subscription-writes.ts';
import { asConflict } from './db.ts';
import type { PgTx } from './db.ts';
import { createLookupBatcher, deleteIndexRows, markWrite, deleteTableRows, liveKeys, insertIndexRows, presentIds, insertTokenAndCompartmentRows, insertVersions, lockVersions, replaceVersions } from './write-sql.ts';
import type { IndexedVersion, LockedRow } from './write-sql.ts';
import type { PostgresKeys } from './search-keys.ts';
import { stageContents, type Staged } from './staged-content.ts';
import { dbNowOf } from './export-jobs.ts';

/** Pending puts are written in one batch once this many are buffered (bounds statement size). */
const FLUSH_AT = 1000;
const UNIQUE_VIOLATION = '23505';

export interface PostgresWriter extends ResourceWriter {
  /**
   * Writes every buffered put and moves the tenant's write mark when this transaction changed its resources or index
   * rows: in the statement that writes the last versions when there are any (markCte), else in one of its own.
   * `write()` calls it before COMMIT.
   */
  finish(): Promise<void>;
}

/**
 * A transaction's writer. `current()` locks the row (`FOR UPDATE`); `put()` buffers the version and
 * the buffer is written in batches (one statement for new resources, one for replaced ones), at the
 * latest before COMMIT. Reads inside the transaction answer buffered keys from the buffer, so the
 * buffering is invisible to callers; a clash surfaces as StoreConflictError from put() or write().
 * `insertNew()` writes at once, with COPY (see createFirst). Each batch's search keys are resolved
 * (`searchKeys`, committed on a connection of their own) before the statements that write its index rows.
 */
export function createPostgresWriter(tx: PgTx, tenant: string, searchKeys: PostgresKeys, search: (query: SearchQuery) => Promise<ResourceVersion[]>): PostgresWriter {
  /** Rows this transaction holds locked (or wrote); null = looked up and absent, not locked. */
  const locked = new Map<string, LockedRow | null>();
  const pending = new Map<string, VersionToWrite>();
  const keyOf = (type: string, id: string) => `${type}/${id}`;
  const remember = (v: VersionToWrite, pk: number) =>
    locked.set(keyOf(v.type, v.id), { pk, type: v.type, id: v.id, version_id: v.versionId, last_updated: v.lastUpdated, deleted: v.deleted, content: v.content });

  /** Keys of the texts staged in this transaction (staged-content.ts). */
  let stagedKeys = 0;
  const stage = (vs: VersionToWrite[]) => stageContents(tx, vs, () => ++stagedKeys);
  /** Whether this transaction wrote a version or replaced index rows (markWritten). */
  let changed = false;

  function replacement(v: VersionToWrite, cur: LockedRow): { pk: number; v: VersionToWrite } {
    if (v.versionId <= cur.version_id) {
      throw new StoreConflictError(`${v.type}/${v.id}: version ${v.versionId} is not newer than stored version ${cur.version_id}`);
    }
    return { pk: cur.pk, v };
  }

  /** Resources that existed although this transaction did not look them up: lock and replace them (their large texts `staged` already). */
  async function replaceUnseen(vs: VersionToWrite[], staged?: Staged | undefined): Promise<void> {
    const seenAbsent = vs.find((v) => locked.get(keyOf(v.type, v.id)) === null);
    if (seenAbsent) throw new StoreConflictError(`${seenAbsent.type}/${seenAbsent.id} was created by another transaction`);
    for (const row of await lockVersions(tx, tenant, vs)) locked.set(keyOf(row.type, row.id), row);
    const rows = vs.map((v) => {
      const cur = locked.get(keyOf(v.type, v.id));
      if (!cur) throw new StoreConflictError(`${v.type}/${v.id} changed during the write`);
      return replacement(v, cur);
    });
    await replaceVersions(tx, tenant, rows, await searchKeys.resolve(tenant, vs), staged ?? (await stage(vs)));
    for (const r of rows) remember(r.v, r.pk);
  }

  /** Delivery state: its state-row locks taken in id order, at notify's pass or at the commit (subscription-writes.ts). */
  const subscriptions = createSubscriptionWrites(tx, tenant);

  /**
   * Flushes run one after another, so each sees the rows the previous one wrote. `marked`: the last, which moves
   * the tenant's write mark (finish).
   */
  let flushing: Promise<void> = Promise.resolve();
  function flush(marked = false): Promise<void> {
    const next = flushing.then(() => writePending(marked));
    flushing = next.catch(() => undefined);
    return next;
  }

  async function writePending(marked: boolean): Promise<void> {
    if (!pending.size) {
      if (marked && changed) await markWrite(tx, tenant);
      return;
    }
    changed = true;
    const batch = [...pending.values()];
    pending.clear();
    const replaced: { pk: number; v: VersionToWrite }[] = [];
    const created: VersionToWrite[] = [];
    for (const v of batch) {
      const cur = locked.get(keyOf(v.type, v.id));
      if (cur) replaced.push(replacement(v, cur));
      else created.push(v);
    }
    const indexKeys = await searchKeys.resolve(tenant, batch);
    // Before both statements, which run together: one COPY at a time on the connection.
    const staged = await stage(batch);
    // The mark rides in one of the two statements (the one that runs), not a statement of its own.
    const [, pks] = await Promise.all([
      replaceVersions(tx, tenant, replaced, indexKeys, staged, marked && replaced.length > 0),
      insertVersions(tx, tenant, created, indexKeys, staged, marked && replaced.length === 0),
    ]);
    for (const r of replaced) remember(r.v, r.pk);
    const clashed: VersionToWrite[] = [];
    for (const v of created) {
      const pk = pks.get(keyOf(v.type, v.id));
      if (pk === undefined) clashed.push(v);
      else remember(v, pk);
    }
    if (clashed.length) await replaceUnseen(clashed, staged);
  }

  /**
   * First versions in bulk: COPY (in a savepoint) when none of the resources exists, which is the
   * common case of an import; otherwise an INSERT that skips the existing ones. Returns the pk of each
   * inserted `type/id`.
   */
  async function createFirst(vs: VersionToWrite[]): Promise<Map<string, number>> {
    if (!vs.length) return new Map();
    changed = true;
    const indexKeys = await searchKeys.resolve(tenant, vs);
    const numbers = await reserveNumbers(tx, vs.length);
    const rows = vs.map((v, i) => ({ v, ...numbers[i]! }));
    try {
      await tx.savepoint((sp) => copyVersions(sp, tenant, rows, indexKeys));
      return new Map(rows.map((r) => [keyOf(r.v.type, r.v.id), r.pk]));
    } catch (err) {
      if (!(err instanceof postgres.PostgresError && err.code === UNIQUE_VIOLATION)) throw err;
    }
    const pks = new Map<string, number>();
    for (let i = 0; i < vs.length; i += FLUSH_AT) {
      const slice = vs.slice(i, i + FLUSH_AT);
      for (const [k, pk] of await insertVersions(tx, tenant, slice, indexKeys, await stage(slice))) pks.set(k, pk);
    }
    return pks;
  }

  const lookups = createLookupBatcher(tx, tenant, 'content');
  const measuredLookups = createLookupBatcher(tx, tenant, 'measured');

  async function current(type: string, id: string): Promise<CurrentVersion | null> {
    const k = keyOf(type, id);
    const p = pending.get(k);
    if (p) return { versionId: p.versionId, lastUpdated: p.lastUpdated, deleted: p.deleted, content: p.content };
    let row = locked.get(k) ?? null;
    // A row locked without its text (replaceUnseen remembers what it writes, so hardly ever) is read again.
    if (!row || row.content === undefined) {
      row = await lookups(type, id);
      if (!pending.has(k)) locked.set(k, row);
    }
    return row && { versionId: row.version_id, lastUpdated: row.last_updated, deleted: row.deleted, content: row.content! };
  }

  async function measured(type: string, id: string): Promise<MeasuredVersion | null> {
    const k = keyOf(type, id);
    const p = pending.get(k);
    if (p) return { versionId: p.versionId, lastUpdated: p.lastUpdated, deleted: p.deleted, content: p.content };
    let row = locked.get(k) ?? null;
    // A row locked by a lookup that read neither its text nor its length is read again (as by current()).
    if (!row || (row.content === undefined && typeof row.bytes !== 'number')) {
      row = await measuredLookups(type, id);
      if (!pending.has(k)) locked.set(k, row);
    }
    if (row === null) return null;
    const head = { versionId: row.version_id, lastUpdated: row.last_updated, deleted: row.deleted };
    return row.content === undefined ? { ...head, bytes: row.bytes! } : { ...head, content: row.content };
  }

  async function exists(type: string, id: string): Promise<boolean> {
    const k = keyOf(type, id);
    const known = pending.get(k) ?? locked.get(k);
    if (known) return !known.deleted;
    const [row] = await tx<{ deleted: boolean }[]>`SELECT deleted FROM resources WHERE tenant = ${tenant} AND type = ${type} AND id = ${id}`;
    return !!row && !row.deleted;
  }

  /** Answers from this transaction's own rows first; asks the database about the rest in one statement. */
  async function existing(keys: { type: string; id: string }[]): Promise<boolean[]> {
    const answers = new Map<string, boolean>();
    const ask: { type: string; id: string }[] = [];
    for (const k of keys) {
      const key = keyOf(k.type, k.id);
      if (answers.has(key)) continue;
      const known = pending.get(key) ?? locked.get(key);
      answers.set(key, !!known && !known.deleted);
      if (!known) ask.push(k);
    }
    if (ask.length) for (const row of await liveKeys(tx, tenant, ask)) answers.set(keyOf(row.type, row.id), true);
    return keys.map((k) => answers.get(keyOf(k.type, k.id))!);
  }

  /** After the buffered versions are written (a flush under way included): its own rows first, the database the rest in one statement. */
  async function present(type: string, ids: string[]): Promise<string[]> {
    await flush();
    const out: string[] = [];
    const ask: string[] = [];
    for (const id of new Set(ids)) {
      if (locked.get(keyOf(type, id))) out.push(id);
      else ask.push(id);
    }
    if (ask.length) out.push(...(await presentIds(tx, tenant, type, ask)));
    return out;
  }

  const mapped =
    <A extends unknown[], R>(what: string, fn: (...a: A) => Promise<R>) =>
    async (...a: A): Promise<R> => {
      try {
        return await fn(...a);
      } catch (err) {
        throw asConflict(err, what);
      }
    };

  return {
    current: mapped('current', current),
    measured: mapped('current', measured),
    exists: mapped('exists', exists),
    existing: mapped('exists', existing),
    present: mapped('present', present),
    // Its buffered versions written first (with their compartment rows), so that it finds them.
    compartmentPatients: mapped('compartmentPatients', async (type: string, ids: string[]) => {
      if (!ids.length) return [];
      await flush();
      return tx<{ id: string; patient: string }[]>`
        SELECT x.id, c.patient FROM resources x JOIN compartments c ON c.res = x.pk
        WHERE x.tenant = ${tenant} AND x.type = ${type} AND x.id = ANY(${[...new Set(ids)]}::text[]) AND NOT x.deleted`;
    }),
    // Its buffered versions written first, so that it finds them.
    vread: mapped('vread', async (type: string, id: string, versionId: number): Promise<ResourceVersion | null> => {
      await flush();
      const [row] = await tx<{ type: string; id: string; version_id: number; last_updated: number; deleted: boolean; content: string }[]>`
        SELECT type, id, version_id, last_updated, deleted, content FROM resources
        WHERE tenant = ${tenant} AND type = ${type} AND id = ${id} AND version_id = ${versionId}
        UNION ALL
        SELECT type, id, version_id, last_updated, deleted, content FROM resource_history
        WHERE tenant = ${tenant} AND type = ${type} AND id = ${id} AND version_id = ${versionId}
        LIMIT 1`;
      return row ? { type: row.type, id: row.id, versionId: row.version_id, lastUpdated: row.last_updated, deleted: row.deleted, content: row.content } : null;
    }),
    // On this transaction's connection (resources.ts searchIn), its buffered versions written first, so that it finds them.
    search: mapped('search', async (query: SearchQuery) => {
      await flush();
      return search(query);
    }),
    put: mapped('put', async (v: VersionToWrite) => {
      if (pending.has(keyOf(v.type, v.id))) await flush();
      pending.set(keyOf(v.type, v.id), v);
      if (pending.size >= FLUSH_AT) await flush();
    }),
    insertNew: mapped('insert', async (vs: VersionToWrite[]) => {
      await flush();
      const known = (v: VersionToWrite) => !!locked.get(keyOf(v.type, v.id));
      const pks = await createFirst(vs.filter((v) => !known(v)));
      return vs.map((v) => {
        const pk = known(v) ? undefined : pks.get(keyOf(v.type, v.id));
        if (pk !== undefined) remember(v, pk);
        return pk !== undefined;
      });
    }),
    replaceIndex: mapped('reindex', async (items, tables) => {
      await flush();
      const rows = await lockVersions(tx, tenant, items);
      const byKey = new Map(rows.filter((r) => !r.deleted).map((r) => [keyOf(r.type, r.id), r]));
      const versions = items.flatMap((item) => {
        const row = byKey.get(keyOf(item.type, item.id));
        if (!row || (item.versionId !== undefined && row.version_id !== item.versionId)) return [];
        // With `tables`, the rows of those alone (the words only with `search_text`), no compartments (they stay as they are).
        const only = tables ? { index: onlyTables(item.index, tables), compartments: [] } : {};
        const v: IndexedVersion = { ...item, ...only, versionId: row.version_id, lastUpdated: row.last_updated, deleted: false, content: '' };
        return [{ pk: row.pk, v }];
      });
      if (!versions.length) return;
      changed = true;
      const indexKeys = await searchKeys.resolve(tenant, versions.map((x) => x.v));
      if (tables) await deleteTableRows(tx, versions.map((x) => x.pk), tables);
      else await deleteIndexRows(tx, versions.map((x) => x.pk));
      await insertTokenAndCompartmentRows(tx, tenant, versions, indexKeys);
      await insertIndexRows(tx, tenant, versions, indexKeys);
    }),
    notify: mapped('notify', subscriptions.notify),
    // Noted, and written with the numbered events' counts (notify) in one pass in id order, or at the commit.
    ownSubscription: mapped('subscription', async (id, owner, channel, heartbeat, restart) => subscriptions.own(id, owner, channel, heartbeat, restart)),
    endSubscription: mapped('subscription', async (id) => subscriptions.end(id)),
    // A plain read (no row lock): lock order is notify's id-ordered pass's alone (subscription-writes.ts).
    subscriptionOwned: mapped('subscription', async (id) => (await tx`SELECT 1 FROM subscription_state WHERE tenant = ${tenant} AND id = ${id}`).length > 0),
    // Per tenant, to the commit; a deadlock with another activating transaction (each locked a row the other then
    // writes) is a conflict, so writeTx runs the write again.
    lockActivations: mapped('subscription activation', async () => {
      await tx`SELECT pg_advisory_xact_lock(hashtextextended(${'subscription-activation/' + tenant}, 0))`;
    }),
    handshakeWaiting: mapped('subscription', async (id) =>
      (await tx`SELECT 1 FROM subscription_notifications WHERE tenant = ${tenant} AND subscription_id = ${id} AND event = 'handshake' LIMIT 1`).length > 0),
    holdImportLease: mapped('import lease', async (job, owner, now, leaseMs) =>
      (await tx`UPDATE import_jobs SET lease_until = ${dbNowOf(tx)} + ${leaseMs}, updated_at = ${now}
        WHERE id = ${job} AND state = 'in-progress' AND lease_owner = ${owner}`).count > 0),
    claim: mapped('claim', async (claims, now) => {
      for (const { key, seen } of inKeyOrder(claims)) {
        // Under READ COMMITTED both statements wait for a transaction holding the row and then see its
        // commit: an INSERT finds the row there, an UPDATE finds its count moved. A new claim purges the
        // oldest few unmoved for CLAIM_KEPT_MS, from the index on `at` (without the ORDER BY the planner
        // reads the whole table), in the same statement.
        const moved = seen === 0
          ? await tx`
            WITH purged AS (DELETE FROM condition_claims WHERE ctid = ANY(ARRAY(
              SELECT ctid FROM condition_claims WHERE at < ${now - CLAIM_KEPT_MS} ORDER BY at LIMIT 8 FOR UPDATE SKIP LOCKED)))
            INSERT INTO condition_claims (tenant, key, n, at) VALUES (${tenant}, ${key}, 1, ${now}) ON CONFLICT DO NOTHING`
          : await tx`UPDATE condition_claims SET n = n + 1, at = ${now} WHERE tenant = ${tenant} AND key = ${key} AND n = ${seen}`;
        if (moved.count !== 1) return false;
      }
      return true;
    }),
    finish: mapped('commit', async () => {
      await flush(true);
      await subscriptions.commit();
    }),
  };
}
