/** FHIR R4 patch (http.html#patch): JSON Patch and FHIRPath Patch, conditional, in Bundles, on both databases. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };

/** A FHIRPath Patch Parameters; each operation is given as its parts (`value` as a part's value[x] members). */
function fhirPatch(...ops: Json[]): Json {
  return {
    resourceType: 'Parameters',
    parameter: ops.map(({ value, ...rest }) => ({
      name: 'operation',
      part: [
        ...Object.entries(rest).map(([name, v]) => (name === 'type' ? { name, valueCode: v } : typeof v === 'number' ? { name, valueInteger: v } : { name, valueString: v })),
        ...(value === undefined ? [] : [{ name: 'value', ...value }]),
      ],
    })),
  };
}

const bundle = (type: string, entry: Json[]) => ({ resourceType: 'Bundle', type, entry });
const patchEntry = (url: string, resource: Json, ifMatch?: string) => ({ resource, request: { method: 'PATCH', url, ...(ifMatch ? { ifMatch } : {}) } });
const binary = (ops: Json[]) => ({ resourceType: 'Binary', contentType: 'application/json-patch+json', data: Buffer.from(JSON.stringify(ops)).toString('base64') });

await eachStore((kind, fresh) => {
  describe(`PATCH (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let n = 0;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    /** A fresh Patient with two names and two identifiers; returns its id. */
    async function patient(extra: Json = {}): Promise<string> {
      const id = `p${++n}`;
      await api.put200({
        resourceType: 'Patient', id, active: true, gender: 'female',
        name: [{ family: 'Chalmers', given: ['Peter', 'James'] }, { family: 'Windsor', use: 'maiden' }],
        identifier: [{ system: 'urn:mrn', value: `mrn-${id}` }, { system: 'urn:ssn', value: `ssn-${id}` }],
        ...extra,
      });
      return id;
    }
    const read = async (id: string): Promise<Json> => (await (await api.get(`Patient/${id}`)).json()) as Json;
    const jsonPatch = (path: string, ops: unknown, headers: Record<string, string> = {}) => api.call('PATCH', path, ops, { ...JSON_PATCH, ...headers });
    const pathPatch = (path: string, params: Json, headers: Record<string, string> = {}) => api.call('PATCH', path, params, headers);

    /** Asserts an OperationOutcome of `status` and that nothing was written; returns its first issue. */
    async function refused(send: () => Response | Promise<Response>, status: number, code?: string): Promise<Json> {
      const before = await countVersions(t);
      const outcome = await expectOutcome(await send(), status, code);
      expect(await countVersions(t)).toBe(before);
      return outcome.issue[0];
    }

    describe('FHIRPath Patch: primitive extensions and previousValue', () => {
      const EXT = 'http://hl7.org/fhir/StructureDefinition/patient-birthTime';
      const birthTime = (at: string) => ({ extension: [{ url: EXT, valueDateTime: at }] });
      test("a part's _value[x] gives the primitive's extensions; replace replaces them with the value; previousValue is informational", async () => {
        const id = await patient({ birthDate: '1974-12-25', _birthDate: birthTime('1974-12-25T14:35:45-05:00') });
        // replace without _value[x]: the element is replaced whole, its old extensions gone.
        let res = await pathPatch(`Patient/${id}`, fhirPatch({ type: 'replace', path: 'Patient.birthDate', value: { valueDate: '1974-12-26' }, previousValue: '1974-12-25' }));
        expect(res.status).toBe(200);
        let now = await read(id);
        expect([now.birthDate, now._birthDate]).toEqual(['1974-12-26', undefined]);
        // replace with _value[x]: value and extensions.
        res = await pathPatch(`Patient/${id}`, fhirPatch({ type: 'replace', path: 'Patient.birthDate', value: { valueDate: '1974-12-27', _valueDate: birthTime('1974-12-27T01:00:00Z') } }));
        expect(res.status).toBe(200);
        now = await read(id);
        expect([now.birthDate, now._birthDate]).toEqual(['1974-12-27', birthTime('1974-12-27T01:00:00Z')]);
        // insert and add carry them too, a list's companion kept aligned (null where a value has none).
        res = await pathPatch(`Patient/${id}`, fhirPatch(
          { type: 'insert', path: 'Patient.name[0].given', index: 1, value: { valueString: 'Jo', _valueString: { id: 'g1' } } },
          { type: 'delete', path: 'Patient.active' },
          { type: 'add', path: 'Patient', name: 'active', value: { valueBoolean: false, _valueBoolean: { id: 'a1' } } },
        ));
        expect(res.status).toBe(200);
        now = await read(id);
        expect([now.name[0].given, now.name[0]._given, now.active, now._active]).toEqual([['Peter', 'Jo', 'James'], [null, { id: 'g1' }, null], false, { id: 'a1' }]);
        // previousValue on a delete is informational too; on an insert it is not a part.
        res = await pathPatch(`Patient/${id}`, fhirPatch({ type: 'delete', path: 'Patient.name[0].given[1]', previousValue: 'Jo' }));
        expect(res.status).toBe(200);
        now = await read(id);
        expect([now.name[0].given, now.name[0]._given]).toEqual([['Peter', 'James'], undefined]);
        const issue = await refused(() => pathPatch(`Patient/${id}`, fhirPatch({ type: 'insert', path: 'Patient.name', index: 0, value: { valueHumanName: { family: 'X' } }, previousValue: 'x' })), 400);
        expect(issue.expression).toEqual(['Parameters.parameter[0]']);
      });

      test('add of a value to a primitive that had only extensions keeps them, and appends those of the part\'s _value[x]', async () => {
        const absent = { extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/data-absent-reason', valueCode: 'unknown' }] };
        const id = await patient({ _birthDate: { id: 'b0', ...absent } });
        let res = await pathPatch(`Patient/${id}`, fhirPatch({ type: 'add', path: 'Patient', name: 'birthDate', value: { valueDate: '1974-12-25', _valueDate: birthTime('1974-12-25T14:35:45-05:00') } }));
        expect(res.status).toBe(200);
        let now = await read(id);
        expect([now.birthDate, now._birthDate]).toEqual(['1974-12-25', { id: 'b0', extension: [...absent.extension, ...birthTime('1974-12-25T14:35:45-05:00').extension] }]);
        // Without _value[x], the extensions stay as they were.
        await api.put200({ ...now, birthDate: undefined, _birthDate: absent });
        res = await pathPatch(`Patient/${id}`, fhirPatch({ type: 'add', path: 'Patient', name: 'birthDate', value: { valueDate: '1974-12-26' } }));
        expect(res.status).toBe(200);
        now = await read(id);
        expect([now.birthDate, now._birthDate]).toEqual(['1974-12-26', absent]);
        // Another id cannot be added beside the one it has: that is a replace.
        await api.put200({ ...now, birthDate: undefined, _birthDate: { id: 'b0', ...absent } });
        const issue = await refused(() => pathPatch(`Patient/${id}`, fhirPatch({ type: 'add', path: 'Patient', name: 'birthDate', value: { valueDate: '1974-12-26', _valueDate: { id: 'b1' } } })), 400);
        expect(issue.expression).toEqual(['Parameters.parameter[0]']);
        // Onto a primitive that has a value, add is still refused.
        await refused(() => pathPatch(`Patient/${id}`, fhirPatch({ type: 'add', path: 'Patient', name: 'active', value: { valueBoolean: false, _valueBoolean: { id: 'a1' } } })), 400);
      });
    });

    describe('FHIRPath Patch: primitives with extensions and no value in lists, and a primitive\'s own extensions', () => {
      const ext = (v: string) => ({ extension: [{ url: 'http://example.org/x', valueString: v }] });
      const op = (type: string, path: string, more: Json = {}) => ({ type, path, ...more });
      const names = (now: Json) => [now.name[0].given, now.name[0]._given];

      test('an item of a list of primitives with extensions alone is indexed: delete, replace, insert, move, and add onto it', async () => {
        const id = await patient({ name: [{ family: 'F', given: ['Ann', null, 'Cy'], _given: [null, ext('b'), null] }] });
        const apply = async (...ops: Json[]) => {
          const res = await pathPatch(`Patient/${id}`, fhirPatch(...ops));
          expect({ status: res.status, body: res.status === 200 ? 'ok' : await res.json() }).toEqual({ status: 200, body: 'ok' });
          return read(id);
        };
        // given[2] is 'Cy', after the item without a value: positions are FHIRPath's, that item counted.
        let now = await apply(op('replace', 'Patient.name[0].given[2]', { value: { valueString: 'Cyd' } }));
        expect(names(now)).toEqual([['Ann', null, 'Cyd'], [null, ext('b'), null]]);
        now = await apply(op('replace', 'Patient.name[0].given[1]', { value: { valueString: 'Bea', _valueString: ext('b2') } }));
        expect(names(now)).toEqual([['Ann', 'Bea', 'Cyd'], [null, ext('b2'), null]]);
        now = await apply(op('replace', 'Patient.name[0].given[1]', { value: { _valueString: ext('b3') } }));
        expect(names(now)).toEqual([['Ann', null, 'Cyd'], [null, ext('b3'), null]]);
        now = await apply(op('insert', 'Patient.name[0].given', { index: 0, value: { _valueString: ext('z') } }));
        expect(names(now)).toEqual([[null, 'Ann', null, 'Cyd'], [ext('z'), null, ext('b3'), null]]);
        now = await apply(op('move', 'Patient.name[0].given', { source: 2, destination: 3 }));
        expect(names(now)).toEqual([[null, 'Ann', 'Cyd', null], [ext('z'), null, null, ext('b3')]]);
        // add onto an item: its extension, into its `_given` entry.
        now = await apply({ type: 'add', path: 'Patient.name[0].given[3]', name: 'extension', value: { part: [{ name: 'url', valueUri: 'http://example.org/y' }, { name: 'value', valueCode: 'c' }] } });
        expect(now.name[0]._given[3]).toEqual({ extension: [...ext('b3').extension, { url: 'http://example.org/y', valueCode: 'c' }] });
        now = await apply(op('delete', 'Patient.name[0].given[2]'), op('delete', 'Patient.name[0].given[0]'));
        expect(names(now)).toEqual([['Ann', null], [null, { extension: [...ext('b3').extension, { url: 'http://example.org/y', valueCode: 'c' }] }]]);
        // An add of a value-less item to the list, and of its value-less value onto the resource's own list.
        now = await apply({ type: 'add', path: 'Patient.name[0]', name: 'given', value: { _valueString: ext('e') } });
        expect(names(now)).toEqual([['Ann', null, null], [null, { extension: [...ext('b3').extension, { url: 'http://example.org/y', valueCode: 'c' }] }, ext('e')]]);
        // Deleting an item's last extension leaves nothing of it: the item is gone from both lists.
        now = await apply(op('delete', 'Patient.name[0].given[2].extension'));
        expect(names(now)).toEqual([['Ann', null], [null, { extension: [...ext('b3').extension, { url: 'http://example.org/y', valueCode: 'c' }] }]]);
        // Only a primitive is an id and extensions without a value: a HumanName is its elements.
        const issue = await refused(() => pathPatch(`Patient/${id}`, fhirPatch(op('insert', 'Patient.name', { index: 0, value: { _valueHumanName: ext('n') } }))), 400);
        expect(issue.expression).toEqual(['Parameters.parameter[0]']);
      });

      test('a value part with an empty _value[x], an empty or null value[x], or nested parts of nothing is 400 naming the parameter, and changes nothing', async () => {
        const id = await patient({ name: [{ family: 'F', given: ['Ann', 'Cy'], _given: [null, ext('c')] }] });
        for (const bad of [
          op('insert', 'Patient.name[0].given', { index: 0, value: { _valueString: {} } }),
          op('insert', 'Patient.name[0].given', { index: 0, value: { _valueString: { extension: [] } } }),
          op('insert', 'Patient.name[0].given', { index: 0, value: { valueString: 'x', _valueString: 'not an object' } }),
          { type: 'add', path: 'Patient.name[0]', name: 'given', value: { _valueString: {} } },
          { type: 'add', path: 'Patient.name[0]', name: 'given', value: { _valueString: { extension: [] } } },
          { type: 'add', path: 'Patient.name[0]', name: 'given', value: { valueString: {} } },
          { type: 'add', path: 'Patient', name: 'name', value: { valueHumanName: { family: 'X', given: [] } } },
          { type: 'add', path: 'Patient', name: 'name', value: { valueHumanName: { family: 'X', given: ['a'], _given: [null] } } },
          { type: 'add', path: 'Patient', name: 'contact', value: { part: [] } },
          { type: 'add', path: 'Patient', name: 'contact', value: { part: [{ name: 'name', valueHumanName: {} }] } },
          op('replace', 'Patient.gender', { value: { valueCode: null } }),
          op('replace', 'Patient.name[0].family', { value: { valueString: null, _valueString: ext('f') } }),
          op('replace', 'Patient.name[0].given[0]', { value: { valueString: null } }),
        ]) {
          const issue = await refused(() => pathPatch(`Patient/${id}`, fhirPatch(bad)), 400, 'structure');
          expect({ bad, expression: issue.expression }).toEqual({ bad, expression: ['Parameters.parameter[0]'] });
          expect(issue.details.text).toMatch(/part 'value(\.[a-z]+)?': /);
        }
        const now = await read(id);
        expect([now.gender, now.name[0].family, ...names(now)]).toEqual(['female', 'F', ['Ann', 'Cy'], [null, ext('c')]]);
        // A value part with extensions alone, or with a value and an id, still applies.
        const ok = await pathPatch(`Patient/${id}`, fhirPatch(op('insert', 'Patient.name[0].given', { index: 0, value: { _valueString: ext('z') } }), { type: 'add', path: 'Patient.name[0]', name: 'given', value: { valueString: 'Di', _valueString: { id: 'g4' } } }));
        expect(ok.status).toBe(200);
        expect(names(await read(id))).toEqual([[null, 'Ann', 'Cy', 'Di'], [ext('z'), null, ext('c'), { id: 'g4' }]]);
      });

      test('a companion of nulls alone (`"_given": [null]` beside values), or an empty one, is 422 naming it, by PUT and by JSON Patch', async () => {
        const id = await patient();
        const put = (name: Json) => api.put(`Patient/${id}`, { resourceType: 'Patient', id, name: [name] });
        let issue = await refused(() => put({ family: 'F', given: ['Ann'], _given: [null] }), 422, 'structure');
        expect(issue.expression).toEqual(['Patient.name[0]._given']);
        issue = await refused(() => put({ family: 'F', given: ['Ann', 'Cy'], _given: [null, null] }), 422, 'structure');
        expect(issue.expression).toEqual(['Patient.name[0]._given']);
        issue = await refused(() => put({ family: 'F', _given: [] }), 422, 'structure');
        expect(issue.expression).toEqual(['Patient.name[0]._given']);
        // A null value beside a null companion item is one problem, named at the value.
        const outcome = await expectOutcome(await put({ family: 'F', given: ['Ann', null], _given: [null, null] }), 422);
        expect(outcome.issue.map((i: Json) => i.expression[0])).toEqual(['Patient.name[0].given[1]']);
        issue = await refused(() => put({ family: 'F', given: [null], _given: [null] }), 422, 'structure');
        expect(issue.expression).toEqual(['Patient.name[0].given[0]']);
        issue = await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'add', path: '/name/0/_given', value: [null, null] }]), 422, 'structure');
        expect(issue.expression).toEqual(['Patient.name[0]._given']);
        issue = await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'add', path: '/name/0/_given', value: [{ id: 'g0' }, null] }, { op: 'replace', path: '/name/0/_given/0', value: null }]), 422, 'structure');
        expect(issue.expression).toEqual(['Patient.name[0]._given']);
        // With an id or extension to carry, the companion is taken.
        expect((await put({ family: 'F', given: ['Ann', 'Cy'], _given: [null, { id: 'g1' }] })).status).toBe(200);
        expect((await jsonPatch(`Patient/${id}`, [{ op: 'replace', path: '/name/0/_given/1', value: ext('c') }])).status).toBe(200);
      });

      test("where() sees a primitive's id and extensions, and selects an item that has them alone", async () => {
        const id = await patient({ birthDate: '1970-01-01', _birthDate: ext('bd'), name: [{ family: 'F', given: ['Ann', null, 'Cy'], _given: [null, ext('b'), { id: 'g2', ...ext('c') }] }] });
        const apply = async (...ops: Json[]) => {
          const res = await pathPatch(`Patient/${id}`, fhirPatch(...ops));
          expect({ status: res.status, body: res.status === 200 ? 'ok' : await res.json() }).toEqual({ status: 200, body: 'ok' });
          return read(id);
        };
        // The item without a value, found by its extension; the one with a value, by its id.
        let now = await apply(op('replace', "Patient.name[0].given.where(extension('http://example.org/x').value = 'b')", { value: { valueString: 'Bea' } }));
        expect(names(now)).toEqual([['Ann', 'Bea', 'Cy'], [null, null, { id: 'g2', ...ext('c') }]]);
        now = await apply(op('delete', "Patient.name[0].given.where(id = 'g2')"));
        expect(names(now)).toEqual([['Ann', 'Bea'], undefined]);
        now = await apply(op('replace', 'Patient.birthDate.where(extension.exists())', { value: { valueDate: '1970-01-02' } }));
        expect([now.birthDate, now._birthDate]).toEqual(['1970-01-02', undefined]);
      });

      test('replace of a choice element by a primitive with extensions alone: of another type, checked against that type', async () => {
        const obs = { resourceType: 'Observation', id: 'o-choice', status: 'final', code: { text: 'c' }, valueQuantity: { value: 1, unit: 'mg' } };
        await api.put200(obs);
        let res = await pathPatch('Observation/o-choice', fhirPatch(op('replace', 'Observation.value', { value: { _valueString: ext('s') } })));
        let body = (await res.json()) as Json;
        expect({ status: res.status, valueQuantity: body.valueQuantity, _valueString: body._valueString }).toEqual({ status: 200, valueQuantity: undefined, _valueString: ext('s') });
        // A Quantity is not a primitive: it cannot be extensions alone, whatever the type it replaces.
        const issue = await refused(() => pathPatch('Observation/o-choice', fhirPatch(op('replace', 'Observation.value', { value: { _valueQuantity: ext('q') } }))), 400);
        expect(issue.expression).toEqual(['Parameters.parameter[0]']);
        res = await pathPatch('Observation/o-choice', fhirPatch(op('replace', 'Observation.value', { value: { valueBoolean: true } })));
        body = (await res.json()) as Json;
        expect({ status: res.status, valueBoolean: body.valueBoolean, _valueString: body._valueString }).toEqual({ status: 200, valueBoolean: true, _valueString: undefined });
      });

      test('on the resource\'s own list of primitives (CapabilityStatement.format)', async () => {
        const cs = { resourceType: 'CapabilityStatement', id: 'cs-bare', status: 'draft', date: '2024-01-01', kind: 'instance', fhirVersion: '4.0.1', implementation: { description: 'x' }, rest: [{ mode: 'server' }], format: ['json', null, 'xml'], _format: [null, ext('f'), null] };
        await api.put200(cs);
        const res = await pathPatch('CapabilityStatement/cs-bare', fhirPatch(op('delete', 'CapabilityStatement.format[1]'), op('insert', 'CapabilityStatement.format', { index: 2, value: { _valueCode: ext('g') } })));
        const body = (await res.json()) as Json;
        expect({ status: res.status, format: body.format, _format: body._format }).toEqual({ status: 200, format: ['json', 'xml', null], _format: [null, null, ext('g')] });
      });

      test("a primitive's extensions are its children: Patient.birthDate.extension and .extension.where(url = ...), with a value or without", async () => {
        const two = { extension: [...ext('a').extension, { url: 'http://example.org/other', valueCode: 'o' }] };
        const id = await patient({ _birthDate: two });
        const apply = async (...ops: Json[]) => {
          const res = await pathPatch(`Patient/${id}`, fhirPatch(...ops));
          expect({ status: res.status, body: res.status === 200 ? 'ok' : await res.json() }).toEqual({ status: 200, body: 'ok' });
          return read(id);
        };
        let now = await apply(op('replace', "Patient.birthDate.extension.where(url = 'http://example.org/x').value", { value: { valueString: 'a2' } }));
        expect([now.birthDate, now._birthDate]).toEqual([undefined, { extension: [...ext('a2').extension, two.extension[1]] }]);
        now = await apply(op('move', 'Patient.birthDate.extension', { source: 1, destination: 0 }));
        expect(now._birthDate.extension.map((e: Json) => e.url)).toEqual(['http://example.org/other', 'http://example.org/x']);
        now = await apply(op('delete', "Patient.birthDate.extension('http://example.org/other')"));
        expect([now.birthDate, now._birthDate]).toEqual([undefined, ext('a2')]);
        // Its last extension deleted, the primitive has nothing left: it is gone.
        now = await apply(op('delete', 'Patient.birthDate.extension'));
        expect([now.birthDate, now._birthDate]).toEqual([undefined, undefined]);
        // Onto a primitive with a value: its first extension by insert, an id by add.
        now = await apply(
          { type: 'add', path: 'Patient', name: 'birthDate', value: { valueDate: '1970-01-01' } },
          op('insert', 'Patient.birthDate.extension', { index: 0, value: { part: [{ name: 'url', valueUri: 'http://example.org/x' }, { name: 'value', valueString: 'v' }] } }),
          { type: 'add', path: 'Patient.birthDate', name: 'id', value: { valueString: 'bd' } },
        );
        expect([now.birthDate, now._birthDate]).toEqual(['1970-01-01', { extension: ext('v').extension, id: 'bd' }]);
        // A primitive's only children are its id and extensions.
        const issue = await refused(() => pathPatch(`Patient/${id}`, fhirPatch({ type: 'add', path: 'Patient.birthDate', name: 'url', value: { valueUri: 'http://x' } })), 400);
        expect(issue.expression).toEqual(['Parameters.parameter[0]']);
      });
    });

    describe('JSON Patch', () => {
      test('add, remove, replace, move, copy and test in one document; the result is the next version', async () => {
        const id = await patient();
        const res = await jsonPatch(`Patient/${id}`, [
          { op: 'test', path: '/name/0/family', value: 'Chalmers' },
          { op: 'replace', path: '/name/0/family', value: 'Chalmers-Smith' },
          { op: 'add', path: '/name/0/given/-', value: 'Jim' },
          { op: 'add', path: '/telecom', value: [{ system: 'phone', value: '555' }] },
          { op: 'remove', path: '/active' },
          { op: 'move', from: '/identifier/1', path: '/identifier/0' },
          { op: 'copy', from: '/name/1/family', path: '/name/0/text' },
        ]);
        expect(res.status).toBe(200);
        expect(res.headers.get('etag')).toBe('W/"2"');
        const body = (await res.json()) as Json;
        expect(body.meta.versionId).toBe('2');
        expect(body.name[0]).toEqual({ family: 'Chalmers-Smith', given: ['Peter', 'James', 'Jim'], text: 'Windsor' });
        expect(body.telecom).toEqual([{ system: 'phone', value: '555' }]);
        expect(body.active).toBeUndefined();
        expect(body.identifier.map((i: Json) => i.system)).toEqual(['urn:ssn', 'urn:mrn']);
        expect(await read(id)).toEqual(body);
      });

      test("replace keeps the member where it stands, in an object and in an array (a diff of the stored text shows only the change)", async () => {
        const id = await patient();
        const before = Object.keys(await read(id));
        const res = await jsonPatch(`Patient/${id}`, [
          { op: 'replace', path: '/active', value: false },
          { op: 'replace', path: '/name/0/family', value: 'Smith' },
          { op: 'replace', path: '/identifier/0', value: { value: 'x', system: 'urn:x' } },
        ]);
        expect(res.status).toBe(200);
        const text = await (await api.get(`Patient/${id}`)).text();
        const body = JSON.parse(text) as Json;
        expect(Object.keys(body).filter((k) => k !== 'meta')).toEqual(before.filter((k) => k !== 'meta'));
        expect(Object.keys(body.name[0])).toEqual(['family', 'given']);
        expect(body.identifier.map((i: Json) => i.value)).toEqual(['x', `ssn-${id}`]);
        expect(text.indexOf('"active":false')).toBeLessThan(text.indexOf('"gender"'));
      });

      test('history grows by exactly one version; the previous one is unchanged', async () => {
        const id = await patient();
        const before = await countVersions(t);
        expect((await jsonPatch(`Patient/${id}`, [{ op: 'replace', path: '/gender', value: 'male' }])).status).toBe(200);
        expect(await countVersions(t)).toBe(before + 1);
        const history = (await (await api.get(`Patient/${id}/_history`)).json()) as Json;
        expect(history.entry.map((e: Json) => [e.resource.meta.versionId, e.resource.gender])).toEqual([['2', 'male'], ['1', 'female']]);
      });

      test('the result is indexed as an update\'s: searches find the new values and no longer the old ones', async () => {
        const id = await patient();
        const res = await jsonPatch(`Patient/${id}`, [
          { op: 'replace', path: '/gender', value: 'male' },
          { op: 'replace', path: '/identifier/0/value', value: `patched-${id}` },
        ]);
        expect(res.status).toBe(200);
        const found = async (query: string) => ((await api.search(query)).entry ?? []).map((e: Json) => e.resource.id);
        expect(await found(`Patient?identifier=urn:mrn|patched-${id}`)).toEqual([id]);
        expect(await found(`Patient?identifier=urn:mrn|mrn-${id}`)).toEqual([]);
        expect(await found(`Patient?_id=${id}&gender=male`)).toEqual([id]);
        expect(await found(`Patient?_id=${id}&gender=female`)).toEqual([]);
        const fhirPath = await pathPatch(`Patient/${id}`, fhirPatch({ type: 'add', path: 'Patient', name: 'birthDate', value: { valueDate: '1961-07-04' } }));
        expect(fhirPath.status).toBe(200);
        expect(await found(`Patient?_id=${id}&birthdate=1961-07-04`)).toEqual([id]);
      });

      test('a failing test is 422 naming the operation (http.html: "a failing JSON Patch test ... 422"), and nothing is written', async () => {
        const id = await patient();
        const issue = await refused(() => jsonPatch(`Patient/${id}`, [
          { op: 'replace', path: '/gender', value: 'male' },
          { op: 'test', path: '/name/0/family', value: 'Nobody' },
        ]), 422, 'processing');
        expect(issue.diagnostics).toContain('operation 1 (test /name/0/family)');
        // A test of a target that is not there fails too; conditional patches answer the same.
        await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'test', path: '/birthDate', value: '2000-01-01' }]), 422, 'processing');
        await refused(() => jsonPatch(`Patient?_id=${id}`, [{ op: 'test', path: '/gender', value: 'male' }]), 422, 'processing');
        expect((await read(id)).gender).toBe('female');
      });

      test('missing targets and bad indexes are 400; pointers unescape ~1 and ~0', async () => {
        const id = await patient();
        await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'remove', path: '/birthDate' }]), 400, 'processing');
        await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'add', path: '/name/5', value: { family: 'x' } }]), 400, 'processing');
        await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'replace', path: '/contact/0/name', value: { text: 'x' } }]), 400, 'processing');
        // `/a~1b` is the member `a/b`: not an R4 element, so the result is refused by validation.
        const issue = await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'add', path: '/a~1b~0c', value: 1 }]), 422);
        expect(issue.expression).toEqual(['Patient.a/b~c']);
      });

      test('a malformed patch document is 400; another media type is 415', async () => {
        const id = await patient();
        await refused(() => jsonPatch(`Patient/${id}`, { op: 'add' }), 400, 'structure');
        await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'add', path: '/gender' }]), 400, 'structure');
        await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'frobnicate', path: '/gender' }]), 400, 'structure');
        await refused(() => jsonPatch(`Patient/${id}`, '[{"op":'), 400, 'structure');
        await refused(() => api.call('PATCH', `Patient/${id}`, '{}', { 'Content-Type': 'application/merge-patch+json' }), 415, 'not-supported');
        // A FHIRPath Patch in FHIR XML is read as XML: an element outside the FHIR namespace is a 400; a generic XML type is no patch format.
        await refused(() => api.call('PATCH', `Patient/${id}`, '<Parameters/>', { 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+json' }), 400, 'structure');
        await refused(() => api.call('PATCH', `Patient/${id}`, '<Parameters/>', { 'Content-Type': 'application/xml', Accept: 'application/fhir+json' }), 415);
        const res = await api.call('PATCH', `Patient/${id}`, '{}', { 'Content-Type': 'text/plain' });
        expect(res.headers.get('accept-patch')).toBe('application/json-patch+json, application/fhir+json, application/fhir+xml');
      });

      test('a JSON Patch sent as application/json (or FHIR JSON) is 415 naming application/json-patch+json, with Accept-Patch (RFC 5789 2.2)', async () => {
        const id = await patient();
        const ops = [{ op: 'replace', path: '/gender', value: 'male' }];
        for (const type of ['application/json', 'application/fhir+json', 'application/json; charset=utf-8']) {
          for (const path of [`Patient/${id}`, `Patient?_id=${id}`]) {
            const before = await countVersions(t);
            const res = await api.call('PATCH', path, ops, { 'Content-Type': type });
            expect(res.headers.get('accept-patch')).toBe('application/json-patch+json, application/fhir+json, application/fhir+xml');
            const outcome = await expectOutcome(res, 415, 'not-supported');
            expect(outcome.issue[0].details.text).toContain('JSON Patch (an array of operations), which is sent as Content-Type application/json-patch+json');
            expect(await countVersions(t)).toBe(before);
          }
        }
        expect((await read(id)).gender).toBe('female');
        // The same operations under their own media type apply.
        expect((await jsonPatch(`Patient/${id}`, ops)).status).toBe(200);
      });

      test('a result that is not valid R4 is 422 with the problem located, and nothing is written', async () => {
        const id = await patient();
        const issue = await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'replace', path: '/gender', value: 'sometimes' }]), 422);
        expect(issue.expression).toEqual(['Patient.gender']);
        await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'add', path: '/birthDate', value: 19700101 }]), 422);
      });

      test('changing the id or resourceType is refused', async () => {
        const id = await patient();
        expect((await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'replace', path: '/id', value: 'other' }]), 400, 'processing')).expression).toEqual(['Patient.id']);
        await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'remove', path: '/id' }]), 400);
        expect((await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'replace', path: '/resourceType', value: 'Person' }]), 400)).expression).toEqual(['resourceType']);
        await refused(() => jsonPatch(`Patient/${id}`, [{ op: 'replace', path: '', value: [] }]), 400);
      });

      test('copies that would duplicate more than 16 MiB are 400 too-costly naming the operation; a few copies apply', async () => {
        const nested = { extension: [{ url: 'urn:example:a', extension: [{ url: 'urn:example:b', valueString: 'x'.repeat(40) }] }] };
        // Each copy of the extension into itself doubles it: 22 of them would make 4 million extensions.
        const doubling = (n: number) => Array.from({ length: n }, () => ({ op: 'copy', from: '/extension/0', path: '/extension/0/extension/-' }));
        const id = await patient(nested);
        const issue = await refused(() => jsonPatch(`Patient/${id}`, doubling(22)), 400, 'too-costly');
        expect(issue.diagnostics).toMatch(/^JSON Patch operation 1[0-9] \(copy \/extension\/0\/extension\/-\) cannot be applied: .*more than 16777216 bytes/);
        const res = await jsonPatch(`Patient/${id}`, doubling(3));
        expect(res.status).toBe(200);
        const count = (e: Json): number => 1 + (e.extension ?? []).reduce((n: number, x: Json) => n + count(x), 0);
        expect(count(((await res.json()) as Json).extension[0])).toBe(2 ** 3 * 2);
      });
    });

    describe('FHIRPath Patch', () => {
      test("a where() computes Integers in 32 bits (N1): an overflow gives nothing, a literal past the range is a Decimal", async () => {
        const id = await patient();
        const replace = (path: string, value = false) => pathPatch(`Patient/${id}`, fhirPatch({ type: 'replace', path, value: { valueBoolean: value } }));
        const res = await replace("Patient.active.where((2147483647 + 1).empty() and '2147483648'.toInteger().empty() and 2.power(31).empty())");
        expect(res.status).toBe(200);
        expect(((await res.json()) as Json).active).toBe(false);
        // A whole number past the range is a Decimal (N1: an Integer is 32-bit), as HL7's validator reads it: no error.
        for (const [i, criteria] of ['2147483648 > 2147483647', '2147483648 is Decimal', '(-2147483649 + 1) = -2147483648.0', '(2147483648 * 2) = 4294967296.0'].entries()) {
          const changed = await replace(`Patient.active.where(${criteria})`, i % 2 === 0);
          expect({ criteria, status: changed.status }).toEqual({ criteria, status: 200 });
          expect(((await changed.json()) as Json).active).toBe(i % 2 === 0);
        }
      });

      test("a where() with N1's conversions, aggregate() and the string functions trim(), split() and join()", async () => {
        const id = await patient();
        const replace = (path: string, value: boolean) => pathPatch(`Patient/${id}`, fhirPatch({ type: 'replace', path, value: { valueBoolean: value } }));
        for (const [i, criteria] of [
          // toInteger() of a Decimal is nothing, whole or not (N1 defines no Decimal to Integer conversion).
          '12.0.toInteger().empty() and 12.toInteger() = 12 and true.toInteger() = 1',
          "'1'.convertsToInteger() and '1.5'.convertsToInteger().not() and 'yes'.toBoolean() and 'F'.toBoolean() = false",
          "'2015-02'.convertsToDate() and '2015-02-04T14:34'.toDateTime() = @2015-02-04T14:34 and '14:34'.toTime() = @T14:34",
          '(1 | 2 | 3).aggregate($this + $total, 0) = 6 and (3 | 1 | 2).aggregate(iif($total.empty() or $this < $total, $this, $total)) = 1',
          "' a b '.trim() = 'a b' and 'a,,b'.split(',').count() = 3 and ('a' | 'b').join('-') = 'a-b'",
          // N1's text of a number has no exponent.
          "0.0000001.toString() = '0.0000001' and 1000000000000000000000.0.toString() = '1000000000000000000000.0'",
        ].entries()) {
          const changed = await replace(`Patient.active.where(${criteria})`, i % 2 === 0);
          expect({ criteria, status: changed.status }).toEqual({ criteria, status: 200 });
          expect(((await changed.json()) as Json).active).toBe(i % 2 === 0);
        }
        // `$total` outside aggregate() is no FHIRPath: a 400 naming the parameter.
        const issue = await refused(() => replace('Patient.active.where($total > 0)', true), 400);
        expect(issue.diagnostics).toContain("'$total' outside aggregate()");
        expect(issue.expression).toEqual(['Parameters.parameter[0]']);
      });

      test('replace keeps the element where it stands, a choice element taking another type too', async () => {
        const id = await patient();
        const before = Object.keys(await read(id)).filter((k) => k !== 'meta');
        const res = await pathPatch(`Patient/${id}`, fhirPatch({ type: 'replace', path: 'Patient.active', value: { valueBoolean: false } }));
        expect(res.status).toBe(200);
        expect(Object.keys(await read(id)).filter((k) => k !== 'meta')).toEqual(before);
        await api.put200({ resourceType: 'Observation', id: `o-${id}`, status: 'final', code: { text: 'x' }, valueString: 'high', note: [{ text: 'n' }] });
        const changed = await pathPatch(`Observation/o-${id}`, fhirPatch({ type: 'replace', path: 'Observation.value', value: { valueQuantity: { value: 5, unit: 'mg' } } }));
        expect(changed.status).toBe(200);
        const obs = (await (await api.get(`Observation/o-${id}`)).json()) as Json;
        expect(Object.keys(obs).filter((k) => k !== 'meta')).toEqual(['resourceType', 'id', 'status', 'code', 'valueQuantity', 'note']);
      });

      test("a where() whose quantity's unit doubles with each product ends (an overflow past 4,096 characters), and math functions apply", async () => {
        const id = await patient();
        const replace = (path: string, value: boolean) => pathPatch(`Patient/${id}`, fhirPatch({ type: 'replace', path, value: { valueBoolean: value } }));
        // It exhausted the heap: the unit ({a}).({a}) doubled on every turn of repeat(), each turn one value of the budget.
        let res = await replace("Patient.active.where((1 '{a}').repeat($this * $this).count() = 9)", false);
        expect(res.status).toBe(200);
        expect(((await res.json()) as Json).active).toBe(false);
        res = await replace("Patient.active.where((-2.5).abs().round() = 3 and 16.log(2) = 4 and -(5 'mg') < 0 'mg')", true);
        expect(res.status).toBe(200);
        expect(((await res.json()) as Json).active).toBe(true);
      });

      test('a where() whose string doubles with each concatenation (& or +, in repeat() or aggregate()) is 400 naming the limit, not a 500', async () => {
        const id = await patient();
        const replace = (path: string) => pathPatch(`Patient/${id}`, fhirPatch({ type: 'replace', path, value: { valueBoolean: false } }));
        const items = Array.from({ length: 40 }, (_, i) => i + 1).join(' | ');
        for (const criteria of ["'x'.repeat($this & $this).exists()", "'x'.repeat($this + $this).exists()", `(${items}).aggregate($total & $total, 'xx').exists()`]) {
          const issue = await refused(() => replace(`Patient.active.where(${criteria})`), 400);
          expect(issue.diagnostics).toContain('more than 5000000 values');
        }
        // A few concatenations apply.
        const res = await replace("Patient.active.where(('a' | 'b' | 'c').aggregate($total & $this, '') + 'd' = 'abcd')");
        expect([res.status, ((await res.json()) as Json).active]).toEqual([200, false]);
      });

      test('aggregate() nested 40 deep compiles once per level (each compiled again for its types took 2^n compilations: an outage)', async () => {
        const id = await patient();
        // 5.aggregate(5.aggregate(... 5.aggregate($this + 1) ... + 1) + 1): 6 innermost, each level adding 1. Without an
        // init, each level's aggregator was compiled again for the type it gives.
        let nested = '$this';
        for (let i = 0; i < 40; i++) nested = `5.aggregate(${nested} + 1)`;
        const res = await pathPatch(`Patient/${id}`, fhirPatch({ type: 'replace', path: `Patient.active.where(${nested} = 45)`, value: { valueBoolean: false } }));
        expect([res.status, ((await res.json()) as Json).active]).toEqual([200, false]);
        // Each level's aggregator compiled for three types of `$total` (an Integer init, a Decimal result, untyped): still once per level and type.
        let typed = '$this';
        for (let i = 0; i < 40; i++) typed = `5.aggregate(${typed} + $total / 2, 0)`;
        const again = await pathPatch(`Patient/${id}`, fhirPatch({ type: 'replace', path: `Patient.active.where(${typed} = 5)`, value: { valueBoolean: true } }));
        expect([again.status, ((await again.json()) as Json).active]).toEqual([200, true]);
      });

      test('a where() comparing each of 20,000 items with every other is 400 naming the limit; one reading %resource once applies', async () => {
        const id = await patient({ telecom: Array.from({ length: 20_000 }, (_, i) => ({ system: 'phone', value: `${i}` })) });
        const del = (path: string) => pathPatch(`Patient/${id}`, fhirPatch({ type: 'delete', path }));
        const issue = await refused(() => del("Patient.telecom.where(%resource.telecom.where(value = %context.value).count() = 1 and value = '19999')"), 400);
        expect(issue.diagnostics).toContain('more than 5000000 values');
        // The same collection for every item: read once (it took 60 s). The work is counted by the where()'s budget
        // of 5,000,000 values visited: read for each of the 20,000 items it would be 400,000,000, a 400 like the above.
        const res = await del("Patient.telecom.where(value in %resource.telecom.value and value = '19999')");
        expect(res.status).toBe(200);
        expect(((await res.json()) as Json).telecom.length).toBe(19_999);
      });

      test('add, insert, delete, replace and move, applied in order', async () => {
        const id = await patient();
        const res = await pathPatch(`Patient/${id}`, fhirPatch(
          { type: 'add', path: 'Patient', name: 'birthDate', value: { valueDate: '1974-12-25' } },
          { type: 'add', path: 'Patient', name: 'contact', value: { part: [{ name: 'name', valueHumanName: { text: 'Bénédicte' } }, { name: 'gender', valueCode: 'female' }] } },
          { type: 'insert', path: 'Patient.identifier', index: 1, value: { valueIdentifier: { system: 'urn:other', value: 'o' } } },
          { type: 'delete', path: "Patient.name.where(use = 'maiden')" },
          { type: 'replace', path: 'Patient.name[0].given.first()', value: { valueString: 'Pete' } },
          { type: 'move', path: 'Patient.identifier', source: 2, destination: 0 },
        ));
        const body = (await res.json()) as Json;
        expect(res.status).toBe(200);
        expect(body.birthDate).toBe('1974-12-25');
        expect(body.contact).toEqual([{ name: { text: 'Bénédicte' }, gender: 'female' }]);
        expect(body.identifier.map((i: Json) => i.system)).toEqual(['urn:ssn', 'urn:mrn', 'urn:other']);
        expect(body.name).toEqual([{ family: 'Chalmers', given: ['Pete', 'James'] }]);
        expect(body.meta.versionId).toBe('2');
      });

      test('delete of nothing changes nothing: 200 with the current version, no version written', async () => {
        const id = await patient();
        const res = await pathPatch(`Patient/${id}`, fhirPatch({ type: 'delete', path: 'Patient.birthDate' }));
        expect(res.status).toBe(200);
        expect(res.headers.get('etag')).toBe('W/"1"');
        expect((await t.store.resources.history('t1', { type: 'Patient', id, count: 10 })).map((v) => v.versionId)).toEqual([1]);
      });

      test('an operation that cannot be applied is 400 naming its parameter; nothing is written', async () => {
        const id = await patient();
        const ok = { type: 'replace', path: 'Patient.gender', value: { valueCode: 'male' } };
        const cases: [Json, string][] = [
          [{ type: 'replace', path: 'Patient.birthDate', value: { valueDate: '2000-01-01' } }, 'no content found at Patient.birthDate'],
          [{ type: 'replace', path: 'Patient.name.family', value: { valueString: 'x' } }, 'selects 2 elements'],
          [{ type: 'delete', path: 'Patient.identifier' }, 'selects 2 elements'],
          [{ type: 'add', path: 'Patient', name: 'gender', value: { valueCode: 'male' } }, 'already has a value'],
          [{ type: 'add', path: 'Patient.name', name: 'text', value: { valueString: 'x' } }, 'selects 2 elements'],
          [{ type: 'insert', path: 'Patient.identifier', index: 3, value: { valueIdentifier: { value: 'x' } } }, 'past the end'],
          [{ type: 'move', path: 'Patient.name', source: 0, destination: 2 }, 'destination 2'],
        ];
        for (const [op, text] of cases) {
          const issue = await refused(() => pathPatch(`Patient/${id}`, fhirPatch(ok, op)), 400, 'processing');
          expect(issue.expression).toEqual(['Parameters.parameter[1]']);
          expect(issue.diagnostics).toContain(text);
        }
        expect((await read(id)).meta.versionId).toBe('1');
      });

      test('malformed or unsupported operations are 400 naming the parameter, never 500', async () => {
        const id = await patient();
        for (const op of [
          { type: 'explode', path: 'Patient' },
          { type: 'add', path: 'Patient', value: { valueString: 'x' } },
          { type: 'delete', path: 'Patient.name.where(' },
          { type: 'delete', path: "Patient.name.where(family = 'x').select(given)" },
          { type: 'delete', path: 'Patient.name | Patient.identifier' },
          { type: 'insert', path: 'Patient.name.first()', index: 0, value: { valueHumanName: { text: 'x' } } },
        ]) {
          const issue = await refused(() => pathPatch(`Patient/${id}`, fhirPatch({ type: 'delete', path: 'Patient.active' }, op)), 400);
          expect(issue.expression).toEqual(['Parameters.parameter[1]']);
        }
        await refused(() => pathPatch(`Patient/${id}`, { resourceType: 'Patient' }), 400);
        await refused(() => pathPatch(`Patient/${id}`, { resourceType: 'Parameters', parameter: [{ name: 'patch' }] }), 400, 'structure');
      });

      test('a result that is not valid R4 is 422; patching id is refused', async () => {
        const id = await patient();
        const issue = await refused(() => pathPatch(`Patient/${id}`, fhirPatch({ type: 'replace', path: 'Patient.gender', value: { valueCode: 'sometimes' } })), 422);
        expect(issue.expression).toEqual(['Patient.gender']);
        await refused(() => pathPatch(`Patient/${id}`, fhirPatch({ type: 'replace', path: 'Patient.id', value: { valueId: 'other' } })), 400, 'processing');
        await refused(() => pathPatch(`Patient/${id}`, fhirPatch({ type: 'delete', path: 'Patient.id' })), 400, 'processing');
      });
    });

    describe('the interaction', () => {
      test('If-Match: the current version is patched, another is 412 and nothing is written', async () => {
        const id = await patient();
        const op = [{ op: 'replace', path: '/gender', value: 'male' }];
        await refused(() => jsonPatch(`Patient/${id}`, op, { 'If-Match': 'W/"2"' }), 412, 'conflict');
        await refused(() => jsonPatch(`Patient/${id}`, op, { 'If-Match': 'banana' }), 400);
        expect((await jsonPatch(`Patient/${id}`, op, { 'If-Match': 'W/"1"' })).status).toBe(200);
        await refused(() => jsonPatch(`Patient/${id}`, op, { 'If-Match': 'W/"1"' }), 412);
      });

      test('Prefer: return=minimal and return=OperationOutcome', async () => {
        const id = await patient();
        const op = [{ op: 'replace', path: '/gender', value: 'male' }];
        const minimal = await jsonPatch(`Patient/${id}`, op, { Prefer: 'return=minimal' });
        expect([minimal.status, await minimal.text(), minimal.headers.get('etag')]).toEqual([200, '', 'W/"2"']);
        const outcome = await jsonPatch(`Patient/${id}`, op, { Prefer: 'return=OperationOutcome' });
        expect(((await outcome.json()) as Json).resourceType).toBe('OperationOutcome');
      });

      test('a missing resource is 404, a deleted one 410, like a read', async () => {
        const op = [{ op: 'replace', path: '/gender', value: 'male' }];
        await refused(() => jsonPatch('Patient/nobody', op), 404, 'not-found');
        const id = await patient();
        expect((await api.del(`Patient/${id}`)).status).toBe(200);
        await refused(() => jsonPatch(`Patient/${id}`, op), 410);
        await refused(() => jsonPatch('NotAType/x', op), 404);
        await refused(() => jsonPatch('Patient/x/_history/1', op), 405);
      });

      test('needs read and update permission', async () => {
        const id = await patient();
        const op = [{ op: 'replace', path: '/gender', value: 'male' }];
        for (const scopes of [['system/Patient.read'], ['system/Patient.u']]) {
          const other = fhirClient(t, await t.tokenFor('t1', scopes));
          await refused(() => other.call('PATCH', `Patient/${id}`, op, JSON_PATCH), 403, 'forbidden');
        }
        const both = fhirClient(t, await t.tokenFor('t1', ['system/Patient.ru']));
        expect((await both.call('PATCH', `Patient/${id}`, op, JSON_PATCH)).status).toBe(200);
      });

      test('conditional patch: one match is patched, none is 404, several are 412', async () => {
        const id = await patient();
        const op = [{ op: 'replace', path: '/gender', value: 'other' }];
        const res = await jsonPatch(`Patient?identifier=urn:mrn|mrn-${id}`, op);
        expect(res.status).toBe(200);
        expect(((await res.json()) as Json).id).toBe(id);
        expect((await read(id)).gender).toBe('other');
        await refused(() => jsonPatch(`Patient?identifier=urn:mrn|mrn-${id}`, op, { 'If-Match': 'W/"1"' }), 412, 'conflict');
        await refused(() => jsonPatch('Patient?identifier=urn:mrn|nobody', op), 404);
        await refused(() => jsonPatch('Patient?identifier=urn:mrn|', op), 412);
        await refused(() => jsonPatch('Patient', op), 400);
      });
    });

    describe('in Bundles', () => {
      test('a transaction applies FHIRPath and JSON (Binary) patches with its other entries', async () => {
        const a = await patient();
        const b = await patient();
        const res = await api.post('', bundle('transaction', [
          patchEntry(`Patient/${a}`, fhirPatch({ type: 'replace', path: 'Patient.gender', value: { valueCode: 'male' } })),
          patchEntry(`Patient/${b}`, binary([{ op: 'add', path: '/birthDate', value: '1980-02-03' }]), 'W/"1"'),
          { fullUrl: 'urn:uuid:0b7e1f0c-0000-4000-8000-000000000001', resource: { resourceType: 'Organization', name: 'Acme' }, request: { method: 'POST', url: 'Organization' } },
          patchEntry(`Patient?identifier=urn:ssn|ssn-${a}`, fhirPatch({ type: 'add', path: 'Patient', name: 'managingOrganization', value: { valueReference: { reference: 'urn:uuid:0b7e1f0c-0000-4000-8000-000000000001' } } })),
        ]));
        // Two entries on one resource are refused: the conditional one targets `a` as well.
        await expectOutcome(res, 400);
        const ok = await api.post('', bundle('transaction', [
          patchEntry(`Patient/${a}`, fhirPatch({ type: 'replace', path: 'Patient.gender', value: { valueCode: 'male' } })),
          patchEntry(`Patient/${b}`, binary([{ op: 'add', path: '/birthDate', value: '1980-02-03' }]), 'W/"1"'),
          { fullUrl: 'urn:uuid:0b7e1f0c-0000-4000-8000-000000000001', resource: { resourceType: 'Organization', name: 'Acme' }, request: { method: 'POST', url: 'Organization' } },
        ]));
        const body = (await ok.json()) as Json;
        expect(ok.status).toBe(200);
        expect(body.entry.map((e: Json) => e.response.status)).toEqual(['200 OK', '200 OK', '201 Created']);
        expect(body.entry[0].resource.gender).toBe('male');
        expect(body.entry[1].response.etag).toBe('W/"2"');
        expect((await read(b)).birthDate).toBe('1980-02-03');
      });

      test("a PATCH entry's Binary that holds no JSON Patch: the 400 names the Binary's element under the entry", async () => {
        const a = await patient();
        const cases: [Json, string][] = [
          [{ resourceType: 'Binary', contentType: 'text/plain', data: 'eA==' }, 'Bundle.entry[0].resource.contentType'],
          [{ resourceType: 'Binary', contentType: 'application/json-patch+json' }, 'Bundle.entry[0].resource.data'],
          [{ resourceType: 'Binary', contentType: 'application/json-patch+json', data: Buffer.from([0xff, 0xfe]).toString('base64') }, 'Bundle.entry[0].resource.data'],
          [{ resourceType: 'Patient' }, 'Bundle.entry[0].resource'],
        ];
        for (const [resource, expression] of cases) {
          const outcome = await expectOutcome(await api.post('', bundle('transaction', [patchEntry(`Patient/${a}`, resource)])), 400);
          expect(outcome.issue[0].expression).toEqual([expression]);
        }
      });

      test('a transaction is atomic: one failing patch writes nothing', async () => {
        const a = await patient();
        const b = await patient();
        const before = await countVersions(t);
        const cases: [Json[], number][] = [
          [[patchEntry(`Patient/${a}`, binary([{ op: 'replace', path: '/gender', value: 'male' }])), patchEntry(`Patient/${b}`, binary([{ op: 'test', path: '/gender', value: 'male' }]))], 422],
          [[patchEntry(`Patient/${a}`, binary([{ op: 'replace', path: '/gender', value: 'male' }])), patchEntry(`Patient/${b}`, fhirPatch({ type: 'replace', path: 'Patient.gender', value: { valueCode: 'bogus' } }))], 422],
          [[{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } }, patchEntry(`Patient/${b}`, binary([{ op: 'replace', path: '/gender', value: 'male' }]), 'W/"9"')], 412],
          [[{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } }, patchEntry('Patient/nobody', binary([]))], 404],
          [[patchEntry(`Patient/${a}`, { resourceType: 'Binary', contentType: 'text/plain', data: 'eA==' })], 400],
          [[patchEntry(`Patient/${a}`, { resourceType: 'Patient' })], 400],
          [[{ request: { method: 'PATCH', url: `Patient/${a}` } }], 400],
        ];
        for (const [entries, status] of cases) await expectOutcome(await api.post('', bundle('transaction', entries)), status);
        const outcome = await expectOutcome(await api.post('', bundle('transaction', [
          patchEntry(`Patient/${a}`, binary([])),
          patchEntry(`Patient/${b}`, fhirPatch({ type: 'delete', path: 'Patient.active' }, { type: 'delete', path: 'Patient.name' })),
        ])), 400);
        expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].resource.parameter[1]']);
        expect(await countVersions(t)).toBe(before);
      });

      test('a batch answers each patch on its own', async () => {
        const a = await patient();
        const res = await api.post('', bundle('batch', [
          patchEntry(`Patient/${a}`, binary([{ op: 'replace', path: '/gender', value: 'male' }])),
          patchEntry(`Patient/${a}`, binary([{ op: 'test', path: '/gender', value: 'female' }])),
          patchEntry('Patient/nobody', fhirPatch({ type: 'delete', path: 'Patient.active' })),
          patchEntry(`Patient/${a}`, { resourceType: 'Observation' }),
          patchEntry(`Patient/${a}`, fhirPatch({ type: 'add', path: 'Patient', name: 'birthDate', value: { valueDate: '2001-01-01' } }), 'W/"2"'),
        ]));
        const body = (await res.json()) as Json;
        expect(body.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['200', '422', '404', '400', '200']);
        const now = await read(a);
        expect([now.gender, now.birthDate, now.meta.versionId]).toEqual(['male', '2001-01-01', '3']);
      });
    });
  });
});
