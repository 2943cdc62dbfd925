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
 * process, so on a small machine it competes with the server for CPU. BENCH_BUN_FLAGS adds flags to
 * the server's `bun` (e.g. `--cpu-prof --cpu-prof-dir=DIR`).
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { adminToken, freePort, startServer, type BenchServer } from './lib/server.ts';
import { BENCH_SYSTEM, BENCH_VALUE_SET, generatedCodeSystem, generatedIsAValueSet, isDescendant } from './lib/terminology.ts';

const USAGE = `Usage: bun bench/terminology.ts [options]

Options:
  --concepts N      concepts in the generated is-a hierarchy (default 100000)
  --connections C   concurrent connections (default 64)
  --duration S      measured seconds (default 10)
  --warmup S        unmeasured seconds before (default 2)
  --baseline        also measure a bare Bun endpoint (one Set lookup) with the same client
  --json            print the result as JSON
  --help            show this help`;

const Options = z.object({
  concepts: z.coerce.number().int().min(100).default(100_000),
  connections: z.coerce.number().int().min(1).max(1024).default(64),
  duration: z.coerce.number().positive().default(10),
  warmup: z.coerce.number().min(0).default(2),
  baseline: z.boolean().default(false),
  json: z.boolean().default(false),
});
type Options = z.infer<typeof Options>;

async function put(s: BenchServer, token: string, resource: { resourceType: string; id: string }): Promise<number> {
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

type Send = (body: string) => Promise<boolean>;

/** POST $validate-code; true when the answer's result is true. */
function validator(s: BenchServer, token: string): Send {
  const headers = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' };
  return async (body) => {
    const res = await fetch(`${s.fhir}/ValueSet/$validate-code`, { method: 'POST', headers, body });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`$validate-code: ${res.status} ${text}`);
    return text.includes('"valueBoolean":true');
  };
}

/** A bare Bun endpoint answering the same bodies with one Set lookup: the client's ceiling. */
async function baselineServer(concepts: number): Promise<{ send: Send; stop: () => void }> {
  const port = await freePort();
  const code = `const member = new Set(${JSON.stringify(requests(concepts).filter((r) => r.expected).map((r) => JSON.parse(r.body).parameter[1].valueCode))});
Bun.serve({ port: ${port}, hostname: '127.0.0.1', fetch: async (req) => {
  const p = await req.json();
  return Response.json({ resourceType: 'Parameters', parameter: [{ name: 'result', valueBoolean: member.has(p.parameter[1].valueCode) }] });
} });
console.log('ready');`;
  const child = Bun.spawn(['bun', '-e', code], { stdout: 'pipe', stderr: 'inherit' });
  await child.stdout.getReader().read();
  return {
    send: async (body) => (await (await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body })).text()).includes('"valueBoolean":true'),
    stop: () => child.kill(),
  };
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
async function load(send: Send, o: Options, until: number, record: boolean): Promise<LoadResult> {
  const bodies = requests(o.concepts);
  const latencies: number[] = [];
  let errors = 0;
  const started = performance.now();
  const worker = async (w: number) => {
    for (let n = w; performance.now() < until; n += o.connections) {
      const r = bodies[n % bodies.length]!;
      const t0 = performance.now();
      try {
        if ((await send(r.body)) !== r.expected) errors++;
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

async function measure(send: Send, o: Options): Promise<LoadResult> {
  await load(send, o, performance.now() + o.warmup * 1000, false);
  return load(send, o, performance.now() + o.duration * 1000, true);
}

async function measureBaseline(o: Options): Promise<LoadResult> {
  const bare = await baselineServer(o.concepts);
  try {
    return await measure(bare.send, o);
  } finally {
    bare.stop();
  }
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
      baseline: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) return (console.log(USAGE), 0);
  const o = Options.parse(values);
  const server = await startServer();
  try {
    const token = await adminToken(server);
    const cs = generatedCodeSystem(o.concepts);
    const loadMs = await put(server, token, cs);
    await put(server, token, generatedIsAValueSet('C1'));
    const [probe] = requests(o.concepts);
    const send = validator(server, token);
    let t0 = performance.now();
    await send(probe!.body);
    const coldMs = performance.now() - t0;
    t0 = performance.now();
    await send(probe!.body);
    const warmMs = performance.now() - t0;
    const r = await measure(send, o);
    const baseline = o.baseline ? await measureBaseline(o) : undefined;
    const result = { concepts: o.concepts, connections: o.connections, loadMs, coldFirstCallMs: coldMs, warmSingleCallMs: warmMs, ...r, baseline };
    if (o.json) console.log(JSON.stringify(result, null, 2));
    else {
      const ms = (v: number) => `${v.toFixed(2)} ms`;
      console.log(`CodeSystem of ${o.concepts} concepts: PUT ${ms(loadMs)}; first $validate-code (cold) ${ms(coldMs)}, second ${ms(warmMs)}`);
      const line = (what: string, x: LoadResult) =>
        `${what}, ${o.connections} connections, ${x.seconds.toFixed(1)} s: ${Math.round(x.perSecond)} requests/s, p50 ${ms(x.p50)}, p99 ${ms(x.p99)}, max ${ms(x.max)}, ${x.errors} errors`;
      console.log(line('$validate-code', r));
      if (baseline !== undefined) console.log(line('bare Bun endpoint (same client)', baseline));
    }
    return r.errors === 0 ? 0 : 1;
  } finally {
    await server.stop();
  }
}

process.exit(await main(process.argv.slice(2)));
