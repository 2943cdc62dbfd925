import { describe, expect, test } from 'bun:test';
import { validateResource, type ValidationIssue } from '../../../src/fhir/validation/validate.ts';

type Json = Record<string, unknown>;

const errors = (r: Json, level: 'strict' | 'structural' = 'strict') => validateResource(r, level).filter((i) => i.severity === 'error');
/** `expression code` of each error, for compact assertions. */
const found = (r: Json, level: 'strict' | 'structural' = 'strict') => errors(r, level).map((i) => `${i.expression} ${i.code}`);
const patient = (extra: Json): Json => ({ resourceType: 'Patient', ...extra });
const observation = (extra: Json): Json => ({ resourceType: 'Observation', status: 'final', code: { text: 'weight' }, ...extra });

describe('valid resources', () => {
  test('a rich Patient and Observation have no issues', () => {
    expect(
      validateResource(
        patient({
          id: 'p1', meta: { versionId: '2', lastUpdated: '2024-01-01T00:00:00.000Z', profile: ['http://example.org/p'] },
          text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml"><p>Jane</p></div>' },
          identifier: [{ system: 'urn:oid:1.2.36.146.595.217.0.1', value: '12345', type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0203', code: 'MR' }] } }],
          name: [{ use: 'official', family: 'Chalmers', given: ['Peter', 'James'], _given: [null, { extension: [{ url: 'http://example.org/x', valueBoolean: true }] }] }],
          gender: 'male', birthDate: '1974-12-25', _birthDate: { extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/patient-birthTime', valueDateTime: '1974-12-25T14:35:45-05:00' }] },
          deceasedBoolean: false, multipleBirthInteger: 2,
          contact: [{ relationship: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0131', code: 'N' }] }], name: { family: 'du Marché' } }],
          managingOrganization: { reference: 'Organization/1' },
          extension: [{ url: 'http://example.org/nested', extension: [{ url: 'a', valueString: 'x' }] }],
        }),
        'strict',
      ),
    ).toEqual([]);
    expect(
      validateResource(
        observation({
          valueQuantity: { value: 72.5, unit: 'kg', system: 'http://unitsofmeasure.org', code: 'kg' },
          effectivePeriod: { start: '2024-01-01T10:00:00Z', end: '2024-01-01T13:00:00+02:00' },
          issued: '2024-01-01T12:00:00.123Z', subject: { reference: 'Patient/p1' },
          referenceRange: [{ low: { value: 50, unit: 'kg' }, high: { value: 90, unit: 'kg' } }],
          component: [{ code: { text: 'x' }, valueString: 'y' }],
        }),
        'strict',
      ),
    ).toEqual([]);
  });
});

describe('structure', () => {
  test("the issue's example: every problem is reported, each at its element", () => {
    const issues = errors(patient({ gender: 'banana', birthDate: 'not-a-date', foo: 1, name: 'notanarray' }));
    expect(issues.map((i) => `${i.expression} ${i.code}`).sort()).toEqual([
      'Patient.birthDate value', 'Patient.foo structure', 'Patient.gender code-invalid', 'Patient.name structure',
    ]);
    for (const i of issues) expect(i.text.length).toBeGreaterThan(10);
  });

  test('unknown elements at the root and nested', () => {
    expect(found(patient({ name: [{ family: 'x', nickname: 'y' }] }))).toEqual(['Patient.name[0].nickname structure']);
    expect(found(observation({ valueQuantity: { value: 1, units: 'kg' } }))).toEqual(['Observation.value.ofType(Quantity).units structure']);
  });

  test('JSON types of complex and primitive elements', () => {
    expect(found(patient({ active: 'true' }))).toEqual(['Patient.active structure']);
    expect(found(patient({ name: [{ given: 'Jo' }] }))).toEqual(['Patient.name[0].given structure']);
    expect(found(patient({ maritalStatus: 'M' }))).toEqual(['Patient.maritalStatus structure']);
    expect(found(patient({ multipleBirthInteger: '2' }))).toEqual(['Patient.multipleBirth.ofType(integer) structure']);
    expect(found(patient({ name: [null] }))).toEqual(['Patient.name[0] structure']);
  });

  test('cardinality: required elements, single values, repeats, empty arrays', () => {
    expect(found({ resourceType: 'Observation' }).sort()).toEqual(['Observation.code required', 'Observation.status required']);
    expect(found(patient({ birthDate: ['1970'] }))).toEqual(['Patient.birthDate structure']);
    expect(found(patient({ identifier: { value: 'x' } }))).toEqual(['Patient.identifier structure']);
    expect(found(patient({ name: [] }))).toEqual(['Patient.name structure']);
    expect(found(patient({ link: [{ type: 'seealso' }] }))).toEqual(['Patient.link[0].other required']);
  });

  test('a primitive with only extensions meets its minimum', () => {
    const absent = { extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/data-absent-reason', valueCode: 'unknown' }] };
    // Annotation.text (1..1, unbound).
    expect(found({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, note: [{ _text: absent }] })).toEqual([]);
    // Observation.status (1..1) meets its minimum so too, but its required binding asks for a code, which an extension is not.
    expect(found({ resourceType: 'Observation', _status: absent, code: { text: 'x' } })).toEqual(['Observation.status code-invalid']);
  });

  test('choice elements: one type at most, only the allowed types', () => {
    expect(found(patient({ deceasedBoolean: true, deceasedDateTime: '2020-01-01' }))).toEqual(['Patient.deceased structure']);
    expect(found(patient({ deceasedString: 'yes' }))).toEqual(['Patient.deceasedString structure']);
    expect(found(observation({ valueQuantity: { value: 1 }, valueString: 'x' }))).toEqual(['Observation.value structure']);
  });

  test('empty objects and elements with only an id (ele-1); empty strings', () => {
    expect(found(patient({ name: [{}] }))).toEqual(['Patient.name[0] structure']);
    expect(found(patient({ name: [{ id: 'n1' }] }))).toEqual(['Patient.name[0] structure']);
    expect(found(patient({ name: [{ family: '' }] }))).toEqual(['Patient.name[0].family value']);
  });

  test('resourceType of contained resources and Bundle entries', () => {
    expect(found(patient({ contained: [{ resourceType: 'Banana', id: 'b' }] }))).toEqual(['Patient.contained[0] structure']);
    const bundle = { resourceType: 'Bundle', type: 'collection', entry: [{ resource: { resourceType: 'Patient', gender: 'x' } }, { resource: { id: 'nope' } }] };
    expect(found(bundle)).toEqual(['Bundle.entry[0].resource.gender code-invalid', 'Bundle.entry[1].resource structure']);
  });
});

describe('primitive formats', () => {
  const cases: [string, Json, string | null][] = [
    ['date', { birthDate: '2020-02-29' }, null],
    ['date: a day the calendar lacks', { birthDate: '2020-02-30' }, 'Patient.birthDate'],
    ['date: not a leap year', { birthDate: '2019-02-29' }, 'Patient.birthDate'],
    ['date: 1900 is not a leap year', { birthDate: '1900-02-29' }, 'Patient.birthDate'],
    ['date: year and month', { birthDate: '1970-06' }, null],
    ['date: a time is not a date', { birthDate: '1970-06-01T00:00:00Z' }, 'Patient.birthDate'],
    ['dateTime: with a zone', { deceasedDateTime: '2020-01-01T10:00:00+01:00' }, null],
    ['dateTime: a time needs a zone', { deceasedDateTime: '2020-01-01T10:00:00' }, 'Patient.deceased.ofType(dateTime)'],
    ['dateTime: hours and minutes alone', { deceasedDateTime: '2020-01-01T10:00Z' }, 'Patient.deceased.ofType(dateTime)'],
    ['dateTime: 2020-04-31', { deceasedDateTime: '2020-04-31' }, 'Patient.deceased.ofType(dateTime)'],
    ['integer', { multipleBirthInteger: 2147483647 }, null],
    ['integer: out of range', { multipleBirthInteger: 2147483648 }, 'Patient.multipleBirth.ofType(integer)'],
    ['integer: a fraction', { multipleBirthInteger: 1.5 }, 'Patient.multipleBirth.ofType(integer)'],
    ['id', { id: 'a.b-C9' }, null],
    ['id: underscore', { id: 'a_b' }, 'Patient.id'],
    ['uri: whitespace', { implicitRules: 'http://x y' }, 'Patient.implicitRules'],
    ['code: a double space', { language: 'en  US' }, 'Patient.language'],
    ['code: a leading space', { language: ' en' }, 'Patient.language'],
    ['string: a control character', { name: [{ family: 'a\u0001b' }] }, 'Patient.name[0].family'],
    ['string: a no-break space is content', { name: [{ family: '\u00a0' }] }, null],
    ['string: an unpaired surrogate', { name: [{ family: 'a\ud800b' }] }, 'Patient.name[0].family'],
    ['string: a lone low surrogate', { name: [{ family: '\udc00' }] }, 'Patient.name[0].family'],
    ['string: a surrogate pair is a character', { name: [{ family: '\ud83d\ude00' }] }, null],
    ['uri: an unpaired surrogate', { implicitRules: 'http://x/\ud800' }, 'Patient.implicitRules'],
    ['code: an unpaired surrogate', { language: '\udbff' }, 'Patient.language'],
    ['boolean', { active: 1 }, 'Patient.active'],
    ['base64Binary', { photo: [{ contentType: 'text/plain', data: 'aGVsbG8=' }] }, null],
    ['base64Binary: bad padding', { photo: [{ contentType: 'text/plain', data: 'aGVsbG8' }] }, 'Patient.photo[0].data'],
    ['base64Binary: bad character', { photo: [{ contentType: 'text/plain', data: 'aGVs*G8=' }] }, 'Patient.photo[0].data'],
    ['unsignedInt: negative', { photo: [{ size: -1 }] }, 'Patient.photo[0].size'],
    ['url', { photo: [{ url: 'http://x/y' }] }, null],
    ['instant', { meta: { lastUpdated: '2020-01-01T00:00:00.5-03:30' } }, null],
    ['instant: no zone', { meta: { lastUpdated: '2020-01-01T00:00:00' } }, 'Patient.meta.lastUpdated'],
    ['instant: a date only', { meta: { lastUpdated: '2020-01-01' } }, 'Patient.meta.lastUpdated'],
  ];
  for (const [name, extra, where] of cases) {
    test(name, () => {
      const issues = errors(patient(extra));
      if (where === null) expect(issues).toEqual([]);
      else expect(issues.map((i) => i.expression)).toEqual([where]);
    });
  }
  test('time, oid, uuid, positiveInt, decimal', () => {
    const ok = { resourceType: 'Device', udiCarrier: [{ deviceIdentifier: 'x' }], identifier: [{ system: 'urn:oid:2.16.840.1.113883' }, { system: 'urn:uuid:0c3c9e3e-6e5b-4d0a-8f2a-1c2d3e4f5a6b' }] };
    expect(found(ok)).toEqual([]);
    const slot = { resourceType: 'Schedule', actor: [{ reference: 'Practitioner/1' }], planningHorizon: { start: '2020-01-01' } };
    expect(found(slot)).toEqual([]);
    expect(found({ resourceType: 'AvailabilityTime', x: 1 })).toEqual(['AvailabilityTime structure']);
    expect(found({ resourceType: 'HealthcareService', availableTime: [{ availableStartTime: '25:00:00' }] })).toEqual(['HealthcareService.availableTime[0].availableStartTime value']);
    expect(found({ resourceType: 'HealthcareService', availableTime: [{ availableStartTime: '09:30:00' }] })).toEqual([]);
    expect(found(observation({ valueQuantity: { value: '1.0' } }))).toEqual(['Observation.value.ofType(Quantity).value structure']);
    expect(found({ resourceType: 'Patient', identifier: [{ system: 'urn:uuid:0C3C9E3E-6E5B-4D0A-8F2A-1C2D3E4F5A6B' }] })).toEqual([]);
  });
});

describe('primitive extensions', () => {
  test('_name holds id and extensions, aligned with repeating values', () => {
    expect(found(patient({ _birthDate: { extension: [{ url: 'http://example.org/x', valueString: 'y' }] } }))).toEqual([]);
    expect(found(patient({ _birthDate: [{ extension: [{ url: 'http://example.org/x', valueString: 'y' }] }] }))).toEqual(['Patient.birthDate structure']);
    expect(found(patient({ _birthDate: { color: 'red' } }))).toEqual(['Patient.birthDate.color structure']);
    expect(found(patient({ _birthDate: {} }))).toEqual(['Patient.birthDate structure']);
    expect(found(patient({ _foo: { extension: [] } }))).toEqual(['Patient._foo structure']);
    expect(found(patient({ name: [{ given: ['a', 'b'], _given: [null] }] }))).toEqual(['Patient.name[0].given structure']);
    expect(found(patient({ name: [{ given: ['a', null] }] }))).toEqual(['Patient.name[0].given[1] structure']);
    expect(found(patient({ name: [{ given: ['a', null], _given: [null, { extension: [{ url: 'http://example.org/x', valueCode: 'y' }] }] }] }))).toEqual([]);
    expect(found(patient({ name: [{ given: ['a', null], _given: [null, null] }] }))).toEqual(['Patient.name[0].given[1] structure']);
    // `_given` is written only to carry ids or extensions (json.html): nulls alone, or nothing, are refused.
    expect(found(patient({ name: [{ given: ['a', 'b'], _given: [null, null] }] }))).toEqual(['Patient.name[0]._given structure']);
    expect(found(patient({ name: [{ family: 'F', _given: [] }] }))).toEqual(['Patient.name[0]._given structure']);
    expect(found(patient({ name: [{ given: [], _given: [] }] }))).toEqual(['Patient.name[0].given structure']);
  });

  test('a _name with only an id: ele-1 holds when the primitive has a value (json.html, primitive elements)', () => {
    for (const level of ['strict', 'structural'] as const) {
      expect(found(patient({ gender: 'female', _gender: { id: 'g1' } }), level)).toEqual([]);
      expect(found(patient({ birthDate: '1970-01-01', _birthDate: { id: 'b1' } }), level)).toEqual([]);
      expect(found(patient({ deceasedBoolean: true, _deceasedBoolean: { id: 'd1' } }), level)).toEqual([]);
      // No value: the element has nothing but its id.
      expect(errors(patient({ _gender: { id: 'g1' } }), level)).toEqual([
        { severity: 'error', code: 'structure', expression: 'Patient.gender', text: 'An element must have a value or children other than id (ele-1)' },
      ]);
      expect(found(patient({ name: [{ given: ['a', null], _given: [null, { id: 'x' }] }] }), level)).toEqual(['Patient.name[0].given[1] structure']);
      expect(found(patient({ name: [{ given: ['a', null], _given: [{ id: 'x' }, null] }] }), level)).toEqual(['Patient.name[0].given[1] structure']);
      expect(found(patient({ name: [{ given: ['a', 'b'], _given: [{ id: 'x' }, null] }] }), level)).toEqual([]);
      expect(found(patient({ name: [{ given: ['a', 'b'], _given: [{ id: 'x' }, { id: 'y' }] }] }), level)).toEqual([]);
      // An empty object is still no object JSON allows, value or not.
      expect(found(patient({ gender: 'female', _gender: {} }), level)).toEqual(['Patient.gender structure']);
      // The id is still an element id, unique within the resource.
      expect(found(patient({ gender: 'female', _gender: { id: 'x' }, birthDate: '1970', _birthDate: { id: 'x' } }), level)).toEqual(['Patient.birthDate.id value']);
    }
  });

  test('Resource.id, Element.id, Extension.url and Narrative.div have no _name (FHIRPath System types, xhtml)', () => {
    const masked = { extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/data-absent-reason', valueCode: 'masked' }] };
    expect(errors(patient({ id: 'p', _id: masked }))).toEqual([
      { severity: 'error', code: 'structure', expression: 'Patient._id', text: "Unknown element '_id' in Patient: Patient.id takes no id or extensions" },
    ]);
    expect(found(patient({ name: [{ id: 'n', _id: masked, family: 'F' }] }))).toEqual(['Patient.name[0]._id structure']);
    expect(found(patient({ _birthDate: { id: 'b', _id: masked } }))).toEqual(['Patient.birthDate._id structure']);
    expect(found(patient({ extension: [{ url: 'http://example.org/x', _url: masked, valueString: 'v' }] }))).toEqual(['Patient.extension[0]._url structure']);
    // An extension's url given by `_url` alone is no url.
    expect(found(patient({ extension: [{ _url: masked, valueString: 'v' }] }))).toEqual(['Patient.extension[0]._url structure', 'Patient.extension[0].url required']);
    const text = { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">x</div>' };
    expect(found(patient({ text: { ...text, _div: masked } }))).toEqual(['Patient.text._div structure']);
    expect(found(patient({ text: { ...text, _div: { id: 'd' } } }))).toEqual(['Patient.text._div structure']);
    // A primitive of a FHIR type keeps its id and extensions, also as ids of those.
    expect(found(patient({ id: 'p', name: [{ id: 'n', family: 'F', _family: { id: 'f', ...masked } }] }))).toEqual([]);
  });

  test('extension shape: url required, a value or extensions but not both (ext-1)', () => {
    expect(found(patient({ extension: [{ valueString: 'x' }] }))).toEqual(['Patient.extension[0].url required']);
    expect(found(patient({ extension: [{ url: 'http://example.org/x' }] }))).toEqual(['Patient.extension[0] invariant']);
    expect(found(patient({ extension: [{ url: 'http://example.org/x', valueString: 'a', extension: [{ url: 'y', valueString: 'b' }] }] }))).toEqual(['Patient.extension[0] invariant']);
    expect(found(patient({ modifierExtension: [{ url: 'http://example.org/x', valueFoo: 1 }] }))).toEqual(['Patient.modifierExtension[0].valueFoo structure']);
  });

  test("an extension's url is absolute, but for the parts of a complex extension; the structure alone leaves it", () => {
    const rel = { url: 'x', valueString: 'a' };
    expect(found(patient({ extension: [rel], modifierExtension: [rel], name: [{ family: 'F', extension: [rel] }] })).sort()).toEqual([
      'Patient.extension[0].url value', 'Patient.modifierExtension[0].url value', 'Patient.name[0].extension[0].url value',
    ]);
    // A primitive's extensions, a complex extension's value's too, are no parts of an extension.
    expect(found(patient({ birthDate: '1970', _birthDate: { extension: [rel] } }))).toEqual(['Patient.birthDate.extension[0].url value']);
    expect(found(patient({ extension: [{ url: 'http://example.org/c', extension: [{ url: 'part', valueString: 'a', _valueString: { extension: [rel] } }] }] }))).toEqual([
      'Patient.extension[0].extension[0].value.ofType(string).extension[0].url value',
    ]);
    expect(found(patient({ extension: [{ url: 'urn:uuid:0c3151bd-1cbf-4d64-b04d-cd9187a4c6e0', extension: [{ url: 'part', valueString: 'a' }] }] }))).toEqual([]);
    expect(found(patient({ extension: [rel] }), 'structural')).toEqual([]);
  });
});

describe('required bindings', () => {
  test('code elements', () => {
    expect(found(observation({ status: 'done' }))).toEqual(['Observation.status code-invalid']);
    expect(found(patient({ name: [{ use: 'nickname' }] }))).toEqual([]);
    expect(found(patient({ name: [{ use: 'alias' }] }))).toEqual(['Patient.name[0].use code-invalid']);
    expect(found(observation({ valueQuantity: { value: 1, comparator: '=' } }))).toEqual(['Observation.value.ofType(Quantity).comparator code-invalid']);
  });

  test('CodeableConcept elements: one coding must be in the value set', () => {
    const condition = (clinicalStatus: unknown): Json => ({ resourceType: 'Condition', subject: { reference: 'Patient/1' }, clinicalStatus });
    const cs = 'http://terminology.hl7.org/CodeSystem/condition-clinical';
    expect(found(condition({ coding: [{ system: cs, code: 'active' }] }))).toEqual([]);
    expect(found(condition({ coding: [{ system: 'http://example.org', code: 'x' }, { system: cs, code: 'resolved' }] }))).toEqual([]);
    expect(found(condition({ coding: [{ system: cs, code: 'banana' }] }))).toEqual(['Condition.clinicalStatus code-invalid']);
    expect(found(condition({ coding: [{ code: 'active' }] }))).toEqual(['Condition.clinicalStatus code-invalid']);
    expect(found(condition({ text: 'active' }))).toEqual(['Condition.clinicalStatus code-invalid']);
  });

  test('value sets checked by syntax: MIME types, currencies', () => {
    expect(found(patient({ photo: [{ contentType: 'image/png' }] }))).toEqual([]);
    expect(found(patient({ photo: [{ contentType: 'png' }] }))).toEqual(['Patient.photo[0].contentType code-invalid']);
    const invoice = (currency: string): Json => ({ resourceType: 'Invoice', status: 'draft', totalNet: { value: 1, currency } });
    expect(found(invoice('USD'))).toEqual([]);
    expect(found(invoice('usd'))).toEqual(['Invoice.totalNet.currency code-invalid']);
  });

  test('structural level checks neither bindings nor invariants', () => {
    expect(found(patient({ gender: 'banana', extension: [{ url: 'x' }] }), 'structural')).toEqual(['Patient.extension[0] invariant']);
    expect(found(observation({ status: 'done', valueString: 'x', dataAbsentReason: { text: 'x' } }), 'structural')).toEqual([]);
  });
});

describe('invariants', () => {
  test('resource invariants (obs-6) and data type invariants (per-1) through the FHIRPath engine', () => {
    const issues = errors(observation({ valueString: 'x', dataAbsentReason: { text: 'unknown' } }));
    expect(issues.map((i) => `${i.expression} ${i.code}`)).toEqual(['Observation invariant']);
    expect(issues[0]!.text).toContain('obs-6');
    const period = errors(observation({ effectivePeriod: { start: '2020-02-01', end: '2020-01-01' } }));
    expect(period.map((i) => `${i.expression} ${i.code}`)).toEqual(['Observation.effective.ofType(Period) invariant']);
    expect(period[0]!.text).toContain('per-1');
  });

  test('contained resources: dom-2, dom-3, dom-4, dom-5', () => {
    const contained = (c: Json, extra: Json = {}) => patient({ contained: [{ resourceType: 'Organization', id: 'o', name: 'x', ...c }], managingOrganization: { reference: '#o' }, ...extra });
    expect(found(contained({}))).toEqual([]);
    expect(found(contained({ meta: { versionId: '1' } }))).toEqual(['Patient.contained[0].meta invariant']);
    expect(found(contained({ meta: { security: [{ code: 'R' }] } }))).toEqual(['Patient.contained[0].meta.security invariant']);
    expect(found(contained({ contained: [{ resourceType: 'Organization', id: 'p', name: 'y' }] }))).toContain('Patient.contained[0].contained invariant');
    expect(found(contained({}, { managingOrganization: { reference: 'Organization/o' } }))).toEqual(['Patient.contained[0] invariant']);
    // A Bundle entry's resource is a root of its own: its `#o` finds its own contained resource (ref-1).
    expect(found({ resourceType: 'Bundle', type: 'collection', entry: [{ resource: contained({}) }] })).toEqual([]);
    expect(found({ resourceType: 'Bundle', type: 'collection', entry: [{ resource: patient({ managingOrganization: { reference: '#o' } }) }] }))
      .toEqual(['Bundle.entry[0].resource.managingOrganization invariant']);
  });

  test('Reference targets', () => {
    expect(found(observation({ subject: { reference: 'Medication/1' } }))).toEqual(['Observation.subject.reference structure']);
    expect(found(observation({ subject: { reference: 'https://other.example/fhir/Medication/1' } }))).toEqual(['Observation.subject.reference structure']);
    expect(found(observation({ subject: { reference: 'Medication?code=x' } }))).toEqual(['Observation.subject.reference structure']);
    expect(found(observation({ subject: { reference: 'Group/1/_history/2', type: 'Group' } }))).toEqual([]);
    expect(found(observation({ subject: { reference: 'urn:uuid:0c3c9e3e-6e5b-4d0a-8f2a-1c2d3e4f5a6b' } }))).toEqual([]);
    expect(found(observation({ subject: { type: 'Encounter', identifier: { value: 'x' } } }))).toEqual(['Observation.subject.type structure']);
  });

  test('narrative: only basic HTML, some content (txt-1, txt-2)', () => {
    const text = (div: string) => patient({ text: { status: 'generated', div } });
    const ns = 'xmlns="http://www.w3.org/1999/xhtml"';
    expect(found(text(`<div ${ns}><b>x</b></div>`))).toEqual([]);
    expect(found(text(`<div ${ns}><script>alert(1)</script>x</div>`))).toEqual(['Patient.text.div invariant']);
    expect(found(text(`<div ${ns}><a href="#" onclick="x()">x</a></div>`))).toEqual(['Patient.text.div invariant']);
    expect(found(text(`<div ${ns}>  </div>`))).toEqual(['Patient.text.div invariant']);
    expect(found(text(`<p ${ns}>x</p>`))).toEqual(['Patient.text.div invariant']);
    expect(found(text('<div>x</div>'))).toEqual(['Patient.text.div invariant']);
    // Not well-formed: a problem of the value, found at the structural level too.
    expect(found(text(`<div ${ns}>a&nbsp;b</div>`), 'structural')).toEqual(['Patient.text.div value']);
  });
});

describe('limits', () => {
  test('a resource with very many problems is summarised after the first hundred', () => {
    const extra: Json = {};
    for (let i = 0; i < 150; i++) extra[`bad${i}`] = i;
    const issues: ValidationIssue[] = validateResource(patient(extra), 'strict');
    expect(issues.length).toBe(101);
    expect(issues[100]!.text).toContain('50 more');
  });
});
