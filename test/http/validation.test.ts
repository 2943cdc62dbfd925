import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff, refs } from '../helpers/export.ts';
import { operatorAccess } from '../../src/fhir/access.ts';
import { updateResource } from '../../src/fhir/crud.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

/** The issue's example: four problems. */
const BAD_PATIENT = { resourceType: 'Patient', gender: 'banana', birthDate: 'not-a-date', foo: 1, name: 'notanarray' };
const where = (outcome: Json) => (outcome.issue as Json[]).map((i) => i.expression?.[0]).sort();

/** The 422 OperationOutcome of a refused write: one issue per problem, each with code, expression and text. */
async function refused(res: Response): Promise<Json> {
  const outcome = await expectOutcome(res, 422);
  for (const i of outcome.issue as Json[]) {
    expect(i.severity).toBe('error');
    expect(i.expression).toHaveLength(1);
    expect(i.details.text.length).toBeGreaterThan(5);
  }
  return outcome;
}

describe('with strict validation (the default)', () => {
  let t: TestApp;
  let api: FhirClient;
  beforeAll(async () => {
    t = await createTestApp();
    api = fhirClient(t, await t.token());
  });
  afterAll(() => t.close());

  test('create refuses an invalid resource with every problem, and stores nothing', async () => {
    const before = await countVersions(t);
    const outcome = await refused(await api.post('Patient', BAD_PATIENT));
    expect(where(outcome)).toEqual(['Patient.birthDate', 'Patient.foo', 'Patient.gender', 'Patient.name']);
    const codes = Object.fromEntries((outcome.issue as Json[]).map((i) => [i.expression[0], i.code]));
    expect(codes).toEqual({ 'Patient.birthDate': 'value', 'Patient.foo': 'structure', 'Patient.gender': 'code-invalid', 'Patient.name': 'structure' });
    expect(await countVersions(t)).toBe(before);
  });

  test('an Observation without status and code is refused; content that is not the type stays 400', async () => {
    const outcome = await refused(await api.post('Observation', { resourceType: 'Observation' }));
    expect(where(outcome)).toEqual(['Observation.code', 'Observation.status']);
    expect((outcome.issue as Json[]).every((i) => i.code === 'required')).toBe(true);
    await expectOutcome(await api.post('Observation', { resourceType: 'Patient' }), 400);
    await expectOutcome(await api.post('Observation', [1]), 400);
  });

  test('update, conditional create and conditional update refuse invalid content', async () => {
    const p = await api.create({ resourceType: 'Patient', identifier: [{ system: 'urn:s', value: 'v1' }] });
    expect(where(await refused(await api.put(`Patient/${p.id}`, { ...p, gender: 'banana' })))).toEqual(['Patient.gender']);
    // Refused before the condition is searched: a match does not hide the problem.
    const conditional = await api.post('Patient', { resourceType: 'Patient', birthDate: '2020-02-30' }, { 'If-None-Exist': 'identifier=urn:s|v1' });
    expect(where(await refused(conditional))).toEqual(['Patient.birthDate']);
    const update = await api.put('Patient?identifier=urn:s|v1', { resourceType: 'Patient', active: 'yes' });
    expect(where(await refused(update))).toEqual(['Patient.active']);
    expect((await (await api.get(`Patient/${p.id}`)).json()).meta.versionId).toBe('1');
  });

  test('a batch refuses the invalid entry alone, naming it', async () => {
    const res = await api.post('', {
      resourceType: 'Bundle', type: 'batch',
      entry: [
        { resource: { resourceType: 'Patient', gender: 'female' }, request: { method: 'POST', url: 'Patient' } },
        { resource: { resourceType: 'Patient', gender: 'banana' }, request: { method: 'POST', url: 'Patient' } },
      ],
    });
    expect(res.status).toBe(200);
    const bundle = (await res.json()) as Json;
    expect(bundle.entry[0].response.status).toStartWith('201');
    expect(bundle.entry[1].response.status).toBe('422 Unprocessable Entity');
    expect(where(bundle.entry[1].response.outcome)).toEqual(['Bundle.entry[1].resource.gender']);
  });

  test('$validate at type level: 200 with every issue, or an informational outcome', async () => {
    const res = await api.post('Patient/$validate', BAD_PATIENT);
    expect(res.status).toBe(200);
    expect(where((await res.json()) as Json)).toEqual(['Patient.birthDate', 'Patient.foo', 'Patient.gender', 'Patient.name']);
    const ok = (await (await api.post('Patient/$validate', { resourceType: 'Patient', gender: 'other' })).json()) as Json;
    expect(ok.issue).toHaveLength(1);
    expect(ok.issue[0].severity).toBe('information');
    const params = {
      resourceType: 'Parameters',
      parameter: [{ name: 'resource', resource: { resourceType: 'Observation', status: 'final' } }, { name: 'mode', valueCode: 'create' }],
    };
    expect(where((await (await api.post('Observation/$validate', params)).json()) as Json)).toEqual(['Observation.code']);
  });

  test('a primitive with a value and an id alone in _name is valid (ele-1); without a value it is not', async () => {
    // US Core 6.1.0's patient-example-targeted-provenance has `"_gender": {"id": "gender"}`.
    const withIds = { resourceType: 'Patient', id: 'x', gender: 'female', _gender: { id: 'g1' }, birthDate: '1970-01-01', _birthDate: { id: 'b1' } };
    const put = await api.put('Patient/x', withIds);
    expect(put.status).toBe(201);
    expect(((await put.json()) as Json)._gender).toEqual({ id: 'g1' });
    const ok = (await (await api.post('Patient/$validate', withIds)).json()) as Json;
    expect(ok.issue.map((i: Json) => i.severity)).toEqual(['information']);
    const idOnly = { resourceType: 'Patient', id: 'y', _gender: { id: 'g1' } };
    expect(where(await refused(await api.put('Patient/y', idOnly)))).toEqual(['Patient.gender']);
    expect(where((await (await api.post('Patient/$validate', idOnly)).json()) as Json)).toEqual(['Patient.gender']);
    const given = (ids: unknown[]) => ({ resourceType: 'Patient', name: [{ given: ['a', 'b'], _given: ids }] });
    expect((await api.post('Patient', given([{ id: 'x' }, null]))).status).toBe(201);
    const unvalued = { resourceType: 'Patient', name: [{ given: ['a', null], _given: [null, { id: 'x' }] }] };
    expect(where(await refused(await api.post('Patient', unvalued)))).toEqual(['Patient.name[0].given[1]']);
    const tx = await api.post('', {
      resourceType: 'Bundle', type: 'transaction',
      entry: [
        { resource: { ...withIds, id: 'z' }, request: { method: 'PUT', url: 'Patient/z' } },
        { resource: unvalued, request: { method: 'POST', url: 'Patient' } },
      ],
    });
    expect(where(await refused(tx))).toEqual(['Bundle.entry[1].resource.name[0].given[1]']);
    const tx2 = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { ...withIds, id: 'z' }, request: { method: 'PUT', url: 'Patient/z' } }] });
    expect(tx2.status).toBe(200);
  });

  test('$validate with an unknown mode: 400 naming mode', async () => {
    const outcome = await expectOutcome(await api.post('Patient/$validate?mode=bogus', { resourceType: 'Patient' }), 400);
    expect(outcome.issue[0].expression).toEqual(['mode']);
  });

  test('$validate: the base definition as profile is the base validation; a profile Cinder does not know is a not-supported error naming it', async () => {
    const base = { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: { resourceType: 'Patient' } }, { name: 'profile', valueUri: 'http://hl7.org/fhir/StructureDefinition/Patient' }] };
    const okBody = (await (await api.post('Patient/$validate', base)).json()) as Json;
    expect(okBody.issue[0].severity).toBe('information');
    const other = structuredClone(base);
    other.parameter[1]!.valueUri = 'http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient';
    const body = (await (await api.post('Patient/$validate', other)).json()) as Json;
    expect(body.issue.map((i: Json) => i.code)).toEqual(['not-supported']);
    expect(body.issue[0].details.text).toContain('us-core-patient');
  });

  test('$validate at instance level: the stored resource, update and delete modes', async () => {
    const p = await api.create({ resourceType: 'Patient', gender: 'male' });
    const stored = (await (await api.get(`Patient/${p.id}/$validate`)).json()) as Json;
    expect(stored.issue[0].severity).toBe('information');
    const update = { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: { resourceType: 'Patient', id: 'other', gender: 'x' } }, { name: 'mode', valueCode: 'update' }] };
    const body = (await (await api.post(`Patient/${p.id}/$validate`, update)).json()) as Json;
    expect(where(body)).toEqual(['Patient.gender', 'Patient.id']);
    const del = { resourceType: 'Parameters', parameter: [{ name: 'mode', valueCode: 'delete' }] };
    expect(((await (await api.post(`Patient/${p.id}/$validate`, del)).json()) as Json).issue[0].severity).toBe('information');
    await expectOutcome(await api.post('Patient/nope/$validate', del), 404);
    await expectOutcome(await api.post('Patient/$validate', { resourceType: 'Parameters', parameter: [{ name: 'mode', valueCode: 'sideways' }] }), 400);
  });

  test('the CapabilityStatement lists $validate', async () => {
    const cs = (await (await api.get('metadata')).json()) as Json;
    const patient = cs.rest[0].resource.find((r: Json) => r.type === 'Patient');
    expect(patient.operation.map((o: Json) => o.name)).toContain('validate');
  });
});

describe('CINDER_VALIDATION', () => {
  test('structural skips bindings and invariants but keeps the structure; off stores anything that is a resource', async () => {
    const structural = await createTestApp({ env: { CINDER_VALIDATION: 'structural' } });
    const off = await createTestApp({ env: { CINDER_VALIDATION: 'off' } });
    try {
      const s = fhirClient(structural, await structural.token());
      expect((await s.post('Patient', { resourceType: 'Patient', gender: 'banana' })).status).toBe(201);
      expect(where(await refused(await s.post('Patient', { resourceType: 'Patient', foo: 1 })))).toEqual(['Patient.foo']);
      // ele-1 is structure: checked at this level too.
      expect((await s.put('Patient/x', { resourceType: 'Patient', id: 'x', gender: 'female', _gender: { id: 'g1' } })).status).toBe(201);
      expect(where(await refused(await s.put('Patient/y', { resourceType: 'Patient', id: 'y', _gender: { id: 'g1' } })))).toEqual(['Patient.gender']);
      // So is JSON's shape: a companion of nulls alone, or an empty one, carries nothing (json.html).
      expect(where(await refused(await s.put('Patient/z', { resourceType: 'Patient', id: 'z', name: [{ given: ['a'], _given: [null] }] })))).toEqual(['Patient.name[0]._given']);
      expect(where(await refused(await s.put('Patient/z', { resourceType: 'Patient', id: 'z', name: [{ family: 'F', _given: [] }] })))).toEqual(['Patient.name[0]._given']);
      // $validate is always strict.
      expect(where((await (await s.post('Patient/$validate', { resourceType: 'Patient', gender: 'banana' })).json()) as Json)).toEqual(['Patient.gender']);
      const o = fhirClient(off, await off.token());
      expect((await o.post('Patient', BAD_PATIENT)).status).toBe(201);
      await expectOutcome(await o.post('Patient', { resourceType: 'Banana' }), 400);
    } finally {
      await structural.close();
      await off.close();
    }
  });

  test('an unknown level is a configuration error', async () => {
    await expect(createTestApp({ env: { CINDER_VALIDATION: 'lenient' } })).rejects.toThrow(/CINDER_VALIDATION/);
  });
});

await eachStore((kind, fresh) => {
  describe(`transactions on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeEach(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterEach(() => t.close());

    test('a transaction with invalid entries writes nothing and names each entry', async () => {
      const res = await api.post('', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          { fullUrl: 'urn:uuid:0c3c9e3e-6e5b-4d0a-8f2a-1c2d3e4f5a6b', resource: { resourceType: 'Patient', gender: 'female' }, request: { method: 'POST', url: 'Patient' } },
          { resource: { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'urn:uuid:0c3c9e3e-6e5b-4d0a-8f2a-1c2d3e4f5a6b' } }, request: { method: 'POST', url: 'Observation' } },
          { resource: { resourceType: 'Observation', status: 'done', code: { text: 'x' } }, request: { method: 'POST', url: 'Observation' } },
          { resource: { resourceType: 'Patient', id: 'p9', birthDate: '1970-13-01' }, request: { method: 'PUT', url: 'Patient/p9' } },
        ],
      });
      const outcome = await refused(res);
      expect(where(outcome)).toEqual(['Bundle.entry[2].resource.status', 'Bundle.entry[3].resource.birthDate']);
      expect(await countVersions(t)).toBe(0);
    });

    test('an export lists resources stored unvalidated and not valid in its error file, not in its output', async () => {
      const legacy = { store: t.store, clock: t.clock, validation: 'off' as const };
      const req = { tenant: 't1', access: operatorAccess };
      await updateResource(legacy, req, 'Patient', 'good', { resourceType: 'Patient', id: 'good', gender: 'male' });
      await updateResource(legacy, req, 'Patient', 'bad', { resourceType: 'Patient', id: 'bad', gender: 'banana' });
      expect(await t.store.tenants.validationDebt('t1')).not.toBeNull();
      const token = await t.token();
      const manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Patient'));
      expect(refs(await download(t, token, manifest.output))).toEqual(['Patient/good']);
      const errors = (await download(t, token, manifest.error)).OperationOutcome!;
      const issues = errors.flatMap((o) => o.issue as Json[]);
      expect(issues.map((i) => i.expression[0])).toEqual(['Patient.gender']);
      expect(issues[0]!.details.text).toStartWith('Patient/bad (version 1) is not valid FHIR R4 and was left out');
    });

    test('an export leaving out more invalid resources than its error file lists says how many more there were', async () => {
      const legacy = { store: t.store, clock: t.clock, validation: 'off' as const };
      const req = { tenant: 't1', access: operatorAccess };
      // The error file lists 1,000 problems (MAX_RUNTIME_ISSUES); three resources more are left out.
      for (let i = 0; i < 1003; i++) await updateResource(legacy, req, 'Patient', `bad${i}`, { resourceType: 'Patient', id: `bad${i}`, gender: 'banana' });
      await updateResource(legacy, req, 'Patient', 'good', { resourceType: 'Patient', id: 'good', gender: 'male' });
      const token = await t.token();
      const manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Patient'));
      expect(refs(await download(t, token, manifest.output))).toEqual(['Patient/good']);
      const issues = (await download(t, token, manifest.error)).OperationOutcome!.flatMap((o) => o.issue as Json[]);
      expect(issues).toHaveLength(1001);
      expect(issues.slice(0, 1000).every((i) => / is not valid FHIR R4 and was left out/.test(i.details.text))).toBe(true);
      expect(issues[1000]).toMatchObject({ severity: 'error', code: 'incomplete' });
      expect(issues[1000]!.details.text).toStartWith('3 more problems were met than this file lists');
    }, 120_000);

    test('strict writes leave the tenant without validation debt', async () => {
      await api.create({ resourceType: 'Patient', gender: 'female' });
      await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } }] });
      expect(await t.store.tenants.validationDebt('t1')).toBeNull();
    });

    test('a valid transaction is written whole', async () => {
      const res = await api.post('', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [{ resource: { resourceType: 'Patient', gender: 'female' }, request: { method: 'POST', url: 'Patient' } }],
      });
      expect(res.status).toBe(200);
      expect(await countVersions(t)).toBe(1);
    });
  });
});
