/**
 * A chain through a reference that may name any type (`Observation?focus.status=active`, R4's
 * `Reference(Any)`) names the target type of every type with the chained parameter: over a hundred
 * alternatives, past the most tests a search holds. On both databases it is answered from the types
 * the tenant holds (and the contained resources it holds, for a chain's contained twin), as the store
 * would prune the others anyway; a chain that still holds too many tests is the 400 it was.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

const observation = (id: string, extra: Json): Json => ({ resourceType: 'Observation', id, status: 'final', code: { text: 'x' }, ...extra });

const DATA: Json[] = [
  { resourceType: 'Device', id: 'd1', status: 'active', deviceName: [{ name: 'Pump', type: 'user-friendly-name' }] },
  { resourceType: 'Device', id: 'd2', status: 'inactive' },
  { resourceType: 'Location', id: 'l1', status: 'active', name: 'Alpha wing' },
  { resourceType: 'Patient', id: 'p1', active: true, name: [{ family: 'Alpha' }] },
  observation('o1', { focus: [{ reference: 'Device/d1' }] }),
  observation('o2', { focus: [{ reference: 'Device/d2' }] }),
  observation('o3', { focus: [{ reference: 'Location/l1' }] }),
  observation('o4', { focus: [{ reference: '#c1' }], contained: [{ resourceType: 'Device', id: 'c1', status: 'active' }] }),
  observation('o5', { focus: [{ reference: 'Patient/p1' }] }),
];

await eachStore((kind, fresh) => {
  describe(`chains through a reference to any type, on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const found = async (query: string) => ids(await api.search(query)).sort();

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('every type the tenant holds is reached, stored or contained', async () => {
      expect(await found('Observation?focus.status=active')).toEqual(['o1', 'o3', 'o4']);
      expect(await found('Observation?focus.status=inactive')).toEqual(['o2']);
      expect(await found('Observation?focus.name=alpha')).toEqual(['o3', 'o5']);
      expect(await found('Observation?focus.status=active,inactive&code:text=x')).toEqual(['o1', 'o2', 'o3', 'o4']);
      // The same as the chains naming each type.
      expect(await found('Observation?focus:Device.status=active')).toEqual(['o1', 'o4']);
      // Strict handling changes nothing: no parameter is ignored.
      const strict = await api.get('Observation?focus.status=active', { Prefer: 'handling=strict' });
      expect(strict.status).toBe(200);
      expect(ids(await strict.json()).sort()).toEqual(['o1', 'o3', 'o4']);
    });

    test('the same across types, in _filter, and in a GraphQL connection\'s page and count', async () => {
      expect(await found('?_type=Observation&focus.status=active')).toEqual(['o1', 'o3', 'o4']);
      expect(await found(`Observation?_filter=${encodeURIComponent('focus.status eq active')}`)).toEqual(['o1', 'o3', 'o4']);
      const query = '{ ObservationConnection(_filter: "focus.status eq active", _count: 2) { count edges { resource { id } } } }';
      const res = await api.post('$graphql', JSON.stringify({ query }), { 'Content-Type': 'application/json' });
      const body = (await res.json()) as Json;
      expect({ status: res.status, errors: body.errors }).toEqual({ status: 200, errors: undefined });
      expect(body.data.ObservationConnection.count).toBe(3);
      expect(body.data.ObservationConnection.edges).toHaveLength(2);
    });

    test('a chain whose every target in the tenant\'s data fails matches nothing, without a 400', async () => {
      expect(await found('Observation?focus.subject=Patient/p1')).toEqual([]);
      expect(await found('Patient?_has:Observation:patient:focus.code=x')).toEqual([]);
    });

    test('a search that still holds too many tests is a 400 too-costly', async () => {
      // Each value of a chain's parameter repeats the chain for every type it names.
      const values = Array.from({ length: 60 }, (_, i) => `focus.status=s${i}`).join('&');
      await expectOutcome(await api.get(`Observation?${values}`), 400, 'too-costly');
    });
  });
});
