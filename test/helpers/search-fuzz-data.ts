/**
 * The seeded data set of the randomized search differential (search-fuzz-differential.test.ts): valid R4
 * resources of several types whose values are drawn from small pools, so that random queries built from
 * the same pools match some resources and miss others. The pools hold the values a search's syntax must
 * escape (`,` `$` `|` `\`), accents and case, partial dates, Periods, Quantities of several units,
 * Identifiers with types, references by id, by identifier and to several types.
 */
import { prng } from './prng.ts';
import type { Json } from './fhir.ts';

export const SYS = { a: 'http://example.org/a', b: 'urn:oid:1.2.3', id: 'http://example.org/ids', ucum: 'http://unitsofmeasure.org', v2: 'http://terminology.hl7.org/CodeSystem/v2-0203' };

/** Texts: names, cities, value strings, displays. */
export const WORDS = ['Müller', 'muller', 'MULLER', 'Mull', 'Zoé', 'zoe', "O'Brien", 'a,b', 'a', 'x$y', 'p|q', 'back\\slash', 'Ann Lee', 'Anna', 'ann', 'Bob', 'bo', 'Émile', 'emile', 'van der Berg', 'Smith-Jones', 'smith', '12 Main St', '100%', 'x_y', 'x%y', 'xzy', 'a\\%'];
/** Codes, some with characters a token value must escape. */
export const CODES = ['c1', 'c2', 'C1', 'c10', 'a,b', 'x$y', 'p|q', '1.2', 'final'];
export const SYSTEMS = [SYS.a, SYS.b];
export const DISPLAYS = ['Body weight', 'body height', 'Heart rate', 'Glucose, fasting', 'Pain $ score', 'Müller reflex'];
export const DATES = ['2024', '2024-06', '2024-06-15', '2024-06-15T10:30:00Z', '2024-06-15T23:30:00-05:00', '2024-12-31', '2025-01-01T00:00:00+01:00', '2023-02-28', '2025-03-01T08:00:00.5Z'];
/** Quantities in units of different dimensions (no conversion between two of the pool's). */
export const UNITS: { code: string; unit: string; system?: string }[] = [
  { code: 'kg', unit: 'kg', system: SYS.ucum }, { code: 'cm', unit: 'cm', system: SYS.ucum }, { code: 'mm[Hg]', unit: 'mmHg', system: SYS.ucum },
  { code: '/min', unit: 'beats/minute', system: SYS.ucum }, { code: 'x1', unit: 'thing', system: SYS.a }, { code: 'x1', unit: 'thing' },
  // the same dimension as kg: a UCUM search in one finds amounts in the others
  { code: 'g', unit: 'g', system: SYS.ucum }, { code: 'mg', unit: 'mg', system: SYS.ucum },
];
export const NUMBERS = [0, 0.5, 1, 1.5, 2, 5.4, 5.35, 5.45, 10, 10.0, 100, 99.5, 120, -3, 0.05, 5400, 5350, 0.0054, 1000, 0.001];
export const URIS = ['http://example.org/fhir/ValueSet/a', 'http://example.org/fhir/ValueSet/a/b', 'http://example.org/fhir/ValueSet/ab', 'http://example.org/fhir', 'urn:uuid:53fefa32-fcbb-4ff8-8a92-55ee120877b7', 'http://example.org/fhir/ValueSet/a|1'];

/** The test app's FHIR base of tenant t1 (test/helpers/app.ts), and another server's. */
export const FHIR_BASE = 'http://cinder.test/tenants/t1/fhir/R4';
export const OTHER_BASE = 'http://other.org/fhir';

/** The data set of `seed`: about `n` resources of each type. */
export function fuzzData(seed: number, n = 14): Json[] {
  const r = prng(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(r() * list.length)]!;
  const maybe = (p: number) => r() < p;
  const some = <T>(make: () => T, most = 2): T[] => Array.from({ length: 1 + Math.floor(r() * most) }, make);
  const coding = (): Json => {
    const c: Json = {};
    if (maybe(0.85)) c.system = pick(SYSTEMS);
    if (maybe(0.92)) c.code = pick(CODES);
    if (maybe(0.5) || c.code === undefined) c.display = pick(DISPLAYS);
    return c;
  };
  const concept = (): Json => {
    const c: Json = {};
    if (maybe(0.9)) c.coding = some(coding);
    if (maybe(0.4) || !c.coding) c.text = pick([...DISPLAYS, ...WORDS]);
    return c;
  };
  const identifier = (): Json => {
    const i: Json = { system: maybe(0.8) ? SYS.id : SYS.b, value: pick(['v1', 'v2', 'V1', 'a,b', 'x$y', 'p|q', '007']) };
    if (maybe(0.4)) i.type = { coding: [{ system: SYS.v2, code: pick(['MR', 'SS', 'DL']) }], ...(maybe(0.3) ? { text: pick(DISPLAYS) } : {}) };
    return i;
  };
  const date = () => pick(DATES);
  const period = (): Json => {
    const [a, b] = [date(), date()].sort((x, y) => Date.parse(x.length === 4 ? `${x}-01-01` : x) - Date.parse(y.length === 4 ? `${y}-01-01` : y));
    const p: Json = {};
    if (maybe(0.85)) p.start = a;
    if (maybe(0.7) || !p.start) p.end = b;
    // a Period's start is before its end (per-1): both ends' earliest instants ordered
    if (p.start && p.end && lowOf(p.start) > lowOf(p.end)) delete p.end;
    return p;
  };
  const quantity = (): Json => {
    const u = pick(UNITS);
    const q: Json = { value: pick(NUMBERS), unit: u.unit };
    if (u.system) Object.assign(q, { system: u.system, code: u.code });
    else if (maybe(0.5)) delete q.unit;
    return q;
  };
  const word = () => pick(WORDS);
  const out: Json[] = [];
  const ids = (type: string) => Array.from({ length: n }, (_, i) => `${type.slice(0, 3).toLowerCase()}${i}`);
  const patients = ids('Patient');
  const practitioners = ids('Practitioner');
  const encounters = ids('Encounter');
  const observations = ids('Observation');
  /** `Type/id` written as this server's absolute URL, version-specific, or another server's URL at times. */
  const written = (key: string): string => {
    const x = r();
    if (x < 0.1) return `${FHIR_BASE}/${key}`;
    if (x < 0.15) return `${key}/_history/1`;
    if (x < 0.2) return `${OTHER_BASE}/${key}`;
    return key;
  };
  const ref = (type: string, list: string[]): Json => (maybe(0.1) ? { identifier: identifier() } : { reference: written(`${type}/${pick(list)}`) });
  for (const id of practitioners) {
    out.push({ resourceType: 'Practitioner', id, ...(maybe(0.9) ? { name: some(() => ({ family: word(), ...(maybe(0.6) ? { given: some(word) } : {}) })) } : {}), ...(maybe(0.6) ? { identifier: some(identifier) } : {}), ...(maybe(0.5) ? { active: maybe(0.5) } : {}) });
  }
  for (const id of patients) {
    const p: Json = { resourceType: 'Patient', id };
    if (maybe(0.9)) p.name = some(() => ({ ...(maybe(0.9) ? { family: word() } : { text: word() }), ...(maybe(0.6) ? { given: some(word) } : {}) }));
    if (maybe(0.8)) p.gender = pick(['male', 'female', 'other', 'unknown']);
    if (maybe(0.8)) p.birthDate = pick(['2024', '2024-06', '2024-06-15', '1980-02-29', '2000-01-01', '2024-12-31']);
    if (maybe(0.7)) p.identifier = some(identifier);
    if (maybe(0.6)) p.active = maybe(0.5);
    if (maybe(0.6)) p.address = some(() => ({ city: word(), ...(maybe(0.5) ? { line: [word()] } : {}), ...(maybe(0.4) ? { postalCode: pick(['12345', '1234', 'AB-1']) } : {}) }));
    if (maybe(0.5)) p.generalPractitioner = some(() => ({ reference: `Practitioner/${pick(practitioners)}` }));
    if (maybe(0.4)) p.telecom = some(() => ({ system: pick(['phone', 'email']), value: pick(['555-1234', 'A@b.org', 'a@B.org']) }));
    out.push(p);
  }
  for (const id of encounters) {
    const e: Json = { resourceType: 'Encounter', id, status: pick(['planned', 'in-progress', 'finished', 'cancelled']), class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: pick(['AMB', 'IMP', 'EMER']) } };
    if (maybe(0.85)) e.subject = { reference: written(`Patient/${pick(patients)}`) };
    if (maybe(0.7)) e.period = period();
    if (maybe(0.5)) e.length = { value: pick(NUMBERS.filter((x) => x >= 0)), unit: 'min', system: SYS.ucum, code: 'min' };
    if (maybe(0.5)) e.reasonCode = some(concept);
    if (maybe(0.3)) e.partOf = { reference: `Encounter/${pick(encounters.filter((x) => x < id))}` };
    if (e.partOf?.reference === 'Encounter/undefined') delete e.partOf;
    if (maybe(0.4)) e.participant = some(() => ({ individual: { reference: `Practitioner/${pick(practitioners)}` } }));
    out.push(e);
  }
  for (const id of observations) {
    const o: Json = { resourceType: 'Observation', id, status: pick(['final', 'amended', 'preliminary', 'registered']), code: concept() };
    if (maybe(0.8)) o.subject = maybe(0.85) ? ref('Patient', patients) : { reference: `Group/g${Math.floor(r() * 3)}` };
    if (maybe(0.5)) o.encounter = { reference: written(`Encounter/${pick(encounters)}`) };
    if (maybe(0.5)) o.category = some(concept);
    const v = r();
    if (v < 0.45) o.valueQuantity = quantity();
    else if (v < 0.6) o.valueString = word();
    else if (v < 0.75) o.valueCodeableConcept = concept();
    if (maybe(0.7)) { if (maybe(0.7)) o.effectiveDateTime = date(); else o.effectivePeriod = period(); }
    if (maybe(0.4)) o.component = some(() => ({ code: concept(), ...(maybe(0.7) ? { valueQuantity: quantity() } : maybe(0.5) ? { valueString: word() } : {}) }));
    if (maybe(0.4)) o.identifier = some(identifier);
    if (maybe(0.3)) o.performer = some(() => ({ reference: maybe(0.6) ? `Practitioner/${pick(practitioners)}` : `Patient/${pick(patients)}` }));
    out.push(o);
  }
  for (const id of ids('Condition')) {
    const c: Json = { resourceType: 'Condition', id, subject: { reference: written(`Patient/${pick(patients)}`) } };
    if (maybe(0.9)) c.code = concept();
    if (maybe(0.7)) c.clinicalStatus = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: pick(['active', 'resolved', 'inactive']) }] };
    if (maybe(0.6)) { const w = r(); if (w < 0.5) c.onsetDateTime = date(); else if (w < 0.8) c.onsetPeriod = period(); else c.onsetAge = { value: pick(NUMBERS.filter((x) => x > 0)), unit: 'years', system: SYS.ucum, code: 'a' }; }
    if (maybe(0.5)) c.recordedDate = date();
    if (maybe(0.4)) c.encounter = { reference: `Encounter/${pick(encounters)}` };
    if (maybe(0.5)) c.category = some(concept);
    out.push(c);
  }
  for (const id of ids('MedicationRequest')) {
    const m: Json = { resourceType: 'MedicationRequest', id, status: pick(['active', 'completed', 'stopped', 'draft']), intent: pick(['order', 'plan', 'proposal']), subject: { reference: `Patient/${pick(patients)}` } };
    m.medicationCodeableConcept = concept();
    if (maybe(0.7)) m.authoredOn = date();
    if (maybe(0.5)) m.requester = { reference: `Practitioner/${pick(practitioners)}` };
    if (maybe(0.4)) m.encounter = { reference: `Encounter/${pick(encounters)}` };
    if (maybe(0.4)) m.identifier = some(identifier);
    out.push(m);
  }
  for (const id of ids('DiagnosticReport')) {
    const d: Json = { resourceType: 'DiagnosticReport', id, status: pick(['final', 'partial', 'registered']), code: concept() };
    if (maybe(0.8)) d.subject = { reference: `Patient/${pick(patients)}` };
    if (maybe(0.6)) d.result = some(() => ({ reference: written(`Observation/${pick(observations)}`) }), 3);
    if (maybe(0.6)) d.effectiveDateTime = date();
    if (maybe(0.6)) d.issued = pick(['2024-06-15T10:30:00Z', '2024-12-31T23:59:59.999Z', '2025-01-01T00:00:00+01:00']);
    if (maybe(0.4)) d.conclusionCode = some(concept);
    out.push(d);
  }
  for (const id of ids('RiskAssessment')) {
    const a: Json = { resourceType: 'RiskAssessment', id, status: 'final', subject: { reference: `Patient/${pick(patients)}` } };
    if (maybe(0.85)) a.prediction = some(() => (maybe(0.8) ? { probabilityDecimal: pick([0, 0.05, 0.1, 0.5, 0.52, 0.55, 0.45, 0.75, 0.8, 1]) } : { probabilityRange: { low: { value: pick([0.1, 0.2, 0.6]) }, high: { value: pick([0.7, 0.9]) } } }));
    out.push(a);
  }
  for (const id of ids('Questionnaire')) {
    const v: Json = { resourceType: 'Questionnaire', id, status: 'active' };
    if (maybe(0.85)) v.url = pick(URIS.filter((u) => !u.includes('|')));
    if (maybe(0.7)) v.name = pick(['Alpha', 'alpha_b', 'Beta', 'a,b']);
    if (maybe(0.5)) v.version = pick(['1', '1.0', '2']);
    out.push(v);
  }
  // meta: tags, security labels, profiles and a source on some of every type
  for (const x of out) {
    if (!maybe(0.4)) continue;
    const meta: Json = {};
    if (maybe(0.6)) meta.tag = some(() => ({ ...(maybe(0.8) ? { system: pick(SYSTEMS) } : {}), code: pick(CODES), ...(maybe(0.3) ? { display: pick(DISPLAYS) } : {}) }));
    if (maybe(0.4)) meta.security = [{ system: 'http://terminology.hl7.org/CodeSystem/v3-Confidentiality', code: pick(['R', 'N', 'V']) }];
    if (maybe(0.4)) meta.profile = [pick(['http://example.org/fhir/StructureDefinition/a', 'http://example.org/fhir/StructureDefinition/a/b'])];
    if (maybe(0.3)) meta.source = pick(['http://example.org/src', 'urn:uuid:53fefa32-fcbb-4ff8-8a92-55ee120877b7', 'http://example.org/src#abc']);
    if (Object.keys(meta).length) x.meta = meta;
  }
  return out;
}

function lowOf(d: string): number {
  return Date.parse(d.length === 4 ? `${d}-01-01T00:00:00Z` : d.length === 7 ? `${d}-01T00:00:00Z` : d.length === 10 ? `${d}T00:00:00Z` : d);
}
