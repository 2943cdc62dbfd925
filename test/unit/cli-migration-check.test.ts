/**
 * What a `cinder` command does at start with the database's migrations (src/cli/context.ts), on both stores: one
 * read of the applied migrations. A database with every migration of this release applied is neither migrated
 * nor locked, so an operator's command is not held behind a migration another process (a newer release) is
 * applying, nor, on SQLite, behind another process's write; a database behind this release is migrated first,
 * under the migration lock; one a newer release migrated (a rolling upgrade) is used as it is.
 */
import { Database } from 'bun:sqlite';
import { afterAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { MIGRATION_LOCK } from '../../src/store/postgres/db.ts';
import { postgresMigrations } from '../../src/store/postgres/migrations.ts';
import { sqliteMigrations } from '../../src/store/sqlite/migrations.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { migrateUpTo, rawStatements, storeTargets, type StoreTarget } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const clis: ReturnType<typeof createCliEnv>[] = [];
afterAll(async () => {
  for (const c of clis) c.close();
  for (const t of targets) await t.cleanup();
}, 60_000);

/** A `cinder` environment on the database at `url` (with a base URL: no note of its default on stderr). */
function cliOn(url: string) {
  const cli = createCliEnv({ CINDER_DATABASE_URL: url, CINDER_BASE_URL: 'http://cinder.test' });
  clis.push(cli);
  return cli;
}

/** The migrations the database has applied, as `<version>_<name>`, oldest first. */
async function applied(kind: StoreTarget['kind'], url: string): Promise<string[]> {
  const [rows] = await rawStatements(kind, url, [['SELECT version, name FROM schema_migrations ORDER BY version', []]]);
  return rows!.map((r) => `${r.version}_${r.name}`);
}

/**
 * Holds what a migration takes, as another process would: on PostgreSQL the migration lock (a session's
 * advisory lock), on SQLite the database's write lock (an open IMMEDIATE transaction). `release` lets it go.
 */
async function holdLock(kind: StoreTarget['kind'], url: string): Promise<{ release: () => Promise<void> }> {
  if (kind === 'sqlite') {
    const db = new Database(url);
    db.exec('BEGIN IMMEDIATE');
    return { release: async () => void (db.exec('ROLLBACK'), db.close()) };
  }
  const sql = postgres(url, { max: 1, onnotice: () => undefined });
  await sql`SELECT pg_advisory_lock(${MIGRATION_LOCK}::bigint)`;
  return {
    release: async () => {
      await sql`SELECT pg_advisory_unlock(${MIGRATION_LOCK}::bigint)`;
      await sql.end();
    },
  };
}

/** `promise`'s value, or 'still waiting' when it has none after `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'still waiting'> {
  return Promise.race([promise, Bun.sleep(ms).then(() => 'still waiting' as const)]);
}

for (const target of targets) {
  const known = (target.kind === 'sqlite' ? sqliteMigrations : postgresMigrations).map((m) => `${m.version}_${m.name}`).sort((a, b) => parseInt(a) - parseInt(b));
  const latest = parseInt(known.at(-1)!);

  describe(`a command's start on ${target.kind}`, () => {
    test('on an up-to-date database it takes no lock: it runs while another process holds the migration (or write) lock', async () => {
      const db = await target.migrated();
      const cli = cliOn(db.url);
      expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
      const lock = await holdLock(target.kind, db.url);
      try {
        // A migration would wait for the lock (PostgreSQL) or for the writer's busy timeout (SQLite, 10 s).
        const listed = await within(cli.run(['client', 'list', '--tenant', 't1', '--json']), 8_000);
        expect(listed).toEqual({ code: 0, stdout: '[]\n', stderr: '' });
      } finally {
        await lock.release();
      }
      expect(await applied(target.kind, db.url)).toEqual(known);
    }, 30_000);

    test('a database one migration behind is migrated first, and the command runs', async () => {
      const db = await target.fresh();
      await migrateUpTo(target.kind, db.url, latest - 1);
      const cli = cliOn(db.url);
      expect(await applied(target.kind, db.url)).toEqual(known.slice(0, -1));
      const made = await cli.run(['tenant', 'create', 't1']);
      expect([made.code, made.stderr]).toEqual([0, '']);
      expect(await applied(target.kind, db.url)).toEqual(known);
      expect((await cli.run(['client', 'list', '--tenant', 't1', '--json'])).stdout).toBe('[]\n');
    }, 30_000);

    test('a database a newer release migrated (a migration this one does not know) is used as it is, with one warning on stderr', async () => {
      const db = await target.migrated();
      const cli = cliOn(db.url);
      expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
      await rawStatements(target.kind, db.url, [[`INSERT INTO schema_migrations (version, name, applied_at) VALUES (${latest + 1}, 'from_the_future', 0)`, []]]);
      const warning =
        `cinder: warning: the database has a migration this release does not know (${latest + 1}_from_the_future): a newer Cinder ` +
        'migrated it. This process runs on it as it is, as during a rolling upgrade; once that is over, run the newer release ' +
        'everywhere (cinder check reports this until then)\n';
      const created = await cli.run(['client', 'create', '--tenant', 't1', '--scope', 'system/*.read', '--json']);
      expect([created.code, created.stderr]).toEqual([0, warning]);
      const list = await cli.run(['client', 'list', '--tenant', 't1', '--json']);
      expect(list.stderr).toBe(warning);
      const listed = JSON.parse(list.stdout) as { client_id: string }[];
      expect(listed.map((c) => c.client_id)).toEqual([(JSON.parse(created.stdout) as { client_id: string }).client_id]);
      // `cinder migrate` of this release applies nothing and says the same; the newer release's row stays.
      const migrated = await cli.run(['migrate', '--json']);
      expect([migrated.code, migrated.stderr, JSON.parse(migrated.stdout).applied]).toEqual([0, warning, []]);
      expect(await applied(target.kind, db.url)).toEqual([...known, `${latest + 1}_from_the_future`]);
    }, 30_000);
  });
}

describe('a command on a PostgreSQL database behind this release', () => {
  test('waits for the migration lock another process holds, then applies what is still pending', async () => {
    const target = targets.find((t) => t.kind === 'postgres');
    if (!target) return;
    const latest = Math.max(...postgresMigrations.map((m) => m.version));
    const db = await target.fresh();
    await migrateUpTo('postgres', db.url, latest - 1);
    const cli = cliOn(db.url);
    const lock = await holdLock('postgres', db.url);
    let run: Promise<Awaited<ReturnType<typeof cli.run>>> | undefined;
    try {
      run = cli.run(['tenant', 'create', 't1']);
      expect(await within(run, 500)).toBe('still waiting');
    } finally {
      await lock.release();
    }
    const made = await run;
    expect([made.code, made.stderr]).toEqual([0, '']);
    expect(Math.max(...(await applied('postgres', db.url)).map((m) => parseInt(m)))).toBe(latest);
  }, 30_000);
});
