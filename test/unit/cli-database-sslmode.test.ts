/**
 * libpq's `sslmode` in CINDER_DATABASE_URL, with and without its TLS options, through `cinder` commands: `disable` plain;
 * `allow` plain first, TLS when the server refuses the plain session; `prefer` (libpq's default, no sslmode) TLS first,
 * plain when the server has no TLS, refuses the session over TLS, or the handshake fails; `require`, `verify-ca` and
 * `verify-full` TLS or nothing. Against the local server (no TLS) and a throwaway cluster with `ssl=on` whose pg_hba.conf
 * lets in TLS sessions alone, plain ones alone, or both: a command that runs shows which encryption the session used.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';
import { createPgCluster, postgresBinDir, type PgCluster } from '../helpers/pg-cluster.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const pg = targets.find((t) => t.kind === 'postgres');
const openssl = Bun.which('openssl');
const bin = postgresBinDir();
const dir = mkdtempSync(join(tmpdir(), 'cinder-sslmode-'));
const clis: ReturnType<typeof createCliEnv>[] = [];
let cluster: PgCluster | undefined;

function run(...args: string[]): void {
  const r = Bun.spawnSync([openssl!, ...args], { cwd: dir, stderr: 'pipe' });
  if (r.exitCode !== 0) throw new Error(`openssl ${args[0]}: ${r.stderr.toString()}`);
}

/** ca.pem signs server.pem (for db.invalid) and client.pem (its key encrypted with 'pw'); other.pem signs nothing here. */
function certificates(): void {
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=Cinder test CA');
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'other.key', '-out', 'other.pem', '-days', '2', '-subj', '/CN=Other CA');
  run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=db.invalid');
  writeFileSync(join(dir, 'ext'), 'subjectAltName=DNS:db.invalid\n');
  run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'ext');
  run('req', '-newkey', 'rsa:2048', '-passout', 'pass:pw', '-keyout', 'client.key', '-out', 'client.csr', '-subj', '/CN=cinder-client');
  run('x509', '-req', '-in', 'client.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'client.pem', '-days', '2');
}

const file = (name: string) => encodeURIComponent(join(dir, name));
/** TLS options of the client: a root certificate file, and a client certificate with its key. */
const ROOT = () => `sslrootcert=${file('ca.pem')}`;
const CLIENT = () => `sslcert=${file('client.pem')}&sslkey=${file('client.key')}&sslpassword=pw`;

beforeAll(() => {
  if (openssl) certificates();
});

afterAll(async () => {
  for (const c of clis) c.close();
  await cluster?.remove();
  for (const t of targets) await t.cleanup();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** A command's exit code and stderr, an error it throws (exit 1) as main prints it. */
async function attempt(url: string, argv: string[]): Promise<{ code: number; stderr: string }> {
  const cli = createCliEnv({ CINDER_DATABASE_URL: url, CINDER_BASE_URL: 'http://cinder.test' }, { database: false });
  clis.push(cli);
  return cli.run(argv).catch((err: Error) => ({ code: 1, stdout: '', stderr: `cinder: ${err.message}\n` }));
}

const withQuery = (url: string, query: string) => `${url}${url.includes('?') ? '&' : '?'}${query ? `${query}&` : ''}connect_timeout=5`;

describe.skipIf(!pg || !openssl)('sslmode against a server without TLS (the local one)', () => {
  test('no sslmode, allow and prefer connect in plain, with TLS options too; require, verify-ca and verify-full fail saying why', async () => {
    const db = await pg!.migrated();
    const made = await attempt(withQuery(db.url, ''), ['tenant', 'create', 't1', '--json']);
    expect(made).toMatchObject({ code: 0, stderr: '' });
    for (const query of ['sslmode=allow', 'sslmode=prefer', ROOT(), `sslmode=allow&${ROOT()}`, `sslmode=prefer&${ROOT()}&${CLIENT()}`, CLIENT()]) {
      const listed = await attempt(withQuery(db.url, query), ['client', 'list', '--tenant', 't1', '--json']);
      expect([query, listed.code, listed.stderr]).toEqual([query, 0, '']);
    }
    for (const [mode, options] of [['require', ''], ['require', `&${CLIENT()}`], ['verify-ca', `&${ROOT()}`], ['verify-full', `&${ROOT()}`]] as const) {
      const refused = await attempt(withQuery(db.url, `sslmode=${mode}${options}`), ['client', 'list', '--tenant', 't1']);
      expect([mode, refused.code]).toEqual([mode, 1]);
      expect(refused.stderr).toContain("cannot use the PostgreSQL database '");
      expect(refused.stderr).toContain(`the server does not support SSL, but SSL was required (sslmode=${mode})`);
    }
  }, 60_000);
});

type Hba = 'both' | 'tls' | 'plain';

describe.skipIf(!pg || !openssl || !bin)('sslmode against a server with TLS (a throwaway cluster, ssl=on)', () => {
  let url = '';
  /** pg_hba.conf letting in TLS sessions, plain ones, or both, read again by the server. */
  const hba = async (which: Hba) => {
    const line = (kind: string, method: string) => `${kind} all all 127.0.0.1/32 ${method}`;
    const lines = {
      both: [line('host', 'trust')],
      tls: [line('hostssl', 'trust'), line('hostnossl', 'reject')],
      plain: [line('hostnossl', 'trust'), line('hostssl', 'reject')],
    }[which];
    cluster!.writeDataFile('pg_hba.conf', `local all all trust\n${lines.join('\n')}\n`);
    await cluster!.reload();
  };

  beforeAll(async () => {
    cluster = await createPgCluster(bin!);
    cluster.writeDataFile('server.pem', readFileSync(join(dir, 'server.pem'), 'utf8'));
    cluster.writeDataFile('server.key', readFileSync(join(dir, 'server.key'), 'utf8'));
    cluster.writeDataFile('ca.pem', readFileSync(join(dir, 'ca.pem'), 'utf8'));
    cluster.configure(["ssl = on", "ssl_cert_file = 'server.pem'", "ssl_key_file = 'server.key'", "ssl_ca_file = 'ca.pem'"]);
    await cluster.start();
    url = cluster.url;
    await hba('both');
    const migrated = await attempt(withQuery(url, ''), ['migrate']);
    expect(migrated.code).toBe(0);
    const made = await attempt(withQuery(url, ''), ['tenant', 'create', 't1', '--json']);
    expect(made).toMatchObject({ code: 0, stderr: '' });
  }, 90_000);

  const list = (query: string) => attempt(withQuery(url, query), ['client', 'list', '--tenant', 't1', '--json']);

  test('a server taking TLS sessions alone: no sslmode, allow (after its plain session is refused), prefer and require connect; disable is refused', async () => {
    await hba('tls');
    for (const query of ['', 'sslmode=allow', 'sslmode=prefer', `sslmode=allow&${ROOT()}&${CLIENT()}`, ROOT(), CLIENT(), 'sslmode=require', `sslmode=verify-ca&${ROOT()}`]) {
      const listed = await list(query);
      expect([query, listed.code, listed.stderr]).toEqual([query, 0, '']);
    }
    const plain = await list('sslmode=disable');
    expect(plain.code).toBe(1);
    expect(plain.stderr).toContain('no encryption');
  }, 60_000);

  test('a server taking plain sessions alone: no sslmode and prefer (after the TLS session is refused), allow and disable connect; require is refused', async () => {
    await hba('plain');
    for (const query of ['', 'sslmode=prefer', 'sslmode=allow', 'sslmode=disable', ROOT(), `sslmode=prefer&${ROOT()}&${CLIENT()}`, `sslmode=allow&${CLIENT()}`]) {
      const listed = await list(query);
      expect([query, listed.code, listed.stderr]).toEqual([query, 0, '']);
    }
    for (const query of ['sslmode=require', `sslmode=verify-ca&${ROOT()}`, `sslmode=require&${CLIENT()}`]) {
      const refused = await list(query);
      expect([query, refused.code]).toEqual([query, 1]);
      expect(refused.stderr).toContain('SSL encryption');
    }
    // Several hosts: the retry in plain goes to the host that refused the TLS session, not to the next (which refuses all).
    const closed = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
    const refusing = closed.port;
    closed.stop(true);
    const here = `127.0.0.1:${cluster!.port}`;
    for (const hosts of [`${here},127.0.0.1:${refusing}`, `127.0.0.1:${refusing},${here}`]) {
      const listed = await attempt(withQuery(url.replace(here, hosts), 'sslmode=prefer'), ['client', 'list', '--tenant', 't1', '--json']);
      expect([hosts, listed.code, listed.stderr]).toEqual([hosts, 0, '']);
    }
  }, 60_000);

  test('a certificate the root certificate file does not trust: prefer goes on in plain, as libpq does; require and verify-ca fail', async () => {
    await hba('both');
    const other = `sslrootcert=${file('other.pem')}`;
    for (const query of [other, `sslmode=prefer&${other}`]) {
      const listed = await list(query);
      expect([query, listed.code, listed.stderr]).toEqual([query, 0, '']);
    }
    // Over plain alone: had prefer kept to TLS, the server would have let it in.
    await hba('plain');
    expect(await list(`sslmode=prefer&${other}`)).toMatchObject({ code: 0, stderr: '' });
    await hba('both');
    for (const mode of ['require', 'verify-ca']) {
      const refused = await list(`sslmode=${mode}&${other}`);
      expect([mode, refused.code]).toEqual([mode, 1]);
      expect(refused.stderr).toMatch(/certificate|verify/i);
    }
  }, 60_000);
});
