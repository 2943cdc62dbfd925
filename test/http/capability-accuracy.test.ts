/**
 * The CapabilityStatement is true: every search parameter, modifier, `_include` / `_revinclude` value,
 * interaction and operation `GET [base]/metadata` lists is one the server takes, and a type it does not
 * list is refused. Each claim is tried through the API, under `Prefer: handling=strict` for searches
 * (lenient handling ignores what it does not know, which would hide an untrue claim).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { paramOf } from '../../src/fhir/definitions.ts';
import { BASE, createTestApp, type TestApp } from '../helpers/app.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { minimalResource } from '../helpers/minimal-resource.ts';

let t: TestApp;
let api: FhirClient;
let statement: Json;
let resources: Json[];
const STRICT = { Prefer: 'handling=strict' };
/** Parameters of one type asked in one strict search (refusals): the most that asked fewer times cost least. */
const TOGETHER = 16;

beforeAll(async () => {
  t = await createTestApp();
  api = fhirClient(t, await t.token());
  const res = await t.request(`${BASE}/tenants/t1/fhir/R4/metadata`);
  expect(res.status).toBe(200);
  statement = (await res.json()) as Json;
  resources = statement.rest[0].resource as Json[];
});
afterAll(() => t.close());

/** A well-formed value of parameter `name` of `type` (a special parameter's in its own form). */
function valueOf(type: string, resourceType: string, name: string): string {
  switch (type) {
    case 'token': return 'x';
    case 'string': return 'a';
    case 'date': return 'ge2020';
    case 'number': return '1';
    case 'quantity': return '1';
    case 'reference': return 'Patient/x';
    case 'uri': return 'http://x';
    case 'composite': {
      // One value per component, `$`-separated, each of the component's own type (the first is a token).
      const def = paramOf(resourceType, name)!;
      return ['x', ...def.components!.map((c) => valueOf(c.type, resourceType, name))].join('$');
    }
    default: break;
  }
  switch (name) {
    case 'near': return '42.28|-83.74|10|km';
    case '_filter': return '_id eq x';
    default: return 'x';
  }
}

/** The modifiers a parameter's documentation names (`Modifiers: :missing, :exact, ...`). */
function documentedModifiers(p: Json): string[] {
  return /Modifiers: (.*)$/.exec(p.documentation ?? '')?.[1]?.split(', ').map((m) => m.replace(/^:/, '')) ?? [];
}

const VALUE_SET = 'http://hl7.org/fhir/ValueSet/administrative-gender';
/** The input of `$meta-add` / `$meta-delete`: a Parameters holding a `meta`. */
const META_INPUT = { resourceType: 'Parameters', parameter: [{ name: 'meta', valueMeta: { tag: [{ system: 'urn:probe', code: 'meta' }] } }] };

/** `name:modifier=value` keys and values to try for one documented modifier. */
function modifierQueries(r: Json, p: Json, modifier: string): [string, string][] {
  const def = paramOf(r.type, p.name);
  switch (modifier) {
    case 'missing': return [[`${p.name}:missing`, 'true']];
    case 'exact': case 'contains': case 'text': return [[`${p.name}:${modifier}`, 'a']];
    case 'not': return [[`${p.name}:not`, 'x']];
    case 'of-type': return [[`${p.name}:of-type`, 'http://terminology.hl7.org/CodeSystem/v2-0203|MR|1']];
    case 'in': case 'not-in': return [[`${p.name}:${modifier}`, VALUE_SET]];
    case 'identifier': return [[`${p.name}:identifier`, 'http://x|x']];
    // `:[type]` stands for each target type the parameter names (any type where R4 names none).
    case '[type]': return (def?.targets.length ? def.targets : ['Patient']).map((type) => [`${p.name}:${type}`, 'x']);
    case 'below': case 'above':
      if (p.type === 'token') return [[`${p.name}:${modifier}`, 'http://terminology.hl7.org/CodeSystem/condition-clinical|active']];
      if (p.type === 'uri') return [[`${p.name}:${modifier}`, 'http://x']];
      if (p.type === 'reference') {
        // `:above` on a reference takes a `Type/id` of a type its documentation names as forming a hierarchy.
        const hierarchy = /of ([A-Z][A-Za-z]+) \(/.exec(p.documentation)?.[1];
        return modifier === 'below'
          ? [[`${p.name}:below`, 'http://x'], ...(hierarchy ? [[`${p.name}:below`, `${hierarchy}/x`] as [string, string]] : [])]
          : [[`${p.name}:above`, `${hierarchy ?? 'Location'}/x`]];
      }
      return [[`${p.name}:${modifier}`, 'x']];
    default: return [[`${p.name}:${modifier}`, 'x']];
  }
}

/** A strict search that answers anything but a searchset is refused: its status and first diagnostics. */
async function refusal(path: string): Promise<string | undefined> {
  const res = await api.get(path, STRICT);
  if (res.status === 200) return undefined;
  const body = (await res.json().catch(() => ({}))) as Json;
  return `${path}: ${res.status} ${body.issue?.[0]?.diagnostics ?? ''}`;
}

/**
 * The refusals of strict searches at `paths`, each reported as `refusal` reports it alone. A strict search
 * is refused whole when any one of its parameters is (compileSearch throws at the first it does not take),
 * so a 200 for several of one type's parameters ANDed is a 200 for each: up to `together` of a type are
 * asked in one request, and a request refused is asked again in halves, down to each parameter refused alone.
 */
async function refusals(paths: readonly string[], together: number): Promise<string[]> {
  const byType = new Map<string, string[]>();
  for (const path of paths) {
    const at = path.indexOf('?');
    const base = path.slice(0, at);
    if (!byType.has(base)) byType.set(base, []);
    byType.get(base)!.push(path.slice(at + 1));
  }
  const refused: string[] = [];
  const ask = async (base: string, queries: string[]): Promise<void> => {
    if (queries.length === 1) {
      const why = await refusal(`${base}?${queries[0]}`);
      if (why) refused.push(why);
    } else if ((await api.get(`${base}?${queries.join('&')}`, STRICT)).status !== 200) {
      const half = Math.ceil(queries.length / 2);
      await ask(base, queries.slice(0, half));
      await ask(base, queries.slice(half));
    }
  };
  for (const [base, queries] of byType) {
    for (let i = 0; i < queries.length; i += together) await ask(base, queries.slice(i, i + together));
  }
  return refused;
}

describe('every search the statement lists is taken', () => {
  test('each searchParam of each type with a well-formed value, and each modifier it documents', async () => {
    const paths: string[] = [];
    for (const r of resources) {
      if (!r.interaction.some((i: Json) => i.code === 'search-type')) continue;
      for (const p of r.searchParam as Json[]) {
        const queries: [string, string][] = p.name === '_has'
          ? [[`_has:${(r.searchRevInclude as string[]).find((v) => !v.endsWith('*'))}:_id`, 'x']]
          : [[p.name, valueOf(p.type, r.type, p.name)], ...documentedModifiers(p).flatMap((m) => modifierQueries(r, p, m))];
        for (const [key, value] of queries) paths.push(`${r.type}?${key}=${encodeURIComponent(value)}`);
      }
    }
    expect(await refusals(paths, TOGETHER)).toEqual([]);
    expect(paths.length).toBeGreaterThan(10_000);
  }, 120_000); // over 10,000 parameters

  test('each system-level searchParam across types', async () => {
    const paths: string[] = [];
    for (const p of statement.rest[0].searchParam as Json[]) {
      // `_has` across types is searched on each type its Type:param may refer to.
      const key = p.name === '_has' ? '_type=Patient,Group&_has:Observation:subject:_id' : p.name;
      const value = p.name === '_type' ? 'Patient,Observation' : valueOf(p.type, 'Resource', p.name);
      paths.push(`?${key}=${encodeURIComponent(value)}`);
      for (const m of documentedModifiers(p)) {
        for (const [k, v] of modifierQueries({ type: 'Resource' }, p, m)) paths.push(`?_type=Patient&${k}=${encodeURIComponent(v)}`);
      }
    }
    // Each alone: several would give `_type` more than once.
    expect(await refusals(paths, 1)).toEqual([]);
  });

  test('each searchInclude value, also with :iterate', async () => {
    const paths: string[] = [];
    for (const r of resources) {
      for (const v of (r.searchInclude ?? []) as string[]) {
        for (const key of ['_include', '_include:iterate']) paths.push(`${r.type}?${key}=${encodeURIComponent(v)}`);
      }
    }
    expect(await refusals(paths, TOGETHER)).toEqual([]);
  });

  test('each searchRevInclude value, also with :iterate', async () => {
    const paths: string[] = [];
    let tried = 0;
    for (const r of resources) {
      for (const v of (r.searchRevInclude ?? []) as string[]) {
        tried++;
        for (const key of ['_revinclude', '_revinclude:iterate']) paths.push(`${r.type}?${key}=${encodeURIComponent(v)}`);
      }
    }
    expect(await refusals(paths, TOGETHER)).toEqual([]);
    expect(tried).toBeGreaterThan(10_000);
  }, 120_000); // over 20,000 values
});

/** Whether a response says the route is missing (405, or a 404 naming no route or an unsupported operation). */
async function unrouted(res: Response): Promise<string | undefined> {
  if (res.status === 405) return '405';
  if (res.status !== 404) return undefined;
  const body = (await res.clone().json().catch(() => ({}))) as Json;
  const diagnostics = String(body.issue?.[0]?.diagnostics ?? '');
  return /No route|not supported/i.test(diagnostics) ? `404 ${diagnostics}` : undefined;
}

describe('every interaction and operation the statement lists is served', () => {
  test('each type\'s interactions, on a resource of the type', async () => {
    const failed: string[] = [];
    const expectStatus = async (what: string, res: Response, ...ok: number[]) => {
      if (!ok.includes(res.status)) failed.push(`${what}: ${res.status} ${(await res.text()).slice(0, 200)}`);
    };
    for (const r of resources) {
      const codes = new Set((r.interaction as Json[]).map((i) => i.code as string));
      const type = r.type as string;
      let id = 'probe-missing';
      if (codes.has('create')) {
        const res = await api.post(type, minimalResource({ resourceType: type }));
        await expectStatus(`POST ${type}`, res, 201);
        if (res.status === 201) id = ((await res.json()) as Json).id;
      }
      const exists = id !== 'probe-missing';
      if (codes.has('read')) await expectStatus(`GET ${type}/${id}`, await api.get(`${type}/${id}`), exists ? 200 : 404);
      if (codes.has('vread')) await expectStatus(`GET ${type}/${id}/_history/1`, await api.get(`${type}/${id}/_history/1`), exists ? 200 : 404);
      if (codes.has('update')) {
        const res = await api.put(`${type}/${id}`, minimalResource({ resourceType: type, id, meta: { tag: [{ system: 'urn:probe', code: 'put' }] } }));
        await expectStatus(`PUT ${type}/${id}`, res, exists ? 200 : 201);
        id = exists || res.status !== 201 ? id : ((await res.json()) as Json).id;
      }
      if (codes.has('patch')) {
        const patch = [{ op: 'add', path: '/meta/tag/-', value: { system: 'urn:probe', code: 'patch' } }];
        await expectStatus(`PATCH ${type}/${id}`, await api.call('PATCH', `${type}/${id}`, patch, { 'Content-Type': 'application/json-patch+json' }), 200);
      }
      if (codes.has('history-instance')) await expectStatus(`GET ${type}/${id}/_history`, await api.get(`${type}/${id}/_history`), 200);
      if (codes.has('history-type')) await expectStatus(`GET ${type}/_history`, await api.get(`${type}/_history`), 200);
      if (codes.has('search-type')) {
        await expectStatus(`GET ${type}?_id=${id}`, await api.get(`${type}?_id=${id}`, STRICT), 200);
        await expectStatus(`POST ${type}/_search`, await api.call('POST', `${type}/_search`, `_id=${id}`, { 'Content-Type': 'application/x-www-form-urlencoded' }), 200);
      }
      if (codes.has('delete')) await expectStatus(`DELETE ${type}/${id}`, await api.del(`${type}/${id}`), 200, 204);
    }
    expect(failed).toEqual([]);
  });

  test('each type\'s versioning and conditional claims, on a sample of types', async () => {
    const wrong: string[] = [];
    const check = (what: string, status: number, ...ok: number[]) => { if (!ok.includes(status)) wrong.push(`${what}: ${status}`); };
    for (const type of ['Basic', 'Patient', 'Observation', 'ValueSet']) {
      const r = resources.find((x) => x.type === type)!;
      const tag = (code: string) => ({ meta: { tag: [{ system: 'urn:probe-flags', code }] } });
      const make = (id?: string, code = 'a') => minimalResource({ resourceType: type, ...(id ? { id } : {}), ...tag(code) });
      if (r.updateCreate) check(`${type} updateCreate`, (await api.put(`${type}/flags-new`, make('flags-new'))).status, 201);
      if (r.versioning === 'versioned-update') {
        check(`${type} If-Match stale`, (await api.put(`${type}/flags-new`, make('flags-new', 'b'), { 'If-Match': 'W/"9"' })).status, 409, 412);
        check(`${type} If-Match current`, (await api.put(`${type}/flags-new`, make('flags-new', 'b'), { 'If-Match': 'W/"1"' })).status, 200);
      }
      if (r.readHistory) check(`${type} readHistory`, (await api.get(`${type}/flags-new/_history/1`)).status, 200);
      if (r.conditionalRead === 'full-support') {
        const read = await api.get(`${type}/flags-new`);
        check(`${type} If-None-Match`, (await api.get(`${type}/flags-new`, { 'If-None-Match': read.headers.get('etag')! })).status, 304);
        check(`${type} If-Modified-Since`, (await api.get(`${type}/flags-new`, { 'If-Modified-Since': read.headers.get('last-modified')! })).status, 304);
      }
      if (r.conditionalCreate) {
        check(`${type} If-None-Exist (match)`, (await api.post(type, make(), { 'If-None-Exist': '_id=flags-new' })).status, 200);
        check(`${type} If-None-Exist (none)`, (await api.post(type, make(undefined, 'c'), { 'If-None-Exist': '_tag=urn:probe-flags|c' })).status, 201);
      }
      if (r.conditionalUpdate) check(`${type} conditional update`, (await api.put(`${type}?_id=flags-new`, make('flags-new', 'd'))).status, 200);
      if (r.conditionalDelete === 'single') {
        await api.post(type, make(undefined, 'e'));
        await api.post(type, make(undefined, 'e'));
        check(`${type} conditional delete of two`, (await api.del(`${type}?_tag=urn:probe-flags|e`)).status, 412);
        check(`${type} conditional delete of one`, (await api.del(`${type}?_id=flags-new`)).status, 200, 204);
      }
    }
    expect(wrong).toEqual([]);
  });

  test('the system interactions', async () => {
    const codes = (statement.rest[0].interaction as Json[]).map((i) => i.code as string).sort();
    const bundle = (type: string) => ({ resourceType: 'Bundle', type, entry: [{ request: { method: 'GET', url: 'Patient?_count=1' } }] });
    const tries: Record<string, () => Response | Promise<Response>> = {
      transaction: () => api.post('', bundle('transaction')),
      batch: () => api.post('', bundle('batch')),
      'search-system': () => api.get('?_type=Patient', STRICT),
      'history-system': () => api.get('_history'),
    };
    expect(codes.filter((c) => !tries[c])).toEqual([]);
    for (const code of codes) expect({ code, status: (await tries[code]!()).status }).toEqual({ code, status: 200 });
  });

  /**
   * How each operation the statement may list is invoked, by its definition: the levels R4's
   * OperationDefinition (or Bulk Data's) allows, with the status it answers: 200 (or 202), 400 for a
   * bad input, or 404 for an instance that does not exist (a resource's, not a route's).
   */
  const INVOCATIONS: Record<string, (type: string) => [string, string, number, unknown?][]> = {
    'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export': () => [['GET', '$export?_outputFormat=bogus', 400]],
    'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/patient-export': () => [['GET', 'Patient/$export?_outputFormat=bogus', 400]],
    'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/group-export': () => [['GET', 'Group/probe-missing/$export', 404]],
    'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/import': () => [['POST', '$import', 400, { resourceType: 'Parameters', parameter: [] }]],
    'http://hl7.org/fhir/OperationDefinition/Resource-validate': (type) => [
      ['POST', `${type}/$validate`, 200, { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: minimalResource({ resourceType: type }) }] }],
      ['POST', `${type}/probe-missing/$validate`, 404, { resourceType: 'Parameters', parameter: [{ name: 'mode', valueCode: 'delete' }] }],
    ],
    'http://hl7.org/fhir/OperationDefinition/ValueSet-validate-code': () => [
      ['GET', `ValueSet/$validate-code?url=${encodeURIComponent(VALUE_SET)}&system=http://hl7.org/fhir/administrative-gender&code=male`, 200],
      ['POST', 'ValueSet/probe-missing/$validate-code', 404, { resourceType: 'Parameters', parameter: [{ name: 'code', valueCode: 'male' }, { name: 'system', valueUri: 'http://hl7.org/fhir/administrative-gender' }] }],
    ],
    'http://hl7.org/fhir/OperationDefinition/ValueSet-expand': () => [['GET', `ValueSet/$expand?url=${encodeURIComponent(VALUE_SET)}`, 200], ['GET', 'ValueSet/probe-missing/$expand', 404]],
    'http://hl7.org/fhir/OperationDefinition/CodeSystem-validate-code': () => [['GET', 'CodeSystem/$validate-code?url=http://hl7.org/fhir/administrative-gender&code=male', 200]],
    'http://hl7.org/fhir/OperationDefinition/CodeSystem-lookup': () => [['GET', 'CodeSystem/$lookup?system=http://hl7.org/fhir/administrative-gender&code=male', 200]],
    'http://hl7.org/fhir/OperationDefinition/CodeSystem-subsumes': () => [
      ['GET', 'CodeSystem/$subsumes?system=http://hl7.org/fhir/administrative-gender&codeA=male&codeB=female', 200],
      ['POST', 'CodeSystem/probe-missing/$subsumes', 404, { resourceType: 'Parameters', parameter: [{ name: 'codeA', valueCode: 'a' }, { name: 'codeB', valueCode: 'b' }] }],
    ],
    'http://hl7.org/fhir/OperationDefinition/CodeSystem-find-matches': () => [
      ['GET', 'CodeSystem/$find-matches?system=http://hl7.org/fhir/administrative-gender&exact=true', 200],
      ['POST', 'CodeSystem/probe-missing/$find-matches', 404, { resourceType: 'Parameters', parameter: [{ name: 'exact', valueBoolean: true }] }],
    ],
    'http://hl7.org/fhir/OperationDefinition/ConceptMap-translate': () => [
      ['GET', 'ConceptMap/$translate?system=http://hl7.org/fhir/administrative-gender&code=male', 200],
      ['POST', 'ConceptMap/probe-missing/$translate', 404, { resourceType: 'Parameters', parameter: [{ name: 'code', valueCode: 'male' }, { name: 'system', valueUri: 'http://hl7.org/fhir/administrative-gender' }] }],
    ],
    // The patient has no current allergy list: a 404 naming it (List-find), not a missing route.
    // The Subscriptions R5 Backport IG's $status: every Subscription the caller may search, or one (a missing one 404).
    'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-status': () => [
      ['GET', 'Subscription/$status', 200], ['GET', 'Subscription/probe-missing/$status', 404], ['POST', 'Subscription/probe-missing/$status', 404, { resourceType: 'Parameters' }],
    ],
    'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-events': () => [
      ['GET', 'Subscription/probe-missing/$events', 404], ['POST', 'Subscription/probe-missing/$events', 404, { resourceType: 'Parameters' }],
    ],
    'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-get-ws-binding-token': () => [
      ['GET', 'Subscription/probe-missing/$get-ws-binding-token', 404], ['POST', 'Subscription/probe-missing/$get-ws-binding-token', 404, { resourceType: 'Parameters' }],
    ],
    'http://hl7.org/fhir/OperationDefinition/List-find': () => [['GET', 'List/$find?patient=probe&name=$current-allergies', 404]],
    // $meta at the system level, on a type (the union in use) and on an instance or version; the changes on an instance or version.
    'http://hl7.org/fhir/OperationDefinition/Resource-meta': (type) => (type === ''
      ? [['GET', '$meta', 200], ['POST', '$meta', 200, { resourceType: 'Parameters' }]]
      : [['GET', `${type}/$meta`, 200], ['GET', `${type}/probe-missing/$meta`, 404], ['POST', `${type}/probe-missing/_history/1/$meta`, 404, { resourceType: 'Parameters' }]]),
    'http://hl7.org/fhir/OperationDefinition/Resource-meta-add': (type) => [
      ['POST', `${type}/probe-missing/$meta-add`, 404, META_INPUT], ['POST', `${type}/probe-missing/_history/1/$meta-add`, 404, META_INPUT],
      ['POST', `${type}/probe-missing/$meta-add`, 400, { resourceType: 'Parameters' }],
    ],
    // $convert at the system level: a resource back in the format asked for; $diff at the system level and on each type's instances.
    'http://hl7.org/fhir/OperationDefinition/Resource-convert': () => [['POST', '$convert', 200, { resourceType: 'Patient', gender: 'male' }], ['POST', '$convert', 422, { resourceType: 'Patient', gender: 'bogus' }]],
    'urn:cinder:OperationDefinition:diff': (type) => (type === ''
      ? [['GET', '$diff?from=Patient/probe-missing&to=Patient/probe-missing', 404], ['GET', '$diff?to=Patient/probe-missing', 400]]
      : [['GET', `${type}/probe-missing/$diff`, 404], ['POST', `${type}/probe-missing/$diff`, 404, { resourceType: 'Parameters' }]]),
    'http://hl7.org/fhir/OperationDefinition/Resource-meta-delete': (type) => [
      ['POST', `${type}/probe-missing/$meta-delete`, 404, META_INPUT], ['POST', `${type}/probe-missing/_history/1/$meta-delete`, 404, META_INPUT],
    ],
    'http://hl7.org/fhir/OperationDefinition/Observation-lastn': () => [
      ['GET', 'Observation/$lastn?patient=probe&category=laboratory', 200], ['GET', 'Observation/$lastn?category=laboratory', 400],
      ['POST', 'Observation/$lastn', 200, { resourceType: 'Parameters', parameter: [{ name: 'patient', valueString: 'probe' }, { name: 'code', valueString: 'http://loinc.org|1-8' }] }],
    ],
    'http://hl7.org/fhir/OperationDefinition/Encounter-everything': () => [
      ['GET', 'Encounter/probe-missing/$everything', 404], ['POST', 'Encounter/probe-missing/$everything', 404, { resourceType: 'Parameters' }],
      ['GET', 'Encounter/probe-missing/$everything?_count=x', 400],
    ],
    'http://hl7.org/fhir/OperationDefinition/Composition-document': () => [
      ['GET', 'Composition/probe-missing/$document', 404], ['POST', 'Composition/probe-missing/$document', 404, { resourceType: 'Parameters' }],
      ['GET', 'Composition/$document?id=probe-missing', 404], ['GET', 'Composition/$document', 400],
    ],
    'http://hl7.org/fhir/OperationDefinition/Observation-stats': () => [
      ['GET', 'Observation/$stats?subject=Patient/probe&code=1-8&statistic=average', 200], ['GET', 'Observation/$stats?code=1-8&statistic=average', 400],
      ['POST', 'Observation/$stats', 200, { resourceType: 'Parameters', parameter: [{ name: 'subject', valueUri: 'Patient/probe' }, { name: 'coding', valueCoding: { system: 'http://loinc.org', code: '1-8' } }, { name: 'statistic', valueCode: 'count' }] }],
    ],
    'http://hl7.org/fhir/OperationDefinition/NamingSystem-preferred-id': () => [
      ['GET', 'NamingSystem/$preferred-id?id=urn:oid:1.2.3&type=uri', 404], ['GET', 'NamingSystem/$preferred-id?id=1.2.3', 400],
      ['POST', 'NamingSystem/$preferred-id', 404, { resourceType: 'Parameters', parameter: [{ name: 'id', valueString: '1.2.3' }, { name: 'type', valueCode: 'uri' }] }],
    ],
    'http://hl7.org/fhir/OperationDefinition/CapabilityStatement-versions': () => [['GET', '$versions', 200], ['POST', '$versions', 200, { resourceType: 'Parameters' }]],
    'http://hl7.org/fhir/OperationDefinition/StructureDefinition-snapshot': () => [
      ['GET', `StructureDefinition/$snapshot?url=${encodeURIComponent('http://hl7.org/fhir/StructureDefinition/bp')}`, 200],
      ['POST', 'StructureDefinition/$snapshot', 400, { resourceType: 'Parameters' }], ['GET', 'StructureDefinition/probe-missing/$snapshot', 404],
    ],
    // $graphql at the system level, and on an instance of each type (a missing one: 404).
    'http://hl7.org/fhir/OperationDefinition/Resource-graphql': (type) => (type === ''
      ? [['GET', `$graphql?query=${encodeURIComponent('{ __typename }')}`, 200], ['GET', '$graphql', 400]]
      : [['GET', `${type}/probe-missing/$graphql?query=${encodeURIComponent('{ id }')}`, 404]]),
    'http://hl7.org/fhir/OperationDefinition/Patient-match': () => [
      ['POST', 'Patient/$match', 200, { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: { resourceType: 'Patient', name: [{ family: 'Probe' }] } }] }],
      ['POST', 'Patient/$match', 400, { resourceType: 'Parameters' }],
    ],
    'http://hl7.org/fhir/OperationDefinition/Patient-everything': () => [
      ['GET', 'Patient/$everything', 200], ['POST', 'Patient/$everything', 200, { resourceType: 'Parameters' }],
      ['GET', 'Patient/probe-missing/$everything', 404], ['POST', 'Patient/probe-missing/$everything', 404, { resourceType: 'Parameters' }],
    ],
  };

  test('each operation, at the system level and on each type that lists it', async () => {
    const declared: [string | undefined, Json][] = [
      ...((statement.rest[0].operation ?? []) as Json[]).map((o): [string | undefined, Json] => [undefined, o]),
      ...resources.flatMap((r) => ((r.operation ?? []) as Json[]).map((o): [string, Json] => [r.type, o])),
    ];
    const unknown = declared.filter(([, o]) => !INVOCATIONS[o.definition]).map(([type, o]) => `${type ?? '[base]'} $${o.name} ${o.definition}`);
    expect(unknown).toEqual([]);
    const missing: string[] = [];
    for (const [type, o] of declared) {
      for (const [method, path, status, body] of INVOCATIONS[o.definition]!(type ?? '')) {
        expect(path).toContain(`$${o.name}`);
        const res = await api.call(method, path, body);
        const why = await unrouted(res);
        if (why || res.status >= 500) missing.push(`${method} ${path}: ${why ?? res.status}`);
        else if (res.status !== status) missing.push(`${method} ${path}: ${res.status}, not ${status}`);
      }
    }
    expect(missing).toEqual([]);
    expect(declared.length).toBeGreaterThan(resources.length);
  }, 120_000); // an operation on every type that lists it, one after another: 32 s beside eight helpers' work
});

describe('what the statement does not list is refused', () => {
  test('a type it does not list (Parameters, an unknown name) is refused by every interaction', async () => {
    const listed = new Set(resources.map((r) => r.type as string));
    for (const type of ['Parameters', 'NotAType', 'patient']) {
      expect(listed.has(type)).toBe(false);
      const body = { resourceType: type };
      const tries: [string, string, unknown?][] = [
        ['GET', `${type}/x`], ['GET', `${type}/x/_history/1`], ['PUT', `${type}/x`, { ...body, id: 'x' }],
        ['PATCH', `${type}/x`, []], ['DELETE', `${type}/x`], ['GET', `${type}/x/_history`], ['GET', `${type}/_history`],
        ['POST', type, body], ['GET', type], ['POST', `${type}/_search`, '_id=x'], ['POST', `${type}/$validate`, { resourceType: 'Parameters' }],
      ];
      for (const [method, path, b] of tries) {
        const contentType = method === 'PATCH' ? 'application/json-patch+json' : path.endsWith('_search') ? 'application/x-www-form-urlencoded' : undefined;
        const res = await api.call(method, path, b, contentType ? { 'Content-Type': contentType } : {});
        expect({ method, path, refused: [400, 404].includes(res.status) }).toEqual({ method, path, refused: true });
      }
    }
  });

  test('a modifier a parameter does not document is refused under strict handling (none is taken unlisted)', async () => {
    const MODIFIERS = ['missing', 'exact', 'contains', 'text', 'not', 'of-type', 'in', 'not-in', 'below', 'above', 'identifier', 'Patient', 'iterate', 'text-advanced'];
    const taken = new Set<string>();
    for (const r of resources) {
      for (const p of r.searchParam as Json[]) {
        const documented = documentedModifiers(p);
        for (const m of MODIFIERS) {
          if (documented.includes(m) || (m === 'Patient' && documented.includes('[type]'))) continue;
          if ((await api.get(`${r.type}?${p.name}:${m}=x`, STRICT)).status === 200) taken.add(`${p.type} ${p.name.startsWith('_') ? p.name : '*'}:${m}`);
        }
      }
    }
    expect([...taken]).toEqual([]);
  });

  test('a search parameter or modifier no type lists is refused under strict handling', async () => {
    expect(await refusal('Patient?not-a-param=x')).toContain('400');
    expect(await refusal('Patient?name:not-a-modifier=x')).toContain('400');
    // A modifier of another parameter type: `:exact` is a string modifier, not a token one.
    expect(await refusal('Patient?gender:exact=male')).toContain('400');
    expect(await refusal('Patient?_include=Observation:subject')).toContain('400');
  });
});
