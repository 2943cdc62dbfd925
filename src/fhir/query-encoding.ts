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

/** The name of a pair of a query (`key=value`) that is not well percent-encoded, as strictQuery names it: decoded when its key is well encoded. */
function pairName(key: string): string {
  return wellEncoded(key) ? decodeURIComponent(key.replace(/\+/g, ' ')) : key;
}

/** The key of a pair of a query, and whether the pair is well percent-encoded. */
function readPair(pair: string): { key: string; ok: boolean } {
  const eq = pair.indexOf('=');
  const key = eq < 0 ? pair : pair.slice(0, eq);
  return { key, ok: wellEncoded(key) && wellEncoded(eq < 0 ? '' : pair.slice(eq + 1)) };
}

/** strictQuery's message for a parameter that is not well percent-encoded. */
export function malformedParameterMessage(name: string): string {
  return `The parameter '${name}' is not well percent-encoded (a '%' must start two hex digits, and the bytes they encode must be UTF-8)`;
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
      const { key, ok } = readPair(pair);
      if (ok) continue;
      const name = pairName(key);
      throw new FhirError('invalid', malformedParameterMessage(name), { expression: [expression ?? name] });
    }
  }
  return new URLSearchParams(raw);
}

/**
 * The parameters of a query string that are well percent-encoded, and the names (as strictQuery names them) of
 * those that are not, in order: for a caller that must still read the rest of a request it refuses (an
 * authorization request, whose error goes to its client's redirect URI when that can be trusted).
 */
export function splitQuery(raw: string): { params: URLSearchParams; malformed: string[] } {
  const good: string[] = [];
  const malformed: string[] = [];
  for (const pair of raw.split('&')) {
    const { key, ok } = readPair(pair);
    if (ok) good.push(pair);
    else malformed.push(pairName(key));
  }
  return { params: new URLSearchParams(good.join('&')), malformed };
}
