/**
 * What reading a FHIR XML request body costs against the same content as FHIR JSON, per MB:
 *
 *   bun bench/xml-parse.ts [--rounds N] [--against CHECKOUT]
 *
 * The content: the specification's JSON examples (npm `hl7.fhir.r4.examples`, 5,000 of them, every
 * resource type) written as FHIR XML by the REST API's writer (toFhirXml, pretty-printed), keeping those
 * the parser reads back to the same JSON. Three sizes: one resource at a time (the examples of the
 * fixtures' 44 types, each read alone, summed), a transaction Bundle of about 1 MB, and one of about
 * 13.5 MB (PUT entries, the examples repeated with new ids). Each is read as a request body is:
 * parseFhirXml for the XML (src/http/body.ts), parseJson for the JSON; the large Bundle is also read as
 * `cinder import` streams it (streamFhirXml in 64 KiB chunks), with the longest single `push` (the
 * event loop held by one chunk) recorded.
 *
 * Rounds alternate the order of the cases (the first two discarded as warm-up); prints the median,
 * lowest and highest ms and the median ms/MB (MB of the XML text) of each. `--against DIR` loads a second
 * checkout's src/fhir/xml (a git worktree of another commit) into the same process and alternates the two
 * XML readers A B, B A, ... on the same texts: each round's ratio this/other, and their median.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseJson } from '../src/fhir/resource.ts';
import { toFhirXml } from '../src/fhir/xml/to-xml.ts';
import { median } from './lib/stats.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '12' }, against: { type: 'string' } } });
const ROUNDS = Number(values.rounds);
const here = resolve(import.meta.dir, '..');

interface Reader {
  name: string;
  parse: (text: string) => unknown;
  stream: (text: string) => { entries: number; longest: number };
}

async function reader(dir: string, name: string): Promise<Reader> {
  const { parseFhirXml } = await import(`${dir}/src/fhir/xml/from-xml.ts`);
  const { streamFhirXml } = await import(`${dir}/src/fhir/xml/from-xml-stream.ts`);
  return {
    name,
    parse: parseFhirXml,
    stream(text) {
      const s = streamFhirXml({ what: 'The resource' });
      let entries = 0;
      let longest = 0;
      const CHUNK = 65_536;
      for (let at = 0; at <= text.length; at += CHUNK) {
        const started = performance.now();
        const got = at + CHUNK > text.length ? [...s.push(text.slice(at)), ...s.end()] : s.push(text.slice(at, at + CHUNK));
        longest = Math.max(longest, performance.now() - started);
        for (const e of got) {
          if (e.error) throw e.error;
          entries++;
        }
      }
      return { entries, longest };
    },
  };
}

const mine = await reader(here, 'this checkout');
const other = values.against ? await reader(resolve(values.against), values.against) : undefined;

// The examples that survive XML both ways (a few use what toFhirXml and the reader do not agree on: skipped).
const dir = join(here, 'node_modules/hl7.fhir.r4.examples');
const examples: Record<string, unknown>[] = [];
for (const file of readdirSync(dir).sort()) {
  if (!file.endsWith('.json') || file === 'package.json' || file.startsWith('.')) continue;
  let r: Record<string, unknown>;
  try {
    r = JSON.parse(readFileSync(join(dir, file), 'utf8'));
  } catch {
    continue;
  }
  if (typeof r.resourceType !== 'string' || typeof r.id !== 'string' || r.resourceType === 'Bundle') continue;
  try {
    const back = mine.parse(toFhirXml(r, true));
    if (JSON.stringify(back) === JSON.stringify(parseJson(JSON.stringify(r)))) examples.push(r);
  } catch {
    // Not read back the same: left out.
  }
}

function bundle(targetBytes: number): Record<string, unknown> {
  const entry: unknown[] = [];
  let bytes = 0;
  for (let i = 0; bytes < targetBytes; i++) {
    const r: Record<string, unknown> = { ...examples[i % examples.length]!, id: `e${i}` };
    const e = { fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, resource: r, request: { method: 'PUT', url: `${r.resourceType}/e${i}` } };
    entry.push(e);
    bytes += toFhirXml(r, true).length + 200;
  }
  return { resourceType: 'Bundle', type: 'transaction', entry };
}

const fixtures = new Set(readdirSync(join(here, 'test/fixtures/r4-xml')).filter((f) => f.endsWith('.xml')).map((f) => f.split('-')[0]!.toLowerCase()));
const singles = examples.filter((r, i) => fixtures.has((r.resourceType as string).toLowerCase()) && examples.findIndex((o) => o.resourceType === r.resourceType) === i);

interface Case {
  name: string;
  xml: string[];
  json: string[];
  mb: number;
}
const cases: Case[] = [
  { name: `${singles.length} single resources`, xml: singles.map((r) => toFhirXml(r, true)), json: singles.map((r) => JSON.stringify(r)), mb: 0 },
  ...[1_000_000, 13_500_000].map((size) => {
    const b = bundle(size);
    return { name: `transaction Bundle of ${(b.entry as unknown[]).length} entries`, xml: [toFhirXml(b, true)], json: [JSON.stringify(b)], mb: 0 };
  }),
];
for (const c of cases) c.mb = c.xml.reduce((n, x) => n + Buffer.byteLength(x), 0) / 1e6;
const large = cases[cases.length - 1]!;

const time = (f: () => void): number => {
  const started = performance.now();
  f();
  return performance.now() - started;
};
type Row = { ms: number[]; extra: number[] };
const rows = new Map<string, Row>();
const record = (key: string, ms: number, extra = 0) => {
  let r = rows.get(key);
  if (r === undefined) rows.set(key, (r = { ms: [], extra: [] }));
  r.ms.push(ms);
  r.extra.push(extra);
};
const ratios = new Map<string, number[]>();

const readers = other ? [mine, other] : [mine];
for (let round = 0; round < ROUNDS + 2; round++) {
  const warm = round < 2;
  for (const c of round % 2 ? cases : [...cases].reverse()) {
    const json = time(() => { for (const t of c.json) parseJson(t); });
    const per: Record<string, number> = {};
    for (const r of round % 2 ? readers : [...readers].reverse()) {
      per[r.name] = time(() => { for (const t of c.xml) r.parse(t); });
      if (!warm) record(`${c.name}: XML, ${r.name}`, per[r.name]!);
    }
    if (!warm) record(`${c.name}: JSON`, json);
    if (!warm && other) (ratios.get(c.name) ?? ratios.set(c.name, []).get(c.name)!).push(per[mine.name]! / per[other.name]!);
  }
  const perStream: Record<string, number> = {};
  for (const r of round % 2 ? readers : [...readers].reverse()) {
    let longest = 0;
    perStream[r.name] = time(() => { longest = r.stream(large.xml[0]!).longest; });
    if (!warm) record(`${large.name}, streamed: XML, ${r.name}`, perStream[r.name]!, longest);
  }
  if (!warm && other) (ratios.get(`${large.name}, streamed`) ?? ratios.set(`${large.name}, streamed`, []).get(`${large.name}, streamed`)!).push(perStream[mine.name]! / perStream[other.name]!);
}

console.log(`${examples.length} examples read back the same; ${ROUNDS} rounds (2 more discarded), Bun ${Bun.version}`);
console.log('| case | MB (XML) | median ms | lowest–highest ms | median ms/MB | longest push ms |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const [key, r] of rows) {
  const c = cases.find((c) => key.startsWith(c.name))!;
  const mb = c.mb;
  const ms = median(r.ms);
  const extra = key.includes('streamed') ? median(r.extra).toFixed(1) : '';
  console.log(`| ${key} | ${mb.toFixed(2)} | ${ms.toFixed(1)} | ${Math.min(...r.ms).toFixed(1)}–${Math.max(...r.ms).toFixed(1)} | ${(ms / mb).toFixed(1)} | ${extra} |`);
}
if (other) {
  console.log(`\n| case | XML ratio this/${other.name}: median | lowest–highest |`);
  console.log('|---|---:|---:|');
  for (const [name, xs] of ratios) console.log(`| ${name} | ${median(xs).toFixed(3)} | ${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)} |`);
}
