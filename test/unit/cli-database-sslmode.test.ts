/**
 * libpq's `sslmode` in CINDER_DATABASE_URL, with and without its TLS options, through `cinder` commands: `disable` plain;
 * `allow` plain first, TLS when the server refuses the plain session; `prefer` (libpq's default, no sslmode) TLS first,
 * plain when the server has no TLS, refuses the session over TLS, or the handshake fails; `require`, `verify-ca` and
 * `verify-full` TLS or nothing. Against the local server (no TLS) and a throwaway cluster with `ssl=on` whose pg_hba.conf
 * lets in TLS sessions alone, plain ones alone, or both: a command that runs shows which encryption the session used.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';
import { createPgCluster, postgresBinDir, type PgCluster } from '../helpers/pg-cluster.ts';
import { storeTargets } from '../helpers/stores.ts';
import { testCertificates } from '../helpers/tls-certificates.ts';

const targets = await storeTargets({ main: false });
const pg = targets.find((t) => t.kind === 'postgres');
const openssl = Bun.which('openssl');
const bin = postgresBinDir();
const dir = mkdtempSync(join(tmpdir(), 'cinder-sslmode-'));
const clis: ReturnType<typeof createCliEnv>[] = [];
let cluster: PgCluster | undefined;

const file = (name: string) => encodeURIComponent(join(dir, name));
/** TLS options of the client: a root certificate file, and a client certificate with its key. */
const ROOT = () => `sslrootcert=${file('ca.pem')}`;
const CLIENT = () => `sslcert=${file('client.pem')}&sslkey=${file('client.key')}&sslpassword=pw`;

beforeAll(() => {
  if (openssl) testCertificates(dir);
});

afterAll(async () => {
  for (const c of clis) c.close();
  await cluster?.remove();
  for (const t of targets) await t.cleanup();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** A command's exit code and stderr, an error it throws (exit 1) as main prints it. */
async function attempt(url: string, argv: string[]): Promise<{ code: number; stderr: string }> {
  // The command's environment holds libpq's variables as the process's does (withEnv): one environment, as for the binary.
  const libpq = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[0].startsWith('PG') && e[1] !== undefined));
  const cli = createCliEnv({ ...libpq, CINDER_DATABASE_URL: url, CINDER_BASE_URL: 'http://cinder.test' }, { database: false });
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

describe.skipIf(!pg)("postgres.js's own spelling of the URL's options", () => {
  test('?ssl= is its sslmode (true: verify-full, false: disable), read before PGSSLMODE; a bad or disagreeing value is refused at start', async () => {
    const db = await pg!.migrated();
    const made = await attempt(withQuery(db.url, ''), ['tenant', 'create', 't1', '--json']);
    expect(made).toMatchObject({ code: 0, stderr: '' });
    // Against the local server, which has no TLS: ssl=require was TLS or nothing before Cinder read sslmode, and stays so.
    for (const [query, mode] of [['ssl=require', 'require'], ['ssl=true', 'verify-full'], ['ssl=verify-ca', 'verify-ca'], ['ssl=require&sslmode=require', 'require']] as const) {
      const refused = await withEnv({ PGSSLMODE: 'disable' }, () => attempt(withQuery(db.url, query), ['client', 'list', '--tenant', 't1']));
      expect([query, refused.code]).toEqual([query, 1]);
      expect(refused.stderr).toContain(`the server does not support SSL, but SSL was required (sslmode=${mode})`);
    }
    for (const query of ['ssl=false', 'ssl=disable', 'ssl=prefer']) {
      const listed = await withEnv({ PGSSLMODE: 'require' }, () => attempt(withQuery(db.url, query), ['client', 'list', '--tenant', 't1', '--json']));
      expect([query, listed.code, listed.stderr]).toEqual([query, 0, '']);
    }
    const bad = await attempt(withQuery(db.url, 'ssl=yes'), ['client', 'list', '--tenant', 't1']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("invalid ssl 'yes' in the database URL");
    const disagree = await attempt(withQuery(db.url, 'ssl=require&sslmode=disable'), ['client', 'list', '--tenant', 't1']);
    expect(disagree.code).not.toBe(0);
    expect(disagree.stderr).toContain('ssl=require and sslmode=disable in the database URL disagree');
  }, 60_000);

  test("the driver's own options (debug, idle_timeout...) are refused in the URL, and never read from PG<OPTION> variables", async () => {
    const db = await pg!.migrated();
    for (const option of ['debug=1', 'idle_timeout=1', 'max_lifetime=1', 'keep_alive=0', 'max_pipeline=1', 'prepare=false', 'fetch_types=true', 'backoff=0', 'publications=x']) {
      const refused = await attempt(withQuery(db.url, option), ['client', 'list', '--tenant', 't1']);
      const name = option.split('=')[0]!;
      expect([option, refused.code === 0]).toEqual([option, false]);
      expect(refused.stderr).toContain(`${name} in the database URL is an option of the driver that Cinder sets itself`);
    }
    const { connect } = await import('../../src/store/postgres/db.ts');
    const sql = await withEnv({ PGDEBUG: '1', PGIDLE_TIMEOUT: '1', PGMAX_LIFETIME: '1', PGKEEP_ALIVE: '1', PGMAX_PIPELINE: '1', PGPUBLICATIONS: 'x' }, async () => connect(db.url));
    try {
      // PGDEBUG would have put each failed statement's text and values on its error, into logs.
      const failed = await sql.unsafe('select $1::int / 0', [7]).catch((err: Error) => err);
      expect(failed).toBeInstanceOf(Error);
      expect(Object.keys(failed as object)).not.toContain('parameters');
      expect(Object.keys(failed as object)).not.toContain('query');
      const o = sql.options as unknown as Record<string, unknown>;
      expect([o.debug, o.idle_timeout, o.keep_alive, o.max_pipeline, o.publications]).toEqual([false, undefined, 60, 100, 'alltables']);
      expect(typeof o.max_lifetime).toBe('function');
    } finally {
      await sql.end();
    }
  }, 60_000);
});

describe('a server answering the TLS request with an error (it could not start a backend: out of processes or memory)', () => {
  /** An ErrorResponse, as a postmaster writes when its fork fails: 53300 with its message. */
  function errorResponse(): Uint8Array {
    const body = new TextEncoder().encode('SFATAL\0C53300\0Msorry, too many clients already\0\0');
    const out = new Uint8Array(5 + body.length);
    out[0] = 0x45;
    new DataView(out.buffer).setInt32(1, 4 + body.length);
    out.set(body, 5);
    return out;
  }

  test("every sslmode reports the server's error, not a server without TLS", async () => {
    const failing = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { open: (s) => void s.write(errorResponse()), data: (s) => void s.end() } });
    try {
      for (const mode of ['require', 'prefer', 'allow']) {
        const r = await attempt(`postgres://postgres@127.0.0.1:${failing.port}/cinder?sslmode=${mode}&connect_timeout=1`, ['client', 'list', '--tenant', 't1']);
        expect([mode, r.code]).toEqual([mode, 1]);
        expect([mode, r.stderr]).toEqual([mode, expect.stringContaining('sorry, too many clients already')]);
        expect(r.stderr).not.toContain('does not support SSL');
      }
    } finally {
      failing.stop(true);
    }
  }, 30_000);
});

/** Runs `fn` with libpq's environment variables `vars` set (undefined: unset), as a libpq client of the host would have them. */
async function withEnv<T>(vars: Record<string, string | undefined>, fn: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const set = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  set(vars);
  try {
    return await fn();
  } finally {
    set(saved);
  }
}

describe.skipIf(!pg || !openssl)("libpq's environment variables (PGSSLMODE...), read when the URL does not name the option", () => {
  test('PGSSLMODE=require refuses a server without TLS, as libpq does; the URL\'s sslmode wins over it', async () => {
    const db = await pg!.migrated();
    expect(await attempt(withQuery(db.url, ''), ['tenant', 'create', 't1', '--json'])).toMatchObject({ code: 0, stderr: '' });
    await withEnv({ PGSSLMODE: 'require' }, async () => {
      const refused = await attempt(withQuery(db.url, ''), ['client', 'list', '--tenant', 't1']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('the server does not support SSL, but SSL was required (sslmode=require)');
      expect(await attempt(withQuery(db.url, 'sslmode=prefer'), ['client', 'list', '--tenant', 't1', '--json'])).toMatchObject({ code: 0, stderr: '' });
    });
    await withEnv({ PGSSLMODE: 'verify-ca', PGSSLROOTCERT: join(dir, 'ca.pem') }, async () => {
      const refused = await attempt(withQuery(db.url, ''), ['client', 'list', '--tenant', 't1']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('(sslmode=verify-ca)');
    });
    // An empty variable is unset, as libpq takes it.
    await withEnv({ PGSSLMODE: '' }, async () => {
      expect(await attempt(withQuery(db.url, ''), ['client', 'list', '--tenant', 't1', '--json'])).toMatchObject({ code: 0, stderr: '' });
    });
  }, 60_000);

  test('a bad value or an unreadable file in a variable is refused at start naming the variable; PGSSLCRLDIR is refused as sslcrldir is', async () => {
    const base = 'postgres://cinder@127.0.0.1:5432/cinder';
    const cases: [Record<string, string>, string][] = [
      [{ PGSSLMODE: 'bogus' }, "invalid sslmode 'bogus' in PGSSLMODE"],
      [{ PGSSLROOTCERT: join(dir, 'missing.pem') }, `cannot read the root certificate file '${join(dir, 'missing.pem')}' (sslrootcert in PGSSLROOTCERT)`],
      [{ PGSSLCERT: join(dir, 'client.pem') }, 'sslcert in PGSSLCERT needs sslkey too'],
      [{ PGSSLMINPROTOCOLVERSION: 'TLSv9' }, "invalid ssl_min_protocol_version 'TLSv9' in PGSSLMINPROTOCOLVERSION"],
      [{ PGSSLCRLDIR: dir }, 'PGSSLCRLDIR is an option of libpq\'s client that Cinder does not support'],
      [{ PGREQUIRESSL: '1' }, 'PGREQUIRESSL is an option of libpq\'s client that Cinder does not support (use sslmode=require)'],
      [{ PGSSLNEGOTIATION: 'direct' }, 'sslnegotiation=direct in PGSSLNEGOTIATION needs sslmode require'],
    ];
    for (const [vars, message] of cases) {
      const r = await withEnv(vars, () => attempt(base, ['client', 'list', '--tenant', 't1']));
      expect([vars, r.code]).toEqual([vars, 2]);
      expect([vars, r.stderr]).toEqual([vars, expect.stringContaining(message)]);
    }
    // The URL's option wins: its sslmode is read, the variable's never checked; PGREQUIRESSL=0 asks for nothing.
    const r = await withEnv({ PGSSLMODE: 'bogus', PGREQUIRESSL: '0' }, () => attempt(`${base}?sslmode=disable&connect_timeout=1`, ['client', 'list', '--tenant', 't1']));
    expect(r.stderr).not.toContain('PGSSLMODE');
    expect(r.stderr).not.toContain('PGREQUIRESSL');
  }, 60_000);

  test("PGTARGETSESSIONATTRS: any (libpq's default) connects, read-write picks the server, another value is refused at start naming it", async () => {
    const db = await pg!.migrated();
    expect(await attempt(withQuery(db.url, ''), ['tenant', 'create', 't1', '--json'])).toMatchObject({ code: 0, stderr: '' });
    for (const value of ['any', 'read-write', '']) {
      const listed = await withEnv({ PGTARGETSESSIONATTRS: value }, () => attempt(withQuery(db.url, ''), ['client', 'list', '--tenant', 't1', '--json']));
      expect([value, listed.code, listed.stderr]).toEqual([value, 0, '']);
    }
    const standby = await withEnv({ PGTARGETSESSIONATTRS: 'standby' }, () => attempt(withQuery(db.url, ''), ['client', 'list', '--tenant', 't1']));
    expect(standby.code).toBe(1);
    const bad = await withEnv({ PGTARGETSESSIONATTRS: 'bogus' }, () => attempt(withQuery(db.url, ''), ['client', 'list', '--tenant', 't1']));
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("invalid target_session_attrs 'bogus' in PGTARGETSESSIONATTRS");
    // The URL's wins.
    const url = await withEnv({ PGTARGETSESSIONATTRS: 'standby' }, () => attempt(withQuery(db.url, 'target_session_attrs=any'), ['client', 'list', '--tenant', 't1', '--json']));
    expect([url.code, url.stderr]).toEqual([0, '']);
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
