/**
 * Validation against profiles (R4 profiling.html): the R4 core profiles and tenant-stored
 * StructureDefinitions, on writes (`meta.profile`) and in `$validate?profile=`, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, secondServer, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { storeTargets } from '../helpers/stores.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BP = 'http://hl7.org/fhir/StructureDefinition/bp';
const LOCAL = 'http://example.org/fhir/StructureDefinition/named-patient';

/** A blood pressure as R4's bp profile wants it; `meta.profile` claims it. */
function bloodPressure(extra: Json = {}): Json {
  const comp = (code: string, value: number) => ({
    code: { coding: [{ system: 'http://loinc.org', code }] },
    valueQuantity: { value, unit: 'mmHg', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' },
  });
  return {
    resourceType: 'Observation', meta: { profile: [BP] }, status: 'final',
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
    code: { coding: [{ system: 'http://loinc.org', code: '85354-9' }] },
    subject: { reference: 'Patient/p1' }, effectiveDateTime: '2024-01-01',
    component: [comp('8480-6', 120), comp('8462-4', 80)],
    ...extra,
  };
}

/** A tenant's profile on Patient: `name` has at least `nameMin` values; without `snapshot`, a differential alone. */
function localProfile(nameMin: number, snapshot = true): Json {
  const el = (path: string, min: number, max: string) => ({ id: path, path, short: path, definition: path, min, max, base: { path, min: 0, max }, isModifier: false, isSummary: false });
  return {
    resourceType: 'StructureDefinition', url: LOCAL, name: 'NamedPatient', status: 'active', kind: 'resource', abstract: false,
    type: 'Patient', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint', fhirVersion: '4.0.1',
    ...(snapshot ? { snapshot: { element: [{ ...el('Patient', 0, '*'), base: { path: 'Patient', min: 0, max: '*' } }, el('Patient.name', nameMin, '*')] } } : { differential: { element: [{ id: 'Patient.name', path: 'Patient.name', min: nameMin }] } }),
  };
}

const EXT_PROFILE = 'http://example.org/fhir/StructureDefinition/born-patient';
const BIRTH_PLACE = 'http://hl7.org/fhir/StructureDefinition/patient-birthPlace';
const NULL_FLAVOR = 'http://hl7.org/fhir/StructureDefinition/iso21090-nullFlavor';

/** A tenant's profile slicing Patient.extension by url: a birth place (1..1) and a null flavor (0..1), both R4 core extensions. */
function extensionProfile(): Json {
  const el = (id: string, min: number, max: string, extra: Json = {}) => {
    const path = id.replace(/:[^.]*/g, '');
    return { id, path, short: id, definition: id, min, max, base: { path, min: 0, max: '*' }, ...extra };
  };
  return {
    resourceType: 'StructureDefinition', url: EXT_PROFILE, name: 'BornPatient', status: 'active', kind: 'resource', abstract: false,
    type: 'Patient', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint', fhirVersion: '4.0.1',
    snapshot: {
      element: [
        el('Patient', 0, '*'),
        el('Patient.extension', 0, '*', { slicing: { discriminator: [{ type: 'value', path: 'url' }], rules: 'open' }, type: [{ code: 'Extension' }] }),
        el('Patient.extension:birthPlace', 1, '1', { sliceName: 'birthPlace', type: [{ code: 'Extension', profile: [BIRTH_PLACE] }] }),
        el('Patient.extension:flavor', 0, '1', { sliceName: 'flavor', type: [{ code: 'Extension', profile: [NULL_FLAVOR] }] }),
      ],
    },
  };
}

const where = (outcome: Json) => (outcome.issue as Json[]).map((i) => i.expression?.[0]).sort();
const errors = (outcome: Json) => (outcome.issue as Json[]).filter((i) => i.severity === 'error');

await eachStore((kind, fresh) => {
  describe(`profiles (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('a write claiming R4\'s bp profile is refused 422 where it breaks it; the same without meta.profile too (a vital sign), another code not', async () => {
      expect((await api.post('Observation', bloodPressure())).status).toBe(201);
      const bad = bloodPressure({ component: [bloodPressure().component[0]], valueQuantity: { value: 1 } });
      const outcome = await expectOutcome(await api.post('Observation', bad), 422);
      expect(where(outcome)).toEqual(['Observation.component', 'Observation.component', 'Observation.value']);
      for (const i of outcome.issue as Json[]) expect(i.details.text).toContain(BP);
      expect((outcome.issue as Json[]).map((i) => i.details.text).join('\n')).toContain('Observation.component:DiastolicBP');
      // Unclaimed, a blood pressure is held to bp all the same: R4 requires it of every vital sign, as HL7's validator does.
      const { meta: _meta, ...unclaimed } = bad;
      const implied = await expectOutcome(await api.post('Observation', unclaimed), 422);
      expect(where(implied)).toEqual(['Observation.component', 'Observation.component', 'Observation.value']);
      // An Observation of another code is held to no vital sign's profile.
      expect((await api.post('Observation', { ...unclaimed, code: { coding: [{ system: 'http://loinc.org', code: '2339-0' }] } })).status).toBe(201);
      // A fixed value inside a slice: the diastolic unit.
      const unit = bloodPressure();
      unit.component[1].valueQuantity.code = 'kg';
      const o2 = await expectOutcome(await api.put('Observation/bp2', { ...unit, id: 'bp2' }), 422);
      expect(where(o2)).toEqual(['Observation.component[1].value.ofType(Quantity).code']);
    });

    test('an unknown profile is accepted on write and warned about in $validate', async () => {
      const claimed = { resourceType: 'Patient', meta: { profile: ['http://example.org/unknown-profile'] } };
      expect((await api.post('Patient', claimed)).status).toBe(201);
      const body = (await (await api.post('Patient/$validate', claimed)).json()) as Json;
      expect(body.issue).toHaveLength(1);
      expect(body.issue[0]).toMatchObject({ severity: 'warning', code: 'not-supported', expression: ['Patient.meta.profile[0]'] });
      expect(body.issue[0].details.text).toContain('unknown-profile');
    });

    test('$validate?profile= validates against a built-in profile (type and instance level, GET and Parameters)', async () => {
      const plain = bloodPressure({ meta: undefined, component: undefined, valueQuantity: { value: 1, unit: 'mmHg', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' } });
      delete plain.meta;
      delete plain.component;
      const typeLevel = (await (await api.post(`Observation/$validate?profile=${encodeURIComponent(BP)}`, plain)).json()) as Json;
      expect(errors(typeLevel).map((i) => i.expression[0]).sort()).toEqual(['Observation.component', 'Observation.component', 'Observation.component', 'Observation.value']);
      // Stored as a glucose (a vital sign's code would be held to its profile on the write), then validated against bp: its code too.
      const stored = await api.create({ ...plain, code: { coding: [{ system: 'http://loinc.org', code: '2339-0' }] } });
      const get = (await (await api.get(`Observation/${stored.id}/$validate?profile=${encodeURIComponent(BP)}`)).json()) as Json;
      expect(errors(get).map((i) => i.expression[0]).sort()).toEqual(['Observation.code.coding', 'Observation.component', 'Observation.component', 'Observation.component', 'Observation.value']);
      const params = { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: bloodPressure({ meta: undefined }) }, { name: 'profile', valueUri: BP }] };
      delete (params.parameter[0]!.resource as Json).meta;
      const ok = (await (await api.post('Observation/$validate', params)).json()) as Json;
      expect(errors(ok)).toEqual([]);
    });

    test('a tenant-stored profile is used once written, follows its changes and is dropped when deleted', async () => {
      const claim = { resourceType: 'Patient', meta: { profile: [LOCAL] }, gender: 'female' };
      expect((await api.post('Patient', claim)).status).toBe(201);
      const sd = await api.create(localProfile(1));
      const refused = await expectOutcome(await api.post('Patient', claim), 422);
      expect(where(refused)).toEqual(['Patient.name']);
      expect(refused.issue[0].details.text).toContain(LOCAL);
      expect((await api.post('Patient', { ...claim, name: [{ family: 'Chalmers' }] })).status).toBe(201);
      const v = (await (await api.post(`Patient/$validate?profile=${encodeURIComponent(LOCAL)}`, { resourceType: 'Patient' })).json()) as Json;
      expect(errors(v).map((i) => i.expression[0])).toEqual(['Patient.name']);
      // Changed: name no longer required.
      expect((await api.put(`StructureDefinition/${sd.id}`, { ...localProfile(0), id: sd.id })).status).toBe(200);
      expect((await api.post('Patient', claim)).status).toBe(201);
      expect((await api.put(`StructureDefinition/${sd.id}`, { ...localProfile(1), id: sd.id })).status).toBe(200);
      await expectOutcome(await api.post('Patient', claim), 422);
      expect((await api.del(`StructureDefinition/${sd.id}`)).status).toBe(200);
      expect((await api.post('Patient', claim)).status).toBe(201);
    });

    test('extension slices by url: each slice\'s count, and its extensions checked against the R4 extension definition (value type, binding)', async () => {
      await api.create(extensionProfile());
      const patient = (extension: Json[]) => ({ resourceType: 'Patient', meta: { profile: [EXT_PROFILE] }, ...(extension.length ? { extension } : {}) });
      const born = { url: BIRTH_PLACE, valueAddress: { city: 'Utrecht' } };
      expect(where(await expectOutcome(await api.post('Patient', patient([])), 422))).toEqual(['Patient.extension']);
      const wrongType = await expectOutcome(await api.post('Patient', patient([{ url: BIRTH_PLACE, valueString: 'Utrecht' }])), 422);
      expect(where(wrongType)).toEqual(['Patient.extension[0].value.ofType(string)']);
      expect(wrongType.issue[0].details.text).toContain(BIRTH_PLACE);
      const badCode = await expectOutcome(await api.post('Patient', patient([born, { url: NULL_FLAVOR, valueCode: 'not-a-flavor' }])), 422);
      expect(where(badCode)).toEqual(['Patient.extension[1].value.ofType(code)']);
      expect(badCode.issue[0]).toMatchObject({ code: 'code-invalid' });
      expect((await api.post('Patient', patient([born, { url: NULL_FLAVOR, valueCode: 'UNK' }, { url: 'http://example.org/other', valueBoolean: true }]))).status).toBe(201);
    });

    test('a required binding of a core profile is decided by the terminology; a patch and a conditional update are checked too', async () => {
      const weight = bloodPressure({
        meta: { profile: ['http://hl7.org/fhir/StructureDefinition/bodyweight'] }, code: { coding: [{ system: 'http://loinc.org', code: '29463-7' }] },
        component: undefined, valueQuantity: { value: 70, unit: 'km', system: 'http://unitsofmeasure.org', code: 'km' },
      });
      delete weight.component;
      // A UCUM unit (base validation refuses a code that is none, such as `furlongs`), but no unit of body weight.
      const outcome = await expectOutcome(await api.post('Observation', weight), 422);
      expect(where(outcome)).toEqual(['Observation.value.ofType(Quantity).code']);
      expect(outcome.issue[0].details.text).toContain('http://hl7.org/fhir/ValueSet/ucum-bodyweight');
      expect((await api.post('Observation', { ...weight, valueQuantity: { value: 70, unit: 'kg', system: 'http://unitsofmeasure.org', code: 'kg' } })).status).toBe(201);
      const ok = await api.create(bloodPressure());
      const patch = [{ op: 'remove', path: '/component/1' }];
      const patched = await api.call('PATCH', `Observation/${ok.id}`, patch, { 'Content-Type': 'application/json-patch+json' });
      expect(where(await expectOutcome(patched, 422))).toEqual(['Observation.component', 'Observation.component']);
      const conditional = await api.put('Observation?_id=' + ok.id, { ...bloodPressure({ component: [bloodPressure().component[0]] }), id: ok.id });
      await expectOutcome(conditional, 422);
      expect(((await (await api.get(`Observation/${ok.id}`)).json()) as Json).meta.versionId).toBe('1');
    });

    test('a stored profile with only a differential is enforced from the snapshot Cinder generates, on writes and in $validate', async () => {
      const url = `${LOCAL}-nosnap`;
      await api.create({ ...localProfile(1, false), url, name: 'NoSnap' });
      const outcome = await expectOutcome(await api.post('Patient', { resourceType: 'Patient', meta: { profile: [url] } }), 422);
      expect(where(outcome)).toEqual(['Patient.name']);
      expect((await api.post('Patient', { resourceType: 'Patient', meta: { profile: [url] }, name: [{ family: 'Doe' }] })).status).toBe(201);
      const checked = (await (await api.post(`Patient/$validate?profile=${encodeURIComponent(url)}`, { resourceType: 'Patient' })).json()) as Json;
      expect(checked.issue.filter((i: Json) => i.severity === 'error').map((i: Json) => i.expression?.[0])).toEqual(['Patient.name']);
      // A slice of a datatype's element and a choice constrained by its type's name, both below the base's elements.
      const obsUrl = `${LOCAL}-obs`;
      await api.create({
        resourceType: 'StructureDefinition', url: obsUrl, name: 'GlucoseLike', status: 'active', kind: 'resource', abstract: false,
        type: 'Observation', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Observation', derivation: 'constraint',
        differential: { element: [
          { id: 'Observation.code.coding', path: 'Observation.code.coding', slicing: { discriminator: [{ type: 'value', path: 'code' }], rules: 'open' } },
          { id: 'Observation.code.coding:glucose', path: 'Observation.code.coding', sliceName: 'glucose', min: 1, max: '1' },
          { id: 'Observation.code.coding:glucose.code', path: 'Observation.code.coding.code', min: 1, fixedCode: '2339-0' },
          { id: 'Observation.valueQuantity', path: 'Observation.valueQuantity', min: 1 },
          { id: 'Observation.valueQuantity.unit', path: 'Observation.valueQuantity.unit', min: 1 },
        ] },
      });
      const obs = (extra: Json) => ({ resourceType: 'Observation', meta: { profile: [obsUrl] }, status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2339-0' }] }, ...extra });
      expect((await api.post('Observation', obs({ valueQuantity: { value: 90, unit: 'mg/dL' } }))).status).toBe(201);
      const noUnit = await expectOutcome(await api.post('Observation', obs({ valueQuantity: { value: 90 } })), 422);
      expect(where(noUnit)).toEqual(['Observation.value.ofType(Quantity).unit']);
      expect(where(await expectOutcome(await api.post('Observation', obs({ valueString: '90' })), 422))).toContain('Observation.value.ofType(string)');
      expect(where(await expectOutcome(await api.post('Observation', obs({ code: { text: 'glucose' }, valueQuantity: { value: 90, unit: 'mg/dL' } })), 422))).toEqual(['Observation.code.coding']);
    });

    test('an extension definition with only a differential: extensions are checked against its generated snapshot', async () => {
      const url = 'http://example.org/fhir/StructureDefinition/shoe-size';
      await api.create({
        resourceType: 'StructureDefinition', url, name: 'ShoeSize', status: 'active', kind: 'complex-type', abstract: false, type: 'Extension',
        context: [{ type: 'element', expression: 'Patient' }],
        baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Extension', derivation: 'constraint',
        differential: { element: [
          { id: 'Extension', path: 'Extension', max: '1' },
          { id: 'Extension.extension', path: 'Extension.extension', max: '0' },
          { id: 'Extension.url', path: 'Extension.url', fixedUri: url },
          { id: 'Extension.value[x]', path: 'Extension.value[x]', min: 1, type: [{ code: 'decimal' }] },
        ] },
      });
      const check = async (value: Json) => (await (await api.post('Patient/$validate', { resourceType: 'Patient', extension: [{ url, ...value }] })).json()) as Json;
      expect(errors(await check({ valueDecimal: 42 }))).toEqual([]);
      expect(errors(await check({ valueString: '42' })).map((i) => i.expression[0])).toEqual(['Patient.extension[0].value.ofType(string)']);
    });

    test('a differential that generates no snapshot stays writable, but for a path its type lacks; a write claiming it is an error naming the problem', async () => {
      const url = `${LOCAL}-bad`;
      const bad = { ...localProfile(1, false), url, name: 'Bad', differential: { element: [{ id: 'Patient.nickname', path: 'Patient.nickname', min: 1 }] } };
      // A path Patient does not have is base validation's to refuse (conformance.ts); the snapshot's other problems are not.
      const noPath = await expectOutcome(await api.post('StructureDefinition', bad), 422);
      expect(noPath.issue.map((i: Json) => i.expression[0])).toEqual(['StructureDefinition.differential.element[0].path']);
      expect(noPath.issue[0].details.text).toContain("'nickname' is not one of its elements");
      const tooMany = { ...bad, url: `${url}-max`, differential: { element: [{ id: 'Patient.gender', path: 'Patient.gender', max: '2' }] } };
      expect((await api.post('StructureDefinition', tooMany)).status).toBe(201);
      const max = await expectOutcome(await api.post('Patient', { resourceType: 'Patient', meta: { profile: [tooMany.url] } }), 422);
      expect(max.issue[0]).toMatchObject({ code: 'not-supported', expression: ['Patient.meta.profile[0]'] });
      expect(max.issue[0].details.text).toContain('Patient.gender: max 2 is above the base');
    });

    test('a transaction with one profile-invalid entry writes nothing', async () => {
      const before = ((await (await api.get('Observation?_summary=count')).json()) as Json).total;
      const tx = await api.post('', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          { resource: bloodPressure(), request: { method: 'POST', url: 'Observation' } },
          { resource: bloodPressure({ component: [bloodPressure().component[0]] }), request: { method: 'POST', url: 'Observation' } },
        ],
      });
      const outcome = await expectOutcome(tx, 422);
      expect(where(outcome).every((e) => e.startsWith('Bundle.entry[1].resource.component'))).toBe(true);
      expect(((await (await api.get('Observation?_summary=count')).json()) as Json).total).toBe(before);
      const batch = (await (await api.post('', {
        resourceType: 'Bundle', type: 'batch',
        entry: [
          { resource: bloodPressure(), request: { method: 'POST', url: 'Observation' } },
          { resource: bloodPressure({ component: [bloodPressure().component[0]] }), request: { method: 'POST', url: 'Observation' } },
        ],
      })).json()) as Json;
      expect(batch.entry[0].response.status).toStartWith('201');
      expect(batch.entry[1].response.status).toBe('422 Unprocessable Entity');
      // A batch PATCH whose result breaks the profile: refused in its entry, located in the patched resource.
      const target = await api.create(bloodPressure());
      const patchBatch = (await (await api.post('', {
        resourceType: 'Bundle', type: 'batch',
        entry: [{ resource: { resourceType: 'Binary', contentType: 'application/json-patch+json', data: btoa(JSON.stringify([{ op: 'remove', path: '/component/0' }])) }, request: { method: 'PATCH', url: `Observation/${target.id}` } }],
      })).json()) as Json;
      expect(patchBatch.entry[0].response.status).toBe('422 Unprocessable Entity');
      expect(where(patchBatch.entry[0].response.outcome)).toEqual(['Observation.component', 'Observation.component']);
    });
  });
});

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`a tenant's profile seen by two servers on one ${target.kind} database`, () => {
    test('a profile stored, changed and deleted through one server is used at once by the other, which had compiled it', async () => {
      const db = await target.migrated();
      const t = await createTestApp({ store: db.open() });
      try {
        const token = await t.token();
        const second = await secondServer(t, () => db.open());
        const on = (server: (path: string, init: RequestInit) => Response | Promise<Response>) => async (method: string, path: string, body?: unknown) => server(`${t.fhir()}/${path}`, fhirInit(token, method, body));
        const [a, b] = [on(t.request), on(second)];
        const claim = { resourceType: 'Patient', meta: { profile: [LOCAL] } };
        const sd = (await (await a('POST', 'StructureDefinition', localProfile(1))).json()) as Json;
        expect((await b('POST', 'Patient', claim)).status).toBe(422);
        expect((await a('PUT', `StructureDefinition/${sd.id}`, { ...localProfile(0), id: sd.id })).status).toBe(200);
        expect((await b('POST', 'Patient', claim)).status).toBe(201);
        expect((await a('PUT', `StructureDefinition/${sd.id}`, { ...localProfile(1), id: sd.id })).status).toBe(200);
        expect((await b('POST', 'Patient', claim)).status).toBe(422);
        expect((await a('DELETE', `StructureDefinition/${sd.id}`)).status).toBe(200);
        expect((await b('POST', 'Patient', claim)).status).toBe(201);
      } finally {
        await t.close();
      }
    });
  });
}
