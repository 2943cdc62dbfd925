/** The benchmarks' shared data set: `bench/generate.ts` patients loaded with `cinder import` into a tenant. */
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createTenant } from '../../src/auth/admin.ts';
import { systemClock } from '../../src/clock.ts';
import { openStore } from '../../src/store/open.ts';

/** The tenant the export and search benchmarks load into (and reuse when it exists). */
export const BENCH_TENANT = 'bench';

/** Runs a command to completion, failing loudly. */
export async function run(cmd: string[], env: Record<string, string> = {}): Promise<void> {
  const p = Bun.spawn(cmd, { env: { ...process.env, ...env }, stdout: 'ignore', stderr: 'inherit' });
  if ((await p.exited) !== 0) throw new Error(`${cmd.join(' ')} failed`);
}

/**
 * Migrates the database at `url` and loads N generated patients (seed 1) and a Group `bench-group` of
 * the first M with `cinder import`, unless the tenant exists already: `bench/generate.ts` writes NDJSON
 * into `workDir`, then the importer (worker-prepared, bulk transactions) loads it, as an operator would.
 * Reports on stderr under `name`.
 */
export async function loadDataset(name: string, url: string, patients: number, groupPatients: number, workDir: string): Promise<void> {
  process.stderr.write(`${name}: loading ${patients.toLocaleString('en')} patients (skipped when already loaded)\n`);
  const store = openStore(url);
  try {
    await store.migrate();
    if (await store.tenants.get(BENCH_TENANT)) return;
    await createTenant(store, systemClock, BENCH_TENANT);
  } finally {
    await store.close();
  }
  const started = performance.now();
  const dataDir = join(workDir, `data-${patients}`);
  const root = resolve(import.meta.dir, '../..');
  await run(['bun', join(root, 'bench/generate.ts'), '--patients', String(patients), '--seed', '1', '--out', dataDir]);
  const members = readFileSync(join(dataDir, 'Patient.ndjson'), 'utf8').split('\n', groupPatients)
    .map((line) => ({ entity: { reference: `Patient/${(JSON.parse(line) as { id: string }).id}` } }));
  const group = join(dataDir, 'group.json');
  writeFileSync(group, JSON.stringify({ resourceType: 'Group', id: 'bench-group', type: 'person', actual: true, member: members }));
  const files = readdirSync(dataDir).filter((f) => f.endsWith('.ndjson')).map((f) => join(dataDir, f));
  await run(['bun', join(root, 'src/main.ts'), 'import', '--tenant', BENCH_TENANT, ...files, group], { CINDER_DATABASE_URL: url, CINDER_LOG_LEVEL: 'warn' });
  rmSync(dataDir, { recursive: true, force: true });
  process.stderr.write(`  loaded in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}
