/**
 * Two `cinder serve` containers on one volume and one host name, each in a pid namespace of its own (host networking,
 * or a `hostname:` in a compose file; each server is pid 1 there): the second to start must not take the first's live
 * spool directory, with the input it is importing, for a leftover of an ended process (src/import/spool.ts). The
 * namespaces are made with `unshare --pid`; where that is not allowed the test is skipped.
 */
import { expect, test } from 'bun:test';
import { existsSync, readdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { systemClock } from '../../src/clock.ts';
import { clientToken, freePort, startServer } from '../helpers/export-e2e.ts';
import { cleanupAfterFile } from '../helpers/processes.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const { tempDir, killAfter } = cleanupAfterFile(targets);
const UNSHARE = ['unshare', '--pid', '--fork', '--kill-child', '--mount-proc'];
const unshareWorks = Bun.spawnSync([...UNSHARE, 'true']).exitCode === 0;
const host = hostname().replace(/[^A-Za-z0-9.]/g, '_') || 'host';
const line = (id: string) => JSON.stringify({ resourceType: 'Patient', id }) + '\n';

for (const target of targets) {
  test.skipIf(!unshareWorks)(`${target.kind}: a server starting beside a live one in another pid namespace leaves its spool directory and download alone`, async () => {
    const dir = tempDir('cinder-import-neighbours-');
    const spool = join(dir, 'data', 'import-spool');
    const db = await target.migrated();
    const url = target.kind === 'sqlite' ? 'sqlite:' + db.url : db.url;
    const store = db.open();
    await store.migrate();
    await createTenant(store, systemClock, 't1');
    const { client, clientSecret } = await createClient(store, systemClock, { tenant: 't1', scopes: ['system/*.*'] });
    // The first input sends a line and holds the rest until released: its download stays in the first server's spool.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const files = Bun.serve({
      port: 0, hostname: '127.0.0.1',
      fetch: (req) => new URL(req.url).pathname === '/held.ndjson'
        ? new Response(new ReadableStream({
          async start(c) {
            c.enqueue(new TextEncoder().encode(line('held-1')));
            await released;
            c.enqueue(new TextEncoder().encode(line('held-2')));
            c.close();
          },
        }))
        : new Response(line('next-1')),
    });
    const portA = freePort();
    const portB = freePort();
    const base = `http://127.0.0.1:${portA}`;
    const env = { CINDER_DATA_DIR: join(dir, 'data'), CINDER_DATABASE_URL: url, CINDER_IMPORT_ALLOW_PRIVATE: 'true', CINDER_LOG_LEVEL: 'error' };
    try {
      const a = await startServer(env, portA, base, undefined, UNSHARE);
      killAfter(a.proc);
      const token = await clientToken(a.base, client.clientId, clientSecret!);
      const kick = await fetch(`${a.base}/tenants/t1/fhir/R4/$import`, {
        method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' },
        body: JSON.stringify({ resourceType: 'Parameters', parameter: [
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${files.port}/held.ndjson` }] },
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${files.port}/next.ndjson` }] },
        ] }),
      });
      expect(kick.status).toBe(202);
      const statusUrl = kick.headers.get('content-location')!;
      const job = statusUrl.slice(statusUrl.lastIndexOf('/') + 1);
      // The first server (pid 1 in its namespace) is downloading the held input into its directory.
      const runners = () => (existsSync(spool) ? readdirSync(spool).filter((d) => d.startsWith(`${host}-1-`)) : []);
      const download = () => runners().flatMap((r) => readdirSync(join(spool, r)).filter((f) => f.includes(job)).map((f) => join(spool, r, f)));
      for (let i = 0; i < 200 && download().length === 0; i++) await Bun.sleep(25);
      expect(download()).toHaveLength(1);
      const held = download()[0]!;
      expect(runners()).toHaveLength(1);

      // The second server: the same host name, pid 1 too, in a namespace where the first's pid is not its.
      const b = await startServer(env, portB, base, undefined, UNSHARE);
      killAfter(b.proc);
      for (let i = 0; i < 200 && runners().length < 2; i++) await Bun.sleep(25);
      expect(existsSync(held)).toBe(true);
      expect(runners()).toHaveLength(2);

      release();
      let res = await fetch(statusUrl, { headers: { Authorization: `Bearer ${token}` } });
      for (let i = 0; i < 300 && res.status === 202; i++) {
        await Bun.sleep(100);
        res = await fetch(statusUrl, { headers: { Authorization: `Bearer ${token}` } });
      }
      expect(res.status).toBe(200);
      const body = (await res.json()) as { output: { count: number }[]; error: unknown[] };
      expect(body.output.map((o) => o.count)).toEqual([2, 1]);
      expect(body.error).toEqual([]);
      expect(await store.imports.get('t1', job)).toMatchObject({ state: 'completed', attempts: 1 });
      // unshare ignores SIGTERM while its child runs; killed, it kills the server (--kill-child).
      for (const s of [a, b]) {
        s.proc.kill('SIGKILL');
        await s.proc.exited;
      }
    } finally {
      files.stop(true);
      await store.close();
    }
  }, 120_000);
}
