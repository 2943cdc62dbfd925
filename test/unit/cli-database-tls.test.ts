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
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';
import { storeTargets } from '../helpers/stores.ts';
import { runOpenssl, testCertificates } from '../helpers/tls-certificates.ts';

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

/** Two authorities (testCertificates), and a revocation list of ca.pem revoking the server's certificate. */
function certificates(): void {
  testCertificates(dir);
  const run = (...args: string[]) => runOpenssl(dir, ...args);
  writeFileSync(join(dir, 'index.txt'), '');
  writeFileSync(join(dir, 'crlnumber'), '01\n');
  writeFileSync(join(dir, 'ca.cnf'), `[ca]\ndefault_ca=d\n[d]\ndatabase=${join(dir, 'index.txt')}\ncrlnumber=${join(dir, 'crlnumber')}\ndefault_md=sha256\ndefault_crl_days=2\n`);
  run('ca', '-config', 'ca.cnf', '-keyfile', 'ca.key', '-cert', 'ca.pem', '-revoke', 'server.pem');
  run('ca', '-config', 'ca.cnf', '-keyfile', 'ca.key', '-cert', 'ca.pem', '-gencrl', '-out', 'crl.pem');
}

const SSL_REQUEST = 80877103;

/** What the forwarder saw of each connection: TLS asked, the start-up message's parameters, the client certificate's name, SNI. */
interface Seen { tls: boolean; startup: string; client?: string; servername?: string | false }

/**
 * A forwarder to `port` on 127.0.0.1 that ends TLS when asked (the server's own has none); with `clientCertificate`, only
 * for a client presenting a certificate ca.pem signed.
 */
async function tlsForwarder(port: number, clientCertificate = false) {
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
  const sockets = new Set<net.Socket>();
  const server = net.createServer((raw) => {
    sockets.add(raw);
    raw.on('close', () => sockets.delete(raw));
    raw.on('error', () => undefined);
    raw.once('data', (first: Buffer) => {
      const record: Seen = { tls: false, startup: '' };
      seen.push(record);
      if (first.length >= 8 && first.readInt32BE(4) === SSL_REQUEST) {
        record.tls = true;
        raw.write('S');
        const secure = new tls.TLSSocket(raw, {
          isServer: true,
          key,
          cert,
          ...(clientCertificate && { requestCert: true, rejectUnauthorized: true, ca: readFileSync(join(dir, 'ca.pem'), 'utf8') }),
        });
        secure.on('secure', () => {
          record.client = (secure.getPeerCertificate() as { subject?: { CN?: string } } | null)?.subject?.CN;
          record.servername = (secure as unknown as { servername?: string | false }).servername;
        });
        pipe(secure, first.subarray(8).length ? first.subarray(8) : null, record);
      } else {
        record.startup = first.toString('latin1');
        pipe(raw, first, record);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as net.AddressInfo).port, seen, close: () => new Promise<void>((r) => {
      server.close(() => r());
      for (const s of sockets) s.destroy();
    }) };
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

/**
 * libpq's other options of the client (libpq-connect "Parameter Key Words"): read as libpq reads them and never sent to the
 * server (which refused each as a setting, "unrecognized configuration parameter", so that no connection worked), or
 * refused at start naming CINDER_DATABASE_URL and the option; application_name and options are the server's, sent.
 */
describe.skipIf(!pg || !openssl)("libpq's options of the client in a PostgreSQL URL", () => {
  beforeAll(() => {
    if (!existsSync(join(dir, 'client.pem'))) certificates();
  });
  const at = (url: string, port: number, host: string, query: string) => {
    const target = new URL(url);
    return url.replace(`@${target.host}`, `@${host}:${port}`) + `${url.includes('?') ? '&' : '?'}${query}&connect_timeout=5`;
  };
  const file = (name: string) => encodeURIComponent(join(dir, name));
  const CLIENT_ONLY = ['sslcert', 'sslkey', 'sslpassword', 'sslcrl', 'sslsni', 'sslrootcert', 'channel_binding', 'target_session_attrs', 'client_encoding=latin', 'fallback_application_name', 'password', 'ssl_min_protocol_version'];

  test('a client certificate (sslcert, sslkey, sslpassword) the server checks; sslcrl, sslsni and the protocol version read here', async () => {
    const db = await pg!.migrated();
    const forwarder = await tlsForwarder(Number(new URL(db.url).port || 5432), true);
    const client = `sslcert=${file('client.pem')}&sslkey=${file('client.key')}&sslpassword=pw`;
    try {
      const made = await attempt(at(db.url, forwarder.port, '127.0.0.1', `sslmode=verify-ca&sslrootcert=${file('ca.pem')}&${client}&ssl_max_protocol_version=TLSv1.3`), ['tenant', 'create', 't1', '--json']);
      expect(made).toMatchObject({ code: 0, stderr: '' });
      expect(forwarder.seen.length).toBeGreaterThan(0);
      for (const s of forwarder.seen) {
        expect(s).toMatchObject({ tls: true, client: 'cinder-client' });
        for (const option of CLIENT_ONLY) expect(s.startup).not.toContain(option);
      }
      // Without sslmode (libpq's prefer) and no root certificate file: the certificate is sent, the server's not verified.
      forwarder.seen.length = 0;
      const plain = await attempt(at(db.url, forwarder.port, '127.0.0.1', client), ['client', 'list', '--tenant', 't1', '--json']);
      expect(plain).toMatchObject({ code: 0, stderr: '' });
      expect(forwarder.seen.every((s) => s.tls && s.client === 'cinder-client')).toBe(true);
      // The host name is sent for SNI (libpq's sslsni=1), not with sslsni=0.
      forwarder.seen.length = 0;
      const named = await attempt(at(db.url, forwarder.port, 'localhost', `sslmode=require&${client}`), ['client', 'list', '--tenant', 't1', '--json']);
      expect(named).toMatchObject({ code: 0, stderr: '' });
      expect(forwarder.seen.some((s) => s.servername === 'localhost')).toBe(true);
      forwarder.seen.length = 0;
      const unnamed = await attempt(at(db.url, forwarder.port, 'localhost', `sslmode=require&sslsni=0&${client}`), ['client', 'list', '--tenant', 't1', '--json']);
      expect(unnamed).toMatchObject({ code: 0, stderr: '' });
      expect(forwarder.seen.length).toBeGreaterThan(0);
      expect(forwarder.seen.every((s) => s.tls && !s.servername)).toBe(true);
      // No certificate: the server refuses the session.
      const refused = await attempt(at(db.url, forwarder.port, '127.0.0.1', `sslmode=verify-ca&sslrootcert=${file('ca.pem')}`), ['client', 'list', '--tenant', 't1']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("cannot use the PostgreSQL database '");
      // The server's certificate revoked by sslcrl: refused when verifying it.
      const revoked = await attempt(at(db.url, forwarder.port, '127.0.0.1', `sslmode=verify-ca&sslrootcert=${file('ca.pem')}&sslcrl=${file('crl.pem')}&${client}`), ['client', 'list', '--tenant', 't1']);
      expect(revoked.code).toBe(1);
      expect(revoked.stderr).toContain('revoked');
      // A protocol version the server does not reach.
      const old = await attempt(at(db.url, forwarder.port, '127.0.0.1', `sslmode=require&ssl_max_protocol_version=TLSv1.1&${client}`), ['client', 'list', '--tenant', 't1']);
      expect(old.code).toBe(1);
      expect(old.stderr).not.toContain('unrecognized configuration parameter');
    } finally {
      await forwarder.close();
    }
  }, 90_000);

  test('channel_binding=prefer, target_session_attrs, client_encoding, user and password read here; application_name and options sent', async () => {
    const db = await pg!.migrated();
    const forwarder = await tlsForwarder(Number(new URL(db.url).port || 5432));
    const target = new URL(db.url);
    const user = decodeURIComponent(target.username);
    const bare = db.url.replace(`${target.username}${target.password ? `:${target.password}` : ''}@`, '');
    try {
      const query = `channel_binding=prefer&target_session_attrs=read-write&client_encoding=UTF8&gssencmode=disable&keepalives=1&user=${encodeURIComponent(user)}&password=${encodeURIComponent(decodeURIComponent(target.password))}&application_name=cinder-ops&options=${encodeURIComponent('-c statement_timeout=60000')}`;
      const made = await attempt(at(bare.replace('://', '://x@'), forwarder.port, '127.0.0.1', query), ['tenant', 'create', 't1', '--json']);
      expect(made).toMatchObject({ code: 0, stderr: '' });
      expect(forwarder.seen.length).toBeGreaterThan(0);
      for (const s of forwarder.seen) {
        // No sslmode: libpq's prefer, TLS since the forwarder has it.
        expect(s.tls).toBe(true);
        expect(s.startup).toContain(`user\0${user}\0`);
        expect(s.startup).toContain('application_name\0cinder-ops\0');
        expect(s.startup).toContain('options\0-c statement_timeout=60000\0');
        for (const option of ['channel_binding', 'target_session_attrs', 'gssencmode', 'keepalives', 'password']) expect(s.startup).not.toContain(option);
      }
      // target_session_attrs=any (libpq's default), and fallback_application_name naming the connections.
      forwarder.seen.length = 0;
      const any = await attempt(at(db.url, forwarder.port, '127.0.0.1', 'target_session_attrs=any&fallback_application_name=ops-batch'), ['client', 'list', '--tenant', 't1', '--json']);
      expect(any).toMatchObject({ code: 0, stderr: '' });
      expect(forwarder.seen.some((s) => s.startup.includes('application_name\0ops-batch\0'))).toBe(true);
      for (const s of forwarder.seen) expect(s.startup).not.toContain('target_session_attrs');
      // A standby asked for: this server is a primary.
      const standby = await attempt(at(db.url, forwarder.port, '127.0.0.1', 'target_session_attrs=standby'), ['client', 'list', '--tenant', 't1']);
      expect(standby.code).toBe(1);
      expect(standby.stderr).toContain('no server of the URL is one target_session_attrs=standby asks for');
    } finally {
      await forwarder.close();
    }
  }, 60_000);

  test("an option of libpq's client Cinder cannot honour, or a bad value: exit 2 naming CINDER_DATABASE_URL and the option", async () => {
    const base = 'postgres://cinder:s3cret@127.0.0.1:5432/cinder';
    const cases: [string, string][] = [
      ['keepalives_idle=30', 'keepalives_idle in the database URL is an option of libpq\'s client that Cinder does not support'],
      ['keepalives=0', 'keepalives=0 in the database URL is not supported'],
      ['hostaddr=10.0.0.5', 'hostaddr in the database URL'],
      // A connection service is read as libpq reads it (cli-database-libpq-env.test.ts): one defined nowhere is refused.
      ['service=prod', "definition of service 'prod' not found"],
      ['require_auth=scram-sha-256', 'require_auth in the database URL'],
      ['channel_binding=require', 'channel_binding=require in the database URL is not supported: the driver has no SCRAM-SHA-256-PLUS'],
      ['client_encoding=LATIN1', 'client_encoding=LATIN1 in the database URL is not supported'],
      ['gssencmode=require', 'gssencmode=require in the database URL is not supported'],
      ['target_session_attrs=writable', "invalid target_session_attrs 'writable' in the database URL"],
      [`sslcert=${file('client.pem')}`, 'sslcert in the database URL needs sslkey too'],
      [`sslcert=${file('client.pem')}&sslkey=${file('client.key')}`, `the private key file '${join(dir, 'client.key')}' (sslkey in the database URL) is encrypted: give its password as sslpassword`],
      [`sslcert=${file('client.pem')}&sslkey=${file('client.key')}&sslpassword=wrong`, 'cannot decrypt the private key file'],
      [`sslcert=${file('absent.pem')}&sslkey=${file('client.key')}&sslpassword=pw`, `cannot read the client certificate file '${join(dir, 'absent.pem')}' (sslcert in the database URL)`],
      [`sslmode=verify-ca&sslrootcert=${file('ca.pem')}&sslcrl=${file('ca.pem')}`, '(sslcrl in the database URL) holds no PEM revocation list'],
      ['sslmode=require&sslsni=yes', "invalid sslsni 'yes' in the database URL"],
      ['sslmode=require&ssl_min_protocol_version=TLSv1.4', "invalid ssl_min_protocol_version 'TLSv1.4' in the database URL"],
      ['sslmode=require&sslcertmode=require', 'sslcertmode=require in the database URL is not supported'],
    ];
    for (const [query, message] of cases) {
      const r = await attempt(`${base}?${query}`, ['client', 'list', '--tenant', 't1']);
      expect([query, r.code]).toEqual([query, 2]);
      expect(r.stderr).toStartWith('cinder: invalid CINDER_DATABASE_URL');
      expect([query, r.stderr]).toEqual([query, expect.stringContaining(message)]);
      expect(r.stderr).not.toContain('s3cret');
    }
    // A URL quoted in a message shows neither the query's password nor sslpassword.
    const quoted = await attempt('POSTGRES://cinder@127.0.0.1:5432/cinder?password=s3cret&sslpassword=s3cret&sslmode=require', ['client', 'list', '--tenant', 't1']);
    expect(quoted.code).toBe(2);
    expect(quoted.stderr).toContain('password=***&sslpassword=***&sslmode=require');
    expect(quoted.stderr).not.toContain('s3cret');
  });
});
