import type { VersionToWrite } from '../types.ts';
import type { PgTx } from './db.ts';

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

/** Streams `rows` (COPY text lines, each ending in a newline) into `COPY <target> FROM STDIN`. */
async function copyRows(tx: PgTx, target: string, rows: string[]): Promise<void> {
  if (!rows.length) return;
  const query = tx.unsafe(`COPY ${target} FROM STDIN`);
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
  let part = '';
  for (const row of rows) {
    part += row;
    if (part.length < WRITE_CHARS) continue;
    if (!stream.write(part)) await Promise.race([new Promise((resolve) => stream.once('drain', resolve)), done]);
    part = '';
  }
  stream.end(part);
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
 * and compartment rows. A resource that exists fails the whole COPY (unique violation), so callers
 * run this in a savepoint and fall back to an INSERT that skips existing rows.
 */
export async function copyVersions(tx: PgTx, tenant: string, rows: Numbered[]): Promise<void> {
  const t = field(tenant);
  const resources: string[] = [];
  const index: string[] = [];
  const compartments: string[] = [];
  for (const { v, pk, seq } of rows) {
    const head = `${pk}\t${t}\t${field(v.type)}`;
    resources.push(`${head}\t${field(v.id)}\t${v.versionId}\t${v.lastUpdated}\t${v.deleted ? 't' : 'f'}\t${seq}\t${field(v.content)}\n`);
    if (v.deleted) continue;
    for (const e of v.index) index.push(`${head}\t${field(e.param)}\t${field(e.system)}\t${field(e.value)}\n`);
    for (const p of v.compartments) compartments.push(`${head}\t${field(p)}\n`);
  }
  await copyRows(tx, 'resources (pk, tenant, type, id, version_id, last_updated, deleted, seq, content)', resources);
  await copyRows(tx, 'search_index (res, tenant, type, param, system, value)', index);
  await copyRows(tx, 'compartments (res, tenant, type, patient)', compartments);
}

/** `n` fresh values of the resources' pk sequence and of resource_seq, in one round trip. */
export async function reserveNumbers(tx: PgTx, n: number): Promise<{ pk: number; seq: number }[]> {
  // resources_pk_seq: the sequence behind resources.pk (BIGSERIAL) in migration 1.
  return tx<{ pk: number; seq: number }[]>`
    SELECT nextval('resources_pk_seq') AS pk, nextval('resource_seq') AS seq FROM generate_series(1, ${n})`;
}
