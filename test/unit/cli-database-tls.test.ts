/**
 * `?sslrootcert=` in CINDER_DATABASE_URL as libpq reads it, through `cinder` commands: an option of the client, never sent
 * to the server as a setting (the server refused every connection: "unrecognized configuration parameter"); the file's
 * certificates the authorities trusted, the host name checked by `verify-full` alone; `system` with `verify-full` only;
 * a file that cannot be read a configuration error naming it (exit 2). TLS is that of a forwarder that answers the
 * SSLRequest, ends TLS with a certificate of a test authority (for `db.invalid`, not 127.0.0.1) and passes the session
 * to the test server in clear, recording whether TLS was asked and the start-up message.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import net from 'node:net';
import tls from 'node:tls';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const pg = targets.find((t) => t.kind === 'postgres');
const openssl = Bun.which('openssl');
const dir = mkdtempSync(join(tmpdir(), 'cinder-tls-'));
const clis: ReturnType<typeof createCliEnv>[] = [];
afterAll(async () => {
  for (const c of clis) c.close();
  for (const t of targets) await t.cleanup();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

function run(...args: string[]): void {
  const r = Bun.spawnSync([openssl!, ...args], { cwd: dir, stderr: 'pipe' });
  if (r.exitCode !== 0) throw new Error(`openssl ${args[0]}: ${r.stderr.toString()}`);
}

/** Two authorities (ca.pem signs server.pem for db.invalid; other.pem signs nothing here). */
function certificates(): void {
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=Cinder test CA');
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'other.key', '-out', 'other.pem', '-days', '2', '-subj', '/CN=Other CA');
  run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=db.invalid');
  writeFileSync(join(dir, 'ext'), 'subjectAltName=DNS:db.invalid\n');
  run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'ext');
}

const SSL_REQUEST = 80877103;

/** What the forwarder saw of each connection: TLS asked, and the start-up message's parameters. */
interface Seen { tls: boolean; startup: string }

/** A forwarder to `port` on 127.0.0.1 that ends TLS when asked (the server's own has none). */
async function tlsForwarder(port: number) {
  const seen: Seen[] = [];
  const key = readFileSync(join(dir, 'server.key'), 'utf8');
  const cert = readFileSync(join(dir, 'server.pem'), 'utf8');
  const pipe = (client: net.Socket, first: Buffer | null, record: Seen) => {
    const up = net.connect(port, '127.0.0.1');
    if (first) up.write(first);
    client.once('data', (b: Buffer) => void (record.startup ||= b.toString('latin1')));
    client.pipe(up).on('error', () => client.destroy());
    up.pipe(client);
    client.on('error', () => up.destroy());
    client.on('close', () => up.destroy());
  };
  const server = net.createServer((raw) => {
    raw.on('error', () => undefined);
    raw.once('data', (first: Buffer) => {
      const record: Seen = { tls: false, startup: '' };
      seen.push(record);
      if (first.length >= 8 && first.readInt32BE(4) === SSL_REQUEST) {
        record.tls = true;
        raw.write('S');
        pipe(new tls.TLSSocket(raw, { isServer: true, key, cert }), first.subarray(8).length ? first.subarray(8) : null, record);
      } else {
        record.startup = first.toString('latin1');
        pipe(raw, first, record);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as net.AddressInfo).port, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

function cliOn(url: string) {
  const cli = createCliEnv({ CINDER_DATABASE_URL: url, CINDER_BASE_URL: 'http://cinder.test' }, { database: false });
  clis.push(cli);
  return cli;
}

/** A command's exit code and stderr, an error it throws (exit 1) as main prints it. */
async function attempt(url: string, argv: string[]): Promise<{ code: number; stderr: string }> {
  return cliOn(url).run(argv).catch((err: Error) => ({ code: 1, stdout: '', stderr: `cinder: ${err.message}\n` }));
}

describe.skipIf(!pg || !openssl)('?sslrootcert= in a PostgreSQL URL, as libpq reads it', () => {
  beforeAll(certificates);

  test('with sslmode=disable it is neither read nor sent to the server: commands run', async () => {
    const db = await pg!.migrated();
    const url = `${db.url}${db.url.includes('?') ? '&' : '?'}sslmode=disable&sslrootcert=${encodeURIComponent(join(dir, 'absent.pem'))}`;
    const made = await attempt(url, ['tenant', 'create', 't1', '--json']);
    expect(made).toMatchObject({ code: 0, stderr: '' });
  }, 30_000);

  test('a file of authorities: TLS verified by them, the host name checked by verify-full alone; no setting sent', async () => {
    const db = await pg!.migrated();
    const target = new URL(db.url);
    const forwarder = await tlsForwarder(Number(target.port || 5432));
    const at = (query: string) => db.url.replace(`@${target.host}`, `@127.0.0.1:${forwarder.port}`) + `${db.url.includes('?') ? '&' : '?'}${query}&connect_timeout=5`;
    const ca = encodeURIComponent(join(dir, 'ca.pem'));
    try {
      // verify-ca: the chain to ca.pem, not the name (the certificate is for db.invalid, the URL says 127.0.0.1).
      const verified = await attempt(at(`sslmode=verify-ca&sslrootcert=${ca}`), ['tenant', 'create', 't1', '--json']);
      expect(verified).toMatchObject({ code: 0, stderr: '' });
      expect(forwarder.seen.length).toBeGreaterThan(0);
      expect(forwarder.seen.every((s) => s.tls)).toBe(true);
      expect(forwarder.seen.some((s) => s.startup.includes('user'))).toBe(true);
      for (const s of forwarder.seen) expect(s.startup).not.toContain('sslrootcert');
      // require with a root certificate file, and no sslmode at all: as verify-ca (libpq's rule for require), over TLS.
      for (const query of [`sslmode=require&sslrootcert=${ca}`, `sslrootcert=${ca}`]) {
        forwarder.seen.length = 0;
        const listed = await attempt(at(query), ['client', 'list', '--tenant', 't1', '--json']);
        expect([query, listed.code, listed.stderr]).toEqual([query, 0, '']);
        expect(forwarder.seen.length).toBeGreaterThan(0);
        expect(forwarder.seen.every((s) => s.tls)).toBe(true);
      }
      // verify-full: the name is checked too.
      const named = await attempt(at(`sslmode=verify-full&sslrootcert=${ca}`), ['client', 'list', '--tenant', 't1']);
      expect(named.code).toBe(1);
      expect(named.stderr).toContain("cannot use the PostgreSQL database '");
      expect(named.stderr).toContain("127.0.0.1 is not in the cert's list");
      // Another authority's file: the chain is refused, whatever the mode (require too).
      const other = encodeURIComponent(join(dir, 'other.pem'));
      for (const mode of ['require', 'verify-ca']) {
        const refused = await attempt(at(`sslmode=${mode}&sslrootcert=${other}`), ['client', 'list', '--tenant', 't1']);
        expect([mode, refused.code]).toEqual([mode, 1]);
        expect(refused.stderr).toMatch(/certificate|verify/i);
        expect(refused.stderr).not.toContain('unrecognized configuration parameter');
      }
    } finally {
      await forwarder.close();
    }
  }, 60_000);

  test('a file that cannot be read, an sslmode libpq does not know, or system with a weaker sslmode: exit 2 naming it', async () => {
    const base = 'postgres://cinder:s3cret@127.0.0.1:5432/cinder';
    writeFileSync(join(dir, 'not-pem.txt'), 'not a certificate\n');
    const cases: [string, string][] = [
      [`sslmode=verify-full&sslrootcert=${encodeURIComponent(join(dir, 'absent.pem'))}`, `cannot read the root certificate file '${join(dir, 'absent.pem')}' (sslrootcert in the database URL): `],
      [`sslmode=verify-ca&sslrootcert=${encodeURIComponent(join(dir, 'not-pem.txt'))}`, 'holds no PEM certificate'],
      ['sslmode=require&sslrootcert=system', 'sslmode=require may not be used with sslrootcert=system in the database URL: use sslmode=verify-full'],
      [`sslmode=verfy-full&sslrootcert=${encodeURIComponent(join(dir, 'ca.pem'))}`, "invalid sslmode 'verfy-full' in the database URL"],
    ];
    for (const [query, message] of cases) {
      const r = await attempt(`${base}?${query}`, ['client', 'list', '--tenant', 't1']);
      expect([query, r.code]).toEqual([query, 2]);
      expect(r.stderr).toStartWith('cinder: invalid CINDER_DATABASE_URL');
      expect(r.stderr).toContain(message);
      expect(r.stderr).not.toContain('s3cret');
    }
  });
});
