/**
 * What a `$import` costs the other requests of its server: `cinder serve` on a fresh SQLite file (or
 * CINDER_DATABASE_URL), an NDJSON file of N Observations served from this process, and one `$import` of it,
 * while `GET /healthz` is sent every `--every` ms (one at a time: the next leaves `--every` ms after the last
 * was sent, or at once when it took longer). Prints the import's duration (kick-off to the status's 200) and
 * the latencies of the health checks sent meanwhile (p50, p99, longest): the longest is the longest time the
 * server's event loop did not answer, within a few ms. `--runs` repeats it, each on a fresh server. With
 * `--update`, the file is imported once unmeasured, and what is measured is the import of the same Observations
 * with another value each: every line an update (a version written over its current one, in the batches'
 * concurrent updates), as a data set loaded again after a change is.
 *
 *   bun bench/import-stall.ts [--observations N] [--every MS] [--runs N] [--update] [--env K=V]... [--json]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { adminToken, startServer } from './lib/server.ts';

const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    observations: { type: 'string', default: '50000' },
    every: { type: 'string', default: '10' },
    runs: { type: 'string', default: '1' },
    update: { type: 'boolean', default: false },
    env: { type: 'string', multiple: true, default: [] },
    json: { type: 'boolean', default: false },
  },
  strict: true,
});
const count = Number(values.observations);
const every = Number(values.every);
const extraEnv = Object.fromEntries(values.env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));

/** An Observation of about 600 bytes, as a lab result is: coded, with a subject, a time and a quantity. */
function observation(i: number, shift = 0): string {
  return JSON.stringify({
    resourceType: 'Observation', id: `o${i}`, status: 'final',
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory', display: 'Laboratory' }] }],
    code: { coding: [{ system: 'http://loinc.org', code: '2339-0', display: 'Glucose [Mass/volume] in Blood' }], text: 'Glucose' },
    subject: { reference: `Patient/p${i % 1000}` },
    effectiveDateTime: new Date(Date.UTC(2020, 0, 1) + i * 60_000).toISOString(),
    issued: new Date(Date.UTC(2020, 0, 1) + i * 60_000 + 3_600_000).toISOString(),
    valueQuantity: { value: 70 + ((i + shift) % 60), unit: 'mg/dL', system: 'http://unitsofmeasure.org', code: 'mg/dL' },
  });
}

/** The `p`th percentile of `xs` (nearest rank). */
function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? 0;
}

const work = mkdtempSync(join(tmpdir(), 'cinder-bench-stall-'));
const file = join(work, 'observations.ndjson');
writeFileSync(file, Array.from({ length: count }, (_, i) => observation(i)).join('\n') + '\n');
const updated = join(work, 'updated.ndjson');
if (values.update) writeFileSync(updated, Array.from({ length: count }, (_, i) => observation(i, 1)).join('\n') + '\n');
const files = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: (req) => new Response(Bun.file(new URL(req.url).pathname === '/updated.ndjson' ? updated : file)) });

interface Run {
  run: number;
  importSeconds: number;
  checks: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** Polls an import's status until it is done; its resources counted, and those unchanged. */
async function imported(status: string, headers: Record<string, string>): Promise<{ count: number; unchanged: number }> {
  for (;;) {
    await Bun.sleep(100);
    const res = await fetch(status, { headers });
    if (res.status === 202) {
      await res.arrayBuffer();
      continue;
    }
    if (res.status !== 200) throw new Error(`status: ${res.status} ${await res.text()}`);
    const result = (await res.json()) as { output: { count: number; unchanged: number }[] };
    return { count: result.output.reduce((n, o) => n + o.count, 0), unchanged: result.output.reduce((n, o) => n + o.unchanged, 0) };
  }
}

async function once(run: number): Promise<Run> {
  const server = await startServer({ CINDER_IMPORT_ALLOW_PRIVATE: 'true', CINDER_VALIDATION: 'off', ...extraEnv });
  try {
    const headers = { Authorization: `Bearer ${await adminToken(server)}`, 'Content-Type': 'application/fhir+json', Prefer: 'respond-async' };
    const body = (path: string) => ({
      resourceType: 'Parameters',
      parameter: [
        { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
        { name: 'input', part: [{ name: 'type', valueCode: 'Observation' }, { name: 'url', valueUri: `http://127.0.0.1:${files.port}${path}` }] },
      ],
    });
    const kickOff = async (path: string) => {
      const kick = await fetch(`${server.fhir}/$import`, { method: 'POST', headers, body: JSON.stringify(body(path)) });
      if (kick.status !== 202) throw new Error(`kick-off: ${kick.status} ${await kick.text()}`);
      return kick.headers.get('content-location')!;
    };
    if (values.update) await imported(await kickOff('/observations.ndjson'), headers);
    const started = performance.now();
    const status = await kickOff(values.update ? '/updated.ndjson' : '/observations.ndjson');
    let importing = true;
    const latencies: number[] = [];
    const checks = (async () => {
      while (importing) {
        const sent = performance.now();
        const res = await fetch(`${server.base}/healthz`);
        await res.arrayBuffer();
        const took = performance.now() - sent;
        latencies.push(took);
        if (took < every) await Bun.sleep(every - took);
      }
    })();
    const result = await imported(status, headers);
    const importSeconds = (performance.now() - started) / 1000;
    importing = false;
    await checks;
    if (result.count !== count) throw new Error(`imported ${result.count} of ${count}`);
    if (values.update && result.unchanged !== 0) throw new Error(`${result.unchanged} of ${count} unchanged: not every line was an update`);
    return {
      run, importSeconds: Number(importSeconds.toFixed(2)), checks: latencies.length,
      p50Ms: Number(percentile(latencies, 50).toFixed(1)), p99Ms: Number(percentile(latencies, 99).toFixed(1)),
      maxMs: Number(Math.max(...latencies).toFixed(1)),
    };
  } finally {
    await server.stop();
  }
}

try {
  const rows: Run[] = [];
  for (let n = 1; n <= Number(values.runs); n++) rows.push(await once(n));
  if (values.json) console.log(JSON.stringify(rows, null, 2));
  else {
    console.log(`| run | Observations | import s | /healthz sent | p50 ms | p99 ms | longest ms |`);
    console.log('|---|---|---|---|---|---|---|');
    for (const r of rows) console.log(`| ${r.run} | ${count} | ${r.importSeconds} | ${r.checks} | ${r.p50Ms} | ${r.p99Ms} | ${r.maxMs} |`);
  }
} finally {
  await files.stop(true);
  rmSync(work, { recursive: true, force: true });
}
