/**
 * Every repository method leaves the store through its outage guard (src/store/unavailable.ts). With
 * PostgreSQL's circuit open, a guarded method fails at once with StoreUnavailableError; one the adapter
 * forgot to wrap would go to the driver instead and fail with the driver's own error.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { createPostgresStore } from '../../src/store/postgres/index.ts';
import { StoreUnavailableError, type Store } from '../../src/store/types.ts';

/**
 * The store's own lifecycle, not a repository: it runs without the guard on purpose; and its write times
 * (the writes this process has in flight, src/store/write-times.ts), held in memory, never in the database.
 */
const LIFECYCLE = new Set(['kind', 'migrate', 'stats', 'close', 'writeTimes']);
/** Every function reachable from `repo` (repositories nest, as `exports.jobs` does), by its path. */
function methods(repo: object, path: string): { path: string; call: () => unknown }[] {
  const out: { path: string; call: () => unknown }[] = [];
  for (const [key, value] of Object.entries(repo)) {
    const at = path ? `${path}.${key}` : key;
    if (typeof value === 'function') out.push({ path: at, call: () => Reflect.apply(value, repo, []) });
    else if (typeof value === 'object' && value !== null) out.push(...methods(value, at));
  }
  return out;
}

/** What calling `call` threw or rejected with, or null when it succeeded. */
async function failure(call: () => unknown): Promise<unknown> {
  try {
    await call();
    return null;
  } catch (err) {
    return err;
  }
}

let store: Store;
beforeAll(async () => {
  // Nothing listens on port 1: the first call opens the circuit, and no probe closes it during the test.
  store = createPostgresStore('postgres://postgres@127.0.0.1:1/cinder', { probeIntervalMs: 600_000 });
  expect(await failure(() => store.ping())).toBeInstanceOf(StoreUnavailableError);
});
afterAll(() => store.close());

test('with the database unreachable, every repository method fails with StoreUnavailableError', async () => {
  const repos = Object.entries(store).filter(([key]) => !LIFECYCLE.has(key));
  const all = repos.flatMap(([key, value]) => (typeof value === 'object' && value !== null ? methods(value, key) : []));
  expect(all.map((m) => m.path)).toEqual(expect.arrayContaining(['exports.cleanup.purgedBefore', 'resources.indexing.analyze']));
  expect(all.length).toBeGreaterThan(40);
  const unguarded: string[] = [];
  for (const m of all) if (!((await failure(m.call)) instanceof StoreUnavailableError)) unguarded.push(m.path);
  expect(unguarded).toEqual([]);
});
