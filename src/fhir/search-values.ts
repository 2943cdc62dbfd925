import { FhirError } from '../errors.ts';

/** How many values one search may carry in all (each becomes a bound SQL parameter). */
export const MAX_SEARCH_VALUES = 1000;

/**
 * Splits a search value on an unescaped separator (FHIR R4 search 3.1.1.1.4, escaping): `\,`, `\|`,
 * `\$` and `\\` stand for the literal characters. A backslash before any other character is kept.
 */
export function splitEscaped(raw: string, separator: ',' | '|' | '$'): string[] {
  const parts: string[] = [];
  let start = 0;
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] === '\\') i++;
    else if (raw[i] === separator) {
      parts.push(raw.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(raw.slice(start));
  return parts;
}

/** Removes the escapes of `\,`, `\|`, `\$` and `\\`. */
export function unescapeValue(raw: string): string {
  return raw.replace(/\\([\\,|$])/g, '$1');
}

/**
 * A search parameter given with no value at all (`name=`): R4 search.html, "Empty parameters are not an
 * error - they are just ignored by the server", so the search layer drops the parameter (compileSearch in
 * src/fhir/search.ts) once its name and modifier are known good. Where an empty value is a value of
 * something else (a `_filter` test's `""`), it stays the 400 it is.
 */
export class EmptyValue extends FhirError {}

/** The comma-separated alternatives of a search value (ORed), still escaped; none at all is EmptyValue. */
export function alternatives(raw: string, param: string): string[] {
  if (raw === '') throw new EmptyValue('invalid', `Empty value in search parameter '${param}'`, { expression: [param] });
  const parts = splitEscaped(raw, ',');
  if (parts.some((p) => p === '')) throw new FhirError('invalid', `Empty value in search parameter '${param}'`, { expression: [param] });
  return parts;
}

/** One value of a token parameter: `code`, `system|code`, `|code` or `system|`. */
export function tokenValue(raw: string): { system?: string; value?: string } {
  const [first, ...rest] = splitEscaped(raw, '|');
  if (rest.length === 0) return { value: unescapeValue(first!) };
  const system = unescapeValue(first!);
  const value = unescapeValue(rest.join('|'));
  return value === '' ? { system } : { system, value };
}
