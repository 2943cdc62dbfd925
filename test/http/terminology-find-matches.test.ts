/**
 * CodeSystem/$find-matches (FHIR R4 CodeSystem-find-matches) on both databases, type and instance level:
 * complete matches on the concepts' properties (code, Coding, string, integer values; a property without
 * a value; `parent` from the hierarchy), the best partial matches with their unmatched properties when
 * none is complete, `exact=false` answering the same, each input error, and access.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const CS = 'http://example.org/cs/lab-tests';
const METHOD = 'http://example.org/cs/method';

const codeSystem = {
  resourceType: 'CodeSystem', id: 'lab-tests', url: CS, version: '1', name: 'LabTests', status: 'active', content: 'complete',
  property: [
    { code: 'specimen', type: 'code' }, { code: 'method', type: 'Coding' }, { code: 'scale', type: 'string' }, { code: 'rank', type: 'integer' },
  ],
  concept: [
    {
      code: 'glu-bld', display: 'Glucose, blood', property: [
        { code: 'specimen', valueCode: 'blood' }, { code: 'method', valueCoding: { system: METHOD, code: 'enzymatic' } }, { code: 'scale', valueString: 'Qn' }, { code: 'rank', valueInteger: 1 },
      ],
      concept: [{ code: 'glu-bld-fast', display: 'Glucose, blood, fasting', property: [{ code: 'specimen', valueCode: 'blood' }, { code: 'scale', valueString: 'Qn' }] }],
    },
    {
      code: 'glu-ser', display: 'Glucose, serum', property: [
        { code: 'specimen', valueCode: 'serum' }, { code: 'method', valueCoding: { system: METHOD, code: 'enzymatic' } }, { code: 'scale', valueString: 'Qn' }, { code: 'rank', valueInteger: 2 },
      ],
    },
    { code: 'glu-ur', display: 'Glucose, urine', property: [{ code: 'specimen', valueCode: 'urine' }, { code: 'method', valueCoding: { system: METHOD, code: 'strip' } }, { code: 'scale', valueString: 'Ord' }] },
  ],
};

const prop = (code: string, value?: Json) => ({ name: 'property', part: [{ name: 'code', valueCode: code }, ...(value ? [{ name: 'value', ...value }] : [])] });
/** The matches of an answer: each code, with its unmatched properties' codes. */
const matches = (p: Json) => ((p.parameter ?? []) as Json[]).map((m) => {
  const code = m.part.find((x: Json) => x.name === 'code').valueCoding.code;
  const unmatched = (m.part as Json[]).filter((x) => x.name === 'unmatched').map((u) => u.part[0].valueCode);
  return unmatched.length ? `${code} (unmatched: ${unmatched.join(',')})` : code;
});

await eachStore((kind, fresh) => {
  describe(`CodeSystem/$find-matches (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const find = async (parameter: Json[], path = 'CodeSystem/$find-matches', client = api) => {
      const res = await client.post(path, { resourceType: 'Parameters', parameter });
      const body = (await res.json()) as Json;
      expect({ status: res.status, body }).toMatchObject({ status: 200 });
      return body;
    };
    const typeLevel = (...rest: Json[]) => [{ name: 'system', valueUri: CS }, { name: 'exact', valueBoolean: true }, ...rest];
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200(codeSystem);
    });
    afterAll(() => t.close());

    test('complete matches: every given property held, in the code system\'s order', async () => {
      const both = await find(typeLevel(prop('specimen', { valueCode: 'blood' }), prop('scale', { valueString: 'Qn' })));
      expect(matches(both)).toEqual(['glu-bld', 'glu-bld-fast']);
      expect(both.parameter[0].part[0].valueCoding).toEqual({ system: CS, version: '1', code: 'glu-bld', display: 'Glucose, blood' });
      expect(matches(await find(typeLevel(prop('method', { valueCoding: { system: METHOD, code: 'enzymatic' } }))))).toEqual(['glu-bld', 'glu-ser']);
      expect(matches(await find(typeLevel(prop('rank', { valueInteger: 2 }))))).toEqual(['glu-ser']);
      // A property without a value: the concepts that have it; `parent` from the hierarchy.
      expect(matches(await find(typeLevel(prop('rank'))))).toEqual(['glu-bld', 'glu-ser']);
      expect(matches(await find(typeLevel(prop('parent', { valueCode: 'glu-bld' }))))).toEqual(['glu-bld-fast']);
    });

    test('no complete match: the concepts holding the most properties, with those they do not hold', async () => {
      const p = await find(typeLevel(prop('specimen', { valueCode: 'serum' }), prop('scale', { valueString: 'Qn' }), prop('method', { valueCoding: { system: METHOD, code: 'strip' } })));
      expect(matches(p)).toEqual(['glu-ser (unmatched: method)']);
      expect(p.parameter[0].part[1]).toEqual({ name: 'unmatched', part: [{ name: 'code', valueCode: 'method' }, { name: 'value', valueCoding: { system: METHOD, code: 'strip' } }] });
      expect(matches(await find(typeLevel(prop('specimen', { valueCode: 'csf' }), prop('scale', { valueString: 'Ord' }))))).toEqual(['glu-ur (unmatched: specimen)']);
      // Nothing held at all: no match.
      expect(matches(await find(typeLevel(prop('specimen', { valueCode: 'csf' }))))).toEqual([]);
    });

    test('instance level, exact=false answering as exact, no property no match, GET', async () => {
      expect(matches(await find([{ name: 'exact', valueBoolean: false }, prop('specimen', { valueCode: 'urine' })], 'CodeSystem/lab-tests/$find-matches'))).toEqual(['glu-ur']);
      expect(matches(await find(typeLevel(prop('specimen', { valueCode: 'urine' })).map((p) => (p.name === 'exact' ? { name: 'exact', valueBoolean: false } : p))))).toEqual(['glu-ur']);
      const get = await api.get(`CodeSystem/$find-matches?system=${encodeURIComponent(CS)}&exact=true`);
      expect(get.status).toBe(200);
      expect((await get.json()) as Json).toEqual({ resourceType: 'Parameters' });
    });

    test('errors name their parameter', async () => {
      const err = async (res: Response, status: number, expression: string) => expect((await expectOutcome(res, status)).issue[0].expression).toEqual([expression]);
      await err(await api.get(`CodeSystem/$find-matches?system=${encodeURIComponent(CS)}&property=specimen`), 400, 'property');
      await err(await api.post('CodeSystem/$find-matches', { resourceType: 'Parameters', parameter: [prop('specimen', { valueCode: 'blood' })] }), 400, 'system');
      await expectOutcome(await api.post('CodeSystem/$find-matches', { resourceType: 'Parameters', parameter: [{ name: 'system', valueUri: 'http://example.org/unknown' }, prop('a', { valueCode: 'b' })] }), 404);
      await err(await api.post('CodeSystem/lab-tests/$find-matches', { resourceType: 'Parameters', parameter: [{ name: 'system', valueUri: 'http://example.org/other' }] }), 400, 'system');
      await expectOutcome(await api.post('CodeSystem/nope/$find-matches', { resourceType: 'Parameters' }), 404);
      const grouped = { name: 'property', part: [{ name: 'code', valueCode: 'specimen' }, { name: 'subproperty', part: [{ name: 'code', valueCode: 'x' }, { name: 'value', valueCode: 'y' }] }] };
      await err(await api.post('CodeSystem/$find-matches', { resourceType: 'Parameters', parameter: typeLevel(grouped) }), 400, 'property[0].subproperty');
      const bad = await expectOutcome(await api.post('CodeSystem/$find-matches', { resourceType: 'Parameters', parameter: typeLevel({ name: 'property', part: [{ name: 'value', valueCode: 'x' }] }) }), 400);
      expect(bad.issue[0].expression[0]).toStartWith('property');
    });

    test('access: whole read of CodeSystem, as the other terminology operations', async () => {
      await expectOutcome(await fhirClient(t, await craftToken(t, 'system/Patient.rs')).post('CodeSystem/$find-matches', { resourceType: 'Parameters', parameter: typeLevel() }), 403);
      await expectOutcome(await fhirClient(t, await craftToken(t, 'patient/Observation.rs', { patient: 'p1' })).post('CodeSystem/$find-matches', { resourceType: 'Parameters', parameter: typeLevel() }), 403);
      const reader = fhirClient(t, await craftToken(t, 'system/CodeSystem.rs'));
      expect(matches(await find(typeLevel(prop('rank', { valueInteger: 1 })), 'CodeSystem/$find-matches', reader))).toEqual(['glu-bld']);
      const patient = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p1' }));
      expect(matches(await find(typeLevel(prop('rank', { valueInteger: 1 })), 'CodeSystem/$find-matches', patient))).toEqual(['glu-bld']);
    });
  });
});
