/**
 * Differential check of a transaction's grouped condition answers (bundle-condition-answers.ts) on both stores: random
 * conditions of a few shapes (token systems and codes with escaped `|` and `,`, modifiers, string prefixes that are each
 * other's prefixes, case, accents, halfwidth katakana, astral characters, deleted resources) are each searched alone,
 * then sent together as a transaction's conditional creates, which must find exactly what each found alone.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

/** A small deterministic generator (mulberry32). */
function random(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SYSTEMS = ['urn:a', 'urn:a|b', 'urn:b', 'urn:a,b'];
const CODES = ['1', '1,2', '2', 'x|y', 'x', 'a\\b', 'A', 'a', 'ｶ', 'カ', '𝔸', '𝔸1', '1$2'];
const NAMES = ['Smith', 'smith', 'Smíth', 'Sm', 'Smi', 'SMITHSON', 'ｶﾀ', 'ｶ', 'カタ', '𝔸b', '𝔸', 'Ab', 'Øre', 'oere', 'Ære', 'Straße', 'STRASSE'];
const EMAILS = ['a@x.org', 'A@X.org', 'a@x.or', 'b@x.org', 'ｶ@x.org', 'Ｂ@x.org', 'b@X.ORG', '𝔸@x.org'];
const GIVEN = ['Jo', 'Jon', 'John', 'jóhn', 'Joh', 'Ann', 'Anna', 'ann', 'Ａnn', '𝔹o'];

/** A search parameter value's escapes (FHIR R4 search 3.1.1.4.1.1: `\`, `|`, `,` and `$`). */
const esc = (s: string) => s.replace(/[\\|,$]/g, (c) => `\\${c}`);
const enc = (s: string) => encodeURIComponent(s);

await eachStore((kind, fresh) => {
  describe(`grouped condition answers equal each condition searched alone (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const { ok, send } = bundlePoster(() => t, () => api);

    /** The values the Patients hold, some cut short to a prefix of theirs (by code points) when picked. */
    const seen = { codes: new Set<string>(), names: new Set<string>(), given: new Set<string>() };
    const cut = (rnd: () => number, s: string) => (rnd() < 0.4 ? [...s].slice(0, 1 + Math.floor(rnd() * [...s].length)).join('') : s);
    const CODE = (rnd: () => number) => (rnd() < 0.8 ? [...seen.codes][Math.floor(rnd() * seen.codes.size)]! : CODES[Math.floor(rnd() * CODES.length)]!);
    const FAMILY = (rnd: () => number) => cut(rnd, rnd() < 0.8 ? [...seen.names][Math.floor(rnd() * seen.names.size)]! : NAMES[Math.floor(rnd() * NAMES.length)]!);
    const GIVEN_ = (rnd: () => number) => cut(rnd, rnd() < 0.8 ? [...seen.given][Math.floor(rnd() * seen.given.size)]! : GIVEN[Math.floor(rnd() * GIVEN.length)]!);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const rnd = random(7);
      const pick = <T>(xs: T[]) => xs[Math.floor(rnd() * xs.length)]!;
      const entries: Json[] = [];
      const code = () => pick(CODES) + (rnd() < 0.7 ? String(Math.floor(rnd() * 12)) : '');
      const named = (xs: string[]) => pick(xs) + (rnd() < 0.7 ? pick(['', 'a', 'ｶ', 'é', '𝔸', 'Z']) + String(Math.floor(rnd() * 6)) : '');
      for (let i = 0; i < 160; i++) {
        const resource: Json = { resourceType: 'Patient', id: `s${i}` };
        if (rnd() < 0.9) resource.identifier = Array.from({ length: 1 + Math.floor(rnd() * 2) }, () => ({ system: pick(SYSTEMS), value: code() }));
        if (rnd() < 0.3) (resource.identifier ??= []).push({ value: code() });
        if (rnd() < 0.9) resource.name = [{ family: named(NAMES), given: [named(GIVEN)] }];
        if (rnd() < 0.7) resource.gender = pick(['male', 'female']);
        if (rnd() < 0.6) resource.telecom = [{ system: 'email', value: pick(EMAILS) }];
        if (rnd() < 0.6) resource.active = rnd() < 0.5;
        if (rnd() < 0.6) resource.meta = { tag: [{ system: pick(SYSTEMS), code: code() }] };
        for (const id of resource.identifier ?? []) seen.codes.add(id.value);
        for (const n of resource.name ?? []) (seen.names.add(n.family), seen.given.add(n.given[0]));
        entries.push({ resource, request: { method: 'PUT', url: `Patient/s${i}` } });
      }
      await ok({ resourceType: 'Bundle', type: 'batch', entry: entries });
      // Some deleted: a condition never matches them.
      for (let i = 0; i < 160; i += 9) expect((await api.del(`Patient/s${i}`)).status).toBeLessThan(300);
    });
    afterAll(() => t.close());

    const shapes: Record<string, (pick: <T>(xs: T[]) => T, rnd: () => number) => string> = {
      'identifier system|code': (pick, rnd) => `identifier=${enc(`${esc(pick(SYSTEMS))}|${esc(CODE(rnd))}`)}`,
      'identifier code alone or any system': (pick, rnd) => `identifier=${enc(rnd() < 0.5 ? esc(CODE(rnd)) : `|${esc(CODE(rnd))}`)}`,
      'identifier of two values': (pick, rnd) => `identifier=${enc(`${esc(pick(SYSTEMS))}|${esc(CODE(rnd))},${esc(pick(SYSTEMS))}|${esc(CODE(rnd))}`)}`,
      'identifier and gender': (pick, rnd) => `identifier=${enc(`${esc(pick(SYSTEMS))}|${esc(CODE(rnd))}`)}&gender=${pick(['male', 'female'])}`,
      'identifier and gender:not': (pick, rnd) => `identifier=${enc(`${esc(pick(SYSTEMS))}|${esc(CODE(rnd))}`)}&gender:not=male`,
      'identifier:text': (pick, rnd) => `identifier:text=${enc(esc(CODE(rnd)))}&gender=male`,
      'family and given': (pick, rnd) => `family=${enc(esc(FAMILY(rnd)))}&given=${enc(esc(GIVEN_(rnd)))}`,
      'family alone': (pick, rnd) => `family=${enc(esc(FAMILY(rnd)))}`,
      'name of two prefixes': (pick, rnd) => `name=${enc(`${esc(FAMILY(rnd))},${esc(GIVEN_(rnd))}`)}`,
      'family:exact and identifier': (pick, rnd) => `family:exact=${enc(esc(FAMILY(rnd)))}&identifier=${enc(`${esc(pick(SYSTEMS))}|${esc(CODE(rnd))}`)}`,
      'family and identifier:missing': (pick, rnd) => `family=${enc(esc(FAMILY(rnd)))}&identifier:missing=${rnd() < 0.5}`,
      'email': (pick) => `email=${enc(esc(pick(EMAILS)))}`,
      'email and active': (pick, rnd) => `email=${enc(esc(pick(EMAILS)))}&active=${rnd() < 0.5}`,
      '_tag and family': (pick, rnd) => `_tag=${enc(`${esc(pick(SYSTEMS))}|${esc(CODE(rnd))}`)}&family=${enc(esc(FAMILY(rnd)))}`,
      'identifier or _tag of a code in any system': (pick, rnd) => `_tag=${enc(esc(CODE(rnd)))}&identifier=${enc(esc(CODE(rnd)))}`,
      'identifier:missing and active:missing': (pick, rnd) => `identifier=${enc(`${esc(pick(SYSTEMS))}|${esc(CODE(rnd))}`)}&active:missing=${rnd() < 0.5}`,
      'identifier of a system alone, or a code': (pick, rnd) => `identifier=${enc(rnd() < 0.5 ? `${esc(pick(SYSTEMS))}|` : `${esc(pick(SYSTEMS))}|${esc(CODE(rnd))}`)}`,
      '_filter identifier eq (case folded)': (pick, rnd) => `_filter=${enc(`identifier eq "${pick(SYSTEMS).toUpperCase()}|${CODE(rnd)}"`)}`,
      '_filter family sw and gender': (pick, rnd) => `_filter=${enc(`family sw "${FAMILY(rnd)}" and gender eq ${pick(['male', 'female'])}`)}`,
      '_filter given sw or family eq': (pick, rnd) => `_filter=${enc(`given sw "${GIVEN_(rnd)}" or family eq "${FAMILY(rnd)}"`)}`,
      'given and gender:missing': (pick, rnd) => `given=${enc(esc(GIVEN_(rnd)))}&gender:missing=true`,
    };

    for (const [name, shape] of Object.entries(shapes)) {
      test(name, async () => {
        const rnd = random(name.length * 7919 + 13);
        const pick = <T>(xs: T[]) => xs[Math.floor(rnd() * xs.length)]!;
        const conditions = [...new Set(Array.from({ length: 60 }, () => shape(pick, rnd)))];
        const alone = new Map<string, Json[]>();
        for (const c of conditions) alone.set(c, ((await api.search(`Patient?${c}&_count=3`)).entry ?? []).map((e: Json) => e.resource));
        // A conditional create of a copy of the condition's match (a resource that meets it): found, never created again.
        const create = (c: string) => {
          const { id: _id, meta: _meta, text: _text, ...copy } = alone.get(c)![0]!;
          return { resource: copy, request: { method: 'POST', url: 'Patient', ifNoneExist: c } };
        };
        const one = conditions.filter((c) => alone.get(c)!.length === 1);
        if (one.length > 0) {
          const res = await ok({ resourceType: 'Bundle', type: 'transaction', entry: one.map(create) });
          const got = one.map((c, i) => [c, res.entry[i].response.status, res.entry[i].resource.id]);
          expect(got).toEqual(one.map((c) => [c, '200 OK', alone.get(c)![0]!.id]));
        }
        // Conditional updates of a copy each update their match (one condition a match: a transaction updates it once).
        const byMatch = [...new Map(one.map((c) => [alone.get(c)![0]!.id as string, c])).values()];
        if (byMatch.length > 0) {
          const res = await ok({ resourceType: 'Bundle', type: 'transaction', entry: byMatch.map((c) => ({ resource: create(c).resource, request: { method: 'PUT', url: `Patient?${c}` } })) });
          expect(byMatch.map((c, i) => [c, res.entry[i].resource.id])).toEqual(byMatch.map((c) => [c, alone.get(c)![0]!.id]));
        }
        // Conditional deletes of conditions matching nothing delete nothing.
        const none = conditions.filter((c) => alone.get(c)!.length === 0);
        const before = (await api.search('Patient?_summary=count')).total;
        if (none.length > 0) await ok({ resourceType: 'Bundle', type: 'transaction', entry: none.map((c) => ({ request: { method: 'DELETE', url: `Patient?${c}` } })) });
        expect((await api.search('Patient?_summary=count')).total).toBe(before);
        // Each condition of several matches fails its transaction, beside those of one.
        for (const c of conditions.filter((c) => alone.get(c)!.length >= 2).slice(0, 4)) {
          const r = await send({ resourceType: 'Bundle', type: 'transaction', entry: [...one.slice(0, 20), c].map(create) });
          expect([c, r.status]).toEqual([c, 412]);
        }
      });
    }

    test('references (relative, absolute on this base, external, versioned) and codes: conditional creates find, deletes delete nothing', async () => {
      const rnd = random(3);
      const pick = <T>(xs: T[]) => xs[Math.floor(rnd() * xs.length)]!;
      const patient = () => `s${1 + Math.floor(rnd() * 12)}`;
      const refs = (p: string) => [`Patient/${p}`, `${api.base}/Patient/${p}`, `http://other.org/fhir/Patient/${p}`, `Patient/${p}/_history/1`];
      const entries = Array.from({ length: 80 }, () => ({
        resource: { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'urn:c', code: pick(['a', 'b', 'c']) }] }, subject: { reference: pick(refs(patient())) } },
        request: { method: 'POST', url: 'Observation' },
      }));
      await ok({ resourceType: 'Bundle', type: 'batch', entry: entries.filter((e) => !/\/s9(\/|$)/.test(e.resource.subject.reference)) });
      const conditions = [...new Set(Array.from({ length: 80 }, () => {
        const p = patient();
        return `${pick(['subject', 'patient', 'subject:Patient'])}=${enc(pick([p, ...refs(p)]))}&code=urn:c|${pick(['a', 'b', 'c'])}`;
      }))];
      const alone = new Map<string, Json[]>();
      for (const c of conditions) alone.set(c, ((await api.search(`Observation?${c}&_count=3`)).entry ?? []).map((e: Json) => e.resource));
      const one = conditions.filter((c) => alone.get(c)!.length === 1);
      const res = await ok({ resourceType: 'Bundle', type: 'transaction', entry: one.map((c) => {
        const { id: _id, meta: _meta, text: _text, ...copy } = alone.get(c)![0]!;
        return { resource: copy, request: { method: 'POST', url: 'Observation', ifNoneExist: c } };
      }) });
      expect(one.map((c, i) => [c, res.entry[i].response.status, res.entry[i].resource.id])).toEqual(one.map((c) => [c, '200 OK', alone.get(c)![0]!.id]));
      const none = conditions.filter((c) => alone.get(c)!.length === 0);
      const before = (await api.search('Observation?_summary=count')).total;
      if (none.length > 0) await ok({ resourceType: 'Bundle', type: 'transaction', entry: none.map((c) => ({ request: { method: 'DELETE', url: `Observation?${c}` } })) });
      expect((await api.search('Observation?_summary=count')).total).toBe(before);
    });

    test('more than 250 conditions of one shape (several statements), half matching, some in Patients deleted', async () => {
      const n = 320;
      const big = (i: number, extra: Json = {}) => ({ resourceType: 'Patient', identifier: [{ system: 'urn:big', value: `k${i}` }], ...extra });
      const seed = Array.from({ length: n / 2 }, (_, i) => ({ resource: { ...big(i * 2), id: `b${i * 2}` }, request: { method: 'PUT', url: `Patient/b${i * 2}` } }));
      await ok({ resourceType: 'Bundle', type: 'batch', entry: seed });
      for (let i = 0; i < n; i += 10) expect((await api.del(`Patient/b${i}`)).status).toBeLessThan(300);
      const res = await ok({ resourceType: 'Bundle', type: 'transaction', entry: Array.from({ length: n }, (_, i) => ({ resource: big(i, { active: true }), request: { method: 'POST', url: 'Patient', ifNoneExist: `identifier=urn:big|k${i}` } })) });
      const expected = Array.from({ length: n }, (_, i) => (i % 2 === 0 && i % 10 !== 0 ? ['200 OK', `b${i}`] : ['201 Created', true]));
      expect(res.entry.map((e: Json) => [e.response.status, e.response.status === '200 OK' ? e.resource.id : e.resource.active])).toEqual(expected);
      // Sent again, every one is found.
      const again = await ok({ resourceType: 'Bundle', type: 'transaction', entry: Array.from({ length: n }, (_, i) => ({ resource: big(i), request: { method: 'POST', url: 'Patient', ifNoneExist: `identifier=urn:big|k${i}` } })) });
      expect(again.entry.map((e: Json) => e.resource.id)).toEqual(res.entry.map((e: Json) => e.resource.id));
    });
  });
});
