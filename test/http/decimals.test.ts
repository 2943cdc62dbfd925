/**
 * Numbers as written (FHIR R4 datatypes.html, decimal: "the original precision should be preserved";
 * src/fhir/exact-json.ts): `98.60`, `1.0`, `0.010`, `1e-26`, `12345678901234567890.5`, `-0.0` and
 * `0.00000000000000000000000001` come back as they were sent through every write (create, update,
 * conditional create and update, JSON Patch and FHIRPath Patch, lists of numbers among them, transaction
 * with urn:uuid references and patch entries, batch) and every read (read, vread, search, history,
 * `_elements`, `_summary`, `_pretty`, `$everything`, contained matches, bulk export), on both databases.
 * An integer written with a fraction or an exponent is refused, and a precision that changes is a change.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore, finish, kickOff } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

/** The literals every test sends, each as the value of a component's Quantity. */
const LITERALS = ['98.60', '1.0', '0.010', '1e-26', '12345678901234567890.5', '-0.0', '0.00000000000000000000000001'];

/** A number literal in an object given to `json` (`n('98.60')`): written as it is. */
const n = (literal: string) => `#${literal}#`;
/** JSON text of `value`, its n() numbers written as their literals. */
const json = (value: unknown) => JSON.stringify(value).replace(/"#([^"#]+)#"/g, '$1');

/** An Observation holding every literal (with `extra` members). */
const observation = (extra: Json = {}): Json => ({
  resourceType: 'Observation', status: 'final', code: { text: 'decimals' },
  valueQuantity: { value: n('98.60'), unit: 'degF' },
  component: LITERALS.map((l, i) => ({ code: { text: `c${i}` }, valueQuantity: { value: n(l) } })),
  ...extra,
});

/** Asserts that JSON text (compact, or indented by 2 with `pretty`) holds every literal of observation(). */
function expectLiterals(text: string, pretty = false): void {
  const sep = pretty ? ': ' : ':';
  if (!pretty) expect(text).toContain(`"valueQuantity":{"value":98.60,"unit":"degF"}`);
  for (const l of LITERALS) expect(text).toContain(pretty ? `"value"${sep}${l}\n` : `{"value":${l}}`);
}

const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };

await eachStore((kind, fresh) => {
  describe(`numbers as written (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    /** The stored text of the current version of `type/id`. */
    const stored = async (type: string, id: string) => (await t.store.resources.read('t1', type, id))!.content;
    /** Creates observation(extra) and returns its id, asserting 201 and the literals in the answer. */
    const create = async (extra: Json = {}) => {
      const res = await api.post('Observation', json(observation(extra)));
      const text = await res.text();
      expect({ status: res.status, text }).toMatchObject({ status: 201 });
      expectLiterals(text);
      return JSON.parse(text).id as string;
    };

    test('create, then read, vread, search, history, _elements, _summary and _pretty answer the literals', async () => {
      const id = await create();
      expectLiterals(await stored('Observation', id));
      for (const path of [`Observation/${id}`, `Observation/${id}/_history/1`, `Observation?_id=${id}`, `Observation/${id}/_history`, '_history', `Observation?_id=${id}&_summary=data`]) {
        const res = await api.get(path);
        expect({ path, status: res.status }).toEqual({ path, status: 200 });
        expectLiterals(await res.text());
      }
      const elements = await (await api.get(`Observation/${id}?_elements=component`)).text();
      for (const l of LITERALS) expect(elements).toContain(`{"value":${l}}`);
      expect(elements).not.toContain('degF');
      expectLiterals(await (await api.get(`Observation/${id}?_pretty=true`)).text(), true);
      expectLiterals(await (await api.get(`Observation?_id=${id}&_pretty=true`)).text(), true);
    });

    test('Patient/$everything, a search for contained resources and a bulk export, whole and with _elements, answer the literals', async () => {
      const patient = (await api.create({ resourceType: 'Patient', active: true })).id as string;
      const inner = { resourceType: 'Observation', id: 'm', status: 'final', code: { text: 'inner' }, identifier: [{ system: 'urn:decimals', value: 'inner' }], valueQuantity: { value: n('0.010') } };
      const id = await create({ subject: { reference: `Patient/${patient}` }, contained: [inner], hasMember: [{ reference: '#m' }] });
      expectLiterals(await (await api.get(`Patient/${patient}/$everything`)).text());
      const contained = await (await api.get('Observation?identifier=urn:decimals|inner&_contained=true&_containedType=contained')).text();
      expect(contained).toContain(`"fullUrl":"${api.base}/Observation/${id}#m"`);
      expect(contained).toContain('"valueQuantity":{"value":0.010}');
      const token = await t.token();
      for (const query of ['_type=Observation', '_type=Observation&_elements=component']) {
        const manifest = await finish(t, token, await kickOff(t, token, `/$export?${query}`));
        const lines = (await Promise.all(manifest.output.map(async (o) => (await t.request(o.url, { headers: { Authorization: `Bearer ${token}` } })).text()))).join('');
        const line = lines.split('\n').find((l) => l.includes(`"id":"${id}"`))!;
        for (const l of LITERALS) expect({ query, has: line.includes(`{"value":${l}}`) }).toEqual({ query, has: true });
      }
    });

    test('search by value finds 98.60 at the precision the search value gives, and answers it as written', async () => {
      const id = await create({ identifier: [{ system: 'urn:decimals', value: 'search' }] });
      const found = await (await api.get('Observation?identifier=urn:decimals|search&value-quantity=98.60')).text();
      expect(JSON.parse(found).entry.map((e: Json) => e.resource.id)).toEqual([id]);
      expectLiterals(found);
      // 98.61 is outside [98.595, 98.605); 98.6 is [98.55, 98.65), which holds it.
      expect((await api.search('Observation?identifier=urn:decimals|search&value-quantity=98.61')).entry ?? []).toEqual([]);
      expect((await api.search('Observation?identifier=urn:decimals|search&value-quantity=98.6')).entry).toHaveLength(1);
    });

    test('update: the literals are stored; a precision that changes makes a version, the same text does not', async () => {
      const id = 'decimals-put';
      const put = (body: Json) => api.put(`Observation/${id}`, json({ ...body, id }));
      const first = await put(observation());
      expect(first.status).toBe(201);
      expectLiterals(await first.text());
      const again = await put(observation());
      expect([again.status, again.headers.get('etag')]).toEqual([200, 'W/"1"']);
      // 98.6 is not 98.60 (datatypes.html: "0.010 is regarded as different to 0.01").
      const changed = await put({ ...observation(), valueQuantity: { value: n('98.6'), unit: 'degF' } });
      expect([changed.status, changed.headers.get('etag')]).toEqual([200, 'W/"2"']);
      expect(await changed.text()).toContain('"valueQuantity":{"value":98.6,"unit":"degF"}');
      // Keys in another order with the same literals are the same resource: no version.
      const { component, valueQuantity, ...rest } = observation();
      const reordered = await put({ component, ...rest, valueQuantity: { unit: 'degF', value: n('98.6') } });
      expect(reordered.headers.get('etag')).toBe('W/"2"');
      // Keys in another order and 98.6 as 98.60 and 0.010 as 0.01: a text as long as the stored one,
      // equal to it as JSON.parse reads numbers, and a change all the same.
      const swapped = await put({
        ...rest, valueQuantity: { unit: 'degF', value: n('98.60') },
        component: component.map((c: Json) => (c.valueQuantity.value === n('0.010') ? { ...c, valueQuantity: { value: n('0.01') } } : c)),
      });
      expect(swapped.headers.get('etag')).toBe('W/"3"');
      const text = await stored('Observation', id);
      expect(text).toContain('"valueQuantity":{"unit":"degF","value":98.60}');
      expect(text).toContain('{"value":0.01}');
    });

    test('conditional create and conditional update keep the literals', async () => {
      const identifier = [{ system: 'urn:decimals', value: 'conditional' }];
      const created = await api.post('Observation', json(observation({ identifier })), { 'If-None-Exist': 'identifier=urn:decimals|conditional' });
      expect(created.status).toBe(201);
      expectLiterals(await created.text());
      const matched = await api.post('Observation', json(observation({ identifier })), { 'If-None-Exist': 'identifier=urn:decimals|conditional' });
      expect(matched.status).toBe(200);
      expectLiterals(await matched.text());
      const updated = await api.put('Observation?identifier=urn:decimals|conditional', json(observation({ identifier, valueQuantity: { value: n('37.00'), unit: 'Cel' } })));
      const text = await updated.text();
      expect(updated.status).toBe(200);
      expect(text).toContain('"valueQuantity":{"value":37.00,"unit":"Cel"}');
      expectLiterals(await stored('Observation', JSON.parse(text).id).then((s) => s.replace('{"value":37.00,"unit":"Cel"}', '{"value":98.60,"unit":"degF"}')));
    });

    test('JSON Patch: the current version keeps its literals, the patch brings its own, moved and copied numbers keep theirs', async () => {
      const id = await create();
      const patch = (ops: unknown[]) => api.call('PATCH', `Observation/${id}`, json(ops), JSON_PATCH);
      const noted = await patch([{ op: 'add', path: '/note', value: [{ text: 'untouched numbers' }] }]);
      expect(noted.status).toBe(200);
      expectLiterals(await noted.text());
      const replaced = await patch([
        { op: 'replace', path: '/valueQuantity/value', value: n('98.600') },
        { op: 'add', path: '/component/-', value: { code: { text: 'added' }, valueQuantity: { value: n('2.50') } } },
        { op: 'move', from: '/component/0', path: '/component/3' },
        { op: 'copy', from: '/component/1/valueQuantity/value', path: '/component/2/valueQuantity/value' },
      ]);
      const text = await replaced.text();
      expect(replaced.status).toBe(200);
      const values = /"component":\[(.*)\]/.exec(await stored('Observation', id))![1]!.match(/"value":[^}]*/g);
      // Components were 98.60, 1.0, 0.010, 1e-26, ...: 98.60 moved to index 3, then index 1 (0.010) copied to index 2.
      expect(values).toEqual(['"value":1.0', '"value":0.010', '"value":0.010', '"value":98.60', '"value":12345678901234567890.5', '"value":-0.0', '"value":0.00000000000000000000000001', '"value":2.50']);
      // A replace puts the value where the old one stood (RFC 6902 4.3's remove and add, functionally; member order is no part of JSON's value).
      expect(text).toContain('"valueQuantity":{"value":98.600,"unit":"degF"}');
    });

    test('FHIRPath Patch: valueDecimal and Quantity values keep their literals; the rest of the resource too', async () => {
      const id = await create();
      const op = (type: string, path: string, extra: Json[]) => ({ name: 'operation', part: [{ name: 'type', valueCode: type }, { name: 'path', valueString: path }, ...extra] });
      const body = {
        resourceType: 'Parameters',
        parameter: [
          op('replace', 'Observation.valueQuantity.value', [{ name: 'value', valueDecimal: n('0.0100') }]),
          op('insert', 'Observation.component', [{ name: 'value', part: [{ name: 'code', valueCodeableConcept: { text: 'inserted' } }, { name: 'value', valueQuantity: { value: n('3.30') } }] }, { name: 'index', valueInteger: 0 }]),
          op('add', 'Observation', [{ name: 'name', valueString: 'referenceRange' }, { name: 'value', part: [{ name: 'low', valueQuantity: { value: n('36.10') } }] }]),
        ],
      };
      const res = await api.call('PATCH', `Observation/${id}`, json(body));
      const text = await res.text();
      expect({ status: res.status, text }).toMatchObject({ status: 200 });
      expect(text).toContain('"valueQuantity":{"value":0.0100,"unit":"degF"}');
      expect(text).toContain('{"code":{"text":"inserted"},"valueQuantity":{"value":3.30}}');
      expect(text).toContain('"referenceRange":[{"low":{"value":36.10}}]');
      for (const l of LITERALS) expect(await stored('Observation', id)).toContain(`{"value":${l}}`);
    });

    test('lists of numbers keep their literals with their items through JSON Patch and FHIRPath Patch removes, adds, inserts, moves and copies', async () => {
      const roc = { precision: [n('0.90'), n('0.850'), n('0.80')], sensitivity: [n('0.10'), n('0.20'), n('0.30')] };
      const created = await api.post('MolecularSequence', json({ resourceType: 'MolecularSequence', coordinateSystem: 0, quality: [{ type: 'snp', roc }] }));
      const id = JSON.parse(await created.text()).id as string;
      const list = '/quality/0/roc/precision';
      const jsonPatch = await api.call('PATCH', `MolecularSequence/${id}`, json([
        { op: 'remove', path: `${list}/0` },
        { op: 'add', path: `${list}/-`, value: n('0.70') },
        { op: 'move', from: `${list}/0`, path: `${list}/2` },
        { op: 'copy', from: `${list}/1`, path: '/quality/0/roc/sensitivity/0' },
      ]), JSON_PATCH);
      expect(await jsonPatch.text()).toContain('"roc":{"precision":[0.80,0.70,0.850],"sensitivity":[0.70,0.10,0.20,0.30]}');
      const op = (type: string, path: string, extra: Json[]) => ({ name: 'operation', part: [{ name: 'type', valueCode: type }, { name: 'path', valueString: path }, ...extra] });
      const fhirPatch = await api.call('PATCH', `MolecularSequence/${id}`, json({
        resourceType: 'Parameters',
        parameter: [
          op('insert', 'MolecularSequence.quality.roc.precision', [{ name: 'value', valueDecimal: n('0.600') }, { name: 'index', valueInteger: 0 }]),
          op('move', 'MolecularSequence.quality.roc.precision', [{ name: 'source', valueInteger: 0 }, { name: 'destination', valueInteger: 3 }]),
          op('delete', 'MolecularSequence.quality.roc.precision[1]', []),
          op('replace', 'MolecularSequence.quality.roc.sensitivity[0]', [{ name: 'value', valueDecimal: n('0.7000') }]),
          op('add', 'MolecularSequence.quality.roc', [{ name: 'name', valueString: 'fMeasure' }, { name: 'value', valueDecimal: n('1.0') }]),
        ],
      }));
      const text = await fhirPatch.text();
      expect({ status: fhirPatch.status, text }).toMatchObject({ status: 200 });
      expect(text).toContain('"roc":{"precision":[0.80,0.850,0.600],"sensitivity":[0.7000,0.10,0.20,0.30],"fMeasure":[1.0]}');
    });

    test('PATCH entries of a transaction and a batch: a JSON Patch in a Binary and a FHIRPath Patch bring their literals', async () => {
      const target = await create();
      const jsonPatch = [{ op: 'replace', path: '/valueQuantity/value', value: n('1.50') }];
      const binary = { resourceType: 'Binary', contentType: 'application/json-patch+json', data: Buffer.from(json(jsonPatch)).toString('base64') };
      const res = await api.post('', json({ resourceType: 'Bundle', type: 'transaction', entry: [{ resource: binary, request: { method: 'PATCH', url: `Observation/${target}` } }] }));
      const text = await res.text();
      expect({ status: res.status, text }).toMatchObject({ status: 200 });
      // A replace puts the value where the old one stood (RFC 6902 4.3's remove and add, functionally; member order is no part of JSON's value).
      expect(text).toContain('"valueQuantity":{"value":1.50,"unit":"degF"}');
      expectLiterals((await stored('Observation', target)).replace('{"value":1.50,"unit":"degF"}', '{"value":98.60,"unit":"degF"}'));
      const fhirPatch = {
        resourceType: 'Parameters',
        parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Observation.valueQuantity.value' }, { name: 'value', valueDecimal: n('2.500') }] }],
      };
      const batch = await api.post('', json({ resourceType: 'Bundle', type: 'batch', entry: [{ resource: fhirPatch, request: { method: 'PATCH', url: `Observation/${target}` } }] }));
      const batchText = await batch.text();
      expect(batchText).toContain('"valueQuantity":{"value":2.500,"unit":"degF"}');
      for (const l of LITERALS) expect(batchText).toContain(`{"value":${l}}`);
      expect(await stored('Observation', target)).toContain('"valueQuantity":{"value":2.500,"unit":"degF"}');
    });

    test('a transaction rewrites urn:uuid references and keeps the literals, in its answer and in what it stores', async () => {
      const patient = 'urn:uuid:7a0c6f1e-36e2-4f1e-9a51-3f4c2b0d9e10';
      const bundle = {
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          { fullUrl: patient, resource: { resourceType: 'Patient', active: true }, request: { method: 'POST', url: 'Patient' } },
          { fullUrl: 'urn:uuid:9b1d3c55-8f7e-4c1a-b2d4-6e5f7a8b9c0d', resource: observation({ subject: { reference: patient } }), request: { method: 'POST', url: 'Observation' } },
          { resource: { ...observation(), id: 'decimals-tx' }, request: { method: 'PUT', url: 'Observation/decimals-tx' } },
        ],
      };
      const res = await api.post('', json(bundle));
      const text = await res.text();
      expect({ status: res.status, text }).toMatchObject({ status: 200 });
      const entries = JSON.parse(text).entry as Json[];
      expect(entries.map((e) => e.response.status)).toEqual(['201 Created', '201 Created', '201 Created']);
      const [, created, put] = entries.map((e) => e.resource.id as string);
      const createdText = await stored('Observation', created!);
      expectLiterals(createdText);
      expect(JSON.parse(createdText).subject.reference).toBe(`Patient/${entries[0]!.resource.id}`);
      expectLiterals(await stored('Observation', put!));
      // Each entry's resource in the answer as stored.
      expect(text.split('"valueQuantity":{"value":98.60,"unit":"degF"}').length - 1).toBe(2);
      for (const l of LITERALS) expect(text.split(`{"value":${l}}`).length - 1).toBe(2);
    });

    test('a batch keeps the literals of its entries, a conditional create among them', async () => {
      const bundle = {
        resourceType: 'Bundle', type: 'batch',
        entry: [
          { resource: observation({ identifier: [{ system: 'urn:decimals', value: 'batch' }] }), request: { method: 'POST', url: 'Observation', ifNoneExist: 'identifier=urn:decimals|batch' } },
          { resource: { ...observation(), id: 'decimals-batch' }, request: { method: 'PUT', url: 'Observation/decimals-batch' } },
          { request: { method: 'GET', url: 'Observation/decimals-batch' } },
        ],
      };
      const res = await api.post('', json(bundle));
      const text = await res.text();
      expect(res.status).toBe(200);
      const entries = JSON.parse(text).entry as Json[];
      expect(entries.map((e) => e.response.status)).toEqual(['201 Created', '201 Created', '200 OK']);
      expect(text.split('{"value":0.00000000000000000000000001}').length - 1).toBe(3);
      expectLiterals(await stored('Observation', entries[0]!.resource.id));
      expectLiterals(await stored('Observation', 'decimals-batch'));
    });

    test('integers: a fraction, an exponent, minus zero where no sign is allowed, or a value beyond 32 bits is refused; a decimal may be written any way JSON allows', async () => {
      const refused = async (body: string, expression: string, says: string) => {
        const res = await api.post(JSON.parse(body).resourceType, body);
        const outcome = (await res.json()) as Json;
        expect({ status: res.status, expression: outcome.issue?.[0]?.expression, says: outcome.issue?.[0]?.diagnostics?.includes(says) }).toEqual({ status: 422, expression: [expression], says: true });
      };
      const obs = (value: string) => `{"resourceType":"Observation","status":"final","code":{"text":"i"},"valueInteger":${value}}`;
      await refused(obs('1.0'), 'Observation.value.ofType(integer)', 'not 1.0');
      await refused(obs('1e2'), 'Observation.value.ofType(integer)', 'not 1e2');
      await refused(obs('2147483648'), 'Observation.value.ofType(integer)', 'outside the range of integer');
      await refused(obs('12345678901234567890'), 'Observation.value.ofType(integer)', '12345678901234567890 is outside the range');
      // A member of the resource itself (unsignedInt) and an item of a list (integer).
      await refused('{"resourceType":"ImagingStudy","status":"available","subject":{"reference":"Patient/p"},"numberOfSeries":-0}', 'ImagingStudy.numberOfSeries', 'not -0');
      await refused('{"resourceType":"ImagingStudy","status":"available","subject":{"reference":"Patient/p"},"numberOfSeries":3.0}', 'ImagingStudy.numberOfSeries', 'not 3.0');
      await refused('{"resourceType":"MolecularSequence","coordinateSystem":0,"quality":[{"type":"snp","roc":{"numTP":[1,2.0]}}]}', 'MolecularSequence.quality[0].roc.numTP[1]', 'not 2.0');
      // integer's form allows -0 (`-?([0]|([1-9][0-9]*))`); a decimal takes any JSON number.
      for (const [body, kept] of [[obs('1'), '"valueInteger":1}'], [obs('-0'), '"valueInteger":-0}'], [obs('1').replace('"valueInteger":1', '"valueQuantity":{"value":1E+2}'), '"valueQuantity":{"value":1E+2}}']]) {
        const res = await api.post('Observation', body!);
        expect({ body, status: res.status }).toEqual({ body, status: 201 });
        expect(await res.text()).toEndWith(kept!);
      }
      const res = await api.post('Observation/$validate', obs('7.0'));
      const outcome = (await res.json()) as Json;
      expect([res.status, outcome.issue[0].severity, outcome.issue[0].expression]).toEqual([200, 'error', ['Observation.value.ofType(integer)']]);
      const wrapped = await api.post('Observation/$validate', `{"resourceType":"Parameters","parameter":[{"name":"resource","resource":${obs('7.0')}}]}`);
      expect(((await wrapped.json()) as Json).issue[0].severity).toBe('error');
    });

    test('with CINDER_VALIDATION=off an integer written 1.0 is stored as written; $validate and an export, which then validates, find it', async () => {
      const off = await createTestApp({ store: await fresh(), env: { CINDER_VALIDATION: 'off' } });
      try {
        const token = await off.token();
        const offApi = fhirClient(off, token);
        const res = await offApi.post('Observation', '{"resourceType":"Observation","status":"final","code":{"text":"i"},"valueInteger":1.0}');
        expect(res.status).toBe(201);
        const id = JSON.parse(await res.text()).id as string;
        expect(await (await offApi.get(`Observation/${id}`)).text()).toEndWith('"valueInteger":1.0}');
        const outcome = (await (await offApi.get(`Observation/${id}/$validate`)).json()) as Json;
        expect([outcome.issue[0].severity, outcome.issue[0].diagnostics]).toEqual(['error', 'must be a JSON integer written as digits alone (no fraction, exponent or minus zero), not 1.0']);
        const manifest = await finish(off, token, await kickOff(off, token, '/$export?_type=Observation'));
        expect(manifest.output).toEqual([]);
        const errors = await Promise.all(manifest.error.map(async (e) => (await off.request(e.url, { headers: { Authorization: `Bearer ${token}` } })).text()));
        expect(errors.join('')).toContain(`Observation/${id} (version 1) is not valid FHIR R4`);
      } finally {
        await off.close();
      }
    });
  });
});
