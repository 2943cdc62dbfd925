import type { User } from '../store/types.ts';
import { fhirBaseOf } from '../config.ts';
import { parseReference } from '../fhir/references.ts';
import { scopesAsPatient } from './scopes.ts';

/**
 * OpenID Connect scopes and the user attributes (claims) each releases (OIDC Core 5.4; SMART `fhirUser`).
 * A client may read some attributes only (`Client.readAttributes`, null = all).
 */
export const SCOPE_ATTRIBUTES: Readonly<Record<string, readonly string[]>> = {
  profile: ['name'],
  email: ['email', 'email_verified'],
  phone: ['phone_number', 'phone_number_verified'],
  address: ['address'],
  fhirUser: ['fhirUser'],
};

/** Every user attribute a client can be allowed to read. */
export const USER_ATTRIBUTES: readonly string[] = [...new Set(Object.values(SCOPE_ATTRIBUTES).flat())];

/**
 * OpenID and SMART launch scopes that are not resource scopes; granted to any client that asks. Not SMART's
 * `online_access` (a refresh token usable while the user is signed in): Cinder keeps no sign-in session to
 * bound it by, so it is neither advertised nor granted, and a response's `scope` never claims it.
 */
export const OPENID_SCOPES = ['openid', 'profile', 'email', 'phone', 'address', 'fhirUser', 'offline_access', 'offline'];

/** Scopes asking for a refresh token. */
export const OFFLINE_SCOPES = ['offline_access', 'offline'];

/**
 * The requested scopes whose attributes the client may not all read: asking for any of them is
 * `invalid_grant` (checkReadableScopes), e.g. a client that reads `email` but not `email_verified`
 * asking for the `email` scope.
 */
export function unreadableScopes(scopes: string[], readAttributes: string[] | null): string[] {
  if (readAttributes === null) return [];
  return scopes.filter((s) => SCOPE_ATTRIBUTES[s]?.some((a) => !readAttributes.includes(a)));
}

function attributeValue(user: User, attribute: string): unknown {
  switch (attribute) {
    case 'name': return user.name;
    case 'email': return user.email;
    case 'email_verified': return user.email === null ? null : user.emailVerified;
    case 'phone_number': return user.phone;
    case 'phone_number_verified': return user.phone === null ? null : user.phoneVerified;
    case 'address': return user.address === null ? null : { formatted: user.address };
    case 'fhirUser': return user.fhirUser;
    default: return null;
  }
}

/** The claims the granted scopes release about `user` to a client that may read `readAttributes`. */
export function userClaims(user: User, scopes: string[], readAttributes: string[] | null): Record<string, unknown> {
  const claims: Record<string, unknown> = {};
  for (const scope of scopes) {
    for (const attribute of SCOPE_ATTRIBUTES[scope] ?? []) {
      if (readAttributes !== null && !readAttributes.includes(attribute)) continue;
      const value = attributeValue(user, attribute);
      if (value !== null && value !== undefined) claims[attribute] = value;
    }
  }
  return claims;
}

/**
 * The patient in context: the user's own Patient resource id when their fhirUser is a Patient of their
 * tenant (`Patient/123`, or its URL under the tenant's FHIR base; `baseUrl` is the server's). Another
 * server's or tenant's Patient is no record of this tenant, whatever its id.
 */
export function patientOf(user: User, baseUrl: string): string | undefined {
  const ref = user.fhirUser === null ? null : parseReference(user.fhirUser, fhirBaseOf(baseUrl, user.tenant));
  return ref?.type === 'Patient' && ref.version === undefined ? ref.id : undefined;
}

/**
 * Whether a user acts for patients rather than as staff: their `fhirUser` is a Patient (their own record),
 * a RelatedPerson or a Person (the patients that resource names). Staff (a Practitioner or
 * PractitionerRole `fhirUser`, or none) read the tenant with `user/` scopes.
 */
export function actsForPatients(user: User): boolean {
  return /(?:^|\/)(?:Patient|RelatedPerson|Person)\/[^/]+$/.test(user.fhirUser ?? '');
}

/**
 * The scopes `user` holds of those granted to their sign-in. SMART App Launch 2.2 (Scopes and Launch
 * Context): `user/` scopes reach "resources that the current user can access", and a user who acts for
 * patients can access the records of those patients, not the tenant; so such a user's `user/` resource
 * scopes are their `patient/` form (scopesAsPatient; so are `system/` ones, which a client registered for them
 * could otherwise be granted in a user's sign-in), bound to the patient in context as any
 * `patient/` scope is. Staff keep their scopes as granted.
 */
export function scopesForUser(scopes: string[], user: User): string[] {
  return actsForPatients(user) ? scopesAsPatient(scopes) : scopes;
}
