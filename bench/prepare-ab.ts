/**
 * Two checkouts' write preparation in one process, in turn: the CPU time of what a create does to its
 * body before the store (parse, checks, strict validation, stored text, index entries and compartments:
 * `parseJson`, `asResource(withoutId(...))`, `requireValid`, `prepareVersion`, `versionToWrite`), without
 * HTTP, tokens or a database, so that the drift between runs on a shared machine does not hide a few
 * percent:
 *
 *   bun bench/prepare-ab.ts <checkout A> <checkout B> [--rounds N] [--per-round N] [--canonical]
 *
 * Bodies: a generated Patient (no numbers), a generated Observation whose `valueQuantity.value` is
 * `45.1` (what String writes) and the same with `45.10` (a literal JSON.parse does not give back), each
 * compact as generated and indented by two; the R4 example blood-pressure Observation (5.4 kB,
 * indented, with a narrative); and the R4 example ClaimResponse R3502 (10 kB, indented, 26 of its 40
 * numbers written as `80.00` is). `--canonical` leaves out the bodies with such literals (a process that
 * never meets one). Rounds alternate A B, B A, ..., the first two discarded as warm-up, each body's
 * round timed after a full collection; prints each body's median µs per preparation on each side and
 * the ratio B / A of the medians.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { generatePatientRecord, generateShared, resolveOptions } from './lib/generator.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '20' }, 'per-round': { type: 'string', default: '2000' }, canonical: { type: 'boolean', default: false } },
});
if (positionals.length !== 2) {
  console.error('usage: bun bench/prepare-ab.ts <checkout A> <checkout B> [--rounds N] [--per-round N] [--canonical]');
  process.exit(2);
}
const rounds = Number(values.rounds);
const perRound = Number(values['per-round']);

type Prepare = (text: string) => unknown;

/** A checkout's write preparation of a body, as createResource does it before its transaction. */
async function preparation(dir: string): Promise<Prepare> {
  const { parseJson, asResource, withoutId } = await import(`${dir}/src/fhir/resource.ts`);
  const { requireValid } = await import(`${dir}/src/fhir/validation/check.ts`);
  const { prepareVersion, versionToWrite } = await import(`${dir}/src/fhir/prepared.ts`);
  return (text) => {
    const resource = asResource(withoutId(parseJson(text)));
    requireValid(resource, 'strict');
    return versionToWrite(prepareVersion(resource, 'bench-id', 'http://bench.test/fhir'), 1, 0);
  };
}

type Json = Record<string, unknown>;
const options = resolveOptions({ patients: 1, seed: 'prepare-bench' });
const record = generatePatientRecord(options, generateShared(options), 0) as Json[];
const first = (type: string) => record.find((r) => r.resourceType === type)!;
const weight = record.find((r) => r.resourceType === 'Observation' && /"value":\d+\.\d\b/.test(JSON.stringify(r)))!;
const canonical = JSON.stringify(weight);
const literal = canonical.replace(/"value":(\d+\.\d)\b/, '"value":$10');
const indented = (text: string) => JSON.stringify(JSON.parse(text), null, 2);
const example = (file: string) => readFileSync(new URL(`../node_modules/hl7.fhir.r4.examples/${file}`, import.meta.url), 'utf8');

/** Name, text, and whether some of its numbers are written otherwise than String writes them. */
const all: [string, string, boolean][] = [
  ['Patient, compact', JSON.stringify(first('Patient')), false],
  ['Patient, indented', indented(JSON.stringify(first('Patient'))), false],
  ['Observation 45.1, compact', canonical, false],
  ['Observation 45.1, indented', indented(canonical), false],
  ['Observation 45.10, compact', literal, true],
  ['Observation 45.10, indented', indented(canonical).replace(/"value": (\d+\.\d)\b/, '"value": $10'), true],
  ['R4 example blood pressure (indented)', example('Observation-blood-pressure.json'), false],
  ['R4 example ClaimResponse R3502 (indented, 26 amounts such as 80.00)', example('ClaimResponse-R3502.json'), true],
];
const bodies = all.filter(([, , literals]) => !values.canonical || !literals);

const sides = await Promise.all(positionals.map(async (dir) => ({ dir: resolve(dir), prepare: await preparation(resolve(dir)) })));
const times = sides.map(() => bodies.map(() => [] as number[]));

for (let round = 0; round < rounds + 2; round++) {
  const order = round % 2 === 0 ? [0, 1] : [1, 0];
  for (const s of order) {
    bodies.forEach(([, text], b) => {
      // The garbage of one body's round is collected before the next is timed, not during it.
      Bun.gc(true);
      const start = Bun.nanoseconds();
      for (let i = 0; i < perRound; i++) sides[s]!.prepare(text);
      if (round >= 2) times[s]![b]!.push((Bun.nanoseconds() - start) / perRound / 1000);
    });
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`A = ${sides[0]!.dir}\nB = ${sides[1]!.dir}\n${rounds} rounds of ${perRound} preparations per body and side\n`);
console.log('| body | bytes | A µs (median) | B µs (median) | B / A |');
console.log('|---|---|---|---|---|');
bodies.forEach(([name, text], b) => {
  const [a, bb] = [median(times[0]![b]!), median(times[1]![b]!)];
  console.log(`| ${name} | ${text.length} | ${a.toFixed(2)} | ${bb.toFixed(2)} | ${(bb / a).toFixed(3)} |`);
});
