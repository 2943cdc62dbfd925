import { batchKeys, createKeyCache, entryKey, keyName, memoizedKeyOf, type KeyOf, type SearchKey } from '../search-keys.ts';
import { boundIndexRows } from '../index-limits.ts';
import { StoreValueError, type IndexRows } from '../types.ts';
import type { KeysConnection } from './keys-connection.ts';

type KeyRow = SearchKey & { k: number };

/**
 * The search key dictionary on PostgreSQL. Before a transaction writes index rows, it resolves their
 * keys: those this store instance has not cached are read, and the missing ones created, on a
 * connection of their own, each statement committed at once (INSERT ... ON CONFLICT DO NOTHING, then
 * a read again, since another process may have created some meanwhile). A key is thus committed
 * before any transaction uses it, so it is cached at once; a transaction that rolls back leaves an
 * unused key, which is harmless. The connection is not one of the pool's: a transaction that waits
 * for it must never wait for a pool that other such transactions hold; and a statement it leaves
 * unanswered is bounded by a deadline (keys-connection.ts).
 */
export function createPostgresKeys(connection: KeysConnection) {
  const cache = createKeyCache();
  const columns = (keys: SearchKey[]) =>
    [keys.map((k) => k.tenant), keys.map((k) => k.type), keys.map((k) => k.param), keys.map((k) => k.system), keys.map((k) => k.code)] as const;

  function read(keys: SearchKey[]): Promise<KeyRow[]> {
    const [tenant, type, param, system, code] = columns(keys);
    return connection.run((sql) => sql<KeyRow[]>`
      SELECT s.k, s.tenant, s.type, s.param, s.system, s.code
      FROM unnest(${tenant}::text[], ${type}::text[], ${param}::text[], ${system}::text[], ${code}::text[]) AS x(tenant, type, param, system, code)
      JOIN search_keys s ON s.tenant = x.tenant AND s.type = x.type AND s.param = x.param AND s.system = x.system AND s.code = x.code`);
  }

  /** Inserts keys in one order, whoever inserts them, so that two processes inserting the same ones never deadlock. */
  function create(keys: SearchKey[]): Promise<KeyRow[]> {
    const [tenant, type, param, system, code] = columns(keys);
    return connection.run((sql) => sql<KeyRow[]>`
      INSERT INTO search_keys (tenant, type, param, system, code)
      SELECT * FROM unnest(${tenant}::text[], ${type}::text[], ${param}::text[], ${system}::text[], ${code}::text[]) AS x(tenant, type, param, system, code)
      ORDER BY 1, 2, 3, 4, 5
      ON CONFLICT DO NOTHING
      RETURNING k, tenant, type, param, system, code`);
  }

  /** Reads, and creates where missing, `missing`'s keys into `known`. */
  async function load(missing: Map<string, SearchKey>, known: Map<string, number>): Promise<void> {
    // PostgreSQL would store an unpaired surrogate as U+FFFD, and the key then never be found again.
    // Only a resource written without validation (which refuses them) can hold one.
    for (const key of missing.values()) {
      if (!key.system.isWellFormed() || !key.code.isWellFormed()) {
        throw new StoreValueError('The resource holds an unpaired surrogate (U+D800 to U+DFFF alone), which PostgreSQL cannot hold');
      }
    }
    const remember = (rows: KeyRow[]) => rows.forEach((r) => {
      const name = keyName(r);
      known.set(name, r.k);
      cache.set(name, r.k);
    });
    const unknown = () => [...missing].filter(([name]) => !known.has(name)).map(([, key]) => key);
    remember(await read([...missing.values()]));
    if (unknown().length) remember(await create(unknown()));
    // Keys another process inserted after the first read, and committed before this one's insert.
    if (unknown().length) remember(await read(unknown()));
    const left = unknown();
    if (left.length) throw new Error(`search keys neither found nor created: ${left.length}`);
  }

  return {
    /** The KeyOf of these versions' index rows in `tenant`, once every key they need is committed. */
    async resolve(tenant: string, versions: { type: string; index: IndexRows }[]): Promise<KeyOf> {
      // Every write resolves its keys first: its values longer than the indexes hold take their bounded
      // form here, in the rows it then writes (searches compare bounded forms: index-limits.ts).
      for (const v of versions) boundIndexRows(v.index);
      const { known, missing } = batchKeys(tenant, versions, cache);
      if (missing.size) await load(missing, known);
      return memoizedKeyOf((spec, type, e) => {
        const k = known.get(keyName(entryKey(spec, tenant, type, e)));
        if (k === undefined) throw new Error(`search key of ${type} ${String(e.param)} not resolved`);
        return k;
      });
    },
  };
}

export type PostgresKeys = ReturnType<typeof createPostgresKeys>;
