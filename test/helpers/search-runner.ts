/** Helpers of the tests of the statements a planned search chooses (search-sql.ts). */
import { Database } from 'bun:sqlite';
import postgres from 'postgres';
import type { SearchRunner, SqlValue } from '../../src/store/search-sql.ts';
import { createTestApp, type TestApp } from './app.ts';
import { fhirClient, type FhirClient } from './fhir.ts';
import type { StoreTarget } from './stores.ts';

/** A SearchRunner on a connection of the test's own to a store's database, recording the statements it runs. */
export async function statementRunner(kind: string, url: string, statements: string[] = []): Promise<{ runner: SearchRunner<unknown>; close: () => Promise<void> }> {
  if (kind === 'sqlite') {
    const db = new Database(url, { readonly: true });
    return {
      runner: {
        count: (sql, values) => (statements.push(sql), db.query<{ n: number }, SqlValue[]>(sql).get(...values)!.n),
        rows: (sql, values) => (statements.push(sql), db.query(sql).all(...values)),
      },
      close: async () => db.close(),
    };
  }
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  return {
    runner: {
      count: async (text, values) => (statements.push(text), Number((await sql.unsafe(text, values))[0]!.n)),
      rows: async (text, values) => (statements.push(text), sql.unsafe(text, values)),
    },
    close: () => sql.end(),
  };
}

/** A test app on a fresh, migrated database of `target`, a FHIR client of tenant t1, and the database's URL. */
export async function appOnFresh(target: StoreTarget): Promise<{ t: TestApp; api: FhirClient; url: string }> {
  const db = await target.migrated();
  const store = db.open();
  await store.migrate();
  const t = await createTestApp({ store });
  return { t, api: fhirClient(t, await t.token()), url: db.url };
}
