/**
 * Bulk export benchmark: system export (whole, and with the `_typeFilter` bulk clients send) and Group
 * export from SQLite and/or PostgreSQL.
 *
 *   bun bench/export.ts [--patients N] [--group-patients M] [--sqlite PATH] [--postgres URL] [--out DIR] [--json]
 *
 * Loads `bench/generate.ts` data (N patients, about 100 resources each) into each database once (a
 * database that already holds the tenant `bench` is reused), then runs each export in a fresh child
 * process through the same pipeline as a worker (snapshot scan -> NDJSON files), reads every file back
 * through the storage as a download does, and reports resources/s of the export, the download time and
 * the child's peak RSS over both (VmHWM, reset after the kick-off, which runs in the HTTP process in
 * production). The filtered system export applies TYPE_FILTERS (Observation, Condition,
 * MedicationRequest, Encounter narrowed by search; every other type whole). The Group export covers
 * the first M patients. `each resource validated` is the system export of a tenant that may hold
 * unvalidated resources (TenantRepo.validationDebt), which validates every resource it reads. On PostgreSQL the system export also runs into the `postgres` export storage
 * (files in the database), beside `file:`.
 */
import { parseArgs } from 'node:util';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import { systemClock } from '../src/clock.ts';
import { operatorAccess } from '../src/fhir/access.ts';
import { kickOff } from '../src/export/kickoff.ts';
import { runJob } from '../src/export/run-job.ts';
import { runSettings } from '../src/export/runner.ts';
import { createFileSink } from '../src/export/sink-file.ts';
import { openSink, type ExportSink } from '../src/export/sink.ts';
import type { JobProgress } from '../src/export/spec.ts';
import { readProgress } from '../src/export/job-data.ts';
import { loadConfig } from '../src/config.ts';
import { silentLogger } from '../src/log.ts';
import { openStore } from '../src/store/open.ts';
import { BENCH_TENANT, loadDataset } from './lib/dataset.ts';


type Storage = 'file' | 'postgres';

interface Result {
  database: string;
  export: string;
  storage: Storage;
  resources: number;
  seconds: number;
  /** Reading every file back through the storage, as the downloads do. */
  downloadSeconds: number;
  resourcesPerSecond: number;
  megabytes: number;
  peakRssMb: number;
  /** Peak RSS over the export and the read-back. */
  peakWithDownloadMb: number;
}

/** Resets VmHWM (Linux `clear_refs` 5); harmless where unsupported. */
function resetPeakRss(): void {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
  } catch {
    // not Linux, or not permitted: the peak then includes the kick-off
  }
}

function peakRssMb(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) / 1024 : process.memoryUsage().rss / 1048576;
}

/** Reads every byte of every file (what the downloads cost the storage); returns the bytes read. */
async function readBack(sink: ExportSink, progress: JobProgress): Promise<number> {
  let bytes = 0;
  for (const f of progress.files) for await (const chunk of sink.read(f.key)) bytes += chunk.byteLength;
  return bytes;
}

/**
 * The `_typeFilter` of the filtered system export: what bulk clients send (FHIR search on the types
 * that are large or need narrowing); the other types are exported whole.
 */
const TYPE_FILTERS = ['Observation?category=laboratory', 'Condition?clinical-status=active', 'MedicationRequest?status=active', 'Encounter?date=ge2020-01-01'];

/** `unvalidated`: the system export of a tenant marked as maybe holding unvalidated resources, which validates each one. */
type Level = 'system' | 'filtered' | 'group' | 'unvalidated';

/** Child process: one export, timed from the first page to the completed job, then its files read back. */
async function child(databaseUrl: string, variant: Level, out: string, storage: Storage): Promise<void> {
  const level = variant === 'group' ? 'group' : 'system';
  const store = openStore(databaseUrl);
  const sink = storage === 'postgres' ? openSink('postgres', {}, store) : createFileSink(out);
  const settings = runSettings(loadConfig({ CINDER_EXPORT_FILE_MAX_BYTES: String(1024 * 1024 * 1024) }));
  const owner = `bench:${process.pid}`;
  const typeFilters = variant === 'filtered' ? TYPE_FILTERS : [];
  const input = { method: 'GET' as const, outputFormat: [], since: [], types: [], typeFilters, elements: [], patients: [], includeAssociatedData: [], unknown: [], empty: [] };
  const id = await kickOff({ store, clock: systemClock, maxJobsPerClient: Number.MAX_SAFE_INTEGER, settleMs: 0 }, {
    tenant: BENCH_TENANT, access: operatorAccess, level, input, lenient: false, requestUrl: 'https://bench.invalid/fhir/$export', claim: { owner, leaseMs: settings.leaseMs },
    ...(level === 'group' ? { groupId: 'bench-group' } : {}),
  });
  const job = (await store.exports.jobs.get(BENCH_TENANT, id))!;
  if (variant === 'unvalidated') await store.tenants.markUnvalidated(BENCH_TENANT);
  // Kick-off runs in the HTTP process, the export in a worker: measure the export's peak alone.
  resetPeakRss();
  const started = performance.now();
  const prefix = `bench/${id}`;
  const outcome = await runJob({ ...settings, settleMs: 0, store, sink, clock: systemClock, log: silentLogger, owner, keyPrefix: () => prefix }, job);
  const seconds = (performance.now() - started) / 1000;
  if (outcome !== 'completed') throw new Error(`export ${outcome}`);
  if (variant === 'unvalidated') await store.tenants.clearValidationDebt(BENCH_TENANT, (await store.tenants.validationDebt(BENCH_TENANT))!);
  const progress = readProgress((await store.exports.jobs.get(BENCH_TENANT, id))!);
  const exportPeak = peakRssMb();
  const downloadStarted = performance.now();
  const bytes = await readBack(sink, progress);
  const downloadSeconds = (performance.now() - downloadStarted) / 1000;
  if (bytes !== progress.files.reduce((n, f) => n + f.bytes, 0)) throw new Error('read back a different number of bytes than written');
  const peak = { peakRssMb: exportPeak, peakWithDownloadMb: peakRssMb() };
  await sink.removePrefix(prefix);
  await store.exports.cleanup.remove(id);
  await store.close();
  process.stdout.write(JSON.stringify({ resources: progress.exported, seconds, downloadSeconds, bytes, ...peak }) + '\n');
}

async function measure(database: string, url: string, level: Level, outRoot: string, storage: Storage = 'file'): Promise<Result> {
  const out = join(outRoot, `${database}-${level}`);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const proc = Bun.spawn(['bun', import.meta.path, '--child', level, '--url', url, '--out', out, '--storage', storage], { stdout: 'pipe', stderr: 'inherit' });
  const text = await new Response(proc.stdout).text();
  if ((await proc.exited) !== 0) throw new Error(`${database} ${level} export failed`);
  const r = JSON.parse(text) as { resources: number; seconds: number; downloadSeconds: number; bytes: number; peakRssMb: number; peakWithDownloadMb: number };
  rmSync(out, { recursive: true, force: true });
  return {
    database, export: { system: 'system', filtered: 'system, _typeFilter', group: 'Group', unvalidated: 'system, each resource validated' }[level], storage, resources: r.resources, seconds: Number(r.seconds.toFixed(2)),
    downloadSeconds: Number(r.downloadSeconds.toFixed(2)),
    resourcesPerSecond: Math.round(r.resources / r.seconds), megabytes: Math.round(r.bytes / 1048576), peakRssMb: Math.round(r.peakRssMb), peakWithDownloadMb: Math.round(r.peakWithDownloadMb),
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      patients: { type: 'string', default: '100' },
      'group-patients': { type: 'string' },
      sqlite: { type: 'string' },
      postgres: { type: 'string' },
      out: { type: 'string', default: join(tmpdir(), 'cinder-bench-export') },
      json: { type: 'boolean', default: false },
      child: { type: 'string' },
      url: { type: 'string' },
      storage: { type: 'string', default: 'file' },
    },
  });
  if (values.child) return child(values.url!, values.child as Level, values.out!, values.storage as Storage);
  const patients = Number(values.patients);
  const groupPatients = Number(values['group-patients'] ?? Math.min(patients, 10_000));
  const targets: [string, string][] = [['sqlite', 'sqlite:' + resolve(values.sqlite ?? join(values.out!, `bench-${patients}.db`))]];
  if (values.postgres) targets.push(['postgres', values.postgres]);
  const results: Result[] = [];
  for (const [name, url] of targets) {
    await loadDataset(name, url, patients, groupPatients, values.out!);
    for (const level of ['system', 'filtered', 'group', 'unvalidated'] as const) results.push(await measure(name, url, level, values.out!));
    if (name === 'postgres') results.push(await measure(name, url, 'system', values.out!, 'postgres'));
  }
  if (values.json) process.stdout.write(JSON.stringify(results, null, 2) + '\n');
  else console.table(results);
}

await main();
