/**
 * Writes are validated against the official R4 4.0.1 definitions, not Medplum's: no Medplum-only or R5
 * elements, R4's EvidenceVariable, bindings and Reference targets; a choice element holds one type even
 * through its `_` primitive extensions; dom-3 counts references, canonicals and uris only.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

let t: TestApp;
let api: FhirClient;
beforeAll(async () => {
  t = await createTestApp();
  api = fhirClient(t, await t.token());
});
afterAll(() => t.close());

/** The sorted expressions of a 422's issues. */
async function refusedAt(resource: Json): Promise<string[]> {
  const outcome = await expectOutcome(await api.post(resource.resourceType, resource), 422);
  return (outcome.issue as Json[]).map((i) => i.expression[0] as string).sort();
}

/** The issues of a 422, as `expression code text`. */
async function refusedWith(resource: Json): Promise<Json[]> {
  const outcome = await expectOutcome(await api.post(resource.resourceType, resource), 422);
  return (outcome.issue as Json[]).map((i) => ({ expression: i.expression[0], code: i.code, text: i.details.text }));
}

async function created(resource: Json): Promise<void> {
  const res = await api.post(resource.resourceType, resource);
  expect({ status: res.status, body: await res.text() }).toMatchObject({ status: 201 });
}

const extension = { extension: [{ url: 'http://example.org/note', valueString: 'n' }] };

describe('elements R4 does not have', () => {
  test("Medplum's meta elements are unknown", async () => {
    for (const name of ['project', 'author', 'onBehalfOf', 'account', 'accounts', 'compartment', 'deleted']) {
      const issues = await refusedWith({ resourceType: 'Patient', meta: { [name]: name === 'deleted' ? true : 'abc' } });
      expect(issues).toEqual([{ expression: `Patient.meta.${name}`, code: 'structure', text: `Unknown element '${name}' in Meta` }]);
    }
    await created({ resourceType: 'Patient', meta: { source: 'urn:x', tag: [{ code: 't' }] } });
  });

  test('R5 and Medplum elements of Binary, HealthcareService, DeviceDefinition, ObservationDefinition', async () => {
    expect(await refusedAt({ resourceType: 'Binary', contentType: 'text/plain', url: 'http://example.org/b' })).toEqual(['Binary.url']);
    expect(await refusedAt({ resourceType: 'HealthcareService', offeredIn: [{ reference: 'HealthcareService/h' }] })).toEqual(['HealthcareService.offeredIn']);
    const device = { resourceType: 'DeviceDefinition', classification: [{ type: { text: 'x' } }], bodySite: [{ text: 'arm' }] };
    expect(await refusedAt(device)).toEqual(['DeviceDefinition.bodySite', 'DeviceDefinition.classification']);
    expect(await refusedAt({ resourceType: 'ObservationDefinition', code: { text: 'x' }, publisher: 'p' })).toEqual(['ObservationDefinition.publisher']);
  });

  test("ResearchStudy's R5 elements", async () => {
    const r5 = ['name', 'label', 'studyDesign', 'region', 'descriptionSummary', 'classifier', 'associatedParty', 'progressStatus', 'whyStopped', 'recruitment', 'comparisonGroup', 'outcomeMeasure', 'result'];
    const study: Json = { resourceType: 'ResearchStudy', status: 'active', objective: [{ name: 'o', description: 'R5' }] };
    for (const name of r5) study[name] = name === 'name' || name === 'descriptionSummary' ? 'x' : [{ text: 'x' }];
    expect(await refusedAt(study)).toEqual([...r5.map((n) => `ResearchStudy.${n}`), 'ResearchStudy.objective[0].description'].sort());
    await created({ resourceType: 'ResearchStudy', status: 'active', title: 't', objective: [{ name: 'o' }] });
  });
});

describe('Resource.id, Element.id, Extension.url and Narrative.div take no id or extensions', () => {
  const masked = { extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/data-absent-reason', valueCode: 'masked' }] };
  const text = { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">p</div>' };

  test('their _name is an unknown element, and nothing is stored', async () => {
    expect(await refusedWith({ resourceType: 'Patient', id: 'p', _id: masked })).toEqual([
      { expression: 'Patient._id', code: 'structure', text: "Unknown element '_id' in Patient: Patient.id takes no id or extensions" },
    ]);
    expect(await refusedAt({ resourceType: 'Patient', name: [{ family: 'F', _id: masked }] })).toEqual(['Patient.name[0]._id']);
    expect(await refusedAt({ resourceType: 'Patient', extension: [{ url: 'http://example.org/x', _url: masked, valueString: 'v' }] })).toEqual(['Patient.extension[0]._url']);
    expect(await refusedAt({ resourceType: 'Patient', text: { ...text, _div: masked } })).toEqual(['Patient.text._div']);
    const res = await api.put('Patient/p', { resourceType: 'Patient', id: 'p', _id: masked });
    expect(res.status).toBe(422);
    expect((await api.get('Patient/p')).status).toBe(404);
  });

  test('the same elements without them are stored', async () => {
    await created({ resourceType: 'Patient', id: 'p', name: [{ id: 'n', family: 'F', _family: masked }], extension: [{ url: 'http://example.org/x', valueString: 'v' }], text });
  });
});

describe('Element.id is unique within a resource', () => {
  test('a second element with the same id is refused at its id; each resource and a snapshot are scopes of their own', async () => {
    expect(await refusedWith({ resourceType: 'Patient', name: [{ id: 'a', family: 'F' }], telecom: [{ id: 'a', system: 'phone', value: '1' }] })).toEqual([
      { expression: 'Patient.telecom[0].id', code: 'value', text: "Element ids must be unique within a resource: 'a' is also the id of Patient.name[0]" },
    ]);
    expect(await refusedAt({ resourceType: 'Patient', name: [{ id: 'a', family: 'F' }], birthDate: '2000', _birthDate: { id: 'a', ...extension } })).toEqual(['Patient.birthDate.id']);
    expect(await refusedAt({ resourceType: 'Patient', extension: [{ id: 'x', url: 'http://example.org/a', extension: [{ id: 'x', url: 'b', valueString: 'v' }] }] })).toEqual(['Patient.extension[0].extension[0].id']);
    // Each resource, a contained one too, has ids of its own; so has a StructureDefinition's snapshot.
    const named = (id: string) => ({ resourceType: 'Patient', id, name: [{ id: 'n', family: id }] });
    await created({ ...named('outer'), contained: [named('c1'), named('c2')], link: [{ other: { reference: '#c1' }, type: 'seealso' }, { other: { reference: '#c2' }, type: 'seealso' }] });
    await created({
      resourceType: 'StructureDefinition', url: 'http://example.org/StructureDefinition/p', name: 'P', status: 'draft', kind: 'resource', abstract: false,
      type: 'Patient', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint',
      snapshot: { element: [['Patient', 0], ['Patient.name', 1]].map(([path, min]) => ({ id: path, path, definition: 'd', min, max: '*', base: { path, min: 0, max: '*' } })) },
      differential: { element: [{ id: 'Patient.name', path: 'Patient.name', min: 1 }] },
    });
  });
});

describe("R4's EvidenceVariable", () => {
  test('valid R4 is stored', async () => {
    await created({
      resourceType: 'EvidenceVariable', status: 'active',
      characteristic: [
        {
          description: 'Adults with an HbA1c measured',
          definitionDataRequirement: { type: 'Observation' },
          usageContext: [{ code: { system: 'http://terminology.hl7.org/CodeSystem/usage-context-type', code: 'focus' }, valueCodeableConcept: { text: 'diabetes' } }],
          groupMeasure: 'mean',
          timeFromStart: { value: 30, unit: 'days', system: 'http://unitsofmeasure.org', code: 'd' },
          participantEffectiveDateTime: '2020-01-01',
        },
        { definitionTriggerDefinition: { type: 'named-event', name: 'admission' }, exclude: true },
      ],
    });
  });

  test('characteristic is 1..*, definition[x] 1..1; R5 elements are unknown; groupMeasure is bound', async () => {
    expect(await refusedWith({ resourceType: 'EvidenceVariable', status: 'active' })).toEqual([
      { expression: 'EvidenceVariable.characteristic', code: 'required', text: 'EvidenceVariable.characteristic is required' },
    ]);
    expect(await refusedWith({ resourceType: 'EvidenceVariable', status: 'active', characteristic: [{ description: 'd' }] })).toEqual([
      { expression: 'EvidenceVariable.characteristic[0].definition', code: 'required', text: 'EvidenceVariable.characteristic.definition[x] is required' },
    ]);
    const r5 = { resourceType: 'EvidenceVariable', status: 'active', characteristic: [{ definitionCodeableConcept: { text: 'x' }, definitionId: 'x', linkId: 'l' }] };
    expect(await refusedAt(r5)).toEqual(['EvidenceVariable.characteristic[0].definitionId', 'EvidenceVariable.characteristic[0].linkId']);
    const measure = { resourceType: 'EvidenceVariable', status: 'active', characteristic: [{ definitionCodeableConcept: { text: 'x' }, groupMeasure: 'mode' }] };
    expect(await refusedAt(measure)).toEqual(['EvidenceVariable.characteristic[0].groupMeasure']);
  });
});

describe('bindings and Reference targets of R4', () => {
  test('DetectedIssue.status binds observation-status', async () => {
    await created({ resourceType: 'DetectedIssue', status: 'amended' });
    await created({ resourceType: 'DetectedIssue', status: 'unknown' });
    const issues = await refusedWith({ resourceType: 'DetectedIssue', status: 'mitigated' });
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ expression: 'DetectedIssue.status', code: 'code-invalid' });
    expect(issues[0]!.text).toContain('http://hl7.org/fhir/ValueSet/observation-status');
  });

  test('ResearchStudy.site is a Location, MeasureReport.subject one of R4 list', async () => {
    expect(await refusedAt({ resourceType: 'ResearchStudy', status: 'active', site: [{ reference: 'Organization/o' }] })).toEqual(['ResearchStudy.site[0].reference']);
    await created({ resourceType: 'ResearchStudy', status: 'active', site: [{ reference: 'Location/l' }] });
    const report = { resourceType: 'MeasureReport', status: 'complete', type: 'individual', measure: 'http://example.org/Measure/m', period: { start: '2020-01-01', end: '2020-12-31' } };
    for (const type of ['Organization', 'CareTeam', 'HealthcareService']) {
      expect(await refusedAt({ ...report, subject: { reference: `${type}/x` } })).toEqual(['MeasureReport.subject.reference']);
    }
    for (const type of ['Patient', 'Group', 'Location']) await created({ ...report, subject: { reference: `${type}/x` } });
  });
});

describe('app-4 (README, Validation: an invariant the table corrects)', () => {
  const appointment = {
    resourceType: 'Appointment', start: '2020-01-01T10:00:00Z', end: '2020-01-01T10:30:00Z', cancelationReason: { text: 'did not come' },
    participant: [{ actor: { reference: 'Patient/p' }, status: 'declined' }],
  };

  test("a cancelation reason goes with R4's noshow or cancelled", async () => {
    await created({ ...appointment, status: 'noshow' });
    await created({ ...appointment, status: 'cancelled' });
    const issues = await refusedWith({ ...appointment, status: 'booked' });
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ expression: 'Appointment', code: 'invariant' });
    expect(issues[0]!.text).toEndWith('(app-4)');
  });

  test("the official expression's no-show is no AppointmentStatus code, so it could never hold", async () => {
    expect(await refusedAt({ ...appointment, status: 'no-show' })).toEqual(['Appointment', 'Appointment.status']);
  });
});

describe('que-12 (README, Validation: an invariant the table corrects)', () => {
  const when = (question: string) => ({ question, operator: 'exists', answerBoolean: true });
  const questionnaire = (item: Json) => ({
    resourceType: 'Questionnaire', status: 'active',
    item: [{ linkId: 'a', type: 'boolean' }, { linkId: 'b', type: 'boolean' }, { linkId: 'c', type: 'string', ...item }],
  });

  test('two enableWhen need an enableBehavior, as the human text says ("more than one")', async () => {
    const issues = await refusedWith(questionnaire({ enableWhen: [when('a'), when('b')] }));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ expression: 'Questionnaire.item[2]', code: 'invariant' });
    expect(issues[0]!.text).toEndWith('(que-12)');
    await created(questionnaire({ enableWhen: [when('a'), when('b')], enableBehavior: 'any' }));
    await created(questionnaire({ enableWhen: [when('a')] }));
  });
});

describe('eld-19, eld-20 (README, Validation: invariants the table corrects)', () => {
  // fhir-test-cases' obs-unit-profile, with the name it lacks.
  const profile = (...paths: string[]) => ({
    resourceType: 'StructureDefinition', url: 'http://example.org/StructureDefinition/unit-profile', name: 'UnitProfile', status: 'draft',
    kind: 'resource', abstract: false, type: 'Observation', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Observation', derivation: 'constraint',
    differential: { element: paths.map((path) => ({ id: path, path })) },
  });
  const issuesOf = async (resource: Json) => {
    const res = await api.post('StructureDefinition/$validate', resource);
    expect(res.status).toBe(200);
    return ((await res.json()) as Json).issue.filter((i: Json) => i.severity !== 'information').map((i: Json) => `${i.severity} ${i.expression[0]} ${i.details.text}`);
  };

  test('a path with characters an element name may not have is refused, not matched anywhere', async () => {
    expect(await refusedWith(profile('Observation...unit'))).toEqual([
      { expression: 'StructureDefinition.differential.element[0]', code: 'invariant', text: 'Element names cannot include some special characters (eld-19)' },
    ]);
    expect(await issuesOf(profile('Observation...unit'))).toEqual([
      'error StructureDefinition.differential.element[0] Element names cannot include some special characters (eld-19)',
      'warning StructureDefinition.differential.element[0] Element names should be simple alphanumerics with a max of 64 characters, or code generation tools may be broken (eld-20)',
    ]);
    expect(await refusedAt(profile('Observation.code', 'Observation.value[x] unit'))).toEqual(['StructureDefinition.differential.element[1]']);
  });

  test('a name outside the simple alphanumerics is a warning; a simple path has none', async () => {
    expect(await issuesOf(profile('Observation.Code'))).toEqual([
      'warning StructureDefinition.differential.element[0] Element names should be simple alphanumerics with a max of 64 characters, or code generation tools may be broken (eld-20)',
    ]);
    expect(await issuesOf(profile('Observation.code', 'Observation.value[x].unit'))).toEqual([]);
    await created(profile('Observation.code', 'Observation.value[x].unit'));
  });
});

describe('con-3 (README, Validation: an invariant the table corrects)', () => {
  const coded = (system: string, code: string) => ({ coding: [{ system: `http://terminology.hl7.org/CodeSystem/${system}`, code }] });
  const condition = (extra: Json) => ({ resourceType: 'Condition', subject: { reference: 'Patient/p' }, code: { text: 'asthma' }, ...extra });
  const warnings = async (resource: Json) => {
    const res = await api.post('Condition/$validate', resource);
    expect(res.status).toBe(200);
    return ((await res.json()) as Json).issue.filter((i: Json) => i.severity === 'warning').map((i: Json) => `${i.expression[0]} ${i.details.text}`);
  };
  const confirmed = coded('condition-ver-status', 'confirmed');

  test('a problem-list item that is not entered-in-error is asked for its clinicalStatus, other Conditions are not', async () => {
    expect(await warnings(condition({ verificationStatus: confirmed, category: [coded('condition-category', 'problem-list-item')] }))).toEqual([
      'Condition Condition.clinicalStatus SHALL be present if verificationStatus is not entered-in-error and category is problem-list-item (con-3)',
    ]);
    expect(await warnings(condition({ verificationStatus: confirmed, category: [coded('condition-category', 'problem-list-item')], clinicalStatus: coded('condition-clinical', 'active') }))).toEqual([]);
    // Other Conditions are not: the official expression compared a CodeableConcept with a string, and asked them all.
    expect(await warnings(condition({ verificationStatus: confirmed, category: [coded('condition-category', 'encounter-diagnosis')] }))).toEqual([]);
    expect(await warnings(condition({}))).toEqual([]);
    expect(await warnings(condition({ verificationStatus: coded('condition-ver-status', 'entered-in-error'), category: [coded('condition-category', 'problem-list-item')] }))).toEqual([]);
  });
});

describe('choice elements', () => {
  test('a second type given through its primitive extension is refused', async () => {
    const issues = await refusedWith({ resourceType: 'Patient', deceasedDateTime: '2020', _deceasedBoolean: extension });
    expect(issues).toEqual([
      { expression: 'Patient.deceased', code: 'structure', text: 'Patient.deceased[x] may hold one type only, but deceasedBoolean and deceasedDateTime are given' },
    ]);
    expect(await refusedAt({ resourceType: 'Patient', _deceasedBoolean: extension, _deceasedDateTime: extension })).toEqual(['Patient.deceased']);
  });

  test('one type with its own extensions is stored', async () => {
    await created({ resourceType: 'Patient', deceasedDateTime: '2020', _deceasedDateTime: extension });
    await created({ resourceType: 'Patient', _deceasedBoolean: extension });
  });
});

describe('dom-3: a contained resource is referred to', () => {
  const contained = [{ resourceType: 'Patient', id: 'p', active: true }];
  const observation = { resourceType: 'Observation', status: 'final', code: { text: 'x' }, contained };

  test('by a reference, a canonical or a uri', async () => {
    await created({ ...observation, subject: { reference: '#p' } });
    await created({ ...observation, extension: [{ url: 'http://example.org/u', valueUri: '#p' }] });
    await created({
      resourceType: 'Questionnaire', status: 'active',
      contained: [{ resourceType: 'ValueSet', id: 'vs', status: 'active', compose: { include: [{ system: 'http://example.org/cs' }] } }],
      item: [{ linkId: '1', type: 'choice', answerValueSet: '#vs' }],
    });
  });

  test('or referring to the resource that contains it', async () => {
    const provenance = { resourceType: 'Provenance', id: 'prov', target: [{ reference: '#' }], recorded: '2020-01-01T00:00:00Z', agent: [{ who: { display: 'x' } }] };
    await created({ ...observation, contained: [provenance] });
  });

  test('text that looks like a local reference is not a reference', async () => {
    expect(await refusedAt({ ...observation, note: [{ text: '#p' }] })).toEqual(['Observation.contained[0]']);
    expect(await refusedAt({ ...observation, identifier: [{ value: '#p' }] })).toEqual(['Observation.contained[0]']);
    const selfByText = [{ resourceType: 'Patient', id: 'p', name: [{ text: '#' }] }];
    expect(await refusedAt({ ...observation, contained: selfByText })).toEqual(['Observation.contained[0]']);
  });
});

describe('references: the contained resource a #id names, Reference.type, distinct contained ids', () => {
  const observation = { resourceType: 'Observation', status: 'final', code: { text: 'x' } };
  const medication = { resourceType: 'Medication', id: 'm' };
  const patient = { resourceType: 'Patient', id: 'p' };

  test("a #id reference is checked against the contained resource's type", async () => {
    const issues = await refusedWith({ ...observation, contained: [medication], subject: { reference: '#m' } });
    expect(issues).toEqual([
      { expression: 'Observation.subject.reference', code: 'structure', text: 'Medication (the contained resource #m) is not a valid target of this reference (expected Patient, Group, Device, Location)' },
    ]);
    await created({ ...observation, contained: [patient], subject: { reference: '#p' } });
    // From one contained resource to another, and from a contained resource to its container (`#`).
    const withGp = { ...observation, contained: [{ ...patient, generalPractitioner: [{ reference: '#m' }] }, medication], subject: { reference: '#p' } };
    expect(await refusedAt(withGp)).toEqual(['Observation.contained[0].generalPractitioner[0].reference']);
    const linked = { ...observation, contained: [{ ...patient, link: [{ other: { reference: '#' }, type: 'seealso' }] }] };
    expect(await refusedAt(linked)).toEqual(['Observation.contained[0].link[0].other.reference']);
    await created({ resourceType: 'Patient', contained: [{ ...patient, link: [{ other: { reference: '#' }, type: 'seealso' }] }] });
  });

  test('Reference.type agrees with the reference', async () => {
    expect(await refusedWith({ ...observation, subject: { reference: 'Group/1', type: 'Patient' } })).toEqual([
      { expression: 'Observation.subject', code: 'value', text: 'Reference.type Patient does not agree with the reference "Group/1", which is to a Group' },
    ]);
    expect(await refusedAt({ ...observation, subject: { reference: 'https://other.example/fhir/Group/1/_history/2', type: 'Patient' } })).toEqual(['Observation.subject']);
    expect(await refusedAt({ ...observation, contained: [patient], subject: { reference: '#p', type: 'Group' } })).toEqual(['Observation.subject']);
    // Reference(Any) too.
    const provenance = { resourceType: 'Provenance', recorded: '2020-01-01T00:00:00Z', agent: [{ who: { display: 'x' } }] };
    expect(await refusedAt({ ...provenance, target: [{ reference: 'Group/1', type: 'Patient' }] })).toEqual(['Provenance.target[0]']);
    await created({ ...provenance, target: [{ reference: 'Group/1', type: 'Group' }] });
    await created({ ...observation, subject: { reference: 'Patient/1', type: 'Patient' } });
    await created({ ...observation, subject: { reference: 'Patient/1', type: 'http://hl7.org/fhir/StructureDefinition/Patient' } });
    await created({ ...observation, contained: [patient], subject: { reference: '#p', type: 'Patient' } });
    // A reference that names no type (a urn:uuid) says nothing to disagree with.
    await created({ ...observation, subject: { reference: 'urn:uuid:0c3c9e3e-6e5b-4d0a-8f2a-1c2d3e4f5a6b', type: 'Group' } });
  });

  test("Reference.type alone is one of the element's targets", async () => {
    expect(await refusedAt({ ...observation, subject: { type: 'Medication', display: 'x' } })).toEqual(['Observation.subject.type']);
    await created({ ...observation, subject: { type: 'Device', display: 'x' } });
  });

  test('contained resources have distinct ids', async () => {
    const issues = await refusedWith({ ...observation, contained: [patient, { ...patient, active: true }], subject: { reference: '#p' } });
    expect(issues).toEqual([
      { expression: 'Observation.contained[1].id', code: 'value', text: "Contained resources must have distinct ids: 'p' is also the id of contained[0], so #p would be ambiguous" },
    ]);
    const twoTypes = { ...observation, contained: [patient, { resourceType: 'Group', id: 'p', type: 'person', actual: true }], subject: { reference: '#p' } };
    expect(await refusedAt(twoTypes)).toEqual(['Observation.contained[1].id']);
    await created({ ...observation, contained: [patient, { resourceType: 'Group', id: 'g', type: 'person', actual: true }], subject: { reference: '#p' }, focus: [{ reference: '#g' }] });
  });
});
