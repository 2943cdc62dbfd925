/**
 * `Observation/$lastn` (R4 OperationDefinition Observation-lastn, observation-operation-lastn.html): for
 * each patient or subject asked for, the most recent `max` (default 1) Observations of each code that
 * meet the request's other Observation search parameters, as one searchset Bundle.
 *
 * - The request names its subjects by `patient` (`id` or `Patient/id`) or `subject` (`Type/id`), a
 *   comma-separated list of at most MAX_SUBJECTS of them, or, for a token bound to one patient, none (that patient); and a
 *   `category` and/or a code parameter (`code`, `combo-code`, `code-value-*`), as R4 requires. `max`
 *   is 1 to MAX_PER_CODE. Search's result parameters (`_sort`, `_count`, `_include`...) are not taken:
 *   ignored with a warning, or a 400 under `Prefer: handling=strict`.
 * - Groups ("GROUP BY Observation.code"): codings are the same code when their system and code are; an
 *   Observation holding several codings joins their groups into one (R4's table: a | b | a,c is two
 *   groups). The groups of a subject are those of the Observations the request matches (R4 groups the
 *   query's Observations), read from the index (ResourceRepo.codingPairs: the distinct pairs of codings
 *   they hold together, never the Observations; its `matching` keeps those the request's search, its
 *   access conditions included, selects, or, when nothing but a plain `category` narrows it, `also`
 *   reads those of the category), and joined with a union-find. Codes of text alone (no coding with a code) are grouped by their text as written
 *   (R4: 'textM', 'Text' and 't e x t' are three groups), after the coded groups, by text.
 * - Each group is then one search: the request's parameters, the subject, `code` = the group's codings
 *   (a text group: its text, exactly, in the `code:text` rows),
 *   sorted `-date,-_lastUpdated` with `_count=max`: the most recent by effective[x] (a period or a
 *   partial date by the end of its range, an open period as ongoing, hence the most recent), those
 *   without effective[x] after every one with it, ties by the last update (the latest first), then id.
 *   A page is so bounded by the groups' count times `max`, and each group's search by the index; the
 *   access checks, scope filters and patient context are a search's.
 * - Matches come subject after subject (in the order asked), each subject's groups by their first
 *   coding (system, then code), each group's newest first.
 */
import { FhirError, type FhirIssue } from '../errors.ts';
import type { CodingPair, CodingPairsQuery, ResourceVersion } from '../store/types.ts';
import { requireAccess } from './access.ts';
import type { CapabilityContribution } from './capability.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { issue } from './outcome.ts';
import { ID_PATTERN, isResourceType } from './resource-types.ts';
import { compileSearch, CONTROL, storeQuery } from './search.ts';

export const lastnCapability: CapabilityContribution = {
  operations: [{ name: 'lastn', definition: 'http://hl7.org/fhir/OperationDefinition/Observation-lastn', types: ['Observation'] }],
};

/** Most Observations of one group a call returns (`max`). */
export const MAX_PER_CODE = 1000;
/**
 * Most groups (codes) of one call, over all its subjects: each is a search (about 10 ms on PostgreSQL
 * for a large patient); more is a 422 asking for a narrower `code` or `category`.
 */
export const MAX_GROUPS = 1000;
/** Most Observations one call returns (groups times `max` over the subjects); more is a 422. */
export const MAX_RESULTS = 10_000;
/**
 * Most subjects of one call: each costs its index reads (some tens of milliseconds on PostgreSQL) even
 * when it has no Observation, and so no group, and a POSTed list of them is bounded only by the body's
 * size (16 MB: some two million subjects); more is a 422.
 */
export const MAX_SUBJECTS = 100;

/** The code parameters one of which (or `category`) R4 requires. */
const CODE_PARAMS = new Set(['category', 'code', 'combo-code', 'code-value-concept', 'code-value-date', 'code-value-quantity', 'code-value-string']);

export interface LastnResult {
  rows: ResourceVersion[];
  warnings: FhirIssue[];
  /** The parameters the Bundle's `self` link carries. */
  self: URLSearchParams;
}

/** A value as one search value: its `\`, `,`, `|` and `$` escaped. */
const escaped = (s: string) => s.replace(/[\\,|$]/g, (c) => `\\${c}`);

/** `max`: a positive integer up to MAX_PER_CODE, 1 when absent. */
function maxOf(params: URLSearchParams): number {
  const all = params.getAll('max');
  if (all.length === 0) return 1;
  const raw = all[0]!;
  if (all.length > 1 || !/^0*[1-9]\d{0,6}$/.test(raw) || Number(raw) > MAX_PER_CODE) {
    throw new FhirError('invalid', `Invalid max '${all.join(',')}': a positive integer up to ${MAX_PER_CODE}, once`, { expression: ['max'] });
  }
  return Number(raw);
}

/** The subjects asked for (`Type/id`): `patient` or `subject`, or the token's patient. */
function subjectsOf(req: FhirRequest, params: URLSearchParams): string[] {
  const keys = [...new Set(params.keys())].filter((k) => /^(patient|subject)([:.]|$)/.test(k));
  if (keys.length === 0) {
    const bound = req.access.patientLimit('Observation', 'r') ?? req.access.patientLimit('Observation', 's');
    if (bound !== undefined) return [`Patient/${bound}`];
    throw new FhirError('required', '$lastn needs the patient or subject whose Observations it reads (patient=id or subject=Type/id)', { expression: ['patient'] });
  }
  if (keys.length > 1 || params.getAll(keys[0]!).length > 1 || (keys[0] !== 'patient' && keys[0] !== 'subject')) {
    throw new FhirError('invalid', '$lastn takes one patient or subject parameter (without modifiers or chains): a comma-separated list of subjects', { expression: [keys[0]!] });
  }
  const key = keys[0]!;
  const listed = params.get(key)!.split(',');
  if (listed.length > MAX_SUBJECTS) {
    throw new FhirError('unprocessable', `$lastn reads at most ${MAX_SUBJECTS} subjects a call, not ${listed.length}: ask for them in several calls`, { issueCode: 'too-costly', expression: [key] });
  }
  // A subject named twice is read once.
  return [...new Set(listed.map((raw) => {
    const v = raw.trim();
    const [type, id] = v.includes('/') ? v.split('/', 2) as [string, string] : ['Patient', v];
    if ((key === 'patient' && type !== 'Patient') || (key === 'subject' && !v.includes('/')) || !isResourceType(type) || !ID_PATTERN.test(id)) {
      throw new FhirError('invalid', `Invalid ${key} '${v}': ${key === 'patient' ? 'an id or Patient/id' : 'Type/id'}`, { expression: [key] });
    }
    return `${type}/${id}`;
  }))];
}

/**
 * The groups of codings (each sorted, by system then code) that these pairs join, in order of their first coding.
 * A coding of a system without a code (its token row has an empty value: indexer.ts tokenValues) is no code: it
 * forms and joins no group (as a group's search, `system|` would find every code of the system).
 */
export function groupsOf(pairs: CodingPair[]): string[][] {
  const parent = new Map<string, string>();
  const find = (x: string): string => {
    let r = x;
    while (parent.get(r) !== r) r = parent.get(r)!;
    parent.set(x, r);
    return r;
  };
  const key = (system: string, value: string) => `${escaped(system)}|${escaped(value)}`;
  for (const p of pairs) {
    if (p.value1 === '' && p.value2 === '') continue;
    const a = p.value1 === '' ? key(p.system2, p.value2) : key(p.system1, p.value1);
    const b = p.value2 === '' ? a : key(p.system2, p.value2);
    if (!parent.has(a)) parent.set(a, a);
    if (!parent.has(b)) parent.set(b, b);
    const [ra, rb] = [find(a), find(b)];
    if (ra !== rb) parent.set(ra < rb ? rb : ra, ra < rb ? ra : rb);
  }
  const groups = new Map<string, string[]>();
  for (const k of parent.keys()) {
    const r = find(k);
    (groups.get(r) ?? groups.set(r, []).get(r)!).push(k);
  }
  return [...groups.values()].map((g) => g.sort()).sort((a, b) => (a[0]! < b[0]! ? -1 : 1));
}

/** The request's search parameters for each group's search: all but the operation's own and search's result parameters. */
function filters(params: URLSearchParams, strict: boolean, warnings: FhirIssue[]): URLSearchParams {
  const out = new URLSearchParams();
  for (const [key, value] of params) {
    const name = key.split(':', 1)[0]!;
    if (key === 'max' || /^(patient|subject)$/.test(key) || name === '_format' || name === '_pretty') continue;
    if (CONTROL.has(name)) {
      const what = `'${key}' is not a parameter of $lastn (its order and size are the operation's)`;
      if (strict) throw new FhirError('not-supported', what, { expression: [key] });
      if (!warnings.some((w) => w.expression?.[0] === key)) warnings.push(issue('warning', 'not-supported', `${what} and was ignored`, [key]));
      continue;
    }
    out.append(key, value);
  }
  return out;
}

/**
 * A plain `category` parameter's codes (`code`, `system|code`, `|code`): the groups are read from the
 * Observations holding one of them alone (codingPairs' `also`, a superset of the search's matches), so
 * that no group of another category costs a search. Modifiers, several `category` parameters or escapes
 * leave it out (every Observation of the subject is read).
 */
function categories(params: URLSearchParams): { also?: { param: string; values: string[] } } {
  const keys = [...params.keys()].filter((k) => k.split(/[:.]/, 1)[0] === 'category');
  const raw = params.getAll('category');
  if (keys.length !== 1 || keys[0] !== 'category' || raw.length !== 1 || raw[0]!.includes('\\')) return {};
  const values = raw[0]!.split(',').map((v) => v.slice(v.lastIndexOf('|') + 1));
  return values.every((v) => v !== '') ? { also: { param: 'category', values } } : {};
}

/**
 * What a search of the request's parameters for `subject` selects (its conditions, access and patient
 * context included), as codingPairs' `matching`, so that the groups are those of the matches (R4: the
 * query's Observations grouped by code); undefined when nothing narrows it but the subject and a plain
 * category (`categorised`: codingPairs' `also`), the index's read of every Observation of the subject;
 * null when the token can see none of them.
 */
async function matchingOf(
  deps: FhirDeps, req: FhirRequest, where: URLSearchParams, subject: string, categorised: boolean, strict: boolean, warnings: FhirIssue[],
): Promise<CodingPairsQuery['matching'] | null> {
  const q = new URLSearchParams(where);
  q.set('subject', subject);
  const compiled = compileSearch('Observation', q, strict, deps.clock.now());
  for (const w of compiled.warnings) if (!warnings.some((x) => x.diagnostics === w.diagnostics)) warnings.push(w);
  const query = await storeQuery(deps, req, 'Observation', compiled);
  if (query === undefined) return null;
  const conditions = (query.where ?? []).filter((c) => !(c.kind === 'or' && c.implied === true));
  if (query.compartment === undefined && conditions.length <= (categorised ? 2 : 1)) return undefined;
  return { where: conditions, ...(query.compartment !== undefined && { compartment: query.compartment }) };
}

/** A group: codes (`system|code`, escaped as search values), or the text of codes of text alone. */
type Group = { codes: string[] } | { text: string };

/**
 * The most recent `max` Observations of `subject` in `group` that the request's parameters (`where`)
 * keep, as a search of them finds them (access, scope filters and patient context included): the
 * group's codes as a `code` parameter, or its text as an exact test of the `code:text` rows, which only
 * codes of text alone have.
 */
async function groupRows(
  deps: FhirDeps, req: FhirRequest, where: URLSearchParams, subject: string, group: Group, max: number, strict: boolean, warnings: FhirIssue[],
): Promise<ResourceVersion[]> {
  const q = new URLSearchParams(where);
  q.set('subject', subject);
  if ('codes' in group) q.append('code', group.codes.join(','));
  q.set('_sort', '-date,-_lastUpdated');
  q.set('_count', String(max));
  const compiled = compileSearch('Observation', q, strict, deps.clock.now());
  if ('text' in group) compiled.pending.push({ kind: 'string', param: 'code:text', values: [{ value: group.text, match: 'exact' }] });
  for (const w of compiled.warnings) if (!warnings.some((x) => x.diagnostics === w.diagnostics)) warnings.push(w);
  const query = await storeQuery(deps, req, 'Observation', compiled);
  return query === undefined ? [] : deps.store.resources.search(req.tenant, query);
}

export async function lastn(deps: FhirDeps, req: FhirRequest, params: URLSearchParams, strict: boolean): Promise<LastnResult> {
  requireAccess(req.access, 'Observation', 's');
  const max = maxOf(params);
  const subjects = subjectsOf(req, params);
  if (![...params.keys()].some((k) => CODE_PARAMS.has(k.split(/[:.]/, 1)[0]!))) {
    throw new FhirError('required', '$lastn needs a category and/or a code parameter (code, combo-code, code-value-*)', { expression: ['category'] });
  }
  const warnings: FhirIssue[] = [];
  const where = filters(params, strict, warnings);
  // The link repeats the request but for search's result parameters, which were not taken.
  const self = new URLSearchParams([...params].filter(([k]) => !CONTROL.has(k.split(':', 1)[0]!) || k === '_format' || k === '_pretty'));
  // Every subject's groups first (index reads alone), so that a call past the bounds is refused before
  // any of its searches: one search per group, each subject's groups counted together.
  const planned: { subject: string; groups: Group[] }[] = [];
  let total = 0;
  const also = categories(params);
  for (const subject of subjects) {
    const [target, id] = subject.split('/') as [string, string];
    const matching = await matchingOf(deps, req, where, subject, also.also !== undefined, strict, warnings);
    const read = { type: 'Observation', param: 'code', via: { param: 'subject', target, id }, ...(matching ? { matching } : also) };
    const pairs = matching === null ? [] : await deps.store.resources.codingPairs(req.tenant, read, MAX_GROUPS * 4 + 1);
    const texts = matching === null ? [] : await deps.store.resources.codeTexts(req.tenant, read, MAX_GROUPS + 1);
    const groups: Group[] = [...groupsOf(pairs).map((codes) => ({ codes })), ...texts.sort().map((text) => ({ text }))];
    total += groups.length;
    if (pairs.length > MAX_GROUPS * 4 || total > MAX_GROUPS || total * max > MAX_RESULTS) {
      throw new FhirError('unprocessable', `$lastn would return too many Observations (${subjects.length > 1 ? `its subjects have ${total}` : `${subject} has ${groups.length}`} or more codes; at most ${MAX_GROUPS} codes and ${MAX_RESULTS} Observations a call): narrow it by category or code, or lower max`, { issueCode: 'too-costly', expression: ['code'] });
    }
    planned.push({ subject, groups });
  }
  const rows: ResourceVersion[] = [];
  for (const { subject, groups } of planned) {
    for (const group of groups) rows.push(...(await groupRows(deps, req, where, subject, group, max, strict, warnings)));
  }
  return { rows, warnings, self };
}
