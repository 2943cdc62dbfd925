import type { Database } from 'bun:sqlite';
import { createKeyCache, entryKey, keyName, memoizedKeyOf, type KeyOf, type SearchKey } from '../search-keys.ts';

/** The statement reading a key's k by its five parts, on `db` (db.query caches it). */
const keyQuery = (db: Database) =>
  db.query<{ k: number }, [string, string, string, string, string]>('SELECT k FROM search_keys WHERE tenant = ? AND type = ? AND param = ? AND system = ? AND code = ?');

/**
 * The search key dictionary on SQLite. Keys are created inside the write transaction that first
 * needs them (it holds the database's write lock, so no other process creates one meanwhile), and
 * become cached only once that transaction has committed: a key read or created inside a group
 * commit stays with its savepoint until RELEASE, then with the group until COMMIT, and is forgotten
 * if either is rolled back.
 */
export function createSqliteKeys(db: Database) {
  const committed = createKeyCache();
  // Prepared on first use: a database part-way through its migrations has no search_keys yet.
  const find = () => keyQuery(db);
  const add = () => db.query('INSERT INTO search_keys (tenant, type, param, system, code) VALUES (?, ?, ?, ?, ?)');
  const load = (key: SearchKey): number => {
    const parts = [key.tenant, key.type, key.param, key.system, key.code] as const;
    const row = find().get(...parts);
    return row ? row.k : Number(add().run(...parts).lastInsertRowid);
  };

  /** One savepoint's keys, looked up in the group's (and the cache) first. */
  function scope(group: Map<string, number>) {
    const own = new Map<string, number>();
    return {
      keyOf: (tenant: string): KeyOf => memoizedKeyOf((spec, type, e) => {
        const key = entryKey(spec, tenant, type, e);
        const name = keyName(key);
        let k = committed.get(name) ?? group.get(name) ?? own.get(name);
        if (k === undefined) own.set(name, (k = load(key)));
        return k;
      }),
      /** The savepoint was released: its keys go with the group's transaction. */
      release: () => own.forEach((k, name) => group.set(name, k)),
    };
  }

  return {
    /**
     * A committed key's k, from the cache or read on `reader` (another connection than the writer's,
     * so it never sees a key of a transaction still open); undefined when the key does not exist.
     * A key found is cached: once committed, it never changes.
     */
    known(reader: Database): (key: SearchKey) => number | undefined {
      const read = () => keyQuery(reader);
      return (key) => {
        const name = keyName(key);
        let k = committed.get(name);
        if (k === undefined) {
          k = read().get(key.tenant, key.type, key.param, key.system, key.code)?.k;
          if (k !== undefined) committed.set(name, k);
        }
        return k;
      };
    },
    /**
     * A key's k as the writer connection `writer` sees it in its open transaction (ResourceWriter.search): a
     * committed one from the cache, any other read there and not cached (a key created in the transaction is
     * the group's until its COMMIT); undefined when the key does not exist.
     */
    inTransaction(writer: Database): (key: SearchKey) => number | undefined {
      const read = () => keyQuery(writer);
      return (key) => committed.get(keyName(key)) ?? read().get(key.tenant, key.type, key.param, key.system, key.code)?.k;
    },
    /** The keys of one group transaction: a scope per savepoint; commit() once COMMIT has succeeded. */
    transaction() {
      const group = new Map<string, number>();
      return {
        savepoint: () => scope(group),
        commit: () => group.forEach((k, name) => committed.set(name, k)),
      };
    },
  };
}

export type SqliteKeys = ReturnType<typeof createSqliteKeys>;

