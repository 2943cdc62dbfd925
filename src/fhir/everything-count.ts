/**
 * `$everything` with `_count=0`: as a search's `_count=0` (R4 search.html, "_count=0 ... the total"), a searchset
 * Bundle of no entries whose `total` is how many matches its pages hold: the pages read in turn, MAX_COUNT matches
 * each, by the page function itself (one engine: the same records, reach, `_type`, `_since` and care dates),
 * their includes given no entry. Past COUNTED_PAGES pages the count is too costly: a 400 naming `_count`, as
 * search's count past its bound.
 */
import { FhirError } from '../errors.ts';
import type { EverythingPage } from './everything.ts';
import { MAX_COUNT } from './search.ts';

/** The most pages of MAX_COUNT matches a count reads (20,000 matches, as search counts in reach at most). */
const COUNTED_PAGES = 20;

/** Whether `params` asks for a count alone (`_count=0`, `_count=00`). */
export function countsOnly(params: URLSearchParams): boolean {
  const raw = params.get('_count');
  return raw !== null && /^0+$/.test(raw);
}

/** The page of no entries with the `total` of `page`'s pages over `params` (`_count=0`; a `_cursor` given is read from its start). */
export async function countedEverything(params: URLSearchParams, page: (params: URLSearchParams) => Promise<EverythingPage>): Promise<EverythingPage & { total: number }> {
  const at = new URLSearchParams(params);
  at.set('_count', String(MAX_COUNT));
  at.delete('_cursor');
  const first = await page(at);
  let total = first.rows.length;
  let next = first.next;
  for (let read = 1; next !== undefined; read++) {
    if (read >= COUNTED_PAGES) {
      throw new FhirError('invalid', `Counting this $everything takes reading more than ${COUNTED_PAGES * MAX_COUNT} of its matches: narrow it (by _type or _since, say) or page it with a _count of 1 or more`, { issueCode: 'too-costly', expression: ['_count'] });
    }
    at.set('_cursor', next);
    const more = await page(at);
    total += more.rows.length;
    next = more.next;
  }
  const self = new URLSearchParams(first.self);
  self.set('_count', params.get('_count')!);
  return { rows: [], included: [], self, warnings: first.ignored ?? [], total };
}
