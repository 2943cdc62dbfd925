/**
 * `$import` with real `cinder serve` processes: the process running an import is killed with SIGKILL while
 * it fetches an input; the next process (a restart on SQLite, another process on PostgreSQL) claims the job
 * once its lease runs out and completes it, the interrupted input read again from its first line (fetched with the
 * credential the job's row keeps); an input of id-less lines interrupted mid-input stores each line once.
 */
import { expect, test } from 'bun:test';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { systemClock } from '../../src/clock.ts';
import { clientToken, freePort, startServer } from '../helpers/export-e2e.ts';
import { cleanupAfterFile } from '../helpers/processes.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const { tempDir, killAfter } = cleanupAfterFile(targets);

const line = (id: string) => JSON.stringify({ resourceType: 'Patient', id, active: true }) + '\n';

for (const target of targets) {
  test(`${target.kind}: an import whose process was killed is completed by the next process`, async () => {
    const dir = tempDir('cinder-import-e2e-');
    const db = await target.migrated();
    const url = target.kind === 'sqlite' ? 'sqlite:' + db.url : db.url;
    const store = db.open();
    await store.migrate();
    await createTenant(store, systemClock, 't1');
    const { client, clientSecret } = await createClient(store, systemClock, { tenant: 't1', scopes: ['system/*.*'] });

    // The first input sends a line, then holds the rest until released; the second is whole.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const files = Bun.serve({
      port: 0, hostname: '127.0.0.1',
      fetch(req) {
        // The inputs need the job's credential, which the second process reads from the job's row.
        if (req.headers.get('authorization') !== `Basic ${btoa('importer:secret')}`) return new Response(null, { status: 401 });
        if (new URL(req.url).pathname === '/whole.ndjson') return new Response(line('w1') + line('w2'));
        return new Response(new ReadableStream({
          async start(c) {
            c.enqueue(new TextEncoder().encode(line('h1')));
            await released;
            c.enqueue(new TextEncoder().encode(line('h2') + line('h3')));
            c.close();
          },
        }));
      },
    });
    const env = { CINDER_DATA_DIR: dir, CINDER_DATABASE_URL: url, CINDER_IMPORT_ALLOW_PRIVATE: 'true', CINDER_EXPORT_LEASE_SECONDS: '2', CINDER_LOG_LEVEL: 'warn' };
    try {
      // Both processes share one public base URL (the tokens' audience), as behind a load balancer.
      const port = freePort();
      const publicBase = `http://127.0.0.1:${port}`;
      const first = await startServer(env, port);
      killAfter(first.proc);
      const token = await clientToken(first.base, client.clientId, clientSecret!);
      const fhir = `${first.base}/tenants/t1/fhir/R4`;
      const input = (path: string) => ({ name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${files.port}${path}` }] });
      const kick = await fetch(`${fhir}/$import`, {
        method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' },
        body: JSON.stringify({ resourceType: 'Parameters', parameter: [
          { name: 'storageDetail', part: [{ name: 'type', valueCode: 'http' }, { name: 'credentialHttpBasic', valueString: 'importer:secret' }] },
          input('/held.ndjson'), input('/whole.ndjson'),
        ] }),
      });
      expect(kick.status).toBe(202);
      const statusPath = new URL(kick.headers.get('content-location')!).pathname;
      const id = statusPath.slice(statusPath.lastIndexOf('/') + 1);
      for (let i = 0; i < 400 && (await store.imports.get('t1', id))?.state !== 'in-progress'; i++) await Bun.sleep(25);
      expect((await store.imports.get('t1', id))!.state).toBe('in-progress');
      first.proc.kill('SIGKILL');
      await first.proc.exited;
      release();

      const second = await startServer(env, freePort(), publicBase);
      killAfter(second.proc);
      let body: { output: { inputUrl: string; count: number }[]; error: unknown[] } | undefined;
      for (let i = 0; i < 600 && !body; i++) {
        const res = await fetch(second.base + statusPath, { headers: { Authorization: `Bearer ${token}` } });
        if (res.status === 200) body = (await res.json()) as typeof body;
        else if (res.status !== 202) throw new Error(`status ${res.status}: ${await res.text()}`);
        else await Bun.sleep(50);
      }
      expect(body!.output.map((o) => o.count)).toEqual([3, 2]);
      expect(body!.error).toEqual([]);
      expect((await store.imports.get('t1', id))!.attempts).toBe(2);
      expect((await store.imports.get('t1', id))!.credential).toBeNull();
      for (const p of ['h1', 'h2', 'h3', 'w1', 'w2']) {
        expect((await fetch(`${second.base}/tenants/t1/fhir/R4/Patient/${p}`, { headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);
      }
      second.proc.kill('SIGTERM');
      await second.proc.exited;
    } finally {
      files.stop(true);
      await store.close();
    }
  }, 60_000);
}

for (const target of targets) {
  test(`${target.kind}: an input of id-less lines read again after a kill mid-input stores each line once`, async () => {
    const dir = tempDir('cinder-import-e2e-');
    const db = await target.migrated();
    const url = target.kind === 'sqlite' ? 'sqlite:' + db.url : db.url;
    const store = db.open();
    await store.migrate();
    await createTenant(store, systemClock, 't1');
    const { client, clientSecret } = await createClient(store, systemClock, { tenant: 't1', scopes: ['system/*.*'] });
    // Many small transactions, so that the process is killed with part of the input committed.
    const lines = 20_000;
    let text = '';
    for (let i = 1; i <= lines; i++) text += JSON.stringify({ resourceType: 'Patient', identifier: [{ system: 'urn:test', value: `p${i}` }] }) + '\n';
    const files = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(text) });
    // Polled every 50 ms until done: a loaded machine's import outlasts the 300 status requests a minute allowed by default.
    const env = {
      CINDER_DATA_DIR: dir, CINDER_DATABASE_URL: url, CINDER_IMPORT_ALLOW_PRIVATE: 'true', CINDER_EXPORT_LEASE_SECONDS: '2', CINDER_LOG_LEVEL: 'warn',
      CINDER_EXPORT_STATUS_RATE_LIMIT: '100000',
    };
    const patients = () => store.resources.count('t1', { type: 'Patient', sort: [], count: 0 });
    try {
      const port = freePort();
      const publicBase = `http://127.0.0.1:${port}`;
      const first = await startServer(env, port);
      killAfter(first.proc);
      const token = await clientToken(first.base, client.clientId, clientSecret!);
      const kick = await fetch(`${first.base}/tenants/t1/fhir/R4/$import`, {
        method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' },
        body: JSON.stringify({ resourceType: 'Parameters', parameter: [
          { name: 'storageDetail', part: [{ name: 'type', valueCode: 'http' }, { name: 'maxBatchResourceCount', valueString: '20' }] },
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${files.port}/patients.ndjson` }] },
        ] }),
      });
      expect(kick.status).toBe(202);
      const statusPath = new URL(kick.headers.get('content-location')!).pathname;
      for (let i = 0; i < 2000 && (await patients()) === 0; i++) await Bun.sleep(5);
      first.proc.kill('SIGKILL');
      await first.proc.exited;
      // Killed mid-input: some lines were committed, not all.
      const before = await patients();
      expect(before).toBeGreaterThan(0);
      expect(before).toBeLessThan(lines);

      const second = await startServer(env, freePort(), publicBase);
      killAfter(second.proc);
      let body: { output: { count: number; unchanged: number }[]; error: unknown[] } | undefined;
      for (let i = 0; i < 1200 && !body; i++) {
        const res = await fetch(second.base + statusPath, { headers: { Authorization: `Bearer ${token}` } });
        if (res.status === 200) body = (await res.json()) as typeof body;
        else if (res.status !== 202) throw new Error(`status ${res.status}: ${await res.text()}`);
        else await Bun.sleep(50);
      }
      expect(body!.error).toEqual([]);
      expect(body!.output[0]!.count).toBe(lines);
      // The lines committed before the kill were found unchanged when read again.
      expect(body!.output[0]!.unchanged).toBe(before);
      expect(await patients()).toBe(lines);
      second.proc.kill('SIGTERM');
      await second.proc.exited;
    } finally {
      files.stop(true);
      await store.close();
    }
  }, 90_000);
}
