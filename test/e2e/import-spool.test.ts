/**
 * `$import` with a real `cinder serve` whose own disk fails while it downloads an input (src/import/fetch-input.ts
 * SpoolError): the process may write no file larger than a few MiB (`ulimit -f`, the kernel answering EFBIG as a full
 * disk answers ENOSPC), and the input is larger. The input is not blamed: the job's attempts fail, it is retried and
 * then failed with a reason naming no path, the cause is in the server's log, and no download is left behind.
 */
import { expect, test } from 'bun:test';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { systemClock } from '../../src/clock.ts';
import { clientToken, freePort, startServer } from '../helpers/export-e2e.ts';
import { cleanupAfterFile } from '../helpers/processes.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const { tempDir, killAfter } = cleanupAfterFile(targets);

/** 16 MiB of valid Patients: larger than the file size limit (8192 blocks: 4 MiB in dash's units, 8 MiB in bash's). */
const LIMIT_BLOCKS = 8192;
const INPUT = (() => {
  const line = (i: number) => JSON.stringify({ resourceType: 'Patient', id: `big-${i}`, name: [{ family: 'x'.repeat(180) }] }) + '\n';
  const lines: string[] = [];
  let bytes = 0;
  for (let i = 0; bytes < 16 << 20; i++) bytes += (lines[i] = line(i)).length;
  return lines.join('');
})();

for (const target of targets) {
  test(`${target.kind}: a download the server's own disk refuses fails the job on the server, not the input, and says so without paths`, async () => {
    const dir = tempDir('cinder-import-spool-');
    // The downloads' directory: the data directory's (src/import/spool.ts), not TMPDIR.
    const spool = join(dir, 'data', 'import-spool');
    const db = await target.migrated();
    const url = target.kind === 'sqlite' ? 'sqlite:' + db.url : db.url;
    const store = db.open();
    await store.migrate();
    await createTenant(store, systemClock, 't1');
    const { client, clientSecret } = await createClient(store, systemClock, { tenant: 't1', scopes: ['system/*.*'] });
    const files = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(INPUT) });
    const env = { CINDER_DATA_DIR: join(dir, 'data'), CINDER_DATABASE_URL: url, CINDER_IMPORT_ALLOW_PRIVATE: 'true', CINDER_LOG_LEVEL: 'error' };
    try {
      // SIGXFSZ ignored, so that a write past the limit fails with EFBIG instead of ending the process.
      const server = await startServer(env, freePort(), undefined, `trap '' XFSZ; ulimit -f ${LIMIT_BLOCKS}`);
      killAfter(server.proc);
      const token = await clientToken(server.base, client.clientId, clientSecret!);
      const input = `http://127.0.0.1:${files.port}/patients.ndjson`;
      const kick = await fetch(`${server.base}/tenants/t1/fhir/R4/$import`, {
        method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' },
        body: JSON.stringify({ resourceType: 'Parameters', parameter: [
          { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: input }] },
        ] }),
      });
      expect(kick.status).toBe(202);
      const statusUrl = kick.headers.get('content-location')!;
      let res = await fetch(statusUrl, { headers: { Authorization: `Bearer ${token}` } });
      for (let i = 0; i < 600 && res.status === 202; i++) {
        await Bun.sleep(100);
        res = await fetch(statusUrl, { headers: { Authorization: `Bearer ${token}` } });
      }
      // Failed on the server after its attempts: neither a completed job whose input "could not be fetched", nor a path.
      const text = await res.text();
      expect(res.status).toBe(500);
      const outcome = JSON.parse(text) as { resourceType: string; issue: { code: string; diagnostics?: string; details?: { text?: string } }[] };
      expect(outcome.resourceType).toBe('OperationOutcome');
      expect(outcome.issue[0]!.details?.text ?? outcome.issue[0]!.diagnostics).toContain('not because of its inputs');
      for (const secret of [spool, dir, 'EFBIG', 'cinder-import-', input]) expect(text).not.toContain(secret);
      const id = statusUrl.slice(statusUrl.lastIndexOf('/') + 1);
      expect(await store.imports.get('t1', id)).toMatchObject({ state: 'failed', attempts: 3 });
      // The operator's log holds the cause under the job's id; the spool holds no download.
      expect(server.log()).toContain('EFBIG');
      expect(server.log()).toContain(id);
      expect(readdirSync(spool).flatMap((runner) => readdirSync(join(spool, runner)))).toEqual([]);
      server.proc.kill('SIGTERM');
      await server.proc.exited;
    } finally {
      files.stop(true);
      await store.close();
    }
  }, 120_000);
}
