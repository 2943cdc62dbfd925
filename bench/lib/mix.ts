/**
 * Issue #14's fixed search mix: what bench/search.ts drives through a server with wrk and bench/mix-ab.ts runs in
 * process on two checkouts. Each scenario cycles through variants (patients, names, dates) so that no single cached
 * page answers them all.
 */
import { CHRONIC_CONDITIONS } from './catalog/clinical.ts';
import { VITALS } from './catalog/measurements.ts';
import { FAMILY_NAMES } from './catalog/people.ts';

const LOINC = 'http://loinc.org';

/** What the variants draw on: patient ids of the data set (the first 1,000 by id). */
export interface MixSample {
  patients: string[];
}

/** A scenario: its name, whether it is patient-scoped (the tighter latency target), and its i-th query. */
export interface MixScenario {
  name: string;
  patientScoped: boolean;
  query: (i: number, s: MixSample) => string;
}

const pick = <T>(list: readonly T[], i: number): T => list[(i * 7919) % list.length]!;
const year = (i: number) => 2015 + (i % 10);
const month = (i: number) => String(1 + (i % 12)).padStart(2, '0');
const vitals = Object.values(VITALS).map((v) => v.code);

export const MIX_SCENARIOS: MixScenario[] = [
  { name: 'Observation?patient=..&code=..&date=ge..', patientScoped: true, query: (i, s) => `Observation?patient=${pick(s.patients, i)}&code=${LOINC}|${pick(vitals, i)}&date=ge${year(i)}-${month(i)}-01` },
  { name: 'Condition?clinical-status=active&patient=..', patientScoped: true, query: (i, s) => `Condition?clinical-status=active&patient=${pick(s.patients, i)}` },
  { name: 'Observation?patient=..&_include=Observation:performer', patientScoped: true, query: (i, s) => `Observation?patient=${pick(s.patients, i)}&category=vital-signs&_include=Observation:performer` },
  { name: 'Patient?name=<prefix>', patientScoped: false, query: (i) => `Patient?name=${pick(FAMILY_NAMES, i).slice(0, 3 + (i % 2))}` },
  { name: 'Patient?birthdate=ge..&gender=..&_count=50', patientScoped: false, query: (i) => `Patient?birthdate=ge${1940 + (i % 70)}-${month(i)}&gender=${i % 2 ? 'female' : 'male'}&_count=50` },
  { name: 'Encounter?date=..&_sort=-date', patientScoped: false, query: (i) => `Encounter?date=${year(i)}-${month(i)}&_sort=-date` },
  { name: 'chained: Observation?subject:Patient.family=..&code=..', patientScoped: false, query: (i) => `Observation?subject:Patient.family=${encodeURIComponent(pick(FAMILY_NAMES, i))}&code=${LOINC}|${pick(vitals, i)}` },
  { name: '_has: Patient?_has:Condition:patient:code=..', patientScoped: false, query: (i) => `Patient?_has:Condition:patient:code=${pick(CHRONIC_CONDITIONS, i).code}` },
  { name: 'Condition?clinical-status=active&_total=accurate', patientScoped: false, query: (i) => `Condition?clinical-status=active&_total=accurate&_count=${10 + (i % 10)}` },
];
