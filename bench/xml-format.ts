/**
 * What the FHIR XML format costs against JSON on a 1,000-entry search Bundle.
 *
 *   bun bench/xml-format.ts [--rounds N]
 *
 * One in-process app (test/helpers/app.ts) on a fresh SQLite file holding 1,000 Observations (a
 * Quantity with a decimal, a CodeableConcept, a subject, a narrative). Alternating rounds send
 * `GET Observation?_count=1000` through `app.request()` with `Accept: application/fhir+json` and with
 * `Accept: application/fhir+xml` (the first two rounds discarded as warm-up) and read the whole body;
 * then the Bundle's JSON is serialised in-process, alone, as the format layer does it (parse the JSON
 * answer, write XML: src/http/xml-format.ts) and as the JSON answer is written (stringifyExact). Prints
 * medians in ms and the body sizes.
 */
import { parseArgs } from 'node:util';
import { parseExact, stringifyExact } from '../src/fhir/exact-json.ts';
import { toFhirXml } from '../src/fhir/xml/to-xml.ts';
import { createTestApp, fhirInit } from '../test/helpers/app.ts';
import { median } from './lib/stats.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '22' } } });
const ROUNDS = Number(values.rounds);

const t = await createTestApp();
const token = await t.token();
const base = t.fhir();
const entries = Array.from({ length: 1000 }, (_, i) => ({
  request: { method: 'POST', url: 'Observation' },
  resource: {
    resourceType: 'Observation', status: 'final', category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
    text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">Body temperature ${i}</div>` },
    code: { coding: [{ system: 'http://loinc.org', code: '8310-5', display: 'Body temperature' }] },
    subject: { reference: `Patient/p${i % 50}` }, effectiveDateTime: '2024-05-01T10:00:00Z',
    valueQuantity: { value: 36.5 + (i % 10) / 10, unit: 'Cel', system: 'http://unitsofmeasure.org', code: 'Cel' },
  },
}));
const load = await t.request(base, fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'batch', entry: entries }));
if (load.status !== 200) throw new Error(`load: ${load.status}`);

const path = `${base}/Observation?_count=1000`;
const times = { json: [] as number[], xml: [] as number[] };
const sizes = { json: 0, xml: 0 };
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? (['json', 'xml'] as const) : (['xml', 'json'] as const);
  for (const format of order) {
    const started = performance.now();
    const res = await t.request(path, fhirInit(token, 'GET', undefined, { Accept: `application/fhir+${format}` }));
    const body = await res.text();
    const ms = performance.now() - started;
    if (res.status !== 200) throw new Error(`${format}: ${res.status}`);
    sizes[format] = Buffer.byteLength(body);
    if (round >= 2) times[format].push(ms);
  }
}
const text = await (await t.request(path, fhirInit(token))).text();
const serialise = { json: [] as number[], xml: [] as number[] };
for (let round = 0; round < ROUNDS; round++) {
  let started = performance.now();
  stringifyExact(parseExact(text));
  const json = performance.now() - started;
  started = performance.now();
  toFhirXml(parseExact(text) as Record<string, unknown>);
  const xml = performance.now() - started;
  if (round >= 2) [serialise.json.push(json), serialise.xml.push(xml)];
}
console.log(`search of 1,000 Observations, ${ROUNDS - 2} rounds, medians`);
console.log(`  request, JSON: ${median(times.json).toFixed(1)} ms, ${(sizes.json / 1024).toFixed(0)} KiB`);
console.log(`  request, XML:  ${median(times.xml).toFixed(1)} ms, ${(sizes.xml / 1024).toFixed(0)} KiB`);
console.log(`  in-process, parse + stringifyExact: ${median(serialise.json).toFixed(1)} ms; parse + toFhirXml: ${median(serialise.xml).toFixed(1)} ms`);
await t.close();
