/**
 * A server beside `cinder import`: `cinder serve` on a fresh SQLite file (or CINDER_DATABASE_URL), one
 * client reading `Patient/p` and one writing a new Patient, each after a pause, while `cinder import`
 * loads N generated patients into the same database from another process. Prints how many reads and
 * writes were answered during the import with their p50, p99 and longest latency, and the import's
 * own rate: what users of the server see while someone loads data.
 *
 *   bun bench/beside-import.ts [--patients N] [--read-pause MS] [--write-pause MS] [--json]
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { adminToken, startServer } from './lib/server.ts';

const root = resolve(import.meta.dir, '..');
const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    patients: { type: 'string', default: '1000' },
    'read-pause': { type: 'string', default: '2' },
    'write-pause': { type: 'string', default: '20' },
    json: { type: 'boolean', default: false },
  },
  strict: true,
});

const work = mkdtempSync(join(tmpdir(), 'cinder-bench-beside-'));
const data = join(work, 'data');
const g = Bun.spawnSync(['bun', join(root, 'bench/generate.ts'), '--patients', values.patients, '--out', data], { stdout: 'ignore', stderr: 'pipe' });
if (g.exitCode !== 0) throw new Error(`generate failed: ${g.stderr.toString()}`);
Bun.spawnSync(['sync']);

const server = await startServer();
const headers = { Authorization: `Bearer ${await adminToken(server)}`, 'Content-Type': 'application/fhir+json' };
const put = (id: string) => fetch(`${server.fhir}/Patient/${id}`, { method: 'PUT', headers, body: JSON.stringify({ resourceType: 'Patient', id }) });
await (await put('p')).arrayBuffer();

let importing = true;
/** Runs `request` after each pause until the import ends; the latencies, in ms. */
async function loop(pauseMs: number, request: (i: number) => Promise<Response>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; importing; i++) {
    const start = performance.now();
    const res = await request(i);
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`${res.status} during the import`);
    times.push(performance.now() - start);
    await Bun.sleep(pauseMs);
  }
  return times;
}

const importer = Bun.spawn(['bun', join(root, 'src/main.ts'), 'import', '--tenant', 'default', ...readdirSync(data).sort().map((f) => join(data, f))], {
  env: { ...process.env, CINDER_DATA_DIR: server.dataDir, CINDER_DATABASE_URL: server.databaseUrl, CINDER_VALIDATION: 'off' },
  stdout: 'pipe',
  stderr: 'pipe',
});
const reads = loop(Number(values['read-pause']), () => fetch(`${server.fhir}/Patient/p`, { headers }));
const writes = loop(Number(values['write-pause']), (i) => put(`w${i}`));
const [code, out] = await Promise.all([importer.exited, new Response(importer.stdout).text()]);
importing = false;
const [readTimes, writeTimes] = await Promise.all([reads, writes]);
await server.stop();
rmSync(work, { recursive: true, force: true });
if (code !== 0) throw new Error(`import failed: ${out}`);

function summary(times: number[]) {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (q: number) => Number(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(1));
  return { answered: sorted.length, p50ms: at(0.5), p99ms: at(0.99), maxMs: at(1) };
}
const result = { reads: summary(readTimes), writes: summary(writeTimes), import: out.trim().split('\n').pop() };
if (values.json) console.log(JSON.stringify(result));
else {
  console.log('| during the import | answered | p50 ms | p99 ms | longest ms |\n|---|---|---|---|---|');
  for (const [name, s] of [['reads', result.reads], ['writes', result.writes]] as const) console.log(`| ${name} | ${s.answered} | ${s.p50ms} | ${s.p99ms} | ${s.maxMs} |`);
  console.log(result.import);
}
