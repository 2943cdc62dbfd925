/**
 * `$everything` (Patient and Encounter) on both databases: what a page's records refer to reaches the client
 * on some page even past a page's MAX_INCLUDES (the records past it come on the next page with theirs);
 * `_since` keeps the included resources updated since then, as R4 says of the whole response ("Resources
 * updated after this period will be included in the response"); a cursor of the earlier format (a type's
 * index) either continues where it was given or is a 400 telling the client to start again.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';
import { compartmentTypes } from '../../src/fhir/definitions.ts';
import { MAX_INCLUDES } from '../../src/fhir/search.ts';

const name = (e: Json) => `${e.resource.resourceType}/${e.resource.id}`;
const of = (b: Json, mode: string) => (b.entry ?? []).filter((e: Json) => e.search.mode === mode).map(name);
const pad = (n: number) => String(n).padStart(4, '0');

/** Every page from `first`: the matches in order, every included resource (once), the Bundles. */
async function walk(api: FhirClient, first: string, most = 40) {
  const pages: Json[] = [];
  for (let next: string | undefined = first; next; next = link(pages[pages.length - 1]!, 'next')) {
    if (pages.length === most) throw new Error(`${first}: more than ${most} pages`);
    pages.push(await api.search(next));
  }
  return { matches: pages.flatMap((b) => of(b, 'match')), included: [...new Set(pages.flatMap((b) => of(b, 'include')))].sort(), pages };
}

/** A cursor of the format before type names: the type's index in the types read, the last id. */
const oldCursor = (t: number, a: string, p?: string) => Buffer.from(JSON.stringify(p === undefined ? { t, a } : { p, t, a })).toString('base64url');

await eachStore((kind, fresh) => {
  describe(`$everything leftovers on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    /** 600 Practitioners `a…` named by Observation oa, 600 `b…` by ob, `c0000` by oc: 1,201, past a page's includes. */
    const A = Array.from({ length: 600 }, (_, i) => `a${pad(i)}`);
    const B = Array.from({ length: 600 }, (_, i) => `b${pad(i)}`);
    const ALL = [...A, ...B, 'c0000'].map((id) => `Practitioner/${id}`).sort();
    const T0 = Date.parse('2026-01-15T10:00:00Z');
    const SINCE = '2026-01-15T10:01:00Z';

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const performers = (ids: string[]) => ids.map((id) => ({ reference: `Practitioner/${id}` }));
      const obs = (id: string, patient: string, more: Json) => put({ resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: `Patient/${patient}` }, ...more });
      const entries = [
        ...[...A, ...B, 'c0000'].map((id) => put({ resourceType: 'Practitioner', id })),
        put({ resourceType: 'Patient', id: 'pa' }),
        obs('oa', 'pa', { performer: performers(A) }),
        obs('ob', 'pa', { performer: performers(B) }),
        obs('oc', 'pa', { performer: performers(['c0000']) }),
        // pc: written at T0 with its Encounter and old-dr; o-new (a minute later) names old-dr and new-dr.
        put({ resourceType: 'Patient', id: 'pc' }),
        put({ resourceType: 'Practitioner', id: 'old-dr' }),
        put({ resourceType: 'Encounter', id: 'enc-c', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/pc' } }),
        obs('o-old', 'pc', { performer: performers(['old-dr']), encounter: { reference: 'Encounter/enc-c' } }),
      ];
      t.clock.set(T0);
      for (let i = 0; i < entries.length; i += 500) {
        const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries.slice(i, i + 500) });
        expect(res.status).toBe(200);
      }
      t.clock.set(Date.parse(SINCE) + 1000);
      await api.put200({ resourceType: 'Practitioner', id: 'new-dr' });
      await api.put200({ resourceType: 'Observation', id: 'o-new', status: 'final', code: { text: 'new' }, subject: { reference: 'Patient/pc' }, encounter: { reference: 'Encounter/enc-c' }, performer: performers(['old-dr', 'new-dr']) });
    }, 120_000);
    afterAll(() => t.close());

    test('what records refer to past a page\'s includes comes with them on the next page, at any _count', async () => {
      for (const query of ['Patient/pa/$everything?_count=10', 'Patient/pa/$everything', 'Patient/$everything?_count=1000', 'Patient/pa/$everything?_type=Observation,Practitioner&_count=10']) {
        const { matches, included, pages } = await walk(api, query);
        const observations = ['Observation/oa', 'Observation/ob', 'Observation/oc', ...(query.startsWith('Patient/$') ? ['Observation/o-new', 'Observation/o-old'] : [])];
        expect({ query, matches: matches.filter((m) => m.startsWith('Observation/')) }).toEqual({ query, matches: observations });
        expect({ query, missing: ALL.filter((p) => !included.includes(p)) }).toEqual({ query, missing: [] });
        for (const page of pages) {
          // Each page holds what its own records refer to, whole, and says nothing was left out.
          const performers = (page.entry ?? []).filter((e: Json) => e.search.mode === 'match' && e.resource.resourceType === 'Observation')
            .flatMap((e: Json) => e.resource.performer.map((r: Json) => r.reference));
          expect({ query, missing: performers.filter((r: string) => !of(page, 'include').includes(r)) }).toEqual({ query, missing: [] });
          expect(of(page, 'include').length).toBeLessThanOrEqual(MAX_INCLUDES);
          const issues = (page.entry ?? []).filter((e: Json) => e.search.mode === 'outcome').flatMap((e: Json) => e.resource.issue);
          expect({ query, issues }).toEqual({ query, issues: [] });
        }
      }
    });

    test('attached Binaries past a page\'s characters come with their record on the next page, not left out', async () => {
      // pd's 34 DocumentReferences each name a Binary of 1 Mi characters by url: 32 Mi a page, so not all on one.
      const MI = 1 << 20;
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const ids = Array.from({ length: 34 }, (_, i) => pad(i));
      const entries = [put({ resourceType: 'Patient', id: 'pd' }), ...ids.flatMap((i) => [
        put({ resourceType: 'Binary', id: `bd${i}`, contentType: 'application/pdf', data: 'A'.repeat(MI) }),
        put({ resourceType: 'DocumentReference', id: `d${i}`, status: 'current', subject: { reference: 'Patient/pd' }, content: [{ attachment: { contentType: 'application/pdf', url: `Binary/bd${i}` } }] }),
      ])];
      for (let i = 0; i < entries.length; i += 10) expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries.slice(i, i + 10) })).status).toBe(200);
      for (const query of ['Patient/pd/$everything?_count=50', 'Patient/pd/$everything?_type=DocumentReference,Binary&_count=50', 'Patient/pd/$everything?_type=Binary&_count=50']) {
        const { matches, included, pages } = await walk(api, query);
        expect({ query, included }).toEqual({ query, included: ids.map((i) => `Binary/bd${i}`) });
        if (!query.includes('_type=Binary')) expect(matches.filter((m) => m.startsWith('DocumentReference/'))).toEqual(ids.map((i) => `DocumentReference/d${i}`));
        expect({ query, pages: pages.length, outcomes: pages.flatMap((b) => of(b, 'outcome')) }).toEqual({ query, pages: 2, outcomes: [] });
      }
    }, 60_000);

    test('a patient token: nothing another patient\'s record names comes through includes, whatever the page', async () => {
      // pb's Observation names dr-b, org-b and pa's Encounter; pa's Observation names it (hasMember) and dr-e.
      for (const r of [
        { resourceType: 'Patient', id: 'pb' },
        { resourceType: 'Practitioner', id: 'dr-b' }, { resourceType: 'Practitioner', id: 'dr-e' },
        { resourceType: 'Organization', id: 'org-b', name: 'B' },
        { resourceType: 'Encounter', id: 'enc-e', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/pe' }, participant: [{ individual: { reference: 'Practitioner/dr-e' } }] },
        { resourceType: 'Patient', id: 'pe' },
        { resourceType: 'Observation', id: 'ob-b', status: 'final', code: { text: 'b' }, subject: { reference: 'Patient/pb' }, encounter: { reference: 'Encounter/enc-e' }, performer: [{ reference: 'Practitioner/dr-b' }, { reference: 'Organization/org-b' }] },
        { resourceType: 'Observation', id: 'oe', status: 'final', code: { text: 'e' }, subject: { reference: 'Patient/pe' }, encounter: { reference: 'Encounter/enc-e' }, hasMember: [{ reference: 'Observation/ob-b' }] },
      ]) await api.put200(r);
      const own = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'pe' }));
      const theirs = ['Observation/ob-b', 'Patient/pb', 'Practitioner/dr-b', 'Organization/org-b'];
      for (const query of ['Patient/pe/$everything', 'Patient/$everything', 'Patient/pe/$everything?_type=Observation,Practitioner,Organization', 'Patient/$everything?_type=Practitioner,Organization&_count=1', 'Encounter/enc-e/$everything', 'Encounter/enc-e/$everything?_type=Practitioner,Organization,Patient&_count=1']) {
        const { matches, included } = await walk(own, query);
        expect({ query, leaked: [...matches, ...included].filter((x) => theirs.includes(x)) }).toEqual({ query, leaked: [] });
        if (!query.includes('_type') || query.includes('Practitioner')) expect({ query, included: included.includes('Practitioner/dr-e') }).toEqual({ query, included: true });
      }
      // An admin sees them all (the guard is the token's, not the data's).
      expect((await walk(api, 'Encounter/enc-e/$everything')).included).toEqual(['Patient/pb', 'Patient/pe', 'Practitioner/dr-b', 'Practitioner/dr-e', 'Organization/org-b'].sort());
    });

    test('records naming tens of thousands of resources not held are paged through, not a 400 no page gets past', async () => {
      // pf's 30 Observations each name 700 Practitioners this server does not hold: 21,000 on a page of 50, past the
      // 20,000 references an include reads to no purpose.
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const obs = Array.from({ length: 30 }, (_, i) => put({
        resourceType: 'Observation', id: `f${pad(i)}`, status: 'final', code: { text: 'f' }, subject: { reference: 'Patient/pf' },
        performer: Array.from({ length: 700 }, (_, k) => ({ reference: `Practitioner/ghost-${i}-${k}` })),
      }));
      expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [put({ resourceType: 'Patient', id: 'pf' }), ...obs] })).status).toBe(200);
      const { matches, included, pages } = await walk(api, 'Patient/pf/$everything');
      expect(matches).toEqual(['Patient/pf', ...obs.map((e) => `Observation/${e.resource.id}`)]);
      expect(included).toEqual([]);
      expect(pages.flatMap((b) => of(b, 'outcome'))).toEqual([]);
    }, 60_000);

    test('one record naming more than 20,000 resources not held is a page of its own: what is held, and a warning naming what was left out', async () => {
      // g-big names held-1, 25,000 Practitioners not held, then org-g: reading stops past 20,000 read to no purpose
      // (21 statements of 1,000), the rest unread (org-g among them). It was a 400 on every page reaching it.
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const big = {
        resourceType: 'Observation', id: 'g-big', status: 'final', code: { text: 'g' }, subject: { reference: 'Patient/pg' }, encounter: { reference: 'Encounter/enc-g' },
        performer: [{ reference: 'Practitioner/held-1' }, ...Array.from({ length: 25_000 }, (_, k) => ({ reference: `Practitioner/ghost-g-${k}` })), { reference: 'Organization/org-g' }],
      };
      const entries = [
        { resourceType: 'Patient', id: 'pg' }, { resourceType: 'Practitioner', id: 'held-1' }, { resourceType: 'Practitioner', id: 'held-2' },
        { resourceType: 'Organization', id: 'org-g', name: 'G' },
        { resourceType: 'Encounter', id: 'enc-g', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/pg' } },
        big,
        { resourceType: 'Observation', id: 'g-small', status: 'final', code: { text: 'g' }, subject: { reference: 'Patient/pg' }, encounter: { reference: 'Encounter/enc-g' }, performer: [{ reference: 'Practitioner/held-2' }] },
      ].map(put);
      expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries })).status).toBe(200);
      const own = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'pg' }));
      for (const [client, query] of [[api, 'Patient/pg/$everything'], [api, 'Patient/pg/$everything?_count=1'], [own, 'Patient/$everything'], [api, 'Encounter/enc-g/$everything'], [api, 'Patient/pg/$everything?_type=Observation,Practitioner']] as const) {
        const typed = query.includes('_type');
        const { matches, included, pages } = await walk(client, query);
        expect({ query, matches }).toEqual({ query, matches: [...(query.startsWith('Encounter') || typed ? [] : ['Patient/pg']), ...(typed ? [] : ['Encounter/enc-g']), 'Observation/g-big', 'Observation/g-small'] });
        expect({ query, included: included.filter((x) => x.startsWith('Practitioner/') || x.startsWith('Organization/')) }).toEqual({ query, included: ['Practitioner/held-1', 'Practitioner/held-2'] });
        // The record is a page alone, with its warning; no other page warns (under _type, the records before it, none of
        // _type, are read by its page, which no longer came back empty before it with an information alone).
        const emptyPages = pages.slice(0, -1).filter((b) => of(b, 'match').length + of(b, 'include').length === 0);
        expect({ query, emptyPages: emptyPages.length }).toEqual({ query, emptyPages: 0 });
        const issuesOf = (b: Json) => (b.entry ?? []).filter((e: Json) => e.search.mode === 'outcome').flatMap((e: Json) => e.resource.issue).filter((i: Json) => i.severity !== 'information');
        const warned = pages.filter((b) => issuesOf(b).length);
        expect({ query, warned: warned.map((b) => of(b, 'match')) }).toEqual({ query, warned: [['Observation/g-big']] });
        const issues = issuesOf(warned[0]!);
        expect(issues.length).toBe(1);
        expect(issues[0]).toMatchObject({ severity: 'warning', code: 'too-costly' });
        // Unread: 4,001 Practitioners and org-g (but under a _type without Organizations); under the Encounter, pg too.
        expect({ query, d: issues[0].diagnostics }).toEqual({ query, d: `Observation/g-big names more than 20000 resources that are not held or out of this token's reach: reading the references stopped after them, and the ${query.startsWith('Encounter') ? 4003 : typed ? 4001 : 4002} named past them are left out; read them by the references Observation/g-big holds` });
        expect(JSON.stringify(issues)).not.toContain('_include');
      }
    }, 120_000);

    test('a record naming more than 20,000 versions not held is a page of its own too, not every version read', async () => {
      // h-vers names held-1's version 1, then 20,500 versions not held: reading stops past 20,000 of them, 499 unread.
      const versions = Array.from({ length: 20_500 }, (_, k) => ({ reference: `Practitioner/ghost-v-${k}/_history/1` }));
      await api.put200({ resourceType: 'Practitioner', id: 'held-v' });
      await api.put200({ resourceType: 'Patient', id: 'ph' });
      await api.put200({ resourceType: 'Observation', id: 'h-vers', status: 'final', code: { text: 'h' }, subject: { reference: 'Patient/ph' }, performer: [{ reference: 'Practitioner/held-v/_history/1' }, ...versions] });
      const { matches, included, pages } = await walk(api, 'Patient/ph/$everything');
      expect(matches).toEqual(['Patient/ph', 'Observation/h-vers']);
      expect(included).toEqual(['Practitioner/held-v']);
      const issues = pages.flatMap((b) => (b.entry ?? []).filter((e: Json) => e.search.mode === 'outcome').flatMap((e: Json) => e.resource.issue));
      expect(issues.map((i: Json) => i.diagnostics)).toEqual([
        "Observation/h-vers names more than 20000 resources that are not held or out of this token's reach: reading the references stopped after them, and the 499 named past them are left out; read them by the references Observation/h-vers holds",
      ]);
    }, 120_000);

    test('_since keeps the included resources updated since then too (R4: only resources updated after it)', async () => {
      const patient = await walk(api, `Patient/pc/$everything?_since=${SINCE}`);
      expect(patient.matches).toEqual(['Observation/o-new']);
      expect(patient.included).toEqual(['Practitioner/new-dr']);
      const encounter = await walk(api, `Encounter/enc-c/$everything?_since=${SINCE}`);
      expect(encounter.matches).toEqual(['Observation/o-new']);
      expect(encounter.included).toEqual(['Practitioner/new-dr']);
      // Without _since, all of them.
      expect((await walk(api, 'Patient/pc/$everything')).included).toEqual(['Practitioner/new-dr', 'Practitioner/old-dr']);
      expect((await walk(api, 'Encounter/enc-c/$everything')).included).toEqual(['Patient/pc', 'Practitioner/new-dr', 'Practitioner/old-dr']);
    });

    test('a cursor of the earlier format continues where it was given, or is a 400 telling the client to start again', async () => {
      // Without a _type outside the compartment its type index meant what it means now: it continues.
      const types = ['Patient', ...compartmentTypes().filter((x) => x !== 'Patient' && x !== 'AuditEvent')];
      const page = await api.search(`Patient/pa/$everything?_count=1&_cursor=${oldCursor(types.indexOf('Observation'), 'oa')}`);
      expect(of(page, 'match')).toEqual(['Observation/ob']);
      const typeLevel = await api.search(`Patient/$everything?_count=1&_cursor=${oldCursor(types.indexOf('Observation'), 'oa', 'pa')}`);
      expect(of(typeLevel, 'match')).toEqual(['Observation/ob']);
      // With one, it indexed `_type`'s compartment types before and every type after: a 400, not a restart.
      for (const query of ['Patient/pa/$everything?_type=Observation,Practitioner', 'Encounter/enc-c/$everything?_type=Observation,Practitioner']) {
        const body = await expectOutcome(await api.get(`${query}&_count=1&_cursor=${oldCursor(0, 'oa')}`), 400);
        expect(body.issue[0].diagnostics).toContain('start again');
        expect(body.issue[0].expression).toEqual(['_cursor']);
      }
      // The cursors given now name their type: the pages of a walk continue whatever the token reads.
      const walked = await walk(api, 'Patient/pa/$everything?_count=1&_type=Observation,Practitioner');
      expect(walked.matches).toEqual(['Observation/oa', 'Observation/ob', 'Observation/oc']);
    });
  });
});
