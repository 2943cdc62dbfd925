/**
 * The configuration as README's Configuration section states it, through the command line: an empty
 * variable is no value, so an empty CINDER_PORT or CINDER_DATABASE_URL (an env file's `CINDER_PORT=`)
 * leaves the PORT and DATABASE_URL a container platform sets; and the pool options of a PostgreSQL URL
 * (`?max=N`, `?connect_timeout=N`) are values checked at start, a bad one stopping every command with
 * exit 2 and a line naming CINDER_DATABASE_URL, before any connection is tried.
 */
import { describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';

/** A port nothing listens on (one just closed). */
async function closedPort(): Promise<number> {
  const probe = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('x') });
  const port = probe.port!;
  await probe.stop(true);
  return port;
}

describe('an empty CINDER_PORT or CINDER_DATABASE_URL leaves PORT and DATABASE_URL', () => {
  test('healthcheck (as serve) takes PORT when CINDER_PORT is empty', async () => {
    const port = await closedPort();
    const cli = createCliEnv({ CINDER_PORT: '', PORT: String(port) });
    try {
      const r = await cli.run(['healthcheck', '--timeout', '2000']);
      expect(r.code).toBe(1);
      expect(r.stderr).toStartWith(`cinder healthcheck: http://127.0.0.1:${port}/healthz: `);
    } finally {
      cli.close();
    }
  });

  test('migrate and check take DATABASE_URL when CINDER_DATABASE_URL is empty', async () => {
    const cli = createCliEnv({}, { database: false });
    try {
      const path = join(cli.dir, 'platform.db');
      Object.assign(cli.env, { CINDER_DATABASE_URL: '', DATABASE_URL: `sqlite:${path}` });
      expect((await cli.run(['migrate', '--json'])).code).toBe(0);
      const r = await cli.run(['check', '--json']);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout).database).toBe(path);
      expect(await Bun.file(join(cli.env.CINDER_DATA_DIR, 'cinder.db')).exists()).toBe(false);
    } finally {
      cli.close();
    }
  });
});

describe('a bad pool option in a PostgreSQL URL stops a command as a bad setting does', () => {
  // Port 9 (discard): were a connection tried, the command would fail otherwise, after a timeout.
  const cases: [string, string][] = [
    ['max=lots', "invalid Postgres pool size 'lots'"],
    ['max=0', "invalid Postgres pool size '0'"],
    ['max=', "invalid Postgres pool size ''"],
    ['max=1e1', "invalid Postgres pool size '1e1'"],
    ['max=1001', "invalid Postgres pool size '1001'"],
    ['connect_timeout=5s', "invalid connect_timeout '5s'"],
    ['max=4&connect_timeout=99999999999', "invalid connect_timeout '99999999999'"],
    // libpq's ports: a number from 1 to 65535, one for every host or one for all. The driver threw from its socket (a
    // stack trace on stderr), then the command waited out connect_timeout and said CONNECT_TIMEOUT undefined:undefined.
    ['port=abc', "invalid port 'abc'"],
    ['port=70000', "invalid port '70000'"],
    ['host=127.0.0.1&port=0', "invalid port '0'"],
    ['host=127.0.0.1,localhost&port=9,9,9', '3 ports for 2 hosts'],
  ];
  for (const [query, message] of cases) {
    test(`?${query}: exit 2, naming CINDER_DATABASE_URL`, async () => {
      const cli = createCliEnv({ CINDER_DATABASE_URL: `postgres://postgres@127.0.0.1:9/nowhere?${query}` });
      try {
        for (const argv of [['check', '--json'], ['migrate']]) {
          const r = await cli.run(argv);
          expect(r).toEqual({ code: 2, stdout: '', stderr: expect.stringContaining(`cinder: invalid CINDER_DATABASE_URL (--database-url): ${message} in the database URL`) });
        }
      } finally {
        cli.close();
      }
    });
  }

  test("a query parameter libpq would refuse (not name=value, no name, a % that is not percent-encoding) is refused at start, naming it and never quoting a value", async () => {
    const cases: [string, string][] = [
      ['%zz=1', "the query parameter '%zz' of the database URL holds a % that is not percent-encoding"],
      ['password=se%zzcret', "the query parameter 'password' of the database URL holds a % that is not percent-encoding"],
      ['application_name=%E0%A4%A', "the query parameter 'application_name' of the database URL holds a % that is not percent-encoding"],
      ['=x', 'a query parameter of the database URL has no name'],
      ['application_name', "the query parameter 'application_name' of the database URL has no value: write application_name=<value>"],
    ];
    for (const [query, message] of cases) {
      const cli = createCliEnv({ CINDER_DATABASE_URL: `postgres://postgres@127.0.0.1:9/nowhere?${query}` });
      try {
        const r = await cli.run(['check', '--json']);
        expect([query, r.code]).toEqual([query, 2]);
        expect(r.stderr).toContain(`cinder: invalid CINDER_DATABASE_URL (--database-url): ${message}`);
        expect(r.stderr).not.toContain('se%zzcret');
      } finally {
        cli.close();
      }
    }
  });

  test("a port of the URL's hosts that is not one (0, or not a number past the first host) is refused at start", async () => {
    for (const [hosts, port] of [['127.0.0.1:0', '0'], ['127.0.0.1:9,localhost:abc', 'abc'], ['127.0.0.1:9,localhost:0', '0']]) {
      const cli = createCliEnv({ CINDER_DATABASE_URL: `postgres://postgres@${hosts}/nowhere` });
      try {
        const r = await cli.run(['check', '--json']);
        expect(r.code).toBe(2);
        expect(r.stderr).toContain(`cinder: invalid CINDER_DATABASE_URL (--database-url): invalid port '${port}' in the database URL`);
      } finally {
        cli.close();
      }
    }
  });

  test('whole numbers in range are taken (no connection is made until a command needs one)', async () => {
    const port = await closedPort();
    const cli = createCliEnv({ PORT: String(port), DATABASE_URL: 'postgres://postgres@127.0.0.1:9/nowhere?max=1000&connect_timeout=2.5' });
    try {
      const r = await cli.run(['healthcheck', '--timeout', '2000']);
      expect(r.code).toBe(1);
      expect(r.stderr).toStartWith(`cinder healthcheck: http://127.0.0.1:${port}/healthz: `);
    } finally {
      cli.close();
    }
  });
});

describe("a bad PORT or DATABASE_URL (a platform's, read when CINDER_PORT and CINDER_DATABASE_URL are not set) is named as itself", () => {
  test('PORT: exit 2 with a line naming PORT, not the CINDER_PORT no one set', async () => {
    for (const extra of [{}, { CINDER_PORT: '' }] as Record<string, string>[]) {
      const cli = createCliEnv({ ...extra, PORT: 'http' });
      try {
        for (const argv of [['check', '--json'], ['healthcheck']]) {
          const r = await cli.run(argv);
          expect(r).toEqual({
            code: 2, stdout: '',
            stderr: 'cinder: invalid PORT (read as CINDER_PORT and --port are not set): expected a whole number in decimal digits (got "http")\n',
          });
        }
      } finally {
        cli.close();
      }
    }
  });

  test('DATABASE_URL: a bad URL or pool option names DATABASE_URL', async () => {
    const cases: [string, string][] = [
      ['mysql://db.example/cinder', 'expected a postgres:// URL, sqlite:<path> or a file path (got "mysql://db.example/cinder")'],
      ['postgres://postgres@127.0.0.1:9/nowhere?max=0', "invalid Postgres pool size '0' in the database URL"],
    ];
    for (const [url, message] of cases) {
      const cli = createCliEnv({ DATABASE_URL: url });
      try {
        const r = await cli.run(['migrate']);
        expect(r).toEqual({ code: 2, stdout: '', stderr: expect.stringContaining(`cinder: invalid DATABASE_URL (read as CINDER_DATABASE_URL and --database-url are not set): ${message}`) });
      } finally {
        cli.close();
      }
    }
  });

  test('a CINDER_ variable or flag that is set is named as before, whatever PORT and DATABASE_URL hold', async () => {
    const cli = createCliEnv({ CINDER_PORT: 'http', PORT: '8080', CINDER_DATABASE_URL: 'postgres://postgres@127.0.0.1:9/nowhere?max=0', DATABASE_URL: 'sqlite:/tmp/x.db' });
    try {
      const r = await cli.run(['check']);
      expect(r.stderr).toStartWith('cinder: invalid CINDER_PORT (--port): ');
      delete (cli.env as Record<string, string>).CINDER_PORT;
      expect((await cli.run(['check'])).stderr).toStartWith("cinder: invalid CINDER_DATABASE_URL (--database-url): invalid Postgres pool size '0'");
    } finally {
      cli.close();
    }
  });
});
