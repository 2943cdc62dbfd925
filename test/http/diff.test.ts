/**
 * `$diff` (HAPI FHIR's operation) on both databases: instance level (the previous version, fromVersion,
 * includeMeta, a first version), server level (from/to, versioned references), its errors (unknown,
 * deleted, bad references), access as a vread's, and the property that makes it useful: the diff
 * applied by Cinder's own PATCH to the from-version gives the to-version, over mutations of R4 examples.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { MUTATIONS, mutate, prng } from '../helpers/mutations.ts';
import { MAX_DIFF_OPERATIONS } from '../../src/fhir/diff/diff.ts';
import { MAX_ALIGN_CELLS } from '../../src/fhir/diff/list-align.ts';

const EXAMPLES = join(import.meta.dir, '../../node_modules/hl7.fhir.r4.examples');

const ops = (body: Json) => (body.parameter ?? []).map((p: Json) => Object.fromEntries(p.part.map((x: Json) => [x.name, Object.entries(x).find(([k]) => k !== 'name')![1]])));

await eachStore((kind, fresh) => {
  describe(`$diff (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    const diff = async (path: string, headers?: Record<string, string>) => {
      const res = await api.get(path, headers);
      const body = (await res.json()) as Json;
      expect({ status: res.status, body }).toMatchObject({ status: 200, body: { resourceType: 'Parameters' } });
      return body;
    };

    test('instance level: the current version against the previous one, as replace / insert / add / delete with previousValue', async () => {
      await api.put200({ resourceType: 'Patient', id: 'd1', active: true, gender: 'male', name: [{ family: 'Smith', given: ['Ann'] }], birthDate: '1970-01-01' });
      await api.put200({ resourceType: 'Patient', id: 'd1', active: true, gender: 'female', name: [{ family: 'Smith', given: ['Ann', 'Bea'] }, { family: 'Jones' }], deceasedBoolean: false });
      expect(ops(await diff('Patient/d1/$diff'))).toEqual([
        { type: 'replace', path: 'Patient.gender', previousValue: 'male', value: 'female' },
        { type: 'insert', path: 'Patient.name[0].given', index: 1, value: 'Bea' },
        { type: 'insert', path: 'Patient.name', index: 1, value: { family: 'Jones' } },
        { type: 'add', path: 'Patient', name: 'deceased', value: false },
        { type: 'delete', path: 'Patient.birthDate', previousValue: '1970-01-01' },
      ]);
      // The value parts are typed by the elements: valueCode, valueString, valueHumanName, valueBoolean, valueDate.
      const body = await diff('Patient/d1/$diff');
      expect(body.parameter[0].part.find((p: Json) => p.name === 'value')).toEqual({ name: 'value', valueCode: 'female' });
      expect(body.parameter[2].part.find((p: Json) => p.name === 'value')).toEqual({ name: 'value', valueHumanName: { family: 'Jones' } });
      expect(body.parameter[3].part.find((p: Json) => p.name === 'value')).toEqual({ name: 'value', valueBoolean: false });
      // By POST with a Parameters too.
      const posted = await api.post('Patient/d1/$diff', { resourceType: 'Parameters', parameter: [{ name: 'fromVersion', valueInteger: 1 }] });
      expect(await posted.json()).toEqual(body);
    });

    test('fromVersion picks the base; includeMeta compares meta; a first version is compared with an empty resource', async () => {
      await api.put200({ resourceType: 'Patient', id: 'd2', gender: 'male' });
      await api.put200({ resourceType: 'Patient', id: 'd2', gender: 'female' });
      await api.put200({ resourceType: 'Patient', id: 'd2', gender: 'female', active: false });
      expect(ops(await diff('Patient/d2/$diff'))).toEqual([{ type: 'add', path: 'Patient', name: 'active', value: false }]);
      expect(ops(await diff('Patient/d2/$diff?fromVersion=1'))).toEqual([
        { type: 'replace', path: 'Patient.gender', previousValue: 'male', value: 'female' },
        { type: 'add', path: 'Patient', name: 'active', value: false },
      ]);
      expect(ops(await diff('Patient/d2/$diff?fromVersion=3'))).toEqual([]);
      const withMeta = ops(await diff('Patient/d2/$diff?includeMeta=true'));
      expect(withMeta).toContainEqual({ type: 'replace', path: 'Patient.meta.versionId', previousValue: '2', value: '3' });
      await api.put200({ resourceType: 'Patient', id: 'd3', gender: 'male' });
      expect(ops(await diff('Patient/d3/$diff'))).toEqual([{ type: 'add', path: 'Patient', name: 'gender', value: 'male' }]);
    });

    test('server level: from and to, current or versioned, of one type', async () => {
      await api.put200({ resourceType: 'Patient', id: 's1', gender: 'male' });
      await api.put200({ resourceType: 'Patient', id: 's2', gender: 'female' });
      await api.put200({ resourceType: 'Patient', id: 's2', gender: 'other' });
      expect(ops(await diff('$diff?from=Patient/s1&to=Patient/s2'))).toEqual([
        { type: 'replace', path: 'Patient.id', previousValue: 's1', value: 's2' },
        { type: 'replace', path: 'Patient.gender', previousValue: 'male', value: 'other' },
      ]);
      expect(ops(await diff('$diff?from=Patient/s2/_history/1&to=Patient/s2/_history/2'))).toEqual([
        { type: 'replace', path: 'Patient.gender', previousValue: 'female', value: 'other' },
      ]);
      const posted = await api.post('$diff', { resourceType: 'Parameters', parameter: [{ name: 'from', valueString: 'Patient/s2/_history/1' }, { name: 'to', valueString: 'Patient/s2' }] });
      expect(ops((await posted.json()) as Json)).toEqual([{ type: 'replace', path: 'Patient.gender', previousValue: 'female', value: 'other' }]);
    });

    test('a difference of more than MAX_DIFF_OPERATIONS operations is a 422 too-costly, not an answer many times the resources\' size', async () => {
      const given = (prefix: string) => Array.from({ length: MAX_DIFF_OPERATIONS + 1 }, (_, i) => `${prefix}${i}`);
      // In a contact's name, which no search parameter indexes.
      await api.put200({ resourceType: 'Patient', id: 'big', contact: [{ name: { given: given('a') } }] });
      await api.put200({ resourceType: 'Patient', id: 'big', contact: [{ name: { given: given('b') } }] });
      const outcome = await expectOutcome(await api.get('Patient/big/$diff'), 422);
      expect((outcome.issue as Json[])[0]!.code).toBe('too-costly');
      // One fewer change is answered.
      await api.put200({ resourceType: 'Patient', id: 'big', contact: [{ name: { given: [...given('b').slice(0, -1), `a${MAX_DIFF_OPERATIONS}`] } }] });
      expect((await diff('Patient/big/$diff?fromVersion=1')).parameter).toHaveLength(MAX_DIFF_OPERATIONS);
    });

    /** PUTs `from` then `to` as versions of one resource, diffs them, PATCHes `from` back with the diff, and expects `to`; returns the diff. */
    async function roundTrip(from: Json, to: Json): Promise<Json> {
      await api.put200(from);
      await api.put200(to);
      const d = await diff(`${to.resourceType}/${to.id}/$diff`);
      await api.put200(from);
      const patched = await api.call('PATCH', `${to.resourceType}/${to.id}`, d);
      const body = (await patched.json()) as Json;
      delete body.meta;
      expect({ status: patched.status, body }).toEqual({ status: 200, body: to });
      return d;
    }

    test('lists are aligned: one item inserted at the head of 20 is one insert; moves, inserts and deletes apply in sequence', async () => {
      const ids = (values: string[]) => values.map((value) => ({ system: 'urn:cinder:diff', value }));
      const twenty = Array.from({ length: 20 }, (_, i) => `v${i}`);
      const head = await roundTrip({ resourceType: 'Patient', id: 'l1', identifier: ids(twenty) }, { resourceType: 'Patient', id: 'l1', identifier: ids(['new', ...twenty]) });
      expect(ops(head)).toEqual([{ type: 'insert', path: 'Patient.identifier', index: 0, value: { system: 'urn:cinder:diff', value: 'new' } }]);
      // Deleted from the middle: one delete; an item taken to the end: one move.
      expect(ops(await roundTrip({ resourceType: 'Patient', id: 'l2', identifier: ids(twenty) }, { resourceType: 'Patient', id: 'l2', identifier: ids(twenty.filter((v) => v !== 'v7')) })))
        .toEqual([{ type: 'delete', path: 'Patient.identifier[7]', previousValue: { system: 'urn:cinder:diff', value: 'v7' } }]);
      expect(ops(await roundTrip({ resourceType: 'Patient', id: 'l3', identifier: ids(twenty) }, { resourceType: 'Patient', id: 'l3', identifier: ids([...twenty.slice(1), 'v0']) })))
        .toEqual([{ type: 'move', path: 'Patient.identifier', source: 0, destination: 19 }]);
      // A mixture in a primitive list with its extensions: each index counted as the list stands when the operation applies.
      const ext = (code: string) => ({ extension: [{ url: 'http://example.org/diff', valueCode: code }] });
      const from = { resourceType: 'Patient', id: 'l4', name: [{ family: 'F', given: ['a', 'b', 'c', 'd', 'e', 'f'], _given: [null, ext('b'), null, null, ext('e'), null] }] };
      const to = { resourceType: 'Patient', id: 'l4', name: [{ family: 'F', given: ['e', 'a', 'x', 'c', 'f', 'b', 'y'], _given: [ext('e'), null, null, null, null, ext('b'), ext('y')] }] };
      const mixed = ops(await roundTrip(from, to));
      expect(mixed.map((o: Json) => o.type).sort()).toEqual(['delete', 'insert', 'insert', 'move', 'move']);
      // The changed item of a pair is compared in place, at its index.
      const pairs = await roundTrip(
        { resourceType: 'Patient', id: 'l5', name: [{ family: 'A' }, { family: 'B', given: ['b'] }, { family: 'C' }, { family: 'D' }] },
        { resourceType: 'Patient', id: 'l5', name: [{ family: 'D' }, { family: 'A' }, { family: 'B', given: ['b', 'bb'] }, { family: 'C' }] },
      );
      expect(ops(pairs)).toEqual([
        { type: 'insert', path: 'Patient.name[1].given', index: 1, value: 'bb' },
        { type: 'move', path: 'Patient.name', source: 3, destination: 0 },
      ]);
    });

    test(`long lists that differ throughout are compared by position past ${MAX_ALIGN_CELLS} cells, and aligned below`, async () => {
      const given = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
      // 2,100 x 2,100 cells: by position, a replace of each item, in linear time.
      const n = Math.ceil(Math.sqrt(MAX_ALIGN_CELLS)) + 100;
      const positional = await roundTrip(
        { resourceType: 'Patient', id: 'h1', contact: [{ name: { given: given('a', n) } }] },
        { resourceType: 'Patient', id: 'h1', contact: [{ name: { given: [...given('b', n - 1), 'a0'] } }] },
      );
      expect(new Set(ops(positional).map((o: Json) => o.type))).toEqual(new Set(['replace']));
      expect(positional.parameter).toHaveLength(n);
      // Reversed, 1,000 items: aligned, 999 moves and nothing else.
      const reversed = await roundTrip(
        { resourceType: 'Patient', id: 'h2', contact: [{ name: { given: given('a', 1000) } }] },
        { resourceType: 'Patient', id: 'h2', contact: [{ name: { given: given('a', 1000).reverse() } }] },
      );
      expect(ops(reversed).every((o: Json) => o.type === 'move')).toBe(true);
      expect(reversed.parameter).toHaveLength(999);
    });

    test('a change under 150 nested items is one replace at its path, as one under 1 is (their cost: test/unit/diff/diff.test.ts)', async () => {
      // A QuestionnaireResponse whose item holds an item ... `depth` deep, the last holding 10,000 answers, of which the last changes.
      const nested = (id: string, depth: number, last: string) => {
        let item: Json = { linkId: 'leaf', answer: Array.from({ length: 10_000 }, (_, i) => ({ valueString: i === 9_999 ? last : `answer ${i}` })) };
        for (let d = depth - 1; d > 0; d--) item = { linkId: `l${d}`, item: [item] };
        return { resourceType: 'QuestionnaireResponse', id, status: 'completed', item: [item] };
      };
      for (const [id, depth] of [['n1', 1], ['n150', 150]] as const) {
        await api.put200(nested(id, depth, 'before'));
        await api.put200(nested(id, depth, 'after'));
        const body = await diff(`QuestionnaireResponse/${id}/$diff`);
        expect(ops(body)).toEqual([{ type: 'replace', path: `QuestionnaireResponse${'.item[0]'.repeat(depth)}.answer[9999].value`, previousValue: 'before', value: 'after' }]);
      }
    });

    test('errors: unknown 404, deleted 410, bad references and parameters 400 naming them', async () => {
      await expectOutcome(await api.get('Patient/nobody/$diff'), 404);
      await api.put200({ resourceType: 'Patient', id: 'e1', gender: 'male' });
      await api.del('Patient/e1');
      await expectOutcome(await api.get('Patient/e1/$diff'), 410);
      await api.put200({ resourceType: 'Patient', id: 'e1', gender: 'female' });
      // The version before is the deletion: compared with an empty resource; asked for by fromVersion, a 410.
      expect(ops(await diff('Patient/e1/$diff'))).toEqual([{ type: 'add', path: 'Patient', name: 'gender', value: 'female' }]);
      await expectOutcome(await api.get('Patient/e1/$diff?fromVersion=2'), 410);
      await expectOutcome(await api.get('Patient/e1/$diff?fromVersion=9'), 404);
      await expectOutcome(await api.get('$diff?from=Patient/e1&to=Patient/nobody'), 404);
      await expectOutcome(await api.get('$diff?from=Patient/e1/_history/2&to=Patient/e1'), 410);
      const named = async (path: string, expression: string) => expect((await expectOutcome(await api.get(path), 400)).issue[0].expression).toEqual([expression]);
      await named('Patient/e1/$diff?fromVersion=abc', 'fromVersion');
      await named('Patient/e1/$diff?includeMeta=yes', 'includeMeta');
      await named('$diff?to=Patient/e1', 'from');
      await named('$diff?from=Patient/e1', 'to');
      await named('$diff?from=Patient&to=Patient/e1', 'from');
      await named('$diff?from=Patient/e1&to=Observation/o1', 'to');
      expect((await expectOutcome(await api.get('Patient/e1/$diff?bogus=1', { Prefer: 'handling=strict' }), 400)).issue[0].expression).toEqual(['bogus']);
      await expectOutcome(await api.get('Bogus/e1/$diff'), 404);
    });

    test('in XML: a diff carrying a primitive\'s extensions, sent back as an XML FHIRPath Patch, applies as the JSON one does', async () => {
      const EXT = 'http://hl7.org/fhir/StructureDefinition/patient-birthTime';
      const v1 = { resourceType: 'Patient', id: 'x1', birthDate: '1974-12-25', name: [{ given: ['Ann'] }] };
      const v2 = { ...v1, _birthDate: { extension: [{ url: EXT, valueDateTime: '1974-12-25T14:35:45-05:00' }] }, name: [{ given: ['Ann', 'Bea'], _given: [null, { id: 'g2' }] }] };
      await api.put200(v1);
      await api.put200(v2);
      const json = await diff('Patient/x1/$diff');
      expect(json.parameter[0].part.find((p: Json) => p.name === 'value')).toEqual({ name: 'value', valueDate: '1974-12-25', _valueDate: v2._birthDate });
      const res = await api.get('Patient/x1/$diff', { Accept: 'application/fhir+xml' });
      expect(res.headers.get('content-type')).toStartWith('application/fhir+xml');
      const xml = await res.text();
      expect(xml).toContain(`<valueDate value="1974-12-25"><extension url="${EXT}">`);
      await api.put200(v1);
      const patched = await api.call('PATCH', 'Patient/x1', xml, { 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+json' });
      const body = (await patched.json()) as Json;
      expect(patched.status).toBe(200);
      delete body.meta;
      expect(body).toEqual(v2);
    });

    test('decimals in the diff as they were stored (value, previousValue, inserted items), and applied by PATCH give the to-version exactly', async () => {
      // Written as text: a JavaScript literal would already have lost the digits.
      const obs = (value: string, low: string) => `{"resourceType":"Observation","id":"dec","status":"final","code":{"text":"x"},"valueQuantity":{"value":${value}},"referenceRange":[${low}]}`;
      const from = obs('1.50', '{"low":{"value":12345678901234567890.50}}');
      const to = obs('2.50', '{"low":{"value":0.10}},{"high":{"value":1.0}}');
      expect((await api.put('Observation/dec', from)).status).toBe(201);
      expect((await api.put('Observation/dec', to)).status).toBe(200);
      const res = await api.get('Observation/dec/$diff');
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain('{"name":"previousValue","valueDecimal":1.50},{"name":"value","valueDecimal":2.50}');
      expect(text).toContain('{"name":"previousValue","valueDecimal":12345678901234567890.50},{"name":"value","valueDecimal":0.10}');
      expect(text).toContain('{"name":"value","valueDecimal":1.0}');
      // A change of precision alone is a change, and says so.
      expect((await api.put('Observation/dec', obs('2.5', '{"low":{"value":0.10}},{"high":{"value":1.0}}'))).status).toBe(200);
      expect(await (await api.get('Observation/dec/$diff')).text()).toContain('{"name":"previousValue","valueDecimal":2.50},{"name":"value","valueDecimal":2.5}');
      expect((await api.put('Observation/dec', from)).status).toBe(200);
      const patched = await api.call('PATCH', 'Observation/dec', text, { 'Content-Type': 'application/fhir+json' });
      expect(patched.status).toBe(200);
      expect((await patched.text()).replace(/"meta":\{[^}]*\},/, '')).toBe(to);
    });

    test('a primitive with extensions and no value on the resource (_birthDate, _active alone): added, removed and changed, both ways, applied by PATCH', async () => {
      const absent = (code: string) => ({ extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/data-absent-reason', valueCode: code }] });
      const versions: Json[] = [
        { gender: 'male' },
        { gender: 'male', _birthDate: absent('unknown'), _active: absent('unknown') },
        { gender: 'male', _birthDate: absent('asked-declined'), active: true, _active: absent('unknown') },
        { gender: 'male', birthDate: '1970-01-01', _active: absent('masked') },
        { gender: 'male', _birthDate: absent('unknown'), active: false },
      ];
      let n = 0;
      for (const [i, from] of versions.entries()) {
        for (const to of versions.slice(i + 1)) {
          for (const [a, b] of [[from, to], [to, from]]) {
            const id = `bare${++n}`;
            const [va, vb] = [{ resourceType: 'Patient', id, ...a }, { resourceType: 'Patient', id, ...b }];
            await api.put200(va);
            await api.put200(vb);
            const d = await diff(`Patient/${id}/$diff`);
            await api.put200(va);
            const patched = await api.call('PATCH', `Patient/${id}`, d);
            const body = (await patched.json()) as Json;
            delete body.meta;
            expect({ status: patched.status, body, d }).toEqual({ status: 200, body: vb, d });
          }
        }
      }
      // The operations: an add of the _value[x] alone, a replace by it, an add of the value that keeps the extensions.
      await api.put200({ resourceType: 'Patient', id: 'bare', gender: 'male' });
      await api.put200({ resourceType: 'Patient', id: 'bare', gender: 'male', _birthDate: absent('unknown') });
      await api.put200({ resourceType: 'Patient', id: 'bare', gender: 'male', birthDate: '1970-01-01', _birthDate: absent('unknown') });
      await api.put200({ resourceType: 'Patient', id: 'bare', gender: 'male', _birthDate: absent('masked') });
      expect((await diff('Patient/bare/$diff?fromVersion=1')).parameter).toEqual([{ name: 'operation', part: [
        { name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'birthDate' }, { name: 'value', _valueDate: absent('masked') },
      ] }]);
      expect(ops(await diff('Patient/bare/$diff?fromVersion=2'))).toEqual([{ type: 'replace', path: 'Patient.birthDate', value: absent('masked') }]);
      expect(ops(await diff('$diff?from=Patient/bare/_history/2&to=Patient/bare/_history/3'))).toEqual([{ type: 'add', path: 'Patient', name: 'birthDate', value: '1970-01-01' }]);
    });

    test('items of lists of primitives with extensions alone: item-level operations, in an element and on the resource, applied by PATCH', async () => {
      const ext = (v: string) => ({ extension: [{ url: 'http://example.org/x', valueString: v }] });
      const cs = (format: Json) => ({ resourceType: 'CapabilityStatement', status: 'draft', date: '2024-01-01', kind: 'instance', fhirVersion: '4.0.1', implementation: { description: 'x' }, rest: [{ mode: 'server' }], ...format });
      const pairs: Array<[Json, Json, Json[]]> = [
        // An item loses its value and gets extensions: a replace of that item, not of Patient.name[0].
        [{ resourceType: 'Patient', name: [{ family: 'F', given: ['Ann', 'Bea'] }] }, { resourceType: 'Patient', name: [{ family: 'F', given: ['Ann', null], _given: [null, ext('b')] }] },
          [{ type: 'replace', path: 'Patient.name[0].given[1]', previousValue: 'Bea', value: ext('b') }]],
        // One moved, one inserted, one deleted: as any items.
        [{ resourceType: 'Patient', name: [{ given: ['Ann', null, 'Cy'], _given: [null, ext('b'), null] }] }, { resourceType: 'Patient', name: [{ given: [null, 'Ann', 'Cy'], _given: [ext('b'), null, null] }] },
          [{ type: 'move', path: 'Patient.name[0].given', source: 0, destination: 1 }]],
        [{ resourceType: 'Patient', name: [{ given: ['Ann', 'Cy'] }] }, { resourceType: 'Patient', name: [{ given: ['Ann', null, 'Cy'], _given: [null, ext('b'), null] }] },
          [{ type: 'insert', path: 'Patient.name[0].given', index: 1, value: ext('b') }]],
        // On the resource itself, where it was a 422.
        [cs({ format: ['json', 'xml'] }), cs({ format: ['json', null, 'xml'], _format: [null, ext('f'), null] }),
          [{ type: 'insert', path: 'CapabilityStatement.format', index: 1, value: ext('f') }]],
        [cs({ format: ['json', null], _format: [null, ext('f')] }), cs({ format: ['json', null], _format: [null, ext('g')] }),
          [{ type: 'replace', path: 'CapabilityStatement.format[1]', value: ext('g') }]],
        [cs({ format: ['json', null], _format: [null, ext('f')] }), cs({ format: ['json'] }),
          [{ type: 'delete', path: 'CapabilityStatement.format[1]' }]],
      ];
      let n = 0;
      for (const [a, b, expected] of pairs) {
        for (const [from, to, want] of [[a, b, expected], [b, a, undefined]] as const) {
          const id = `li${++n}`;
          const [va, vb] = [{ ...from, id }, { ...to, id }];
          const path = `${from.resourceType}/${id}`;
          await api.put200(va);
          await api.put200(vb);
          const d = await diff(`${path}/$diff`);
          if (want !== undefined) expect(ops(d)).toEqual(want);
          await api.put200(va);
          const patched = await api.call('PATCH', path, d);
          const body = (await patched.json()) as Json;
          delete body.meta;
          expect({ status: patched.status, body, d }).toEqual({ status: 200, body: vb, d });
        }
      }
    });

    test('access as a vread: the type read scope, the patient compartment, both resources', async () => {
      await api.put200({ resourceType: 'Patient', id: 'pa', gender: 'male' });
      await api.put200({ resourceType: 'Patient', id: 'pa', gender: 'female' });
      await api.put200({ resourceType: 'Patient', id: 'pb', gender: 'male' });
      await expectOutcome(await fhirClient(t, await craftToken(t, 'system/Observation.rs')).get('Patient/pa/$diff'), 403);
      const own = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'pa' }));
      expect((await own.get('Patient/pa/$diff')).status).toBe(200);
      const other = await own.get('Patient/pb/$diff');
      expect([403, 404]).toContain(other.status);
      const cross = await own.get('$diff?from=Patient/pa&to=Patient/pb');
      expect([403, 404]).toContain(cross.status);
      expect((await own.get('$diff?from=Patient/pa/_history/1&to=Patient/pa')).status).toBe(200);
    });

    test('the diff applied by PATCH to the from-version gives the to-version, over mutations of R4 examples', async () => {
      const files = readdirSync(EXAMPLES).filter((f) => /^(Patient|Observation|Condition|Practitioner|Organization|Encounter|AllergyIntolerance|MedicationRequest|Questionnaire|CarePlan|Immunization|Procedure|DiagnosticReport)-.*\.json$/.test(f)).sort();
      const random = prng(kind.length);
      const failures: string[] = [];
      let checked = 0;
      for (const [n, file] of files.entries()) {
        const original = JSON.parse(readFileSync(join(EXAMPLES, file), 'utf8')) as Json;
        delete original.meta;
        const id = `x${n}`;
        const from: Json = { ...original, id };
        const to = structuredClone(from);
        const plan = [MUTATIONS[n % MUTATIONS.length]!, MUTATIONS[Math.floor(random() * MUTATIONS.length)]!];
        if (!plan.map((k) => mutate(to, k, random)).some(Boolean) || Bun.deepEquals(to, from)) continue;
        const path = `${from.resourceType}/${id}`;
        if ((await api.put(path, from)).status >= 300 || (await api.put(path, to)).status >= 300) continue;
        const d = await diff(`${path}/$diff`);
        await api.put200(from);
        const patched = await api.call('PATCH', path, d);
        const body = (await patched.json()) as Json;
        delete body.meta;
        checked++;
        if (patched.status !== 200 || !Bun.deepEquals(body, to)) failures.push(`${file} ${plan.join('+')}: ${patched.status} ${JSON.stringify(d).slice(0, 300)}`);
      }
      expect(failures).toEqual([]);
      expect(checked).toBeGreaterThan(100);
      // Some 1,000 requests: seconds alone, half a minute on two cores shared with other test files.
    }, 120_000);
  });
});
