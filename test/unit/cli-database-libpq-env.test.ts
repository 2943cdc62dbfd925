/**
 * What libpq reads beside a connection string, read by `cinder` commands as libpq reads it (src/store/postgres/libpq-env.ts):
 * PGCONNECT_TIMEOUT, PGOPTIONS, PGAPPNAME and libpq's other variables of its key words, a connection service (`?service=` or PGSERVICE, in PGSERVICEFILE, `?servicefile=` or
 * ~/.pg_service.conf) whose settings come after the URL's and before the environment's, and the password file
 * (`?passfile=`, PGPASSFILE or ~/.pgpass) when no password is given, its lines matched as libpq matches them (`*`, `\`
 * escapes, the first match) and the file not read, with libpq's warning, when others may read it. PGHOSTADDR, which the
 * driver cannot honour, is refused at start naming it. These were ignored: a PGSERVICE or ~/.pgpass set up for every
 * libpq client of the host left Cinder on other defaults, with no password, or on another database.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';
import { createPgCluster, postgresBinDir, type PgCluster } from '../helpers/pg-cluster.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const pg = targets.find((t) => t.kind === 'postgres');
const bin = postgresBinDir();
const dir = mkdtempSync(join(tmpdir(), 'cinder-libpq-env-'));
mkdirSync(join(dir, 'home'));
const clis: ReturnType<typeof createCliEnv>[] = [];
let cluster: PgCluster | undefined;

afterAll(async () => {
  for (const c of clis) c.close();
  await cluster?.remove();
  for (const t of targets) await t.cleanup();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** libpq's variables unset for each command, but those given: the test's own environment may set any of them. */
const LIBPQ_VARS = [
  'PGSERVICE', 'PGSERVICEFILE', 'PGSYSCONFDIR', 'PGPASSFILE', 'PGPASSWORD', 'PGCONNECT_TIMEOUT', 'PGOPTIONS', 'PGAPPNAME', 'PGHOSTADDR', 'PGDATABASE',
  'PGHOST', 'PGPORT', 'PGUSER', 'PGREQUIREAUTH', 'PGCHANNELBINDING', 'PGCLIENTENCODING', 'PGGSSENCMODE', 'PGLOADBALANCEHOSTS',
];

/** Variables only a conflicting process environment sets (`attempt`'s `{ process }`), put back after the command. */
const PROCESS_ONLY_VARS = ['PGUSERNAME', 'PGTARGETSESSIONATTRS', 'PGSSLNEGOTIATION', 'PGSSLMODE'];

/**
 * A command's exit code and stderr with libpq's variables `vars` set (and the others unset), HOME an empty directory: in
 * the command's environment, which its configuration reads, and (with `where` 'both') in the process's too, which the
 * driver reads when it connects, as they are one for the `cinder` binary.
 */
async function attempt(
  url: string,
  argv: string[],
  vars: Record<string, string> = {},
  where: 'both' | 'command' | { process: Record<string, string> } = 'both',
): Promise<{ code: number; stdout: string; stderr: string }> {
  const saved = Object.fromEntries([...LIBPQ_VARS, ...PROCESS_ONLY_VARS, 'HOME', 'USER', 'LOGNAME', 'USERNAME'].map((k) => [k, process.env[k]]));
  for (const k of LIBPQ_VARS) delete process.env[k];
  process.env.HOME = join(dir, 'home');
  if (where === 'both') Object.assign(process.env, vars);
  else if (where !== 'command') Object.assign(process.env, where.process);
  try {
    const cli = createCliEnv({ CINDER_DATABASE_URL: url, CINDER_BASE_URL: 'http://cinder.test', HOME: join(dir, 'home'), ...vars }, { database: false });
    clis.push(cli);
    return await cli.run(argv).catch((err: Error) => ({ code: 1, stdout: '', stderr: `cinder: ${err.message}\n` }));
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** Writes `text` to `name` in the test's directory with `mode`; its path. */
function file(name: string, text: string, mode = 0o600): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  chmodSync(path, mode);
  return path;
}

describe.skipIf(!pg)("the environment a command is given is the one its configuration reads libpq's variables from", () => {
  test('a bad PGPORT, PGCONNECT_TIMEOUT, PGTARGETSESSIONATTRS, PGSSLMODE or PGSERVICE in the given environment is refused at start, naming it (the process\'s own was read)', async () => {
    const url = 'postgres://postgres@127.0.0.1/cinder_no_such_database';
    const cases: [Record<string, string>, string][] = [
      [{ PGPORT: 'abc' }, "invalid port 'abc' in PGPORT: expected a number from 1 to 65535"],
      [{ PGCONNECT_TIMEOUT: 'soon' }, "invalid connect_timeout 'soon' in PGCONNECT_TIMEOUT"],
      [{ PGTARGETSESSIONATTRS: 'bogus' }, "invalid target_session_attrs 'bogus' in PGTARGETSESSIONATTRS"],
      [{ PGSSLMODE: 'bogus' }, "invalid sslmode 'bogus' in PGSSLMODE"],
      [{ PGSERVICE: 'cinder_no_such_service' }, 'cinder_no_such_service'],
    ];
    for (const [vars, message] of cases) {
      const r = await attempt(url, ['client', 'list', '--tenant', 't1'], vars, 'command');
      expect([vars, r.code]).toEqual([vars, 2]);
      expect(r.stderr).toContain(message);
    }
  }, 60_000);
  test("a command connects where the environment it is given says, whatever the process's own PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGTARGETSESSIONATTRS or PGSSLNEGOTIATION say (the driver read them)", async () => {
    const db = await pg!.migrated();
    const target = new URL(db.url);
    const database = target.pathname.slice(1);
    const user = decodeURIComponent(target.username);
    const port = target.port || '5432';
    const elsewhere = {
      PGHOST: '192.0.2.1',
      PGPORT: '1',
      PGDATABASE: 'cinder_no_such_database',
      PGUSER: 'cinder_no_such_role',
      PGUSERNAME: 'cinder_no_such_role',
      PGPASSWORD: 'not-the-password',
      PGTARGETSESSIONATTRS: 'standby',
      PGSSLNEGOTIATION: 'direct',
      PGSSLMODE: 'require',
    };
    const cases: [string, Record<string, string>][] = [
      // Nothing but the host in the URL: the port, database and user from the command's environment.
      [`postgres://${target.hostname}`, { PGPORT: port, PGDATABASE: database, PGUSER: user }],
      // No host either: the command's PGHOST.
      [`postgres:///${database}?user=${encodeURIComponent(user)}`, { PGHOST: target.hostname, PGPORT: port }],
      // Every variable the process sets, set to what works in the command's environment.
      [`postgres://${target.hostname}`, { PGPORT: port, PGDATABASE: database, PGUSER: user, PGTARGETSESSIONATTRS: 'any', PGSSLMODE: 'prefer' }],
    ];
    for (const [url, vars] of cases) {
      const r = await attempt(url, ['check'], vars, { process: elsewhere });
      expect({ url, ...r }).toMatchObject({ url, code: 0 });
    }
  }, 60_000);
});

describe.skipIf(!pg)('PGCONNECT_TIMEOUT, PGOPTIONS and PGHOSTADDR', () => {
  test('PGCONNECT_TIMEOUT is the seconds a connection may take (the URL\'s connect_timeout wins); a bad value is refused at start naming it', async () => {
    // A server that accepts connections and never answers.
    const silent = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
    try {
      const url = `postgres://postgres@127.0.0.1:${silent.port}/cinder`;
      const timedOut = await attempt(url, ['client', 'list', '--tenant', 't1'], { PGCONNECT_TIMEOUT: '1' });
      expect(timedOut.code).toBe(1);
      expect(timedOut.stderr).toContain('no session started within connect_timeout (1 s)');
      const urlWins = await attempt(`${url}?connect_timeout=2`, ['client', 'list', '--tenant', 't1'], { PGCONNECT_TIMEOUT: '1' });
      expect(urlWins.stderr).toContain('no session started within connect_timeout (2 s)');
    } finally {
      silent.stop(true);
    }
    const bad = await attempt('postgres://postgres@127.0.0.1:5432/cinder', ['client', 'list', '--tenant', 't1'], { PGCONNECT_TIMEOUT: 'soon' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("invalid connect_timeout 'soon' in PGCONNECT_TIMEOUT: expected seconds, 0 for none");
  }, 60_000);

  test("connect_timeout and PGCONNECT_TIMEOUT are read as libpq reads them: blanks and a sign taken, zero or negative no limit, past a 32-bit int refused; a long one waits, not times out at once", async () => {
    const local = await pg!.migrated();
    const sep = local.url.includes('?') ? '&' : '?';
    // libpq (pqParseIntParam): a decimal integer, blanks around it; zero or negative waits without limit. Each was refused at start.
    for (const value of ['-1', ' 10 ', '+7', '-0']) {
      expect(await attempt(local.url, ['check'], { PGCONNECT_TIMEOUT: value })).toMatchObject({ code: 0 });
    }
    expect(await attempt(`${local.url}${sep}connect_timeout=-5`, ['check'])).toMatchObject({ code: 0 });
    // More seconds than a timer holds (24.8 days): the driver's timer fired at once, and no connection was ever made.
    expect(await attempt(`${local.url}${sep}connect_timeout=3000000`, ['check'])).toMatchObject({ code: 0 });
    expect(await attempt(local.url, ['check'], { PGCONNECT_TIMEOUT: '2147483647' })).toMatchObject({ code: 0 });
    // Past libpq's int, refused as libpq refuses it (it was taken, and timed out at once).
    const huge = await attempt(local.url, ['check'], { PGCONNECT_TIMEOUT: '99999999999' });
    expect(huge.code).toBe(2);
    expect(huge.stderr).toContain("invalid connect_timeout '99999999999' in PGCONNECT_TIMEOUT: expected seconds, 0 for none");
    for (const value of ['1 0', '- 1', '', '1e3']) {
      const bad = await attempt(`${local.url}${sep}connect_timeout=${encodeURIComponent(value)}`, ['check']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain(`invalid connect_timeout '${value}' in the database URL`);
    }
  }, 60_000);

  test("PGOPTIONS is sent to the server as the session's options (the URL's options win); PGHOSTADDR is refused at start, as are the values of libpq's other variables the driver cannot honour", async () => {
    const db = await pg!.migrated();
    expect(await attempt(db.url, ['tenant', 'create', 't1', '--json'])).toMatchObject({ code: 0, stderr: '' });
    expect(await attempt(db.url, ['client', 'list', '--tenant', 't1', '--json'], { PGOPTIONS: '-c work_mem=8MB' })).toMatchObject({ code: 0, stderr: '' });
    // The server refuses a setting it does not know: it was sent.
    const refused = await attempt(db.url, ['client', 'list', '--tenant', 't1'], { PGOPTIONS: '-c cinder_no_such_setting=1' });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('cinder_no_such_setting');
    const urlWins = await attempt(`${db.url}?options=${encodeURIComponent('-c work_mem=8MB')}`, ['client', 'list', '--tenant', 't1', '--json'], { PGOPTIONS: '-c cinder_no_such_setting=1' });
    expect(urlWins).toMatchObject({ code: 0, stderr: '' });
    // PGPORT, read by the driver itself, is checked as the URL's port: the driver threw from its socket, then waited.
    const badPort = await attempt('postgres://postgres@127.0.0.1/cinder', ['client', 'list', '--tenant', 't1'], { PGPORT: 'abc' });
    expect(badPort.code).toBe(2);
    expect(badPort.stderr).toContain("invalid port 'abc' in PGPORT: expected a number from 1 to 65535");
    const hostaddr = await attempt(db.url, ['client', 'list', '--tenant', 't1'], { PGHOSTADDR: '127.0.0.1' });
    expect(hostaddr.code).toBe(2);
    expect(hostaddr.stderr).toContain("PGHOSTADDR is an option of libpq's client that Cinder does not support");
    // libpq's other variables of its key words: what the driver does anyway accepted, what it cannot do refused naming the variable.
    const vars = { PGCLIENTENCODING: 'UTF8', PGCHANNELBINDING: 'prefer', PGGSSENCMODE: 'disable', PGLOADBALANCEHOSTS: 'disable', PGAPPNAME: 'cinder-env-test' };
    expect(await attempt(db.url, ['client', 'list', '--tenant', 't1', '--json'], vars)).toMatchObject({ code: 0, stderr: '' });
    for (const [vars, message] of [
      [{ PGREQUIREAUTH: 'scram-sha-256' }, "require_auth in PGREQUIREAUTH is an option of libpq's client that Cinder does not support (the driver cannot restrict the authentication methods): unset it"],
      [{ PGCHANNELBINDING: 'require' }, 'channel_binding=require in PGCHANNELBINDING is not supported'],
      [{ PGCLIENTENCODING: 'LATIN1' }, 'client_encoding=LATIN1 in PGCLIENTENCODING is not supported'],
    ] as const) {
      const r = await attempt(db.url, ['client', 'list', '--tenant', 't1'], vars);
      expect([vars, r.code]).toEqual([vars, 2]);
      expect(r.stderr).toContain(message);
    }
  }, 60_000);
});

describe.skipIf(!pg)('a connection service (PGSERVICE, ?service=, PGSERVICEFILE, ~/.pg_service.conf)', () => {
  test("its settings are read for what the URL does not name, before libpq's environment variables; errors are libpq's, at start", async () => {
    const db = await pg!.migrated();
    const target = new URL(db.url);
    const database = target.pathname.slice(1);
    const services = file('services.conf', [
      '# the test database',
      '[other]',
      'dbname=cinder_no_such_database',
      `[cinder]`,
      `host=${target.hostname}`,
      `port=${target.port || 5432}`,
      `dbname=${database}`,
      `user=${decodeURIComponent(target.username)}`,
      'dbname=cinder_second_setting_ignored',
      '[after]',
      'dbname=cinder_no_such_database',
    ].join('\n'));
    expect(await attempt(`postgres://?service=cinder`, ['tenant', 'create', 't1', '--json'], { PGSERVICEFILE: services })).toMatchObject({ code: 0, stderr: '' });
    // PGSERVICE names it too; the service's database comes before PGDATABASE's.
    const listed = await attempt('postgres://', ['client', 'list', '--tenant', 't1', '--json'], { PGSERVICE: 'cinder', PGSERVICEFILE: services, PGDATABASE: 'cinder_no_such_database' });
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    // The URL's database comes before the service's.
    const named = await attempt(`postgres:///cinder_no_such_database?service=cinder`, ['client', 'list', '--tenant', 't1'], { PGSERVICEFILE: services });
    expect(named.code).toBe(1);
    expect(named.stderr).toContain('cinder_no_such_database');
    // ~/.pg_service.conf when no PGSERVICEFILE; ?servicefile= before both.
    writeFileSync(join(dir, 'home', '.pg_service.conf'), `[cinder]\nhost=${target.hostname}\nport=${target.port || 5432}\ndbname=${database}\nuser=postgres\n`);
    expect(await attempt('postgres://?service=cinder', ['client', 'list', '--tenant', 't1', '--json'])).toMatchObject({ code: 0, stderr: '' });
    const other = file('other-services.conf', '[cinder]\ndbname=cinder_no_such_database\n');
    const fromParam = await attempt(`postgres://?service=cinder&servicefile=${encodeURIComponent(other)}`, ['client', 'list', '--tenant', 't1'], { PGSERVICEFILE: services });
    expect(fromParam.stderr).toContain('cinder_no_such_database');

    const refusals: [string, Record<string, string>, string][] = [
      ['postgres://?service=missing', { PGSERVICEFILE: services }, "definition of service 'missing' not found"],
      ['postgres://?service=cinder', { PGSERVICEFILE: file('bad-key.conf', '[cinder]\nhost=localhost\nsslmode_typo=require\n') }, `syntax error in service file '${join(dir, 'bad-key.conf')}', line 3`],
      ['postgres://?service=cinder', { PGSERVICEFILE: file('no-equals.conf', '[cinder]\nhost\n') }, 'syntax error in service file'],
      ['postgres://?service=cinder', { PGSERVICEFILE: file('nested.conf', '[cinder]\nservice=other\n') }, 'nested service specifications not supported'],
      ['postgres://?service=cinder', { PGSERVICEFILE: file('hostaddr.conf', '[cinder]\nhostaddr=127.0.0.1\n') }, `hostaddr in the database URL is an option of libpq's client that Cinder does not support`],
      ['postgres://?service=cinder', { PGSERVICEFILE: file('sslmode.conf', '[cinder]\nsslmode=sometimes\n') }, `invalid sslmode 'sometimes' in the database URL: expected one of disable, allow, prefer, require, verify-ca, verify-full (the URL with the settings of service 'cinder' in ${join(dir, 'sslmode.conf')})`],
    ];
    for (const [url, vars, message] of refusals) {
      const r = await attempt(url, ['client', 'list', '--tenant', 't1'], vars);
      expect([message, r.code]).toEqual([message, 2]);
      expect(r.stderr).toContain(message);
    }
    rmSync(join(dir, 'home', '.pg_service.conf'));
  }, 60_000);

  test("a URL naming no host and no port (postgres:///db, postgres://user@/db) connects to PGHOST's host, else localhost, as libpq's; a socket directory among TCP hosts is refused at start", async () => {
    const db = await pg!.migrated();
    const target = new URL(db.url);
    const database = target.pathname.slice(1);
    const user = decodeURIComponent(target.username);
    if (!['127.0.0.1', 'localhost'].includes(target.hostname) || (target.port || '5432') !== '5432') return;
    // The driver was given the URL as it is, and its URL parser refused it: `cinder: Invalid URL`, whatever PGHOST said.
    expect(await attempt(`postgres://${user}@/${database}`, ['check'], { PGHOST: '127.0.0.1' })).toMatchObject({ code: 0 });
    expect(await attempt(`postgres:///${database}?user=${user}`, ['check'])).toMatchObject({ code: 0 });
    // libpq tries a socket directory and TCP hosts in turn; the driver connects to one socket or TCP hosts: refused, not dropped.
    for (const [url, vars] of [
      [`postgres://${user}@/${database}?host=/var/run/postgresql,127.0.0.1`, {}],
      [`postgres://${user}@/${database}`, { PGHOST: '127.0.0.1,/var/run/postgresql' }],
    ] as const) {
      const mixed = await attempt(url, ['check'], vars);
      expect(mixed.code).toBe(2);
      expect(mixed.stderr).toContain('a Unix-domain socket directory among several hosts');
    }
  }, 60_000);

  test("an empty host= or port= of a service is libpq's default, PGHOST and PGPORT unread (the service's value, empty, stands), as the URL's empty ?host= and ?port=", async () => {
    const db = await pg!.migrated();
    const target = new URL(db.url);
    const database = target.pathname.slice(1);
    const user = decodeURIComponent(target.username);
    // The local server listens on localhost:5432; PGHOST and PGPORT name a host and port nothing answers on.
    if (!['127.0.0.1', 'localhost'].includes(target.hostname) || (target.port || '5432') !== '5432') return;
    const services = file('services-empty.conf', ['[blank]', 'host=', 'port=', `dbname=${database}`, `user=${user}`].join('\n') + '\n');
    const away = { PGHOST: 'cinder-no-such-host.invalid', PGPORT: '9' };
    expect(await attempt('postgres://?service=blank', ['check'], { ...away, PGSERVICEFILE: services })).toMatchObject({ code: 0 });
    expect(await attempt(`postgres://${user}@/${database}?host=&port=`, ['check'], away)).toMatchObject({ code: 0 });
  }, 60_000);
});

describe.skipIf(!pg || !bin)('the password file (PGPASSFILE, ?passfile=, ~/.pgpass), against a server that asks for a password', () => {
  /** A password holding the characters a password file escapes. */
  const PASSWORD = 'se:cr\\et';
  const escaped = PASSWORD.replace(/\\/g, '\\\\').replace(/:/g, '\\:');
  let base = '';

  beforeAll(async () => {
    cluster = await createPgCluster(bin!);
    await cluster.start();
    base = `postgres://postgres@127.0.0.1:${cluster.port}/postgres`;
    expect(await attempt(`${base}?connect_timeout=5`, ['migrate'])).toMatchObject({ code: 0 });
    expect((await attempt(base, ['tenant', 'create', 't1', '--json'])).code).toBe(0);
    const sql = (await import('postgres')).default(cluster.url, { max: 1, onnotice: () => undefined });
    await sql.unsafe(`ALTER ROLE postgres PASSWORD '${PASSWORD.replace(/'/g, "''")}'`);
    await sql.end();
    cluster.writeDataFile('pg_hba.conf', 'host all all 127.0.0.1/32 scram-sha-256\n');
    await cluster.reload();
  }, 120_000);

  test("no password given: the file's first matching line's, its escapes and wildcards read as libpq reads them", async () => {
    const port = cluster!.port;
    const none = await attempt(base, ['client', 'list', '--tenant', 't1']);
    expect(none.code).toBe(1);
    const lines = [
      '# comment',
      `127.0.0.1:${port}:postgres:someone_else:wrong`,
      `127.0.0.1:${port + 1}:postgres:postgres:wrong`,
      `127.0.0.1:${port}:postgres:postgres:${escaped}`,
      `*:*:*:*:wrong`,
    ];
    const passfile = file('pgpass', lines.join('\n') + '\n');
    expect(await attempt(base, ['client', 'list', '--tenant', 't1', '--json'], { PGPASSFILE: passfile })).toMatchObject({ code: 0, stderr: '' });
    // Wildcards; a line with CRLF.
    const wild = file('pgpass-wild', `*:${port}:*:postgres:${escaped}\r\n`);
    expect(await attempt(base, ['client', 'list', '--tenant', 't1', '--json'], { PGPASSFILE: wild })).toMatchObject({ code: 0, stderr: '' });
    // ?passfile= before PGPASSFILE; ~/.pgpass when neither.
    const wrong = file('pgpass-wrong', '*:*:*:*:wrong\n');
    expect(await attempt(`${base}?passfile=${encodeURIComponent(wild)}`, ['client', 'list', '--tenant', 't1', '--json'], { PGPASSFILE: wrong })).toMatchObject({ code: 0, stderr: '' });
    const refused = await attempt(base, ['client', 'list', '--tenant', 't1'], { PGPASSFILE: wrong });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`password authentication failed for user "postgres" (password retrieved from file '${wrong}')`);
    writeFileSync(join(dir, 'home', '.pgpass'), `127.0.0.1:*:postgres:postgres:${escaped}\n`);
    chmodSync(join(dir, 'home', '.pgpass'), 0o600);
    expect(await attempt(base, ['client', 'list', '--tenant', 't1', '--json'])).toMatchObject({ code: 0, stderr: '' });
    // An empty ?passfile= is ~/.pgpass, as libpq reads it: PGPASSFILE is not read then.
    expect(await attempt(`${base}?passfile=`, ['client', 'list', '--tenant', 't1', '--json'], { PGPASSFILE: wrong })).toMatchObject({ code: 0, stderr: '' });
    // A password given (the URL's, PGPASSWORD) is used and the file not read.
    expect((await attempt(base, ['client', 'list', '--tenant', 't1'], { PGPASSWORD: 'wrong' })).code).toBe(1);
    rmSync(join(dir, 'home', '.pgpass'));
  }, 60_000);

  test('a file others may read is not read, with libpq\'s warning; the service\'s host, port and user are what its lines match', async () => {
    const open = file('pgpass-open', `*:*:*:*:${escaped}\n`, 0o644);
    expect((await attempt(base, ['client', 'list', '--tenant', 't1'], { PGPASSFILE: open })).code).toBe(1);
    // Where the server asks for no password (the local one), the command runs, and says why the file was not read.
    const local = await pg!.migrated();
    expect((await attempt(local.url, ['tenant', 'create', 't1', '--json'])).code).toBe(0);
    const warned = await attempt(local.url, ['client', 'list', '--tenant', 't1', '--json'], { PGPASSFILE: open });
    expect(warned).toMatchObject({ code: 0, stderr: `cinder: warning: password file '${open}' has group or world access; permissions should be u=rw (0600) or less: not read\n` });
    const services = file('pgpass-services.conf', `[pw]\nhost=127.0.0.1\nport=${cluster!.port}\ndbname=postgres\nuser=postgres\n`);
    const matched = file('pgpass-matched', `127.0.0.1:${cluster!.port}:postgres:postgres:${escaped}\n`);
    expect(await attempt('postgres://?service=pw', ['client', 'list', '--tenant', 't1', '--json'], { PGSERVICEFILE: services, PGPASSFILE: matched })).toMatchObject({ code: 0, stderr: '' });
    // Two hosts the file gives different passwords (or one none): each connection sends its host's (refused at start
    // before, when one password went to every host).
    const two = await attempt(`postgres://postgres@127.0.0.1:${cluster!.port},localhost:${cluster!.port}/postgres`, ['client', 'list', '--tenant', 't1', '--json'], { PGPASSFILE: matched });
    expect(two).toMatchObject({ code: 0, stderr: '' });
  }, 60_000);

  test("an empty password (the URL's `password=`, a service's) reads the file, whose password is the one sent", async () => {
    const matched = file('pgpass-empty', `127.0.0.1:${cluster!.port}:postgres:postgres:${escaped}\n`);
    expect(await attempt(`${base}?password=`, ['client', 'list', '--tenant', 't1', '--json'], { PGPASSFILE: matched })).toMatchObject({ code: 0, stderr: '' });
    const services = file('pgpass-empty.conf', `[empty]\nhost=127.0.0.1\nport=${cluster!.port}\ndbname=postgres\nuser=postgres\npassword=\n`);
    expect(await attempt('postgres://?service=empty', ['client', 'list', '--tenant', 't1', '--json'], { PGSERVICEFILE: services, PGPASSFILE: matched })).toMatchObject({ code: 0, stderr: '' });
  }, 60_000);

  test("a line's empty password is the file's answer (the lines after it not read) and is none: libpq's 'no password supplied', not a refused password of the file", async () => {
    const port = cluster!.port;
    const empty = file('pgpass-empty-line', [`127.0.0.1:${port}:postgres:postgres:`, `*:*:*:*:${escaped}`].join('\n') + '\n');
    const refused = await attempt(base, ['client', 'list', '--tenant', 't1'], { PGPASSFILE: empty });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`fe_sendauth: no password supplied (the line of the password file '${empty}' for this connection gives an empty one)`);
    expect(refused.stderr).not.toContain('password retrieved from file');
  }, 60_000);

  test("the URL's query is percent-decoded as libpq decodes it: a '+' is a '+' (a password holding one was sent with a blank), %20 a blank", async () => {
    const sql = (await import('postgres')).default(`${base}?sslmode=disable`, { max: 1, onnotice: () => undefined, pass: PASSWORD });
    await sql.unsafe(`CREATE ROLE plus_user LOGIN SUPERUSER PASSWORD 'p+q r'`);
    await sql.end();
    const url = `postgres://plus_user@127.0.0.1:${cluster!.port}/postgres?password=p+q%20r`;
    expect(await attempt(url, ['client', 'list', '--tenant', 't1', '--json'])).toMatchObject({ code: 0, stderr: '' });
  }, 60_000);

  test("cinder check, the database's diagnosis, says what the other commands say: the file not read, a refused password from it", async () => {
    const open = file('pgpass-check-open', `*:*:*:*:${escaped}\n`, 0o644);
    // Where the server asks for no password (the local one), the check runs, and says why the file was not read.
    const local = await pg!.migrated();
    const unread = await attempt(local.url, ['check'], { PGPASSFILE: open });
    expect(unread.code).toBe(0);
    expect(unread.stderr).toBe(`cinder: warning: password file '${open}' has group or world access; permissions should be u=rw (0600) or less: not read\n`);
    const wrong = file('pgpass-check-wrong', '*:*:*:*:wrong\n');
    const refused = await attempt(base, ['check'], { PGPASSFILE: wrong });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`password authentication failed for user "postgres" (password retrieved from file '${wrong}')`);
    expect(refused.stderr).not.toContain('wrong\n');
  }, 60_000);

  test("a port named without a host (the URL's `?port=`, a service's) goes to PGHOST's host, as libpq's does, and its password file line is that host's", async () => {
    const port = cluster!.port;
    const passfile = file('pgpass-pghost', [`localhost:${port}:postgres:postgres:wrong`, `127.0.0.1:${port}:postgres:postgres:${escaped}`].join('\n') + '\n');
    const vars = { PGPASSFILE: passfile, PGHOST: '127.0.0.1' };
    expect(await attempt(`postgres://postgres@/postgres?port=${port}`, ['client', 'list', '--tenant', 't1', '--json'], vars)).toMatchObject({ code: 0, stderr: '' });
    const services = file('pgpass-pghost.conf', `[portonly]\nport=${port}\ndbname=postgres\nuser=postgres\n`);
    expect(await attempt('postgres://?service=portonly', ['client', 'list', '--tenant', 't1', '--json'], { ...vars, PGSERVICEFILE: services })).toMatchObject({ code: 0, stderr: '' });
  }, 60_000);

  test("no user named: the file's line of the process's own user, whom the driver connects as, whatever USER says", async () => {
    const me = userInfo().username;
    const sql = (await import('postgres')).default(`${base}?sslmode=disable`, { max: 1, onnotice: () => undefined, pass: PASSWORD });
    if (me !== 'postgres') await sql.unsafe(`CREATE ROLE "${me.replace(/"/g, '""')}" LOGIN SUPERUSER PASSWORD '${PASSWORD.replace(/'/g, "''")}'`);
    await sql.end();
    const passfile = file('pgpass-os-user', [`*:*:*:someone_else:wrong`, `*:*:*:${me}:${escaped}`].join('\n') + '\n');
    const url = `postgres://127.0.0.1:${cluster!.port}/postgres`;
    expect(await attempt(url, ['client', 'list', '--tenant', 't1', '--json'], { PGPASSFILE: passfile, USER: 'someone_else', LOGNAME: 'someone_else' })).toMatchObject({ code: 0, stderr: '' });
  }, 60_000);

  test('a socket directory is matched by a line naming it before one naming localhost, as libpq built for that directory does', async () => {
    // The server's socket, seen in /tmp (upstream libpq's default directory; Debian's is /var/run/postgresql).
    const sql = (await import('postgres')).default(`${base}?sslmode=disable`, { max: 1, onnotice: () => undefined, pass: PASSWORD });
    const [{ unix_socket_directories: socketDir }] = await sql<{ unix_socket_directories: string }[]>`SHOW unix_socket_directories`;
    await sql.end();
    const link = `/tmp/.s.PGSQL.${cluster!.port}`;
    rmSync(link, { force: true });
    symlinkSync(join(socketDir!.split(',')[0]!.trim(), `.s.PGSQL.${cluster!.port}`), link);
    try {
      cluster!.writeDataFile('pg_hba.conf', 'host all all 127.0.0.1/32 scram-sha-256\nlocal all all scram-sha-256\n');
      await cluster!.reload();
      const url = `postgres://postgres@/postgres?host=/tmp&port=${cluster!.port}`;
      const lines = [`localhost:${cluster!.port}:postgres:postgres:wrong`, `/tmp:${cluster!.port}:postgres:postgres:${escaped}`];
      expect(await attempt(url, ['client', 'list', '--tenant', 't1', '--json'], { PGPASSFILE: file('pgpass-dir', lines.join('\n') + '\n') })).toMatchObject({ code: 0, stderr: '' });
      // A line naming localhost still serves a default directory no line names.
      const local = file('pgpass-local', `localhost:${cluster!.port}:postgres:postgres:${escaped}\n`);
      expect(await attempt(url, ['client', 'list', '--tenant', 't1', '--json'], { PGPASSFILE: local })).toMatchObject({ code: 0, stderr: '' });
    } finally {
      rmSync(link, { force: true });
    }
  }, 60_000);
});
