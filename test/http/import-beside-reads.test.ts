import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, tryBeginImmediate } from '../../src/store/sqlite/db.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { migratedSqliteFile } from '../helpers/stores.ts';

// SQLite alone: its statements block the thread, so a batch written in one go held every other request;
// PostgreSQL's writes await the network, and its import tests (import.test.ts) run as before.

const LINES = 1500;
const observation = (i: number) => JSON.stringify({ resourceType: 'Observation', id: `o${i}`, status: 'final', code: { text: `glucose ${i}` }, subject: { reference: 'Patient/p' } });

let t: TestApp;
let token: string;
let dir: string;
let path: string;
const files = Bun.serve({
  port: 0, hostname: '127.0.0.1',
  fetch: () => new Response(Array.from({ length: LINES }, (_, i) => observation(i)).join('\n') + '\n'),
});

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cinder-import-reads-'));
  path = migratedSqliteFile(join(dir, 'cinder.db'));
  // A budget of 0: the writes let the event loop turn at every chance, whatever this machine's speed.
  t = await createTestApp({ store: createSqliteStore(path, { writeSliceMs: 0 }), env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
  token = await t.token();
});
afterAll(async () => {
  await t.app.imports.stop();
  await files.stop(true);
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

test("reads are answered while an $import batch's transaction is open on SQLite; the batch commits whole", async () => {
  expect((await t.request(`${t.fhir()}/Patient/p`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'p' }))).status).toBe(201);
  const kick = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', {
    resourceType: 'Parameters',
    parameter: [
      { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
      { name: 'input', part: [{ name: 'type', valueCode: 'Observation' }, { name: 'url', valueUri: `http://127.0.0.1:${files.port}/o.ndjson` }] },
    ],
  }));
  expect(kick.status).toBe(202);

  // Another connection to the file sees whether a write transaction holds the lock, and what is committed.
  const probe = openDatabase(path);
  const committed = () => probe.query<{ n: number }, []>("SELECT count(*) AS n FROM resources WHERE type = 'Observation'").get()!.n;
  const locked = () => {
    if (!tryBeginImmediate(probe)) return true;
    probe.exec('ROLLBACK');
    return false;
  };
  let running = true;
  const job = t.app.imports.runOnce().finally(() => (running = false));
  const seen: number[] = [];
  let answered = 0;
  while (running) {
    await new Promise((r) => setImmediate(r));
    if (!locked()) continue;
    const before = committed();
    const [read, health] = await Promise.all([t.request(`${t.fhir()}/Patient/p`, fhirInit(token)), t.request('/healthz')]);
    expect(read.status).toBe(200);
    expect(health.status).toBe(200);
    // Answered inside one transaction: still open, and nothing committed meanwhile.
    if (locked() && committed() === before) {
      answered++;
      seen.push(before);
    }
  }
  await job;
  probe.close();
  expect(answered).toBeGreaterThan(0);
  // Each batch commits whole: what readers saw committed is 0 or a sum of whole batches (1,000, then 500).
  for (const n of seen) expect([0, 1000, LINES]).toContain(n);
  const status = await t.request(`${t.fhir()}/$import-status/${kick.headers.get('content-location')!.split('/').pop()}`, fhirInit(token));
  expect(status.status).toBe(200);
  expect(((await status.json()) as { output: { count: number }[] }).output).toEqual([expect.objectContaining({ count: LINES })]);
  const count = await t.request(`${t.fhir()}/Observation?_summary=count`, fhirInit(token));
  expect(((await count.json()) as { total: number }).total).toBe(LINES);
});
