/**
 * `cinder serve` with CINDER_PROCESSES=2: a second server process on the same port and database,
 * from source and (when built) from dist/cinder, which re-runs itself differently.
 */
import { describe, expect, test } from 'bun:test';
import { clientToken, freePort } from '../helpers/export-e2e.ts';
import { alive, cinderCommands, cleanupAfterFile, eventually, listeningPids, readBanner, serveEnv, spawnServe } from '../helpers/processes.ts';

const commands = cinderCommands();
const { tempDir } = cleanupAfterFile();

describe.each(commands)('CINDER_PROCESSES=2 (%s)', (_, command) => {
  test('two processes serve one port and database; a killed one comes back; SIGTERM stops both', async () => {
    const dir = tempDir('cinder-processes-');
    const port = freePort();
    const base = `http://127.0.0.1:${port}`;
    const server = spawnServe(command, dir, serveEnv(dir, port, { CINDER_PROCESSES: '2' }));
    try {
      // The banner is printed once, by the first process.
      const { clientId, secret } = await readBanner(server.stdout);
      expect(clientId && secret).toBeTruthy();
      // The servers of one scan (listeningPids counts a child holding its parent's socket as none).
      let servers: number[] = [];
      expect(await eventually(() => (servers = listeningPids(port)).length === 2, 20_000)).toBe(true);
      expect(servers).toContain(server.pid);
      const sibling = servers.find((pid) => pid !== server.pid)!;

      // Tokens and resources are shared: many fresh connections land on both processes.
      const fresh = { Connection: 'close' };
      const token = await clientToken(base, clientId!, secret!);
      const fhir = `${base}/tenants/default/fhir/R4`;
      const auth = { ...fresh, Authorization: `Bearer ${token}` };
      const ids: string[] = [];
      for (let i = 0; i < 10; i++) {
        const res = await fetch(`${fhir}/Patient`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify({ resourceType: 'Patient', gender: 'other' }) });
        expect(res.status).toBe(201);
        ids.push(((await res.json()) as { id: string }).id);
      }
      for (const id of ids) expect((await fetch(`${fhir}/Patient/${id}`, { headers: auth })).status).toBe(200);

      // Conditional creates of one identifier at once, on both processes: one creates, the others find it.
      for (let round = 0; round < 3; round++) {
        const body = JSON.stringify({ resourceType: 'Patient', identifier: [{ system: 'urn:processes', value: `v${round}` }] });
        const headers = { ...auth, 'Content-Type': 'application/fhir+json', 'If-None-Exist': `identifier=urn:processes|v${round}` };
        const answers = await Promise.all(Array.from({ length: 8 }, () => fetch(`${fhir}/Patient`, { method: 'POST', headers, body })));
        expect(answers.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
        const found = await fetch(`${fhir}/Patient?identifier=urn:processes|v${round}&_total=accurate`, { headers: auth });
        expect(((await found.json()) as { total: number }).total).toBe(1);
      }

      // A sibling that dies is started again.
      process.kill(sibling, 'SIGKILL');
      expect(await eventually(() => (servers = listeningPids(port)).length === 2 && !servers.includes(sibling), 15_000)).toBe(true);
      expect(servers).toContain(server.pid);
      const replacement = servers.find((pid) => pid !== server.pid)!;

      // SIGTERM to the first process drains and stops both.
      server.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      expect(await eventually(() => !alive(replacement), 10_000)).toBe(true);
      expect(listeningPids(port)).toEqual([]);
    } finally {
      if (server.exitCode === null) server.kill('SIGKILL');
    }
  }, 60_000);

  test('a sibling does not outlive a first process killed with SIGKILL', async () => {
    const dir = tempDir('cinder-processes-');
    const port = freePort();
    const server = spawnServe(command, dir, serveEnv(dir, port, { CINDER_PROCESSES: '2' }));
    try {
      let servers: number[] = [];
      expect(await eventually(() => (servers = listeningPids(port)).length === 2, 20_000)).toBe(true);
      const sibling = servers.find((pid) => pid !== server.pid)!;
      server.kill('SIGKILL');
      await server.exited;
      expect(await eventually(() => !alive(sibling), 10_000)).toBe(true);
    } finally {
      if (server.exitCode === null) server.kill('SIGKILL');
    }
  }, 60_000);
});
