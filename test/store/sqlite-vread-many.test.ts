/**
 * ResourceRepo.vreadMany on SQLite probes each table's key once per version asked: its JSON array is the outer loop
 * (CROSS JOIN). With a plain JOIN, SQLite's planner scanned every row of the type and probed the array for each: the
 * audit trail's lookup of 500 versions among 200,000 Observations took 40 s (500 vreads: 6 ms), once per 500
 * resources a batch touched.
 */
import { Database } from 'bun:sqlite';
import { afterAll, expect, spyOn, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'cinder-vread-many-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('500 versions among 100,000 of their type are read by key, not by a scan of the type', async () => {
  const path = join(dir, 'c.db');
  const created = createSqliteStore(path);
  await created.migrate();
  await created.close();
  // Rows written straight into the tables: the statement's plan, not the writer, is under test.
  const db = new Database(path);
  const n = 100_000;
  const current = db.prepare("INSERT INTO resources (tenant, type, id, version_id, last_updated, deleted, seq, content) VALUES ('t', 'Observation', ?, 2, 0, 0, ?, ?)");
  const history = db.prepare("INSERT INTO resource_history (tenant, type, id, version_id, last_updated, deleted, seq, content) VALUES ('t', 'Observation', ?, 1, 0, 0, ?, ?)");
  db.transaction(() => {
    for (let i = 0; i < n; i++) {
      current.run(`o${i}`, 2 * i + 1, `{"resourceType":"Observation","id":"o${i}"}`);
      history.run(`o${i}`, 2 * i, `{"resourceType":"Observation","id":"o${i}"}`);
    }
  })();
  // The statements the store prepares, to find the one vreadMany asks (its JSON array is its third parameter).
  const prepared = spyOn(Database.prototype, 'query');
  const store = createSqliteStore(path);
  try {
    const asked = Array.from({ length: 500 }, (_, i) => ({ id: `o${i * 199}`, versionId: 1 + (i % 2) }));
    const json = JSON.stringify(asked.map((v) => [v.id, v.versionId]));
    const got = await store.resources.vreadMany('t', 'Observation', asked);
    expect(got.map((v) => `${v.id}/${v.versionId}`).sort()).toEqual(asked.map((v) => `${v.id}/${v.versionId}`).sort());
    const sql = prepared.mock.calls.map(([text]) => String(text)).filter((text) => /json_each\(\?3\)/.test(text) && /\bresource_history h\b/.test(text));
    expect(sql).toHaveLength(1);
    // By key: SQLite's plan for this database (no statistics, as here) walks the array and probes each table's
    // (tenant, type, id, version) key for each element; the scan (a plain JOIN) searched the tables by
    // (tenant, type) alone, every row of the type, and took 10-20 s here.
    const plan = db.query<{ detail: string }, [string, string, string]>(`EXPLAIN QUERY PLAN ${sql[0]}`).all('t', 'Observation', json).map((r) => r.detail);
    const probes = plan.filter((d) => /^(SEARCH|SCAN) [rh]\b/.test(d));
    expect(probes).toHaveLength(2);
    for (const probe of probes) expect(probe).toMatch(/^SEARCH [rh] USING .*\(tenant=\? AND type=\? AND id=\?/);
    // The array is the outer loop of each half: its walk comes before the table's probe.
    const walks = plan.map((d, i) => (d.startsWith('SCAN json_each') ? i : -1)).filter((i) => i >= 0);
    const probed = plan.map((d, i) => (/^SEARCH [rh]\b/.test(d) ? i : -1)).filter((i) => i >= 0);
    expect(walks.map((w, i) => w < probed[i]!)).toEqual([true, true]);
  } finally {
    prepared.mockRestore();
    db.close();
    await store.close();
  }
}, 120_000);
