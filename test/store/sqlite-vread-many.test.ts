/**
 * ResourceRepo.vreadMany on SQLite probes each table's key once per version asked: its JSON array is the outer loop
 * (CROSS JOIN). With a plain JOIN, SQLite's planner scanned every row of the type and probed the array for each: the
 * audit trail's lookup of 500 versions among 200,000 Observations took 40 s (500 vreads: 6 ms), once per 500
 * resources a batch touched.
 */
import { Database } from 'bun:sqlite';
import { afterAll, expect, test } from 'bun:test';
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
  db.close();
  const store = createSqliteStore(path);
  try {
    const asked = Array.from({ length: 500 }, (_, i) => ({ id: `o${i * 199}`, versionId: 1 + (i % 2) }));
    const started = performance.now();
    const got = await store.resources.vreadMany('t', 'Observation', asked);
    const took = performance.now() - started;
    expect(got.map((v) => `${v.id}/${v.versionId}`).sort()).toEqual(asked.map((v) => `${v.id}/${v.versionId}`).sort());
    // By key: milliseconds; the scan took 10-20 s here.
    expect(took).toBeLessThan(2_000);
  } finally {
    await store.close();
  }
}, 120_000);
