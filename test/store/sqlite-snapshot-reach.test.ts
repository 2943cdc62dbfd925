/**
 * On SQLite a page statement holds the export worker's thread until it ends, its lease heartbeat
 * included, so a page that tests a filter on each row it reads (no window narrows them) reads at most
 * SCAN_ROWS rows of the type: on a filter matching few, a page ends short, and the next starts after the
 * last row it read. Every match still comes, once. (PostgreSQL's statements are awaited, and it reads
 * the type in one.)
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import type { Condition, Store } from '../../src/store/types.ts';
import { tokens, version } from './contract/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'cinder-reach-'));
let store: Store;
/** SCAN_ROWS in src/store/sqlite/snapshot.ts. */
const SCAN_ROWS = 10_000;
const ROWS = 2 * SCAN_ROWS + 5;

beforeAll(async () => {
  store = createSqliteStore(join(dir, 'c.db'));
  await store.migrate();
  const observations = Array.from({ length: ROWS }, (_, i) =>
    version('Observation', `o${i}`, { lastUpdated: 10, index: [{ param: 'code', system: 'http://loinc.org', value: `c${i}` }] }));
  await store.resources.write('t1', (w) => w.insertNew(observations));
}, 60_000);
afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

test('a filtered page reads at most SCAN_ROWS rows; the pages together hold every match', async () => {
  // 40 codes: more code ranges than a window reads, so each page tests the filter on every row.
  const wanted = [ROWS - 1, 3, SCAN_ROWS + 1];
  const codes = [...wanted.map((i) => `c${i}`), ...Array.from({ length: 37 }, (_, i) => `none${i}`)];
  const filters: Condition[][] = [tokens([{ param: 'code', values: codes.map((value) => ({ system: 'http://loinc.org', value })) }])];
  const pages: { count: number; ids: string[] }[] = [];
  let after: number | undefined;
  for (;;) {
    const page = await store.resources.snapshot('t1', { type: 'Observation', at: 1000, limit: 2000, filters, ...(after !== undefined && { after }) });
    const lines = new TextDecoder().decode(page.lines).split('\n').filter(Boolean);
    pages.push({ count: page.count, ids: lines.map((l) => (JSON.parse(l) as { id: string }).id) });
    if (page.next === null) break;
    after = page.next;
  }
  expect(pages).toEqual([{ count: 1, ids: ['o3'] }, { count: 1, ids: [`o${SCAN_ROWS + 1}`] }, { count: 1, ids: [`o${ROWS - 1}`] }]);
}, 60_000);
