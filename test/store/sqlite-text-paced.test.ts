/**
 * The full-text mover on SQLite (src/store/sqlite/text.ts) is paced as writes are (src/store/sqlite/pacer.ts):
 * after many updates (an import batch's: each updated resource's FTS5 row is stale, its new words recent) it
 * moves them in statements of some rows with the event loop turning between them, in one transaction that reads
 * meanwhile do not see half, and leaves every word where it counts.
 */
import { Database } from 'bun:sqlite';
import { afterEach, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareVersion, versionToWrite } from '../../src/fhir/prepared.ts';
import type { Resource } from '../../src/fhir/resource.ts';
import { openDatabase, tryBeginImmediate } from '../../src/store/sqlite/db.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { MOVE_CHUNK_ROWS } from '../../src/store/sqlite/text.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const condition = (id: string, word: string) =>
  ({ resourceType: 'Condition', id, subject: { reference: 'Patient/p1' }, code: { text: `Condition ${word}` } }) as unknown as Resource;
const version = (id: string, word: string, versionId: number) => versionToWrite(prepareVersion(condition(id, word), id, undefined), versionId, 1_000 + versionId, 'PUT');

/** Whether a write transaction holds the database's write lock (tried from another connection). */
function locked(probe: Database): boolean {
  if (!tryBeginImmediate(probe)) return true;
  probe.exec('ROLLBACK');
  return false;
}

test('a move of many stale and recent rows lets the event loop turn between its statements, commits whole, and reads meanwhile see the words as before', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-text-paced-'));
  dirs.push(dir);
  const path = join(dir, 'c.db');
  const n = MOVE_CHUNK_ROWS * 3;
  // The move starts as the last update commits (stale and recent rows of every resource), paced at every chance.
  const s = createSqliteStore(path, { text: { moveAt: 2 * n, moveAfterMs: 1e9 }, writeSliceMs: 0 });
  await s.migrate();
  const probe = openDatabase(path);
  const count = (sql: string) => probe.query<{ n: number }, []>(sql).get()!.n;
  const places = () => ({
    recent: count('SELECT COUNT(*) AS n FROM search_text_recent'),
    stale: count('SELECT COUNT(*) AS n FROM search_text_stale'),
    asthma: count(`SELECT COUNT(*) AS n FROM search_text WHERE search_text MATCH '{content} : "asthma"'`),
    eczema: count(`SELECT COUNT(*) AS n FROM search_text WHERE search_text MATCH '{content} : "eczema"'`),
  });
  const ids = Array.from({ length: n }, (_, i) => `c${i}`);
  // In bulk: FTS5 directly.
  await s.resources.write('t', (w) => w.insertNew(ids.map((id) => version(id, 'asthma', 1))));
  expect(places()).toEqual({ recent: 0, stale: 0, asthma: n, eczema: 0 });
  // Updates in small transactions (fewer rows than a bulk write's): each leaves its words recent and its FTS5 row stale.
  for (let i = 0; i < n; i += 50) {
    await s.resources.write('t', async (w) => {
      for (const id of ids.slice(i, i + 50)) await w.put(version(id, 'eczema', 2));
    });
    if (i + 50 < n) expect(places().recent).toBe(i + 50);
  }
  let turns = 0;
  let inside = 0;
  for (let i = 0; i < 10_000 && (places().recent > 0 || places().stale > 0 || locked(probe)); i++) {
    await new Promise((r) => setImmediate(r));
    turns++;
    if (!locked(probe)) continue;
    inside++;
    // Meanwhile, reads see what was committed before the move: nothing half moved.
    expect(places()).toEqual({ recent: n, stale: n, asthma: n, eczema: 0 });
    expect((await s.resources.read('t', 'Condition', 'c0'))?.versionId).toBe(2);
  }
  // The move held the write lock over several turns of the event loop (one statement chunk each at a budget of 0).
  expect(inside).toBeGreaterThanOrEqual(3);
  expect(places()).toEqual({ recent: 0, stale: 0, asthma: 0, eczema: n });
  probe.close();
  await s.close();
});
