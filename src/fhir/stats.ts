/**
 * `Observation/$stats` (R4 OperationDefinition Observation-stats, observation-operation-stats.html): for
 * each code asked for, one Observation (status `final`, the code, the subject, the period asked for as
 * `effectivePeriod`) with a component per statistic, its code from
 * `http://hl7.org/fhir/observation-statistics` (src/fhir/statistics.ts defines each exactly), as a
 * Parameters resource of `statistics` (and, with `include=true`, `source`) parameters.
 *
 * - The Observations are those a search finds (so the token's scopes, SMART v2 filters and patient
 *   context apply as to `Observation?...`): `subject` the subject, `combo-code` one of the codes (in
 *   `Observation.code` or a `component.code`), `status:not=entered-in-error`, and within the period
 *   (effective[x], as the `date` search parameter indexes it, overlapping the period or the duration's
 *   hours: an Observation across either side counts); at most MAX_SOURCES, or a 422.
 * - For a code, an Observation whose `code` holds it gives its `valueQuantity`, and each component whose
 *   `code` holds it gives that component's: the values. A panel (an Observation of the code with
 *   components or `hasMember`) gives one statistics Observation per measurement code instead
 *   (src/fhir/stats-groups.ts); its members are read as a search by `_id` reads them. `total-count` is
 *   the number of Observations holding the code; `count` the number of values with a `value`; the
 *   others are over those values.
 * - Units: the values of one code must share their unit (UCUM `system` and `code`, or else the `unit`
 *   text): values of several units are not converted, and make the request a 422 naming the units.
 *   Value statistics carry that unit; `variance` its square as text; `count` and `total-count` are
 *   integers; `skew` and `kurtosis` have no unit. A statistic that is not defined for the values (any of
 *   no values, skew and kurtosis of values that do not vary, one whose value is no double) is left out.
 * - `regression` is refused (400): a gradient over time needs a unit of time R4 does not fix.
 */
import { FhirError } from '../errors.ts';
import type { Condition, ResourceVersion } from '../store/types.ts';
import { requireAccess } from './access.ts';
import type { CapabilityContribution } from './capability.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { parseExact, refreshLiterals, stringifyExact } from './exact-json.ts';
import { compileSearch, storeQuery } from './search.ts';
import { groupsOf, memberKeys, type Observation, type Quantity, type StatsGroup } from './stats-groups.ts';
import { statsInput, type StatsInput } from './stats-input.ts';
import { parseReference } from './references.ts';
import { NUMERIC_STATISTICS, statistic } from './statistics.ts';

export const statsCapability: CapabilityContribution = {
  operations: [{ name: 'stats', definition: 'http://hl7.org/fhir/OperationDefinition/Observation-stats', types: ['Observation'] }],
};

/** Most Observations one call reads; more is a 422 asking for a narrower period. */
export const MAX_SOURCES = 10_000;

const STATISTICS_SYSTEM = 'http://hl7.org/fhir/observation-statistics';

/** A search value: `\`, `,`, `|` and `$` escaped. */
const escaped = (s: string) => s.replace(/[\\,|$]/g, (c) => `\\${c}`);

/** The Observations of the request, as a search of them finds them, newest first. */
async function sources(deps: FhirDeps, req: FhirRequest, input: StatsInput): Promise<ResourceVersion[]> {
  const q = new URLSearchParams({ subject: input.subject, 'status:not': 'entered-in-error', _sort: '-date,-_lastUpdated' });
  q.set('combo-code', input.codes.map((c) => (c.system === undefined ? escaped(c.code) : `${escaped(c.system)}|${escaped(c.code)}`)).join(','));
  const compiled = compileSearch('Observation', q, true, deps.clock.now());
  if (input.period !== undefined) compiled.pending.push(overlapping(input.period));
  const query = await storeQuery(deps, req, 'Observation', compiled);
  if (query === undefined) return [];
  const rows = await deps.store.resources.search(req.tenant, { ...query, count: MAX_SOURCES + 1 });
  if (rows.length > MAX_SOURCES) throw tooMany();
  return rows;
}

/**
 * The Observations whose effective time (the `date` parameter's [low, high)) overlaps the period: ending
 * after its start and starting before its end, each side at its precision (`2026-03-31` ends with that
 * day). Not `date=ge..&date=le..`, which leave out an Observation across either side's day.
 */
function overlapping(period: NonNullable<StatsInput['period']>): Condition {
  const { low, high } = period;
  if (low !== undefined && high !== undefined) return { kind: 'date', param: 'date', tests: [{ op: 'ap', low, high }] };
  // One side: `gt` (stored high > the test's high) or `lt` (stored low < the test's low) on the instant.
  const at = (low ?? high)!;
  return { kind: 'date', param: 'date', tests: [{ op: low !== undefined ? 'gt' : 'lt', low: at, high: at }] };
}

const tooMany = () => new FhirError('unprocessable', `$stats would read more than ${MAX_SOURCES} Observations: narrow it by period or duration`, { issueCode: 'too-costly', expression: ['period'] });

/** A statistic's value element: counts as integers, the others as quantities in the values' unit. */
function valueOf(code: string, value: number, unit: Quantity | undefined): Record<string, unknown> {
  if (code === 'count' || code === 'total-count') return { valueInteger: value };
  if (code === 'skew' || code === 'kurtosis' || unit === undefined) return { valueQuantity: { value } };
  const text = unit.unit ?? unit.code;
  if (code === 'variance') return { valueQuantity: { value, ...(text !== undefined && { unit: `(${text})^2` }) } };
  return { valueQuantity: { value, ...(text !== undefined && { unit: text }), ...(unit.system !== undefined && { system: unit.system }), ...(unit.code !== undefined && { code: unit.code }) } };
}

/** The statistics Observation of one group. */
function statisticsObservation(input: StatsInput, g: StatsGroup): Record<string, unknown> {
  const unit = [...g.units.values()][0];
  const component: Record<string, unknown>[] = [];
  for (const code of input.statistics) {
    const value = code === 'total-count' ? g.total : statistic(code, g.values);
    if (value === undefined) continue;
    const display = code === 'total-count' ? 'Total Count' : NUMERIC_STATISTICS[code];
    component.push({ code: { coding: [{ system: STATISTICS_SYSTEM, code, display }] }, ...valueOf(code, value, unit) });
  }
  const effective = input.period && { effectivePeriod: { ...(input.period.start !== undefined && { start: input.period.start }), ...(input.period.end !== undefined && { end: input.period.end }) } };
  return {
    resourceType: 'Observation', status: 'final',
    code: { coding: [{ ...(g.code.system !== undefined && { system: g.code.system }), code: g.code.code, ...(g.code.display !== undefined && { display: g.code.display }) }] },
    subject: { reference: input.subject }, ...effective,
    ...(component.length > 0 && { component }),
  };
}

/**
 * The members (`hasMember`) of the panels among `observations` that the request may read, as a search
 * of them by `_id` finds them (entered-in-error left out), by `Observation/{id}`; a member out of reach,
 * deleted or another server's is not counted.
 */
async function membersOf(deps: FhirDeps, req: FhirRequest, observations: Observation[], member: (reference: string) => string | undefined): Promise<Map<string, Observation>> {
  const ids = [...new Set(observations.flatMap((o) => memberKeys(o, member)))].map((k) => k.slice('Observation/'.length));
  if (ids.length + observations.length > MAX_SOURCES) throw tooMany();
  const out = new Map<string, Observation>();
  for (let i = 0; i < ids.length; i += MEMBER_CHUNK) {
    const q = new URLSearchParams({ _id: ids.slice(i, i + MEMBER_CHUNK).join(','), 'status:not': 'entered-in-error' });
    const query = await storeQuery(deps, req, 'Observation', compileSearch('Observation', q, true, deps.clock.now()));
    if (query === undefined) return out;
    for (const r of await deps.store.resources.search(req.tenant, { ...query, count: MEMBER_CHUNK })) out.set(`Observation/${r.id}`, parseExact(r.content) as Observation);
  }
  return out;
}

/** Ids per search of the panels' members. */
const MEMBER_CHUNK = 100;

/** `$stats` on the parameters given (a GET's query, or a POST's Parameters then its query); `base`: the tenant's FHIR base. */
export async function observationStats(deps: FhirDeps, req: FhirRequest, params: URLSearchParams, base: string, strict: boolean): Promise<string> {
  requireAccess(req.access, 'Observation', 's');
  const input = statsInput(params, base, deps.clock.now(), strict);
  const rows = await sources(deps, req, input);
  // Parsed exactly: a source keeps its decimals as written.
  const observations = rows.map((r) => parseExact(r.content) as Observation);
  const member = (reference: string) => {
    const ref = parseReference(reference, base);
    return ref?.type === 'Observation' && ref.version === undefined ? `Observation/${ref.id}` : undefined;
  };
  const members = await membersOf(deps, req, observations, member);
  const parameter: Record<string, unknown>[] = input.codes.flatMap((c) => groupsOf(observations, c, members, member).map((g) => ({ name: 'statistics', resource: statisticsObservation(input, g) })));
  if (input.include) {
    // The Observations read, newest first, then the panels' members.
    const all = [...observations, ...members.values()];
    const included = input.limit === undefined ? all : all.slice(0, input.limit);
    for (const o of included) parameter.push({ name: 'source', resource: o });
  }
  const out = { resourceType: 'Parameters', parameter };
  // The sources' literals are marked up to the Parameters, which stringifyExact looks for there.
  if (input.include) refreshLiterals(out);
  return stringifyExact(out);
}
