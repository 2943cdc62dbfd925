/**
 * Upgrading a database written before search_keys, whose index rows name their tenant, type,
 * parameter and system as text: the migration converts every row, nothing needs reindexing, and every
 * search answers exactly as on a database that today's Cinder wrote from the same resources. Queries
 * are made from the data's own index rows: each parameter's values with and without system, `system|`,
 * `:not`, `:text`, `:missing`, prefixes, `:exact`, `:contains`, dates, quantities with and without
 * units, composites, chains, `_has`, includes, sorts and compartments. Runs on both databases.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { generatePatients } from '../../bench/lib/generator.ts';
import { paramsOf } from '../../src/fhir/definitions.ts';
import { reindex } from '../../src/fhir/reindex.ts';
import type { Store, VersionToWrite } from '../../src/store/types.ts';
import { createTestApp } from '../helpers/app.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { migrateUpTo, migrationVersion, rawStatements, storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';
import { inFlight } from '../helpers/in-flight.ts';

const DATA = [...generatePatients({ patients: 3, seed: 'search-keys' })] as Json[];
const VERSIONS = firstVersions(DATA);

/** The statements with which Cinder wrote these versions (of tenant t1) before search_keys. */
function oldLayout(kind: Store['kind'], versions: VersionToWrite[]): [string, (string | number)[]][] {
  const out: [string, (string | number)[]][] = [];
  const res = "SELECT pk, tenant, type, $3";
  const of = "FROM resources WHERE tenant = 't1' AND type = $1 AND id = $2";
  versions.forEach((v, n) => {
    out.push([`INSERT INTO resources (tenant, type, id, version_id, last_updated, deleted, seq, content)
      VALUES ('t1', $1, $2, 1, $3, ${kind === 'sqlite' ? 0 : false}, $4, $5)`, [v.type, v.id, v.lastUpdated, n + 1, v.content]]);
    const key = [v.type, v.id];
    for (const e of v.index.tokens) {
      out.push([`INSERT INTO search_index (res, tenant, type, param, system, value, display) ${res}, $4, $5, $6 ${of}`, [...key, e.param, e.system, e.value, e.display ?? '']]);
    }
    for (const e of v.index.strings) {
      out.push([`INSERT INTO search_string (res, tenant, type, param, value, exact) ${res}, $4, $5 ${of}`, [...key, e.param, e.value, e.exact]]);
    }
    for (const e of v.index.ranges) {
      out.push([`INSERT INTO search_range (res, tenant, type, param, system, code, low, high) ${res}, $4, $5, $6, $7 ${of}`,
        [...key, e.param, e.system, e.code, e.low, e.high]]);
    }
    for (const e of v.index.composites) {
      out.push([`INSERT INTO search_composite (res, tenant, type, param, system1, value1, system2, value2, low, high) ${res}, $4, $5, $6, $7, $8, $9 ${of}`,
        [...key, e.param, e.system1, e.value1, e.system2, e.value2, e.low, e.high]]);
    }
    for (const p of v.compartments) out.push([`INSERT INTO compartments (res, tenant, patient, type) SELECT pk, tenant, $3, type ${of}`, [...key, p]]);
  });
  return out;
}

const enc = encodeURIComponent;
const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** Searches made from the index rows of the data, one set per type and parameter. */
function queries(): string[] {
  const out = new Set<string>();
  for (const type of [...new Set(VERSIONS.map((v) => v.type))]) {
    const versions = VERSIONS.filter((v) => v.type === type);
    out.add(`${type}?_sort=-_lastUpdated`);
    const patient = versions[0]!.compartments[0];
    if (patient && type !== 'Patient') out.add(`Patient/${patient}/${type}?_sort=_id`);
    for (const def of paramsOf(type)) {
      const c = def.code;
      if (def.type !== 'composite' && def.type !== 'special') out.add(`${type}?${c}:missing=true`).add(`${type}?${c}:missing=false`);
      const pick = <T,>(rows: T[]) => [rows[0], rows[Math.floor(rows.length / 2)]].filter((x): x is T => x !== undefined);
      const rows = <K extends Exclude<keyof VersionToWrite['index'], 'text'>>(table: K) =>
        pick(versions.flatMap((v) => (v.index[table] as VersionToWrite['index'][K][number][]).filter((e) => e.param === c).map((e) => ({ v, e }))));
      switch (def.type) {
        case 'token':
          for (const { e } of rows('tokens')) {
            out.add(`${type}?${c}=${enc(e.value)}`).add(`${type}?${c}:not=${enc(e.value)}`).add(`${type}?_sort=${c}`);
            out.add(e.system ? `${type}?${c}=${enc(`${e.system}|${e.value}`)}` : `${type}?${c}=${enc(`|${e.value}`)}`);
            if (e.system) out.add(`${type}?${c}=${enc(`${e.system}|`)}`).add(`${type}?${c}=${enc(`${e.system}|${e.value}`)},${enc('http://nowhere|x')}`);
            if (e.display && e.display.length >= 3) out.add(`${type}?${c}:text=${enc(e.display.slice(0, 3))}`);
          }
          break;
        case 'reference':
          for (const { v, e } of rows('tokens')) {
            if (!e.system) continue;
            out.add(`${type}?${c}=${enc(`${e.system}/${e.value}`)}`).add(`${type}?${c}:${e.system}._id=${enc(e.value)}`);
            out.add(`${type}?_id=${enc(v.id)}&_include=${type}:${c}`).add(`${e.system}?_id=${enc(e.value)}&_revinclude=${type}:${c}`);
            out.add(`${e.system}?_has:${type}:${c}:_id=${enc(v.id)}`);
          }
          break;
        case 'uri':
          for (const { e } of rows('tokens')) out.add(`${type}?${c}=${enc(e.value)}`).add(`${type}?${c}:below=${enc(e.value.slice(0, 12))}`);
          break;
        case 'string':
          for (const { e } of rows('strings')) {
            out.add(`${type}?${c}=${enc(e.exact.slice(0, 3))}`).add(`${type}?${c}:exact=${enc(e.exact)}`).add(`${type}?_sort=-${c}`);
            if (e.value.length > 3) out.add(`${type}?${c}:contains=${enc(e.value.slice(1, 4))}`);
          }
          break;
        case 'date':
          for (const { e } of rows('ranges')) {
            if (!Number.isFinite(e.low)) continue;
            out.add(`${type}?${c}=${day(e.low)}`).add(`${type}?${c}=ge${day(e.low)}`).add(`${type}?${c}=lt${day(e.low)}`).add(`${type}?_sort=-${c}`);
          }
          break;
        case 'number':
        case 'quantity':
          for (const { e } of rows('ranges')) {
            out.add(`${type}?${c}=${e.low}`).add(`${type}?${c}=gt${e.low}`).add(`${type}?_sort=${c}`);
            if (e.code) out.add(`${type}?${c}=${e.low}|${enc(e.system)}|${enc(e.code)}`).add(`${type}?${c}=ge${e.low}||${enc(e.code)}`);
          }
          break;
        case 'composite':
          for (const { e } of rows('composites')) {
            const first = `${enc(e.system1)}|${enc(e.value1)}`;
            // A quantity keeps its unit in system2|value2.
            if (c.endsWith('quantity')) out.add(`${type}?${c}=${first}$ge${e.low}`).add(`${type}?${c}=${first}$${e.low}|${enc(e.system2)}|${enc(e.value2)}`);
            else if (e.value2) out.add(`${type}?${c}=${first}$${enc(e.system2 ? `${e.system2}|${e.value2}` : e.value2)}`);
          }
          break;
      }
    }
  }
  return [...out];
}

/**
 * Runs the old layout's statements in one transaction, in order: on PostgreSQL sent together (postgres.js
 * pipelines the queries of a transaction issued at once, each still run after the one before), not a round
 * trip apiece (3,491 statements took 7.4 s one by one); on SQLite, in process, one by one.
 */
async function writeOldLayout(kind: Store['kind'], url: string, statements: [string, (string | number)[]][]): Promise<void> {
  if (kind === 'sqlite') {
    await rawStatements(kind, url, statements);
    return;
  }
  const sql = postgres(url, { max: 1, onnotice: () => undefined });
  try {
    await sql.begin((tx) => statements.map(([q, params]) => tx.unsafe(q, params)));
  } finally {
    await sql.end();
  }
}

/** What a search answers: its status and total, and its entries (match or include) in order. */
async function answer(api: FhirClient, query: string) {
  const res = await api.get(`${query}${query.includes('?') ? '&' : '?'}_count=1000&_total=accurate&_elements=id`);
  const body = (await res.json()) as Json;
  const entries = (body.entry ?? []).map((e: Json) => `${e.search?.mode}:${e.resource.resourceType}/${e.resource.id}`);
  return { status: res.status, total: body.total as number | undefined, entries };
}

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`search keys upgrade on ${target.kind}`, () => {
    test('index rows of the layout before search_keys are converted and answer every search as rows written today', async () => {
      const version = migrationVersion(target.kind, 'search_keys');
      const old = await target.fresh();
      await migrateUpTo(target.kind, old.url, version - 1);
      await writeOldLayout(target.kind, old.url, oldLayout(target.kind, VERSIONS));
      const upgraded = old.open();
      expect((await upgraded.migrate()).applied.slice(0, 2)).toEqual([`${version}_search_keys`, `${version + 1}_search_text`]);
      // The keys changed how rows are stored, not which: the searches below run on the converted rows.
      // Only the full-text words (index model 2, a later migration) wait for the reindex at start.
      expect(await upgraded.resources.indexing.state()).toEqual({ model: 1, after: 0 });
      const a = await createTestApp({ store: upgraded });
      const b = await createTestApp({ store: (await target.migrated()).open() });
      try {
        await b.store.resources.write('t1', (w) => w.insertNew(VERSIONS));
        const [apiA, apiB] = [fhirClient(a, await a.token()), fhirClient(b, await b.token())];
        const all = queries();
        const differ: string[] = [];
        const failed: string[] = [];
        let found = 0;
        // Both databases asked at once, and on PostgreSQL a few searches in flight (the server's backends do the
        // work; SQLite's runs in this process, where overlapping gains nothing).
        const answers = await inFlight(all, target.kind === 'postgres' ? 4 : 1, (q) => Promise.all([answer(apiA, q), answer(apiB, q)]));
        for (const [i, q] of all.entries()) {
          const [x, y] = answers[i]!;
          if (JSON.stringify(x) !== JSON.stringify(y)) differ.push(`${q}: upgraded ${JSON.stringify(x).slice(0, 300)}, written today ${JSON.stringify(y).slice(0, 300)}`);
          if (y.status !== 200) failed.push(`${q}: ${y.status}`);
          if (y.entries.length) found++;
        }
        expect(differ).toEqual([]);
        expect(failed).toEqual([]);
        expect(all.length).toBeGreaterThan(500);
        expect(found).toBeGreaterThan(all.length / 2);
        // The reindex then adds the words, and nothing else changes.
        expect((await reindex(upgraded)).done).toBe(VERSIONS.length);
        for (const q of ['Patient?_content=a*', 'Observation?_content=final', all[0]!, all[all.length - 1]!]) {
          expect(await answer(apiA, q)).toEqual(await answer(apiB, q));
        }
        expect((await answer(apiA, 'Observation?_content=final')).entries.length).toBeGreaterThan(0);
      } finally {
        await a.close();
        await b.close();
      }
    }, 180_000);
  });
}
