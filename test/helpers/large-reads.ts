/**
 * A store that counts the stored texts of `large` characters or more it hands out (ResourceRepo's read, measured,
 * vread and history; a write transaction's current, measured, vread and search): the work of reading a large resource,
 * machine-independent, where its time depends on the machine and what else runs on it.
 */
import type { ResourceRepo, ResourceWriter, Store } from '../../src/store/types.ts';

export interface LargeReads {
  store: Store;
  /** The large texts handed out while `fn` runs (what it awaits included). */
  during(fn: () => Promise<unknown>): Promise<number>;
}

export function countingLargeReads(store: Store, large: number): LargeReads {
  const reads = { n: 0 };
  const note = (content: string | undefined) => {
    if (content !== undefined && content.length >= large) reads.n++;
  };
  const one = <A extends unknown[], V extends { content?: string } | null>(fn: (...a: A) => Promise<V>) => async (...a: A) => {
    const v = await fn(...a);
    note(v?.content);
    return v;
  };
  const many = <A extends unknown[], V extends { content: string }>(fn: (...a: A) => Promise<V[]>) => async (...a: A) => {
    const found = await fn(...a);
    for (const v of found) note(v.content);
    return found;
  };
  const repo = store.resources;
  const resources: ResourceRepo = Object.create(repo);
  resources.read = one(repo.read.bind(repo));
  resources.measured = one(repo.measured.bind(repo));
  resources.vread = one(repo.vread.bind(repo));
  resources.history = many(repo.history.bind(repo));
  resources.write = (tenant, fn) => repo.write(tenant, (w) => {
    const counting: ResourceWriter = { ...w, current: one(w.current), measured: one(w.measured), vread: one(w.vread), search: many(w.search) };
    return fn(counting);
  });
  return {
    store: new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) }),
    async during(fn) {
      reads.n = 0;
      await fn();
      return reads.n;
    },
  };
}

/** How many texts of `large` characters or more JSON.parse was given while `fn` ran (the parse of a large stored text: its work, counted). */
export async function largeParses(large: number, fn: () => Promise<unknown>): Promise<number> {
  const parse = JSON.parse;
  let n = 0;
  JSON.parse = ((text: string, reviver?: (this: unknown, key: string, value: unknown) => unknown) => {
    if (typeof text === 'string' && text.length >= large) n++;
    return parse(text, reviver);
  }) as typeof JSON.parse;
  try {
    await fn();
  } finally {
    JSON.parse = parse;
  }
  return n;
}
