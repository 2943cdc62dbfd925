/**
 * `_summary` and `_elements` (FHIR R4 search.html "Summary" and "Elements"; http.html: servers
 * SHOULD support them on read): `_summary=true` prunes inside backbone elements as the R4 definitions
 * mark them, read, vread, history and batch reads subset as searches do, and `_elements`' type
 * prefixes select the names of each type of a result alone.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';
const UCUM = 'http://unitsofmeasure.org';
const SUBSETTED = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED', display: 'subsetted' };
const EXT = [{ url: 'http://example.org/ext', valueString: 'x' }];

const quantity = (value: number) => ({ value, unit: 'mm[Hg]', system: UCUM, code: 'mm[Hg]' });
const bp = (code: string, value: number) => ({
  id: `c-${code}`,
  extension: EXT,
  code: { coding: [{ system: LOINC, code }] },
  valueQuantity: { ...quantity(value), extension: EXT },
  interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'H' }] }],
  referenceRange: [{ high: quantity(120) }],
});

const DATA: Json[] = [
  {
    resourceType: 'Patient', id: 'p1', gender: 'female', birthDate: '1970-01-01', _birthDate: { extension: EXT },
    text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">Ann</div>' },
    name: [{ family: 'Smith', given: ['Ann'], extension: EXT }], maritalStatus: { text: 'M' },
  },
  {
    resourceType: 'Observation', id: 'o1', status: 'final', code: { coding: [{ system: LOINC, code: '85354-9' }] },
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }], effectiveDateTime: '2020-01-01',
    subject: { reference: 'Patient/p1' }, note: [{ text: 'seated' }], component: [bp('8480-6', 140), bp('8462-4', 90)],
  },
  {
    resourceType: 'Encounter', id: 'e1', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
    participant: [{ type: [{ text: 'primary' }], period: { start: '2020-01-01' }, individual: { reference: 'Practitioner/pr1' } }],
    diagnosis: [{ condition: { reference: 'Condition/c1' }, rank: 1, use: { text: 'billing' } }],
  },
  { resourceType: 'Practitioner', id: 'pr1', name: [{ family: 'Jones' }] },
  { resourceType: 'Condition', id: 'c1', subject: { reference: 'Patient/p1' }, code: { text: 'hypertension' } },
  {
    resourceType: 'DocumentReference', id: 'd1', status: 'current', subject: { reference: 'Patient/p1' },
    content: [{ attachment: { contentType: 'text/plain', data: 'aGVsbG8=', url: 'http://example.org/doc', title: 'Letter' }, format: { code: 'urn:x' } }],
  },
  {
    // A contentReference that recurses: `rule.rule` is a `rule` (StructureMap.group.rule).
    resourceType: 'StructureMap', id: 'm1', url: 'http://example.org/StructureMap/m1', name: 'M1', status: 'draft',
    group: [{
      name: 'g', typeMode: 'none', documentation: 'group doc', input: [{ name: 'src', mode: 'source', documentation: 'input doc' }],
      rule: [{ name: 'r1', documentation: 'outer', source: [{ context: 'src' }], rule: [{ name: 'r2', documentation: 'inner', source: [{ context: 'src' }] }] }],
    }],
  },
];

let t: TestApp;
let api: FhirClient;

beforeAll(async () => {
  t = await createTestApp();
  api = fhirClient(t, await t.token());
  for (const r of DATA) await api.put200(r);
  await api.put200({ ...DATA[0], gender: 'other' });
});
afterAll(() => t.close());

const first = async (query: string) => (await api.search(query)).entry[0].resource as Json;
const strict = { Prefer: 'handling=strict' };

describe('_summary=true inside backbone elements', () => {
  test('keeps the summary members of backbone elements alone, however deep, and data types whole', async () => {
    const o = await first('Observation?_id=o1&_summary=true');
    // Observation.component: modifierExtension, code and value are summary; id, extension, interpretation, referenceRange not.
    expect(o.component).toEqual([
      { code: { coding: [{ system: LOINC, code: '8480-6' }] }, valueQuantity: { ...quantity(140), extension: EXT } },
      { code: { coding: [{ system: LOINC, code: '8462-4' }] }, valueQuantity: { ...quantity(90), extension: EXT } },
    ]);
    expect(o.note).toBeUndefined();
    expect(o.meta.tag).toEqual([SUBSETTED]);
    const e = await first('Encounter?_id=e1&_summary=true');
    expect(e.participant).toEqual([{ type: [{ text: 'primary' }], individual: { reference: 'Practitioner/pr1' } }]);
    expect(e.diagnosis).toEqual([{ condition: { reference: 'Condition/c1' } }]);
    const m = await first('StructureMap?_id=m1&_summary=true');
    // group.documentation is a summary element; input.documentation and rule.documentation, at any depth, are not.
    expect(m.group).toEqual([{
      name: 'g', typeMode: 'none', documentation: 'group doc', input: [{ name: 'src', mode: 'source' }],
      rule: [{ name: 'r1', source: [{ context: 'src' }], rule: [{ name: 'r2', source: [{ context: 'src' }] }] }],
    }]);
    // _summary=data and text stay top-level: data drops the text alone, text keeps text, id, meta and the mandatory elements.
    const data = await first('Observation?_id=o1&_summary=data');
    expect(data.component).toEqual(DATA[1]!.component);
    expect(data.note).toEqual([{ text: 'seated' }]);
    const text = await first('Observation?_id=o1&_summary=text');
    expect(Object.keys(text).sort()).toEqual(['code', 'id', 'meta', 'resourceType', 'status']);
  });

  test("an Attachment's data is left out (R4: every data type property but Attachment.data); a primitive's extensions stay with it", async () => {
    const d = await first('DocumentReference?_id=d1&_summary=true');
    expect(d.content).toEqual([{ attachment: { contentType: 'text/plain', url: 'http://example.org/doc', title: 'Letter' }, format: { code: 'urn:x' } }]);
    const p = await first('Patient?_id=p1&_summary=true');
    expect(p).toMatchObject({ birthDate: '1970-01-01', _birthDate: { extension: EXT }, name: DATA[0]!.name, gender: 'other' });
    expect(p.text).toBeUndefined();
    expect(p.maritalStatus).toBeUndefined();
  });
});

describe('_summary and _elements on read, vread and history', () => {
  test("read and vread are subset and tagged SUBSETTED; the ETag stays the version's, and If-None-Match its", async () => {
    const res = await api.get('Patient/p1?_summary=true');
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe('W/"2"');
    const p = (await res.json()) as Json;
    expect(p.maritalStatus).toBeUndefined();
    expect(p.name).toEqual(DATA[0]!.name);
    expect(p.meta.tag).toEqual([SUBSETTED]);
    const v1 = await api.get('Patient/p1/_history/1?_elements=gender');
    expect(v1.headers.get('etag')).toBe('W/"1"');
    const g = (await v1.json()) as Json;
    expect(Object.keys(g).sort()).toEqual(['gender', 'id', 'meta', 'resourceType']);
    expect(g.gender).toBe('female');
    const full = (await (await api.get('Patient/p1?_summary=false')).json()) as Json;
    expect(full.maritalStatus).toEqual({ text: 'M' });
    expect(full.meta.tag).toBeUndefined();
    // Conditional reads answer on the version, subset or not.
    for (const path of ['Patient/p1?_summary=true', 'Patient/p1/_history/2?_elements=name']) {
      const unchanged = await api.get(path, { 'If-None-Match': 'W/"2"' });
      expect(unchanged.status).toBe(304);
      expect(unchanged.headers.get('etag')).toBe('W/"2"');
    }
    expect((await api.get('Patient/p1?_summary=true', { 'If-None-Match': 'W/"1"' })).status).toBe(200);
  });

  test('an unknown _summary, _summary=count and an empty _elements are a 400', async () => {
    for (const path of ['Patient/p1?_summary=banana', 'Patient/p1/_history/1?_summary=banana', 'Patient/p1?_summary=count', 'Patient/p1?_elements=', 'Patient/p1/_history?_summary=banana']) {
      await expectOutcome(await api.get(path), 400);
    }
  });

  test('history entries are subset and its links keep the parameters', async () => {
    const b = (await (await api.get('Patient/p1/_history?_summary=true&_count=1')).json()) as Json;
    expect(b.entry).toHaveLength(1);
    expect(b.entry[0].resource.maritalStatus).toBeUndefined();
    expect(b.entry[0].resource.meta.tag).toEqual([SUBSETTED]);
    const next = new URL(link(b, 'next')!);
    expect(next.searchParams.get('_summary')).toBe('true');
    const page2 = (await (await api.get(next.href)).json()) as Json;
    expect(page2.entry[0].resource.gender).toBe('female');
    expect(page2.entry[0].resource.maritalStatus).toBeUndefined();
  });

  test('a batch read entry is subset too', async () => {
    const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: 'Patient/p1?_elements=gender' } }] });
    const b = (await res.json()) as Json;
    expect(Object.keys(b.entry[0].resource).sort()).toEqual(['gender', 'id', 'meta', 'resourceType']);
  });

  test('a Binary read as FHIR JSON is subset (data is not a summary element)', async () => {
    await api.put200({ resourceType: 'Binary', id: 'b1', contentType: 'text/plain', data: 'aGVsbG8=' });
    const b = (await (await api.get('Binary/b1?_summary=true', { Accept: 'application/fhir+json' })).json()) as Json;
    expect(b).toMatchObject({ resourceType: 'Binary', id: 'b1', contentType: 'text/plain' });
    expect(b.data).toBeUndefined();
  });
});

describe('_elements names', () => {
  test('a type with no name given is returned whole; each type takes its own prefixed names and the unprefixed ones', async () => {
    const p = await first('Patient?_id=p1&_elements=Observation.note');
    expect(p.maritalStatus).toEqual({ text: 'M' });
    expect(p.meta.tag).toBeUndefined();
    const b = await api.search('Observation?_id=o1&_include=Observation:subject&_elements=Observation.note,Patient.gender');
    const [o, pt] = b.entry.map((e: Json) => e.resource);
    expect(Object.keys(o).sort()).toEqual(['code', 'id', 'meta', 'note', 'resourceType', 'status']);
    expect(Object.keys(pt).sort()).toEqual(['gender', 'id', 'meta', 'resourceType']);
    const across = await api.search('?_type=Patient,Practitioner&_elements=Patient.gender');
    const byType = Object.fromEntries(across.entry.map((e: Json) => [e.resource.resourceType, e.resource]));
    expect(Object.keys(byType.Patient).sort()).toEqual(['gender', 'id', 'meta', 'resourceType']);
    expect(byType.Practitioner.name).toEqual([{ family: 'Jones' }]);
    const both = await first('Patient?_id=p1&_elements=gender,Patient.birthDate,Observation.note');
    expect(Object.keys(both).sort()).toEqual(['_birthDate', 'birthDate', 'gender', 'id', 'meta', 'resourceType']);
  });

  test('an empty _elements in a search is ignored (R4: empty parameters are), an empty name in it is a 400', async () => {
    const all = (await (await api.get('Patient?_id=p1&_elements=')).json()) as Json;
    expect(all.entry[0].resource.meta.tag).toBeUndefined();
    await expectOutcome(await api.get('Patient?_elements=,'), 400);
  });

  test('a path (name.family) or an unknown type is ignored with a warning, or a 400 under handling=strict', async () => {
    const b = await api.search('Patient?_id=p1&_elements=name.family,Foo.bar');
    const outcome = b.entry.find((e: Json) => e.search.mode === 'outcome').resource;
    expect(outcome.issue.map((i: Json) => [i.severity, i.expression])).toEqual([['warning', ['_elements']], ['warning', ['_elements']]]);
    expect(outcome.issue[0].diagnostics).toContain('name.family');
    const p = b.entry.find((e: Json) => e.search.mode === 'match').resource;
    expect(p.maritalStatus).toEqual({ text: 'M' });
    // With the ignored names left out, the others still apply.
    const some = await api.search('Patient?_id=p1&_elements=name.family,gender');
    expect(Object.keys(some.entry[0].resource).sort()).toEqual(['gender', 'id', 'meta', 'resourceType']);
    for (const path of ['Patient?_elements=name.family', 'Patient?_elements=Patient.name.family', 'Patient?_elements=Foo.bar', 'Patient/p1?_elements=name.family']) {
      await expectOutcome(await api.get(path, strict), 400, 'not-supported');
    }
    // A read has no Bundle to carry the warning: the name is ignored.
    const read = (await (await api.get('Patient/p1?_elements=name.family')).json()) as Json;
    expect(read.maritalStatus).toEqual({ text: 'M' });
  });

  test('a name no element has (a typo, or not an element of the prefixed type) is ignored with a warning, or a 400 under handling=strict', async () => {
    const b = await api.search('Patient?_id=p1&_elements=gendr,Patient.note,gender');
    const outcome = b.entry.find((e: Json) => e.search.mode === 'outcome').resource;
    expect(outcome.issue.map((i: Json) => i.diagnostics)).toEqual([
      "_elements 'gendr': no resource type has an element 'gendr'; it was ignored",
      "_elements 'Patient.note': Patient has no element 'note'; it was ignored",
    ]);
    expect(Object.keys(b.entry[0].resource).sort()).toEqual(['gender', 'id', 'meta', 'resourceType']);
    for (const path of ['Patient?_elements=gendr', 'Patient?_elements=Patient.note']) await expectOutcome(await api.get(path, strict), 400, 'not-supported');
    // An element of another type, a choice element by its name or JSON name, are known.
    for (const names of ['note', 'deceased', 'deceasedBoolean', 'Observation.value', 'Observation.valueQuantity']) {
      expect([names, (await api.get(`Patient?_id=p1&_elements=${names}`, strict)).status]).toEqual([names, 200]);
    }
  });
});
