/**
 * A TLS certificate the database URL does not trust, met at run time (the server's certificate replaced by one another
 * authority signed, under `sslmode=verify-full`): Cinder cannot use the database, as when it is stopped, so requests are
 * answered 503 with Retry-After (never 500), and once the server's certificate is trusted again Cinder recovers by itself.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { createPostgresStore } from '../../src/store/postgres/index.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { createPgCluster, postgresBinDir, type PgCluster } from '../helpers/pg-cluster.ts';
import { runOpenssl } from '../helpers/tls-certificates.ts';

const bin = postgresBinDir();
const openssl = Bun.which('openssl');
const dir = mkdtempSync(join(tmpdir(), 'cinder-tls-outage-'));
let cluster: PgCluster | undefined;
let t: TestApp | undefined;

const run = (...args: string[]) => runOpenssl(dir, ...args);

/** A server certificate for 127.0.0.1 signed by `ca` (a new authority of that name). */
function signed(ca: string): void {
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${ca}.key`, '-out', `${ca}.pem`, '-days', '2', '-subj', `/CN=${ca}`);
  run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${ca}-server.key`, '-out', `${ca}-server.csr`, '-subj', '/CN=127.0.0.1');
  run('x509', '-req', '-in', `${ca}-server.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-out', `${ca}-server.pem`, '-days', '2', '-extfile', 'ext');
}

/** The server's certificate and key, those `ca` signed, read at its next start. */
function serve(ca: string): void {
  cluster!.writeDataFile('server.pem', readFileSync(join(dir, `${ca}-server.pem`), 'utf8'));
  cluster!.writeDataFile('server.key', readFileSync(join(dir, `${ca}-server.key`), 'utf8'));
}

async function restart(): Promise<void> {
  await cluster!.stopImmediate();
  await cluster!.start();
}

beforeAll(async () => {
  if (!bin || !openssl) return;
  writeFileSync(join(dir, 'ext'), 'subjectAltName=IP:127.0.0.1\n');
  signed('trusted');
  signed('other');
  cluster = await createPgCluster(bin);
  serve('trusted');
  cluster.configure(["ssl = on", "ssl_cert_file = 'server.pem'", "ssl_key_file = 'server.key'"]);
  await cluster.start();
  const admin = postgres(cluster.url, { max: 1, onnotice: () => undefined });
  await admin`CREATE DATABASE cinder`;
  await admin.end();
  const url = `${cluster.url.replace(/\/postgres$/, '/cinder')}?sslmode=verify-full&sslrootcert=${encodeURIComponent(join(dir, 'trusted.pem'))}`;
  const store = createPostgresStore(url, { max: 3, probeIntervalMs: 100 });
  t = await createTestApp({ store, env: { CINDER_RATE_LIMITS: 'off' } });
}, 90_000);

afterAll(async () => {
  await t?.close().catch(() => undefined);
  await cluster?.remove();
  rmSync(dir, { recursive: true, force: true });
}, 30_000);

describe.skipIf(!bin || !openssl)('a server certificate verify-full does not trust, at run time', () => {
  test('503 with Retry-After while it is served, never 500; recovery once a trusted one is back', async () => {
    const token = await t!.token();
    const create = () => t!.request(`${t!.fhir()}/Patient`, fhirInit(token, 'POST', { resourceType: 'Patient', name: [{ family: 'Tls' }] }));
    expect((await create()).status).toBe(201);

    serve('other');
    await restart();
    for (let i = 0; i < 5; i++) {
      const res = await create();
      const body = (await res.json()) as { resourceType: string; issue: { code: string }[] };
      expect([res.status, body.resourceType, body.issue[0]!.code]).toEqual([503, 'OperationOutcome', 'transient']);
      expect(res.headers.get('retry-after')).not.toBeNull();
    }
    expect((await t!.request('/readyz')).status).toBe(503);

    serve('trusted');
    await restart();
    let status = 0;
    for (let i = 0; i < 100 && status !== 201; i++) {
      status = (await create()).status;
      if (status !== 201) await Bun.sleep(100);
    }
    expect(status).toBe(201);
    expect((await t!.request('/readyz')).status).toBe(200);
  }, 60_000);
});
