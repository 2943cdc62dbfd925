/**
 * The SMART Backend Services flow end to end, as a bulk data client does it against a running
 * `cinder serve`: discovery, a `private_key_jwt` client assertion for a client_credentials token,
 * Group kick-off, polling with Retry-After, downloads of every file with the bearer token, cancel.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { systemClock } from '../../src/clock.ts';
import { operatorAccess } from '../../src/fhir/access.ts';
import { updateResource } from '../../src/fhir/crud.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { freePort, startServer, type Server } from '../helpers/export-e2e.ts';

let dir: string;
let server: Server;
let clientId: string;
let privateKey: CryptoKey;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cinder-backend-services-'));
  const store = createSqliteStore(join(dir, 'cinder.db'));
  await store.migrate();
  await createTenant(store, systemClock, 't1');
  const keys = await generateKeyPair('ES384', { extractable: true });
  privateKey = keys.privateKey;
  const jwk = { ...(await exportJWK(keys.publicKey)), kid: 'bulk-client-1', alg: 'ES384' };
  clientId = (await createClient(store, systemClock, { tenant: 't1', name: 'bulk client', scopes: ['system/*.read'], jwks: { keys: [jwk] } })).client.clientId;
  const deps = { store, clock: systemClock };
  const req = { tenant: 't1', access: operatorAccess };
  const members = [];
  for (let p = 0; p < 4; p++) {
    await updateResource(deps, req, 'Patient', `p${p}`, { resourceType: 'Patient', id: `p${p}`, name: [{ family: `Family${p}` }] });
    for (let o = 0; o < 25; o++) {
      await updateResource(deps, req, 'Observation', `o${p}-${o}`, {
        resourceType: 'Observation', id: `o${p}-${o}`, status: 'final', code: { text: 'heart rate' }, subject: { reference: `Patient/p${p}` },
      });
    }
    if (p < 3) members.push({ entity: { reference: `Patient/p${p}` } });
  }
  await updateResource(deps, req, 'Group', 'cohort', { resourceType: 'Group', id: 'cohort', type: 'person', actual: true, member: members });
  await store.close();
  server = await startServer({ CINDER_DATA_DIR: dir, CINDER_EXPORT_WORKERS: '1', CINDER_LOG_LEVEL: 'warn' }, freePort());
}, 60_000);
afterAll(() => {
  server?.proc.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

test('private_key_jwt token -> Group kick-off -> poll -> download, as a bulk data client', async () => {
  const fhirBase = `${server.base}/tenants/t1/fhir/R4`;
  const smart = (await (await fetch(`${fhirBase}/.well-known/smart-configuration`)).json()) as {
    token_endpoint: string; token_endpoint_auth_methods_supported: string[];
  };
  expect(smart.token_endpoint_auth_methods_supported).toContain('private_key_jwt');

  const assertion = await new SignJWT({})
    .setProtectedHeader({ alg: 'ES384', kid: 'bulk-client-1', typ: 'JWT' })
    .setIssuer(clientId).setSubject(clientId).setAudience(smart.token_endpoint)
    .setExpirationTime('5m').setJti(crypto.randomUUID())
    .sign(privateKey);
  const tokenRes = await fetch(smart.token_endpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials', scope: 'system/*.read',
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertion,
    }),
  });
  expect(tokenRes.status).toBe(200);
  const { access_token: token, token_type } = (await tokenRes.json()) as { access_token: string; token_type: string };
  expect(token_type).toBe('Bearer');
  const auth = { Authorization: `Bearer ${token}` };

  const kick = await fetch(`${fhirBase}/Group/cohort/$export?_outputFormat=ndjson`, { headers: { ...auth, Accept: 'application/fhir+json', Prefer: 'respond-async' } });
  expect(kick.status).toBe(202);
  const statusUrl = kick.headers.get('content-location')!;
  expect(statusUrl.startsWith(`${fhirBase}/`)).toBe(true);

  let manifest: { transactionTime: string; requiresAccessToken: boolean; output: { type: string; url: string; count: number }[]; error: unknown[] } | undefined;
  for (let i = 0; i < 100 && !manifest; i++) {
    const res = await fetch(statusUrl, { headers: { ...auth, Accept: 'application/json' } });
    if (res.status === 200) manifest = (await res.json()) as typeof manifest;
    else {
      expect(res.status).toBe(202);
      await Bun.sleep(Math.min(Number(res.headers.get('retry-after')) * 1000, 200));
    }
  }
  expect(manifest!.requiresAccessToken).toBe(true);
  expect(manifest!.error).toEqual([]);
  const lines: Record<string, string[]> = {};
  for (const file of manifest!.output) {
    const res = await fetch(file.url, { headers: { ...auth, Accept: 'application/fhir+ndjson', 'Accept-Encoding': 'gzip' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/fhir+ndjson');
    const text = await res.text();
    const got = text.trim().split('\n');
    expect(got).toHaveLength(file.count);
    (lines[file.type] ??= []).push(...got);
  }
  expect(lines.Patient!.map((l) => (JSON.parse(l) as { id: string }).id).sort()).toEqual(['p0', 'p1', 'p2']);
  expect(lines.Observation).toHaveLength(75);
  expect(lines.Group).toHaveLength(1);
  expect(await (await fetch(manifest!.output[0]!.url)).status).toBe(401);

  expect((await fetch(statusUrl, { method: 'DELETE', headers: auth })).status).toBe(202);
  expect((await fetch(statusUrl, { headers: auth })).status).toBe(404);
}, 60_000);
