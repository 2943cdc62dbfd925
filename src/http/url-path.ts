/**
 * The path of a request URL without parsing it: the request line is already normalised, so the path
 * starts at the first `/` after the scheme's `//`. Shared by the CORS rule and the hot-route dispatcher.
 */

/** Where the path starts in `url`, or -1 when there is none. */
export function pathStart(url: string): number {
  return url.indexOf('/', url.indexOf('//') + 2);
}

/** The path of `url`, without its query (`/` when there is none). */
export function pathOf(url: string): string {
  const start = pathStart(url);
  if (start < 0) return '/';
  const end = url.indexOf('?', start);
  return end < 0 ? url.slice(start) : url.slice(start, end);
}
