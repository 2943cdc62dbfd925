import { specOf } from '../index-tables.ts';
import type { KeyOf } from '../search-keys.ts';
import { scopedContent } from './write-sql.ts';
import type { VersionToWrite } from '../types.ts';
import type { Pg, PgTx } from './db.ts';

const TOKENS = specOf('tokens');
const STRINGS = specOf('strings');
const RANGES = specOf('ranges');
const COMPOSITES = specOf('composites');

/** COPY text format escapes (PostgreSQL COPY, "Text Format"): backslash and the row/column separators. */
const SPECIAL = /[\\\t\n\r]/;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

function field(s: string): string {
  return SPECIAL.test(s) ? s.replace(/[\\\t\n\r]/g, (c) => ESCAPES[c]!) : s;
}

/** Characters per write to the COPY stream. */
const WRITE_CHARS = 1 << 16;

/** The pending COPY statement's failure, however postgres.js reports it. */
function copyFailure(query: object): Promise<never> {
  // postgres.js (3.4) resolves the statement with the stream once the server accepts the COPY. An error
  // the server raises after the client ended the stream reaches only the statement's `reject`, which
  // no longer settles anything, and the stream never finishes: hook it (test/store covers this path).
  const q = query as { reject: (err: unknown) => void };
  const failed = new Promise<never>((_, reject) => {
    const original = q.reject;
    q.reject = (err) => {
      original(err);
      reject(err);
    };
  });
  failed.catch(() => undefined);
  return failed;
}

export interface OpenCopy {
  stream: NodeJS.WritableStream;
  /** Settles when the server has the rows, or refused them. */
  done: Promise<void>;
}

/** Starts `COPY <target> FROM STDIN` (a static target, no values) on a pool or in a transaction. */
export async function openCopy(sql: Pg | PgTx, target: string, format: 'text' | 'binary' = 'text'): Promise<OpenCopy> {
  const query = sql.unsafe(`COPY ${target} FROM STDIN${format === 'binary' ? ' (FORMAT binary)' : ''}`);
  const failed = copyFailure(query);
  const stream = await query.writable();
  const done = Promise.race([
    new Promise<void>((resolve, reject) => {
      stream.once('finish', resolve);
      stream.once('error', reject);
    }),
    failed,
  ]);
  done.catch(() => undefined);
  return { stream, done };
}

/** Streams `rows` (COPY text lines, each ending in a newline, made as they are sent) into `COPY <target> FROM STDIN`. */
async function copyRows(tx: PgTx, target: string, rows: Iterable<string>): Promise<void> {
  const lines = rows[Symbol.iterator]();
  let next = lines.next();
  if (next.done) return;
  const { stream, done } = await openCopy(tx, target);
  // Lines are joined once per write: appending them one by one would build a rope that the write
  // then has to flatten.
  let part: string[] = [];
  let chars = 0;
  for (; !next.done; next = lines.next()) {
    part.push(next.value);
    chars += next.value.length;
    if (chars < WRITE_CHARS) continue;
    if (!stream.write(part.join(''))) await Promise.race([new Promise((resolve) => stream.once('drain', resolve)), done]);
    part = [];
    chars = 0;
  }
  stream.end(part.join(''));
  await done;
}

/** A row number per version: the pk and seq the rows are written with. */
export interface Numbered {
  v: VersionToWrite;
  pk: number;
  seq: number;
}

/**
 * Writes first versions with COPY: the resources rows with the given pk and seq, then their index
 * and compartment rows (`keyOf` gives each index row its key, already committed). A resource that
 * exists fails the whole COPY (unique violation), so callers run this in a savepoint and fall back to
 * an INSERT that skips existing rows.
 */
export async function copyVersions(tx: PgTx, tenant: string, rows: Numbered[], keyOf: KeyOf): Promise<void> {
  const t = field(tenant);
  const head = ({ v, pk }: Numbered) => `${pk}\t${t}\t${field(v.type)}`;
  const live = rows.filter((r) => !r.v.deleted);
  await copyRows(tx, 'resources (pk, tenant, type, id, version_id, last_updated, deleted, seq, content)', lines(rows, (r) => {
    const { v } = r;
    return [`${head(r)}\t${field(v.id)}\t${v.versionId}\t${v.lastUpdated}\t${v.deleted ? 't' : 'f'}\t${r.seq}\t${field(v.content)}\n`];
  }));
  await copyRows(tx, 'search_index (res, k, value, display)', lines(live, ({ v, pk }) =>
    v.index.tokens.map((e) => `${pk}\t${keyOf(TOKENS, v.type, e)}\t${field(e.value)}\t${field(e.display ?? '')}\n`),
  ));
  await copyRows(tx, 'search_string (res, k, value, exact)', lines(live, ({ v, pk }) =>
    v.index.strings.map((e) => `${pk}\t${keyOf(STRINGS, v.type, e)}\t${field(e.value)}\t${field(e.exact)}\n`),
  ));
  await copyRows(tx, 'search_range (res, k, low, high)', lines(live, ({ v, pk }) =>
    v.index.ranges.map((e) => `${pk}\t${keyOf(RANGES, v.type, e)}\t${e.low}\t${e.high}\n`),
  ));
  await copyRows(tx, 'search_composite (res, k, system1, value1, system2, value2, low, high)', lines(live, ({ v, pk }) =>
    v.index.composites.map((e) =>
      `${pk}\t${keyOf(COMPOSITES, v.type, e)}\t${field(e.system1)}\t${field(e.value1)}\t${field(e.system2)}\t${field(e.value2)}\t${e.low}\t${e.high}\n`),
  ));
  await copyRows(tx, 'search_text (res, narrative, content)', lines(live, ({ v, pk }) =>
    v.index.text ? [`${pk}\t${field(v.index.text.narrative)}\t${field(scopedContent(tenant, v))}\n`] : [],
  ));
  await copyRows(tx, 'compartments (res, tenant, type, patient)', lines(live, (r) => r.v.compartments.map((p) => `${head(r)}\t${field(p)}\n`)));
}

function* lines(rows: Numbered[], of: (r: Numbered) => string[]): Generator<string> {
  for (const r of rows) yield* of(r);
}

/** `n` fresh values of the resources' pk sequence and of resource_seq, in one round trip. */
export async function reserveNumbers(tx: PgTx, n: number): Promise<{ pk: number; seq: number }[]> {
  // resources_pk_seq: the sequence behind resources.pk (BIGSERIAL) in migration 1.
  return tx<{ pk: number; seq: number }[]>`
    SELECT nextval('resources_pk_seq') AS pk, nextval('resource_seq') AS seq FROM generate_series(1, ${n})`;
}
