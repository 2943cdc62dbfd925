/**
 * FHIRPath's values as a client's expressions see them, through FHIRPath Patch `where()` criteria (the route that
 * evaluates any FHIRPath the engine does): `~` on decimals a double writes with an exponent, quantity arithmetic in
 * decimal, a Decimal's written precision in toString() (a literal's, and a stored decimal's as its JSON wrote it),
 * toChars() and type() (N1 § 5.6, § 10). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

/** A FHIRPath Patch replacing the element at `path` by `value` (a value[x] member). */
const replace = (path: string, value: Json): Json => ({
  resourceType: 'Parameters',
  parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: path }, { name: 'value', ...value }] }],
});

/** An Observation whose two components' quantities are written as given (JSON text: `2.0`, `1E-7` kept as written). */
const observation = (id: string, first: string, second: string): string => `{"resourceType":"Observation","id":"${id}","status":"final","code":{"text":"panel"},`
  + `"component":[{"code":{"text":"a"},"valueQuantity":{"value":${first},"unit":"g","system":"http://unitsofmeasure.org","code":"g"}},`
  + `{"code":{"text":"b"},"valueQuantity":{"value":${second},"unit":"g","system":"http://unitsofmeasure.org","code":"g"}}]}`;

await eachStore((kind, fresh) => {
  describe(`FHIRPath values in a FHIRPath Patch's where() (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let n = 0;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    /** Stores the Observation; patches the text of the one component `criteria` selects; answers the status and the components' texts. */
    async function renameComponent(first: string, second: string, criteria: string): Promise<{ status: number; texts?: string[] }> {
      const id = `o${++n}`;
      expect((await api.call('PUT', `Observation/${id}`, observation(id, first, second))).status).toBe(201);
      const res = await api.call('PATCH', `Observation/${id}`, replace(`Observation.component.where(${criteria}).code.text`, { valueString: 'chosen' }));
      if (res.status !== 200) return { status: res.status };
      const body = (await res.json()) as Json;
      return { status: 200, texts: (body.component as Json[]).map((c) => c.code.text as string) };
    }

    test('~ on decimals written with an exponent: 0.0000001 ~ 0.0000002 is false (it matched both components, a 400)', async () => {
      expect(await renameComponent('0.0000001', '0.0000002', 'value.value ~ 0.0000002')).toEqual({ status: 200, texts: ['a', 'chosen'] });
      expect(await renameComponent('1E-7', '2E-7', 'value.value ~ 0.0000002')).toEqual({ status: 200, texts: ['a', 'chosen'] });
      expect(await renameComponent('1E-7', '2E-7', "value ~ 0.0002 'mg'")).toEqual({ status: 200, texts: ['a', 'chosen'] });
      // Comparisons, which were right: guards.
      expect(await renameComponent('1E-7', '2E-7', 'value.value < 0.00000015')).toEqual({ status: 200, texts: ['chosen', 'b'] });
      expect(await renameComponent('1E-7', '2E-7', "value > 0.00015 'mg'")).toEqual({ status: 200, texts: ['a', 'chosen'] });
    });

    test('quantity arithmetic is decimal: (value / 3 * 3).value = 1 (15 digits made it 0.999999999999999)', async () => {
      expect(await renameComponent('1', '2', '(value / 3 * 3).value = 1')).toEqual({ status: 200, texts: ['chosen', 'b'] });
      expect(await renameComponent('0.1234567890123456', '2', "(value + 0 'mg').value = 123.4567890123456")).toEqual({ status: 200, texts: ['chosen', 'b'] });
    });

    test("toString() keeps a Decimal's precision: a literal's (1.0.toString() = '1.0') and a stored decimal's as its JSON wrote it", async () => {
      expect(await renameComponent('2.0', '2', "value.value.toString() = '2.0'")).toEqual({ status: 200, texts: ['chosen', 'b'] });
      expect(await renameComponent('1.50', '1.5', "value.toString() = '1.5 \\'g\\''")).toEqual({ status: 200, texts: ['a', 'chosen'] });
      expect(await renameComponent('1', '2', "$index = 0 and 1.0.toString() = '1.0' and (-0.50).toString() = '-0.50'")).toEqual({ status: 200, texts: ['chosen', 'b'] });
    });

    test('toChars() and type() are evaluated (they were refused: a 400)', async () => {
      const id = `p${++n}`;
      await api.put200({ resourceType: 'Patient', id, active: true, name: [{ family: 'Chalmers', given: ['Peter', 'Jim'] }] });
      const res = await api.call('PATCH', `Patient/${id}`, replace("Patient.name.given.where(toChars().count() = 3 and type().name = 'string' and type().namespace = 'FHIR')", { valueString: 'James' }));
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).name[0].given).toEqual(['Peter', 'James']);
      const typed = await api.call('PATCH', `Patient/${id}`, replace("Patient.active.where(%resource.type().name = 'Patient' and 'x'.type().namespace = 'System' and $this.type().name = 'boolean')", { valueBoolean: false }));
      expect(typed.status).toBe(200);
      expect(((await typed.json()) as Json).active).toBe(false);
      // Many items to toChars() is an error: a 400 naming the operation, nothing written.
      const before = await countVersions(t);
      const outcome = await expectOutcome(await api.call('PATCH', `Patient/${id}`, replace('Patient.active.where(%resource.name.given.toChars().exists())', { valueBoolean: true })), 400);
      expect(outcome.issue[0].expression).toEqual(['Parameters.parameter[0]']);
      expect(await countVersions(t)).toBe(before);
    });
  });
});
