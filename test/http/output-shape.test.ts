/**
 * Cinder's own FHIR output is valid R4 (json.html: "JSON objects and arrays are never empty ... Omit a
 * property if it is empty"): every answer below, searchsets empty and not, `_summary=count`,
 * `_count=0`, history, batch and transaction responses (empty ones included), the CapabilityStatement,
 * `$everything`, `$validate`, terminology outputs (an `$expand` that finds nothing), OperationOutcomes
 * of errors, is checked by Cinder's own validator (strict) and walked for empty arrays and objects.
 * The Bulk Data manifest is not FHIR: its `output` and `error` stay arrays, empty or not, as Bulk Data
 * 2.0.0 says ("the server SHOULD return an empty array"); nothing else in it is empty. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { validateResource } from '../../src/fhir/validation/validate.ts';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore, kickOff, finish } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

/** The paths of the empty arrays and objects in `value` (outside `allowed` paths). */
function empties(value: unknown, path = '', allowed: ReadonlySet<string> = new Set()): string[] {
  if (value === null || typeof value !== 'object') return [];
  const children = Array.isArray(value) ? value.map((v, i) => [`${path}[${i}]`, v] as const) : Object.entries(value).map(([k, v]) => [`${path}.${k}`, v] as const);
  const own = children.length === 0 && !allowed.has(path) ? [path || '(root)'] : [];
  return [...own, ...children.flatMap(([p, v]) => empties(v, p, allowed))];
}

/** Asserts `body` has no empty array or object and that Cinder's validator finds no error in it. */
function expectValidOutput(label: string, body: Json): void {
  expect({ label, empties: empties(body) }).toEqual({ label, empties: [] });
  const errors = validateResource(body, 'strict').filter((i) => i.severity === 'error');
  expect({ label, errors }).toEqual({ label, errors: [] });
}

await eachStore((kind, fresh) => {
  describe(`Cinder's own output is valid R4 JSON, without empty arrays or objects (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let token: string;
    const clock = testClock(Date.parse('2026-03-01T00:00:00Z'));
    /** The body of a response of `status`, checked. */
    const checked = async (label: string, res: Response, status = 200): Promise<Json> => {
      const text = await res.text();
      expect({ label, status: res.status }).toEqual({ label, status });
      const body = JSON.parse(text) as Json;
      expectValidOutput(label, body);
      return body;
    };
    const get = async (path: string, status = 200) => checked(`GET ${path}`, await api.get(path), status);
    const bundle = async (label: string, b: Json, headers: Record<string, string> = {}, status = 200) => checked(label, await api.post(api.base, b, headers), status);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), clock });
      token = await t.token();
      api = fhirClient(t, token);
      await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Shape' }] });
      await api.put200({ resourceType: 'Patient', id: 'lonely' });
      await api.put200({ resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p1' } });
      await api.put200({ resourceType: 'Observation', id: 'o1', status: 'amended', code: { text: 'x' }, subject: { reference: 'Patient/p1' } });
    });
    afterAll(() => t.close());

    test('searchsets, empty and not, counts and _count=0', async () => {
      const some = await get('Observation?subject=Patient/p1&_include=Observation:subject');
      expect(some.entry).toHaveLength(2);
      for (const q of ['Observation?code=none', 'Observation?_summary=count', 'Observation?code=none&_summary=count', 'Observation?_count=0', 'Patient?_count=0&_total=accurate']) {
        const b = await get(q);
        expect(b.entry).toBeUndefined();
        expect(b.link.length).toBeGreaterThan(0);
      }
      expect((await get('Observation?_summary=count')).total).toBe(1);
      // A warning is an outcome entry; the search still matches nothing.
      expect((await get('Observation?code=none&_elements=nothing')).entry).toHaveLength(1);
      expect((await get('?_type=Observation&code=none')).entry).toBeUndefined();
      expect((await get('?_type=Patient&_id=p1,lonely')).entry).toHaveLength(2);
      expect((await get('Patient?_id=p1&_revinclude=Observation:subject&_summary=text')).entry).toHaveLength(2);
      expect((await get('Patient?_id=p1&_elements=id')).entry).toHaveLength(1);
      expect((await get('Patient/lonely/Observation')).entry).toBeUndefined();
      expect((await get('Patient/lonely/*?_type=Observation')).entry).toBeUndefined();
      expect((await checked('POST _search', await api.call('POST', 'Observation/_search', 'code=none', { 'Content-Type': 'application/x-www-form-urlencoded' }))).entry).toBeUndefined();
    });

    test('$everything, history empty and not', async () => {
      expect((await get('Patient/p1/$everything')).entry).toHaveLength(2);
      expect((await get('Patient/$everything?_count=1')).entry).toHaveLength(1);
      expect((await get('Patient/lonely/$everything')).entry).toHaveLength(1);
      expect((await get('Observation/o1/_history')).entry).toHaveLength(2);
      expect((await get('Observation/_history')).entry).toHaveLength(2);
      expect((await get('_history')).entry).toHaveLength(4);
      await api.put200({ resourceType: 'Patient', id: 'gone' });
      expect((await api.del('Patient/gone')).status).toBe(200);
      expect((await get('Patient/gone/_history')).entry).toHaveLength(2);
      for (const q of ['_history?_since=2099-01-01T00:00:00Z', 'Observation/_history?_since=2099-01-01T00:00:00Z', 'Observation/o1/_history?_since=2099-01-01T00:00:00Z', 'Observation/_history?_count=0']) {
        expect((await get(q)).entry).toBeUndefined();
      }
    });

    test('batch and transaction responses, empty and not, with every return preference', async () => {
      for (const type of ['batch', 'transaction']) {
        expect((await bundle(`empty ${type}`, { resourceType: 'Bundle', type })).entry).toBeUndefined();
        const entries = [
          { fullUrl: 'urn:uuid:4b4c1a1e-0000-4000-8000-000000000001', resource: { resourceType: 'Patient', active: true }, request: { method: 'POST', url: 'Patient' } },
          { resource: { resourceType: 'Patient', id: 'p1', name: [{ family: 'Shape' }] }, request: { method: 'PUT', url: 'Patient/p1' } },
          { request: { method: 'GET', url: 'Observation?code=none' } },
          { request: { method: 'GET', url: 'Observation?_summary=count' } },
          { request: { method: 'GET', url: 'Patient/p1/_history?_since=2099-01-01T00:00:00Z' } },
          { request: { method: 'DELETE', url: 'Patient/never-there' } },
        ];
        for (const prefer of [undefined, 'return=minimal', 'return=OperationOutcome']) {
          const out = await bundle(`${type} ${prefer ?? ''}`, { resourceType: 'Bundle', type, entry: entries }, prefer ? { Prefer: prefer } : {});
          expect(out.entry).toHaveLength(entries.length);
          expect(out.entry[2].resource.entry).toBeUndefined();
          expect(out.entry[4].resource.entry).toBeUndefined();
        }
      }
      const failed = await bundle('batch with a failing entry', { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: 'Patient/none' } }] });
      expect(failed.entry[0].response.status).toStartWith('404');
    });

    test('the CapabilityStatement', async () => {
      const cs = await checked('metadata', await t.request(`${api.base}/metadata`));
    });

    test('$validate, writes, deletes and errors', async () => {
      await checked('$validate valid', await api.post('Patient/$validate', { resourceType: 'Patient' }));
      await checked('$validate invalid', await api.post('Patient/$validate', { resourceType: 'Patient', gender: 'x' }));
      await checked('create', await api.post('Patient', { resourceType: 'Patient' }), 201);
      await checked('create OperationOutcome', await api.post('Patient', { resourceType: 'Patient' }, { Prefer: 'return=OperationOutcome' }), 201);
      await checked('delete', await api.del('Patient/never-there'));
      await checked('404', await api.get('Patient/none'), 404);
      await checked('422', await api.post('Patient', { resourceType: 'Patient', gender: 'x' }), 422);
      await checked('400', await api.get('Patient?unknown-param=1', { Prefer: 'handling=strict' }), 400);
      await checked('405', await api.call('PUT', ''), 405);
      await checked('401', await t.request(`${api.base}/Patient`), 401);
      await checked('patch', await api.call('PATCH', 'Patient/lonely', [{ op: 'add', path: '/active', value: true }], { 'Content-Type': 'application/json-patch+json' }));
      await checked('read _summary=true', await api.get('Observation/o1?_summary=true'));
    });

    test('terminology outputs: $expand that finds nothing, $validate-code, $lookup', async () => {
      const gender = 'http://hl7.org/fhir/ValueSet/administrative-gender';
      const none = await get(`ValueSet/$expand?url=${encodeURIComponent(gender)}&filter=zzzz`);
      expect(none.expansion.total).toBe(0);
      expect(none.expansion.contains).toBeUndefined();
      expect((await get(`ValueSet/$expand?url=${encodeURIComponent(gender)}&count=0`)).expansion.contains).toBeUndefined();
      expect((await get(`ValueSet/$expand?url=${encodeURIComponent(gender)}`)).expansion.contains).toHaveLength(4);
      // A ValueSet of no codes: an expansion without parameters or contains.
      await api.put200({ resourceType: 'ValueSet', id: 'nothing', url: 'http://cinder.test/ValueSet/nothing', status: 'active', compose: { include: [{ system: 'http://hl7.org/fhir/administrative-gender', concept: [{ code: 'male' }] }], exclude: [{ system: 'http://hl7.org/fhir/administrative-gender', concept: [{ code: 'male' }] }] } });
      const empty = await get('ValueSet/nothing/$expand');
      expect(empty.expansion.contains).toBeUndefined();
      await get(`ValueSet/$validate-code?url=${encodeURIComponent(gender)}&system=http://hl7.org/fhir/administrative-gender&code=male`);
      await get(`ValueSet/$validate-code?url=${encodeURIComponent(gender)}&system=http://hl7.org/fhir/administrative-gender&code=nope`);
      await get('CodeSystem/$lookup?system=http://hl7.org/fhir/administrative-gender&code=male');
      await get('CodeSystem/$validate-code?url=http://hl7.org/fhir/administrative-gender&code=male');
      await get(`ValueSet/$validate-code?url=${encodeURIComponent(gender)}&system=http://hl7.org/fhir/administrative-gender&code=male&display=Wrong`);
      await get('ValueSet/$expand?url=http://cinder.test/ValueSet/unknown', 400);
    });

    test('the Bulk Data manifest: output and error are arrays, empty ones included, and nothing else is empty', async () => {
      const kickoff = await api.get('$export?_type=Patient', { Prefer: 'respond-async' });
      expect(kickoff.status).toBe(202);
      if (kickoff.headers.get('content-type')) expectValidOutput('kick-off', (await kickoff.json()) as Json);
      const first = await finish(t, token, kickoff.headers.get('content-location')!);
      // Nothing changed after the first export's transactionTime (the clock stands still; a later _since is refused).
      const manifest = await finish(t, token, await kickOff(t, token, `/$export?_type=Observation&_since=${first.transactionTime}`));
      expect(manifest.output).toEqual([]);
      expect(manifest.error).toEqual([]);
      expect(empties(manifest, '', new Set(['.output', '.error', '.deleted']))).toEqual([]);
    });
  });
});
