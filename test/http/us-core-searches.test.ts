/**
 * US Core searches as ONC's Inferno test kit (inferno-framework/us-core-test-kit: US Core 3.1.1, 6.1.0 and
 * 7.0.0 server suites) runs them, against the data Inferno's own reference server serves for them
 * (test/fixtures/uscore/, patients 85 and 355; see its README), on both databases.
 *
 * For each US Core profile the kit runs a first search (the patient, with each fixed value a profile
 * names: `Observation?patient=85&code=85354-9`, `CarePlan?patient=85&category=assess-plan`) and keeps what
 * it finds; every other SHALL/SHOULD combination takes its values from those resources, and each search:
 *  - answers 200 with a Bundle, read to its end through `next` links (also with `_count=3`, so that every
 *    result spans pages: the kit sends no `_count`, and a server pages at its own size);
 *  - returns only resources that meet every parameter, as the kit reads the parameter's element itself
 *    (dates by their ranges, tokens by code with or without `system|`, strings by prefix);
 *  - finds something (the data holds a value for it; the kit skips instead);
 *  - date parameters with the SHALL comparators `gt ge lt le`, the value a day either side of a
 *    match's own date in its own time zone offset (`date=gt2019-03-16T10:15:30-04:00`), and (US Core
 *    6.1.0 and later) a day-precision date with comparators sent as `gt` the day before, 3.1.1 as is;
 *  - first searches: the same count with `patient=Patient/85` as with `patient=85`, and by
 *    `POST [type]/_search` (form body) as by GET;
 *  - token parameters again as `system|code`, which must find something;
 *  - multiple-or parameters (`status=registered,preliminary,final,...`, every value the profile lists)
 *    return every value the patient's resources have;
 *  - `_include=MedicationRequest:medication` (and MedicationDispense's) returns the Medications
 *    referred to, and none other;
 *  - `_revinclude=Provenance:target` on the first search returns the Provenance that targets a match;
 *  - each resource found is read back (200, same id), and each literal reference in it resolves.
 * Practitioner, PractitionerRole, Organization and Location are searched with the values of the
 * resources the patients' resources refer to, as the kit does. Requests are written as the kit's Ruby
 * client writes them (its encoding, `Accept`, `Accept-Charset`). Then the kit's granular-scope
 * repeats (US Core 6.1.0+), the same searches and reads with a patient launch's token (ONC's single
 * patient API tests), and the CapabilityStatement, which must list every parameter, `_include` and
 * `_revinclude` used.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BASE, createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { at, CLIENT_HEADERS, meets, PARAMS, query, referencesIn, shiftDate, valueOf } from '../helpers/us-core-kit.ts';

const FIXTURES = join(import.meta.dir, '../fixtures/uscore');
const PATIENTS = ['85', '355', 'edge'];

// ---------------------------------------------------------------------------------------------------
// The groups: one per US Core profile (or resource), its first search and its other combinations.

interface Combination {
  params: string[];
  /** Token parameters searched again as `system|code`. */
  tokens?: string[];
  /** Date parameters searched with gt, ge, lt and le. */
  comparators?: string[];
  /** Parameters searched with every value the profile lists, ORed. */
  or?: string[];
}
interface Group {
  name: string;
  type: string;
  /** First search: the patient alone, or with each of these values of `fixed[0]`. */
  fixed?: [string, string[]];
  /** For the types reached through references: the first search's parameter, its value taken from a read resource. */
  referenced?: string;
  searches: Combination[];
  /** The kit's `_include` checked on the first search (MedicationRequest:medication). */
  includeMedication?: boolean;
  /** No `_revinclude=Provenance:target` test for this profile. */
  noProvenance?: boolean;
}

const OBS_STATUS = ['registered', 'preliminary', 'final', 'amended', 'corrected', 'cancelled', 'entered-in-error', 'unknown'];
const DR_STATUS = ['registered', 'partial', 'preliminary', 'final', 'amended', 'corrected', 'appended', 'cancelled', 'entered-in-error', 'unknown'];
const OR_VALUES: Record<string, Record<string, string[]>> = {
  Observation: { status: OBS_STATUS },
  DiagnosticReport: { status: DR_STATUS },
  CarePlan: { status: ['draft', 'active', 'on-hold', 'revoked', 'completed', 'entered-in-error', 'unknown'] },
  CareTeam: { status: ['proposed', 'active', 'suspended', 'inactive', 'entered-in-error'] },
  DocumentReference: { status: ['current', 'superseded', 'entered-in-error'] },
  MedicationRequest: {
    intent: ['proposal', 'plan', 'order', 'original-order', 'reflex-order', 'filler-order', 'instance-order', 'option'],
    status: ['active', 'on-hold', 'cancelled', 'completed', 'entered-in-error', 'stopped', 'draft', 'unknown'],
  },
  MedicationDispense: { status: ['preparation', 'in-progress', 'cancelled', 'on-hold', 'completed', 'entered-in-error', 'stopped', 'declined', 'unknown'] },
  Procedure: { status: ['preparation', 'in-progress', 'not-done', 'on-hold', 'stopped', 'completed', 'entered-in-error', 'unknown'] },
  ServiceRequest: { status: ['draft', 'active', 'on-hold', 'revoked', 'completed', 'entered-in-error', 'unknown'] },
  QuestionnaireResponse: { status: ['in-progress', 'completed', 'amended', 'entered-in-error', 'stopped'] },
  Device: { status: ['active', 'inactive', 'entered-in-error', 'unknown'] },
};

/** The searches of an Observation profile (the same for every category-based and code-based one). */
const OBSERVATION: Combination[] = [
  { params: ['patient', 'category'], tokens: ['category'] },
  { params: ['patient', 'code'], tokens: ['code'] },
  { params: ['patient', 'category', 'date'], tokens: ['category'], comparators: ['date'] },
  { params: ['patient', 'category', 'status'], tokens: ['category'], or: ['status'] },
  { params: ['patient', 'code', 'date'], tokens: ['code'], comparators: ['date'] },
  { params: ['patient', 'category', '_lastUpdated'], tokens: ['category'] },
];
const observation = (name: string, fixed: [string, string[]]): Group => ({ name, type: 'Observation', fixed, searches: OBSERVATION });
const CONDITION: Combination[] = [
  { params: ['patient', 'category'], tokens: ['category'] },
  { params: ['patient', 'clinical-status'], tokens: ['clinical-status'] },
  { params: ['patient', 'category', 'clinical-status'], tokens: ['category', 'clinical-status'] },
  { params: ['patient', 'category', 'encounter'], tokens: ['category'] },
  { params: ['patient', 'code'], tokens: ['code'] },
  { params: ['patient', 'onset-date'], comparators: ['onset-date'] },
  { params: ['patient', 'abatement-date'], comparators: ['abatement-date'] },
  { params: ['patient', 'recorded-date'], comparators: ['recorded-date'] },
  { params: ['patient', 'asserted-date'], comparators: ['asserted-date'] },
  { params: ['patient', '_lastUpdated'] },
];
const DIAGNOSTIC_REPORT: Combination[] = [
  { params: ['patient'] },
  { params: ['patient', 'code'], tokens: ['code'] },
  { params: ['patient', 'category', 'date'], tokens: ['category'], comparators: ['date'] },
  { params: ['patient', 'code', 'date'], tokens: ['code'], comparators: ['date'] },
  { params: ['patient', 'status'], or: ['status'] },
  { params: ['patient', 'category', '_lastUpdated'], tokens: ['category'] },
];

const GROUPS: Group[] = [
  { name: 'Patient', type: 'Patient', searches: [
    { params: ['identifier'], tokens: ['identifier'] }, { params: ['name'] }, { params: ['birthdate', 'name'] },
    { params: ['gender', 'name'] }, { params: ['family', 'gender'] }, { params: ['birthdate', 'family'] },
    // death-date+family: neither patient is deceased, so the kit (and this test) skips it.
  ] },
  { name: 'AllergyIntolerance', type: 'AllergyIntolerance', searches: [{ params: ['patient', 'clinical-status'], tokens: ['clinical-status'] }] },
  { name: 'CarePlan', type: 'CarePlan', fixed: ['category', ['assess-plan']], searches: [
    { params: ['patient', 'category', 'date'], tokens: ['category'], comparators: ['date'] },
    { params: ['patient', 'category', 'status'], tokens: ['category'], or: ['status'] },
    { params: ['patient', 'category', 'status', 'date'], tokens: ['category'], comparators: ['date'], or: ['status'] },
  ] },
  { name: 'CareTeam', type: 'CareTeam', fixed: ['status', OR_VALUES.CareTeam!.status!], searches: [
    { params: ['patient', 'status'], or: ['status'] }, { params: ['patient', 'role'], tokens: ['role'] }, { params: ['role'], tokens: ['role'] },
  ] },
  { name: 'Condition encounter-diagnosis', type: 'Condition', fixed: ['category', ['encounter-diagnosis']], searches: CONDITION },
  { name: 'Condition problems-health-concerns', type: 'Condition', fixed: ['category', ['problem-list-item', 'health-concern']], searches: CONDITION },
  { name: 'Coverage', type: 'Coverage', searches: [] },
  { name: 'Device', type: 'Device', searches: [{ params: ['patient', 'type'], tokens: ['type'] }, { params: ['patient', 'status'], or: ['status'] }] },
  { name: 'DiagnosticReport lab', type: 'DiagnosticReport', fixed: ['category', ['LAB']], searches: DIAGNOSTIC_REPORT },
  { name: 'DiagnosticReport note', type: 'DiagnosticReport', fixed: ['category', ['LP29684-5', 'LP29708-2', 'LP7839-6']], searches: DIAGNOSTIC_REPORT },
  { name: 'DocumentReference', type: 'DocumentReference', searches: [
    { params: ['_id'] }, { params: ['patient', 'category'], tokens: ['category'] },
    { params: ['patient', 'category', 'date'], tokens: ['category'], comparators: ['date'] },
    { params: ['patient', 'type'], tokens: ['type'] }, { params: ['patient', 'status'], or: ['status'] },
    { params: ['patient', 'type', 'period'], tokens: ['type'], comparators: ['period'] },
  ] },
  { name: 'Encounter', type: 'Encounter', searches: [
    { params: ['_id'] }, { params: ['identifier'], tokens: ['identifier'] }, { params: ['date', 'patient'], comparators: ['date'] },
    { params: ['class', 'patient'], tokens: ['class'] }, { params: ['patient', 'type'], tokens: ['type'] }, { params: ['patient', 'status'] },
    { params: ['patient', 'location'] }, { params: ['patient', 'discharge-disposition'], tokens: ['discharge-disposition'] },
    { params: ['patient', '_lastUpdated'] },
  ] },
  { name: 'Goal', type: 'Goal', searches: [
    { params: ['patient', 'lifecycle-status'] }, { params: ['patient', 'target-date'], comparators: ['target-date'] },
    { params: ['patient', 'description'], tokens: ['description'] },
  ] },
  { name: 'Immunization', type: 'Immunization', searches: [{ params: ['patient', 'date'], comparators: ['date'] }, { params: ['patient', 'status'] }] },
  { name: 'MedicationRequest', type: 'MedicationRequest', fixed: ['intent', OR_VALUES.MedicationRequest!.intent!], includeMedication: true, searches: [
    { params: ['patient', 'intent'], or: ['intent'] },
    { params: ['patient', 'intent', 'status'], or: ['intent', 'status'] },
    { params: ['patient', 'intent', 'authoredon'], comparators: ['authoredon'], or: ['intent'] },
    { params: ['patient', 'intent', 'encounter'], or: ['intent'] },
  ] },
  { name: 'MedicationDispense', type: 'MedicationDispense', includeMedication: true, searches: [{ params: ['patient', 'status'], or: ['status'] }, { params: ['patient', 'status', 'type'], tokens: ['type'], or: ['status'] }] },
  observation('Observation blood-pressure', ['code', ['85354-9']]),
  observation('Observation bmi', ['code', ['39156-5']]),
  observation('Observation body-height', ['code', ['8302-2']]),
  observation('Observation body-temperature', ['code', ['8310-5']]),
  observation('Observation body-weight', ['code', ['29463-7']]),
  observation('Observation head-circumference', ['code', ['9843-4']]),
  observation('Observation head-circumference-percentile', ['code', ['8289-1']]),
  observation('Observation heart-rate', ['code', ['8867-4']]),
  observation('Observation respiratory-rate', ['code', ['9279-1']]),
  observation('Observation pulse-oximetry', ['code', ['59408-5', '2708-6']]),
  observation('Observation pediatric-bmi-for-age', ['code', ['59576-9']]),
  observation('Observation pediatric-weight-for-height', ['code', ['77606-2']]),
  observation('Observation smokingstatus', ['code', ['11367-0', '401201003', '72166-2', '782516008']]),
  observation('Observation occupation', ['code', ['11341-5']]),
  observation('Observation pregnancystatus', ['code', ['82810-3']]),
  observation('Observation pregnancyintent', ['code', ['86645-9']]),
  observation('Observation sexual-orientation', ['code', ['76690-7']]),
  observation('Observation care-experience-preference', ['code', ['95541-9']]),
  observation('Observation treatment-intervention-preference', ['code', ['75773-2']]),
  observation('Observation lab', ['category', ['laboratory']]),
  observation('Observation clinical-result', ['category', ['laboratory', 'exam', 'therapy', 'imaging', 'procedure', 'vital-signs', 'activity']]),
  observation('Observation screening-assessment', ['category', ['survey']]),
  observation('Observation social-history', ['category', ['social-history']]),
  { name: 'Procedure', type: 'Procedure', searches: [
    { params: ['patient', 'date'], comparators: ['date'] }, { params: ['patient', 'code', 'date'], tokens: ['code'], comparators: ['date'] },
    { params: ['patient', 'status'], or: ['status'] },
  ] },
  { name: 'QuestionnaireResponse', type: 'QuestionnaireResponse', searches: [
    { params: ['_id'] }, { params: ['patient', 'authored'], comparators: ['authored'] }, { params: ['patient', 'questionnaire'] },
    { params: ['patient', 'status'], or: ['status'] },
  ] },
  { name: 'RelatedPerson', type: 'RelatedPerson', searches: [{ params: ['_id'] }, { params: ['name'] }, { params: ['patient', 'name'] }] },
  { name: 'ServiceRequest', type: 'ServiceRequest', searches: [
    { params: ['_id'] }, { params: ['patient', 'category'], tokens: ['category'] }, { params: ['patient', 'code'], tokens: ['code'] },
    { params: ['patient', 'category', 'authored'], tokens: ['category'], comparators: ['authored'] },
    { params: ['patient', 'code', 'authored'], tokens: ['code'], comparators: ['authored'] }, { params: ['patient', 'status'], or: ['status'] },
  ] },
  { name: 'Specimen', type: 'Specimen', searches: [{ params: ['_id'] }], noProvenance: true },
  // Reached through the references of the resources above, as the kit reaches them.
  { name: 'Practitioner', type: 'Practitioner', referenced: '_id', searches: [{ params: ['name'] }, { params: ['identifier'], tokens: ['identifier'] }], noProvenance: true },
  { name: 'PractitionerRole', type: 'PractitionerRole', referenced: 'practitioner', searches: [{ params: ['specialty'], tokens: ['specialty'] }], noProvenance: true },
  { name: 'Organization', type: 'Organization', referenced: 'name', searches: [{ params: ['address'] }], noProvenance: true },
  { name: 'Location', type: 'Location', referenced: 'address', searches: [
    { params: ['name'] }, { params: ['address-city'] }, { params: ['address-state'] }, { params: ['address-postalcode'] },
  ], noProvenance: true },
];

// A QuestionnaireResponse for patient 85: the reference server's data holds none (written for this test).
const QUESTIONNAIRE_RESPONSE: Json = {
  resourceType: 'QuestionnaireResponse', id: 'uscore-qr-85', status: 'completed',
  questionnaire: 'http://hl7.org/fhir/us/core/Questionnaire/us-core-example-phq-2|1.0.0',
  subject: { reference: 'Patient/85' }, authored: '2023-04-11T09:41:00-04:00', author: { reference: 'Patient/85' },
  item: [{ linkId: '44249-1', text: 'PHQ-2 quick depression screening', item: [{ linkId: '44250-9', text: 'Little interest or pleasure in doing things', answer: [{ valueCoding: { system: 'http://loinc.org', code: 'LA6568-5', display: 'Not at all' } }] }] }],
};

/** The types a US Core patient launch asks `patient/` scopes for. */
const US_CORE_TYPES = [
  'AllergyIntolerance', 'CarePlan', 'CareTeam', 'Condition', 'Coverage', 'Device', 'DiagnosticReport', 'DocumentReference', 'Encounter', 'Endpoint',
  'Goal', 'Immunization', 'Location', 'Media', 'Medication', 'MedicationDispense', 'MedicationRequest', 'Observation', 'Organization', 'Patient',
  'Practitioner', 'PractitionerRole', 'Procedure', 'Provenance', 'QuestionnaireResponse', 'RelatedPerson', 'ServiceRequest', 'Specimen',
];

/** The kit's two sets of granular scopes (US Core 7.0.0 "SMART Granular Scopes 1" and "2"). */
const GRANULAR = [
  [
    'Condition.rs?category=http://terminology.hl7.org/CodeSystem/condition-category|encounter-diagnosis',
    'Condition.rs?category=http://hl7.org/fhir/us/core/CodeSystem/condition-category|health-concern',
    'Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory',
    'Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|social-history',
  ],
  [
    'Condition.rs?category=http://terminology.hl7.org/CodeSystem/condition-category|problem-list-item',
    'Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|vital-signs',
    'Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|survey',
    'Observation.rs?category=http://hl7.org/fhir/us/core/CodeSystem/us-core-category|sdoh',
  ],
];

/**
 * Patient `edge` (written for this test): values real records hold and the reference data does not,
 * from which the kit derives its searches: a name with text alone, dates of a year or a month, an
 * Encounter still open (a Period with no end) and an Observation Period with no start, an instant with
 * milliseconds and a `+` offset, names and addresses with commas (the kit sends them escaped: `\,`),
 * a Condition's asserted date, a Provenance naming one Observation alone, a patient named by the
 * absolute URL of this server's Patient.
 */
const EDGE: Json[] = [
  { resourceType: 'Patient', id: 'edge', identifier: [{ system: 'http://hospital.example.org/mrn', value: 'E-1001' }], name: [{ text: 'Maria Lopez' }], gender: 'female', birthDate: '1970' },
  { resourceType: 'Organization', id: 'edge-org', name: 'Springfield Hospital, Inc.', address: [{ text: '1 Main St, Springfield', city: 'Springfield', state: 'MA' }] },
  {
    resourceType: 'Encounter', id: 'edge-enc', status: 'in-progress', identifier: [{ system: 'http://hospital.example.org/visit', value: 'V-77' }],
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' }, type: [{ coding: [{ system: 'http://snomed.info/sct', code: '183452005' }] }],
    subject: { reference: 'Patient/edge' }, period: { start: '2023-04-11T09:41:00+05:30' }, serviceProvider: { reference: 'Organization/edge-org' },
    hospitalization: { dischargeDisposition: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/discharge-disposition', code: 'home' }] } },
  },
  ...[['problem-list-item', '2015-03', '2016'], ['encounter-diagnosis', '2019', '2019-06']].map(([category, onset, abatement], i) => ({
    resourceType: 'Condition', id: `edge-cond-${i}`, subject: { reference: 'Patient/edge' }, encounter: { reference: 'Encounter/edge-enc' },
    extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/condition-assertedDate', valueDateTime: onset }],
    clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'resolved' }] },
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-category', code: category }] }],
    code: { coding: [{ system: 'http://snomed.info/sct', code: '195662009' }] }, onsetDateTime: onset, abatementDateTime: abatement, recordedDate: `${onset}-03`.slice(0, 10),
  })),
  {
    resourceType: 'Observation', id: 'edge-height', status: 'final', subject: { reference: 'Patient/edge' },
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
    code: { coding: [{ system: 'http://loinc.org', code: '8302-2' }] }, effectivePeriod: { end: '2023-04-11T09:41:00+05:30' },
    valueQuantity: { value: 162, unit: 'cm', system: 'http://unitsofmeasure.org', code: 'cm' },
  },
  {
    // Referring to its patient by the absolute URL of this server's Patient, as some EHRs write them.
    resourceType: 'AllergyIntolerance', id: 'edge-allergy', patient: { reference: `${BASE}/tenants/t1/fhir/R4/Patient/edge` },
    clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }] },
    verificationStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-verification', code: 'confirmed' }] },
    code: { coding: [{ system: 'http://snomed.info/sct', code: '91935009' }] },
  },
  {
    resourceType: 'Provenance', id: 'edge-height-provenance', target: [{ reference: 'Observation/edge-height' }], recorded: '2023-04-11T09:45:00+05:30',
    agent: [{ type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/provenance-participant-type', code: 'author' }] }, who: { reference: 'Organization/edge-org' } }],
  },
  {
    resourceType: 'DocumentReference', id: 'edge-doc', status: 'current', subject: { reference: 'Patient/edge' }, date: '2023-04-11T09:41:00.123+05:30',
    type: { coding: [{ system: 'http://loinc.org', code: '11506-3' }] },
    category: [{ coding: [{ system: 'http://hl7.org/fhir/us/core/CodeSystem/us-core-documentreference-category', code: 'clinical-note' }] }],
    content: [{ attachment: { contentType: 'text/plain', data: 'UHJvZ3Jlc3Mgbm90ZQ==' } }], context: { period: { start: '2023-04-11', end: '2023-04-12' } },
  },
];


await eachStore((kind, fresh) => {
  describe(`US Core searches as Inferno runs them (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let token: string;
    /** Combinations the data holds no values for (the kit skips them), and references already resolved. */
    const skipped = new Set<string>();
    const resolved = new Set<string>();
    /** GET searches already answered: the profiles of one category share most of their searches. */
    const answered = new Map<string, { resources: Json[]; failure?: string }>();
    /** Resources the first searches found, by group and patient (the kit's scratch). */
    const scratch = new Map<string, Map<string | undefined, Json[]>>();
    /** Capability: parameters, includes and revincludes listed per type. */
    const used = { params: new Map<string, Set<string>>(), includes: new Set<string>(), revincludes: new Set<string>() };

    beforeAll(async () => {
      // Instants with milliseconds, as a real clock gives them (`_lastUpdated` is searched by its exact value).
      t = await createTestApp({ store: await fresh(), clock: testClock(Date.parse('2026-01-15T10:00:00.123Z')) });
      token = await t.token();
      api = fhirClient(t, token);
      for (const f of ['patient-85.json', 'patient-355.json']) {
        const res = await api.post('', readFileSync(join(FIXTURES, f), 'utf8'));
        if (res.status !== 200) throw new Error(`${f}: ${res.status} ${await res.text()}`);
      }
      for (const r of [QUESTIONNAIRE_RESPONSE, ...EDGE]) await api.put200(r);
    }, 60_000);
    afterAll(() => t.close());

    /** Every resource of a search, its pages read through `next` (at most 20, as the kit); a GET asked again is answered from memory. */
    async function all(path: string, init?: RequestInit): Promise<{ resources: Json[]; failure?: string }> {
      if (init) return fetchAll(path, init);
      const known = answered.get(path);
      if (known) return known;
      const got = await fetchAll(path);
      answered.set(path, got);
      return got;
    }
    /** `all` without memory, with `bearer` (the admin token by default). */
    async function fetchAll(path: string, init?: RequestInit, bearer = token): Promise<{ resources: Json[]; failure?: string }> {
      const resources: Json[] = [];
      const get = (url: string) => t.request(url.startsWith('http') ? url : `${api.base}/${url}`, { headers: { ...CLIENT_HEADERS, Authorization: `Bearer ${bearer}` } });
      let res = init ? await t.request(`${api.base}/${path}`, init) : await get(path);
      for (let page = 0; page < 20; page++) {
        const text = await res.text();
        if (res.status !== 200) return { resources, failure: `${path}: ${res.status} ${text.slice(0, 300)}` };
        const bundle = JSON.parse(text) as Json;
        if (bundle.resourceType !== 'Bundle') return { resources, failure: `${path}: not a Bundle` };
        resources.push(...(bundle.entry ?? []).map((e: Json) => e.resource));
        const next = bundle.link?.find((l: Json) => l.relation === 'next')?.url;
        if (!next) return { resources };
        res = await get(next);
      }
      return { resources, failure: `${path}: more than 20 pages` };
    }

    /** Runs one search, checks its answer and its matches (and with `paged`, its pages of 3); returns the resources of `type`. */
    async function search(g: Group, params: Record<string, string>, failures: string[], paged = false): Promise<Json[]> {
      for (const name of Object.keys(params)) (used.params.get(g.type) ?? used.params.set(g.type, new Set()).get(g.type)!).add(name);
      const q = query(g.type, params);
      const { resources, failure } = await all(q);
      if (failure) {
        failures.push(failure);
        return [];
      }
      const matches = resources.filter((r) => r.resourceType === g.type);
      for (const r of matches) {
        for (const [name, value] of Object.entries(params)) {
          if (!meets(g.type, api.base, r, name, value)) failures.push(`${q}: ${g.type}/${r.id} does not meet ${name}=${value} (has ${JSON.stringify(at(r, PARAMS[g.type]![name]!.path))})`);
        }
      }
      if (!paged) return matches;
      // Paged at three a page, the same matches (the kit reads every page of a server's own size).
      const pages = await all(query(g.type, { ...params, _count: '3' }));
      const ids = (rs: Json[]) => rs.filter((r) => r.resourceType === g.type).map((r) => r.id).sort();
      if (pages.failure) failures.push(pages.failure);
      else if (JSON.stringify(ids(pages.resources)) !== JSON.stringify(ids(matches))) failures.push(`${q}: pages of 3 hold ${ids(pages.resources).length} matches, one page ${matches.length}`);
      return matches;
    }

    /** The values of `names` from the first resource that has them all (SearchTest#search_params_with_values). */
    function valuesFrom(g: Group, resources: Json[], names: string[], patient: string | undefined, withSystem: boolean, version: 'v3' | 'v6', comparators: string[] = []) {
      for (const r of resources) {
        const out: Record<string, string> = {};
        for (const n of names) {
          const v = n === 'patient' ? patient : n === '_id' && g.type === 'Patient' ? patient : valueOf(g.type, n, r, withSystem, version, comparators.includes(n));
          if (v === undefined) break;
          out[n] = v;
        }
        if (Object.keys(out).length === names.length) return out;
      }
      return undefined;
    }

    /** The first search: the patient (with each fixed value), or a value of a referenced resource. */
    async function firstSearches(g: Group): Promise<Map<string | undefined, { params: Record<string, string>; found: Json[] }[]>> {
      const out = new Map<string | undefined, { params: Record<string, string>; found: Json[] }[]>();
      if (g.referenced) {
        const everything = [...scratch.values()].flatMap((m) => [...m.values()].flat());
        // PractitionerRole is searched by the practitioners the data refers to.
        const target = g.referenced === 'practitioner' ? 'Practitioner' : g.type;
        const refs = [...new Set(everything.flatMap(referencesIn).filter((ref) => ref.startsWith(`${target}/`)))];
        const targets = (await Promise.all(refs.map(async (ref) => (await (await api.get(ref)).json()) as Json))).filter((r) => r.resourceType === target);
        out.set(undefined, targets.flatMap((r) => {
          const v = g.referenced === '_id' ? r.id : g.referenced === 'practitioner' ? `Practitioner/${r.id}` : valueOf(g.type, g.referenced!, r, false, 'v6');
          return v === undefined ? [] : [{ params: { [g.referenced!]: v }, found: [] }];
        }));
        return out;
      }
      for (const patient of PATIENTS) {
        const key = g.type === 'Patient' ? '_id' : 'patient';
        const values = g.fixed ? g.fixed[1].map((v) => ({ [key]: patient, [g.fixed![0]]: v })) : [{ [key]: patient }];
        out.set(patient, values.map((params) => ({ params, found: [] })));
      }
      return out;
    }

    for (const g of GROUPS) {
      test(`${g.name}: first search, reference and POST variants, reads, references, Provenance`, async () => {
        const failures: string[] = [];
        const found: Json[] = [];
        const mine = new Map<string | undefined, Json[]>();
        scratch.set(g.name, mine);
        const first = await firstSearches(g);
        for (const [patient, searches] of first) {
          for (const s of searches) {
            s.found = await search(g, s.params, failures, true);
            found.push(...s.found);
            mine.set(patient, [...(mine.get(patient) ?? []), ...s.found]);
            if (s.found.length === 0) continue;
            // patient=Patient/85 finds what patient=85 finds.
            if (s.params.patient) {
              const typed = await search(g, { ...s.params, patient: `Patient/${patient}` }, failures);
              if (typed.length !== s.found.length) failures.push(`${g.type} patient=Patient/${patient}: ${typed.length} found, patient=${patient}: ${s.found.length}`);
            }
            // POST [type]/_search with the same parameters in a form body finds as many.
            const post = await all(`${g.type}/_search`, {
              method: 'POST', body: new URLSearchParams(s.params),
              headers: { ...CLIENT_HEADERS, Authorization: `Bearer ${token}`, 'Content-Type': 'application/x-www-form-urlencoded' },
            });
            const posted = post.resources.filter((r) => r.resourceType === g.type).length;
            if (post.failure || posted !== s.found.length) failures.push(`${g.type} POST _search ${JSON.stringify(s.params)}: ${post.failure ?? posted} found, GET ${s.found.length}`);
            // The fixed value again as system|code.
            if (g.fixed && PARAMS[g.type]![g.fixed[0]]!.kind === 'token') {
              const sys = valuesFrom(g, s.found, [g.fixed[0]], patient, true, 'v6');
              if (sys && (await search(g, { ...s.params, ...sys }, failures)).length === 0) failures.push(`${g.type} ${JSON.stringify(sys)}: nothing found by system|code`);
            }
            if (g.includeMedication) await checkMedicationInclude(g, s.params, s.found, failures);
            if (!g.noProvenance) await checkProvenance(g, s.params, s.found, failures);
          }
        }
        if (found.length === 0) failures.push(`${g.name}: the first search found nothing`);
        // Read: each resource found reads back with its id; each literal reference in it resolves.
        for (const r of found.slice(0, 5)) {
          const res = await api.get(`${g.type}/${r.id}`);
          const body = (await res.json()) as Json;
          if (res.status !== 200 || body.id !== r.id || body.resourceType !== g.type) failures.push(`read ${g.type}/${r.id}: ${res.status}`);
        }
        for (const ref of new Set(found.flatMap(referencesIn))) {
          if (resolved.has(ref)) continue;
          resolved.add(ref);
          const res = await api.get(ref);
          const body = (await res.json()) as Json;
          if (res.status !== 200 || `${body.resourceType}/${body.id}` !== ref) failures.push(`reference ${ref} of a ${g.type}: ${res.status}`);
        }
        expect(failures).toEqual([]);
      });

      if (g.searches.length === 0) continue;
      test(`${g.name}: ${g.searches.map((s) => s.params.join('+')).join(', ')}`, async () => {
        const failures: string[] = [];
        const done = new Set<string>();
        const ran = new Set<string>();
        const variantsDone = new Set<Combination>();
        for (const c of g.searches) {
          for (const [patient, mine] of scratch.get(g.name) ?? []) {
            if (mine.length === 0) continue;
            for (const version of ['v3', 'v6'] as const) {
              const params = valuesFrom(g, mine, c.params, patient, false, version, c.comparators);
              if (!params) {
                if (!ran.has(c.params.join('+'))) skipped.add(`${g.name}: ${c.params.join('+')}`);
                continue;
              }
              ran.add(c.params.join('+'));
              skipped.delete(`${g.name}: ${c.params.join('+')}`);
              const key = `${c.params.join('+')} ${JSON.stringify(params)}`;
              if (done.has(key)) continue;
              done.add(key);
              const matches = await search(g, params, failures, true);
              if (matches.length === 0) failures.push(`${query(g.type, params)}: nothing found`);
              // The variants run once a combination, for the first patient with matches (as the kit's do).
              if (matches.length === 0 || variantsDone.has(c)) continue;
              variantsDone.add(c);
              // Comparators: gt ge lt le a day around a match's own date.
              for (const name of c.comparators ?? []) {
                const v = at(matches[0], PARAMS[g.type]![name]!.path)[0] as string | Json;
                const date = typeof v === 'string' ? v : v.start ?? v.end;
                for (const op of ['gt', 'ge', 'lt', 'le']) {
                  const value = `${op}${shiftDate(date, op.startsWith('g') ? -1 : 1)}`;
                  const got = await search(g, { ...params, [name]: value }, failures);
                  if (got.length === 0) failures.push(`${query(g.type, { ...params, [name]: value })}: nothing found`);
                }
              }
              // Tokens again as system|code.
              if (c.tokens) {
                const sys = valuesFrom(g, mine, c.tokens, patient, true, version, c.comparators);
                if (sys && (await search(g, { ...params, ...sys }, failures)).length === 0) failures.push(`${query(g.type, { ...params, ...sys })}: nothing found by system|code`);
              }
              // Multiple or: every value the patient's resources have comes back.
              if (c.or) {
                const orParams = { ...params, ...Object.fromEntries(c.or.map((n) => [n, OR_VALUES[g.type]![n]!.join(',')])) };
                const got = await search(g, orParams, failures);
                for (const n of c.or) {
                  const have = new Set(mine.flatMap((r) => at(r, PARAMS[g.type]![n]!.path).map(String)));
                  const back = new Set(got.flatMap((r) => at(r, PARAMS[g.type]![n]!.path).map(String)));
                  const missing = [...have].filter((v) => !back.has(v));
                  if (missing.length) failures.push(`${query(g.type, orParams)}: no ${n} ${missing.join(',')} among the results`);
                }
              }
            }
          }
        }
        expect(failures).toEqual([]);
      });
    }

    /** `_include=MedicationRequest:medication`: the Medications the matches name, and no other. */
    async function checkMedicationInclude(g: Group, params: Record<string, string>, found: Json[], failures: string[]) {
      const external = found.map((r) => r.medicationReference?.reference).filter((r): r is string => !!r && !r.startsWith('#'));
      if (external.length === 0) return;
      used.includes.add(`${g.type}:medication`);
      const { resources, failure } = await all(query(g.type, { ...params, _include: `${g.type}:medication` }));
      if (failure) {
        failures.push(failure);
        return;
      }
      const meds = resources.filter((r) => r.resourceType === 'Medication').map((m) => `Medication/${m.id}`);
      if (meds.length === 0) failures.push(`${g.type} _include=${g.type}:medication: no Medication included`);
      for (const m of meds) if (!external.includes(m)) failures.push(`${g.type} _include: ${m} is named by no match`);
      const paged = await all(query(g.type, { ...params, _include: `${g.type}:medication`, _count: '3' }));
      const pagedMeds = new Set(paged.resources.filter((r) => r.resourceType === 'Medication').map((m) => `Medication/${m.id}`));
      if (paged.failure || pagedMeds.size !== new Set(meds).size) failures.push(`${g.type} _include with _count=3: ${paged.failure ?? [...pagedMeds].join(',')}`);
    }

    /** `_revinclude=Provenance:target`: every Provenance targeting a match, and only those. */
    async function checkProvenance(g: Group, params: Record<string, string>, found: Json[], failures: string[]) {
      used.revincludes.add(`${g.type}:Provenance:target`);
      const { resources, failure } = await all(query(g.type, { ...params, _revinclude: 'Provenance:target' }));
      if (failure) {
        failures.push(failure);
        return;
      }
      const matched = new Set(found.map((r) => `${g.type}/${r.id}`));
      const included = resources.filter((r) => r.resourceType === 'Provenance');
      for (const prov of included) {
        if (!prov.target.some((x: Json) => matched.has(x.reference))) failures.push(`${g.type} _revinclude: Provenance/${prov.id} targets no match`);
        // The kit's Provenance group: each one read back, and its references resolved.
        for (const ref of [`Provenance/${prov.id}`, ...referencesIn(prov)]) {
          if (resolved.has(ref)) continue;
          resolved.add(ref);
          const res = await api.get(ref);
          const body = (await res.json()) as Json;
          if (res.status !== 200 || `${body.resourceType}/${body.id}` !== ref) failures.push(`read ${ref} (from a Provenance): ${res.status}`);
        }
      }
      const expected = (await all(`Provenance?target=${[...matched].join(',')}`)).resources.filter((r) => r.resourceType === 'Provenance');
      const ids = (rs: Json[]) => [...new Set(rs.map((r) => r.id))].sort().join(',');
      if (ids(expected) !== ids(included)) failures.push(`${query(g.type, params)}&_revinclude=Provenance:target: Provenance ${ids(included) || 'none'}, expected ${ids(expected)}`);
      // Paged at three a page, each page includes the Provenance of its matches: the same ones in all.
      const paged = await all(query(g.type, { ...params, _revinclude: 'Provenance:target', _count: '3' }));
      const pagedIds = ids(paged.resources.filter((r) => r.resourceType === 'Provenance'));
      if (paged.failure || pagedIds !== ids(expected)) failures.push(`${query(g.type, params)}&_revinclude=Provenance:target&_count=3: ${paged.failure ?? `Provenance ${pagedIds || 'none'}, expected ${ids(expected)}`}`);
    }

    test('the data holds values for every combination, and Medications to include', () => {
      expect([...skipped]).toEqual([]);
      // Every record of patient `edge` was found by its profile's first search.
      const found = new Set([...scratch.values()].flatMap((byPatient) => [...byPatient.values()].flat()).map((r) => `${r.resourceType}/${r.id}`));
      expect(EDGE.map((r) => `${r.resourceType}/${r.id}`).filter((ref) => !found.has(ref))).toEqual(['Provenance/edge-height-provenance']);
      expect([...used.includes].sort()).toEqual(['MedicationDispense:medication', 'MedicationRequest:medication']);
    });

    // Granular scopes (US Core 6.1.0 and 7.0.0, SMART App Launch 2): the kit repeats the Condition and
    // Observation searches with a token granted only some categories, and reads one resource in scope
    // and one out of it. The kit's tokens are patient/ ones from a launch; system/ scopes filter alike.
    for (const [i, granted] of GRANULAR.entries()) {
      test(`granular scopes ${i + 1}: ${granted.join(' ')}`, async () => {
        const bearer = await t.tokenFor('t1', granted.map((g) => `system/${g}`));
        const failures: string[] = [];
        const filters = granted.map((g) => ({ type: g.split('.')[0]!, name: 'category', value: decodeURIComponent(g.split('=')[1]!) }));
        const inScope = (type: string, r: Json) => filters.some((f) => f.type === type && meets(type, api.base, r, f.name, f.value));
        const read = new Map<string, Json>();
        let compared = 0;
        for (const [path, before] of answered) {
          const type = path.split('?')[0]!;
          if (!['Condition', 'Observation'].includes(type) || before.failure || path.includes('_count=')) continue;
          const params = Object.fromEntries(new URLSearchParams(path.split('?')[1]));
          const queryInScope = filters.some((f) => f.type === type && params[f.name] === f.value);
          compared++;
          const got = await fetchAll(path, undefined, bearer);
          const found = got.resources.filter((r) => r.resourceType === type);
          if (got.failure) {
            if (queryInScope) failures.push(`${path} (granular): ${got.failure}`);
            continue;
          }
          for (const r of found) if (!inScope(type, r)) failures.push(`${path} (granular): ${type}/${r.id} is out of the granted scopes`);
          const expected = before.resources.filter((r) => r.resourceType === type && inScope(type, r));
          for (const r of before.resources) if (r.resourceType === type) read.set(`${type}/${r.id}`, r);
          if (queryInScope || found.length) {
            const ids = (rs: Json[]) => rs.map((r) => r.id).sort().join(',');
            if (ids(found) !== ids(expected)) failures.push(`${path} (granular): ${ids(found) || 'none'}, expected ${ids(expected) || 'none'}`);
          }
        }
        expect(compared).toBeGreaterThan(100);
        // Reads: one resource for each granted scope answers 200; one in none of them does not.
        const get = (ref: string) => t.request(`${api.base}/${ref}`, { headers: { ...CLIENT_HEADERS, Authorization: `Bearer ${bearer}` } });
        for (const f of filters) {
          const hit = [...read].find(([ref, r]) => ref.startsWith(`${f.type}/`) && meets(f.type, api.base, r, f.name, f.value));
          if (!hit) continue;
          const res = await get(hit[0]);
          if (res.status !== 200) failures.push(`read ${hit[0]} (in scope ${f.type} ${f.value}): ${res.status}`);
        }
        for (const type of ['Condition', 'Observation']) {
          const miss = [...read].find(([ref, r]) => ref.startsWith(`${type}/`) && !inScope(type, r));
          if (!miss) continue;
          const res = await get(miss[0]);
          if (res.status === 200 || res.status >= 500) failures.push(`read ${miss[0]} (out of scope): ${res.status}`);
        }
        expect(failures).toEqual([]);
      });
    }

    // ONC's single patient API tests run the kit with the token of a patient's launch (`patient/` scopes,
    // one per US Core type): every search of patient 85 finds what it found with the admin token,
    // included Medications and Provenance, and Practitioners, Organizations and Locations (outside the
    // Patient compartment) are shared records it reads and searches whole.
    test('a patient launch token for patient 85 finds what the admin token found', async () => {
      const scopes = ['launch/patient', 'openid', 'fhirUser', ...US_CORE_TYPES.map((type) => `patient/${type}.rs`)];
      const bearer = await craftToken(t, scopes.join(' '), { patient: '85' });
      const failures: string[] = [];
      const ids = (rs: Json[]) => rs.map((r) => `${r.resourceType}/${r.id}`).sort().join(',');
      let compared = 0;
      for (const [path, before] of answered) {
        const type = path.split('?')[0]!;
        const params = new URLSearchParams(path.split('?')[1]);
        const patient = params.get('patient') ?? (type === 'Patient' ? params.get('_id') : null);
        if (before.failure || (patient !== null ? !['85', 'Patient/85'].includes(patient) : !['Practitioner', 'PractitionerRole', 'Organization', 'Location'].includes(type))) continue;
        compared++;
        const got = await fetchAll(path, undefined, bearer);
        if (got.failure || ids(got.resources) !== ids(before.resources)) failures.push(`${path} (patient token): ${got.failure ?? `${ids(got.resources)}, expected ${ids(before.resources)}`}`);
      }
      // Reads: the patient's resources the first searches found, and every resource they refer to.
      const found = [...scratch.values()].flatMap((byPatient) => byPatient.get('85') ?? []);
      for (const ref of new Set([...found.map((r) => `${r.resourceType}/${r.id}`), ...found.flatMap(referencesIn)])) {
        const res = await t.request(`${api.base}/${ref}`, { headers: { ...CLIENT_HEADERS, Authorization: `Bearer ${bearer}` } });
        if (res.status !== 200) failures.push(`read ${ref} (patient token): ${res.status}`);
        compared++;
      }
      expect(compared).toBeGreaterThan(100);
      expect(failures).toEqual([]);
    });

    // A Provenance that names only the patient's Observation (as EHRs write one Provenance per record)
    // is outside R4's Patient compartment (its `patient` parameter is the targets that are Patients), yet
    // a patient launch token gets it from `_revinclude=Provenance:target` and reads it: it names a record
    // of the patient the token reads (src/fhir/provenance-reach.ts), as the kit's Provenance tests need.
    test('a patient launch token gets the Provenance of its Observation', async () => {
      const bearer = await craftToken(t, ['launch/patient', ...US_CORE_TYPES.map((type) => `patient/${type}.rs`)].join(' '), { patient: 'edge' });
      const got = await fetchAll(query('Observation', { patient: 'edge', code: '8302-2', _revinclude: 'Provenance:target' }), undefined, bearer);
      expect(got.resources.map((r) => `${r.resourceType}/${r.id}`).sort()).toEqual(['Observation/edge-height', 'Provenance/edge-height-provenance']);
      const read = await t.request(`${api.base}/Provenance/edge-height-provenance`, { headers: { ...CLIENT_HEADERS, Authorization: `Bearer ${bearer}` } });
      expect(read.status).toBe(200);
    });

    test('the CapabilityStatement lists every parameter, _include and _revinclude these searches use', async () => {
      // The kit's Capability Statement group: no token, 200, FHIR 4.0.1, JSON among the formats.
      const res = await t.request(`${api.base}/metadata`, { headers: CLIENT_HEADERS });
      const cs = (await res.json()) as Json;
      expect({ status: res.status, resourceType: cs.resourceType, fhirVersion: cs.fhirVersion }).toEqual({ status: 200, resourceType: 'CapabilityStatement', fhirVersion: '4.0.1' });
      expect(cs.format.some((f: string) => ['json', 'application/json', 'application/json+fhir', 'application/fhir+json'].includes(f))).toBe(true);
      const missing: string[] = [];
      const rest = cs.rest[0].resource as Json[];
      for (const [type, names] of used.params) {
        const entry = rest.find((r) => r.type === type);
        const listed = new Set<string>([...(entry?.searchParam ?? []).map((s: Json) => s.name), ...(cs.rest[0].searchParam ?? []).map((s: Json) => s.name)]);
        for (const n of names) if (!listed.has(n)) missing.push(`${type}.${n}`);
        if (!entry?.interaction?.some((i: Json) => i.code === 'search-type')) missing.push(`${type} search-type`);
        if (!entry?.interaction?.some((i: Json) => i.code === 'read')) missing.push(`${type} read`);
      }
      for (const inc of used.includes) {
        const entry = rest.find((r) => r.type === inc.split(':')[0]);
        if (!entry?.searchInclude?.includes(inc)) missing.push(`_include ${inc}`);
      }
      for (const rev of used.revincludes) {
        const entry = rest.find((r) => r.type === rev.split(':')[0]);
        if (!entry?.searchRevInclude?.includes('Provenance:target')) missing.push(`_revinclude ${rev}`);
      }
      expect(missing).toEqual([]);
    });
  });
});
