/**
 * Outbound https with the address pinned (src/http/outbound.ts), through a real `cinder serve` process,
 * its system resolver and its trust store: an `$import` input on https://localhost is fetched from the
 * address `localhost` resolved to, with SNI and the certificate check for the name. The input server's
 * certificates are made here by openssl and trusted through NODE_EXTRA_CA_CERTS; it answers with another
 * name's certificate unless SNI names `localhost`, so a connection that lost the name fails.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { lookup } from 'node:dns/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { systemClock } from '../../src/clock.ts';
import { clientToken, freePort, startServer, type Server } from '../helpers/export-e2e.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const servers: Server[] = [];
const dir = mkdtempSync(join(tmpdir(), 'cinder-outbound-tls-'));
afterAll(async () => {
  for (const s of servers) s.proc.kill('SIGKILL');
  await Promise.all(targets.map((t) => t.cleanup()));
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** A self-signed certificate and key for `name` (subjectAltName DNS:name). */
function selfSigned(name: string): { cert: string; key: string } {
  const [cert, key] = [join(dir, `${name}.crt`), join(dir, `${name}.key`)];
  const made = Bun.spawnSync(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-keyout', key, '-out', cert, '-subj', `/CN=${name}`, '-addext', `subjectAltName=DNS:${name}`]);
  if (made.exitCode !== 0) throw new Error(`openssl: ${made.stderr.toString()}`);
  return { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') };
}

const localhost = selfSigned('localhost');
const other = selfSigned('other.test');
const trusted = join(dir, 'trusted.pem');
writeFileSync(trusted, localhost.cert + other.cert);
// Where the server's own resolution of `localhost` leads (127.0.0.1, or ::1 where that comes first).
const address = (await lookup('localhost', { all: true, verbatim: true }))[0]!.address;
const hosts: string[] = [];
const files = Bun.serve({
  port: 0, hostname: address, tls: [other, { ...localhost, serverName: 'localhost' }],
  fetch: (req) => (hosts.push(req.headers.get('host')!), new Response(JSON.stringify({ resourceType: 'Patient', id: 'tls1' }) + '\n')),
});
afterAll(() => files.stop(true));

for (const target of targets) {
  test(`${target.kind}: an https input is fetched at the resolved address, its certificate verified for the name`, async () => {
    const db = await target.migrated();
    const store = db.open();
    await store.migrate();
    await createTenant(store, systemClock, 't1');
    const { client, clientSecret } = await createClient(store, systemClock, { tenant: 't1', scopes: ['system/*.*'] });
    const env = {
      CINDER_DATA_DIR: mkdtempSync(join(dir, 'data-')), CINDER_DATABASE_URL: target.kind === 'sqlite' ? 'sqlite:' + db.url : db.url,
      CINDER_IMPORT_ALLOW_PRIVATE: 'true', CINDER_LOG_LEVEL: 'warn', NODE_EXTRA_CA_CERTS: trusted,
    };
    const server = await startServer(env, freePort());
    servers.push(server);
    const token = await clientToken(server.base, client.clientId, clientSecret!);
    const input = (url: string) => ({ name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: url }] });
    // By the name: SNI `localhost` gets its certificate. By the address: no SNI, other.test's certificate, refused.
    const byName = `https://localhost:${files.port}/p.ndjson`;
    const byAddress = `https://${address.includes(':') ? `[${address}]` : address}:${files.port}/p.ndjson`;
    hosts.length = 0;
    const kick = await fetch(`${server.base}/tenants/t1/fhir/R4/$import`, {
      method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' },
      body: JSON.stringify({ resourceType: 'Parameters', parameter: [input(byName), input(byAddress)] }),
    });
    expect(kick.status).toBe(202);
    let body: { output: { count: number }[]; error: { outcome: { issue: { diagnostics: string }[] } }[] } | undefined;
    for (let i = 0; i < 600 && !body; i++) {
      const res = await fetch(kick.headers.get('content-location')!, { headers: { Authorization: `Bearer ${token}` } });
      if (res.status === 200) body = (await res.json()) as typeof body;
      else await Bun.sleep(50);
    }
    expect(body!.output.map((o) => o.count)).toEqual([1, 0]);
    expect(body!.error).toHaveLength(1);
    expect(body!.error[0]!.outcome.issue[0]!.diagnostics).toContain('ERR_TLS_CERT_ALTNAME_INVALID');
    expect(hosts).toEqual([`localhost:${files.port}`]);
    await store.close();
  }, 60_000);
}
