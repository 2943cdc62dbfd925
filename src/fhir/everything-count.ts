/**
 * `$everything` with `_count=0`: as a search's `_count=0` (R4 search.html, "_count=0 ... the total"), a searchset
 * Bundle of no entries whose `total` is how many matches its pages hold. The matches are read as the pages read them
 * (one engine: the same rows, reach, `_type`, `_since`, care dates and first owner of a resource in several
 * compartments), of the types returned alone, a chunk at a time, and only counted: no page is made, nothing they
 * refer to is read. Pages end early where their rows name more than a page includes, so twenty pages could hold
 * twenty matches; the count is bounded by matches instead. Past COUNTED matches it is too costly: a 400 naming
 * `_count`, as search's count past its bound.
 */
import { FhirError } from '../errors.ts';
import type { ResourceVersion } from '../store/types.ts';
import type { EverythingInput, EverythingPage } from './everything.ts';
import { MAX_COUNT } from './search.ts';

/** The most matches a count reads (twenty pages of MAX_COUNT, as search counts in reach at most). */
const COUNTED = 20 * MAX_COUNT;
/** Matches read at once; only the last is kept. */
const CHUNK = 5000;

/** Whether `params` asks for a count alone (`_count=0`, `_count=00`). */
export function countsOnly(params: URLSearchParams): boolean {
  const raw = params.get('_count');
  return raw !== null && /^0+$/.test(raw);
}

/** `params` for a count: a `_cursor` given is ignored, the count reads from the start. */
export function countParams(params: URLSearchParams): URLSearchParams {
  const out = new URLSearchParams(params);
  out.delete('_cursor');
  return out;
}

/**
 * The page of no entries whose `total` is how many matches `readRows` gives from the start (`readRows(after, count)`:
 * the first `count` matches after `after`, undefined from the first, over the types returned as matches).
 */
export async function countedEverything<R extends ResourceVersion>(
  input: Pick<EverythingInput, 'self' | 'warnings'>, readRows: (after: R | undefined, count: number) => Promise<R[]>,
): Promise<EverythingPage & { total: number }> {
  let total = 0;
  let last: R | undefined;
  for (;;) {
    const count = Math.min(CHUNK, COUNTED + 1 - total);
    const rows = await readRows(last, count);
    total += rows.length;
    if (total > COUNTED) {
      throw new FhirError('invalid', `Counting this $everything takes reading more than ${COUNTED} of its matches: narrow it (by _type or _since, say) or page it with a _count of 1 or more`, { issueCode: 'too-costly', expression: ['_count'] });
    }
    if (rows.length < count) break;
    last = rows[rows.length - 1];
  }
  return { rows: [], included: [], self: input.self, warnings: [...input.warnings], total };
}
