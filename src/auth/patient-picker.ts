import { fhirBaseOf } from '../config.ts';
import { FhirError } from '../errors.ts';
import type { Access } from '../fhir/access.ts';
import type { FhirDeps } from '../fhir/crud.ts';
import { parseReference } from '../fhir/references.ts';
import { compileFilter, searchResources } from '../fhir/search.ts';
import { matchConditions, type MatchContext } from '../fhir/search-match.ts';
import type { Condition, ResourceVersion, User } from '../store/types.ts';
import { actsForPatients, patientOf } from './claims.ts';
import { needsPatientContext } from './scopes.ts';
import type { AuthDeps } from './deps.ts';

/** Patients shown per page of the picker. */
export const PICKER_PAGE_SIZE = 20;
/** The longest name search the picker takes, in characters and in words. */
export const MAX_QUERY_LENGTH = 200;
export const MAX_QUERY_WORDS = 6;

const FHIR_ID = /^[A-Za-z0-9\-.]{1,64}$/;

/** A name search the picker refuses (too long, too many words): shown to the user, never a 500. */
export class PickerInputError extends Error {
  override name = 'PickerInputError';
}

/**
 * Whether signing in must ask the user which patient the app is about (SMART App Launch 2.x standalone
 * launch): the request was granted `launch/patient` or a `patient/` scope, and the user is not a
 * Patient, whose own record is the context without asking. A `patient/` scope without `launch/patient`
 * infers it, as SMART App Launch 2.2 allows ("it MAY infer the launch/patient scope"): a granted
 * `patient/` scope needs a patient in context.
 */
export function needsPatientPicker(scopes: string[], user: User, baseUrl: string): boolean {
  return scopes.some(needsPatientContext) && patientOf(user, baseUrl) === undefined;
}

/**
 * The Patients a user may put in context, as search parameters of the search engine:
 * - a Patient user: their own record (who is never asked: needsPatientPicker);
 * - a RelatedPerson or Person user: the Patients their own resource names (`RelatedPerson.patient`,
 *   `Person.link.target`), as `_has` over it, so a deleted or missing resource yields none;
 * - staff (Practitioner, PractitionerRole, or no fhirUser), and no one else: every Patient of the tenant,
 *   as their `user/` scopes read the whole tenant (a Patient, RelatedPerson or Person user holds those as
 *   `patient/` ones: scopesForUser).
 * `linkedType` is the type `_has` reads; null when the user's resource is not this tenant's (nothing).
 */
export interface PickerReach {
  kind: 'tenant' | 'linked';
  params: [string, string][];
  linkedType?: string;
}

export function pickerReach(deps: AuthDeps, user: User): PickerReach | null {
  if (!actsForPatients(user)) return { kind: 'tenant', params: [] };
  const own = patientOf(user, deps.config.baseUrl);
  if (own !== undefined) return { kind: 'linked', params: [['_id', own]] };
  if (!/(?:^|\/)(?:RelatedPerson|Person)\/[^/]+$/.test(user.fhirUser!)) return null;
  const ref = parseReference(user.fhirUser!, fhirBaseOf(deps.config.baseUrl, user.tenant));
  if (!ref) return null;
  return { kind: 'linked', params: [[`_has:${ref.type}:patient:_id`, ref.id]], linkedType: ref.type };
}

/** Read and search of Patient (and of the user's own type, which `_has` reads), nothing else. */
function pickerAccess(clientId: string, reach: PickerReach): Access {
  return {
    clientId,
    can: (type, perm) => (perm === 'r' || perm === 's') && (type === 'Patient' || type === reach.linkedType),
    patientLimit: () => undefined,
  };
}

/**
 * Whether `user` may have the Patient `id` in context, by the picker's rules (README, "Who may choose
 * whom"): a Patient user their own record only; a RelatedPerson or Person user the Patients their
 * resource names; anyone else any Patient of the tenant; in every case an existing, undeleted Patient.
 * The EHR launch asks this of the patient it launched (src/auth/picker-flow.ts).
 */
export async function mayHaveInContext(deps: AuthDeps, clientId: string, user: User, id: string): Promise<boolean> {
  return (await mayHaveAmong(deps, clientId, user, [id])).has(id);
}

/** Those of the Patients `ids` that `user` may have in context (mayHaveInContext), found together: a search per CHOOSABLE_BATCH ids. */
export async function mayHaveAmong(deps: AuthDeps, clientId: string, user: User, ids: readonly string[]): Promise<Set<string>> {
  const own = patientOf(user, deps.config.baseUrl);
  const reach = pickerReach(deps, user);
  if (reach === null) return new Set();
  return choosableAmong(deps, clientId, user, reach, own === undefined ? ids : ids.filter((id) => id === own));
}

/**
 * mayHaveInContext, for a check of a choice already made (a token's, a refresh's, a Subscription's): undefined while its
 * search is refused for the moment (a reindex's 503, src/fhir/reindex.ts gatedStore), for the caller to answer with what
 * it last knew, or that the choice holds: the check adds to what the grant says, and must not turn a user's reads,
 * refreshes and the tenant's writes into 503s for the minutes a reindex takes.
 */
export async function mayStillHaveInContext(deps: AuthDeps, clientId: string, user: User, id: string): Promise<boolean | undefined> {
  const among = await mayStillHaveAmong(deps, clientId, user, [id]);
  return among === undefined ? undefined : among.has(id);
}

/**
 * choosableAmong, for checks of choices already made (src/auth/patient-held.ts): undefined while its search is refused for
 * the moment, as mayStillHaveAmong. The search depends on the user's tenant and `reach` alone: it answers for every user of
 * that tenant with the same reach (staff: any Patient of it), whose choices are so searched together.
 */
export function stillChoosableAmong(deps: AuthDeps, clientId: string, user: User, reach: PickerReach, ids: readonly string[]): Promise<Set<string> | undefined> {
  return unlessUnavailable(choosableAmong(deps, clientId, user, reach, ids));
}

/** mayHaveAmong, for checks of choices already made (mayStillHaveInContext): undefined while its search is refused for the moment. */
export function mayStillHaveAmong(deps: AuthDeps, clientId: string, user: User, ids: readonly string[]): Promise<Set<string> | undefined> {
  return unlessUnavailable(mayHaveAmong(deps, clientId, user, ids));
}

/** What `search` finds, or undefined while it is refused for the moment (a reindex's 503). */
async function unlessUnavailable<T>(search: Promise<T>): Promise<T | undefined> {
  try {
    return await search;
  } catch (err) {
    if (err instanceof FhirError && err.category === 'unavailable') return undefined;
    throw err;
  }
}

/** What the picker shows of a Patient. */
export interface PatientSummary {
  id: string;
  name: string;
  birthDate: string | null;
  gender: string | null;
}

type HumanName = { use?: string; text?: string; family?: string; given?: string[] };

function displayName(names: HumanName[] | undefined): string {
  const list = names ?? [];
  const n = list.find((x) => x.use === 'official') ?? list.find((x) => x.use !== 'old') ?? list[0];
  if (!n) return '(no name)';
  if (n.text) return n.text;
  const given = (n.given ?? []).join(' ');
  return [n.family, given].filter(Boolean).join(', ') || '(no name)';
}

function summary(row: ResourceVersion): PatientSummary {
  const p = JSON.parse(row.content) as { name?: HumanName[]; birthDate?: string; gender?: string };
  return { id: row.id, name: displayName(p.name), birthDate: p.birthDate ?? null, gender: p.gender ?? null };
}

/** The words of a name search, each a `name` value (search.html escapes for `$`, `|` and `\`; commas split words). */
export function nameWords(query: string): string[] {
  if (query.length > MAX_QUERY_LENGTH) throw new PickerInputError(`Search with at most ${MAX_QUERY_LENGTH} characters.`);
  const words = query.split(/[\s,]+/).filter(Boolean);
  if (words.length > MAX_QUERY_WORDS) throw new PickerInputError(`Search with at most ${MAX_QUERY_WORDS} words.`);
  return words.map((w) => w.replace(/[\\$|]/g, '\\$&'));
}

export interface PatientPage {
  patients: PatientSummary[];
  /** The cursor of the next page, when there is one. */
  next: string | null;
}

async function search(deps: AuthDeps, clientId: string, user: User, reach: PickerReach, params: URLSearchParams): Promise<{ rows: ResourceVersion[]; next: string | null }> {
  for (const [k, v] of reach.params) params.append(k, v);
  const fhir: FhirDeps = { store: deps.store, clock: deps.clock, fhirBase: (t) => fhirBaseOf(deps.config.baseUrl, t), cursors: deps.searchCursors };
  const result = await searchResources(fhir, { tenant: user.tenant, access: pickerAccess(clientId, reach) }, 'Patient', params, true);
  return { rows: result.rows, next: result.next ?? null };
}

/**
 * A page of the Patients `user` may choose whose names match every word of `query` (the REST API's
 * `Patient?name=`, through the same search engine), by family and given name; `cursor` is a page's
 * from an earlier answer. Throws PickerInputError for a query it refuses, FhirError for one the
 * engine refuses (a forged cursor, a control character).
 */
export async function searchPatients(deps: AuthDeps, clientId: string, user: User, reach: PickerReach, query: string, cursor: string | null): Promise<PatientPage> {
  const params = new URLSearchParams({ _count: String(PICKER_PAGE_SIZE), _sort: 'family,given' });
  for (const w of nameWords(query)) params.append('name', w);
  if (cursor) params.set('_cursor', cursor);
  const { rows, next } = await search(deps, clientId, user, reach, params);
  return { patients: rows.map(summary), next };
}

/** Whether `user` may choose the Patient `id`: it exists in the user's tenant, is not deleted, and is within their reach. */
export async function isChoosable(deps: AuthDeps, clientId: string, user: User, reach: PickerReach, id: string): Promise<boolean> {
  return (await choosableAmong(deps, clientId, user, reach, [id])).has(id);
}

/** The most ids one search of choosableAmong names (a comma-separated `_id`). */
export const CHOOSABLE_BATCH = 100;

/**
 * Those of the Patients `ids` that `user` may choose (isChoosable), by one search of the engine per CHOOSABLE_BATCH of
 * them (`_id=a,b,...` within the user's reach): a write that checks the choices of many Subscriptions costs a search per
 * user and hundred patients, not one per Subscription.
 */
export async function choosableAmong(deps: AuthDeps, clientId: string, user: User, reach: PickerReach, ids: readonly string[]): Promise<Set<string>> {
  const asked = [...new Set(ids.filter((id) => FHIR_ID.test(id)))];
  const found = new Set<string>();
  for (let i = 0; i < asked.length; i += CHOOSABLE_BATCH) {
    const batch = asked.slice(i, i + CHOOSABLE_BATCH);
    const wanted = new Set(batch);
    try {
      const { rows } = await search(deps, clientId, user, reach, new URLSearchParams({ _id: batch.join(','), _count: String(batch.length) }));
      for (const row of rows) if (wanted.has(row.id)) found.add(row.id);
    } catch (err) {
      // A reindex beside the server holds searches of rows not rebuilt yet (a 503, src/fhir/reindex.ts gatedStore). The FHIR
      // gate asks this of every guardian's token every few seconds: answered from the records themselves instead, or each of
      // their requests would be a 503 for as long as the rebuild runs.
      if (!(err instanceof FhirError) || err.status !== 503) throw err;
      for (const id of batch) if (await choosableByReads(deps, user, reach, id)) found.add(id);
    }
  }
  return found;
}

/**
 * isChoosable without the search index: the Patient read by id (undeleted), and for a RelatedPerson or Person user
 * their own record read by id and matched in memory by the search engine (search-match.ts) against `patient` naming
 * it, which is what `_has:{type}:patient:_id` selects, read from rows the reindex may not have rebuilt yet.
 */
async function choosableByReads(deps: AuthDeps, user: User, reach: PickerReach, id: string): Promise<boolean> {
  const patient = await deps.store.resources.read(user.tenant, 'Patient', id);
  if (!patient || patient.deleted) return false;
  if (reach.kind === 'tenant') return true;
  const [[param, value]] = reach.params as [[string, string]];
  if (reach.linkedType === undefined) return param === '_id' && value === id;
  const own = await deps.store.resources.read(user.tenant, reach.linkedType, value);
  if (!own || own.deleted) return false;
  const base = fhirBaseOf(deps.config.baseUrl, user.tenant);
  const names = compileFilter(reach.linkedType, new URLSearchParams({ patient: `Patient/${id}` })) as Condition[];
  const noLinks: MatchContext = { base, exists: () => Promise.reject(new Error('a patient reference reads no other resource')) };
  return matchConditions(JSON.parse(own.content) as Record<string, unknown>, own.lastUpdated, names, noLinks);
}
