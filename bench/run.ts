/**
 * `bun run bench`: every benchmark in sequence, each printing its own table.
 *
 *   bun run bench [--quick]
 *
 * Full sizes (about 15 minutes on 2 cores): HTTP hot paths with wrk (bench/http.ts), import of 100k
 * generated resources into SQLite and PostgreSQL (bench/import.ts), system export of 1,000,000
 * resources and Group export of 10,000 patients (bench/export.ts), terminology load and cold-cache
 * latency on a 100,000-concept hierarchy (bench/terminology.ts). `--quick` runs small sizes to check
 * that everything works. PostgreSQL is expected at CINDER_BENCH_POSTGRES_URL
 * (default postgres://postgres@127.0.0.1:5432/test).
 */
import { join } from 'node:path';

const quick = process.argv.includes('--quick');
const dir = import.meta.dir;
const steps: [string, string[]][] = [
  ['HTTP hot paths (wrk)', ['http.ts', '--seconds', quick ? '3' : '10', '--concepts', quick ? '10000' : '100000']],
  ['import', ['import.ts', '--patients', quick ? '100' : '1000', '--store', 'both']],
  ['export', ['export.ts', '--patients', quick ? '200' : '10000', '--group-patients', quick ? '100' : '10000']],
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
process.exit(failed ? 1 : 0);
