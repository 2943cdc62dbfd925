/**
 * `cinder import` throughput: generates patient data with bench/generate.ts, then times
 * `cinder import` (a separate process, as a user runs it) into a fresh SQLite file and a fresh
 * PostgreSQL database.
 *
 *   bun bench/import.ts [--patients N] [--seed S] [--format ndjson|bundle] [--store sqlite|postgres|both]
 *                       [--batch-size N] [--binary] [--runs N] [--validation strict|off|both] [--json]
 *
 * --validation both imports each run twice, with CINDER_VALIDATION=off then strict (alternating, so
 * both see the same machine), and prints the rate with validation as a share of the rate without.
 * --patients 1000 (the default) gives about 100,000 resources. --binary runs dist/cinder instead of
 * `bun src/main.ts`. Postgres: CINDER_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test)
 * names the server; a database `cinder_bench_<random>` is created and dropped.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Database } from 'bun:sqlite';
import postgres from 'postgres';

const root = resolve(import.meta.dir, '..');
const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    patients: { type: 'string', default: '1000' },
    seed: { type: 'string', default: '1' },
    format: { type: 'string', default: 'ndjson' },
    store: { type: 'string', default: 'both' },
    'batch-size': { type: 'string' },
    binary: { type: 'boolean', default: false },
    runs: { type: 'string', default: '1' },
    validation: { type: 'string', default: 'strict' },
    json: { type: 'boolean', default: false },
  },
  strict: true,
});
if (!['sqlite', 'postgres', 'both'].includes(values.store)) throw new Error('--store takes sqlite, postgres or both');
if (!['ndjson', 'bundle'].includes(values.format)) throw new Error('--format takes ndjson or bundle');
if (!['strict', 'off', 'both'].includes(values.validation)) throw new Error('--validation takes strict, off or both');
const levels = values.validation === 'both' ? ['off', 'strict'] : [values.validation];

interface Row {
  store: string;
  run: number;
  validation: string;
  resources: number;
  failed: number;
  seconds: number;
  resourcesPerSecond: number;
  importerResourcesPerSecond: number;
  peakRssMiB: number;
  /** On disk after the import: the search index tables (with their indexes), and the whole database. */
  indexBytesPerResource: number;
  databaseBytesPerResource: number;
}

const work = mkdtempSync(join(tmpdir(), 'cinder-bench-import-'));
const cinder = values.binary ? [join(root, 'dist/cinder')] : ['bun', join(root, 'src/main.ts')];

async function run(cmd: string[], env: Record<string, string>) {
  const p = Bun.spawn(cmd, { cwd: work, env: { ...process.env, ...env }, stdout: 'pipe', stderr: 'pipe' });
  const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, stdout, stderr, maxRss: p.resourceUsage()?.maxRSS ?? 0 };
}

async function generate(): Promise<string[]> {
  const out = join(work, 'data');
  const g = await run(['bun', join(root, 'bench/generate.ts'), '--patients', values.patients, '--seed', values.seed, '--format', values.format, '--out', out, '--json'], {});
  if (g.code !== 0) throw new Error(`generate failed: ${g.stderr}`);
  const summary = JSON.parse(g.stdout) as { resources: number; bytes: number };
  if (!values.json) console.error(`generated ${summary.resources} resources (${(summary.bytes / 1048576).toFixed(0)} MiB, ${values.format}) in ${out}`);
  // The generated files reach the disk now, not while the first import runs (which they slowed by up to 30%).
  Bun.spawnSync(['sync']);
  return readdirSync(out).sort().map((f) => join(out, f));
}

/** A fresh, empty database for one import run; `drop` removes it. */
async function freshDatabase(store: string, n: number): Promise<{ env: Record<string, string>; drop: () => Promise<void> }> {
  const dataDir = join(work, `${store}-${n}`);
  if (store === 'sqlite') return { env: { CINDER_DATA_DIR: dataDir }, drop: async () => rmSync(dataDir, { recursive: true, force: true }) };
  const adminUrl = process.env.CINDER_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const admin = postgres(adminUrl, { max: 1, onnotice: () => undefined });
  const name = 'cinder_bench_' + crypto.randomUUID().replaceAll('-', '').slice(0, 12);
  await admin`CREATE DATABASE ${admin(name)}`;
  const url = new URL(adminUrl);
  url.pathname = '/' + name;
  return {
    env: { CINDER_DATA_DIR: dataDir, CINDER_DATABASE_URL: url.toString() },
    drop: async () => {
      await admin`DROP DATABASE IF EXISTS ${admin(name)} WITH (FORCE)`;
      await admin.end();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The search index tables (values and compartments, with their indexes). */
const INDEX_TABLES = ['search_index', 'search_string', 'search_range', 'search_composite', 'compartments'];

/** Bytes on disk of the search index tables and of the whole database, after an import. */
async function databaseBytes(store: string, env: Record<string, string>): Promise<{ index: number; total: number }> {
  if (store === 'sqlite') {
    const db = new Database(join(env.CINDER_DATA_DIR!, 'cinder.db'), { readonly: true });
    try {
      const rows = db.query<{ tbl: string; bytes: number }, []>(
        'SELECT m.tbl_name AS tbl, SUM(s.pgsize) AS bytes FROM dbstat s JOIN sqlite_schema m ON m.name = s.name GROUP BY m.tbl_name').all();
      return { index: rows.filter((r) => INDEX_TABLES.includes(r.tbl)).reduce((a, r) => a + r.bytes, 0), total: rows.reduce((a, r) => a + r.bytes, 0) };
    } finally {
      db.close();
    }
  }
  const sql = postgres(env.CINDER_DATABASE_URL!, { max: 1, onnotice: () => undefined });
  try {
    const [row] = await sql<{ index: string; total: string }[]>`
      SELECT (SELECT SUM(pg_total_relation_size(to_regclass(t))) FROM unnest(${INDEX_TABLES}::text[]) t)::text AS index,
             pg_database_size(current_database())::text AS total`;
    return { index: Number(row!.index), total: Number(row!.total) };
  } finally {
    await sql.end();
  }
}

async function importOnce(store: string, n: number, files: string[], validation: string): Promise<Row> {
  const db = await freshDatabase(store, n);
  try {
    const env = { ...db.env, CINDER_LOG_LEVEL: 'warn', CINDER_VALIDATION: validation };
    // A new database is made by `migrate` (or `serve`): the other commands refuse a missing one.
    const migrated = await run([...cinder, 'migrate'], env);
    if (migrated.code !== 0) throw new Error(`migrate failed: ${migrated.stderr}`);
    const tenant = await run([...cinder, 'tenant', 'create', 'bench'], env);
    if (tenant.code !== 0) throw new Error(`tenant create failed: ${tenant.stderr}`);
    const batch = values['batch-size'] ? ['--batch-size', values['batch-size']] : [];
    const started = performance.now();
    const r = await run([...cinder, 'import', '--tenant', 'bench', '--json', ...batch, ...files], env);
    const seconds = (performance.now() - started) / 1000;
    if (r.code > 1) throw new Error(`import failed (${r.code}): ${r.stderr}`);
    const s = JSON.parse(r.stdout) as { imported: number; failed: number; resourcesPerSecond: number };
    const bytes = await databaseBytes(store, env);
    return {
      store, run: n, validation, resources: s.imported, failed: s.failed, seconds: Number(seconds.toFixed(2)),
      resourcesPerSecond: Math.round(s.imported / seconds), importerResourcesPerSecond: s.resourcesPerSecond,
      peakRssMiB: Math.round(r.maxRss / 1048576),
      indexBytesPerResource: Math.round(bytes.index / s.imported), databaseBytesPerResource: Math.round(bytes.total / s.imported),
    };
  } finally {
    await db.drop();
  }
}

try {
  const files = await generate();
  const stores = values.store === 'both' ? ['sqlite', 'postgres'] : [values.store];
  const rows: Row[] = [];
  for (const store of stores) for (let n = 1; n <= Number(values.runs); n++) for (const level of levels) rows.push(await importOnce(store, n, files, level));
  if (values.json) {
    console.log(JSON.stringify(rows, null, 2));
  } else {
    console.log('| store | run | validation | resources | failed | seconds (process) | resources/s (process) | resources/s (importer) | peak RSS MiB | index bytes/resource | database bytes/resource |');
    console.log('|---|---|---|---|---|---|---|---|---|---|---|');
    for (const r of rows) {
      console.log(`| ${r.store} | ${r.run} | ${r.validation} | ${r.resources} | ${r.failed} | ${r.seconds} | ${r.resourcesPerSecond} | ${r.importerResourcesPerSecond} | ${r.peakRssMiB} | ${r.indexBytesPerResource} | ${r.databaseBytesPerResource} |`);
    }
    if (levels.length === 2) {
      const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      for (const store of stores) {
        const rate = (level: string) => median(rows.filter((r) => r.store === store && r.validation === level).map((r) => r.resourcesPerSecond));
        console.log(`\n${store}: with validation ${rate('strict')} resources/s, without ${rate('off')}: ${((100 * rate('strict')) / rate('off')).toFixed(0)}% (median of ${values.runs} runs each)`);
      }
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
