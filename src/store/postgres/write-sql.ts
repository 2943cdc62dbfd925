import { specOf } from '../index-tables.ts';
import type { KeyOf } from '../search-keys.ts';
import { textScope } from '../text-scope.ts';
import { MEASURED_TEXT_BYTES, type IndexTable, type ReindexTable, type VersionToWrite } from '../types.ts';
import type { Pg, PgTx } from './db.ts';
import { STAGED_TABLE, type Staged } from './staged-content.ts';

const TOKENS = specOf('tokens');
const STRINGS = specOf('strings');
const RANGES = specOf('ranges');
const COMPOSITES = specOf('composites');

/** A version as its index and compartment rows need it: a reindex writes those rows and no version (nor its method). */
export type IndexedVersion = Omit<VersionToWrite, 'method'>;

/** The `content` tsvector text of a version's words: its words and its scope's lexeme (src/store/text-scope.ts). */
export function scopedContent(tenant: string, v: IndexedVersion): string {
  return `${v.index.text!.content} #${textScope(tenant, v.type)}`;
}

/**
 * A current row as locked by a writer; `content` when the lookup asked for it (or the writer wrote it), or when it
 * asked for the text's length only (`measured`) and that was under MEASURED_TEXT_BYTES or unknown; `bytes`, that length.
 */
export interface LockedRow {
  pk: number;
  type: string;
  id: string;
  version_id: number;
  last_updated: number;
  deleted: boolean;
  content?: string;
  bytes?: number | null;
}

/** What a lookup of current rows reads of their stored text: nothing, the text, or its length and only a small text. */
export type TextRead = 'none' | 'content' | 'measured';

/**
 * The columns of TextRead after `deleted`. A text's length in UTF-8 bytes is read from its TOAST pointer or header
 * (`octet_length` detoasts nothing: a 67 Mi-character text's in 1 ms, against 0.4-1 s to send the text) when the
 * database's bytes are UTF-8's; otherwise it is NULL and the text is read.
 */
export function textColumns(tx: Pg | PgTx, read: TextRead) {
  if (read === 'none') return tx``;
  if (read === 'content') return tx`, content`;
  const bytes = tx`CASE WHEN current_setting('server_encoding') IN ('UTF8', 'SQL_ASCII') THEN octet_length(content) END`;
  return tx`, ${bytes} AS bytes, CASE WHEN ${bytes} < ${MEASURED_TEXT_BYTES} OR ${bytes} IS NULL THEN content END AS content`;
}

/**
 * Column arrays for `unnest`: one statement text (one prepared statement) whatever the batch size. A staged text
 * (staged-content.ts) is sent as '' and its key in `staged` (0 for the others), read back by stagedText.
 */
function versionColumns(vs: VersionToWrite[], staged: Staged | undefined) {
  return {
    versionId: vs.map((v) => v.versionId),
    lastUpdated: vs.map((v) => v.lastUpdated),
    // Sent as 0/1: postgres.js would declare a JS boolean[] parameter as a scalar bool.
    deleted: vs.map((v) => (v.deleted ? 1 : 0)),
    content: vs.map((v) => (staged?.(v) ? '' : v.content)),
    staged: staged ? vs.map(staged) : undefined,
    method: vs.map((v) => v.method),
  };
}

/**
 * The stored text of the version row `row` of an `unnest` (with a `staged` column when `staged`): its `content`, or the
 * text staged under its key. Without staged texts the statement is the one it was (no temporary table to name).
 */
function stagedText(tx: PgTx, row: string, staged: boolean) {
  if (!staged) return tx.unsafe(`${row}.content`);
  return tx.unsafe(`CASE WHEN ${row}.staged = 0 THEN ${row}.content ELSE (SELECT s.content FROM ${STAGED_TABLE} s WHERE s.key = ${row}.staged) END`);
}

/** Token and compartment rows of the non-deleted versions, each tagged with `ref(i)` of its version. */
function entryColumns(vs: IndexedVersion[], ref: (i: number) => number, keyOf: KeyOf) {
  const idx = { ref: [] as number[], k: [] as number[], value: [] as string[], display: [] as string[] };
  const cmp = { ref: [] as number[], type: [] as string[], patient: [] as string[] };
  vs.forEach((v, i) => {
    if (v.deleted) return;
    for (const e of v.index.tokens) idx.ref.push(ref(i)), idx.k.push(keyOf(TOKENS, v.type, e)), idx.value.push(e.value), idx.display.push(e.display ?? '');
    for (const p of v.compartments) cmp.ref.push(ref(i)), cmp.type.push(v.type), cmp.patient.push(p);
  });
  return { idx, cmp };
}

/**
 * Writes the string, range and composite index rows of versions stored under the given pks (the token
 * rows go with the version statements), one statement per table that has rows.
 */
export async function insertIndexRows(tx: PgTx, tenant: string, rows: { pk: number; v: IndexedVersion }[], keyOf: KeyOf): Promise<void> {
  const str = { res: [] as number[], k: [] as number[], value: [] as string[], exact: [] as string[] };
  const rng = { res: [] as number[], k: [] as number[], low: [] as number[], high: [] as number[] };
  const cmp = {
    res: [] as number[], k: [] as number[], system1: [] as string[], value1: [] as string[],
    system2: [] as string[], value2: [] as string[], low: [] as number[], high: [] as number[],
  };
  const txt = { res: [] as number[], narrative: [] as string[], content: [] as string[] };
  for (const { pk, v } of rows) {
    if (v.deleted) continue;
    if (v.index.text) txt.res.push(pk), txt.narrative.push(v.index.text.narrative), txt.content.push(scopedContent(tenant, v));
    for (const e of v.index.strings) str.res.push(pk), str.k.push(keyOf(STRINGS, v.type, e)), str.value.push(e.value), str.exact.push(e.exact);
    for (const e of v.index.ranges) rng.res.push(pk), rng.k.push(keyOf(RANGES, v.type, e)), rng.low.push(e.low), rng.high.push(e.high);
    for (const e of v.index.composites) {
      cmp.res.push(pk), cmp.k.push(keyOf(COMPOSITES, v.type, e)), cmp.system1.push(e.system1), cmp.value1.push(e.value1);
      cmp.system2.push(e.system2), cmp.value2.push(e.value2), cmp.low.push(e.low), cmp.high.push(e.high);
    }
  }
  const work: Promise<unknown>[] = [];
  if (str.res.length) {
    work.push(tx`INSERT INTO search_string (res, k, value, exact)
      SELECT * FROM unnest(${str.res}::bigint[], ${str.k}::int[], ${str.value}::text[], ${str.exact}::text[])`);
  }
  if (rng.res.length) {
    work.push(tx`INSERT INTO search_range (res, k, low, high)
      SELECT * FROM unnest(${rng.res}::bigint[], ${rng.k}::int[], ${rng.low}::float8[], ${rng.high}::float8[])`);
  }
  if (cmp.res.length) {
    work.push(tx`INSERT INTO search_composite (res, k, system1, value1, system2, value2, low, high)
      SELECT * FROM unnest(${cmp.res}::bigint[], ${cmp.k}::int[], ${cmp.system1}::text[], ${cmp.value1}::text[],
        ${cmp.system2}::text[], ${cmp.value2}::text[], ${cmp.low}::float8[], ${cmp.high}::float8[])`);
  }
  if (txt.res.length) {
    // The words are letters and digits separated by spaces: as tsvector text, each is one lexeme.
    work.push(tx`INSERT INTO search_text (res, narrative, content)
      SELECT res, narrative::tsvector, content::tsvector FROM unnest(${txt.res}::bigint[], ${txt.narrative}::text[], ${txt.content}::text[]) AS t(res, narrative, content)`);
  }
  await Promise.all(work);
}

/** Writes the token and compartment rows of versions stored under the given pks. */
export async function insertTokenAndCompartmentRows(tx: PgTx, tenant: string, rows: { pk: number; v: IndexedVersion }[], keyOf: KeyOf): Promise<void> {
  const { idx, cmp } = entryColumns(rows.map((r) => r.v), (i) => rows[i]!.pk, keyOf);
  await tx`
    WITH ii AS (
      INSERT INTO search_index (res, k, value, display)
      SELECT * FROM unnest(${idx.ref}::bigint[], ${idx.k}::int[], ${idx.value}::text[], ${idx.display}::text[])
    )
    INSERT INTO compartments (res, tenant, patient, type)
    SELECT e.res, ${tenant}, e.patient, e.type FROM unnest(${cmp.ref}::bigint[], ${cmp.patient}::text[], ${cmp.type}::text[]) AS e(res, patient, type)`;
}

/** Deletes the rows of these tables (index tables, the words) of these resource rows. */
export async function deleteTableRows(tx: PgTx, pks: number[], tables: readonly ReindexTable[]): Promise<void> {
  for (const table of tables) await tx`DELETE FROM ${tx(table)} WHERE res = ANY(${pks}::bigint[])`;
}

/** Deletes every index and compartment row of these resource rows. */
export async function deleteIndexRows(tx: PgTx, pks: number[]): Promise<void> {
  await tx`
    WITH a AS (DELETE FROM search_index WHERE res = ANY(${pks}::bigint[])),
      b AS (DELETE FROM search_string WHERE res = ANY(${pks}::bigint[])),
      c AS (DELETE FROM search_range WHERE res = ANY(${pks}::bigint[])),
      d AS (DELETE FROM search_composite WHERE res = ANY(${pks}::bigint[])),
      t AS (DELETE FROM search_text WHERE res = ANY(${pks}::bigint[]))
    DELETE FROM compartments WHERE res = ANY(${pks}::bigint[])`;
}

/**
 * Moves the tenant's write mark (ResourceRepo.writeMark) by one, on one of its sixteen rows (the backend's), as a
 * statement of its own: in a transaction that changed its resources or index rows without a buffered version left to
 * write at its end (an import's COPY, a reindex, an expunge). A write's last versions carry it in their statement
 * instead (`marked`, insertVersions and replaceVersions).
 */
export async function markWrite(tx: PgTx, tenant: string): Promise<void> {
  await tx`INSERT INTO tenant_writes (tenant, shard, n) VALUES (${tenant}, pg_backend_pid() % 16, 1)
    ON CONFLICT (tenant, shard) DO UPDATE SET n = tenant_writes.n + 1`;
}

/**
 * The write mark's move as a data-modifying CTE of the statement that writes a transaction's last versions (run
 * whether or not the statement reads it): one statement and one round trip fewer than markWrite beside it. Taken as
 * the last writes go, the row lock is held only for them and the COMMIT, so concurrent writers of the tenant seldom
 * wait for it.
 */
function markCte(tx: PgTx, tenant: string, marked: boolean) {
  return marked
    ? tx`, mk AS (INSERT INTO tenant_writes (tenant, shard, n) VALUES (${tenant}, pg_backend_pid() % 16, 1)
      ON CONFLICT (tenant, shard) DO UPDATE SET n = tenant_writes.n + 1)`
    : tx``;
}

/**
 * Locks the current rows of these resources and returns them, with their stored text when `content`
 * (a reindex does not read it again). One index probe per key (a LATERAL join leaves the planner no
 * whole-table plan, even before statistics exist), in sorted key order so that concurrent writers lock
 * in the same order.
 */
export function lockVersions(tx: PgTx, tenant: string, keys: { type: string; id: string }[], read: TextRead = 'none'): Promise<LockedRow[]> {
  const sorted = [...keys].sort((a, b) => (a.type === b.type ? (a.id < b.id ? -1 : 1) : a.type < b.type ? -1 : 1));
  return tx<LockedRow[]>`
    SELECT r.* FROM unnest(${sorted.map((k) => k.type)}::text[], ${sorted.map((k) => k.id)}::text[]) AS k(type, id)
    CROSS JOIN LATERAL (
      SELECT pk, type, id, version_id, last_updated, deleted${textColumns(tx, read)} FROM resources
      WHERE tenant = ${tenant} AND type = k.type AND id = k.id FOR UPDATE
    ) r`;
}

/** Which of `keys` are current, live resources of the tenant, in one statement, locking nothing. */
export function liveKeys(tx: PgTx, tenant: string, keys: { type: string; id: string }[]): Promise<{ type: string; id: string }[]> {
  return tx<{ type: string; id: string }[]>`
    SELECT r.type, r.id FROM unnest(${keys.map((k) => k.type)}::text[], ${keys.map((k) => k.id)}::text[]) AS k(type, id)
    JOIN resources r ON r.tenant = ${tenant} AND r.type = k.type AND r.id = k.id
    WHERE NOT r.deleted`;
}

/** The ids among `ids` with a current row of `type`, live or deleted, one index probe each (as ResourceRepo.present). */
export async function presentIds(tx: PgTx, tenant: string, type: string, ids: string[]): Promise<string[]> {
  const rows = await tx<{ id: string }[]>`
    SELECT u.id FROM unnest(${ids}::text[]) AS u(id)
    CROSS JOIN LATERAL (SELECT 1 FROM resources r WHERE r.tenant = ${tenant} AND r.type = ${type} AND r.id = u.id LIMIT 1) hit`;
  return rows.map((r) => r.id);
}

/** A row as read, its `content` absent when the statement left it out (NULL: measured, a large text). */
function withoutNull(r: LockedRow): LockedRow {
  if (r.content === null) delete r.content;
  return r;
}

/**
 * `FOR UPDATE` lookups of current rows, with their stored text (ResourceWriter.current) or its length and a small text
 * only (`measured`: ResourceWriter.measured). Lookups
 * requested in the same tick (a caller awaiting `Promise.all` over many `current()` calls) share one
 * statement instead of one round trip each.
 */
export function createLookupBatcher(tx: PgTx, tenant: string, read: 'content' | 'measured') {
  let waiting: { type: string; id: string; resolve: (r: LockedRow | null) => void; reject: (e: unknown) => void }[] = [];
  async function run(): Promise<void> {
    const batch = waiting;
    waiting = [];
    try {
      const [one] = batch;
      const rows =
        batch.length === 1
          ? await tx<LockedRow[]>`
              SELECT pk, type, id, version_id, last_updated, deleted${textColumns(tx, read)} FROM resources
              WHERE tenant = ${tenant} AND type = ${one!.type} AND id = ${one!.id} FOR UPDATE`
          : await lockVersions(tx, tenant, batch, read);
      const byKey = new Map(rows.map((r) => [`${r.type}/${r.id}`, withoutNull(r)]));
      for (const b of batch) b.resolve(byKey.get(`${b.type}/${b.id}`) ?? null);
    } catch (err) {
      for (const b of batch) b.reject(err);
    }
  }
  return (type: string, id: string): Promise<LockedRow | null> =>
    new Promise((resolve, reject) => {
      if (waiting.push({ type, id, resolve, reject }) === 1) queueMicrotask(run);
    });
}

/**
 * Inserts first versions in one statement, with their index and compartment rows. A resource that
 * already exists is skipped (ON CONFLICT DO NOTHING); returns the pk of each inserted `type/id`.
 * `marked`: the statement moves the tenant's write mark too (markCte).
 */
export async function insertVersions(tx: PgTx, tenant: string, vs: VersionToWrite[], keyOf: KeyOf, staged?: Staged, marked = false): Promise<Map<string, number>> {
  if (!vs.length) return new Map();
  const c = versionColumns(vs, staged);
  const some = c.staged?.some((k) => k !== 0) === true;
  const { idx, cmp } = entryColumns(vs, (i) => i + 1, keyOf);
  const rows = await tx<{ pk: number; type: string; id: string }[]>`
    WITH x AS (
      SELECT * FROM unnest(${vs.map((v) => v.type)}::text[], ${vs.map((v) => v.id)}::text[], ${c.versionId}::int[],
        ${c.lastUpdated}::bigint[], ${c.deleted}::int[], ${c.content}::text[], ${c.method}::text[]${some ? tx`, ${c.staged!}::int[]` : tx``})
        WITH ORDINALITY AS x(type, id, version_id, last_updated, deleted, content, method, ${some ? tx`staged, ` : tx``}n)
    ), ins AS (
      INSERT INTO resources (tenant, type, id, version_id, last_updated, deleted, seq, content, method)
      SELECT ${tenant}, type, id, version_id, last_updated, deleted = 1, nextval('resource_seq'), ${stagedText(tx, 'x', some)}, method FROM x
      ON CONFLICT (tenant, type, id) DO NOTHING
      RETURNING pk, type, id
    ), k AS (
      SELECT ins.pk, x.n FROM ins JOIN x ON x.type = ins.type AND x.id = ins.id
    ), ii AS (
      INSERT INTO search_index (res, k, value, display)
      SELECT k.pk, e.k, e.value, e.display
      FROM unnest(${idx.ref}::bigint[], ${idx.k}::int[], ${idx.value}::text[], ${idx.display}::text[])
        AS e(n, k, value, display) JOIN k ON k.n = e.n
    ), ic AS (
      INSERT INTO compartments (res, tenant, patient, type)
      SELECT k.pk, ${tenant}, e.patient, e.type
      FROM unnest(${cmp.ref}::bigint[], ${cmp.patient}::text[], ${cmp.type}::text[]) AS e(n, patient, type) JOIN k ON k.n = e.n
    )${markCte(tx, tenant, marked)}
    SELECT pk, type, id FROM ins`;
  const pks = new Map(rows.map((r) => [`${r.type}/${r.id}`, r.pk]));
  const written: { pk: number; v: VersionToWrite }[] = [];
  for (const v of vs) {
    const pk = pks.get(`${v.type}/${v.id}`);
    if (pk !== undefined) written.push({ pk, v });
  }
  await insertIndexRows(tx, tenant, written, keyOf);
  return pks;
}

/**
 * Replaces locked current rows in one statement: each old version is copied to history, the row
 * updated with a fresh `seq`, and its index and compartment rows replaced. All sub-statements see the
 * same snapshot, so the copy reads the old version and the deletes never touch the new entries.
 * `marked`: the statement moves the tenant's write mark too (markCte).
 */
export async function replaceVersions(tx: PgTx, tenant: string, rows: { pk: number; v: VersionToWrite }[], keyOf: KeyOf, staged?: Staged, marked = false): Promise<void> {
  if (!rows.length) return;
  const vs = rows.map((r) => r.v);
  const pks = rows.map((r) => r.pk);
  const c = versionColumns(vs, staged);
  const some = c.staged?.some((k) => k !== 0) === true;
  const { idx, cmp } = entryColumns(vs, (i) => rows[i]!.pk, keyOf);
  // `pk = ANY(...)` on every table gives each sub-statement an index path whatever the statistics.
  await tx`
    WITH v AS (
      SELECT * FROM unnest(${pks}::bigint[], ${c.versionId}::int[], ${c.lastUpdated}::bigint[],
        ${c.deleted}::int[], ${c.content}::text[], ${c.method}::text[]${some ? tx`, ${c.staged!}::int[]` : tx``})
        AS v(pk, version_id, last_updated, deleted, content, method${some ? tx`, staged` : tx``})
    ), h AS (
      INSERT INTO resource_history (tenant, type, id, version_id, last_updated, deleted, seq, content, method)
      SELECT r.tenant, r.type, r.id, r.version_id, r.last_updated, r.deleted, r.seq, r.content, r.method FROM resources r WHERE r.pk = ANY(${pks}::bigint[])
    ), u AS (
      UPDATE resources r SET version_id = v.version_id, last_updated = v.last_updated, deleted = v.deleted = 1,
        seq = nextval('resource_seq'), content = ${stagedText(tx, 'v', some)}, method = v.method
      FROM v WHERE r.pk = v.pk AND r.pk = ANY(${pks}::bigint[])
    ), di AS (
      DELETE FROM search_index WHERE res = ANY(${pks}::bigint[])
    ), ds AS (
      DELETE FROM search_string WHERE res = ANY(${pks}::bigint[])
    ), dr AS (
      DELETE FROM search_range WHERE res = ANY(${pks}::bigint[])
    ), dx AS (
      DELETE FROM search_composite WHERE res = ANY(${pks}::bigint[])
    ), dt AS (
      DELETE FROM search_text WHERE res = ANY(${pks}::bigint[])
    ), dc AS (
      DELETE FROM compartments WHERE res = ANY(${pks}::bigint[])
    ), ii AS (
      INSERT INTO search_index (res, k, value, display)
      SELECT * FROM unnest(${idx.ref}::bigint[], ${idx.k}::int[], ${idx.value}::text[], ${idx.display}::text[])
    ), ic AS (
      INSERT INTO compartments (res, tenant, patient, type)
      SELECT e.res, ${tenant}, e.patient, e.type FROM unnest(${cmp.ref}::bigint[], ${cmp.patient}::text[], ${cmp.type}::text[]) AS e(res, patient, type)
    )${markCte(tx, tenant, marked)}
    SELECT 1`;
  await insertIndexRows(tx, tenant, rows, keyOf);
}
