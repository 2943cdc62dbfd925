import postgres from 'postgres';
import { StoreConflictError } from '../types.ts';
import type { PgMigration } from './migrations.ts';

export interface PostgresStoreOptions {
  /** Connection pool size; default 10 (or `?max=N` in the URL). */
  max?: number;
}

/** int8 (BIGINT, COUNT) values are epoch milliseconds or counts: well inside Number's exact range. */
const int8AsNumber = { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) };

/** Opens a postgres.js pool with prepared statements and BIGINT parsed as numbers. */
export function connect(url: string, options: PostgresStoreOptions = {}): Pg {
  const max = options.max ?? poolSizeFromUrl(url) ?? 10;
  if (!Number.isInteger(max) || max < 1 || max > 1000) throw new RangeError(`invalid Postgres pool size ${max}`);
  return postgres(url, {
    max,
    prepare: true,
    types: { int8: int8AsNumber },
    onnotice: () => undefined,
    connection: { application_name: 'cinder' },
  });
}

/** TypeScript types of the custom parsers above. */
type PgTypes = { int8: number };
export type Pg = postgres.Sql<PgTypes>;
/** The transaction-scoped handle `sql.begin` passes to its callback. */
export type PgTx = postgres.TransactionSql<PgTypes>;

function poolSizeFromUrl(url: string): number | undefined {
  const m = /[?&]max=([^&]*)/.exec(url);
  return m ? Number(m[1]) : undefined;
}

/** Process-independent key for the migration lock (any constant; "cinder" in ASCII). */
const MIGRATION_LOCK = 0x63696e646572;

/**
 * Applies pending migrations in one transaction under `pg_advisory_xact_lock`, so processes starting
 * together serialise: the first applies, the others then find nothing to do.
 */
export async function runMigrations(sql: Pg, migrations: PgMigration[], now: number): Promise<string[]> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK}::bigint)`;
    await tx`CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`;
    const rows = await tx<{ version: number }[]>`SELECT version FROM schema_migrations`;
    const done = new Set(rows.map((r) => r.version));
    const applied: string[] = [];
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(m.version)) continue;
      await tx.unsafe(m.sql); // static DDL from migrations.ts, no values
      await tx`INSERT INTO schema_migrations (version, name, applied_at) VALUES (${m.version}, ${m.name}, ${now})`;
      applied.push(`${m.version}_${m.name}`);
    }
    return applied;
  });
}

/** SQLSTATEs a caller can resolve by retrying or reporting a conflict: unique_violation, deadlock, serialization failure. */
const CONFLICT_CODES = new Set(['23505', '40P01', '40001']);

/** Maps a Postgres conflict error to StoreConflictError (keeping it as `cause`); other errors pass through. */
export function asConflict(err: unknown, what: string): unknown {
  if (err instanceof postgres.PostgresError && CONFLICT_CODES.has(err.code)) {
    return new StoreConflictError(`${what}: ${err.message}`, { cause: err });
  }
  return err;
}
