/**
 * CINDER_DATABASE_URL as `cinder` commands read it: a PostgreSQL URL listing several hosts (docs/operations.md)
 * works for every command, as postgres.js connects with it (a command failed with a bare "Invalid URL" where
 * it named its database); a URL that cannot work (a port out of range, a % that is not percent-encoding) is a
 * configuration error naming the variable (exit 2), and no message quotes the URL's password.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import type { Socket } from 'bun';
import { createCliEnv } from '../helpers/cli.ts';
import { freePort } from '../helpers/export-e2e.ts';
import { existsSync } from 'node:fs';
import { rawStatements, storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const clis: ReturnType<typeof createCliEnv>[] = [];
afterAll(async () => {
  for (const c of clis) c.close();
  for (const t of targets) await t.cleanup();
}, 60_000);

function cliOn(url: string, env: Record<string, string> = {}) {
  const cli = createCliEnv({ CINDER_DATABASE_URL: url, CINDER_BASE_URL: 'http://cinder.test', ...env }, { database: false });
  clis.push(cli);
  return cli;
}

const pg = targets.find((t) => t.kind === 'postgres');

describe.skipIf(!pg)('a PostgreSQL URL listing several hosts', () => {
  test('commands run on the first host that answers; a failure names every host', async () => {
    const db = await pg!.migrated();
    const target = new URL(db.url);
    // The first host refuses connections: postgres.js goes on to the next.
    const listed = db.url.replace(`@${target.host}`, `@127.0.0.1:${freePort()},${target.host}`);
    const cli = cliOn(listed);
    const made = await cli.run(['tenant', 'create', 't1', '--json']);
    expect([made.code, made.stderr]).toEqual([0, '']);
    const client = await cli.run(['client', 'create', '--tenant', 't1', '--json']);
    expect([client.code, client.stderr]).toEqual([0, '']);
    const listedClients = JSON.parse((await cli.run(['client', 'list', '--tenant', 't1', '--json'])).stdout) as { client_id: string }[];
    expect(listedClients.map((c) => c.client_id)).toEqual([(JSON.parse(client.stdout) as { client_id: string }).client_id]);

    const [a, b] = [freePort(), freePort()];
    const nowhere = cliOn(`postgres://${target.username}@127.0.0.1:${a},127.0.0.1:${b}/cinder_nowhere?connect_timeout=1`);
    const failed = await nowhere.run(['client', 'list', '--tenant', 't1']).catch((err: Error) => ({ code: 1, stdout: '', stderr: `cinder: ${err.message}\n` }));
    expect(failed.code).toBe(1);
    expect(failed.stderr).toStartWith(`cinder: cannot use the PostgreSQL database 'cinder_nowhere' on 127.0.0.1:${a},127.0.0.1:${b} (CINDER_DATABASE_URL): `);
  }, 30_000);

  test('a host that never answers (a machine gone, its address black-holed) is given up after connect_timeout and the next one tried, as libpq does', async () => {
    const db = await pg!.migrated();
    const target = new URL(db.url);
    // Takes the connection and says nothing: no answer to the TLS request nor to the start-up message.
    const silent = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
    try {
      for (const query of ['', 'sslmode=disable']) {
        const listed = `${db.url.replace(`@${target.host}`, `@127.0.0.1:${silent.port},${target.host}`)}?connect_timeout=1${query ? `&${query}` : ''}`;
        const cli = cliOn(listed);
        const made = await cli.run(['tenant', 'create', query ? 'plain' : 'tls', '--json']).catch((err: Error) => ({ code: 1, stdout: '', stderr: `cinder: ${err.message}\n` }));
        expect([query, made.code, made.stderr]).toEqual([query, 0, '']);
      }
      // Every host silent: the connection fails, naming both, once each has had its connect_timeout.
      const nowhere = cliOn(`postgres://${target.username}@127.0.0.1:${silent.port},127.0.0.1:${silent.port}/cinder_nowhere?connect_timeout=1`);
      const failed = await nowhere.run(['client', 'list', '--tenant', 't1']).catch((err: Error) => ({ code: 1, stdout: '', stderr: `cinder: ${err.message}\n` }));
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain('CONNECT_TIMEOUT');
    } finally {
      silent.stop(true);
    }
  }, 30_000);
});

describe('target_session_attrs against a server that does not report its state (PostgreSQL before 14, a pooler)', () => {
  test('a session closed while its state is asked for fails the command with the close, and no promise is left rejected unhandled', async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => void rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    // Lets the session in (AuthenticationOk, ReadyForQuery, no in_hot_standby) and closes it at its first query.
    const server = Bun.listen<{ started: boolean }>({
      hostname: '127.0.0.1',
      port: 0,
      socket: {
        open: (s) => void (s.data = { started: false }),
        data(s, chunk) {
          if (chunk.length === 8 && new DataView(chunk.buffer, chunk.byteOffset, 8).getInt32(4) === 80877103) return void s.write('N');
          if (s.data.started) return void s.end();
          s.data.started = true;
          s.write(new Uint8Array([0x52, 0, 0, 0, 8, 0, 0, 0, 0, 0x5a, 0, 0, 0, 5, 0x49]));
        },
      },
    });
    try {
      const cli = cliOn(`postgres://postgres@127.0.0.1:${server.port}/cinder?connect_timeout=1&target_session_attrs=read-write`);
      const failed = await cli.run(['client', 'list', '--tenant', 't1']).catch((err: Error) => ({ code: 1, stdout: '', stderr: `cinder: ${err.message}\n` }));
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain('CONNECTION_CLOSED');
      await Bun.sleep(100);
      expect(rejections).toEqual([]);
    } finally {
      process.off('unhandledRejection', onRejection);
      server.stop(true);
    }
  }, 20_000);
});

/** A TCP forwarder listening on the IPv6 loopback, to `port` on 127.0.0.1: a PostgreSQL server at [::1]. */
function ipv6Forwarder(port: number) {
  type Side = { peer?: Socket<Side>; pending: Uint8Array[] };
  return Bun.listen<Side>({
    hostname: '::1',
    port: 0,
    socket: {
      open(client) {
        client.data = { pending: [] };
        void Bun.connect<Side>({
          hostname: '127.0.0.1', port,
          socket: {
            open(up) {
              up.data = { peer: client, pending: [] };
              client.data.peer = up;
              for (const chunk of client.data.pending.splice(0)) up.write(chunk);
            },
            data: (up, chunk) => void up.data.peer?.write(chunk),
            close: (up) => void up.data.peer?.end(),
            error: (up) => void up.data.peer?.end(),
          },
        }).catch(() => client.end());
      },
      data(client, chunk) {
        if (client.data.peer) client.data.peer.write(chunk);
        else client.data.pending.push(new Uint8Array(chunk));
      },
      close: (client) => void client.data.peer?.end(),
      error: (client) => void client.data.peer?.end(),
    },
  });
}

describe.skipIf(!pg)('a PostgreSQL URL whose host is an IPv6 address in brackets', () => {
  test('commands connect to it (postgres.js alone took "[" for the host)', async () => {
    const db = await pg!.migrated();
    const target = new URL(db.url);
    const forwarder = ipv6Forwarder(Number(target.port || 5432));
    try {
      const cli = cliOn(db.url.replace(`@${target.host}`, `@[::1]:${forwarder.port}`));
      const made = await cli.run(['tenant', 'create', 't1', '--json']);
      expect([made.code, made.stderr]).toEqual([0, '']);
      expect((await cli.run(['client', 'list', '--tenant', 't1', '--json'])).stdout).toBe('[]\n');
      // A list of hosts, the first an IPv6 address that refuses connections.
      const listed = cliOn(db.url.replace(`@${target.host}`, `@[::1]:${freePort()},[::1]:${forwarder.port}`));
      expect((await listed.run(['client', 'list', '--tenant', 't1', '--json'])).stdout).toBe('[]\n');
      // No port: the command's PGPORT, as postgres.js takes it for a host not in brackets (it was always 5432).
      const portless = cliOn(db.url.replace(`@${target.host}`, '@[::1]'), { PGPORT: String(forwarder.port) });
      expect((await portless.run(['client', 'list', '--tenant', 't1', '--json'])).stdout).toBe('[]\n');
    } finally {
      forwarder.stop(true);
    }
  }, 30_000);
});

/** A new migrated database and the server's Unix-domain socket it is reached by; undefined when the server has none. */
async function socketDatabase() {
  const db = await pg!.migrated();
  const target = new URL(db.url);
  const port = Number(target.port || 5432);
  const [[row]] = await rawStatements('postgres', db.url, [['SHOW unix_socket_directories', []]]);
  const dir = String(row!.unix_socket_directories).split(',')[0]!.trim();
  if (!dir.startsWith('/') || !existsSync(`${dir}/.s.PGSQL.${port}`)) return undefined;
  return { db, dir, port, database: target.pathname.slice(1), user: target.username };
}

describe.skipIf(!pg)('a PostgreSQL URL naming a Unix-domain socket, or its hosts in the query, as libpq reads it', () => {
  test('commands connect through the socket (was a TCP connection to %2F..., or the server refusing a "host" setting)', async () => {
    const on = await socketDatabase();
    if (on === undefined) return; // a server without a socket
    const { dir, port, database, user } = on;
    const made = await cliOn(`postgres://${user}@/${database}?host=${dir}&port=${port}`).run(['tenant', 'create', 't1', '--json']);
    expect([made.code, made.stderr]).toEqual([0, '']);
    for (const url of [
      `postgresql://${user}@${encodeURIComponent(dir)}:${port}/${database}`,
      `postgresql:///${database}?host=${dir}&port=${port}&user=${user}`,
      `postgres://${user}@localhost/${database}?host=${dir}&port=${port}&sslmode=disable`,
      `postgres://${user}@/${database}?host=127.0.0.1&port=${port}`,
    ]) {
      const r = await cliOn(url).run(['client', 'list', '--tenant', 't1', '--json']);
      expect([url, r.code, r.stderr, r.stdout]).toEqual([url, 0, '', '[]\n']);
    }
    const nowhere = await cliOn(`postgres://${user}@/${database}?host=/nonexistent-dir&port=${port}`).run(['client', 'list', '--tenant', 't1'])
      .catch((err: Error) => ({ code: 1, stdout: '', stderr: `cinder: ${err.message}\n` }));
    expect(nowhere.code).toBe(1);
    expect(nowhere.stderr).toBe(
      `cinder: cannot use the PostgreSQL database '${database}' on the socket in /nonexistent-dir (CINDER_DATABASE_URL): connect ENOENT /nonexistent-dir/.s.PGSQL.${port}\n`,
    );
  }, 30_000);
});

describe.skipIf(!pg)("sslmode with a socket, ?dbname=, and host names the CLI uses as words, as libpq reads them", () => {
  test('sslmode=require (or verify-full, with sslrootcert) over a Unix-domain socket connects without TLS, as libpq does: a socket never negotiates it', async () => {
    const on = await socketDatabase();
    if (on === undefined) return; // a server without a socket
    const { db, dir, port, database, user } = on;
    expect((await cliOn(db.url).run(['tenant', 'create', 't1'])).code).toBe(0);
    for (const url of [
      `postgres://${user}@/${database}?host=${dir}&port=${port}&sslmode=require`,
      `postgresql://${user}@${encodeURIComponent(dir)}:${port}/${database}?sslmode=verify-full`,
      // A root certificate file is neither read (there is none here) nor sent to the server as a setting.
      `postgres://${user}@/${database}?host=${dir}&port=${port}&sslmode=verify-full&sslrootcert=/nonexistent/root.crt`,
    ]) {
      const r = await cliOn(url).run(['client', 'list', '--tenant', 't1', '--json']);
      expect([url, r.code, r.stderr, r.stdout]).toEqual([url, 0, '', '[]\n']);
    }
  }, 30_000);

  test("?dbname= names the database over the URL's path, as libpq takes it (was the path's, or a server refusing a dbname setting)", async () => {
    const db = await pg!.migrated();
    const target = new URL(db.url);
    const database = target.pathname.slice(1);
    expect((await cliOn(db.url).run(['tenant', 'create', 't1'])).code).toBe(0);
    const other = new URL(db.url);
    other.pathname = '/cinder_no_such_database';
    other.searchParams.set('dbname', database);
    const r = await cliOn(other.toString()).run(['client', 'list', '--tenant', 't1', '--json']);
    expect([r.code, r.stderr, r.stdout]).toEqual([0, '', '[]\n']);
    // And the other way round: the query's database, which does not exist, is the one named.
    const wrong = new URL(db.url);
    wrong.searchParams.set('dbname', 'cinder_no_such_database');
    const refused = await cliOn(wrong.toString()).run(['client', 'list', '--tenant', 't1'])
      .catch((err: Error) => ({ code: 1, stdout: '', stderr: `cinder: ${err.message}\n` }));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toStartWith("cinder: cannot use the PostgreSQL database 'cinder_no_such_database' on ");
    expect(refused.stderr).toContain('database "cinder_no_such_database" does not exist');
  }, 30_000);

  test("an empty ?dbname= is the user's name, as libpq takes it (connectOptions2), not the URL's path nor PGDATABASE", async () => {
    const db = await pg!.migrated();
    const target = new URL(db.url);
    expect(target.username).toBe('postgres');
    expect((await cliOn(db.url).run(['tenant', 'create', 't1'])).code).toBe(0);
    // The path names the database that holds tenant t1; the empty dbname names the user's (postgres), which holds no schema.
    const empty = new URL(db.url);
    empty.searchParams.set('dbname', '');
    const r = await cliOn(empty.toString()).run(['client', 'list', '--tenant', 't1', '--json'])
      .catch((err: Error) => ({ code: 1, stdout: '', stderr: `cinder: ${err.message}\n` }));
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain("the PostgreSQL database 'postgres' on ");
    expect(r.stderr).toContain('holds no Cinder schema');
  }, 30_000);

  test('a host named as a command (cli, serve, migrate, help) is a host: the message names it, the command is not run instead', async () => {
    for (const host of ['cli', 'serve', 'migrate', 'help']) {
      const r = await cliOn(`postgres://postgres@${host}:5432/test?connect_timeout=2`).run(['client', 'list', '--tenant', 't1'])
        .catch((err: Error) => ({ code: 1, stdout: '', stderr: `cinder: ${err.message}\n` }));
      expect([host, r.code, r.stdout]).toEqual([host, 1, '']);
      expect(r.stderr).toStartWith(`cinder: cannot use the PostgreSQL database 'test' on ${host}:5432 (CINDER_DATABASE_URL): `);
    }
  }, 60_000);
});

describe('a PostgreSQL URL that cannot work is a configuration error (exit 2)', () => {
  const cases: [string, string][] = [
    ['postgres://cinder:s3cr%zzet@127.0.0.1:5432/cinder', 'the password holds a % that is not percent-encoding (write % as %25)'],
    ['postgres://cinder@127.0.0.1:5432/cin%zzder', 'the database name holds a % that is not percent-encoding (write % as %25)'],
    ['postgres://cinder:s3cret@127.0.0.1:99999/cinder', "not a valid URL: check its host and port ('127.0.0.1:99999')"],
  ];
  for (const [url, problem] of cases) {
    test(problem, async () => {
      for (const args of [['client', 'list', '--tenant', 't1'], ['migrate'], ['check']]) {
        const r = await cliOn(url).run(args);
        expect([r.code, r.stderr]).toEqual([2, `cinder: invalid CINDER_DATABASE_URL (--database-url): ${problem}\n`]);
      }
    });
  }

  // A generated password often holds a '/' (base64) or a '?' or '#': unencoded, the URL's host is read out of
  // the password, and a message that named the host or the database quoted a part of it.
  const unencoded: [string, string[]][] = [
    ['postgres://cinder:s3cr/et@127.0.0.1:5432/cinder', ['s3cr', 'et@']],
    ['postgres://cinder:1234/abc@127.0.0.1:5432/cinder', ['1234', 'abc']],
    ['postgres://cinder:s3cr?et@127.0.0.1:5432/cinder', ['s3cr', 'et@']],
    ['postgres://cinder:4321#xyz@127.0.0.1:5432/cinder', ['4321', 'xyz']],
    // base64: a '/' and the '=' padding
    ['postgres://cinder:xq/zw==@127.0.0.1:5432/cinder', ['xq', 'zw==']],
    ['postgres://cinder:12/cd+e=@127.0.0.1:5432/cinder', ['12', 'cd+e']],
  ];
  for (const [url, secrets] of unencoded) {
    test(`a password with an unencoded '/', '?' or '#' is refused without quoting it: ${url.split('@')[0]}@`, async () => {
      for (const args of [['client', 'list', '--tenant', 't1'], ['check']]) {
        const r = await cliOn(url).run(args);
        expect([r.code, r.stderr]).toEqual([
          2,
          "cinder: invalid CINDER_DATABASE_URL (--database-url): an '@' follows the host: percent-encode a '/', '?' or '#' of the user name or password (%2F, %3F, %23) and an '@' of the database name (%40)\n",
        ]);
        for (const secret of secrets) expect(r.stdout + r.stderr).not.toContain(secret);
      }
    });
  }

  test("a password's '?' before an '=' is refused without quoting what was read as the host", async () => {
    const r = await cliOn('postgres://cinder:xq?zw==@127.0.0.1:5432/cinder').run(['client', 'list', '--tenant', 't1']);
    expect([r.code, r.stderr]).toEqual([
      2,
      "cinder: invalid CINDER_DATABASE_URL (--database-url): not a valid URL: check its host and port, and percent-encode a '/', '?', '#' or '@' of the user name or password\n",
    ]);
  });

  test("an '@' in a query value is no user information: the URL is used", async () => {
    const r = await cliOn('postgres://cinder@127.0.0.1:99999/cinder?application_name=me@host').run(['client', 'list', '--tenant', 't1']);
    expect([r.code, r.stderr]).toEqual([2, "cinder: invalid CINDER_DATABASE_URL (--database-url): not a valid URL: check its host and port ('127.0.0.1:99999')\n"]);
  });

  test('a URL of another scheme whose password holds a "/" is refused without its password', async () => {
    const r = await cliOn('mysql://cinder:s3/cret@db.example:3306/cinder').run(['client', 'list', '--tenant', 't1']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('cinder: invalid CINDER_DATABASE_URL (--database-url): expected a postgres:// URL, sqlite:<path> or a file path (got "mysql://cinder:***@db.example:3306/cinder")\n');
  });

  test('a URL of another scheme is refused without its password', async () => {
    const r = await cliOn('mysql://cinder:s3cret@db.example:3306/cinder').run(['client', 'list', '--tenant', 't1']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('cinder: invalid CINDER_DATABASE_URL (--database-url): expected a postgres:// URL, sqlite:<path> or a file path (got "mysql://cinder:***@db.example:3306/cinder")\n');
  });
});
