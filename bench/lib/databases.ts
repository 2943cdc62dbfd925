/**
 * Databases for the benchmarks that run a checkout in process, made by that checkout's own test helpers (its
 * `test/helpers/stores.ts` storeTargets, as the test suite makes them): a migrated file in the temporary directory
 * on SQLite, or a migrated database of its own on the test PostgreSQL (CINDER_TEST_POSTGRES_URL, default
 * postgres://postgres@127.0.0.1:5432/test; its stores' pools of 4 connections, as the tests'), removed by drop().
 */

export type StoreKind = 'sqlite' | 'postgres';

/**
 * What the benchmarks that search a checkout's store directly use of it: a structural type, as the checkouts
 * compared may differ elsewhere.
 */
export interface BenchStore {
  migrate(): Promise<void>;
  close(): Promise<void>;
  resources: {
    write(tenant: string, fn: (w: { insertNew(v: unknown[]): Promise<unknown> }) => Promise<unknown>): Promise<unknown>;
    search(tenant: string, q: Record<string, unknown>): Promise<{ id: string }[]>;
    indexing: { analyze(opts?: { onlyStale?: boolean }): Promise<unknown> };
  };
}

export interface BenchDatabase<S> {
  /** The file (SQLite) or URL (PostgreSQL), for a store of another checkout on the same database. */
  url: string;
  /** A store of the checkout on it, with connections of its own; drop() closes it. */
  open(): S;
  /** Closes every store open() gave and removes the database. */
  drop(): Promise<void>;
}

interface Target<S> {
  kind: string;
  migrated(): Promise<{ url: string; open(): S }>;
  cleanup(): Promise<void>;
}

/** A migrated database of `kind` for the checkout at `dir` (an absolute path). */
export async function benchDatabase<S = any>(dir: string, kind: StoreKind): Promise<BenchDatabase<S>> {
  const { storeTargets } = (await import(`${dir}/test/helpers/stores.ts`)) as { storeTargets(o: { main: boolean }): Promise<Target<S>[]> };
  const targets = await storeTargets({ main: false });
  const target = targets.find((t) => t.kind === kind);
  for (const other of targets) if (other !== target) await other.cleanup();
  if (!target) throw new Error(`${kind}: the test PostgreSQL (CINDER_TEST_POSTGRES_URL) is unreachable`);
  const db = await target.migrated();
  return { url: db.url, open: () => db.open(), drop: () => target.cleanup() };
}

/** The kinds a `--store sqlite|postgres|both` option names. */
export function storeKinds(option: string): StoreKind[] {
  return option === 'both' ? ['sqlite', 'postgres'] : [option as StoreKind];
}

/** A PostgreSQL store of the checkout at `root` on a new serverDatabase(), with that database (for its drop()). */
export async function serverStore<S = any>(root: string): Promise<{ store: S; database: Awaited<ReturnType<typeof serverDatabase>> }> {
  const database = await serverDatabase();
  const { createPostgresStore } = await import(`${root}/src/store/postgres/index.ts`);
  return { store: createPostgresStore(database.url) as S, database };
}

/** The server the subscription benchmarks make their databases on (its `test` database: any will do). */
const BENCH_POSTGRES_URL = process.env.CINDER_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * A new, empty database on the PostgreSQL server of CINDER_BENCH_POSTGRES_URL (default
 * postgres://postgres@127.0.0.1:5432/test), for a store the caller opens with its own pool on `url`; drop() removes it,
 * its sessions ended.
 */
export async function serverDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const { default: postgres } = await import('postgres');
  const admin = postgres(BENCH_POSTGRES_URL, { max: 1, onnotice: () => undefined });
  const name = 'cinder_bench_' + crypto.randomUUID().replaceAll('-', '').slice(0, 12);
  await admin`CREATE DATABASE ${admin(name)}`;
  return {
    url: Object.assign(new URL(BENCH_POSTGRES_URL), { pathname: `/${name}` }).toString(),
    async drop() {
      await admin`DROP DATABASE IF EXISTS ${admin(name)} WITH (FORCE)`;
      await admin.end();
    },
  };
}
