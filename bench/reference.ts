/**
 * The import issue's reference points, measured on this machine: raw 1 KB row inserts into SQLite
 * (bun:sqlite, WAL, a random UUID key with a unique index and one more index) and PostgreSQL
 * `COPY FROM STDIN` of the same rows (postgres.js), so Cinder's import rate can be stated as a share.
 *
 *   bun bench/reference.ts [--rows N] [--json]
 *
 * Postgres: CINDER_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test); a table
 * `cinder_reference_<random>` is created and dropped.
 */
import { Database } from 'bun:sqlite';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import postgres from 'postgres';

const { values } = parseArgs({ options: { rows: { type: 'string', default: '100000' }, json: { type: 'boolean', default: false } } });
const rows = Number(values.rows);
const content = JSON.stringify({ resourceType: 'Observation', text: 'x'.repeat(960) });
const ids = Array.from({ length: rows }, () => crypto.randomUUID());

function sqlite(perTransaction: number): number {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-reference-'));
  const db = new Database(join(dir, 'ref.db'));
  db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -65536');
  db.exec('CREATE TABLE r (pk INTEGER PRIMARY KEY, id TEXT NOT NULL, updated INTEGER NOT NULL, content TEXT NOT NULL)');
  db.exec('CREATE UNIQUE INDEX r_id ON r (id); CREATE INDEX r_updated ON r (updated, id)');
  const insert = db.prepare('INSERT INTO r (id, updated, content) VALUES (?, ?, ?)');
  const started = performance.now();
  for (let at = 0; at < rows; at += perTransaction) {
    db.transaction(() => {
      for (let i = at; i < Math.min(rows, at + perTransaction); i++) insert.run(ids[i]!, i, content);
    })();
  }
  const seconds = (performance.now() - started) / 1000;
  db.close();
  rmSync(dir, { recursive: true, force: true });
  return rows / seconds;
}

async function copy(): Promise<number> {
  const sql = postgres(process.env.CINDER_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test', { onnotice: () => {} });
  const table = `cinder_reference_${crypto.randomUUID().replaceAll('-', '').slice(0, 12)}`;
  try {
    await sql.unsafe(`CREATE TABLE ${table} (pk BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, updated BIGINT NOT NULL, content TEXT NOT NULL)`);
    await sql.unsafe(`CREATE INDEX ON ${table} (updated, id)`);
    const started = performance.now();
    const writable = await sql.unsafe(`COPY ${table} (id, updated, content) FROM STDIN`).writable();
    const lines = Readable.from((function* () {
      for (let i = 0; i < rows; i += 1000) {
        let chunk = '';
        for (let j = i; j < Math.min(rows, i + 1000); j++) chunk += `${ids[j]}\t${j}\t${content}\n`;
        yield chunk;
      }
    })());
    await new Promise<void>((resolve, reject) => lines.pipe(writable).on('finish', resolve).on('error', reject));
    return rows / ((performance.now() - started) / 1000);
  } finally {
    await sql.unsafe(`DROP TABLE IF EXISTS ${table}`);
    await sql.end();
  }
}

const result = {
  rows,
  sqlitePer1000: Math.round(sqlite(1000)),
  sqliteOneTransaction: Math.round(sqlite(rows)),
  postgresCopy: Math.round(await copy()),
};
if (values.json) console.log(JSON.stringify(result));
else {
  console.log(`| reference (${rows} rows of 1 KB, random UUID key + one more index) | rows/s |`);
  console.log('|---|---|');
  console.log(`| SQLite, 1,000 rows per transaction | ${result.sqlitePer1000} |`);
  console.log(`| SQLite, one transaction | ${result.sqliteOneTransaction} |`);
  console.log(`| PostgreSQL COPY FROM STDIN | ${result.postgresCopy} |`);
}
