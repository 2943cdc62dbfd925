import { FhirError } from '../errors.ts';
import type { PageLinks } from './search.ts';

/**
 * Between a page's cursor and the first page's time in a `_cursor`: no cursor holds it (plain cursors are
 * base64url, sealed ones `{kid}.{base64url}`, src/auth/sealed.ts), and it is unreserved in a URL.
 */
const SEPARATOR = '~';
/** A time in base 36 (at most 11 digits for a safe integer), and the write mark read with it (decimal) where one is carried. */
const TIME = /^([0-9a-z]{1,11})(?:\.([0-9]{1,40}))?$/;

/** What a paged read answers that pagedAt links on: its next cursor and, asked with a cursor, its own links. */
interface Paged {
  next?: string;
  page?: PageLinks;
}

const badCursor = () => new FhirError('invalid', 'Invalid _cursor: it is none this server gives; search again from the first page (without _cursor)', { expression: ['_cursor'] });

/**
 * A `_cursor` split into the read's own cursor, the first page's time it carries (none for one given before times
 * were carried) and the tenant's write mark read before the first page's query (none for one given before marks
 * were carried, or where none could be: src/fhir/search-pin.ts).
 */
function splitCursor(raw: string): { cursor: string; asOf?: number; mark?: string } {
  const at = raw.lastIndexOf(SEPARATOR);
  if (at < 0) return { cursor: raw };
  const cursor = raw.slice(0, at);
  const time = TIME.exec(raw.slice(at + 1));
  const asOf = time === null ? NaN : parseInt(time[1]!, 36);
  if (cursor === '' || !Number.isSafeInteger(asOf)) throw badCursor();
  return time![2] === undefined ? { cursor, asOf } : { cursor, asOf, mark: time![2] };
}

/**
 * The query with its `_cursor` without the first page's time it carries (pagedAt), and that time: what a
 * search reads with, or checks before a transaction commits (src/fhir/bundle-reads.ts). A time that is
 * not one pagedAt writes is a 400 naming `_cursor`.
 */
export function ownCursor(params: URLSearchParams): { own: URLSearchParams; asOf?: number; mark?: string } {
  const raw = params.get('_cursor');
  if (raw === null) return { own: params };
  const { cursor, asOf, mark } = splitCursor(raw);
  if (asOf === undefined) return { own: params };
  const own = new URLSearchParams(params);
  own.set('_cursor', cursor);
  return mark === undefined ? { own, asOf } : { own, asOf, mark };
}

/**
 * What a page read within pagedAt knows of the first page's time and write mark, and tells back: `at` is the
 * time its links carry, `carried` the mark its cursor carried (a later page), and `carry` the mark its links are
 * to carry, which the page sets (src/fhir/search-pin.ts); `read` is the mark read once for the request.
 */
export interface PagePin {
  readonly at: number;
  readonly carried?: string;
  carry?: string;
  read?: Promise<{ mark: string; exact: boolean }>;
}

/**
 * A search's page (`run`: a type, compartment or cross-type search, `$everything`) whose pages after the
 * first carry the first page's time, as history's do (src/fhir/history.ts): the Bundle's `meta.lastUpdated`
 * is the safe time taken before the first page's read (`at`, src/store/write-times.ts), carried on in every
 * `_cursor` the pages link to (their `next`, a later page's `self` and `previous`). A page read later holds
 * no version written since the first page's read that sorts before its place, so a client polling
 * `_lastUpdated=gt` the last page's own time would miss it; the first page's time misses none. The time is
 * outside a sealed cursor's seal: a client that changes it changes only its own Bundle time, never later
 * than this page's own read (`at`). `run` is given that time for a page asked with a cursor that carried one, to
 * read the page as of it where it can (src/fhir/search-pin.ts).
 */
export async function pagedAt<R extends Paged>(
  params: URLSearchParams, at: number, run: (params: URLSearchParams, asOf?: number, pin?: PagePin) => Promise<R>,
): Promise<R & { at: number }> {
  const { own, asOf: carried, mark } = ownCursor(params);
  const asOf = carried !== undefined && carried < at ? carried : at;
  // A later page is read as of the first page's time where the read can be (src/fhir/search-pin.ts); a cursor
  // given before times were carried reads as of now, and the pages it links to as of its own time.
  const pin: PagePin = carried !== undefined && mark !== undefined ? { at: asOf, carried: mark } : { at: asOf };
  const result = await run(own, carried === undefined ? undefined : asOf, pin);
  const stamp = pin.carry === undefined || !/^[0-9]{1,40}$/.test(pin.carry) ? asOf.toString(36) : `${asOf.toString(36)}.${pin.carry}`;
  const timed = (cursor: string) => `${cursor}${SEPARATOR}${stamp}`;
  if (result.next !== undefined) result.next = timed(result.next);
  if (result.page !== undefined) {
    const page: PageLinks = { ...result.page };
    if (page.cursor !== undefined) page.cursor = timed(page.cursor);
    if (typeof page.previous === 'string') page.previous = timed(page.previous);
    result.page = page;
  }
  return Object.assign(result, { at: asOf });
}
