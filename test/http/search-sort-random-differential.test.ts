/**
 * Randomized differential test of sorted searches (search-sql.ts sortWalk, crossingTies, tiesPage, withoutKey):
 * seeded data sets whose values are skewed (one value most resources share, a few rare values before and after
 * it in both directions, many resources without the key, multi-valued keys, `_lastUpdated` ties by batch,
 * Patient and Group subjects of one id), each page of each search compared against the sort's definition
 * computed in memory: every key type (token, date, reference incl. a Group subject and `patient`, quantity,
 * string, number, `_id`, `_lastUpdated`), one and several keys, both directions, `_count` from 1 to 300, with
 * conditions whose matches are common or rare, at offsets, and with resources deleted and updated between
 * pages. On SQLite and PostgreSQL, unanalysed (autovacuum off) and then analysed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import type { TestApp } from '../helpers/app.ts';
import { craftToken, fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { limiter } from '../helpers/in-flight.ts';
import { prng } from '../helpers/prng.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

/** The drawn data set's seed (another: SORT_DIFF_SEED=<n>); the extreme one's is the next. */
const SEED = Number(process.env.SORT_DIFF_SEED ?? 20261202);
const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
const DAY = 86_400_000;

interface Obs {
  type: 'Observation';
  id: string;
  status: string;
  cats: { system: string; code: string }[];
  /** effectiveDateTime: its text and its range [low, high). */
  date?: { text: string; low: number; high: number };
  subject?: string;
  qty?: number;
  str?: string;
  lu: number;
}
interface Risk { type: 'RiskAssessment'; id: string; probs: number[]; lu: number }
type Rec = Obs | Risk;

/** One of `rares`, `dominant` at `share`, or undefined at `missing`. */
function skewed<T>(r: () => number, dominant: T, rares: T[], share: number, missing: number): T | undefined {
  const x = r();
  if (x < missing) return undefined;
  if (x < missing + share * (1 - missing)) return dominant;
  return rares[Math.floor(r() * rares.length)];
}

const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
const D0 = Date.parse('2026-03-01T10:00:00Z');

/**
 * A data set of `n` Observations and `m` RiskAssessments, its skews drawn from `seed`, or (`extreme`) each
 * key's common value on 85% of the resources that have the key, 5% without it, and 40% of the categorised
 * with a second category (a resource whose key is before the common value, that value among its others).
 */
function dataSet(seed: number, n: number, m: number, extreme = false): Rec[] {
  const r = prng(seed);
  const share = () => (extreme ? 0.85 : 0.45 + r() * 0.45);
  const missing = () => (extreme ? 0.05 : r() < 0.3 ? 0 : r() * 0.5);
  const second = extreme ? 0.4 : 0.15;
  const [sStatus, sCat, mCat, sDate, mDate, sSubj, mSubj, sQty, mQty, sStr] = [share(), share(), missing(), share(), missing(), share(), missing(), share(), missing(), share()];
  const taken = new Set<string>();
  const newId = (prefix: string) => {
    for (;;) {
      const id = prefix + Math.floor(r() * 36 ** 5).toString(36) + (r() < 0.2 ? '-x' : '');
      if (!taken.has(id)) return taken.add(id), id;
    }
  };
  const out: Rec[] = [];
  const rareSeconds = Array.from({ length: 6 }, () => D0 + Math.round((r() - 0.5) * 8) * DAY + Math.round(r() * 10) * 3_600_000 - 9 * 3_600_000 + Math.round(r() * 3000) * 1000);
  for (let i = 0; i < n; i++) {
    const status = skewed(r, 'final', ['amended', 'cancelled', 'registered', 'preliminary', 'entered-in-error'], sStatus, 0)!;
    const cats: Obs['cats'] = [];
    const c = skewed(r, 'c-m', ['c-a', 'c-z', 'c-b'], sCat, mCat);
    if (c !== undefined) {
      cats.push({ system: r() < 0.2 ? 'http://example.org/cat' : CAT, code: c });
      if (r() < second) cats.push({ system: CAT, code: r() < 0.5 ? 'c-a' : 'c-z' });
    }
    const d = skewed<number | 'day'>(r, D0, [...rareSeconds, 'day'], sDate, mDate);
    const date = d === undefined ? undefined
      : d === 'day' ? { text: '2026-03-01', low: Date.parse('2026-03-01T00:00:00Z'), high: Date.parse('2026-03-02T00:00:00Z') }
      : { text: iso(d), low: d, high: d + 1000 };
    const subject = skewed(r, 'Patient/p0', ['Patient/p1', 'Patient/a9', 'Group/p0', 'Group/g1', 'Patient/z2'], sSubj, mSubj);
    const v = r();
    const qty = v < 0.55 ? skewed(r, 5, [1, 2, 3, 7, 9, 40], sQty, mQty) : undefined;
    const str = v >= 0.55 && v < 0.85 ? skewed(r, 'mid', ['Alpha', 'beta', 'zeta', 'Mid'], sStr, 0.1) : undefined;
    out.push({ type: 'Observation', id: newId('o'), status, cats, ...(date && { date }), ...(subject && { subject }), ...(qty !== undefined && { qty }), ...(str !== undefined && { str }), lu: 0 });
  }
  for (let i = 0; i < m; i++) {
    const probs: number[] = [];
    for (let k = Math.floor(r() * 4); k > 0; k--) probs.push(r() < 0.6 ? 0.5 : Math.round(r() * 99 + 1) / 100);
    out.push({ type: 'RiskAssessment', id: newId('r'), probs, lu: 0 });
  }
  return out;
}

const two = (x: number) => x.toFixed(2);
function toFhir(x: Rec): Json {
  if (x.type === 'RiskAssessment') {
    return {
      resourceType: 'RiskAssessment', id: x.id, status: 'final', subject: { reference: 'Patient/p0' },
      ...(x.probs.length > 0 && { prediction: x.probs.map((p) => ({ probabilityDecimal: Number(two(p)) })) }),
    };
  }
  return {
    resourceType: 'Observation', id: x.id, status: x.status,
    ...(x.cats.length > 0 && { category: x.cats.map((c) => ({ coding: [c] })) }),
    code: { coding: [{ system: 'http://example.org/codes', code: 'x' }] },
    ...(x.subject && { subject: { reference: x.subject } }),
    ...(x.date && { effectiveDateTime: x.date.text }),
    ...(x.qty !== undefined && { valueQuantity: { value: x.qty, unit: 'mg', system: 'http://unitsofmeasure.org', code: 'mg' } }),
    ...(x.str !== undefined && { valueString: x.str }),
  };
}

type Key = string | number | undefined;
const least = <T extends string | number>(xs: T[], desc: boolean): T | undefined =>
  xs.length === 0 ? undefined : xs.reduce((a, b) => ((desc ? b > a : b < a) ? b : a));

/** A resource's key for one sort parameter, as README's `_sort` has it. */
function keyOf(x: Rec, param: string, desc: boolean): Key {
  if (param === '_id') return x.id;
  if (param === '_lastUpdated') return x.lu;
  if (x.type === 'RiskAssessment') {
    // Two decimals each: the number's range is its value ± 0.005 alike, so its ends order as its values.
    return param === 'probability' ? least(x.probs, desc) : undefined;
  }
  switch (param) {
    case 'status': return x.status;
    case 'category': return least(x.cats.map((c) => c.code), desc);
    case 'date': return x.date === undefined ? undefined : desc ? x.date.high : x.date.low;
    case 'subject': return x.subject?.split('/')[1];
    case 'patient': return x.subject?.startsWith('Patient/') ? x.subject.split('/')[1] : undefined;
    case 'value-quantity': return x.qty;
    case 'value-string': return x.str?.toLowerCase();
  }
  throw new Error(param);
}

interface SortKey { param: string; desc: boolean }
const parseSort = (s: string): SortKey[] => s.split(',').map((p) => ({ param: p.replace(/^-/, ''), desc: p.startsWith('-') }));

/** A resource's place in the sort: its keys and id. */
const place = (x: Rec, keys: SortKey[]) => ({ keys: keys.map((k) => keyOf(x, k.param, k.desc)), id: x.id });
type Place = ReturnType<typeof place>;

function comparePlaces(a: Place, b: Place, keys: SortKey[]): number {
  for (let i = 0; i < keys.length; i++) {
    const [x, y] = [a.keys[i], b.keys[i]];
    if (x === y) continue;
    if (x === undefined || y === undefined) return x === undefined ? 1 : -1;
    return (x < y) !== keys[i]!.desc ? -1 : 1;
  }
  // `-_lastUpdated` alone is the keyset order: its ties by id descending.
  const idDesc = keys.length === 1 && keys[0]!.param === '_lastUpdated' && keys[0]!.desc;
  return a.id === b.id ? 0 : (a.id < b.id) !== idDesc ? -1 : 1;
}

/** The matches of `type` (with `filter`) in the sort's order. */
function ordered(data: Rec[], type: string, filter: (x: Rec) => boolean, sort: string): string[] {
  const keys = parseSort(sort);
  return data.filter((x) => x.type === type && filter(x)).map((x) => place(x, keys)).sort((a, b) => comparePlaces(a, b, keys)).map((p) => p.id);
}

/** Conditions: their query text and their test in memory. */
const CONDITIONS: [string, (x: Rec) => boolean][] = [
  ['', () => true],
  ['&status=final', (x) => x.type === 'Observation' && x.status === 'final'],
  [`&category=${CAT}|c-m`, (x) => x.type === 'Observation' && x.cats.some((c) => c.system === CAT && c.code === 'c-m')],
  ['&category=c-z', (x) => x.type === 'Observation' && x.cats.some((c) => c.code === 'c-z')],
  ['&status=amended', (x) => x.type === 'Observation' && x.status === 'amended'],
  ['&subject=Patient/p0', (x) => x.type === 'Observation' && x.subject === 'Patient/p0'],
];

const OBS_SORTS = [
  'status', '-status', 'category', '-category', 'date', '-date', 'subject', '-subject', 'patient', '-patient',
  'value-quantity', '-value-quantity', 'value-string', '-value-string', '_id', '-_id', '_lastUpdated', '-_lastUpdated',
  'status,-date', '-status,subject', 'date,status', '-date,-status', 'category,_lastUpdated', 'subject,-_id', '-date,-_lastUpdated',
  'patient,value-quantity', '-patient,-date', 'value-string,-status', '-value-quantity,category', 'status,_id', '-status,-_id',
  '-category,patient', 'subject,date', '_lastUpdated,status',
];
const RISK_SORTS = ['probability', '-probability', 'probability,_id', '-probability,_lastUpdated'];
const COUNTS = [1, 2, 5, 13, 40, 300];

interface Search { type: string; sort: string; count: number; condition: number }

/** The searches of a data set: every sort, each at two counts and a condition drawn from `seed`. */
function searches(seed: number): Search[] {
  const r = prng(seed);
  const out: Search[] = [];
  for (const sort of OBS_SORTS) {
    for (let k = 0; k < 2; k++) {
      out.push({ type: 'Observation', sort, count: COUNTS[Math.floor(r() * COUNTS.length)]!, condition: r() < 0.5 ? 0 : 1 + Math.floor(r() * (CONDITIONS.length - 1)) });
    }
    // A page whose first rows reach past the few values before the common one (crossingTies).
    out.push({ type: 'Observation', sort, count: 40, condition: 0 });
  }
  for (const sort of RISK_SORTS) for (const count of [1, 7, 120]) out.push({ type: 'RiskAssessment', sort, count, condition: 0 });
  return out;
}

const query = (s: Search) => `${s.type}?_sort=${s.sort}&_count=${s.count}${CONDITIONS[s.condition]![0]}`;
/** The pages read of a search: all of them, or the first 16 of small pages. */
const MAX_PAGES = 16;

/** Beyond DRIVER_MAX_ROWS (2,000) matches of the common conditions in the extreme set: the walk, not the condition, drives. */
const N = Number(process.env.SORT_DIFF_N ?? 2600);
const M = 150;
/** A data set of drawn skews, and an extreme one. */
const SETS = [SEED, SEED + 1];

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  for (const seed of SETS) {
    describe(`sorted searches on skewed data set ${seed}, as sorted in memory (${target.kind})`, () => {
      let t: TestApp;
      let api: FhirClient;
      /** A client whose token's patient in context is p0: its searches hold p0's compartment as a condition. */
      let p0: FhirClient;
      let data: Rec[];
      const r = prng(seed * 7 + 1);

      beforeAll(async () => {
        let url: string;
        ({ t, api, url } = await appOnFresh(target));
        if (target.kind === 'postgres') {
          const conn = postgres(url, { max: 1, onnotice: () => undefined });
          for (const table of ['resources', 'search_keys', 'search_index', 'search_string', 'search_range', 'search_composite', 'compartments']) {
            await conn.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
          }
          await conn.end();
        }
        p0 = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p0' }));
        data = dataSet(seed, N, M, seed === SEED + 1);
        await t.store.resources.write('t1', (w) => w.insertNew(firstVersions([{ resourceType: 'Patient', id: 'p0' }, { resourceType: 'Patient', id: 'p1' }, { resourceType: 'Group', id: 'p0', type: 'person', actual: true }])));
        // `_lastUpdated` by batches: one large (many ties), the rest small.
        const shuffled = [...data].sort(() => r() - 0.5);
        let at = 0;
        for (let b = 0; at < shuffled.length; b++) {
          const size = b === 1 ? Math.ceil(shuffled.length * 0.6) : 1 + Math.floor(r() * 40);
          const batch = shuffled.slice(at, at + size);
          const lu = Date.parse('2026-01-01T00:00:00Z') + b * 1000 + Math.floor(r() * 3) * 1000;
          for (const x of batch) x.lu = lu;
          await t.store.resources.write('t1', (w) => w.insertNew(firstVersions(batch.map(toFhir), lu)));
          at += size;
        }
      }, 120_000);
      afterAll(() => t.close());

      /** Pages of `q` by the next links (up to MAX_PAGES), each checked against `expected` in turn. */
      const walk = async (q: string, count: number, expected: string[], what: string, client = api) => {
        let next: string | undefined = q;
        let at = 0;
        for (let n = 0; next && n < MAX_PAGES; n++) {
          const b = await client.search(next);
          const got = ids(b);
          expect([what, q, n, got]).toEqual([what, q, n, expected.slice(at, at + count)]);
          at += got.length;
          next = link(b, 'next');
          if (at >= expected.length) expect([what, q, 'no next after the last', next]).toEqual([what, q, 'no next after the last', undefined]);
        }
      };

      /** Offsets near each place the sort changes value (and the keyless' start), and one drawn: up to four. */
      const offsetsOf = (s: Search, expected: string[], byId: Map<string, Rec>): number[] => {
        const keys = parseSort(s.sort);
        const at = new Set<number>();
        for (let i = 1; i < expected.length; i++) {
          const [a, b] = [keyOf(byId.get(expected[i - 1]!)!, keys[0]!.param, keys[0]!.desc), keyOf(byId.get(expected[i]!)!, keys[0]!.param, keys[0]!.desc)];
          if (a !== b) for (const d of [-1, 0]) at.add(Math.max(1, i + d));
        }
        at.add(1 + Math.floor(r() * Math.max(1, expected.length)));
        return [...at].sort(() => r() - 0.5).slice(0, 4);
      };

      /** The pages at `chosen` offsets, each with its next page. */
      const offsets = async (s: Search, expected: string[], chosen: number[]) => {
        for (const offset of chosen) {
          const q = `${query(s)}&_offset=${offset}`;
          const b = await api.search(q);
          expect([q, ids(b)]).toEqual([q, expected.slice(offset, offset + s.count)]);
          const next = link(b, 'next');
          if (next !== undefined) {
            const b2 = await api.search(next);
            expect([q, 'next', ids(b2)]).toEqual([q, 'next', expected.slice(offset + s.count, offset + 2 * s.count)]);
          } else expect([q, 'next']).toEqual([q, offset + s.count >= expected.length ? 'next' : 'a next link']);
        }
      };

      /**
       * Every search's pages, a few searches at a time (each one's pages in turn: they wait mostly on the
       * database). What each expects, and the offsets drawn, are worked out first, in the searches' order, so that
       * a seed draws the same offsets whatever order the answers come in.
       */
      const run = async (phase: string) => {
        // On PostgreSQL the server's backends do the work; SQLite's run in this process, where overlapping gains nothing.
        const limit = limiter(target.kind === 'postgres' ? 4 : 1);
        const jobs: Promise<void>[] = [];
        const byId = new Map(data.map((x) => [x.id, x]));
        // A search drawn twice (the same sort, count and condition) is walked once; its offsets are drawn for each.
        const walked = new Set<string>();
        const sortedAs = new Map<string, string[]>();
        for (const s of searches(seed)) {
          const as = `${s.type}?${s.sort}&${s.condition}`;
          const expected = sortedAs.get(as) ?? sortedAs.set(as, ordered(data, s.type, CONDITIONS[s.condition]![1], s.sort)).get(as)!;
          const chosen = s.count < 300 ? offsetsOf(s, expected, byId) : [];
          const first = !walked.has(query(s));
          walked.add(query(s));
          jobs.push(limit(async () => {
            if (first) await walk(query(s), s.count, expected, phase);
            await offsets(s, expected, chosen);
          }));
        }
        // In patient p0's compartment (its Observations by `subject`: a Group p0's are not among them).
        for (const s of searches(seed + 5).filter((x) => x.type === 'Observation').slice(0, 16)) {
          const [, test] = CONDITIONS[s.condition]!;
          const expected = ordered(data, s.type, (x) => test(x) && x.type === 'Observation' && x.subject === 'Patient/p0', s.sort);
          jobs.push(limit(() => walk(query(s), s.count, expected, `${phase}, patient p0`, p0)));
        }
        // Every search ends before the test does (its app closed after), the first failure reported.
        const failed = (await Promise.allSettled(jobs)).find((x): x is PromiseRejectedResult => x.status === 'rejected');
        if (failed) throw failed.reason;
      };

      /** A first page, resources deleted and updated after it, then the next pages: the rest after the first page's last place. */
      const changes = async (phase: string) => {
        const chosen = searches(seed + 3).filter((s) => s.type === 'Observation' && s.count <= 40).slice(0, 8);
        for (const [n, s] of chosen.entries()) {
          const keys = parseSort(s.sort);
          const [, test] = CONDITIONS[s.condition]!;
          const b = await api.search(query(s));
          const first = ids(b);
          const expected = ordered(data, s.type, test, s.sort);
          expect([phase, query(s), first]).toEqual([phase, query(s), expected.slice(0, s.count)]);
          const next = link(b, 'next');
          if (next === undefined) continue;
          const lastOf = structuredClone(data.find((x) => x.id === first[first.length - 1])!) as Obs;
          const last = place(lastOf, keys);
          // The later pages are read as of the first page's time (src/fhir/search-pin.ts): the matches then, after its place.
          const then = structuredClone(data);
          const obs = data.filter((x): x is Obs => x.type === 'Observation');
          // Two deleted (every other time the first page's last among them), four updated: to the common value,
          // to none, from none to a rare one, to the first page's last key.
          for (let k = 0; k < 2; k++) {
            const gone = k === 0 && n % 2 === 0 ? obs.find((x) => x.id === last.id)! : obs[Math.floor(r() * obs.length)]!;
            if (gone === undefined) continue;
            expect((await api.del(`Observation/${gone.id}`)).status).toBe(200);
            data.splice(data.indexOf(gone), 1);
            obs.splice(obs.indexOf(gone), 1);
          }
          const edits: ((x: Obs) => void)[] = [
            (x) => { x.status = 'final'; x.date = { text: iso(D0), low: D0, high: D0 + 1000 }; x.subject = 'Patient/p0'; x.qty = 5; delete x.str; x.cats = [{ system: CAT, code: 'c-m' }]; },
            (x) => { delete x.date; delete x.subject; delete x.qty; delete x.str; x.cats = []; },
            (x) => { x.status = 'amended'; x.date = { text: '2026-02-01T03:00:00Z', low: Date.parse('2026-02-01T03:00:00Z'), high: Date.parse('2026-02-01T03:00:01Z') }; x.subject = 'Patient/a9'; x.cats = [{ system: CAT, code: 'c-a' }]; x.qty = 1; delete x.str; },
            (x) => {
              const of = lastOf;
              Object.assign(x, { status: of.status, cats: [...of.cats] });
              for (const f of ['date', 'subject', 'qty', 'str'] as const) (of[f] === undefined ? delete x[f] : Object.assign(x, { [f]: of[f] }));
            },
          ];
          for (const [e, edit] of edits.entries()) {
            // Every other time the first page's last is moved (to the common value or to none).
            const x = e < 2 && n % 2 === 1 && obs.some((y) => y.id === last.id) && e === n % 4 >> 1 ? obs.find((y) => y.id === last.id)! : obs[Math.floor(r() * obs.length)]!;
            edit(x);
            const stored = await api.put200(toFhir(x));
            x.lu = Date.parse(stored.meta.lastUpdated);
          }
          const rest = then.filter((x) => x.type === s.type && test(x)).map((x) => place(x, keys))
            .filter((p) => comparePlaces(p, last, keys) > 0).sort((a, b) => comparePlaces(a, b, keys)).map((p) => p.id);
          await walk(next, s.count, rest, `${phase}, after changes`);
        }
      };

      test('unanalysed: every page, and pages at offsets', () => run('unanalysed'), 600_000);
      test('unanalysed: pages after resources deleted and updated', () => changes('unanalysed'), 600_000);
      test('analysed: every page, and pages at offsets', async () => {
        await t.store.resources.indexing.analyze();
        await run('analysed');
      }, 600_000);
      test('analysed: pages after resources deleted and updated', () => changes('analysed'), 600_000);
    });
  }
}
