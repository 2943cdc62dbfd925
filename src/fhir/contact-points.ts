import type { ParamDefinition } from './definitions.ts';
import { pathTypes } from './validation/model.ts';

const CONTACT_POINTS = new Map<ParamDefinition, boolean>();

/** Whether every path of token parameter `def` reaches ContactPoint elements (plain `a.b` paths from its type, a `where(...)` at the end aside). */
export function reachesContactPoints(def: ParamDefinition): boolean {
  let out = CONTACT_POINTS.get(def);
  if (out !== undefined) return out;
  out = def.type === 'token' && def.paths.length > 0 && def.paths.every((path) => {
    const types = pathTypes(def.base, path.key.replace(/\.where\([^()]*\)$/, ''));
    return types.length > 0 && types.every((t) => t === 'ContactPoint');
  });
  CONTACT_POINTS.set(def, out);
  return out;
}

/**
 * A ContactPoint's value as its token rows hold it and searches compare it: lower-cased (full Unicode
 * lower case), so that `email=Alice@Example.org` finds `alice@example.org`. R4 search.html (token): a match
 * "is case sensitive unless the underlying semantics for the context indicate that the token should be
 * interpreted case-insensitively", and "if the underlying data type is string then the search is not case
 * sensitive": ContactPoint.value is a string, and the server may give ContactPoints "special handling".
 * An email address's domain is case-insensitive, and RFC 5321 2.4 discourages relying on its local part's
 * case; a phone number has none to speak of. Medplum lower-cases every ContactPoint value alike; HAPI FHIR
 * compares them as written (its issue 6361, open).
 */
export function contactKey(value: string): string {
  return value.toLowerCase();
}
