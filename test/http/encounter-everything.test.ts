/**
 * `Encounter/{id}/$everything` (R4 Encounter-everything) on both databases: the Encounter and its
 * compartment (R4 Encounter CompartmentDefinition) in order, what they refer to, paging by `_cursor`,
 * `_since`, `_type`, `_count`, GET and POST, errors, and the access of a read and of a search.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';

/** Every page from `first`: the matches and the included, as `Type/id`. */
async function walk(api: FhirClient, first: string) {
  const matches: string[] = [];
  const included: string[] = [];
  let pages = 0;
  for (let next: string | undefined = first; next; pages++) {
    if (pages === 100) throw new Error('more than 100 pages');
    const b = await api.search(next);
    for (const e of (b.entry ?? []) as Json[]) (e.search.mode === 'match' ? matches : included).push(`${e.resource.resourceType}/${e.resource.id}`);
    next = link(b, 'next');
  }
  return { matches, included, pages };
}

await eachStore((kind, fresh) => {
  describe(`Encounter/$everything (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const obs = (id: string, encounter: string, subject = 'p1', lab = true, extra: Json = {}) => api.put200({
      resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: `Patient/${subject}` },
      encounter: { reference: encounter }, category: [{ coding: [{ system: CAT, code: lab ? 'laboratory' : 'vital-signs' }] }], ...extra,
    });
    /** What e1's everything holds, in order. */
    const E1 = [
      'Encounter/e1', 'Condition/c1', 'DocumentManifest/dm1', 'MedicationAdministration/ma1',
      'Observation/o1', 'Observation/o2', 'Observation/o3', 'Observation/o4', 'Observation/o5', 'Observation/other-patient', 'Procedure/pr1',
    ];
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1' });
      await api.put200({ resourceType: 'Patient', id: 'p2' });
      await api.put200({ resourceType: 'Practitioner', id: 'dr' });
      await api.put200({ resourceType: 'Encounter', id: 'e1', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p1' }, participant: [{ individual: { reference: 'Practitioner/dr' } }] });
      await api.put200({ resourceType: 'Encounter', id: 'e2', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p1' }, partOf: { reference: 'Encounter/e1' } });
      for (const id of ['o3', 'o1', 'o5', 'o2']) await obs(id, 'Encounter/e1', 'p1', id !== 'o5');
      // An absolute reference under the tenant's base names the same Encounter.
      await obs('o4', `${t.fhir()}/Encounter/e1`);
      await obs('other-patient', 'Encounter/e1', 'p2');
      await obs('in-e2', 'Encounter/e2');
      await api.put200({ resourceType: 'Condition', id: 'c1', subject: { reference: 'Patient/p1' }, encounter: { reference: 'Encounter/e1' } });
      await api.put200({ resourceType: 'Procedure', id: 'pr1', status: 'completed', subject: { reference: 'Patient/p1' }, encounter: { reference: 'Encounter/e1' } });
      await api.put200({ resourceType: 'MedicationAdministration', id: 'ma1', status: 'completed', medicationCodeableConcept: { text: 'x' }, subject: { reference: 'Patient/p1' }, context: { reference: 'Encounter/e1' }, effectiveDateTime: '2024-01-01' });
      await api.put200({ resourceType: 'DocumentManifest', id: 'dm1', status: 'current', content: [{ reference: 'Binary/none' }], related: [{ ref: { reference: 'Encounter/e1' } }] });
    });
    afterAll(() => t.close());

    test('the Encounter first, then its compartment type by type in the definition\'s order, each by id; what they refer to included', async () => {
      const all = await walk(api, 'Encounter/e1/$everything');
      expect(all.matches).toEqual(E1);
      expect(all.included.sort()).toEqual(['Patient/p1', 'Patient/p2', 'Practitioner/dr']);
      const e2 = await walk(api, 'Encounter/e2/$everything');
      expect(e2.matches).toEqual(['Encounter/e2', 'Observation/in-e2']);
      expect(e2.included.sort()).toEqual(['Encounter/e1', 'Patient/p1']);
      const post = await api.post('Encounter/e1/$everything', { resourceType: 'Parameters', parameter: [{ name: '_count', valueInteger: 1000 }] });
      expect(post.status).toBe(200);
      expect(((await post.json()) as Json).entry.filter((e: Json) => e.search.mode === 'match').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`)).toEqual(E1);
    });

    test('paging by _cursor at every page size gives the same matches once each; links carry the parameters', async () => {
      for (const count of [1, 2, 3, 4, 5, 10, 11, 12]) {
        const r = await walk(api, `Encounter/e1/$everything?_count=${count}`);
        expect({ count, matches: r.matches }).toEqual({ count, matches: E1 });
        expect(r.pages).toBe(Math.max(1, Math.ceil(E1.length / count)));
      }
      const first = await api.search('Encounter/e1/$everything?_count=2&_type=Observation');
      expect(link(first, 'next')).toContain('_type=Observation');
      expect(link(first, 'next')).toContain('_count=2');
    });

    test('_type and _since narrow the matches', async () => {
      expect((await walk(api, 'Encounter/e1/$everything?_type=Observation,Condition')).matches).toEqual(E1.filter((r) => r.startsWith('Observation/') || r.startsWith('Condition/')));
      const typed = await walk(api, 'Encounter/e1/$everything?_type=Observation');
      expect(typed.included).toEqual([]);
      t.clock.advance(60_000);
      const since = new Date(t.clock.now()).toISOString();
      await obs('o2', 'Encounter/e1', 'p1', true, { valueString: 'changed' });
      expect((await walk(api, `Encounter/e1/$everything?_since=${since}`)).matches).toEqual(['Observation/o2']);
    });

    test('_count=0: no entries, the total of the matches its pages hold, as a search\'s', async () => {
      const all = await walk(api, 'Encounter/e1/$everything?_count=3');
      const counted = await api.search('Encounter/e1/$everything?_count=0');
      expect(counted.total).toBe(all.matches.length);
      expect(counted.entry).toBeUndefined();
      expect(link(counted, 'next')).toBeUndefined();
      expect((await api.search('Encounter/e1/$everything?_count=0&_type=Observation')).total).toBe(all.matches.filter((m) => m.startsWith('Observation/')).length);
    });

    test('errors: unknown or deleted Encounter, a bad _count or _cursor, no type-level form', async () => {
      await expectOutcome(await api.get('Encounter/nope/$everything'), 404);
      await api.put200({ resourceType: 'Encounter', id: 'gone', status: 'finished', class: { code: 'AMB' } });
      await api.del('Encounter/gone');
      await expectOutcome(await api.get('Encounter/gone/$everything'), 410);
      expect((await expectOutcome(await api.get('Encounter/e1/$everything?_count=-1'), 400)).issue[0].expression).toEqual(['_count']);
      expect((await expectOutcome(await api.get('Encounter/e1/$everything?_cursor=bogus'), 400)).issue[0].expression).toEqual(['_cursor']);
      // _since is an instant, as for history: a search prefix is no part of it (`lt` was taken as `ge`).
      for (const since of ['lt2026-01-01', 'ge2026', 'yesterday']) {
        expect((await expectOutcome(await api.get(`Encounter/e1/$everything?_since=${since}`), 400)).issue[0].expression).toEqual(['_since']);
        expect((await expectOutcome(await api.get(`Patient/p1/$everything?_since=${since}`), 400)).issue[0].expression).toEqual(['_since']);
      }
      expect((await expectOutcome(await api.get('Encounter/e1/$everything?start=2020', { Prefer: 'handling=strict' }), 400)).issue[0].expression).toEqual(['start']);
      await expectOutcome(await api.get('Encounter/$everything'), 404);
    });

    test('access: the Encounter must be readable; each type\'s filter and patient context bound its rows', async () => {
      await expectOutcome(await fhirClient(t, await craftToken(t, 'system/Observation.rs')).get('Encounter/e1/$everything'), 403);
      await expectOutcome(await fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p2' })).get('Encounter/e1/$everything'), 403);
      const own = await walk(fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p1' })), 'Encounter/e1/$everything?_count=2');
      expect(own.matches).toEqual(E1.filter((r) => r !== 'Observation/other-patient' && r !== 'DocumentManifest/dm1'));
      // Included once per page, as Patient/$everything's: on later pages the Encounter too; never p2.
      expect([...new Set(own.included)].sort()).toEqual(['Encounter/e1', 'Patient/p1', 'Practitioner/dr']);
      const labs = await walk(fhirClient(t, await craftToken(t, `system/Encounter.rs system/Observation.rs?category=${CAT}|laboratory`)), 'Encounter/e1/$everything?_count=3');
      expect(labs.matches).toEqual(['Encounter/e1', 'Observation/o1', 'Observation/o2', 'Observation/o3', 'Observation/o4', 'Observation/other-patient']);
      const other = fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't1');
      await expectOutcome(await other.get('Encounter/e1/$everything'), 403);
    });
  });
});

await eachStore((kind, fresh) => {
  describe(`Encounter/$everything includes the Binaries its attachments name (${kind})`, () => {
    test('a DocumentReference of the encounter brings its attachment\'s Binary as an include entry', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const api = fhirClient(t, await t.token());
        await api.put200({ resourceType: 'Patient', id: 'p1' });
        await api.put200({ resourceType: 'Encounter', id: 'e9', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p1' } });
        await api.put200({ resourceType: 'Binary', id: 'b9', contentType: 'text/plain', data: 'aGVsbG8=', securityContext: { reference: 'DocumentReference/dr9' } });
        await api.put200({
          resourceType: 'DocumentReference', id: 'dr9', status: 'current', subject: { reference: 'Patient/p1' },
          context: { encounter: [{ reference: 'Encounter/e9' }] }, content: [{ attachment: { contentType: 'text/plain', url: 'Binary/b9' } }],
        });
        const b = await api.search('Encounter/e9/$everything');
        expect(b.entry.map((e: Json) => `${e.search.mode} ${e.resource.resourceType}/${e.resource.id}`)).toEqual([
          'match Encounter/e9', 'match DocumentReference/dr9', 'include Patient/p1', 'include Binary/b9',
        ]);
      } finally {
        await t.close();
      }
    });
  });
});
