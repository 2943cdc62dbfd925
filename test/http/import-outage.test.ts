/**
 * `$import` jobs across outages that are not their fault, as export jobs (export-storage-unreachable.test.ts): an
 * export storage that cannot be reached while an input's error file is written is waited for, and the job is handed
 * back with its attempt refunded, then reads the input again and writes the whole file; one that stays away longer
 * than the wait costs the file, not the job. A database that goes away under an import batch is waited for the same
 * way. Neither fails the job, nor loses or stores twice a resource. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSink, type ExportSink } from '../../src/export/sink.ts';
import { SPOOL_DIR } from '../../src/import/spool.ts';
import { StoreUnavailableError, type Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';

type Json = Record<string, any>;

const refused = () => new Error('ECONNREFUSED 127.0.0.1:9000');

/**
 * A file sink that cannot be reached while `down` is set: `size` fails, `open` throws at once (as the file sink's
 * directory does on a failing disk), and the writes of files opened before fail.
 */
function flakySink(): ExportSink & { down: boolean; refusals: number; downFor: (ms: number) => void } {
  const sink = openSink(`file:${mkdtempSync(join(tmpdir(), 'cinder-sink-'))}`, {});
  let back: number | undefined;
  /** A refusal; the first one after downFor starts the outage's clock. */
  const refuse = () => {
    flaky.refusals++;
    if (back !== undefined) {
      setTimeout(() => (flaky.down = false), back);
      back = undefined;
    }
    return refused();
  };
  const flaky = {
    ...sink,
    kind: sink.kind,
    down: false,
    refusals: 0,
    /** Down until `ms` after the first refusal: a timer started before the job could run out before a slow job met the outage. */
    downFor: (ms: number) => {
      flaky.down = true;
      back = ms;
    },
    size: (key: string) => (flaky.down ? Promise.reject(refuse()) : sink.size(key)),
    open: (key: string) => {
      if (flaky.down) throw refuse();
      const w = sink.open(key);
      return {
        write: (c: string | Uint8Array) => (flaky.down ? Promise.reject(refuse()) : w.write(c)),
        close: () => (flaky.down ? Promise.reject(refuse()) : w.close()),
        abort: () => w.abort(),
      };
    },
  };
  return flaky;
}

/** `store` whose resource write transactions fail as an unreachable database's do, for the calls `fail` picks (counted from 1). */
function flakyStore(store: Store): Store & { fail: (call: number) => boolean; calls: number } {
  const state = { fail: (_call: number) => false, calls: 0 };
  const bound = <T extends object>(target: T, prop: string | symbol) => {
    const v = Reflect.get(target, prop, target);
    return typeof v === 'function' ? v.bind(target) : v;
  };
  const resources = new Proxy(store.resources, {
    get(target, prop) {
      if (prop !== 'write') return bound(target, prop);
      return (...args: Parameters<Store['resources']['write']>) =>
        state.fail(++state.calls) ? Promise.reject(new StoreUnavailableError('the database is unavailable')) : target.write(...args);
    },
  });
  return new Proxy(store, {
    get: (target, prop) => (prop === 'resources' ? resources : prop in state ? state[prop as keyof typeof state] : bound(target, prop)),
    set: (_target, prop, value) => Reflect.set(state, prop, value),
  }) as Store & typeof state;
}

const patientLine = (id: string) => JSON.stringify({ resourceType: 'Patient', id, gender: 'female' });

await eachStore((kind, fresh) => {
  describe(`$import across outages (${kind})`, () => {
    let t: TestApp;
    let token: string;
    /** Tokens of tenants t2, t3 and t4, whose Patients only one test's import writes. */
    let token2: string;
    let token3: string;
    let token4: string;
    let sink: ReturnType<typeof flakySink>;
    let store: ReturnType<typeof flakyStore>;
    // Two good lines around a bad one (its failure goes to the error file), then an id-less one (its id is its line's).
    const lines = [patientLine('ok1'), '{not json', patientLine('ok2'), JSON.stringify({ resourceType: 'Patient', gender: 'male' }), patientLine('ok3')];
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(lines.join('\n') + '\n') });
    const inputUrl = `http://127.0.0.1:${server.port}/p.ndjson`;

    beforeAll(async () => {
      sink = flakySink();
      store = flakyStore(await fresh());
      t = await createTestApp({ store, exportSink: sink, importStorageWaitMs: 3000, env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      token = await t.token();
      token2 = await t.tokenFor('t2', ['system/*.*']);
      token3 = await t.tokenFor('t3', ['system/*.*']);
      token4 = await t.tokenFor('t4', ['system/*.*']);
    });
    afterAll(async () => {
      await t.app.imports.stop();
      server.stop(true);
      await t.close();
    });

    /** Kicks off an import of the input (batches of 2 resources); returns the job's id and status URL. */
    async function kickOff(tenant = 't1', bearer = token): Promise<{ id: string; url: string }> {
      const kick = await t.request(`${t.fhir(tenant)}/$import`, fhirInit(bearer, 'POST', {
        resourceType: 'Parameters',
        parameter: [
          { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
          { name: 'inputSource', valueUri: 'https://source.example.org/fhir' },
          { name: 'storageDetail', part: [{ name: 'type', valueCode: 'http' }, { name: 'maxBatchResourceCount', valueString: '2' }] },
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: inputUrl }] },
        ],
      }));
      expect(kick.status).toBe(202);
      const url = kick.headers.get('content-location')!;
      return { url, id: url.slice(url.lastIndexOf('/') + 1) };
    }

    /** Every Patient stored, each once, with one version (no resource lost or written twice). */
    async function expectPatientsOnce(tenant = 't1', bearer = token): Promise<void> {
      const bundle = (await (await t.request(`${t.fhir(tenant)}/Patient?_count=50`, fhirInit(bearer))).json()) as Json;
      const found = (bundle.entry as Json[]).map((e) => e.resource);
      expect(found).toHaveLength(4);
      expect(found.filter((p) => p.gender === 'male')).toHaveLength(1);
      expect(new Set(found.map((p) => p.id)).size).toBe(4);
      for (const p of found) expect(p.meta.versionId).toBe('1');
    }

    test('an export storage unreachable while the error file is written is waited for; the job resumes, its attempt refunded, and writes the whole file', async () => {
      const { url, id } = await kickOff();
      sink.refusals = 0;
      sink.downFor(1200);
      await t.app.imports.runOnce();
      expect(sink.refusals).toBeGreaterThan(0);
      expect(sink.down).toBe(false);
      const res = await t.request(url, fhirInit(token));
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      expect(body.output).toEqual([{ type: 'Patient', inputUrl, count: 4, unchanged: 4 }]);
      expect(body.error).toHaveLength(1);
      // The failures listed, with no warning of a missing file: the file is there and holds the failure.
      expect((body.error[0].outcome.issue as Json[]).map((i) => i.severity)).toEqual(['error']);
      const file = await t.request(body.error[0].url, fhirInit(token));
      expect(file.status).toBe(200);
      const outcomes = (await file.text()).trim().split('\n').map((l) => JSON.parse(l) as Json);
      expect(outcomes.map((o) => o.issue[0].location)).toEqual([['Line[2]']]);
      // Handed back with the attempt refunded: its second claim is its first counted.
      expect((await t.store.imports.get('t1', id))!.attempts).toBe(1);
      await expectPatientsOnce();
    });

    test('a storage that stays away longer than the wait costs the error file, not the job (attempted once)', async () => {
      const { url, id } = await kickOff('t3', token3);
      sink.down = true;
      try {
        await t.app.imports.runOnce();
      } finally {
        sink.down = false;
      }
      const body = (await (await t.request(url, fhirInit(token3))).json()) as Json;
      expect(body.output).toEqual([{ type: 'Patient', inputUrl, count: 4, unchanged: 0 }]);
      expect(body.error[0].url).toBeUndefined();
      const issues = body.error[0].outcome.issue as Json[];
      expect(issues[0].location).toEqual(['Line[2]']);
      expect(issues.at(-1)).toMatchObject({ severity: 'warning', code: 'exception' });
      expect(issues.at(-1)!.details.text).toContain('could not be written to the export storage');
      expect((await t.store.imports.get('t3', id))!.attempts).toBe(1);
      await expectPatientsOnce('t3', token3);
    });

    test('a database unavailable under import batches, three times, is waited for: the job completes, each resource stored once', async () => {
      const { url, id } = await kickOff('t2', token2);
      // The first batch of each of three claims commits, the second meets the outage.
      store.calls = 0;
      store.fail = (call) => call <= 6 && call % 2 === 0;
      try {
        await t.app.imports.runOnce();
      } finally {
        store.fail = () => false;
      }
      expect(store.calls).toBeGreaterThanOrEqual(8);
      const res = await t.request(url, fhirInit(token2));
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      // The first batch (2 resources) was stored by the first claim and found unchanged by the last.
      expect(body.output).toEqual([{ type: 'Patient', inputUrl, count: 4, unchanged: 2 }]);
      expect(body.error[0].outcome.issue[0].location).toEqual(['Line[2]']);
      expect((await t.store.imports.get('t2', id))!.attempts).toBe(1);
      await expectPatientsOnce('t2', token2);
    });

    test('an import spool that cannot be looked at while an input is downloaded is waited for; the job resumes, its attempt refunded', async () => {
      await t.app.imports.runOnce(); // No job yet: the runner prepares its spool.
      const { url, id } = await kickOff('t4', token4);
      // The spool's directory gone from under the runner (a data disk unmounted), and back 1.2 s later.
      const root = join(t.config.dataDir, SPOOL_DIR);
      renameSync(root, `${root}.away`);
      writeFileSync(root, '');
      setTimeout(() => {
        rmSync(root);
        renameSync(`${root}.away`, root);
      }, 1200);
      await t.app.imports.runOnce();
      const res = await t.request(url, fhirInit(token4));
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      expect(body.output).toEqual([{ type: 'Patient', inputUrl, count: 4, unchanged: 0 }]);
      expect((await t.store.imports.get('t4', id))!.attempts).toBe(1);
      await expectPatientsOnce('t4', token4);
    });
  });
});
