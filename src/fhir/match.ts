/**
 * `Patient/$match` (R4 OperationDefinition Patient-match, patient-operation-match.html): the Patients that
 * may be the one a client describes, each graded and scored (src/fhir/match-score.ts), most likely first.
 *
 * - Input: a Parameters resource with `resource` (a Patient, validated as a create validates it at
 *   CINDER_VALIDATION, its profiles aside: R4 lets the fragment lack what profiles make mandatory),
 *   `onlyCertainMatches` (boolean) and `count` (a positive integer; DEFAULT_MATCH_COUNT when absent,
 *   at most MAX_MATCH_COUNT).
 * - Candidates come from Patient searches (blocking), never a table scan: each identifier's value (any
 *   system) and, with a system, `system|value`; family name and birth date; Soundex of the family name
 *   (`phonetic`) and birth date; given name and birth date; family and given name; the family name alone when
 *   neither a given name nor a birth date is given; each telecom value; family name and postal code. Each is a search the token could run (`Patient?...`: its scopes, SMART v2
 *   filters and patient context), of at most CANDIDATES_PER_BLOCK Patients, deleted ones never.
 * - `onlyCertainMatches=true`: only `certain` ones, and none when several Patients are (R4: "if there
 *   are multiple potential matches, then the match should not return the results"), an informational
 *   issue saying so.
 */
import { FhirError, type FhirIssue } from '../errors.ts';
import type { ResourceVersion } from '../store/types.ts';
import { requireAccess } from './access.ts';
import type { CapabilityContribution } from './capability.ts';
import { validationLevel, type FhirDeps, type FhirRequest } from './crud.ts';
import { parseExact } from './exact-json.ts';
import { boundedFacts, FACTS_PER_FIELD, matchable, matchFacts, scoreMatch, type MatchFacts, type MatchScore } from './match-score.ts';
import { issue } from './outcome.ts';
import { soundex } from './indexer.ts';
import { asResource } from './resource.ts';
import { compileSearch, storeQuery } from './search.ts';
import { eachAtOnce } from './search-system.ts';
import { requireValid } from './validation/check.ts';

type Json = Record<string, unknown>;

export const matchCapability: CapabilityContribution = {
  operations: [{ name: 'match', definition: 'http://hl7.org/fhir/OperationDefinition/Patient-match', types: ['Patient'] }],
};

/** Matches returned when the request gives no `count`. */
export const DEFAULT_MATCH_COUNT = 10;
/** Most matches one call returns (a larger `count` is this). */
export const MAX_MATCH_COUNT = 100;
/** Most Patients one blocking search reads. */
export const CANDIDATES_PER_BLOCK = 100;
/** Blocking searches in flight at once. */
const BLOCKS_AT_ONCE = 4;
/** Most values of one field (identifiers, names, telecoms, addresses) that blocking searches by. */
const VALUES_PER_FIELD = 3;

export const MATCH_GRADE = 'http://hl7.org/fhir/StructureDefinition/match-grade';

export interface MatchInput {
  patient: Json;
  onlyCertainMatches: boolean;
  count: number;
}

export interface MatchResult {
  rows: { version: ResourceVersion; match: MatchScore }[];
  warnings: FhirIssue[];
}

/** The operation's input from its Parameters body; each problem a 400 naming the parameter. */
export function matchInput(body: unknown, level: Parameters<typeof requireValid>[1]): MatchInput {
  const p = body as Json | null;
  if (p === null || typeof p !== 'object' || p.resourceType !== 'Parameters') {
    throw new FhirError('invalid', 'The body of Patient/$match is a Parameters resource holding the Patient to match (resource)', { expression: ['resource'] });
  }
  const seen = new Set<string>();
  const out: Partial<MatchInput> = {};
  let at = '';
  for (const [i, item] of (Array.isArray(p.parameter) ? (p.parameter as unknown[]) : []).entries()) {
    const param = (item ?? {}) as Json;
    const name = param.name;
    const where = `Parameters.parameter[${i}]`;
    if (name !== 'resource' && name !== 'onlyCertainMatches' && name !== 'count') {
      throw new FhirError('invalid', `${where}: Patient/$match takes resource, onlyCertainMatches and count`, { expression: [where] });
    }
    if (seen.has(name)) throw new FhirError('invalid', `Patient/$match takes one '${name}' parameter`, { expression: [name] });
    seen.add(name);
    if (name === 'resource') {
      if (param.resource === undefined) throw new FhirError('required', 'The resource parameter holds the Patient to match (parameter.resource)', { expression: ['resource'] });
      const r = param.resource as Json | null;
      if (r === null || typeof r !== 'object' || r.resourceType !== 'Patient') {
        throw new FhirError('invalid', `The resource parameter must be a Patient, not ${typeof r?.resourceType === 'string' ? `a ${r.resourceType}` : 'this'}`, { expression: ['resource'] });
      }
      out.patient = r;
      at = `${where}.resource`;
    } else if (name === 'onlyCertainMatches') {
      if (typeof param.valueBoolean !== 'boolean') throw new FhirError('invalid', 'onlyCertainMatches is a boolean (valueBoolean)', { expression: ['onlyCertainMatches'] });
      out.onlyCertainMatches = param.valueBoolean;
    } else {
      const n = param.valueInteger ?? param.valuePositiveInt;
      if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) throw new FhirError('invalid', 'count is a positive integer (valueInteger)', { expression: ['count'] });
      out.count = Math.min(n, MAX_MATCH_COUNT);
    }
  }
  if (out.patient === undefined) throw new FhirError('required', 'Patient/$match needs the Patient to match: a resource parameter', { expression: ['resource'] });
  // Validated as a create validates it (at CINDER_VALIDATION): a 422 naming each element at fault.
  const patient = asResource({ ...out.patient }, 'Patient');
  requireValid(patient, level, at);
  return { patient: out.patient, onlyCertainMatches: out.onlyCertainMatches ?? false, count: out.count ?? DEFAULT_MATCH_COUNT };
}

/** A value as one search value: its `\`, `,`, `|` and `$` escaped. */
const escaped = (s: string) => s.replace(/[\\,|$]/g, (c) => `\\${c}`);

/** The blocking searches of a Patient (each its search parameters), from its JSON as given. */
export function blocks(p: Json): URLSearchParams[] {
  const arr = (v: unknown): Json[] => (Array.isArray(v) ? v.filter((x): x is Json => x !== null && typeof x === 'object') : []);
  const str = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);
  // A name searched by must hold a letter or digit: `family=-` would be no criterion at all (every Patient).
  const name = (v: unknown) => { const s = str(v); return s !== undefined && /[\p{L}\p{N}]/u.test(s) ? s : undefined; };
  const out: URLSearchParams[] = [];
  const add = (...pairs: [string, string | undefined][]) => {
    if (pairs.every(([, v]) => v !== undefined)) out.push(new URLSearchParams(pairs.map(([k, v]) => [k, escaped(v!)])));
  };
  for (const id of arr(p.identifier).slice(0, VALUES_PER_FIELD)) {
    const [system, value] = [str(id.system), str(id.value)];
    if (value === undefined) continue;
    if (system !== undefined) out.push(new URLSearchParams([['identifier', `${escaped(system)}|${escaped(value)}`]]));
    add(['identifier', value]);
  }
  const birth = str(p.birthDate);
  const birthDate = birth !== undefined && /^\d{4}(-\d{2}(-\d{2})?)?$/.test(birth) ? birth : undefined;
  for (const n of arr(p.name).slice(0, VALUES_PER_FIELD)) {
    const family = name(n.family);
    const given = name(Array.isArray(n.given) ? n.given[0] : undefined);
    add(['family', family], ['birthdate', birthDate]);
    if (family !== undefined && soundex(family) !== '') add(['phonetic', family], ['birthdate', birthDate]);
    add(['given', given], ['birthdate', birthDate]);
    add(['family', family], ['given', given]);
    // A family name with neither a given name nor a birth date: that name alone.
    if (given === undefined && birthDate === undefined) add(['family', family]);
    for (const a of arr(p.address).slice(0, VALUES_PER_FIELD)) add(['family', family], ['address-postalcode', str(a.postalCode)]);
  }
  for (const t of arr(p.telecom).slice(0, VALUES_PER_FIELD)) add(['telecom', str(t.value)]);
  return out;
}

/**
 * The Patients the token may find that match `input.patient`, most likely first (score, then grade, then
 * id), at most `input.count`; warnings say what `count` or `onlyCertainMatches` left out.
 */
export async function matchPatients(deps: FhirDeps, req: FhirRequest, input: MatchInput): Promise<MatchResult> {
  requireAccess(req.access, 'Patient', 's');
  const { facts: query, cut } = boundedFacts(matchFacts(input.patient));
  if (!matchable(query)) {
    throw new FhirError('invalid', 'The Patient to match has nothing to match by: give an identifier, a name or a telecom', { expression: ['resource'] });
  }
  const candidates = new Map<string, ResourceVersion>();
  const warnings: FhirIssue[] = [];
  if (cut.length > 0) {
    warnings.push(issue('warning', 'too-costly', `The Patient to match has more than ${FACTS_PER_FIELD} values of ${cut.join(', ')}: only the first ${FACTS_PER_FIELD} of each were compared`));
  }
  // BLOCKS_AT_ONCE blocks in flight (PostgreSQL answers them on several connections), so that one call holds few of the pool's.
  const found = await eachAtOnce(blocks(input.patient), BLOCKS_AT_ONCE, (params) => blockRows(deps, req, params));
  for (const { what, rows } of found) {
    if (rows.length > CANDIDATES_PER_BLOCK) {
      warnings.push(issue('warning', 'too-costly', `More than ${CANDIDATES_PER_BLOCK} Patients have ${what}: only ${CANDIDATES_PER_BLOCK} of them were scored`));
    }
    for (const v of rows.slice(0, CANDIDATES_PER_BLOCK)) candidates.set(v.id, v);
  }
  const scored = score(query, [...candidates.values()]);
  let rows = scored;
  if (input.onlyCertainMatches) {
    const certain = scored.filter((r) => r.match.grade === 'certain');
    rows = certain.length > 1 ? [] : certain;
    if (certain.length > 1) warnings.push(issue('information', 'multiple-matches', `${certain.length} Patients match certainly: with onlyCertainMatches none is returned`));
  }
  if (rows.length > input.count) {
    warnings.push(issue('information', 'informational', `${rows.length - input.count} more Patients matched and were left out by count (${input.count})`));
    rows = rows.slice(0, input.count);
  }
  return { rows, warnings };
}

/** One blocking search's Patients, at most CANDIDATES_PER_BLOCK + 1 (one more tells that there were more), as the token's `Patient?...` finds them. */
async function blockRows(deps: FhirDeps, req: FhirRequest, params: URLSearchParams): Promise<{ what: string; rows: ResourceVersion[] }> {
  const what = decodeURIComponent(params.toString().replace(/\+/g, ' '));
  params.set('_count', String(CANDIDATES_PER_BLOCK + 1));
  const q = await storeQuery(deps, req, 'Patient', compileSearch('Patient', params, false, deps.clock.now()));
  return { what, rows: q === undefined ? [] : await deps.store.resources.search(req.tenant, q) };
}

const RANK = { certain: 0, probable: 1, possible: 2 } as const;

function score(query: MatchFacts, versions: ResourceVersion[]): MatchResult['rows'] {
  const rows: MatchResult['rows'] = [];
  for (const version of versions) {
    const match = scoreMatch(query, matchFacts(parseExact(version.content) as Json));
    if (match !== undefined) rows.push({ version, match });
  }
  return rows.sort((a, b) => b.match.score - a.match.score || RANK[a.match.grade] - RANK[b.match.grade] || (a.version.id < b.version.id ? -1 : 1));
}

/** The `search` element of a match's entry: mode, score and the match-grade extension. */
export function matchSearch(m: MatchScore): Json {
  return { extension: [{ url: MATCH_GRADE, valueCode: m.grade }], mode: 'match', score: m.score };
}

/** `Patient/$match` with a Parameters body: its input checked (a create's validation level), then matched. */
export function matchOperation(deps: FhirDeps, req: FhirRequest, body: unknown): Promise<MatchResult> {
  return matchPatients(deps, req, matchInput(body, validationLevel(deps)));
}
