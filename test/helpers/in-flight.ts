/**
 * Requests of a test made a few at a time: a differential test's hundreds of searches wait mostly on the
 * database server (PostgreSQL's backends work on other cores), so several in flight take less of the run's
 * time than one after another. The answers and what is asserted of them are unchanged.
 */
import type { FhirClient, Json } from './fhir.ts';

/** A limit of `most` calls at once: `run(work)` starts `work` when fewer are running, in the order asked. */
export function limiter(most: number): <R>(work: () => Promise<R>) => Promise<R> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (work) => {
    if (running >= most) await new Promise<void>((go) => waiting.push(go));
    else running++;
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next) next(); // its slot passed on: `running` unchanged
      else running--;
    }
  };
}

/** `run` on each of `items`, at most `most` at once; the results in the items' order. */
export function inFlight<T, R>(items: readonly T[], most: number, run: (item: T) => Promise<R>): Promise<R[]> {
  const limit = limiter(most);
  return Promise.all(items.map((item) => limit(() => run(item))));
}

/**
 * The search Bundles of `api`, at most `most` asked at once, each query asked once: a repeat (a differential
 * test's cases built from values in its data repeat some) gets the first answer. For data that does not
 * change while these are asked.
 */
export function searchOnce(api: FhirClient, most = 4): (query: string) => Promise<Json> {
  const limit = limiter(most);
  const asked = new Map<string, Promise<Json>>();
  return (query) => {
    let answer = asked.get(query);
    if (answer === undefined) asked.set(query, (answer = limit(() => api.search(query) as Promise<Json>)));
    return answer;
  };
}
