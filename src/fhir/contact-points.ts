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

/** The `system` of a ContactPoint that is an email address (R4 contact-point-system). */
export const EMAIL = 'email';

/**
 * An email address as its token rows hold it and searches compare it: lower-cased (full Unicode lower
 * case), so that `email=Alice@Example.org` finds `alice@example.org`. RFC 5321 2.4 makes the domain
 * case-insensitive and lets a mailbox's local part be case-sensitive, but "exploiting the case
 * sensitivity of mailbox local-parts impedes interoperability and is discouraged"; mail providers treat
 * it as case-insensitive, and so does Medplum (every ContactPoint token value lower-cased). R4 search.html
 * (token): matching "is case-sensitive unless the underlying semantics for the context indicate that
 * the token should be interpreted case-insensitively", which an email address's do.
 */
export function emailKey(value: string): string {
  return value.toLowerCase();
}
