import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { paramOf } from '../../src/fhir/definitions.ts';
import { hierarchyParam } from '../../src/fhir/search-compile.ts';
import { unreachableRevinclude } from '../../src/fhir/revinclude-reach.ts';
import { R4_RESOURCE_TYPES, REST_RESOURCE_TYPES } from '../../src/fhir/resource-types.ts';
import { BASE, createTestApp, type TestApp } from '../helpers/app.ts';
import { identifierOf, minimalResource } from '../helpers/minimal-resource.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { toFhirXml } from '../../src/fhir/xml/to-xml.ts';
import { parseFhirXml } from '../../src/fhir/xml/from-xml.ts';

let t: TestApp;
let api: FhirClient;
let statement: Json;
const base = `${BASE}/tenants/t1/fhir/R4`;

/** A value of the right shape for a search parameter type. */
function sampleValue(type: string, resourceType = '', name = ''): string {
  switch (type) {
    case 'token': return 'http://example.org|x';
    case 'reference': return 'x';
    case 'uri': return 'http://example.org/x';
    case 'date': return 'ge2020-01-01';
    case 'number': return 'gt1.5';
    case 'quantity': return 'le5.4|http://unitsofmeasure.org|mg';
    case 'composite': {
      const def = paramOf(resourceType, name)!;
      return ['x', ...def.components!.map((c) => sampleValue(c.type).replace(/^(le|gt)/, ''))].join('$');
    }
    case 'special': return name === 'near' ? '42.28|-83.74|10|km' : name === '_filter' ? '_id eq x or not (_lastUpdated lt 2000)' : 'x';
    default: return 'x';
  }
}

beforeAll(async () => {
  t = await createTestApp();
  api = fhirClient(t, await t.token());
  const res = await t.request(`${base}/metadata`);
  expect(res.status).toBe(200);
  statement = (await res.json()) as Json;
});
afterAll(() => t.close());

describe('GET /metadata', () => {
  test('each tenant\'s statement names its own base and date, its type entries the same (serialised once)', async () => {
    const token = await t.tokenFor('t2', ['system/*.read']);
    t.clock.advance(61_000);
    const res = await t.request(`${BASE}/tenants/t2/fhir/R4/metadata`, { headers: { Authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    const other = (await res.json()) as Json;
    expect(other.implementation.url).toBe(`${BASE}/tenants/t2/fhir/R4`);
    expect(statement.implementation.url).toBe(base);
    expect(Date.parse(other.date) - Date.parse(statement.date)).toBe(61_000);
    expect(other.rest[0].resource).toEqual(statement.rest[0].resource);
    expect(other.rest[0].resource.map((r: Json) => r.type)).toEqual(REST_RESOURCE_TYPES);
    // The Subscription websocket is the tenant's too.
    expect(other.rest[0].extension).toEqual([{ url: 'http://hl7.org/fhir/StructureDefinition/capabilitystatement-websocket', valueUri: 'ws://cinder.test/tenants/t2/fhir/R4/websocket' }]);
    const rest = [{ ...other.rest[0], extension: statement.rest[0].extension }];
    expect({ ...other, date: statement.date, implementation: statement.implementation, rest } as Json).toEqual(statement);
  });

  test('is public and is a FHIR R4 server CapabilityStatement', async () => {
    const res = await t.request(`${base}/metadata`, { headers: { Authorization: 'Bearer garbage' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toStartWith('application/fhir+json');
    expect(statement).toMatchObject({
      resourceType: 'CapabilityStatement', status: 'active', kind: 'instance', fhirVersion: '4.0.1',
      implementation: { url: base }, software: { name: 'Cinder' },
    });
    expect(statement.format).toContain('application/fhir+json');
    expect(statement.rest).toHaveLength(1);
    expect(statement.rest[0].mode).toBe('server');
  });

  test('carries the SMART security service and the OAuth endpoints', () => {
    const security = statement.rest[0].security;
    expect(security.service[0].coding[0].code).toBe('SMART-on-FHIR');
    const uris = security.extension.find((e: Json) => e.url === 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris');
    const byName = Object.fromEntries(uris.extension.map((e: Json) => [e.url, e.valueUri]));
    expect(byName.token).toBe(`${BASE}/oauth2/token`);
    expect(byName.authorize).toBe(`${BASE}/oauth2/authorize`);
  });

  test('system interactions: transaction, batch, search-system, history-system', () => {
    expect(statement.rest[0].interaction.map((i: Json) => i.code).sort()).toEqual(['batch', 'history-system', 'search-system', 'transaction']);
  });

  test('lists every R4 resource type once but Parameters (no RESTful endpoint), each with the interactions Cinder serves', () => {
    const resources = statement.rest[0].resource as Json[];
    expect(resources.map((r) => r.type)).toEqual(R4_RESOURCE_TYPES.filter((t) => t !== 'Parameters'));
    expect(REST_RESOURCE_TYPES).toHaveLength(R4_RESOURCE_TYPES.length - 1);
    for (const r of resources) {
      // AuditEvents are append-only: created, never updated, patched or deleted (405).
      const appendOnly = r.type === 'AuditEvent';
      expect(r.interaction.map((i: Json) => i.code).sort()).toEqual(appendOnly
        ? ['create', 'history-instance', 'history-type', 'read', 'search-type', 'vread']
        : ['create', 'delete', 'history-instance', 'history-type', 'patch', 'read', 'search-type', 'update', 'vread']);
      expect(r).toMatchObject({ versioning: 'versioned-update', readHistory: true, updateCreate: true, conditionalCreate: true, conditionalUpdate: true, conditionalDelete: appendOnly ? 'not-supported' : 'single' });
      const names = r.searchParam.map((p: Json) => p.name);
      expect(names).toContain('_id');
      expect(names).toContain('_lastUpdated');
      expect(new Set(names).size).toBe(names.length);
    }
  });

  test('the documented parameters are advertised where R4 defines them', () => {
    const paramsOf = (type: string) => (statement.rest[0].resource as Json[]).find((r) => r.type === type)!.searchParam.map((p: Json) => p.name).sort();
    // Every R4 core parameter of the type (R4 defines 38 for Observation), with _id, _lastUpdated, _list, _filter, _has, _tag, _profile, _security, _source, _text and _content.
    expect(paramsOf('Observation')).toEqual(expect.arrayContaining(['_id', '_lastUpdated', '_filter', '_has', '_tag', 'category', 'code', 'code-value-quantity', 'combo-code', 'date', 'patient', 'subject', 'value-quantity']));
    expect(paramsOf('Observation').length).toBe(38 + 11);
    expect(paramsOf('Condition')).toEqual(expect.arrayContaining(['clinical-status', 'onset-date', 'abatement-age', 'patient', 'subject']));
    expect(paramsOf('Patient')).toEqual(expect.arrayContaining(['name', 'family', 'given', 'birthdate', 'gender', 'address-city', 'race', 'ethnicity']));
    expect(paramsOf('Location')).toContain('near');
    const location = (statement.rest[0].resource as Json[]).find((r) => r.type === 'Location')!;
    // R4's one special parameter is searchable.
    expect(location.documentation).not.toContain('Not searchable');
    const tokenModifiers = (statement.rest[0].resource as Json[]).find((r) => r.type === 'Condition')!.searchParam.find((p: Json) => p.name === 'code').documentation;
    expect(tokenModifiers).toContain(':below');
    expect(tokenModifiers).toContain(':in');
    expect(paramsOf('ValueSet')).toEqual(expect.arrayContaining(['url', 'version', 'identifier']));
    expect(paramsOf('CodeSystem')).toEqual(expect.arrayContaining(['url', 'version']));
  });

  test('declares the five R4 compartments, each searched', async () => {
    expect(statement.rest[0].compartment).toEqual(['patient', 'encounter', 'relatedPerson', 'practitioner', 'device'].map((c) => `http://hl7.org/fhir/CompartmentDefinition/${c}`));
    await api.put200({ resourceType: 'Patient', id: 'cmp' });
    await api.put200({ resourceType: 'Encounter', id: 'cmp', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/cmp' } });
    await api.put200({ resourceType: 'Observation', id: 'cmp', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/cmp' }, encounter: { reference: 'Encounter/cmp' } });
    for (const path of ['Patient/cmp/Observation', 'Patient/cmp/*', 'Encounter/cmp/Observation', 'Encounter/cmp/*']) {
      const res = await api.get(path, { Prefer: 'handling=strict' });
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).entry.map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`)).toContain('Observation/cmp');
    }
    // A type with no compartment is no path.
    await expectOutcome(await api.get('Observation/cmp/Patient'), 404);
  });

  test('declares each format it serves, each taken by Accept, _format and Content-Type', async () => {
    expect(statement.format).toEqual(['application/fhir+json', 'application/json', 'application/json+fhir', 'json', 'application/fhir+xml', 'application/xml', 'application/xml+fhir', 'xml']);
    for (const format of statement.format as string[]) {
      const xml = format.includes('xml');
      const media = format === 'json' || format === 'xml' ? undefined : format;
      const byFormat = await t.request(`${base}/metadata?_format=${encodeURIComponent(format)}`);
      expect(byFormat.status).toBe(200);
      // The generic type asked for is answered as such (http.html 3.1.0.1.10); the others are FHIR JSON or XML.
      const answered = format === 'application/json' || format === 'application/xml' ? format : xml ? 'application/fhir+xml' : 'application/fhir+json';
      expect([format, byFormat.headers.get('content-type')]).toEqual([format, `${answered}; charset=utf-8`]);
      const text = await byFormat.text();
      expect((xml ? parseFhirXml(text) : JSON.parse(text)) as Json).toMatchObject({ resourceType: 'CapabilityStatement', format: statement.format });
      if (media === undefined) continue;
      const byAccept = await t.request(`${base}/metadata`, { headers: { Accept: media } });
      expect([media, byAccept.status, byAccept.headers.get('content-type')]).toEqual([media, 200, `${answered}; charset=utf-8`]);
      const basic = { resourceType: 'Basic', code: { text: format } };
      expect((await api.call('POST', 'Basic', xml ? toFhirXml(basic) : basic, { 'Content-Type': media })).status).toBe(201);
    }
  });

  test('declares each patch format a PATCH takes: JSON Patch, and a FHIRPath Patch in each FHIR JSON type and FHIR XML', async () => {
    expect(statement.patchFormat).toEqual(['application/json-patch+json', 'application/fhir+json', 'application/json', 'application/json+fhir', 'application/fhir+xml']);
    await api.put200({ resourceType: 'Basic', id: 'patched', code: { text: 'before' } });
    for (const format of statement.patchFormat as string[]) {
      const body = format === 'application/json-patch+json'
        ? [{ op: 'replace', path: '/code/text', value: format }]
        : { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Basic.code.text' }, { name: 'value', valueString: format }] }] };
      const res = await api.call('PATCH', 'Basic/patched', format.includes('xml') ? toFhirXml(body as Json) : body, { 'Content-Type': format, Accept: 'application/fhir+json' });
      expect({ format, status: res.status }).toEqual({ format, status: 200 });
      expect(((await res.json()) as Json).code.text).toBe(format);
    }
    await expectOutcome(await api.call('PATCH', 'Basic/patched', { a: 1 }, { 'Content-Type': 'application/merge-patch+json' }), 415);
  });

  test('takes _summary and _elements as a read does (the HL7 validator asks for metadata?_summary=true)', async () => {
    const get = async (query: string, headers?: Record<string, string>) => {
      const res = await t.request(`${base}/metadata${query}`, headers ? { headers } : undefined);
      expect(res.status).toBe(200);
      return { json: (await res.json()) as Json, size: Number(res.headers.get('content-length') ?? 0) };
    };
    const subsetted = (s: Json) => s.meta?.tag?.some((c: Json) => c.code === 'SUBSETTED');
    expect(subsetted(statement)).toBeFalsy();
    for (let round = 0; round < 2; round++) {
      // R4's summary of a CapabilityStatement keeps rest.resource's type, profiles and operations, not its search parameters.
      const { json: summary } = await get('?_summary=true');
      expect(subsetted(summary)).toBe(true);
      expect(summary.fhirVersion).toBe('4.0.1');
      expect(summary.software).toEqual(statement.software);
      const { cors, service } = statement.rest[0].security;
      expect(summary.rest[0].security).toEqual({ cors, service });
      expect(summary.rest[0].resource).toHaveLength(statement.rest[0].resource.length);
      const patient = summary.rest[0].resource.find((r: Json) => r.type === 'Patient');
      const whole = statement.rest[0].resource.find((r: Json) => r.type === 'Patient');
      expect(patient).toEqual({ type: 'Patient', operation: whole.operation });
      expect(summary.rest[0].interaction).toBeUndefined();
      expect(JSON.stringify(summary).length).toBeLessThan(JSON.stringify(statement).length / 10);
    }
    const { json: elements } = await get('?_elements=software,fhirVersion');
    expect(Object.keys(elements).sort()).toEqual(['date', 'fhirVersion', 'format', 'kind', 'meta', 'resourceType', 'software', 'status']);
    expect(subsetted(elements)).toBe(true);
    const { json: data } = await get('?_summary=data');
    expect(data.rest[0].resource).toEqual(statement.rest[0].resource);
    expect(subsetted(data)).toBe(true);
    const { json: terminology } = await get('?mode=terminology&_summary=true');
    expect(terminology.resourceType).toBe('TerminologyCapabilities');
    expect(subsetted(terminology)).toBe(true);
    expect(terminology.kind).toBe('instance');
    expect(terminology.codeSystem).toBeUndefined();
    const refused = [['?_summary=count', '_summary'], ['?_summary=nope', '_summary'], ['?mode=terminology&_summary=count', '_summary'], ['?_elements=name.family', '_elements']];
    for (const [query, element] of refused) {
      const outcome = await expectOutcome(await t.request(`${base}/metadata${query}`, { headers: { Prefer: 'handling=strict' } }), 400);
      expect(outcome.issue[0].expression).toEqual([element]);
    }
    // Without strict handling, a path in _elements is ignored (as on a read): the statement is whole.
    expect((await get('?_elements=name.family')).json.rest[0].resource).toEqual(statement.rest[0].resource);
  });

  test('refuses a format it does not serve with 406 and answers 404 for an unknown tenant', async () => {
    await expectOutcome(await t.request(`${base}/metadata`, { headers: { Accept: 'text/turtle' } }), 406);
    await expectOutcome(await t.request(`${base}/metadata?_format=ttl`), 406);
    await expectOutcome(await t.request(`${BASE}/tenants/nope/fhir/R4/metadata`), 404);
  });
});

describe('every advertised search parameter works', () => {
  test('each one, on each type, is accepted under Prefer: handling=strict', async () => {
    let tried = 0;
    const failures: string[] = [];
    for (const r of statement.rest[0].resource as Json[]) {
      for (const p of r.searchParam as Json[]) {
        // `_has` is named with what it chains through: the first of the type's `_revinclude` values.
        const key = p.name === '_has' ? `_has:${r.searchRevInclude.find((v: string) => !v.endsWith('*'))}:_id` : p.name;
        const res = await api.get(`${r.type}?${key}=${encodeURIComponent(p.name === '_id' || p.name === '_has' ? 'x' : sampleValue(p.type, r.type, p.name))}`, { Prefer: 'handling=strict' });
        tried++;
        if (res.status !== 200) failures.push(`${r.type}?${p.name}: ${res.status} ${await res.text()}`);
        else {
          const bundle = (await res.json()) as Json;
          if (bundle.type !== 'searchset' || (bundle.entry ?? []).some((e: Json) => e.search.mode === 'outcome')) failures.push(`${r.type}?${p.name}: warning`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect(tried).toBeGreaterThan(R4_RESOURCE_TYPES.length * 2);
  });

  test('token :of-type is documented exactly where the parameter may hold Identifiers, and works exactly there', async () => {
    const wrong: string[] = [];
    let tokens = 0;
    let withOfType = 0;
    for (const r of statement.rest[0].resource as Json[]) {
      for (const p of (r.searchParam as Json[]).filter((x) => x.type === 'token')) {
        // `_id` takes `:not` alone, as its documentation says.
        const modifiers = /Modifiers: (.*)$/.exec(p.documentation)?.[1]?.split(', ') ?? [];
        if (p.name !== '_id') tokens++;
        const documented = modifiers.includes(':of-type');
        const value = encodeURIComponent('http://terminology.hl7.org/CodeSystem/v2-0203|MR|1');
        const works = (await api.get(`${r.type}?${p.name}:of-type=${value}`, { Prefer: 'handling=strict' })).status === 200;
        if (documented !== works) wrong.push(`${r.type}.${p.name}: :of-type ${works ? 'works' : 'fails'} but is ${documented ? '' : 'not '}documented`);
        if (works) withOfType++;
      }
    }
    expect(wrong).toEqual([]);
    expect(withOfType).toBeGreaterThan(100);
    expect(withOfType).toBeLessThan(tokens / 4);
  });

  test('reference :below everywhere (canonical URLs), :above only where a type it refers to forms a hierarchy: each as documented', async () => {
    // Tried on every reference parameter whatever its targets: a resource of each type that has a
    // parent of its own type (Location.partof, Specimen.parent, ...), and of the parameter's first target.
    const hierarchies = R4_RESOURCE_TYPES.filter((type) => hierarchyParam(type) !== undefined);
    expect(hierarchies.length).toBe(8);
    const ok = async (type: string, key: string, value: string) => (await api.get(`${type}?${key}=${encodeURIComponent(value)}`, { Prefer: 'handling=strict' })).status === 200;
    const wrong: string[] = [];
    let withAbove = 0;
    let references = 0;
    for (const r of statement.rest[0].resource as Json[]) {
      for (const p of (r.searchParam as Json[]).filter((x) => x.type === 'reference')) {
        references++;
        const documented = /Modifiers: (.*)$/.exec(p.documentation)![1]!.split(', ');
        const def = paramOf(r.type, p.name)!;
        const values = [...new Set([...hierarchies, ...def.targets.slice(0, 1)])].map((type) => `${type}/1`);
        let above: string | undefined;
        for (const v of values) if (await ok(r.type, `${p.name}:above`, v)) { above = v; break; }
        if (documented.includes(':above') !== (above !== undefined)) wrong.push(`${r.type}.${p.name}: :above ${above ? `works (${above})` : 'fails'} but is ${above ? 'not ' : ''}documented`);
        if (!documented.includes(':below') || !(await ok(r.type, `${p.name}:below`, 'http://example.org/Questionnaire/q|2'))) wrong.push(`${r.type}.${p.name}: :below with a canonical URL`);
        if (above === undefined) continue;
        withAbove++;
        if (!(await ok(r.type, `${p.name}:below`, above))) wrong.push(`${r.type}.${p.name}: :below=${above}`);
        // `id` alone is documented exactly where it names one type.
        if (p.documentation.includes('or `id`') !== (await ok(r.type, `${p.name}:below`, '1'))) wrong.push(`${r.type}.${p.name}: :below=1`);
      }
    }
    expect(wrong).toEqual([]);
    expect(references).toBe(517);
    expect(withAbove).toBe(219);
    // A canonical reference (RelatedArtifact.resource: any type in R4) names canonical resources, none of which forms a hierarchy.
    const canonical = await expectOutcome(await api.get('PlanDefinition?composed-of:above=Location/1'), 400, 'invalid');
    expect(canonical.issue[0]).toMatchObject({ expression: ['composed-of:above'], diagnostics: expect.stringContaining('canonical references') });
  });

  test('_has is declared on every type and across types, with each revinclude parameter; _include=Type:param:Target is documented and works', async () => {
    const resources = statement.rest[0].resource as Json[];
    const refused: string[] = [];
    for (const r of resources) {
      const has = (r.searchParam as Json[]).find((p) => p.name === '_has');
      expect(has).toMatchObject({ type: 'special', documentation: expect.stringContaining('_has:Type:param:name=value') });
      expect(r.documentation).toContain('Type:param:Target');
      // A `_revinclude` value's parameter may refer to the type: a `_has` through it is searched (the
      // first, middle and last of each type's: all of them, some 10,000, would take half a minute).
      const revincludes = (r.searchRevInclude as string[]).filter((x) => !x.endsWith('*'));
      for (const v of new Set([revincludes[0]!, revincludes[revincludes.length >> 1]!, revincludes.at(-1)!])) {
        const res = await api.get(`${r.type}?_has:${v}:_id=x`, { Prefer: 'handling=strict' });
        if (res.status !== 200) refused.push(`${r.type}?_has:${v}: ${res.status}`);
      }
      // Type:param:Target for each listed Type:param, with the parameter's first target type.
      for (const v of (r.searchInclude as string[]).filter((x) => !x.endsWith('*'))) {
        const target = paramOf(r.type, v.split(':')[1]!)!.targets[0] ?? 'Patient';
        const res = await api.get(`${r.type}?_include=${v}:${target}`, { Prefer: 'handling=strict' });
        if (res.status !== 200) refused.push(`${r.type}?_include=${v}:${target}: ${res.status}`);
      }
    }
    expect(refused).toEqual([]);
    // Every `_revinclude` value listed is one strict handling takes (unreachableRevinclude, which refuses the others).
    const unlisted = resources.flatMap((r) => (r.searchRevInclude as string[]).filter((v) => {
      const [source, param] = v.split(':') as [string, string];
      return source !== '*' && unreachableRevinclude(r.type, { source, param, iterate: false }) !== undefined;
    }).map((v) => `${r.type}?_revinclude=${v}`));
    expect(unlisted).toEqual([]);
    expect(resources.filter((r) => (r.searchParam as Json[]).some((p) => p.name === '_has'))).toHaveLength(resources.length);
    const system = (statement.rest[0].searchParam as Json[]).find((p) => p.name === '_has');
    expect(system).toMatchObject({ type: 'special' });
    expect((await api.get('?_type=Patient,Group&_has:Observation:subject:_id=x', { Prefer: 'handling=strict' })).status).toBe(200);
    expect((await api.get('?_has:Provenance:target:_id=x', { Prefer: 'handling=strict' })).status).toBe(200);
  });

  test('_has without Type:param:name is a 400 saying its form, under any handling (not an unknown parameter)', async () => {
    for (const prefer of ['handling=lenient', 'handling=strict']) {
      const body = await expectOutcome(await api.get('Patient?_has=x', { Prefer: prefer }), 400, 'invalid');
      expect(body.issue[0].expression).toEqual(['_has']);
      expect(body.issue[0].diagnostics).toContain('expected _has:Type:reference:parameter');
    }
  });

  test('searchRevInclude lists a parameter of canonical references on canonical resource types alone, and each is taken as _has', async () => {
    const of = (type: string) => (statement.rest[0].resource as Json[]).find((r) => r.type === type)!.searchRevInclude as string[];
    expect(of('Questionnaire')).toContain('ActivityDefinition:composed-of');
    expect(of('Patient')).not.toContain('ActivityDefinition:composed-of');
    expect(of('Patient')).toContain('Observation:subject');
    expect((await api.get('Questionnaire?_has:ActivityDefinition:composed-of:_id=x', { Prefer: 'handling=strict' })).status).toBe(200);
    await expectOutcome(await api.get('Patient?_has:ActivityDefinition:composed-of:_id=x', { Prefer: 'handling=strict' }), 400);
  });

  test('a union parameter (combo-*) takes every modifier it documents', async () => {
    const values: Record<string, string> = {
      missing: 'true', not: 'x', text: 'x', 'of-type': 'http://terminology.hl7.org/CodeSystem/v2-0203|MR|1',
      in: 'http://hl7.org/fhir/ValueSet/administrative-gender', 'not-in': 'http://hl7.org/fhir/ValueSet/administrative-gender',
      below: 'http://terminology.hl7.org/CodeSystem/condition-clinical|active', above: 'http://terminology.hl7.org/CodeSystem/condition-clinical|resolved',
    };
    const refused: string[] = [];
    let unions = 0;
    for (const r of statement.rest[0].resource as Json[]) {
      for (const p of (r.searchParam as Json[]).filter((x) => x.type === 'token' && paramOf(r.type, x.name)?.unionOf)) {
        unions++;
        for (const m of /Modifiers: (.*)$/.exec(p.documentation)![1]!.split(', ').map((x) => x.slice(1))) {
          const res = await api.get(`${r.type}?${p.name}:${m}=${encodeURIComponent(values[m]!)}`, { Prefer: 'handling=strict' });
          if (res.status !== 200) refused.push(`${r.type}?${p.name}:${m}: ${res.status} ${await res.text()}`);
        }
      }
    }
    expect(refused).toEqual([]);
    expect(unions).toBeGreaterThanOrEqual(3);
  });

  test('and finds what it should: identifier, url and version on every type that advertises them', async () => {
    const resources = statement.rest[0].resource as Json[];
    const having = (name: string) => resources.filter((r) => r.searchParam.some((p: Json) => p.name === name)).map((r) => r.type as string);
    expect(having('identifier').length).toBeGreaterThan(50);
    expect(having('url')).toEqual(expect.arrayContaining(['ValueSet', 'CodeSystem', 'StructureDefinition']));
    const misses: string[] = [];
    for (const type of having('identifier')) {
      const r = await api.create(minimalResource({ resourceType: type, identifier: identifierOf(type, { system: 'urn:cap', value: type }) }));
      const found = await api.search(`${type}?identifier=urn:cap|${type}`);
      if (found.entry.length !== 1 || found.entry[0].resource.id !== r.id) misses.push(`${type}?identifier`);
    }
    for (const type of having('url')) {
      const url = `http://example.org/cap/${type}`;
      const version = having('version').includes(type) ? { version: '7' } : {};
      // Subscription's url parameter is its channel endpoint (R4 SearchParameter Subscription-url).
      const where = type === 'Subscription' ? { channel: { type: 'rest-hook', endpoint: url } } : { url };
      const r = await api.create(minimalResource({ resourceType: type, ...where, ...version }));
      const found = await api.search(`${type}?url=${url}` + ('version' in version ? '&version=7' : ''));
      if (found.entry.length !== 1 || found.entry[0].resource.id !== r.id) misses.push(`${type}?url`);
    }
    expect(misses).toEqual([]);
  });

  test('the advertised interactions work on a sample of types', async () => {
    for (const type of ['Basic', 'Device', 'Group', 'Library', 'Substance']) {
      const created = await api.create(minimalResource({ resourceType: type, id: 'ignored' }));
      const id = created.id as string;
      expect((await api.get(`${type}/${id}`)).status).toBe(200);
      // The update and the patch each change the resource (a tag), so that each makes a version.
      expect((await api.put(`${type}/${id}`, minimalResource({ resourceType: type, id, meta: { tag: [{ system: 'urn:test', code: 'put' }] } }))).status).toBe(200);
      const patch = [{ op: 'test', path: '/id', value: id }, { op: 'add', path: '/meta/tag/-', value: { system: 'urn:test', code: 'patch' } }];
      expect((await api.call('PATCH', `${type}/${id}`, patch, { 'Content-Type': 'application/json-patch+json' })).status).toBe(200);
      expect((await api.get(`${type}/${id}/_history/3`)).status).toBe(200);
      expect((await api.get(`${type}/${id}/_history/1`)).status).toBe(200);
      expect((await api.get(`${type}/${id}/_history`)).status).toBe(200);
      expect((await api.get(`${type}/_history`)).status).toBe(200);
      const found = await api.search(`${type}?_id=${id}`);
      expect(found.entry.map((e: Json) => e.resource.id)).toEqual([id]);
      expect((await api.del(`${type}/${id}`)).status).toBe(200);
      expect((await api.get(`${type}/${id}`)).status).toBe(410);
    }
  });
});
