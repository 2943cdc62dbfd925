/**
 * `bun run bench`: every benchmark in sequence, each printing its own table.
 *
 *   bun run bench [--quick]
 *
 * Full sizes (about 20 minutes on 2 cores): HTTP hot paths with wrk beside the issues' bare reference
 * endpoints (bench/http.ts), raw-row reference rates (bench/reference.ts), import of 100k
 * generated resources into SQLite and PostgreSQL (bench/import.ts), a server's reads and writes during
 * such an import into its SQLite file (bench/beside-import.ts), system export of 1,000,000
 * resources and Group export of 10,000 patients (bench/export.ts), a mix of FHIR searches on the same
 * 1,000,000 resources (bench/search.ts), validation cost beside @medplum/core and the FHIRPath engine
 * beside FHIRPath.js (bench/validate.ts, bench/fhirpath.ts), terminology load and cold-cache
 * latency on a 100,000-concept hierarchy (bench/terminology.ts), a 32 MiB Binary in and out
 * (bench/binary.ts), a search of 1,000 ids among 5,000 and 50,000 Binaries on both databases
 * (bench/id-lists.ts), negated and driven searches among 20,000 Conditions never analysed
 * (bench/unanalysed.ts). `--quick` runs small sizes to check
 * that everything works. PostgreSQL is expected at CINDER_BENCH_POSTGRES_URL
 * (default postgres://postgres@127.0.0.1:5432/test).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';

const quick = process.argv.includes('--quick');
const dir = import.meta.dir;
const server = process.env.CINDER_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
// The export benchmark loads its data into a database of its own, dropped at the end.
const exportDb = `cinder_bench_${process.pid}`;
const admin = postgres(server, { max: 1, onnotice: () => undefined });
await admin.unsafe(`CREATE DATABASE ${exportDb}`);
const exportUrl = Object.assign(new URL(server), { pathname: '/' + exportDb }).toString();
const exportOut = mkdtempSync(join(tmpdir(), 'cinder-bench-export-'));
const steps: [string, string[]][] = [
  ['HTTP hot paths (wrk)', ['http.ts', '--seconds', quick ? '3' : '10', '--concepts', quick ? '10000' : '100000']],
  ['HTTP hot paths, CINDER_PROCESSES=2 (wrk)', ['http.ts', '--seconds', quick ? '3' : '10', '--concepts', quick ? '10000' : '100000', '--processes', '2', '--only', 'read,basic,validate']],
  ['import reference: raw 1 KB rows (SQLite inserts, PostgreSQL COPY)', ['reference.ts', '--rows', quick ? '10000' : '100000']],
  ['import', ['import.ts', '--patients', quick ? '100' : '1000', '--store', 'both']],
  ['a server beside an import (SQLite)', ['beside-import.ts', '--patients', quick ? '100' : '1000']],
  ['export', ['export.ts', '--patients', quick ? '200' : '10000', '--group-patients', quick ? '100' : '10000', '--postgres', exportUrl, '--out', exportOut]],
  // Reuses the databases the export benchmark loaded (same --patients and --out).
  ['search (wrk)', ['search.ts', '--patients', quick ? '200' : '10000', '--seconds', quick ? '2' : '10', '--postgres', exportUrl, '--out', exportOut]],
  ['id lists: 1,000 ids among Binaries of two sizes', ['id-lists.ts', join(dir, '..'), '--sizes', quick ? '2000,10000' : '5000,50000', '--rounds', quick ? '3' : '15']],
  ['searches on tables never analysed: Conditions', ['unanalysed.ts', join(dir, '..'), '--sizes', quick ? '2000' : '20000', '--rounds', quick ? '2' : '5']],
  ['Binary native content, 32 MiB', ['binary.ts', '--mib', quick ? '4' : '32', '--runs', quick ? '1' : '3']],
  ['validation beside @medplum/core', ['validate.ts', '--rounds', quick ? '200' : '5000']],
  ['FHIRPath invariants beside FHIRPath.js', ['fhirpath.ts']],
  ['terminology load and cold cache', ['terminology.ts', '--concepts', quick ? '10000' : '100000', '--duration', quick ? '2' : '5']],
];

let failed = 0;
for (const [title, args] of steps) {
  console.log(`\n## ${title}\n`);
  const p = Bun.spawn(['bun', join(dir, args[0]!), ...args.slice(1)], { stdout: 'inherit', stderr: 'inherit' });
  if ((await p.exited) !== 0) {
    failed++;
    console.log(`(${title} failed)`);
  }
}
rmSync(exportOut, { recursive: true, force: true });
await admin.unsafe(`DROP DATABASE IF EXISTS ${exportDb}`);
await admin.end();
process.exit(failed ? 1 : 0);
