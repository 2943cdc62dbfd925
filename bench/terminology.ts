/**
 * Terminology benchmark (CLI): ValueSet/$validate-code over HTTP against an is-a ValueSet on a
 * generated CodeSystem.
 *
 *   bun bench/terminology.ts [--concepts N] [--connections C] [--duration S] [--warmup S] [--json]
 *
 * Starts `cinder serve` as a child process on a fresh data directory (rate limits off), PUTs the
 * generated CodeSystem (load time), times the first $validate-code (cold cache: read, parse, index,
 * compile), then keeps C connections busy with POST $validate-code (Parameters body, half the codes
 * in the ValueSet) and reports requests/s and latency percentiles. The load generator runs in this
 * process, so on a small machine it competes with the server for CPU.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { BENCH_SYSTEM, BENCH_VALUE_SET, generatedCodeSystem, generatedIsAValueSet, isDescendant } from './lib/terminology.ts';

const USAGE = `Usage: bun bench/terminology.ts [options]

Options:
  --concepts N      concepts in the generated is-a hierarchy (default 100000)
  --connections C   concurrent connections (default 64)
  --duration S      measured seconds (default 10)
  --warmup S        unmeasured seconds before (default 2)
  --json            print the result as JSON
  --help            show this help`;

const Options = z.object({
  concepts: z.coerce.number().int().min(100).default(100_000),
  connections: z.coerce.number().int().min(1).max(1024).default(64),
  duration: z.coerce.number().positive().default(10),
  warmup: z.coerce.number().min(0).default(2),
  json: z.boolean().default(false),
});
type Options = z.infer<typeof Options>;

interface Server {
  base: string;
  fhir: string;
  clientId: string;
  clientSecret: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const probe = Bun.serve({ port: 0, fetch: () => new Response() });
  const port = probe.port as number;
  await probe.stop(true);
  return port;
}

/** `cinder serve` in a child process; the admin credentials come from its first-start banner. */
async function startServer(): Promise<Server> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cinder-bench-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = Bun.spawn(['bun', ...(process.env.BENCH_SERVER_PROF ? ['--cpu-prof', '--cpu-prof-dir=' + process.env.BENCH_SERVER_PROF] : []), join(import.meta.dir, '../src/main.ts'), 'serve'], {
    env: { ...process.env, CINDER_PORT: String(port), CINDER_HOST: '127.0.0.1', CINDER_BASE_URL: base, CINDER_DATA_DIR: dataDir, CINDER_RATE_LIMITS: 'off', CINDER_LOG_LEVEL: 'warn' },
    stdout: 'pipe',
    stderr: 'inherit',
  });
  let banner = '';
  const reader = child.stdout.getReader();
  while (!/client_secret:\s+\S+/.test(banner)) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`cinder serve exited before printing its credentials:\n${banner}`);
    banner += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const field = (name: string) => new RegExp(`${name}:\\s+(\\S+)`).exec(banner)?.[1] ?? '';
  for (let i = 0; i < 100 && !(await fetch(`${base}/healthz`).then((r) => r.ok, () => false)); i++) await Bun.sleep(50);
  return {
    base,
    fhir: field('FHIR base'),
    clientId: field('client_id'),
    clientSecret: field('client_secret'),
    async stop() {
      child.kill('SIGTERM');
      await child.exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function accessToken(s: Server): Promise<string> {
  const res = await fetch(`${s.base}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: `Basic ${btoa(`${s.clientId}:${s.clientSecret}`)}` },
    body: new URLSearchParams({ grant_type: 'client_credentials' }),
  });
  if (!res.ok) throw new Error(`token: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

async function put(s: Server, token: string, resource: { resourceType: string; id: string }): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${s.fhir}/${resource.resourceType}/${resource.id}`, {
    method: 'PUT',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' },
    body: JSON.stringify(resource),
  });
  if (!res.ok) throw new Error(`PUT ${resource.resourceType}/${resource.id}: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
  return performance.now() - started;
}

/** Request bodies for codes spread over the hierarchy, with the expected result. */
function requests(concepts: number): { body: string; expected: boolean }[] {
  return Array.from({ length: 1000 }, (_, k) => {
    const i = (k * 7919) % concepts;
    const parameter = [
      { name: 'url', valueUri: BENCH_VALUE_SET },
      { name: 'code', valueCode: `C${i}` },
      { name: 'system', valueUri: BENCH_SYSTEM },
    ];
    return { body: JSON.stringify({ resourceType: 'Parameters', parameter }), expected: isDescendant(i, 1) };
  });
}

async function validateOnce(s: Server, token: string, body: string): Promise<boolean> {
  const res = await fetch(`${s.fhir}/ValueSet/$validate-code`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' },
    body,
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`$validate-code: ${res.status} ${text}`);
  return text.includes('"valueBoolean":true');
}

interface LoadResult {
  requests: number;
  errors: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p99: number;
  max: number;
}

/** C connections, each sending its next request when the previous answer arrived. */
async function load(s: Server, token: string, o: Options, until: number, record: boolean): Promise<LoadResult> {
  const bodies = requests(o.concepts);
  const latencies: number[] = [];
  let errors = 0;
  const started = performance.now();
  const worker = async (w: number) => {
    for (let n = w; performance.now() < until; n += o.connections) {
      const r = bodies[n % bodies.length]!;
      const t0 = performance.now();
      try {
        if ((await validateOnce(s, token, r.body)) !== r.expected) errors++;
      } catch {
        errors++;
      }
      if (record) latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: o.connections }, (_, w) => worker(w)));
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return { requests: latencies.length, errors, seconds, perSecond: latencies.length / seconds, p50: at(0.5), p99: at(0.99), max: at(1) };
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      concepts: { type: 'string' },
      connections: { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) return (console.log(USAGE), 0);
  const o = Options.parse(values);
  const server = await startServer();
  try {
    const token = await accessToken(server);
    const cs = generatedCodeSystem(o.concepts);
    const loadMs = await put(server, token, cs);
    await put(server, token, generatedIsAValueSet('C1'));
    const [probe] = requests(o.concepts);
    let t0 = performance.now();
    await validateOnce(server, token, probe!.body);
    const coldMs = performance.now() - t0;
    t0 = performance.now();
    await validateOnce(server, token, probe!.body);
    const warmMs = performance.now() - t0;
    await load(server, token, o, performance.now() + o.warmup * 1000, false);
    const r = await load(server, token, o, performance.now() + o.duration * 1000, true);
    const result = { concepts: o.concepts, connections: o.connections, loadMs, coldFirstCallMs: coldMs, warmSingleCallMs: warmMs, ...r };
    if (o.json) console.log(JSON.stringify(result, null, 2));
    else {
      const ms = (v: number) => `${v.toFixed(2)} ms`;
      console.log(`CodeSystem of ${o.concepts} concepts: PUT ${ms(loadMs)}; first $validate-code (cold) ${ms(coldMs)}, second ${ms(warmMs)}`);
      console.log(`$validate-code, ${o.connections} connections, ${r.seconds.toFixed(1)} s: ${Math.round(r.perSecond)} requests/s, p50 ${ms(r.p50)}, p99 ${ms(r.p99)}, max ${ms(r.max)}, ${r.errors} errors`);
    }
    return r.errors === 0 ? 0 : 1;
  } finally {
    await server.stop();
  }
}

process.exit(await main(process.argv.slice(2)));
