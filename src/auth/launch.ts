import type { FhirContextItem } from '../store/types.ts';
import type { AuthDeps } from './deps.ts';
import { isFhirContext } from './fhir-context.ts';
import { randomToken } from './secrets.ts';
import { signServerJws, verifyServerJws, type ServerJwsRefusal } from './server-jws.ts';

/** How long an EHR launch may wait for the app's authorization request (SMART App Launch: a short-lived, opaque `launch`). */
export const LAUNCH_TTL_S = 300;

/** The JWS `typ` of a launch: never a login ticket (`cinder-login+jwt`) or an access token (`at+jwt`), nor the reverse. */
const KIND = { typ: 'cinder-launch+jwt', ttl: LAUNCH_TTL_S };

/**
 * What an EHR launch puts in context (SMART App Launch 2.2, EHR launch): its tenant, patient, encounter,
 * further resources (`fhirContext`), whether the app needs its own patient banner, and, if bound, its app.
 */
export interface LaunchContext {
  tenant: string;
  patient: string;
  encounter: string | null;
  /** The launch's `fhirContext` items, or null: none. */
  fhirContext: FhirContextItem[] | null;
  /** SMART `need_patient_banner`: false when the EHR's own UI shows the patient around the app. */
  needPatientBanner: boolean;
  /** The one client that may use the launch, or null: any client of the tenant. */
  clientId: string | null;
}

/** A `launch` value that is malformed, not signed here, expired, or not a launch. */
export class LaunchError extends Error {
  override name = 'LaunchError';
}

/**
 * Signs a launch: an ES256 JWS of the server (src/auth/server-jws.ts) valid LAUNCH_TTL_S, carrying its
 * context. Nothing is stored: whoever holds the value within those minutes may start a sign-in with it,
 * and the user who signs in must still be one who may have the patient in context.
 */
export function signLaunch(deps: AuthDeps, c: LaunchContext): Promise<string> {
  const claims: Record<string, unknown> = { tenant: c.tenant, patient: c.patient, jti: randomToken(12) };
  if (c.encounter !== null) claims.encounter = c.encounter;
  if (c.fhirContext !== null) claims.fhirContext = c.fhirContext;
  if (!c.needPatientBanner) claims.need_patient_banner = false;
  if (c.clientId !== null) claims.client_id = c.clientId;
  return signServerJws(deps, KIND, claims);
}

const REFUSALS: Record<ServerJwsRefusal, string> = {
  malformed: 'the launch parameter is not a launch of this server',
  'unknown-key': 'the launch parameter was not issued by this server',
  invalid: 'the launch parameter is invalid or has expired',
};

const optionalString = (v: unknown) => (typeof v === 'string' ? v : null);

/**
 * The context of a `launch` value signed here; throws LaunchError. `graceS` accepts a launch that
 * expired that many seconds ago: the sign-in form it was carried by may be submitted minutes later.
 */
export async function verifyLaunch(deps: AuthDeps, value: string, graceS = 0): Promise<LaunchContext> {
  const p = await verifyServerJws(deps, KIND, value, ['tenant', 'patient'], (why, cause) => new LaunchError(REFUSALS[why], { cause }), graceS);
  if (typeof p.tenant !== 'string' || typeof p.patient !== 'string') throw new LaunchError('the launch parameter lacks its context');
  return {
    tenant: p.tenant, patient: p.patient, encounter: optionalString(p.encounter), fhirContext: isFhirContext(p.fhirContext) ? p.fhirContext : null,
    needPatientBanner: p.need_patient_banner !== false, clientId: optionalString(p.client_id),
  };
}
