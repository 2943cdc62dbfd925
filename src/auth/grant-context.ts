import type { AuthCode } from '../store/types.ts';
import type { LaunchContext } from './launch.ts';

/**
 * The context a sign-in settles and its grant keeps, on the authorization code and then on every refresh
 * token (SMART App Launch 2.2 launch context): the patient, and from an EHR launch its encounter and
 * `fhirContext`; and whether the app needs its own patient banner. What a token states of it is decided
 * when the token is issued (releasedContext in src/auth/issue.ts), by the scopes granted.
 */
export type GrantContext = Pick<AuthCode, 'patient' | 'encounter' | 'fhirContext' | 'needPatientBanner'>;

/** The GrantContext fields of a code, refresh token or sign-in, alone. */
export function grantContext(c: GrantContext): GrantContext {
  return { patient: c.patient, encounter: c.encounter, fhirContext: c.fhirContext, needPatientBanner: c.needPatientBanner };
}

/**
 * A standalone sign-in's context: the patient chosen in the picker, or null (none, or a Patient user's own
 * record, derived when a token is issued). No EHR UI surrounds the app, so it needs its patient banner.
 */
export function standaloneContext(patient: string | null): GrantContext {
  return { patient, encounter: null, fhirContext: null, needPatientBanner: true };
}

/** An EHR launch's context, as its `launch` value states it. */
export function launchedContext(launch: LaunchContext): GrantContext {
  return { patient: launch.patient, encounter: launch.encounter, fhirContext: launch.fhirContext, needPatientBanner: launch.needPatientBanner };
}
