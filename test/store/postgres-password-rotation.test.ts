/**
 * The password file (PGPASSFILE, ~/.pgpass) is read for each new connection, as libpq reads it (libpq-env.ts
 * passwordFileSource): a password rotated in the file while Cinder runs is what the next connection sends. It was read
 * once, at start, and written into the URL: after a rotation every new connection was refused, and each request answered
 * 503, until a restart.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { chmodSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { loadConfig } from '../../src/config.ts';
import { openStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/types.ts';
import { freePort } from '../helpers/export-e2e.ts';
import { createPgCluster, postgresBinDir, type PgCluster } from '../helpers/pg-cluster.ts';
import { startCinder, type Cinder } from '../helpers/server.ts';

const bin = postgresBinDir();
const dir = mkdtempSync(join(tmpdir(), 'cinder-pgpass-rotation-'));
const passfile = join(dir, 'pgpass');
let cluster: PgCluster | undefined;
let store: Store | undefined;
let cinder: Cinder | undefined;
const saved = { PGPASSFILE: process.env.PGPASSFILE, PGPASSWORD: process.env.PGPASSWORD };

/** Writes the password file as an operator's rotation does: a new file, u=rw, renamed over the old one; `before`, lines ahead of the server's. */
function writePassfile(password: string, before: string[] = []): void {
  const next = `${passfile}.next`;
  writeFileSync(next, [...before, `127.0.0.1:${cluster!.port}:postgres:postgres:${password}`].join('\n') + '\n');
  chmodSync(next, 0o600);
  renameSync(next, passfile);
}

beforeAll(async () => {
  if (!bin) return;
  cluster = await createPgCluster(bin);
  await cluster.start();
  const sql = postgres(cluster.url, { max: 1, onnotice: () => undefined });
  await sql.unsafe("ALTER ROLE postgres PASSWORD 'first-secret'");
  await sql.end();
  cluster.writeDataFile('pg_hba.conf', 'host all all 127.0.0.1/32 scram-sha-256\n');
  await cluster.reload();
}, 120_000);

afterAll(async () => {
  cinder?.stop();
  await store?.close().catch(() => undefined);
  await cluster?.remove();
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** /readyz's status once it answers 200, or the last one after `ms`. */
async function readyWithin(ms: number): Promise<number> {
  const until = Date.now() + ms;
  let status = 0;
  while (Date.now() < until) {
    status = (await fetch(`${cinder!.url}/readyz`)).status;
    if (status === 200) return status;
    await Bun.sleep(200);
  }
  return status;
}

test.skipIf(!bin)('a password rotated in the password file is used by the next connection, without a restart', async () => {
  writePassfile('first-secret');
  delete process.env.PGPASSWORD;
  process.env.PGPASSFILE = passfile;
  const config = loadConfig({ CINDER_DATABASE_URL: `postgres://postgres@127.0.0.1:${cluster!.port}/postgres?max=2`, CINDER_LOG_LEVEL: 'silent', PGPASSFILE: passfile });
  // The password is not written into the URL every pool and process opens: the file is.
  expect(config.databaseUrl).not.toContain('first-secret');
  store = openStore(config.databaseUrl);
  cinder = await startCinder({ store });
  expect((await fetch(`${cinder.url}/readyz`)).status).toBe(200);

  // The rotation: the role's password changed, the file rewritten, and the sessions of the old password ended.
  const admin = postgres(`postgres://postgres@127.0.0.1:${cluster!.port}/postgres`, { max: 1, pass: 'first-secret', onnotice: () => undefined });
  await admin.unsafe("ALTER ROLE postgres PASSWORD 'second-secret'");
  writePassfile('second-secret');
  await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'cinder%' AND pid <> pg_backend_pid()`;
  await admin.end();

  // New connections send the file's new password: the database is reachable again once the breaker's probe reconnects.
  expect(await readyWithin(20_000)).toBe(200);
  expect(await store.ping()).toBeUndefined();
}, 60_000);

test.skipIf(!bin)("each host of a multi-host URL sends its own line of the password file, read again after a rotation", async () => {
  cinder?.stop();
  await store?.close();
  // The first host refuses connections (nothing listens there): the driver goes on to the second, the server.
  const dead = freePort();
  const first = (password: string) => [`127.0.0.1:${dead}:postgres:postgres:${password}`];
  const admin = postgres(`postgres://postgres@127.0.0.1:${cluster!.port}/postgres`, { max: 1, pass: 'second-secret', onnotice: () => undefined });
  await admin.unsafe("ALTER ROLE postgres PASSWORD 'third-secret'");
  const env = { CINDER_DATABASE_URL: `postgres://postgres@127.0.0.1:${dead},127.0.0.1:${cluster!.port}/postgres?max=2`, CINDER_LOG_LEVEL: 'silent', PGPASSFILE: passfile };
  // Lines that differ between the hosts are accepted at start (refused before: one password went to every host).
  writePassfile('third-secret', first('the-first-hosts-secret'));
  expect(() => loadConfig(env)).not.toThrow();
  // Started with one password for both hosts.
  writePassfile('third-secret', first('third-secret'));
  store = openStore(loadConfig(env).databaseUrl);
  cinder = await startCinder({ store });
  expect((await fetch(`${cinder.url}/readyz`)).status).toBe(200);

  // Rotated: the server's line changes, the first host's stays; the first host's (the old) password was sent to the second.
  await admin.unsafe("ALTER ROLE postgres PASSWORD 'fourth-secret'");
  writePassfile('fourth-secret', first('third-secret'));
  await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'cinder%' AND pid <> pg_backend_pid()`;
  expect(await readyWithin(20_000)).toBe(200);
  expect(await store.ping()).toBeUndefined();

  // And a rotation that gives the first host a line the server's no longer follows: the server's own line still.
  await admin.unsafe("ALTER ROLE postgres PASSWORD 'fifth-secret'");
  writePassfile('fifth-secret', first('fourth-secret'));
  await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'cinder%' AND pid <> pg_backend_pid()`;
  await admin.end();
  expect(await readyWithin(20_000)).toBe(200);
  expect(await store.ping()).toBeUndefined();
}, 90_000);
