/**
 * What `cinder` prints at start about its database, as a process (from source), where its own logger's lines
 * (process.stderr) are seen too: `serve` on a database a newer release migrated (a rolling upgrade) starts and
 * logs one warning naming the migrations; a command whose PostgreSQL server cannot be reached, or has no such
 * database, exits 1 with one line naming the database and CINDER_DATABASE_URL, never a logged stack trace.
 */
import { describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { INDEX_MODEL } from '../../src/fhir/reindex.ts';
import { postgresMigrations } from '../../src/store/postgres/migrations.ts';
import { sqliteMigrations } from '../../src/store/sqlite/migrations.ts';
import { freePort } from '../helpers/export-e2e.ts';
import { cinderCommands, cleanupAfterFile, readBanner, serveEnv, spawnServe } from '../helpers/processes.ts';
import { PG_ADMIN_URL, rawStatements, storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const { tempDir, killAfter } = cleanupAfterFile(targets);
const [, fromSource] = cinderCommands()[0]!;

/** Runs `cinder <args>` from source with `env` (and PATH); its exit code and output. */
async function cinder(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const dir = tempDir('cinder-start-');
  const proc = Bun.spawn([...fromSource, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: dir, CINDER_DATA_DIR: join(dir, 'data'), ...env }, cwd: dir, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe',
  });
  killAfter(proc);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

for (const target of targets) {
  const latest = Math.max(...(target.kind === 'sqlite' ? sqliteMigrations : postgresMigrations).map((m) => m.version));
  describe(`cinder serve on a ${target.kind} database a newer release migrated and reindexed`, () => {
    test('starts, answers, and logs one warning naming the migration it does not know, one for the index model, whatever its processes', async () => {
      const db = await target.migrated();
      await rawStatements(target.kind, db.url, [
        [`INSERT INTO schema_migrations (version, name, applied_at) VALUES (${latest + 1}, 'from_the_future', 0)`, []],
        [`UPDATE index_state SET value = ${INDEX_MODEL + 1} WHERE name = 'model'`, []],
      ]);
      const dir = tempDir('cinder-newer-serve-');
      const port = freePort();
      // Two processes: the second (a sibling, which does not migrate) leaves the warnings to the first.
      const env = serveEnv(dir, port, { CINDER_DATABASE_URL: db.url, CINDER_LOG_LEVEL: 'info', CINDER_PROCESSES: '2' });
      const server = spawnServe(fromSource, dir, env, 'pipe');
      killAfter(server);
      let log = '';
      const decoder = new TextDecoder();
      const reading = (async () => {
        for await (const chunk of server.stderr as ReadableStream<Uint8Array>) log += decoder.decode(chunk, { stream: true });
      })();
      const listening = () => log.split('\n').filter((line) => line.includes('"msg":"listening"')).length;
      let status = 0;
      for (let i = 0; i < 300 && (status !== 200 || listening() < 2) && server.exitCode === null; i++) {
        status = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status, () => 0);
        if (status !== 200 || listening() < 2) await Bun.sleep(100);
      }
      expect({ status, listening: listening() }).toEqual({ status: 200, listening: 2 });
      server.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      await reading;
      const entries = log.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
      const warnings = entries.filter((e) => String(e.msg).includes('does not know'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ level: 'warn', unknownMigrations: [`${latest + 1}_from_the_future`], schemaVersion: latest + 1, releaseVersion: latest });
      expect(String(warnings[0]!.msg)).toContain('a newer Cinder migrated it');
      // The search index a newer release rebuilt: served as it is, with what to run once the upgrade is over.
      const index = entries.filter((e) => String(e.msg).includes('search index follows model'));
      expect(index).toHaveLength(1);
      expect(index[0]).toMatchObject({ level: 'warn', indexModel: INDEX_MODEL + 1, releaseIndexModel: INDEX_MODEL });
      expect(String(index[0]!.msg)).toContain('run `cinder reindex` of that release');
    }, 60_000);
  });
}

describe.skipIf(!targets.some((t) => t.kind === 'postgres'))('a command whose PostgreSQL database cannot be used', () => {
  const admin = new URL(PG_ADMIN_URL);

  test('a server that refuses connections: exit 1, one line naming the database and CINDER_DATABASE_URL, no logged stack', async () => {
    const port = freePort(); // nothing listens there now
    const url = `postgres://${admin.username}@127.0.0.1:${port}/cinder_nowhere`;
    for (const args of [['client', 'list', '--tenant', 't1'], ['migrate'], ['serve']]) {
      const r = await cinder(args, { CINDER_DATABASE_URL: url, CINDER_LOG_LEVEL: 'info', CINDER_PORT: String(freePort()) });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^cinder: cannot use the PostgreSQL database 'cinder_nowhere' on 127\\.0\\.0\\.1:${port} \\(CINDER_DATABASE_URL\\): [^\\n]*ECONNREFUSED[^\\n]*\\n$`));
    }
  }, 60_000);

  test('serve with a URL listing several hosts (the first refusing) starts, bootstraps and names them in its banner', async () => {
    const db = await targets.find((t) => t.kind === 'postgres')!.migrated();
    const host = new URL(db.url).host;
    const listed = db.url.replace(`@${host}`, `@127.0.0.1:${freePort()},${host}`);
    const database = new URL(db.url).pathname.slice(1);
    const dir = tempDir('cinder-hosts-serve-');
    const port = freePort();
    const server = spawnServe(fromSource, dir, serveEnv(dir, port, { CINDER_DATABASE_URL: listed }), 'pipe');
    killAfter(server);
    const banner = await readBanner(server.stdout);
    expect(banner.text).toContain(`Cinder initialised the PostgreSQL database ${database} at ${listed.split('@')[1]!.split('/')[0]}.`);
    expect(banner.clientId).toBeDefined();
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    server.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  }, 60_000);

  test('a server that never answers: exit 1 after connect_timeout, one line saying what that means', async () => {
    const silent = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
    try {
      const url = `postgres://${admin.username}@127.0.0.1:${silent.port}/cinder_silent?connect_timeout=1`;
      const r = await cinder(['client', 'list', '--tenant', 't1'], { CINDER_DATABASE_URL: url });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `cinder: cannot use the PostgreSQL database 'cinder_silent' on 127.0.0.1:${silent.port} (CINDER_DATABASE_URL): no session started ` +
        'within connect_timeout (1 s): the server did not answer or closed the connection (a wrong host or port, a firewall, a pooler ' +
        `refusing sessions, a server shutting down): write CONNECT_TIMEOUT 127.0.0.1:${silent.port}\n`,
      );
    } finally {
      silent.stop(true);
    }
  }, 30_000);

  test('a database that does not exist on the server: exit 1, one line saying so', async () => {
    const url = `postgres://${admin.username}@${admin.host}/cinder_no_such_database`;
    // serve too: a session refused at start is a setting to fix, not an outage to answer 503 for until it ends.
    for (const args of [['client', 'list', '--tenant', 't1'], ['serve']]) {
      const r = await cinder(args, { CINDER_DATABASE_URL: url, CINDER_PORT: String(freePort()) });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`cinder: cannot use the PostgreSQL database 'cinder_no_such_database' on ${admin.host} (CINDER_DATABASE_URL): database "cinder_no_such_database" does not exist\n`);
    }
  }, 30_000);

  test('a role the server does not know: serve exits 1 at start, one line saying so', async () => {
    const url = `postgres://cinder_no_such_role@${admin.host}/postgres`;
    const r = await cinder(['serve'], { CINDER_DATABASE_URL: url, CINDER_PORT: String(freePort()) });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`cinder: cannot use the PostgreSQL database 'postgres' on ${admin.host} (CINDER_DATABASE_URL): role "cinder_no_such_role" does not exist\n`);
  }, 30_000);
});
