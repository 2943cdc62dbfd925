/**
 * Differential test of the search engine: for every core search parameter of the generated data set's
 * types (token, string, reference, uri, quantity and date), queries built from values in the data are
 * answered through the REST API and, independently, by HL7's FHIRPath engine (npm `fhirpath`)
 * evaluating the parameter's R4 expression on each resource plus FHIR's matching rules written here.
 * The two answers must be equal; so must chains through every reference parameter, to stored targets
 * and to contained ones (copies of some resources holding their targets as contained resources),
 * `_has` and `_include`. Runs on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import fhirpath from 'fhirpath';
import r4model from 'fhirpath/fhir-context/r4';
import { generatePatients } from '../../bench/lib/generator.ts';
import { paramsOf, type ParamDefinition } from '../../src/fhir/definitions.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { firstVersions } from '../helpers/versions.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const DATA = [...generatePatients({ patients: 8, seed: 'differential' })] as Json[];
const TYPES = [...new Set(DATA.map((r) => r.resourceType as string))];
const BY_KEY = new Map(DATA.map((r) => [`${r.resourceType}/${r.id}`, r]));

/**
 * Copies of every fourth resource that refers to others, each holding the resources it refers to as
 * contained ones (`#t0`, `#t1`, ... in place of `Type/id`): chains must reach inside them (R4 search).
 */
const CONTAINERS: Json[] = DATA.filter((_, i) => i % 4 === 0).flatMap((r) => {
  const contained: Json[] = [];
  const local = new Map<string, string>();
  const copy = JSON.parse(JSON.stringify(r), function (this: unknown, key, value) {
    if (key !== 'reference' || typeof value !== 'string' || !BY_KEY.has(value)) return value;
    if (!local.has(value)) {
      const { meta: _meta, text: _text, ...target } = BY_KEY.get(value)!;
      local.set(value, `t${local.size}`);
      contained.push({ ...target, id: local.get(value) });
    }
    return `#${local.get(value)}`;
  }) as Json;
  return contained.length ? [{ ...copy, id: `${r.id}-c`, contained }] : [];
});
const KINDS = new Set(['token', 'string', 'reference', 'uri', 'quantity', 'date']);

/**
 * The oracle's values: the R4 expression by HL7's engine (`resolve() is X` read from the literal reference;
 * with `contained`, a reference to a contained resource passes it, its type left to resolveIn).
 */
function oracleValues(def: ParamDefinition, resource: Json, contained = false): unknown[] {
  const memo = MEMO.get(resource) ?? MEMO.set(resource, new Map()).get(resource)!;
  const key = `${def.base}.${def.code}${contained ? '#' : ''}`;
  let values = memo.get(key);
  if (values === undefined) {
    const test = contained ? ".where(reference.startsWith('$1/') or reference.startsWith('#'))" : ".where(reference.startsWith('$1/'))";
    const expression = def.expression.replace(/\.where\(resolve\(\) is ([A-Za-z]+)\)/g, test);
    memo.set(key, (values = fhirpath.evaluate(resource, expression, undefined, r4model) as unknown[]));
  }
  return values;
}
const MEMO = new WeakMap<Json, Map<string, unknown[]>>();

/** The resources of `type` that reference parameter `def` of `resource` names: stored ones, and contained ones by `#id`. */
function resolveIn(def: ParamDefinition, resource: Json, type: string): { stored: Json[]; contained: Json[] } {
  const out = { stored: [] as Json[], contained: [] as Json[] };
  for (const v of oracleValues(def, resource, true)) {
    const ref = (v as Json)?.reference;
    if (typeof ref !== 'string') continue;
    const inside = ref.startsWith('#');
    const target = inside ? (resource.contained as Json[] | undefined)?.find((c) => `#${c.id}` === ref) : BY_KEY.get(ref);
    if (target?.resourceType === type) (inside ? out.contained : out.stored).push(target);
  }
  return out;
}

const fold = (s: string) => s.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase();

function tokensOf(v: unknown): { system: string; code: string }[] {
  if (typeof v === 'string' || typeof v === 'boolean' || typeof v === 'number') return [{ system: '', code: String(v) }];
  const o = v as Json;
  if (Array.isArray(o?.coding)) return o.coding.flatMap(tokensOf);
  if (typeof o?.code === 'string') return [{ system: o.system ?? '', code: o.code }];
  if (typeof o?.value === 'string') return [{ system: o.system ?? '', code: o.value }];
  return [];
}

function stringsOf(v: unknown): string[] {
  if (typeof v === 'string') return [v];
  const o = v as Json;
  if (!o || typeof o !== 'object') return [];
  return ['text', 'family', 'given', 'prefix', 'suffix', 'line', 'city', 'district', 'state', 'postalCode', 'country'].flatMap((k) =>
    typeof o[k] === 'string' ? [o[k]] : Array.isArray(o[k]) ? o[k].filter((x: unknown) => typeof x === 'string') : []);
}

/** The calendar day (UTC) a date value lies in, when it lies in one day (date, dateTime, instant; a Period inside one day). */
function daysOf(v: unknown): string[] {
  if (typeof v === 'string') return v.length >= 10 ? [new Date(v.length === 10 ? `${v}T00:00:00Z` : v).toISOString().slice(0, 10)] : [];
  const o = v as Json;
  if (o && typeof o.start === 'string' && typeof o.end === 'string') {
    const [a] = daysOf(o.start);
    const [b] = daysOf(o.end);
    return a && a === b && o.end.length > 10 ? [a] : [];
  }
  return [];
}

interface Case {
  query: string;
  matches: (resource: Json) => boolean;
}

/**
 * The links a chain or `_has` follows: each reference parameter of each type of the data, with each of
 * its target types that the data holds.
 */
function* links(): Generator<{ type: string; def: ParamDefinition; target: string }> {
  for (const type of TYPES) {
    for (const def of paramsOf(type).filter((d) => d.type === 'reference')) {
      for (const target of TYPES.filter((x) => def.targets.includes(x))) yield { type, def, target };
    }
  }
}

/** Up to four cases of each of the first two token or string parameters of `type` with values in `pool`: the tests at a link's other end. */
function* innerCases(type: string, pool: Json[]): Generator<Case> {
  let used = 0;
  for (const q of paramsOf(type).filter((d) => (d.type === 'token' || d.type === 'string') && d.code !== 'phonetic')) {
    const cases = casesFor(type, q, pool);
    if (cases.length === 0) continue;
    if (++used > 2) return;
    yield* cases.slice(0, 4);
  }
}

/** Queries for one parameter, from values found in the data, each with the oracle's matching rule. */
function casesFor(type: string, def: ParamDefinition, resources: Json[]): Case[] {
  const values = resources.flatMap((r) => oracleValues(def, r)).slice(0, 400);
  const pick = <T,>(list: T[]): T[] => [list[0], list[Math.floor(list.length / 2)], list[list.length - 1]].filter((x): x is T => x !== undefined);
  const holds = (pred: (v: unknown) => boolean) => (r: Json) => oracleValues(def, r).some(pred);
  const enc = encodeURIComponent;
  switch (def.type) {
    case 'token': {
      const tokens = values.flatMap(tokensOf);
      return pick(tokens).flatMap((t) => [
        { query: `${def.code}=${enc(t.system ? `${t.system}|${t.code}` : t.code)}`, matches: holds((v) => tokensOf(v).some((x) => x.code === t.code && (!t.system || x.system === t.system))) },
        { query: `${def.code}:not=${enc(t.code)}`, matches: (r: Json) => !oracleValues(def, r).some((v) => tokensOf(v).some((x) => x.code === t.code)) },
      ]);
    }
    case 'string': {
      const strings = values.flatMap(stringsOf).filter((s) => s.length >= 2);
      return pick(strings).map((s) => {
        const prefix = s.slice(0, 3);
        return { query: `${def.code}=${enc(prefix)}`, matches: holds((v) => stringsOf(v).some((x) => fold(x).startsWith(fold(prefix)))) };
      });
    }
    case 'reference': {
      const refs = values.map((v) => (v as Json)?.reference).filter((x): x is string => typeof x === 'string' && /^[A-Z][A-Za-z]+\/[^/]+$/.test(x));
      return pick(refs).map((ref) => ({ query: `${def.code}=${enc(ref)}`, matches: holds((v) => (v as Json)?.reference === ref) }));
    }
    case 'uri':
      return pick(values.filter((v): v is string => typeof v === 'string')).map((u) => ({ query: `${def.code}=${enc(u)}`, matches: holds((v) => v === u) }));
    case 'quantity': {
      const qs = values.filter((v): v is Json => typeof (v as Json)?.value === 'number');
      return pick(qs).flatMap((q) => [
        {
          // eq: within the precision the value is written with (38 means [37.5, 38.5))
          query: `${def.code}=${q.value}|${enc(q.system ?? '')}|${enc(q.code ?? '')}`,
          matches: holds((v) => {
            const x = v as Json;
            const half = 0.5 * 10 ** -(String(q.value).split('.')[1]?.length ?? 0);
            return typeof x?.value === 'number' && x.value >= q.value - half && x.value < q.value + half && x.code === q.code && x.system === q.system;
          }),
        },
        { query: `${def.code}=gt${q.value}`, matches: holds((v) => typeof (v as Json)?.value === 'number' && (v as Json).value > q.value) },
      ]);
    }
    case 'date': {
      const days = values.flatMap(daysOf);
      return pick(days).map((day) => ({
        // Only resources whose values each lie within one day take part (ranges across days are tested elsewhere).
        query: `${def.code}=${day}`, matches: holds((v) => daysOf(v)[0] === day),
      }));
    }
    default:
      return [];
  }
}

await eachStore((kind, fresh) => {
  describe(`search engine against the FHIRPath oracle on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await t.store.resources.write('t1', async (w) => {
        await w.insertNew(firstVersions([...DATA, ...CONTAINERS]));
      });
    }, 60_000);
    afterAll(() => t.close());

    test('every core parameter of the data set types agrees with the oracle', async () => {
      let compared = 0;
      const disagreements: string[] = [];
      for (const type of TYPES) {
        const resources = DATA.filter((r) => r.resourceType === type);
        for (const def of paramsOf(type)) {
          // `phonetic` is a Soundex match, not a string prefix (search-engine.test.ts covers it)
          if (!KINDS.has(def.type) || def.code === 'phonetic') continue;
          for (const c of casesFor(type, def, resources)) {
            // Date cases compare only resources whose values each lie within one day.
            const judged = def.type === 'date'
              ? resources.filter((r) => oracleValues(def, r).every((v) => daysOf(v).length === 1))
              : resources;
            const expected = judged.filter(c.matches).map((r) => r.id as string).sort();
            const bundle = await api.search(`${type}?${c.query}&_count=1000&_elements=id`);
            const ids = new Set(judged.map((r) => r.id as string));
            const got = (bundle.entry ?? []).map((e: Json) => e.resource.id as string).filter((id: string) => ids.has(id)).sort();
            compared++;
            if (JSON.stringify(got) !== JSON.stringify(expected)) disagreements.push(`${type}?${c.query}: engine ${got.length}, oracle ${expected.length}`);
          }
        }
      }
      expect(disagreements).toEqual([]);
      expect(compared).toBeGreaterThan(150);
    }, 120_000);

    test('chains through every reference parameter, to stored and to contained targets, agree with the oracle', async () => {
      const all = [...DATA, ...CONTAINERS];
      let compared = 0;
      let inside = 0;
      const disagreements: string[] = [];
      for (const { type, def, target } of links()) {
        // What the chain may reach: the stored resources of the target type and those contained.
        const pool = [...DATA.filter((r) => r.resourceType === target), ...CONTAINERS.flatMap((r) => r.contained as Json[]).filter((c) => c.resourceType === target)];
        const resolved = all.filter((r) => r.resourceType === type).map((r) => ({ id: r.id as string, ...resolveIn(def, r, target) }));
        for (const c of innerCases(target, pool)) {
          // The contained resources one parameter names are searched as one (README): a negation holds
          // when none of them has the value.
          const negation = c.query.includes(':not=');
          const expected = resolved.filter(({ stored, contained }) =>
            stored.some(c.matches) || (contained.length > 0 && (negation ? contained.every(c.matches) : contained.some(c.matches))))
            .map((r) => r.id).sort();
          const bundle = await api.search(`${type}?${def.code}:${target}.${c.query}&_count=1000&_elements=id`);
          const got = (bundle.entry ?? []).map((e: Json) => e.resource.id as string).sort();
          compared++;
          inside += expected.filter((id) => id.endsWith('-c')).length;
          if (JSON.stringify(got) !== JSON.stringify(expected)) disagreements.push(`${type}?${def.code}:${target}.${c.query}: engine ${got.length}, oracle ${expected.length}`);
        }
      }
      expect(disagreements).toEqual([]);
      expect(compared).toBeGreaterThan(100);
      expect(inside).toBeGreaterThan(100);
    }, 120_000);

    test('_has through every reference parameter agrees with the oracle', async () => {
      const referring = [...DATA, ...CONTAINERS];
      let compared = 0;
      let found = 0;
      const disagreements: string[] = [];
      for (const { type: source, def, target } of links()) {
        const sources = referring.filter((r) => r.resourceType === source);
        const targets = DATA.filter((r) => r.resourceType === target);
        // The stored resources each referring resource names through the parameter.
        const named = sources.map((s) => ({ s, keys: new Set(oracleValues(def, s).map((v) => (v as Json)?.reference).filter((x) => typeof x === 'string')) }));
        for (const c of innerCases(source, sources)) {
          const matching = named.filter(({ s }) => c.matches(s));
          const expected = targets.filter((r) => matching.some(({ keys }) => keys.has(`${target}/${r.id}`))).map((r) => r.id as string).sort();
          const bundle = await api.search(`${target}?_has:${source}:${def.code}:${c.query}&_count=1000&_elements=id`);
          const got = (bundle.entry ?? []).map((e: Json) => e.resource.id as string).sort();
          compared++;
          found += expected.length;
          if (JSON.stringify(got) !== JSON.stringify(expected)) disagreements.push(`${target}?_has:${source}:${def.code}:${c.query}: engine ${got.length}, oracle ${expected.length}`);
        }
      }
      expect(disagreements).toEqual([]);
      expect(compared).toBeGreaterThan(100);
      expect(found).toBeGreaterThan(300);
    }, 120_000);

    test('_include through every reference parameter agrees with the oracle', async () => {
      // The data's own resources by `Type/id`: what an include can reach.
      const stored = new Set(DATA.map((r) => `${r.resourceType}/${r.id}`));
      let compared = 0;
      let reached = 0;
      const disagreements: string[] = [];
      for (const type of TYPES) {
        const resources = DATA.filter((r) => r.resourceType === type);
        for (const def of paramsOf(type).filter((d) => d.type === 'reference')) {
          // A page of a few resources at a time, so that each include is a page's, not the whole type's.
          for (let from = 0; from < resources.length; from += 40) {
            const page = resources.slice(from, from + 40);
            const expected = [...new Set(page.flatMap((r) => oracleValues(def, r))
              .map((v) => (v as Json)?.reference).filter((x): x is string => typeof x === 'string' && stored.has(x)))]
              .filter((key) => !page.some((r) => `${r.resourceType}/${r.id}` === key)).sort();
            const ids = page.map((r) => encodeURIComponent(r.id as string)).join(',');
            const bundle = await api.search(`${type}?_id=${ids}&_include=${type}:${def.code}&_count=1000&_elements=id`);
            const got = (bundle.entry ?? []).filter((e: Json) => e.search.mode === 'include').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();
            compared++;
            reached += expected.length;
            if (JSON.stringify(got) !== JSON.stringify(expected)) disagreements.push(`${type}:${def.code} from ${from}: engine ${got.length}, oracle ${expected.length}`);
          }
        }
      }
      expect(disagreements).toEqual([]);
      expect(compared).toBeGreaterThan(100);
      expect(reached).toBeGreaterThan(300);
    }, 120_000);
  });
});
