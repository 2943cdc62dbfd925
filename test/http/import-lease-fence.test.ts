/**
 * `$import`'s lease fence (src/import/run-job.ts, ResourceWriter.holdImportLease): a runner that stalled past its
 * lease, while a runner of another process claimed its job and finished it, commits nothing more of the job once it
 * wakes (each batch's transaction checks the lease and rolls back), and leaves no error file. Two processes on one
 * database, on both stores.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../../src/app.ts';
import { createKeyRing } from '../../src/auth/keys.ts';
import { MAX_TOKEN_TTL } from '../../src/auth/tokens.ts';
import { createFileSink } from '../../src/export/sink-file.ts';
import type { ExportSink } from '../../src/export/sink.ts';
import { silentLogger } from '../../src/log.ts';
import type { Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { storeTargets } from '../helpers/stores.ts';
import { testCoreBundle } from '../helpers/terminology-service.ts';

type Json = Record<string, any>;

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const IDS = ['p1', 'p2', 'p3', 'p4', 'p5', 'p6'];
/** A bad first line (its error file), then six Patients: three batches of two (maxBatchResourceCount). */
const INPUT = '{not json\n' + IDS.map((id) => JSON.stringify({ resourceType: 'Patient', id, name: [{ family: 'Imported' }] }) + '\n').join('');

/**
 * `store` as a process that stalls (a pause of its event loop, its network): once `stallAfter(n)` let n more
 * resource transactions through, every later one, and every renewal of an import lease, waits until `resume()`.
 * `committed` counts the transactions that committed, `committedAfterStall` those of them that waited for the stall.
 */
function stallable(store: Store) {
  let allowed = Infinity;
  let stall: Promise<void> | undefined;
  let resume = () => {};
  let stalled = () => {};
  const began = new Promise<void>((r) => (stalled = r));
  const state = { committed: 0, committedAfterStall: 0 };
  const waitIfStalled = async () => {
    if (!stall && allowed-- <= 0) {
      stall = new Promise((r) => (resume = r));
      stalled();
    }
    if (stall) {
      await stall;
      return true;
    }
    return false;
  };
  const bound = (o: object) => (target: object, key: string | symbol) => {
    const value = Reflect.get(target, key, target) as unknown;
    return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(o) : value;
  };
  const resources = new Proxy(store.resources, {
    get: (target, key) => key !== 'write' ? bound(target)(target, key) : async (tenant: string, fn: Parameters<Store['resources']['write']>[1]) => {
      const after = await waitIfStalled();
      const result = await target.write(tenant, fn);
      state.committed++;
      if (after) state.committedAfterStall++;
      return result;
    },
  });
  const imports = new Proxy(store.imports, {
    get: (target, key) => key !== 'checkpoint' ? bound(target)(target, key) : async (...a: Parameters<Store['imports']['checkpoint']>) => {
      if (stall) await stall;
      return target.checkpoint(...a);
    },
  });
  return {
    store: new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : key === 'imports' ? imports : bound(target)(target, key)) }),
    stallAfter: (n: number) => void (allowed = n),
    began,
    resume: () => resume(),
    state,
  };
}

/** `sink` counting the files it completed under `prefix`. */
function countingSink(sink: ExportSink, prefix: string) {
  const closed: string[] = [];
  const counting: ExportSink = Object.assign(Object.create(sink) as ExportSink, {
    open(key: string) {
      const w = sink.open(key);
      return { write: w.write.bind(w), abort: w.abort.bind(w), close: async () => (await w.close(), key.includes(prefix) && void closed.push(key)) };
    },
  });
  return { sink: counting, closed };
}

/** Another process on the same database: its own store and app, the same configuration and clock. */
async function otherProcess(t: TestApp, store: Store) {
  const keys = createKeyRing(store, t.clock, MAX_TOKEN_TTL);
  await keys.init();
  const app = createApp({ config: t.config, store, keys, clock: t.clock, log: silentLogger, core: testCoreBundle() });
  return { app, request: (path: string, init: RequestInit) => app.request(path, init), close: () => store.close() };
}

for (const target of targets) {
  describe(`$import lease fence (${target.kind})`, () => {
    test('a runner that stalled past its lease while another process ran its job commits nothing more of it, nor an error file', async () => {
      const files = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(INPUT) });
      const db = await target.migrated();
      const first = stallable(db.open());
      const errorsDir = mkdtempSync(join(tmpdir(), 'cinder-fence-'));
      const sink = countingSink(createFileSink(errorsDir), '/import-');
      const t = await createTestApp({
        store: first.store, exportSink: sink.sink,
        env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true', CINDER_EXPORT_LEASE_SECONDS: '2' },
      });
      const other = await otherProcess(t, db.open());
      try {
        const token = await t.token();
        const kick = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', {
          resourceType: 'Parameters',
          parameter: [
            { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
            { name: 'storageDetail', part: [{ name: 'type', valueCode: 'http' }, { name: 'maxBatchResourceCount', valueString: '2' }] },
            { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${files.port}/patients.ndjson` }] },
          ],
        }));
        expect(kick.status).toBe(202);
        const url = kick.headers.get('content-location')!;

        // The first process commits its first batch, then stalls (its lease renewals too).
        first.stallAfter(1);
        const firstRun = t.app.imports.runOnce();
        await first.began;
        // The batch let through may still be committing as the next one stalls.
        // However long a loaded machine takes to commit it (the test's timeout bounds the wait).
        while (first.state.committed < 1) await Bun.sleep(10);
        expect((await t.request(`${t.fhir()}/Patient/p1`, fhirInit(token))).status).toBe(200);
        expect((await t.request(`${t.fhir()}/Patient/p3`, fhirInit(token))).status).toBe(404);

        // Its lease runs out (2 s by the database's clock, which a lease is judged by); another process claims the
        // job and imports the whole input.
        t.clock.advance(5_000);
        let ran = 0;
        for (let i = 0; i < 150 && ran === 0; i++) {
          await Bun.sleep(200);
          ran = await other.app.imports.runOnce();
        }
        expect(ran).toBe(1);
        const status = (await (await other.request(url, fhirInit(token))).json()) as Json;
        expect(status.output).toEqual([{ type: 'Patient', inputUrl: `http://127.0.0.1:${files.port}/patients.ndjson`, count: 6, unchanged: 2 }]);
        expect(status.error).toHaveLength(1);
        // A client then changes p5.
        const changed = await other.request(`${t.fhir()}/Patient/p5`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'p5', name: [{ family: 'Changed' }] }));
        expect(changed.status).toBe(200);

        // The first process wakes: its batches roll back at their lease check; it writes nothing more of the job.
        first.resume();
        await firstRun;
        expect(first.state.committedAfterStall).toBe(0);
        const p5 = (await (await other.request(`${t.fhir()}/Patient/p5`, fhirInit(token))).json()) as Json;
        expect([p5.meta.versionId, p5.name[0].family]).toEqual(['2', 'Changed']);
        for (const id of IDS.filter((i) => i !== 'p5')) {
          const history = (await (await other.request(`${t.fhir()}/Patient/${id}/_history`, fhirInit(token))).json()) as Json;
          expect([id, history.entry.length]).toEqual([id, 1]);
        }
        const job = (await other.app.imports.runOnce(), await t.store.imports.get('t1', url.slice(url.lastIndexOf('/') + 1)))!;
        expect(job.state).toBe('completed');
        expect(JSON.parse(job.progress).done[0]).toMatchObject({ imported: 6, unchanged: 2, failed: 1 });
        // The stalled runner's error file (its own per attempt) is given up, not left beside the one the status links.
        expect(sink.closed).toEqual([]);
      } finally {
        files.stop(true);
        await t.app.imports.stop();
        await other.close();
        await t.close();
        rmSync(errorsDir, { recursive: true, force: true });
      }
    }, 60_000);
  });
}
