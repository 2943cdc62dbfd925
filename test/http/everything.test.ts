/**
 * `Patient/$everything` (R4 Patient-everything) across patients, on both databases: the order (patients
 * by id, each patient's Patient first and then its compartment's types in order, each type's rows by
 * id), paging by `_cursor` with its links, `_since`, `_type`, `_count`, a patient-context token, SMART
 * scope filters and what is included. The expected rows are worked out here from what was written, and
 * the type-level pages are checked against the instance-level everythings of the live patients, at
 * page sizes that cut across empty and full compartments (and the server's batches of patients) anywhere.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const T0 = Date.parse('2026-01-15T10:00:00Z');
const T1 = T0 + 60_000;
const SINCE = '2026-01-15T10:01:00Z';
const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
/** The compartment's types this data uses, in `$everything`'s order (Patient, then the CompartmentDefinition's). */
const ORDER = ['Patient', 'Condition', 'Encounter', 'Group', 'Observation'];

/** A resource written, with the patients whose compartments hold it and when it was last written. */
interface Held {
  type: string;
  id: string;
  patients: string[];
  at: number;
  lab?: boolean;
}

const PATIENTS = Array.from({ length: 30 }, (_, i) => `p${String(i).padStart(2, '0')}`);
/** The patients with records; the others' compartments hold their Patient alone. */
const FULL = ['p01', 'p02', 'p05', 'p06', 'p07', 'p13', 'p16', 'p17', 'p20', 'p21', 'p29'];

/**
 * What `Patient/{id}/$everything` holds for each of `patients`, in order, as `Type/id`; with `firstOnly`,
 * what the type-level `Patient/$everything` holds: a resource in several of their compartments under the
 * first of them alone (`patients` are the live ones, in id order).
 */
function expected(held: Held[], patients: string[], opts: { since?: number; types?: string[]; keep?: (h: Held) => boolean; firstOnly?: boolean } = {}): string[] {
  const owner = (h: Held, p: string) => !opts.firstOnly || h.type === 'Patient' || patients.find((q) => h.patients.includes(q)) === p;
  return patients.flatMap((p) => ORDER.filter((type) => !opts.types || opts.types.includes(type)).flatMap((type) => held
    .filter((h) => h.type === type && h.patients.includes(p) && (type !== 'Patient' || h.id === p) && h.at >= (opts.since ?? 0) && (opts.keep?.(h) ?? true) && owner(h, p))
    .map((h) => h.id).sort().map((id) => `${type}/${id}`)));
}

/** Every page from `first`: the matches (`Type/id`), the included (`+Type/id`) of each page, the Bundles. */
async function walk(api: FhirClient, first: string) {
  const matches: string[] = [];
  const pages: Json[] = [];
  for (let next: string | undefined = first; next; next = link(pages[pages.length - 1]!, 'next')) {
    if (pages.length === 500) throw new Error(`${first}: more than 500 pages`);
    pages.push(await api.search(next));
  }
  for (const b of pages) matches.push(...(b.entry ?? []).filter((e: Json) => e.search.mode === 'match').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`));
  const included = pages.map((b) => (b.entry ?? []).filter((e: Json) => e.search.mode === 'include').map((e: Json) => `+${e.resource.resourceType}/${e.resource.id}`));
  return { matches, included, pages };
}

await eachStore((kind, fresh) => {
  describe(`Patient/$everything across patients on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const held: Held[] = [];
    let live: string[];
    const write = async (resource: Json, patients: string[], extra: Partial<Held> = {}) => {
      await api.put200(resource);
      const at = t.clock.now();
      const i = held.findIndex((h) => h.type === resource.resourceType && h.id === resource.id);
      if (i >= 0) held.splice(i, 1);
      held.push({ type: resource.resourceType, id: resource.id, patients, at, ...extra });
    };
    const observation = (id: string, subject: string, lab: boolean, more: Json = {}) => write({
      resourceType: 'Observation', id, status: 'final', subject: { reference: `Patient/${subject}` }, code: { text: id },
      category: [{ coding: [{ system: CAT, code: lab ? 'laboratory' : 'vital-signs' }] }], performer: [{ reference: 'Practitioner/dr' }], ...more,
    }, [subject, ...((more.performer as Json[] | undefined) ?? []).map((r) => r.reference.split('/')[1]).filter((p: string) => p !== subject && PATIENTS.includes(p))], { lab });
    /** The instance-level everythings of the live patients, one after another. */
    const union = async (client: FhirClient, query = '') => {
      const out: string[] = [];
      for (const p of live) out.push(...(await walk(client, `Patient/${p}/$everything?_count=1000${query}`)).matches);
      return out;
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Practitioner', id: 'dr', name: [{ family: 'House' }] });
      for (const p of [...PATIENTS, 'p15x']) await write({ resourceType: 'Patient', id: p, gender: 'other' }, [p]);
      // p03 links to p02, which puts it in p02's compartment: no Patient but the patient is its everything's.
      await write({ resourceType: 'Patient', id: 'p03', link: [{ other: { reference: 'Patient/p02' }, type: 'seealso' }] }, ['p03', 'p02']);
      for (const [n, p] of FULL.entries()) {
        for (let k = 0; k <= n % 4; k++) await observation(`o-${p}-${k}`, p, k % 2 === 0);
        if (n % 3 !== 1) await write({ resourceType: 'Condition', id: `c-${p}`, subject: { reference: `Patient/${p}` }, code: { text: 'x' } }, [p]);
        if (n % 2 === 0) await write({ resourceType: 'Encounter', id: `e-${p}`, status: 'finished', class: { code: 'AMB' }, subject: { reference: `Patient/${p}` } }, [p]);
      }
      // Ids in bytewise order 'A-1' < 'Z' < 'a.2' < 'b'; one Observation in two compartments; a Group of two.
      for (const id of ['b', 'a.2', 'Z', 'A-1']) await observation(id, 'p07', id !== 'Z');
      await observation('o-shared', 'p05', true, { performer: [{ reference: 'Patient/p06' }] });
      await write({ resourceType: 'Group', id: 'g', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p01' } }, { entity: { reference: 'Patient/p02' } }] }, ['p01', 'p02']);
      // An Observation of a patient never written, and of one deleted: in no live patient's everything;
      // beside a live one (a performer), that one's alone, though the other's id comes first.
      await observation('o-ghost', 'ghost', true);
      await observation('o-p15x', 'p15x', true);
      await observation('o-ghost-p09', 'ghost', true, { performer: [{ reference: 'Practitioner/dr' }, { reference: 'Patient/p09' }] });
      await observation('o-p15x-p16', 'p15x', true, { performer: [{ reference: 'Practitioner/dr' }, { reference: 'Patient/p16' }] });
      expect((await api.del('Patient/p15x')).status).toBe(200);
      held.splice(held.findIndex((h) => h.id === 'p15x'), 1);
      // A minute later: a new Observation, a Condition and a Patient updated, a new empty Patient.
      t.clock.set(T1);
      await observation('o-late', 'p20', true);
      await write({ resourceType: 'Condition', id: 'c-p06', subject: { reference: 'Patient/p06' }, code: { text: 'y' } }, ['p06']);
      await write({ resourceType: 'Patient', id: 'p21', gender: 'female' }, ['p21']);
      await write({ resourceType: 'Patient', id: 'p30', gender: 'other' }, ['p30']);
      live = [...PATIENTS, 'p30'];
    });
    afterAll(() => t.close());

    test('the pages hold every live patient\'s everything in id order, at every page size, as its instance-level everything does', async () => {
      const each = expected(held, live);
      const all = expected(held, live, { firstOnly: true });
      expect(all.slice(0, 7)).toEqual(['Patient/p00', 'Patient/p01', 'Condition/c-p01', 'Encounter/e-p01', 'Group/g', 'Observation/o-p01-0', 'Patient/p02']);
      expect(all.filter((x) => x.startsWith('Observation/') && held.find((h) => `Observation/${h.id}` === x)!.patients.includes('p07'))).toEqual(
        ['Observation/A-1', 'Observation/Z', 'Observation/a.2', 'Observation/b', 'Observation/o-p07-0']);
      // The instance-level everythings hold a shared resource each; the type level holds it once, with its first live patient.
      expect(await union(api)).toEqual(each);
      const times = (list: string[], x: string) => list.filter((y) => y === x).length;
      for (const shared of ['Group/g', 'Observation/o-shared']) expect([times(each, shared), times(all, shared)]).toEqual([2, 1]);
      for (const single of ['Observation/o-ghost-p09', 'Observation/o-p15x-p16']) expect([times(each, single), times(all, single)]).toEqual([1, 1]);
      for (const count of [undefined, 1, 2, 3, 5, 8, 13, 1000]) {
        const { matches, pages } = await walk(api, `Patient/$everything${count ? `?_count=${count}` : ''}`);
        expect({ count, matches }).toEqual({ count, matches: all });
        // Full pages but the last, which is never empty.
        const size = count ?? 50;
        expect(pages.map((b) => (b.entry ?? []).filter((e: Json) => e.search.mode === 'match').length)).toEqual(
          Array.from({ length: Math.ceil(all.length / size) }, (_, i) => Math.min(size, all.length - i * size)));
      }
    });

    test('_since and _type narrow each patient\'s rows; the pages go on across patients with none', async () => {
      const since = expected(held, live, { since: T1 });
      expect(since).toEqual(['Condition/c-p06', 'Observation/o-late', 'Patient/p21', 'Patient/p30']);
      const typed = expected(held, live, { types: ['Observation', 'Condition'], firstOnly: true });
      for (const count of [1, 2, 1000]) {
        expect((await walk(api, `Patient/$everything?_since=${SINCE}&_count=${count}`)).matches).toEqual(since);
        expect((await walk(api, `Patient/$everything?_type=Observation,Condition&_count=${count}`)).matches).toEqual(typed);
        // R4's _type is 0..*: repeated, its lists add up (by POST too), and the links carry them all.
        expect((await walk(api, `Patient/$everything?_type=Observation&_type=Condition&_count=${count}`)).matches).toEqual(typed);
      }
      const posted = await api.post('Patient/$everything', { resourceType: 'Parameters', parameter: [{ name: '_type', valueString: 'Observation' }, { name: '_type', valueString: 'Condition' }, { name: '_count', valueInteger: 1000 }] });
      expect(((await posted.json()) as Json).entry.filter((e: Json) => e.search.mode === 'match').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`)).toEqual(typed);
      expect(link(await api.search('Patient/$everything?_type=Observation&_type=Condition&_count=1'), 'next')).toContain(`_type=${encodeURIComponent('Observation,Condition')}`);
      expect(await union(api, `&_since=${SINCE}`)).toEqual(since);
      expect((await walk(api, 'Patient/$everything?_type=Patient&_count=7')).matches).toEqual(live.map((p) => `Patient/${p}`));
      expect((await walk(api, `Patient/$everything?_type=Encounter&_since=${SINCE}`)).matches).toEqual([]);
      // A type outside the compartment is what the records refer to: these records name no Medication, so no page
      // holds any, though the pages read every patient's records to find that out (everything-type-outside.test.ts).
      const none = await walk(api, 'Patient/$everything?_type=Medication&_count=1000');
      expect(none.pages.flatMap((b) => b.entry ?? [])).toEqual([]);
    });

    test('each page after the first links itself by its _cursor and the first page; the links answer the same pages again', async () => {
      const { pages } = await walk(api, 'Patient/$everything?_count=4&_type=Patient,Condition,Observation');
      expect(pages.length).toBeGreaterThan(5);
      expect(link(pages[0]!, 'first')).toBeUndefined();
      for (const [i, page] of pages.entries()) {
        if (i === 0) continue;
        const self = link(page, 'self')!;
        expect(self).toBe(link(pages[i - 1]!, 'next')!);
        expect(new URL(self).searchParams.get('_cursor')).not.toBeNull();
        expect(link(page, 'first')).toBe(link(pages[0]!, 'self'));
        const again = await api.search(self);
        expect(again.entry).toEqual(page.entry);
        expect(again.link).toEqual(page.link);
      }
      expect(link(pages[pages.length - 1]!, 'next')).toBeUndefined();
    });

    test('what the matches refer to is included once per page, no other patient; _type restricts it', async () => {
      const { matches, included } = await walk(api, 'Patient/$everything?_count=1000');
      expect(matches).toContain('Group/g');
      expect(included).toEqual([['+Practitioner/dr']]);
      const paged = await walk(api, 'Patient/$everything?_count=3');
      for (const [i, page] of paged.pages.entries()) {
        // Every Observation but o-shared (performed by p06) names the Practitioner.
        const refers = (page.entry ?? []).some((e: Json) => e.search.mode === 'match' && e.resource.resourceType === 'Observation' && e.resource.id !== 'o-shared');
        expect({ i, included: paged.included[i] }).toEqual({ i, included: refers ? ['+Practitioner/dr'] : [] });
      }
      expect((await walk(api, 'Patient/$everything?_count=1000&_type=Observation')).included).toEqual([[]]);
    });

    test('a patient-context token sees its own patient\'s everything alone, paged', async () => {
      const own = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p05' }));
      const p05 = expected(held, ['p05']);
      expect(p05).toEqual(['Patient/p05', 'Condition/c-p05', 'Encounter/e-p05', 'Observation/o-p05-0', 'Observation/o-p05-1', 'Observation/o-p05-2', 'Observation/o-shared']);
      for (const count of [1, 2, 1000]) {
        expect((await walk(own, `Patient/$everything?_count=${count}`)).matches).toEqual(p05);
        expect((await walk(own, `Patient/p05/$everything?_count=${count}`)).matches).toEqual(p05);
      }
      await expectOutcome(await own.get('Patient/p06/$everything'), 403);
    });

    test("a patient-context token whose patient is deleted or unknown: Patient/$everything answers as Patient/{id}/$everything does", async () => {
      for (const [patient, status] of [['p15x', 410], ['ghost', 404]] as const) {
        const own = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient }));
        await expectOutcome(await own.get(`Patient/${patient}/$everything`), status);
        await expectOutcome(await own.get('Patient/$everything'), status);
        await expectOutcome(await own.call('POST', 'Patient/$everything', { resourceType: 'Parameters' }), status);
      }
    });

    test('a token bound to its patient for one type reads no other patient\'s resources of that type through $everything', async () => {
      // Patients of every kind, Observations of p05's compartment alone (as `Observation?` searches them with this token).
      const bound = fhirClient(t, await craftToken(t, 'patient/Observation.rs user/Patient.rs', { patient: 'p05' }));
      const ofP05 = (h: Held) => h.type !== 'Observation' || h.patients.includes('p05');
      const all = expected(held, live, { types: ['Patient', 'Observation'], keep: ofP05, firstOnly: true });
      expect(all.filter((x) => x.startsWith('Observation/'))).toEqual(['Observation/o-p05-0', 'Observation/o-p05-1', 'Observation/o-p05-2', 'Observation/o-shared']);
      for (const count of [1, 3, 1000]) expect((await walk(bound, `Patient/$everything?_count=${count}`)).matches).toEqual(all);
      expect((await walk(bound, 'Patient/p06/$everything')).matches).toEqual(['Patient/p06', 'Observation/o-shared']);
      expect((await walk(bound, 'Patient/p07/$everything')).matches).toEqual(['Patient/p07']);
    });

    test('SMART v2 scope filters leave out what they do not admit, however the pages fall', async () => {
      const lab = fhirClient(t, await craftToken(t, 'system/Patient.rs system/Observation.rs?category=laboratory system/Condition.rs?_id=c-p13,c-p29'));
      const kept = (h: Held) => (h.type !== 'Observation' || h.lab === true) && (h.type !== 'Condition' || ['c-p13', 'c-p29'].includes(h.id));
      const all = expected(held, live, { types: ['Patient', 'Observation', 'Condition'], keep: kept, firstOnly: true });
      expect(all).toContain('Condition/c-p13');
      expect(all).not.toContain('Observation/Z');
      for (const count of [1, 2, 5, 1000]) expect((await walk(lab, `Patient/$everything?_count=${count}`)).matches).toEqual(all);
      expect(await union(lab)).toEqual(expected(held, live, { types: ['Patient', 'Observation', 'Condition'], keep: kept }));
    });
  });
});

await eachStore((kind, fresh) => {
  describe(`Patient/$everything with a large compartment on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    /** Patient `big` has 1,005 Observations and a Condition, beside small and empty compartments; `a` performed three of them. */
    const BIG = Array.from({ length: 1005 }, (_, i) => `o${String(i).padStart(4, '0')}`);
    const BY_A = ['o0000', 'o0500', 'o1004'];

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      // Each of big's Observations a day after the one before, from 2023-01-01 (2024 holds o0365 to o0730).
      const day = (id: string) => new Date(Date.UTC(2023, 0, 1) + Number(id.slice(1)) * 86_400_000).toISOString().slice(0, 10);
      const obs = (id: string, subject: string) => put({
        resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: `Patient/${subject}` }, ...(subject === 'big' && { effectiveDateTime: day(id) }),
      });
      const entries = [
        ...['a', 'b', 'big', 'c', 'd'].map((id) => put({ resourceType: 'Patient', id })),
        obs('oa1', 'a'), obs('oa2', 'a'), obs('oc1', 'c'),
        put({ resourceType: 'Condition', id: 'cbig', subject: { reference: 'Patient/big' }, code: { text: 'x' } }),
        ...BIG.map((id) => (BY_A.includes(id) ? put({ ...obs(id, 'big').resource, performer: [{ reference: 'Patient/a' }] }) : obs(id, 'big'))),
      ];
      for (let i = 0; i < entries.length; i += 250) {
        const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries.slice(i, i + 250) });
        expect(res.status).toBe(200);
      }
    });
    afterAll(() => t.close());

    test('the pages read through it and on to the next patients, at every page size', async () => {
      // The three `a` performed are a's matches (a's id comes first), not big's again.
      const all = ['Patient/a', ...BY_A.map((id) => `Observation/${id}`), 'Observation/oa1', 'Observation/oa2', 'Patient/b', 'Patient/big', 'Condition/cbig',
        ...BIG.filter((id) => !BY_A.includes(id)).map((id) => `Observation/${id}`), 'Patient/c', 'Observation/oc1', 'Patient/d'];
      for (const count of [7, 400, 1000, 1002]) expect((await walk(api, `Patient/$everything?_count=${count}`)).matches).toEqual(all);
      expect((await walk(api, 'Patient/big/$everything?_count=300')).matches).toEqual(['Patient/big', 'Condition/cbig', ...BIG.map((id) => `Observation/${id}`)]);
      expect((await walk(api, 'Patient/$everything?_type=Patient,Condition&_count=2')).matches).toEqual(['Patient/a', 'Patient/b', 'Patient/big', 'Condition/cbig', 'Patient/c', 'Patient/d']);
    });

    test('start and end keep the Observations of those care dates, read type by type through the large compartment', async () => {
      const in2024 = BIG.slice(365, 731).map((id) => `Observation/${id}`);
      expect(in2024[0]).toBe('Observation/o0365');
      for (const count of [100, 1000]) {
        expect((await walk(api, `Patient/big/$everything?start=2024-01-01&end=2024-12-31&_count=${count}`)).matches).toEqual(['Patient/big', 'Condition/cbig', ...in2024]);
      }
      // At the type level: the other patients' Observations have no care date, so none of them is kept; a's three performed ones are dated.
      const typeLevel = (await walk(api, 'Patient/$everything?start=2024&end=2024&_count=250')).matches;
      expect(typeLevel).toEqual(['Patient/a', 'Observation/o0500', 'Patient/b', 'Patient/big', 'Condition/cbig', ...in2024.filter((x) => x !== 'Observation/o0500'), 'Patient/c', 'Patient/d']);
    });
  });
});

await eachStore((kind, fresh) => {
  describe(`Patient/$everything's care dates (start, end) on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ENC = { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' };
    /** The store's compartmentRows calls. */
    let reads = 0;

    beforeAll(async () => {
      const store = await fresh();
      const resources = new Proxy(store.resources, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver) as unknown;
          if (prop !== 'compartmentRows' || typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            reads++;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      });
      t = await createTestApp({ store: { ...store, resources } });
      api = fhirClient(t, await t.token());
      const obs = (id: string, subject: string, effective?: Json) => api.put200({
        resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: `Patient/${subject}` }, ...effective,
      });
      await api.put200({ resourceType: 'Patient', id: 'p1' });
      await api.put200({ resourceType: 'Patient', id: 'p2' });
      await obs('o2023', 'p1', { effectiveDateTime: '2023-06-01' });
      await obs('o2024', 'p1', { effectiveDateTime: '2024-03-01T10:00:00Z' });
      await obs('o2024b', 'p1', { effectivePeriod: { start: '2024-11-30', end: '2025-01-02' } });
      await obs('oundated', 'p1');
      await obs('p2-2024', 'p2', { effectiveDateTime: '2024-05-05' });
      await obs('p2-2022', 'p2', { effectiveDateTime: '2022-05-05' });
      // An encounter spanning the turn of the year, another in 2025.
      await api.put200({ resourceType: 'Encounter', id: 'e-turn', status: 'finished', class: ENC, subject: { reference: 'Patient/p1' }, period: { start: '2023-12-20', end: '2024-01-05' } });
      await api.put200({ resourceType: 'Encounter', id: 'e2025', status: 'finished', class: ENC, subject: { reference: 'Patient/p1' }, period: { start: '2025-02-01', end: '2025-02-02' } });
      // A Condition has no care date (R4's clinical-date is not defined on it): kept whatever the dates.
      await api.put200({ resourceType: 'Condition', id: 'c-old', subject: { reference: 'Patient/p1' }, code: { text: 'x' }, onsetDateTime: '2010-01-01' });
    });
    afterAll(() => t.close());

    test('the resources whose care date overlaps [start, end]; types without one whole; either side open', async () => {
      const pages = async (query: string) => {
        const lists = [];
        for (const count of [1, 2, 1000]) lists.push((await walk(api, `${query}&_count=${count}`)).matches);
        expect(lists[0]).toEqual(lists[2]!);
        expect(lists[1]).toEqual(lists[2]!);
        return lists[2]!;
      };
      expect(await pages('Patient/p1/$everything?start=2024-01-01&end=2024-12-31')).toEqual(['Patient/p1', 'Condition/c-old', 'Encounter/e-turn', 'Observation/o2024', 'Observation/o2024b']);
      expect(await pages('Patient/p1/$everything?start=2024-06')).toEqual(['Patient/p1', 'Condition/c-old', 'Encounter/e2025', 'Observation/o2024b']);
      expect(await pages('Patient/p1/$everything?end=2023')).toEqual(['Patient/p1', 'Condition/c-old', 'Encounter/e-turn', 'Observation/o2023']);
      expect(await pages('Patient/$everything?start=2024&end=2024&_type=Patient,Observation')).toEqual(['Patient/p1', 'Observation/o2024', 'Observation/o2024b', 'Patient/p2', 'Observation/p2-2024']);
      // The links carry them, and the Bundle warns of nothing.
      const b = await api.search('Patient/p1/$everything?start=2024-01-01&end=2024-12-31&_count=1');
      expect(link(b, 'next')).toContain('start=2024-01-01&end=2024-12-31');
      expect(link(b, 'self')).toContain('start=2024-01-01&end=2024-12-31');
      expect(b.entry.filter((e: Json) => e.search.mode === 'outcome')).toEqual([]);
      // By POST, in a Parameters body.
      const post = await api.post('Patient/p1/$everything', { resourceType: 'Parameters', parameter: [{ name: 'start', valueDate: '2024-01-01' }, { name: 'end', valueDate: '2024-12-31' }, { name: '_type', valueString: 'Observation' }] });
      expect(((await post.json()) as Json).entry.map((e: Json) => e.resource.id)).toEqual(['o2024', 'o2024b']);
    });

    test('a start or end that is no date, repeated, or a start after the end, and a _type of no type, are a 400 naming it', async () => {
      for (const [query, at] of [
        ['start=ge2024', 'start'], ['end=2024-13', 'end'], ['start=yesterday', 'start'], ['start=2024&start=2025', 'start'], ['start=2025&end=2024-12-31', 'start'],
      ]) {
        expect((await expectOutcome(await api.get(`Patient/p1/$everything?${query}`), 400)).issue[0].expression).toEqual([at]);
      }
      // A _type naming no type is a 400, as a search's is: never an empty page that says the patient has no records.
      for (const query of ['_type=', '_type=,', '_type=%20', '_type=&_count=0']) {
        for (const path of ['Patient/p1/$everything', 'Patient/$everything', 'Encounter/e-turn/$everything']) {
          expect((await expectOutcome(await api.get(`${path}?${query}`), 400)).issue[0].expression).toEqual(['_type']);
        }
      }
      // A bad date's 400 asks for a date, offering no search prefix (the parameter takes none).
      for (const query of ['end=2024-13', 'start=2024-02-30', 'start=2024-01-01T25:00:00Z']) {
        const text = (await expectOutcome(await api.get(`Patient/p1/$everything?${query}`), 400)).issue[0].details.text;
        expect(text).toContain('expected a date (YYYY, YYYY-MM or YYYY-MM-DD)');
        expect(text).not.toContain('[eq|');
      }
      // Encounter-everything defines no care dates: ignored with a warning there, as before.
      expect((await api.get('Encounter/e-turn/$everything?start=2024')).status).toBe(200);
    });

    test('a page reads on past the rows out of range many at a time, not one statement per row', async () => {
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const entries = [put({ resourceType: 'Patient', id: 'p3' })];
      for (let i = 0; i < 300; i++) entries.push(put({ resourceType: 'Observation', id: `old${String(i).padStart(3, '0')}`, status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p3' }, effectiveDateTime: '2020-01-01' }));
      entries.push(put({ resourceType: 'Observation', id: 'recent', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p3' }, effectiveDateTime: '2024-02-02' }));
      expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries })).status).toBe(200);
      reads = 0;
      const b = await api.search('Patient/p3/$everything?start=2024&_type=Observation&_count=1');
      expect(b.entry.map((e: Json) => e.resource.id)).toEqual(['recent']);
      expect(reads).toBeLessThanOrEqual(3);
    });
  });
});

await eachStore((kind, fresh) => {
  describe(`Patient/$everything includes the Binaries its attachments name on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const doc = (id: string, patient: string, urls: string[]) => ({
      resourceType: 'DocumentReference', id, status: 'current', subject: { reference: `Patient/${patient}` },
      content: urls.map((url) => ({ attachment: { contentType: 'text/plain', url } })),
    });
    const binary = (id: string, context?: string) => ({ resourceType: 'Binary', id, contentType: 'text/plain', data: 'aGVsbG8=', ...(context && { securityContext: { reference: context } }) });
    const included = (b: Json) => (b.entry ?? []).filter((e: Json) => e.search.mode === 'include').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();
    const matchesOf = (b: Json) => (b.entry ?? []).filter((e: Json) => e.search.mode === 'match').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1' });
      await api.put200({ resourceType: 'Patient', id: 'p2' });
      await api.put200(binary('b1', 'DocumentReference/d1'));
      await api.put200(binary('b2', 'DocumentReference/d1'));
      await api.put200(binary('theirs', 'DocumentReference/d2'));
      await api.put200(doc('d2', 'p2', ['Binary/theirs']));
      // A relative url, an absolute one of this server, another server's, an unknown Binary, another patient's, b1 again.
      await api.put200(doc('d1', 'p1', ['Binary/b1', `${t.fhir()}/Binary/b2`, 'http://elsewhere.example.org/fhir/Binary/b1', 'Binary/missing', 'Binary/theirs', 'Binary/b1']));
      // An Attachment of an extension's value is one too.
      await api.put200({
        resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p1' },
        extension: [{ url: 'http://example.org/fhir/StructureDefinition/scan', valueAttachment: { contentType: 'text/plain', url: 'Binary/b2' } }],
      });
    });
    afterAll(() => t.close());

    test('each once, as include entries, read as _include reads them; _type restricts them', async () => {
      const all = await api.search('Patient/p1/$everything');
      expect(included(all)).toEqual(['Binary/b1', 'Binary/b2', 'Binary/theirs']);
      expect(all.entry.find((e: Json) => e.resource.id === 'b1').fullUrl).toBe(`${t.fhir()}/Binary/b1`);
      expect(included(await api.search('Patient/p1/$everything?_type=DocumentReference'))).toEqual([]);
      expect(included(await api.search('Patient/p1/$everything?_type=DocumentReference,Binary'))).toEqual(['Binary/b1', 'Binary/b2', 'Binary/theirs']);
      // Beside the Observation, every record's Binaries: `_type` names the types returned, not the records whose attachments are followed.
      expect(included(await api.search('Patient/p1/$everything?_type=Observation,Binary'))).toEqual(['Binary/b1', 'Binary/b2', 'Binary/theirs']);
      expect(matchesOf(await api.search('Patient/p1/$everything?_type=Observation,Binary'))).toEqual(['Observation/o1']);
      // A patient's token: its own documents' Binaries, not another patient's (its securityContext out of reach).
      const own = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p1' }));
      expect(included(await own.search('Patient/p1/$everything'))).toEqual(['Binary/b1', 'Binary/b2']);
      // A token that may not read Binary: none, and no error.
      const noBinary = fhirClient(t, await craftToken(t, 'system/Patient.rs system/DocumentReference.rs system/Observation.rs'));
      expect(included(await noBinary.search('Patient/p1/$everything'))).toEqual([]);
    });

    test('past 1,000 Binaries a page, the rest are left out with a warning naming them', async () => {
      await api.put200({ resourceType: 'Patient', id: 'p3' });
      await api.put200(doc('d3', 'p3', [...Array.from({ length: 1001 }, (_, i) => `Binary/n${i}`), 'Binary/b1']));
      // The Patient's page ends before d3, whose names pass a page's bound: d3 is alone on the next.
      const first = await api.search('Patient/p3/$everything');
      expect(matchesOf(first)).toEqual(['Patient/p3']);
      const b = await api.search(link(first, 'next')!);
      expect(matchesOf(b)).toEqual(['DocumentReference/d3']);
      // The first 1,000 named are unknown (none included), b1 and n1000 past the bound.
      expect(included(b)).toEqual([]);
      const outcome = b.entry.find((e: Json) => e.search.mode === 'outcome').resource;
      // One warning: the record that names them, alone on its page, and the Binaries left out.
      const warnings = outcome.issue.filter((i: Json) => i.code === 'too-costly');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toEqual(expect.objectContaining({ severity: 'warning', diagnostics: expect.stringContaining('DocumentReference/d3 refers to 1002 resources') }));
      expect(warnings[0].diagnostics).toContain("of its attachments' Binaries 2 left out: Binary/n1000, Binary/b1");
    });
  });
});
