import { FhirError } from '../errors.ts';
import type { User } from '../store/types.ts';
import { issueCode, redirectWith, type AuthorizationRequest } from './authorize.ts';
import { scopesForUser } from './claims.ts';
import type { AuthDeps } from './deps.ts';
import { launchedContext, standaloneContext } from './grant-context.ts';
import { signedInUser, type SignInMark } from './issue.ts';
import { LoginTicketError, signLoginTicket, verifyLoginTicket } from './login-ticket.ts';
import type { LaunchContext } from './launch.ts';
import {
  isChoosable, mayHaveInContext, needsPatientPicker, pickerReach, PickerInputError, searchPatients, type PatientSummary,
} from './patient-picker.ts';

/** What the patient picker page shows (src/auth/picker-page.ts renders it). */
export interface PickerView {
  /** The signed login ticket the form carries to its next step. */
  ticket: string;
  userName: string | null;
  /** The text in the search box. */
  name: string;
  /** The search whose results are listed, and the cursor of the listed page (null: the first). */
  query: string;
  page: string | null;
  next: string | null;
  patients: PatientSummary[];
  /** Why the list is empty: the tenant has no Patients, the user's own record names none, nothing matches. */
  empty: 'none' | 'unlinked' | 'no-match' | null;
  error?: string;
}

/**
 * Where an authorization request goes after a step: back to the client with a code, to the picker, or back to the
 * sign-in page with `error` (an EHR launch whose patient cannot be checked for a moment: try again shortly).
 */
export type AuthorizeStep =
  | { kind: 'redirect'; location: string }
  | { kind: 'picker'; status: number; view: PickerView; retryAfter?: string }
  | { kind: 'sign-in'; status: number; username: string; error: string; retryAfter?: string };

/** A submission of the picker form, as posted. */
export interface PickerInput {
  ticket: string | null;
  action: string | null;
  name: string;
  query: string;
  page: string | null;
  next: string | null;
  patient: string | null;
}

/** The user who signed in, when, and the number of their last revocation then (the sign-in's mark, carried by the ticket). */
interface SignedInUser {
  user: User;
  ticket: string;
  mark: SignInMark;
}

interface ListAt {
  name: string;
  query: string;
  page: string | null;
}

/** A search the engine or the picker refused, or could not run now, as the page's error; undefined for anything else. */
function searchFailure(err: unknown): { status: number; error: string; retryAfter?: string } | undefined {
  if (err instanceof PickerInputError) return { status: 400, error: err.message };
  if (!(err instanceof FhirError)) return undefined;
  if (err.status < 500) return { status: 400, error: `The search cannot be run: ${err.message}` };
  if (err.status === 503) return { status: 503, error: 'Patient search is not available for a moment. Try again shortly.', retryAfter: err.headers['Retry-After'] };
  return undefined;
}

/** The picker listing the page `at` of the Patients the user may choose, with `error` when a step failed. */
async function listing(deps: AuthDeps, req: AuthorizationRequest, s: SignedInUser, at: ListAt, status: number, error?: string): Promise<AuthorizeStep> {
  const view: PickerView = { ticket: s.ticket, userName: s.user.name, ...at, next: null, patients: [], empty: null };
  if (error) view.error = error;
  const reach = pickerReach(deps, s.user);
  if (!reach) return { kind: 'picker', status, view: { ...view, empty: 'unlinked' } };
  try {
    const found = await searchPatients(deps, req.client.clientId, s.user, reach, at.query, at.page);
    view.patients = found.patients;
    view.next = found.next;
  } catch (err) {
    const failure = searchFailure(err);
    if (!failure) throw err;
    return { kind: 'picker', status: failure.status, view: { ...view, error: failure.error }, ...(failure.retryAfter ? { retryAfter: failure.retryAfter } : {}) };
  }
  if (view.patients.length === 0) view.empty = at.query.trim() || at.page !== null ? 'no-match' : reach.kind === 'tenant' ? 'none' : 'unlinked';
  return { kind: 'picker', status, view };
}

/**
 * After signing in for an EHR launch (SMART App Launch 2.2): the code with the launch's context (patient,
 * encounter, fhirContext, need_patient_banner), without a picker, when the user may have that patient in context by the
 * picker's rules (mayHaveInContext); otherwise `access_denied` back to the app, and no code. While a reindex refuses the
 * search those rules run (503, src/fhir/reindex.ts gatedStore), the sign-in page again, with a 503 and its Retry-After,
 * as the picker shows its page: the launched patient is a new choice, never checked, and granting it unchecked would let
 * a guardian open whichever patient a launch names (a refresh goes on during a reindex only for a patient checked when
 * it was chosen: issue.ts chosenPatientHeld).
 */
async function launchedSignIn(deps: AuthDeps, req: AuthorizationRequest, launch: LaunchContext, user: User, mark: SignInMark): Promise<AuthorizeStep> {
  let may: boolean;
  try {
    may = await mayHaveInContext(deps, req.client.clientId, user, launch.patient);
  } catch (err) {
    if (!(err instanceof FhirError && err.status === 503)) throw err;
    const error = "The launched patient's record cannot be checked for a moment. Sign in again shortly.";
    return { kind: 'sign-in', status: 503, username: user.username, error, ...(err.headers['Retry-After'] ? { retryAfter: err.headers['Retry-After'] } : {}) };
  }
  if (!may) {
    deps.log.info('EHR launch: the user may not have the launched patient in context', { tenant: user.tenant, clientId: req.client.clientId, userId: user.id });
    const description = "the signed-in user may not open the launched patient's record";
    return { kind: 'redirect', location: redirectWith(req.redirectUri, { error: 'access_denied', error_description: description, state: req.state, iss: deps.config.baseUrl }) };
  }
  return { kind: 'redirect', location: await issueCode(deps, req, { user, ...mark, ...launchedContext(launch) }) };
}

/**
 * The request with the scopes `user` holds of those it was granted (scopesForUser: a user who acts for
 * patients holds `user/` scopes as `patient/` ones), which the code stores and the picker follows.
 */
function heldBy(req: AuthorizationRequest, user: User): AuthorizationRequest {
  return { ...req, scopes: scopesForUser(req.scopes, user) };
}

/**
 * After a successful sign-in: for an EHR launch, its context (launchedSignIn); else the code (RFC 6749
 * 4.1.2), or, when the request was granted `launch/patient` or a `patient/` scope (a `user/` one, for a
 * user who acts for patients: heldBy) and the user is not a Patient, the patient picker (SMART App Launch
 * 2.x standalone launch), its first page listing the Patients the user may choose.
 */
export async function completeSignIn(deps: AuthDeps, granted: AuthorizationRequest, user: User, authTime: number): Promise<AuthorizeStep> {
  const req = heldBy(granted, user);
  // The record the password was checked against states the number of the user's last revocation, and the client's record
  // (read for this request) that of its last: a later one refuses the sign-in.
  const mark: SignInMark = {
    authTime, ...(user.revocationSeq !== undefined && { authRevocationSeq: user.revocationSeq }),
    ...(granted.client.revocationSeq !== undefined && { authClientRevocationSeq: granted.client.revocationSeq }),
  };
  if (req.launch !== null) return launchedSignIn(deps, req, req.launch, user, mark);
  if (!needsPatientPicker(req.scopes, user, deps.config.baseUrl)) return { kind: 'redirect', location: await issueCode(deps, req, { user, ...mark, ...standaloneContext(null) }) };
  const ticket = await signLoginTicket(deps, req, { tenant: user.tenant, userId: user.id, ...mark });
  return listing(deps, req, { user, ticket, mark }, { name: '', query: '', page: null }, 200);
}

/** The chosen patient, checked again on the server, on the code; or the picker again with the reason. */
async function pick(deps: AuthDeps, req: AuthorizationRequest, s: SignedInUser, input: PickerInput): Promise<AuthorizeStep> {
  const here: ListAt = { name: input.name, query: input.query, page: input.page };
  if (!input.patient) return listing(deps, req, s, here, 400, 'Choose a patient from the list first.');
  const reach = pickerReach(deps, s.user);
  let allowed: boolean;
  try {
    allowed = reach !== null && (await isChoosable(deps, req.client.clientId, s.user, reach, input.patient));
  } catch (err) {
    if (!searchFailure(err)) throw err;
    return listing(deps, req, s, here, 400, searchFailure(err)!.error);
  }
  if (!allowed) {
    deps.log.info('patient picker: patient refused', { tenant: s.user.tenant, clientId: req.client.clientId, userId: s.user.id });
    return listing(deps, req, s, here, 400, 'That patient cannot be chosen. Choose one from the list.');
  }
  return { kind: 'redirect', location: await issueCode(deps, req, { user: s.user, ...s.mark, ...standaloneContext(input.patient) }) };
}

/**
 * A submission of the picker form (search, next page, or pick; cancel is the caller's). Throws
 * LoginTicketError when its ticket is not good for this request, or its user may no longer sign in.
 */
export async function pickerStep(deps: AuthDeps, granted: AuthorizationRequest, input: PickerInput): Promise<AuthorizeStep> {
  const t = await verifyLoginTicket(deps, granted, input.ticket);
  const user = await deps.store.users.get(t.tenant, t.userId);
  if (!user || user.disabled) throw new LoginTicketError('the user who signed in no longer exists or is disabled');
  // A sign-in that a revocation of the user's tokens came after (a new password, a disable) goes no further, as its code would not (grantUser):
  // by the revocation's number where the ticket states the sign-in's, else by its time.
  const mark: SignInMark = {
    authTime: t.authTime, ...(t.authRevocationSeq !== undefined && { authRevocationSeq: t.authRevocationSeq }),
    ...(t.authClientRevocationSeq !== undefined && { authClientRevocationSeq: t.authClientRevocationSeq }),
  };
  if (await deps.store.oauth.isRevoked({ user: signedInUser(user.id, mark) })) throw new LoginTicketError("the user's tokens were revoked after this sign-in");
  const req = heldBy(granted, user);
  if (req.launch !== null || !needsPatientPicker(req.scopes, user, deps.config.baseUrl)) throw new LoginTicketError('this sign-in has no patient to choose');
  const s: SignedInUser = { user, ticket: input.ticket!, mark };
  switch (input.action) {
    case 'search': return listing(deps, req, s, { name: input.name, query: input.name, page: null }, 200);
    case 'next': return listing(deps, req, s, { name: input.name, query: input.query, page: input.next }, 200);
    case 'pick': return pick(deps, req, s, input);
    default: return listing(deps, req, s, { name: input.name, query: input.query, page: input.page }, 400, 'Choose Search, Continue or Cancel.');
  }
}
