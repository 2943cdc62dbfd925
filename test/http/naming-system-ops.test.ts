/**
 * `NamingSystem/$preferred-id` (R4 NamingSystem-preferred-id) and `$versions` (R4
 * CapabilityStatement-versions) on both databases: GET and POST, the identifier's forms, the preferred
 * one, OIDs plain, each error naming its parameter, and access (a search's).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const IHI = 'http://ns.electronichealth.net.au/id/hi/ihi/1.0';

await eachStore((kind, fresh) => {
  describe(`NamingSystem/$preferred-id and $versions (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ns = (id: string, uniqueId: Json[], status = 'active') => api.put200({
      resourceType: 'NamingSystem', id, name: id, status, kind: 'identifier', date: '2026-01-01', uniqueId,
    });
    const result = async (path: string) => {
      const res = await api.get(path);
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
      return ((await res.json()) as Json).parameter;
    };
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      // As R4's example: an OID, and two URIs of which one is preferred.
      await ns('ihi', [
        { type: 'oid', value: '1.2.36.1.2001.1003.0' },
        { type: 'uri', value: 'http://example.org/old-ihi' },
        { type: 'uri', value: IHI, preferred: true },
      ]);
      await ns('urn-oid', [{ type: 'oid', value: 'urn:oid:2.16.840.1.113883.6.1' }, { type: 'uri', value: 'http://loinc.org' }, { type: 'other', value: 'LN' }]);
      await ns('twin-a', [{ type: 'uri', value: 'http://example.org/twin' }, { type: 'oid', value: '1.2.3.4' }]);
      await ns('twin-b', [{ type: 'uri', value: 'http://example.org/twin' }]);
      await ns('retired', [{ type: 'uri', value: 'http://example.org/only-retired' }, { type: 'oid', value: '1.2.3.5' }], 'retired');
    });
    afterAll(() => t.close());

    test('the preferred identifier of the requested type, by any of the system\'s identifiers', async () => {
      expect(await result('NamingSystem/$preferred-id?id=1.2.36.1.2001.1003.0&type=uri')).toEqual([{ name: 'result', valueString: IHI }]);
      expect(await result('NamingSystem/$preferred-id?id=urn:oid:1.2.36.1.2001.1003.0&type=uri')).toEqual([{ name: 'result', valueString: IHI }]);
      expect(await result(`NamingSystem/$preferred-id?id=${encodeURIComponent('http://example.org/old-ihi')}&type=oid`)).toEqual([{ name: 'result', valueString: '1.2.36.1.2001.1003.0' }]);
      // An OID recorded as urn:oid: is answered plain; found by its plain form too.
      expect(await result(`NamingSystem/$preferred-id?id=${encodeURIComponent('http://loinc.org')}&type=oid`)).toEqual([{ name: 'result', valueString: '2.16.840.1.113883.6.1' }]);
      expect(await result('NamingSystem/$preferred-id?id=2.16.840.1.113883.6.1&type=other')).toEqual([{ name: 'result', valueString: 'LN' }]);
      const post = await api.post('NamingSystem/$preferred-id', { resourceType: 'Parameters', parameter: [{ name: 'id', valueString: 'LN' }, { name: 'type', valueCode: 'uri' }] });
      expect(post.status).toBe(200);
      expect(((await post.json()) as Json).parameter).toEqual([{ name: 'result', valueString: 'http://loinc.org' }]);
    });

    test('errors: unknown identifier, no identifier of the type, two systems, a bad or missing parameter', async () => {
      expect((await expectOutcome(await api.get('NamingSystem/$preferred-id?id=http://nowhere.org&type=uri'), 404)).issue[0].expression).toEqual(['id']);
      // A retired NamingSystem is not consulted.
      expect((await expectOutcome(await api.get('NamingSystem/$preferred-id?id=1.2.3.5&type=uri'), 404)).issue[0].expression).toEqual(['id']);
      expect((await expectOutcome(await api.get('NamingSystem/$preferred-id?id=1.2.36.1.2001.1003.0&type=uuid'), 404)).issue[0].expression).toEqual(['type']);
      expect((await expectOutcome(await api.get('NamingSystem/$preferred-id?id=http://example.org/twin&type=oid'), 422)).issue[0].expression).toEqual(['id']);
      const cases: [string, string][] = [
        ['type=uri', 'id'], ['id=x', 'type'], ['id=x&type=url', 'type'], ['id=x&id=y&type=uri', 'id'],
      ];
      // A parameter $preferred-id does not take is ignored, or a 400 naming it under strict handling.
      expect((await api.get('NamingSystem/$preferred-id?id=LN&type=uri&system=y')).status).toBe(200);
      expect((await expectOutcome(await api.get('NamingSystem/$preferred-id?id=LN&type=uri&system=y', { prefer: 'handling=strict' }), 400)).issue[0].expression).toEqual(['system']);
      for (const [query, expression] of cases) {
        const o = await expectOutcome(await api.get(`NamingSystem/$preferred-id?${query}`), 400);
        expect({ query, expression: o.issue[0].expression }).toEqual({ query, expression: [expression] });
      }
    });

    test('access is a search of NamingSystem', async () => {
      await expectOutcome(await fhirClient(t, await craftToken(t, 'system/Patient.rs')).get('NamingSystem/$preferred-id?id=1.2.3.4&type=uri'), 403);
      const reader = fhirClient(t, await craftToken(t, 'system/NamingSystem.s'));
      expect((await reader.get('NamingSystem/$preferred-id?id=LN&type=uri')).status).toBe(200);
      // A patient-context token reads NamingSystems (outside any patient's compartment) as its scopes allow.
      expect((await fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p1' })).get('NamingSystem/$preferred-id?id=LN&type=uri')).status).toBe(200);
      await expectOutcome(await fhirClient(t, await craftToken(t, 'patient/Observation.rs', { patient: 'p1' })).get('NamingSystem/$preferred-id?id=LN&type=uri'), 403);
      // Another tenant's token sees none of this tenant's.
      await expectOutcome(await fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't1').get('NamingSystem/$preferred-id?id=LN&type=uri'), 403);
    });

    test('$versions: 4.0, the default, by GET and POST; it takes no parameter (another ignored, or a 400 under strict handling)', async () => {
      const expected = [{ name: 'version', valueCode: '4.0' }, { name: 'default', valueCode: '4.0' }];
      const get = await api.get('$versions');
      expect(get.status).toBe(200);
      expect((await get.json()) as Json).toEqual({ resourceType: 'Parameters', parameter: expected });
      const post = await api.post('$versions', { resourceType: 'Parameters' });
      expect(post.status).toBe(200);
      expect(((await post.json()) as Json).parameter).toEqual(expected);
      expect((await api.get('$versions?fhirVersion=3.0')).status).toBe(200);
      expect((await expectOutcome(await api.get('$versions?fhirVersion=3.0', { prefer: 'handling=strict' }), 400)).issue[0].expression).toEqual(['fhirVersion']);
    });

    test('the CapabilityStatement lists both', async () => {
      const cs = (await (await api.get('metadata')).json()) as Json;
      expect(cs.rest[0].operation).toContainEqual({ name: 'versions', definition: 'http://hl7.org/fhir/OperationDefinition/CapabilityStatement-versions' });
      const n = cs.rest[0].resource.find((r: Json) => r.type === 'NamingSystem');
      expect(n.operation).toContainEqual({ name: 'preferred-id', definition: 'http://hl7.org/fhir/OperationDefinition/NamingSystem-preferred-id' });
    });
  });
});
