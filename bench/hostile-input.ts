/**
 * What crafted request bodies cost: inputs whose size is ordinary but whose shape made earlier code do
 * quadratic work (the cases of test/http/xml-cost.test.ts, narrative-cost.test.ts and match-cost.test.ts,
 * which check the answers, and an NDJSON line of 64 MB arriving in 64 KiB chunks, as `$import` and
 * `cinder import` read it; the time is measured here, since timing belongs in benchmarks).
 *
 *   bun bench/hostile-input.ts [--rounds N] [--case TEXT]
 *
 * One in-process app (test/helpers/app.ts) on a fresh SQLite file; each request sent N times (default 3)
 * through `app.request()`, the whole answer read; prints each case's status and median ms. The work is
 * synchronous, so a case that regresses to quadratic shows as seconds or minutes here. `--case` runs only the cases
 * whose name holds TEXT. The UCUM case is test/http/validation-units-whitespace.test.ts's, which counts its work.
 */
import { parseArgs } from 'node:util';
import { readLines } from '../src/fhir/import/lines.ts';
import { linearRegex } from '../src/linear-regex.ts';
import { createTestApp, fhirInit } from '../test/helpers/app.ts';
import { median } from './lib/stats.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, case: { type: 'string' } } });
const ROUNDS = Number(values.rounds);
const ONLY = values.case;

const t = await createTestApp();
const token = await t.token();
const base = t.fhir();
const NS = 'xmlns="http://hl7.org/fhir"';
const XHTML = 'http://www.w3.org/1999/xhtml';

const xml = (body: string) => () =>
  t.request(`${base}/Patient`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+json' }, body });
const narrative = (div: string) => () => t.request(`${base}/Patient`, fhirInit(token, 'POST', { resourceType: 'Patient', text: { status: 'generated', div } }));

// 100 candidates for $match, each with 20 identifiers.
const candidates = Array.from({ length: 100 }, (_, n) => ({
  resource: { resourceType: 'Patient', name: [{ family: 'Lee', given: ['Ann'] }], birthDate: '1970-01-01', identifier: Array.from({ length: 20 }, (_, i) => ({ system: `urn:s${i}`, value: `w${n}-${i}` })) },
  request: { method: 'POST', url: 'Patient' },
}));
if ((await t.request(base, fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'batch', entry: candidates }))).status !== 200) throw new Error('load failed');
const many = 40_000;
const matchInput = {
  resourceType: 'Parameters',
  parameter: [
    {
      name: 'resource',
      resource: {
        resourceType: 'Patient', birthDate: '1970-01-01',
        name: Array.from({ length: many }, (_, i) => ({ family: i === 0 ? 'Lee' : `Fam${i}`, given: [i === 0 ? 'Ann' : `G${i}`] })),
        identifier: Array.from({ length: many }, (_, i) => ({ system: `urn:s${i}`, value: `v${i}` })),
      },
    },
    { name: 'count', valueInteger: 100 },
  ],
};

const levels = 2500;
const cases: [string, () => Response | Promise<Response>][] = [
  ['XML: 100,000 attributes on one element', xml(`<Patient ${NS}><gender ${Array.from({ length: 100_000 }, (_, i) => `a${i}=""`).join(' ')} value="male"/></Patient>`)],
  [
    'XML: 30,000 namespaces in scope, 30,000 elements declaring one more',
    xml(`<Patient ${NS} ${Array.from({ length: 30_000 }, (_, i) => `xmlns:p${i}="urn:x"`).join(' ')}><name><family value="Lee"/>${'<given xmlns:q="urn:y" value="A"/>'.repeat(30_000)}</name></Patient>`),
  ],
  ['narrative: a start tag of 100,000 namespace declarations', narrative(`<div xmlns="${XHTML}"><p ${Array.from({ length: 100_000 }, (_, i) => `xmlns:p${i}="urn:x"`).join(' ')}>x</p></div>`)],
  [
    'narrative: 100,000 elements under 100,000 bindings',
    narrative(`<div xmlns="${XHTML}">${Array.from({ length: levels }, (_, l) => `<span ${Array.from({ length: 40 }, (_, i) => `xmlns:p${l}_${i}="urn:x"`).join(' ')}>`).join('')}${'<b>x</b>'.repeat(100_000)}${'</span>'.repeat(levels)}</div>`),
  ],
  ['Patient/$match: 40,000 names and identifiers against 100 candidates', () => t.request(`${base}/Patient/$match`, fhirInit(token, 'POST', matchInput))],
  ['NDJSON: a 64 MB line in 64 KiB chunks', longLine],
  ['UCUM: a Quantity unit of 100,000 digits and a letter', ucum(100_000)],
  ['UCUM: a Quantity unit of 10,000 digits and a letter', ucum(10_000)],
  ['linear regex: the four nested-quantifier tests of test/unit/linear-regex.test.ts', linearTests],
  ['$expand of 20,000 codes, Accept-Language of one tag', languages('de')],
  ['$expand of 20,000 codes, Accept-Language of 16 tags', languages(junk(16).join(','))],
  ['$expand of 20,000 codes, Accept-Language of 2,000 tags (8 KB)', languages(junk(2_000).join(','))],
  ['$expand excludeNested=false: 9,999 codes at the foot of a chain of 50,000', chainFoot],
];

/** test/http/terminology-expansion-cost.test.ts's chain (written on first use): 9,999 leaves nested under its top, 50,000 levels up. */
let chainData: Promise<void> | undefined;
async function chainFoot(): Promise<Response> {
  const CHAIN = 'http://example.org/cs/chain';
  const VS = 'http://example.org/vs/chain';
  chainData ??= (async () => {
    const parent = (code: string) => ({ property: [{ code: 'parent', valueCode: code }] });
    await t.request(`${base}/CodeSystem/chain`, fhirInit(token, 'PUT', {
      resourceType: 'CodeSystem', id: 'chain', url: CHAIN, status: 'active', content: 'complete',
      property: [{ code: 'parent', uri: 'http://hl7.org/fhir/concept-properties#parent', type: 'code' }],
      concept: [
        { code: 'link0', display: 'leaf holder' },
        ...Array.from({ length: 49_999 }, (_, i) => ({ code: `link${i + 1}`, ...parent(`link${i}`) })),
        ...Array.from({ length: 9_999 }, (_, i) => ({ code: `leaf${i}`, ...parent('link49999') })),
      ],
    }));
    await t.request(`${base}/ValueSet/chain`, fhirInit(token, 'PUT', { resourceType: 'ValueSet', id: 'chain', url: VS, status: 'active', compose: { include: [{ system: CHAIN }] } }));
  })();
  await chainData;
  return t.request(`${base}/ValueSet/$expand?url=${encodeURIComponent(VS)}&filter=leaf&excludeNested=false`, { headers: { authorization: `Bearer ${token}` } });
}

/** Tags no concept has a display in (`xaa`, `xab`, ...), as test/http/terminology-language-list.test.ts writes them. */
function junk(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `x${String.fromCharCode(97 + (i % 26))}${String.fromCharCode(97 + (Math.floor(i / 26) % 26))}${String.fromCharCode(97 + (Math.floor(i / 676) % 26))}`);
}

/** test/http/terminology-language-list.test.ts's `$expand` (its CodeSystem of 20,000 codes written on first use) with this Accept-Language. */
let languageData: Promise<void> | undefined;
function languages(acceptLanguage: string) {
  const CS = 'http://cinder.test/CodeSystem/lang-many';
  const VS = 'http://cinder.test/ValueSet/lang-many';
  return async () => {
    languageData ??= (async () => {
      const put = (r: Record<string, unknown>) => t.request(`${base}/${r.resourceType}/${r.id}`, fhirInit(token, 'PUT', r));
      await put({
        resourceType: 'CodeSystem', id: 'lang-many', url: CS, status: 'active', content: 'complete', language: 'en',
        concept: Array.from({ length: 20_000 }, (_, i) => ({ code: `c${i}`, display: `Code ${i}`, designation: [{ language: 'de', value: `Kode ${i}` }] })),
      });
      await put({ resourceType: 'ValueSet', id: 'lang-many', url: VS, status: 'active', compose: { include: [{ system: CS }] } });
      // One expansion before the first timed one: the code system's index built.
      await (await t.request(`${base}/ValueSet/$expand?url=${encodeURIComponent(VS)}&count=10`, { headers: { authorization: `Bearer ${token}` } })).arrayBuffer();
    })();
    await languageData;
    return t.request(`${base}/ValueSet/$expand?url=${encodeURIComponent(VS)}&count=10`, { headers: { authorization: `Bearer ${token}`, 'accept-language': acceptLanguage } });
  };
}

/** The linear-time automaton's answers to test/unit/linear-regex.test.ts's patterns that backtrack without end (200 when right). */
function linearTests(): Response {
  const cases: [RegExp, string, boolean][] = [
    [/^(?:(a+)+)$/, `${'a'.repeat(5_000)}!`, false], [/^(?:(a+)+)$/, 'a'.repeat(5_000), true],
    [/((a+)+)+b/s, `${'a'.repeat(10_000)}!`, false], [/(x+x+)+y/, `${'x'.repeat(3_000)}y`, true],
  ];
  const right = cases.every(([re, input, answer]) => linearRegex(re)?.test(input) === answer);
  return new Response(null, { status: right ? 200 : 500 });
}

/** An Observation whose valueQuantity's UCUM code is `n` digits and a letter: refused (422) at its code. */
function ucum(n: number) {
  const code = `${'1'.repeat(n)}a`;
  return () => t.request(`${base}/Observation`, fhirInit(token, 'POST', { resourceType: 'Observation', status: 'final', code: { text: 'weight' }, valueQuantity: { value: 70, system: 'http://unitsofmeasure.org', code } }));
}

/** Reads a 64 MB line and a short one through readLines; answers a Response so it runs as the other cases. */
async function longLine(): Promise<Response> {
  const bytes = new TextEncoder().encode(`${'x'.repeat(64 * 1024 * 1024)}\nnext`);
  let at = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.subarray(at, (at += 64 * 1024)));
    },
  });
  let lines = 0;
  for await (const batch of readLines(stream)) lines += batch.length;
  return new Response(null, { status: lines === 2 ? 200 : 500 });
}

for (const [name, send] of cases) {
  if (ONLY !== undefined && !name.includes(ONLY)) continue;
  const times: number[] = [];
  let status = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const started = performance.now();
    const res = await send();
    await res.arrayBuffer();
    times.push(performance.now() - started);
    status = res.status;
  }
  console.log(`${name}: ${status}, median ${median(times).toFixed(0)} ms (${ROUNDS} rounds)`);
}
await t.close();
