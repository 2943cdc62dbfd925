import { FhirError } from '../errors.ts';

/** Whether `part` (a key or value of a query, `+` a space) is well percent-encoded: each `%` starts two hex digits, and the bytes decode as UTF-8. */
function wellEncoded(part: string): boolean {
  if (!part.includes('%')) return true;
  try {
    decodeURIComponent(part.replace(/\+/g, ' '));
    return true;
  } catch {
    return false;
  }
}

/**
 * The parameters of a query string (`a=b&c=d`, as a URL, a form or a condition carries it), refusing a
 * malformed percent-encoding (RFC 3986 2.1; WHATWG URL percent-decodes to UTF-8) with a 400 naming the
 * parameter: URLSearchParams reads it leniently (a lone `%` as itself, bytes that are no UTF-8 as
 * U+FFFD), and a search or a condition would then look for another value. `expression` names the
 * header or element holding it, where the caller does not place the error itself.
 */
export function strictQuery(raw: string, expression?: string): URLSearchParams {
  if (raw.includes('%')) {
    for (const pair of raw.split('&')) {
      const eq = pair.indexOf('=');
      const key = eq < 0 ? pair : pair.slice(0, eq);
      if (wellEncoded(key) && wellEncoded(eq < 0 ? '' : pair.slice(eq + 1))) continue;
      const name = wellEncoded(key) ? decodeURIComponent(key.replace(/\+/g, ' ')) : key;
      throw new FhirError('invalid', `The parameter '${name}' is not well percent-encoded (a '%' must start two hex digits, and the bytes they encode must be UTF-8)`, {
        expression: [expression ?? name],
      });
    }
  }
  return new URLSearchParams(raw);
}
