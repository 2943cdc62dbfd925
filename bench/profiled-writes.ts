/**
 * Measures what validation against profiles adds to a write (docs/PERFORMANCE.md, "Profiles"): POSTs of
 * the same Observation through app.request() on an in-memory SQLite store, without a profile, claiming
 * R4's vitalsigns (bindings in the base table), and claiming a tenant profile bound to a tenant value set of
 * 1,500 codes (all of a code system, and an is-a filter), decided by the terminology; and a Patient with
 * three R4 core extensions claiming a tenant profile, whose extensions are checked against their definitions;
 * and a collection Bundle of 20 heart rates, each entry claiming vitalsigns (its entries' profiles checked).
 *   bun bench/profiled-writes.ts [writes per case, default 2000]
 */
import { createTestApp } from '../test/helpers/app.ts';
import { fhirClient, type Json } from '../test/helpers/fhir.ts';

const N = Number(process.argv[2] ?? 2000);
const CS = 'http://example.org/fhir/CodeSystem/big';
const PROFILE = 'http://example.org/fhir/StructureDefinition/coded-observation';

const el = (path: string, extra: Json) => ({ id: path, path, short: path, definition: path, min: 0, max: '1', base: { path, min: 0, max: '1' }, ...extra });
const profile = (vs: string): Json => ({
  resourceType: 'StructureDefinition', url: PROFILE, name: 'CodedObservation', status: 'active', kind: 'resource', abstract: false,
  type: 'Observation', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Observation', derivation: 'constraint', fhirVersion: '4.0.1',
  snapshot: { element: [el('Observation', { max: '*', base: { path: 'Observation', min: 0, max: '*' } }), el('Observation.code', { min: 1, type: [{ code: 'CodeableConcept' }], binding: { strength: 'required', valueSet: vs } })] },
});

const t = await createTestApp();
const api = fhirClient(t, await t.token());
await api.create({ resourceType: 'CodeSystem', url: CS, status: 'active', content: 'complete', hierarchyMeaning: 'is-a', concept: [{ code: 'c1', concept: Array.from({ length: 1499 }, (_, i) => ({ code: `c${i + 2}` })) }] });
await api.create({ resourceType: 'ValueSet', url: `${CS}-all`, status: 'active', compose: { include: [{ system: CS }] } });
await api.create({ resourceType: 'ValueSet', url: `${CS}-isa`, status: 'active', compose: { include: [{ system: CS, filter: [{ property: 'concept', op: 'descendent-of', value: 'c1' }] }] } });

const vitals = (code: Json, meta?: Json): Json => ({
  resourceType: 'Observation', status: 'final', ...(meta ? { meta } : {}),
  category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
  code, subject: { reference: 'Patient/p1' }, effectiveDateTime: '2024-01-01',
  valueQuantity: { value: 70, unit: 'beats/minute', system: 'http://unitsofmeasure.org', code: '/min' },
});
const HR = { coding: [{ system: 'http://loinc.org', code: '8867-4' }] };

const measure = (name: string, body: (i: number) => Json) => measureType('Observation', name, body);

async function measureType(type: string, name: string, body: (i: number) => Json): Promise<void> {
  for (let i = 0; i < 200; i++) await api.post(type, body(i));
  const times: number[] = [];
  for (let i = 0; i < N; i++) {
    const started = performance.now();
    const res = await api.post(type, body(i));
    times.push(performance.now() - started);
    if (res.status !== 201) throw new Error(`${name}: ${res.status} ${await res.text()}`);
  }
  times.sort((a, b) => a - b);
  const q = (p: number) => times[Math.floor(p * (times.length - 1))]!.toFixed(3);
  console.log(`${name.padEnd(48)} median ${q(0.5)} ms  p90 ${q(0.9)} ms  (${N} writes)`);
}

await measure('no profile', () => vitals(HR));
await measure('vitalsigns (base-table bindings)', () => vitals(HR, { profile: ['http://hl7.org/fhir/StructureDefinition/vitalsigns'] }));
for (const vs of ['all', 'isa']) {
  const sd = await api.create(profile(`${CS}-${vs}`));
  await measure(`tenant profile, 1,500-code value set (${vs})`, (i) => vitals({ coding: [{ system: CS, code: `c${(i % 1499) + 2}` }] }, { profile: [PROFILE] }));
  await api.del(`StructureDefinition/${sd.id}`);
}
const plain = await api.create({
  resourceType: 'StructureDefinition', url: `${PROFILE}-patient`, name: 'PlainPatient', status: 'active', kind: 'resource', abstract: false,
  type: 'Patient', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint', fhirVersion: '4.0.1',
  snapshot: { element: [el('Patient', { max: '*', base: { path: 'Patient', min: 0, max: '*' } })] },
});
const patient = (meta?: Json): Json => ({
  resourceType: 'Patient', ...(meta ? { meta } : {}), name: [{ family: 'Ng', given: ['Li'] }], gender: 'female', birthDate: '1970-01-01',
  extension: [
    { url: 'http://hl7.org/fhir/StructureDefinition/patient-birthPlace', valueAddress: { city: 'Utrecht', country: 'NL' } },
    { url: 'http://hl7.org/fhir/StructureDefinition/patient-mothersMaidenName', valueString: 'Jansen' },
    { url: 'http://hl7.org/fhir/StructureDefinition/patient-religion', valueCodeableConcept: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ReligiousAffiliation', code: '1013' }] } },
  ],
});
for (let round = 0; round < 2; round++) {
  await measureType('Patient', 'Patient, 3 core extensions, no profile', () => patient());
  await measureType('Patient', 'Patient, 3 core extensions, tenant profile', () => patient({ profile: [`${PROFILE}-patient`] }));
}
await api.del(`StructureDefinition/${plain.id}`);
const collection = (meta?: Json): Json => ({ resourceType: 'Bundle', type: 'collection', entry: Array.from({ length: 20 }, (_, i) => ({ fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, resource: vitals(HR, meta) })) });
for (let round = 0; round < 2; round++) {
  await measureType('Bundle', 'collection of 20 heart rates, no profile', () => collection());
  await measureType('Bundle', 'collection of 20 heart rates claiming vitalsigns', () => collection({ profile: ['http://hl7.org/fhir/StructureDefinition/vitalsigns'] }));
}
await t.close();
