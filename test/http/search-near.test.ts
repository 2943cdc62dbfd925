/**
 * `Location?near=[latitude]|[longitude]|[distance]|[units]` (R4 Location-near, src/fhir/near.ts) on
 * both databases: positions within the great-circle distance, in every unit and with the default
 * distance, across the antimeridian and a pole, ORed and ANDed, `:missing`, malformed values, the
 * in-memory matcher (a SMART scope filter), the CapabilityStatement and the reindex that gives stored
 * Locations their rows. Expected answers come from the test's own distance formula (the atan2 form of
 * the haversine, on the same mean radius), and a generated set of positions is compared with it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { reindex, INDEX_MODEL } from '../../src/fhir/reindex.ts';
import { storedIndex } from '../../src/fhir/indexer.ts';
import type { TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const R = 6371.0088;

/** Great-circle distance in km (atan2 form of the haversine). */
function distanceKm(lat1: number, long1: number, lat2: number, long2: number): number {
  const rad = Math.PI / 180;
  const a = Math.sin(((lat2 - lat1) * rad) / 2) ** 2 + Math.cos(lat1 * rad) * Math.cos(lat2 * rad) * Math.sin(((long2 - long1) * rad) / 2) ** 2;
  return 2 * R * Math.atan2(Math.sqrt(a), Math.sqrt(1 - a));
}

const PLACES: [string, number, number][] = [
  ['ann-arbor', 42.2808, -83.743],
  ['ypsilanti', 42.2411, -83.613],
  ['detroit', 42.3314, -83.0458],
  ['chicago', 41.8781, -87.6298],
  // Either side of the antimeridian, about 17 km apart.
  ['taveuni', -16.8, 179.98],
  ['rabi', -16.9, -179.9],
  // Either side of the north pole, about 22 km apart.
  ['pole-0', 89.9, 0],
  ['pole-180', 89.9, 180],
];

const location = (id: string, latitude: number, longitude: number): Json => ({
  resourceType: 'Location', id, name: id, position: { latitude, longitude },
});

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`near on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ids = async (query: string) => ((await api.search(`Location?${query}&_count=1000`)).entry ?? []).map((e: Json) => e.resource.id as string).sort();
    /** The places within `km` of (lat, long), by the test's own formula. */
    const within = (lat: number, long: number, km: number) => PLACES.filter(([, a, b]) => distanceKm(lat, long, a, b) <= km).map(([id]) => id).sort();

    beforeAll(async () => {
      ({ t, api } = await appOnFresh(target));
      for (const [id, lat, long] of PLACES) await api.put200(location(id, lat, long));
      await api.put200({ resourceType: 'Location', id: 'nowhere', name: 'nowhere' });
      // Out of range: not a position, so no row.
      await api.put200({ resourceType: 'Location', id: 'bad', name: 'bad', position: { latitude: 95, longitude: 10 } });
    });
    afterAll(() => t.close());

    test('positions within the distance, in each unit; the default distance is 10 km', async () => {
      expect(distanceKm(42.2808, -83.743, 42.2411, -83.613)).toBeGreaterThan(10);
      expect(await ids('near=42.2808|-83.743|20|km')).toEqual(['ann-arbor', 'ypsilanti']);
      expect(await ids('near=42.2808|-83.743|20')).toEqual(['ann-arbor', 'ypsilanti']);
      expect(await ids('near=42.2808|-83.743|60')).toEqual(within(42.2808, -83.743, 60));
      expect(await ids('near=42.2808|-83.743|60')).toContain('detroit');
      expect(await ids('near=42.2808|-83.743|60000|m')).toEqual(within(42.2808, -83.743, 60));
      expect(await ids('near=42.2808|-83.743|37|[mi_i]')).toEqual(within(42.2808, -83.743, 37 * 1.609344));
      expect(await ids('near=42.2808|-83.743|30|[mi_i]')).toEqual(['ann-arbor', 'ypsilanti']);
      expect(await ids('near=42.2808|-83.743|31|[nmi_i]')).toEqual(within(42.2808, -83.743, 31 * 1.852));
      expect(await ids('near=42.2808|-83.743')).toEqual(['ann-arbor']);
      expect(await ids('near=42.2808|-83.743||km')).toEqual(['ann-arbor']);
      expect(await ids('near=42.2808|-83.743|0')).toEqual(['ann-arbor']);
      // Half the globe or more: every position.
      expect(await ids('near=0|0|20100')).toEqual(PLACES.map(([id]) => id).sort());
    });

    test('across the antimeridian and a pole', async () => {
      expect(await ids('near=-16.8|179.98|25')).toEqual(['rabi', 'taveuni']);
      expect(await ids('near=-16.9|-179.9|25')).toEqual(['rabi', 'taveuni']);
      expect(await ids('near=-16.9|-179.9|5')).toEqual(['rabi']);
      expect(await ids('near=89.9|0|25')).toEqual(['pole-0', 'pole-180']);
      expect(await ids('near=90|45|12')).toEqual(['pole-0', 'pole-180']);
    });

    test('comma ORs points; other parameters AND; :missing', async () => {
      expect(await ids('near=42.2808|-83.743|5,41.8781|-87.6298|5')).toEqual(['ann-arbor', 'chicago']);
      expect(await ids('near=42.2808|-83.743|20&name=ypsi')).toEqual(['ypsilanti']);
      expect(await ids('near=42.2808|-83.743|5&near=42.2411|-83.613|20')).toEqual(['ann-arbor']);
      expect(await ids('near:missing=true')).toEqual(['bad', 'nowhere']);
      expect((await ids('near:missing=false')).length).toBe(PLACES.length);
      // Chained: Encounters at a Location near a point.
      await api.put200({ resourceType: 'Encounter', id: 'e1', status: 'finished', class: { code: 'AMB' }, location: [{ location: { reference: 'Location/ypsilanti' } }] });
      await api.put200({ resourceType: 'Encounter', id: 'e2', status: 'finished', class: { code: 'AMB' }, location: [{ location: { reference: 'Location/chicago' } }] });
      const encounters = async (q: string) => ((await api.search(`Encounter?${q}`)).entry ?? []).map((e: Json) => e.resource.id).sort();
      expect(await encounters('location.near=42.2808|-83.743|20')).toEqual(['e1']);
      expect(await encounters('location.near=42.2808|-83.743|400')).toEqual(['e1', 'e2']);
    });

    test('a generated set of positions matches the distance formula', async () => {
      let seed = 7;
      const random = () => ((seed = (seed * 48271) % 2147483647) / 2147483647);
      const generated: [string, number, number][] = Array.from({ length: 300 }, (_, i) => [`g${i}`, 40 + random() * 6, -90 + random() * 8]);
      for (const [id, lat, long] of generated) await api.put200(location(id, lat, long));
      for (let q = 0; q < 12; q++) {
        const [lat, long, km] = [40 + random() * 6, -90 + random() * 8, 10 + random() * 200];
        const expected = [...PLACES, ...generated].filter(([, a, b]) => distanceKm(lat, long, a, b) <= km).map(([id]) => id).sort();
        // Points at the very edge could round either way: none are allowed within a metre of it.
        const edge = [...PLACES, ...generated].some(([, a, b]) => Math.abs(distanceKm(lat, long, a, b) - km) < 0.001);
        if (edge) continue;
        expect({ q: [lat, long, km], ids: await ids(`near=${lat}|${long}|${km}`) }).toEqual({ q: [lat, long, km], ids: expected });
      }
      for (const [id] of generated) expect((await t.request(`${t.fhir()}/Location/${id}`, { method: 'DELETE', headers: { Authorization: `Bearer ${await t.token()}` } })).status).toBe(200);
    });

    test('malformed values are a 400 naming the parameter', async () => {
      const many = Array.from({ length: 1001 }, (_, i) => `${(i % 80) + 0.5}|10|1`).join(',');
      await expectOutcome(await t.request(`${t.fhir()}/Location?near=${encodeURIComponent(many)}`, { headers: { Authorization: `Bearer ${await t.token()}` } }), 400, 'too-costly');
      expect((await api.search(`Location?near=${encodeURIComponent(many.split(',').slice(0, 1000).join(','))}`)).resourceType).toBe('Bundle');
      for (const q of ['near=abc|1', 'near=91|0', 'near=0|181', 'near=1', 'near=1|2|3|4|5', 'near=1|2|-3', 'near=1|2|3|furlong', 'near:exact=1|2']) {
        const body = await expectOutcome(await t.request(`${t.fhir()}/Location?${q.replaceAll('|', '%7C').replaceAll('[', '%5B').replaceAll(']', '%5D')}`, {
          headers: { Authorization: `Bearer ${await t.token()}` },
        }), 400);
        expect(body.issue[0].expression[0]).toStartWith('near');
      }
    });

    test('a scope filter with near admits the Locations within it (the in-memory matcher)', async () => {
      const near = fhirClient(t, await t.tokenFor('t1', ['system/Location.rs?near=42.2808|-83.743|20']));
      expect((await near.get('Location/ypsilanti')).status).toBe(200);
      await expectOutcome(await near.get('Location/chicago'), 403);
      expect(((await near.search('Location?_count=100')).entry ?? []).map((e: Json) => e.resource.id).sort()).toEqual(['ann-arbor', 'ypsilanti']);
    });

    test('the CapabilityStatement lists near', async () => {
      const cs = (await (await t.request(`${t.fhir()}/metadata`)).json()) as Json;
      const loc = cs.rest[0].resource.find((r: Json) => r.type === 'Location');
      const param = loc.searchParam.find((p: Json) => p.name === 'near');
      expect(param).toMatchObject({ type: 'special', definition: 'http://hl7.org/fhir/SearchParameter/Location-near' });
      expect(param.documentation).toContain('[latitude]|[longitude]|[distance]|[units]');
      expect(loc.documentation).not.toContain('Not searchable');
    });

    test('a database of index model 3 gets the positions by the reindex at start', async () => {
      // As model 3 wrote them: no position rows.
      const page = await t.store.resources.indexing.page(0, 1000);
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.filter((r) => r.type === 'Location').map((r) => {
        const index = storedIndex(JSON.parse(r.content));
        index.ranges = index.ranges.filter((e) => e.param !== 'near');
        return { type: r.type, id: r.id, index, compartments: [] };
      })));
      await t.store.resources.indexing.setState({ model: 3, after: 0 });
      expect(await ids('near=42.2808|-83.743|20')).toEqual([]);
      const run = await reindex(t.store);
      expect(run).toMatchObject({ ran: true, rebuilt: PLACES.length + 1 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      expect(await ids('near=42.2808|-83.743|20')).toEqual(['ann-arbor', 'ypsilanti']);
    });
  });
}
