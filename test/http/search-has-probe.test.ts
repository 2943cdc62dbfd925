/**
 * `_has` whose referring resources are many (search-sql.ts probesHas), on both databases: the first
 * resources read in order probe each for a referring resource that matches, and where they do not fill
 * the page, the next as many are read the same way when the matches so far are at least as many as the
 * page lacks, and else the set of the resources referred to reads the rest after them. A `_has` of few referring
 * resources stays a set. The answers are checked against the data's own arithmetic, and the statements
 * against the plan the sizes call for.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { compileSearch } from '../../src/fhir/search.ts';
import { plannedSearch, POSTGRES, SQLITE } from '../../src/store/search-sql.ts';
import type { Condition } from '../../src/store/types.ts';
import type { TestApp } from '../helpers/app.ts';
import { matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh, statementRunner } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const PATIENTS = 600;
const pid = (p: number) => `hp${String(p).padStart(3, '0')}`;
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

/**
 * Three Conditions per Patient: the first of each coded `common`; the three of hp480..hp599 also coded
 * `late`; one of hp007 and one of hp123 also coded `rare`. Ids a permutation, so that id order is not
 * the Patients' order.
 */
const conditions = range(0, PATIENTS).flatMap((p) => range(0, 3).map((j) => {
  const codes = [...(j === 0 ? ['common'] : []), ...(p >= 480 ? ['late'] : []), ...((p === 7 || p === 123) && j === 2 ? ['rare'] : []), 'any'];
  return {
    resourceType: 'Condition', id: `hc${String(((p * 3 + j) * 7919) % (PATIENTS * 3)).padStart(4, '0')}`,
    subject: { reference: `Patient/${pid(p)}` },
    code: { coding: codes.map((code) => ({ system: 'urn:test', code })) },
  };
}));
const patients = range(0, PATIENTS).map((p) => ({ resourceType: 'Patient', id: pid(p), gender: p % 2 ? 'female' : 'male' }));

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`_has probed in the first rows on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let url: string;
    const ids = async (query: string) => ((await api.search(query)).entry ?? []).map((e: Json) => e.resource.id);

    beforeAll(async () => {
      ({ t, api, url } = await appOnFresh(target));
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions([...patients, ...conditions])));
      await t.store.resources.indexing.analyze();
    }, 60_000);
    afterAll(() => t.close());

    test('common: the page of the first Patients; late: the first rows hold part of it, the set the rest', async () => {
      expect(await ids('Patient?_has:Condition:subject:code=common&_count=10')).toEqual(range(0, 10).map(pid));
      expect(await ids('Patient?_has:Condition:subject:code=late&_count=30')).toEqual(range(480, 510).map(pid));
      expect(await ids('Patient?_has:Condition:subject:code=rare')).toEqual([pid(7), pid(123)]);
      expect(await ids('Patient?gender=male&_has:Condition:subject:code=common&_count=10')).toEqual(range(0, 20).filter((p) => p % 2 === 0).map(pid));
      expect(await ids('Patient?gender=female&_has:Condition:subject:code=late&_count=5')).toEqual([481, 483, 485, 487, 489].map(pid));
      expect(await ids('Patient?_has:Condition:subject:code=nothing')).toEqual([]);
    });

    test('every page, in order, each Patient once', async () => {
      expect(await matchesOfAllPages(api, 'Patient?_has:Condition:subject:code=late&_count=7')).toEqual(range(480, PATIENTS).map(pid));
      expect(await matchesOfAllPages(api, 'Patient?_has:Condition:subject:code=any&_count=97')).toEqual(range(0, PATIENTS).map(pid));
      expect((await api.search('Patient?_has:Condition:subject:code=late&_total=accurate&_count=1')).total).toBe(120);
    });

    test('conditions of the referring resources: on their row (`_id`), on their index rows, in their words', async () => {
      const c = conditions[3 * 250 + 1]!;
      expect(await ids(`Patient?_has:Condition:subject:_id=${c.id}`)).toEqual([pid(250)]);
      expect(await ids(`Patient?_has:Condition:subject:_id=${c.id}&_has:Condition:subject:code=common`)).toEqual([pid(250)]);
      expect(await ids('Patient?_has:Condition:subject:code=late&_has:Condition:subject:code=rare')).toEqual([]);
      expect(await ids('Patient?_has:Condition:subject:code:not=common&_count=3')).toEqual(range(0, 3).map(pid));
      // Full text, which SQLite reads as a set where no condition drives, probed by the reference row.
      expect(await ids('Patient?_has:Condition:subject:_content=late&_count=5')).toEqual(range(480, 485).map(pid));
      expect(await ids('Patient?_has:Condition:subject:_content=common&_count=5')).toEqual(range(0, 5).map(pid));
    });

    test('the set where the referring resources are a few resources\' among many referring to each: the first rows would probe them all', async () => {
      // Tenant t2: 40 Patients with 50 Conditions each, all coded `any`; those of fp10, fp20 and fp30 also `crowd`
      // (150, above sqrt(10 × 2,000 / 3) = 82): the first rows, every Patient, would probe 2,000 reference rows
      // and find 3, where the set reads 150 (and 2,000 > HAS_PROBE_RISK × 3 × 150).
      const fp = (p: number) => `fp${String(p).padStart(2, '0')}`;
      const crowded = [10, 20, 30];
      await t.store.resources.write('t2', (w) => w.insertNew(firstVersions([
        ...range(0, 40).map((p) => ({ resourceType: 'Patient', id: fp(p), gender: 'female' })),
        ...range(0, 40).flatMap((p) => range(0, 50).map((j) => ({
          resourceType: 'Condition', id: `fc${String(((p * 50 + j) * 7919) % 2000).padStart(4, '0')}`, subject: { reference: `Patient/${fp(p)}` },
          code: { coding: [{ system: 'urn:test', code: 'any' }, ...(crowded.includes(p) ? [{ system: 'urn:test', code: 'crowd' }] : [])] },
        }))),
      ])));
      const query = (text: string) => {
        const compiled = compileSearch('Patient', new URLSearchParams(text), true);
        return { ...compiled.query, where: compiled.pending as Condition[] };
      };
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      try {
        const sizes: Record<string, number> = { Patient: 40, Condition: 2000 };
        const rows = await plannedSearch(target.kind === 'sqlite' ? SQLITE : POSTGRES, 't2', query('_has:Condition:subject:code=crowd&_count=10'), runner, (type) => sizes[type]!);
        expect((rows as { id: string }[]).map((r) => r.id)).toEqual(crowded.map(fp));
        const searches = statements.filter((x) => x.includes('SELECT r.type, r.id'));
        expect(searches.length).toBe(1);
        expect(searches[0]).toMatch(/r\.id IN \(SELECT|JOIN resources r ON r\.id = h\.id/);
        expect(searches[0]).not.toMatch(/\.value = r\.id/);
      } finally {
        await close();
      }
      // And through the store, with its own sizes.
      expect((await t.store.resources.search('t2', query('_has:Condition:subject:code=crowd'))).map((v) => v.id)).toEqual(crowded.map(fp));
    });

    test('the plans: probed where the set is large, the set where it is small or beside a selective condition', async () => {
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      const dialect = target.kind === 'sqlite' ? SQLITE : POSTGRES;
      const sizes: Record<string, number> = { Patient: PATIENTS, Condition: conditions.length };
      const search = async (query: string) => {
        statements.length = 0;
        const compiled = compileSearch('Patient', new URLSearchParams(query), true);
        const rows = await plannedSearch(dialect, 't1', { ...compiled.query, where: compiled.pending as Condition[] }, runner, (type) => sizes[type]!);
        return { ids: (rows as { id: string }[]).map((r) => r.id), searches: statements.filter((s) => s.includes('SELECT r.type, r.id')) };
      };
      const probe = /EXISTS \(SELECT 1 AS hit FROM search_index s\d+ WHERE .*\.value = r\.id|LEFT JOIN LATERAL \(SELECT 1 AS hit FROM search_index s\d+ WHERE .*\.value = r\.id/;
      const set = /r\.id IN \(SELECT|JOIN resources r ON r\.id = h\.id/;
      try {
        // 600 referring Conditions, against at most sqrt(10 × 1,800 / 3) = 78 for a set: probed.
        const common = await search('_has:Condition:subject:code=common&_count=10');
        expect(common.ids).toEqual(range(0, 10).map(pid));
        expect(common.searches.length).toBe(1);
        expect(common.searches[0]).toMatch(probe);
        // The first 500 Patients hold 20 of 30: the 10 lacking are fewer, so the next rows are probed too.
        const late = await search('_has:Condition:subject:code=late&_count=30');
        expect(late.ids).toEqual(range(480, 510).map(pid));
        expect(late.searches.length).toBe(2);
        expect(late.searches.every((s) => probe.test(s) && !set.test(s))).toBe(true);
        // 20 of 50: the 30 lacking are more, so the set reads the rest after them.
        const lateFifty = await search('_has:Condition:subject:code=late&_count=50');
        expect(lateFifty.ids).toEqual(range(480, 530).map(pid));
        expect(lateFifty.searches.length).toBe(2);
        expect(lateFifty.searches[0]).toMatch(probe);
        expect(lateFifty.searches[1]).toMatch(set);
        expect(lateFifty.searches[1]).not.toMatch(probe);
        // Two referring Conditions: the set.
        const rare = await search('_has:Condition:subject:code=rare');
        expect(rare.ids).toEqual([pid(7), pid(123)]);
        expect(rare.searches.every((s) => set.test(s) && !probe.test(s))).toBe(true);
        // Beside another condition a set may be four times as large: 360 against at most 4 × 134 for
        // a page of 30 (alone, 134: probed), and against 4 × 78 for a page of 10 (probed).
        const beside = await search('gender=female&_has:Condition:subject:code=late&_count=30');
        expect(beside.ids).toEqual(range(480, 540).filter((p) => p % 2).map(pid));
        expect(beside.searches.every((s) => !probe.test(s))).toBe(true);
        const besideTen = await search('gender=female&_has:Condition:subject:code=late&_count=10');
        expect(besideTen.ids).toEqual(range(480, 500).filter((p) => p % 2).map(pid));
        expect(besideTen.searches[0]).toMatch(probe);
        // Among a million Conditions the same 360 are few: the set.
        sizes.Condition = 1_000_000;
        const fewOfMany = await search('_has:Condition:subject:code=late&_count=30');
        expect(fewOfMany.ids).toEqual(late.ids);
        expect(fewOfMany.searches.every((s) => !probe.test(s))).toBe(true);
      } finally {
        await close();
      }
    });
  });
}
