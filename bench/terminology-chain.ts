/**
 * `$expand` down a chain of value sets each importing the next, against a chain a tenth as deep over ten times the
 * codes (the same work for the enumeration's budget, ENUMERATION_WORK_LIMIT), in one checkout's in-process app on
 * SQLite (wall time):
 *
 *   bun bench/terminology-chain.ts [<checkout>] [--depth 2000] [--codes 1000] [--rounds 5]
 *
 * The deep chain is `--depth` value sets over a CodeSystem of `--codes` codes, the shallow one a tenth as many over
 * ten times the codes; each ends in the code system and names a French supplement of it. Each round expands the first
 * ten codes of each, in French, after one warm-up round that also compiles them. Prints the median ms of each and the
 * median of the rounds' ratios deep / shallow: near 1 when an expansion costs its work, not its depth times it (46-48 s
 * against a few for 2,000 levels, when each level copied the record of what its codes were drawn through; the test
 * test/unit/terminology/import-chain.test.ts guards that record's shape).
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { depth: { type: 'string', default: '2000' }, codes: { type: 'string', default: '1000' }, rounds: { type: 'string', default: '5' } },
});
const depth = Number(values.depth);
const codes = Number(values.codes);
const rounds = Number(values.rounds);
if (positionals.length > 1 || !(depth >= 10) || !(codes >= 10) || !(rounds >= 1)) {
  console.error('usage: bun bench/terminology-chain.ts [<checkout>] [--depth 2000] [--codes 1000] [--rounds 5]');
  process.exit(2);
}
const dir = resolve(positionals[0] ?? `${import.meta.dir}/..`);

type Json = Record<string, any>;
const SUPPLEMENT_NEEDED = 'http://hl7.org/fhir/StructureDefinition/valueset-supplement';

const { createTestApp, fhirInit } = await import(`${dir}/test/helpers/app.ts`);
const t = await createTestApp({ env: { CINDER_RATE_LIMITS: 'off' } });
const token: string = await t.token();
const send = async (method: string, path: string, body: Json): Promise<Json> => {
  const res: Response = await t.request(`${t.fhir()}${path}`, fhirInit(token, method, body));
  const out = (await res.json()) as Json;
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(out).slice(0, 500)}`);
  return out;
};

/** A chain `name-0` ... `name-{levels-1}` over a code system of `n` codes with a French supplement; its first link's URL. */
async function chain(name: string, levels: number, n: number): Promise<string> {
  const system = `http://cinder.test/CodeSystem/${name}`;
  const link = (i: number) => `http://cinder.test/ValueSet/${name}-${i}`;
  await send('PUT', `/CodeSystem/${name}`, {
    resourceType: 'CodeSystem', id: name, url: system, status: 'active', content: 'complete', language: 'en',
    concept: Array.from({ length: n }, (_, i) => ({ code: `c${i}`, display: `Code ${i}` })),
  });
  await send('PUT', `/CodeSystem/${name}-fr`, {
    resourceType: 'CodeSystem', id: `${name}-fr`, url: `${system}-fr`, status: 'active', content: 'supplement', supplements: system, language: 'fr',
    concept: [{ code: 'c0', display: 'Code zéro' }],
  });
  const entries = Array.from({ length: levels }, (_, i) => {
    const last = i === levels - 1;
    const resource = {
      resourceType: 'ValueSet', id: `${name}-${i}`, url: link(i), status: 'active',
      ...(last ? { extension: [{ url: SUPPLEMENT_NEEDED, valueCanonical: `${system}-fr` }] } : {}),
      compose: { include: [last ? { system } : { valueSet: [link(i + 1)] }] },
    };
    return { resource, request: { method: 'PUT', url: `ValueSet/${name}-${i}` } };
  });
  for (let from = 0; from < entries.length; from += 500) await send('POST', '', { resourceType: 'Bundle', type: 'batch', entry: entries.slice(from, from + 500) });
  return link(0);
}

/** ms of one `$expand` of the first ten codes, in French; checks the supplement applied. */
async function expand(url: string): Promise<number> {
  const body = { resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: url }, { name: 'count', valueInteger: 10 }, { name: 'displayLanguage', valueCode: 'fr' }] };
  const started = performance.now();
  const out = await send('POST', '/ValueSet/$expand', body);
  const ms = performance.now() - started;
  if (out.expansion?.contains?.[0]?.display !== 'Code zéro') throw new Error(`${url}: the supplement did not apply`);
  return ms;
}

try {
  const deep = await chain('deep', depth, codes);
  const shallow = await chain('shallow', depth / 10, codes * 10);
  const times = { deep: [] as number[], shallow: [] as number[] };
  for (let round = 0; round <= rounds; round++) {
    const d = await expand(deep);
    const s = await expand(shallow);
    if (round > 0) (times.deep.push(d), times.shallow.push(s));
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)]!;
  console.log(`\n### ${dir}, ${rounds} rounds (median ms; deep / shallow: median of the rounds' ratios)\n`);
  console.log('| deep | shallow | deep / shallow |');
  console.log('|---|---|---:|');
  console.log(`| ${depth} levels, ${codes} codes: ${median(times.deep).toFixed(1)} | ${depth / 10} levels, ${codes * 10} codes: ${median(times.shallow).toFixed(1)} | ${median(times.deep.map((d, r) => d / times.shallow[r]!)).toFixed(3)} |`);
} finally {
  await t.close();
}
process.exit(0);
