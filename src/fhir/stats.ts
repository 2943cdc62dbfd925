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
 *   (`date`, as that search parameter matches effective[x]); at most MAX_SOURCES, or a 422.
 * - For a code, an Observation whose `code` holds it gives its `valueQuantity`, and each component whose
 *   `code` holds it gives that component's: the values. `total-count` is the number of Observations
 *   holding the code; `count` the number of values with a `value`; the others are over those values.
 * - Units: the values of one code must share their unit (UCUM `system` and `code`, or else the `unit`
 *   text): values of several units are not converted, and make the request a 422 naming the units.
 *   Value statistics carry that unit; `variance` its square as text; `count` and `total-count` are
 *   integers; `skew` and `kurtosis` have no unit. A statistic that is not defined for the values (any of
 *   no values, skew and kurtosis of values that do not vary) is left out.
 * - `regression` is refused (400): a gradient over time needs a unit of time R4 does not fix.
 */
import { FhirError } from '../errors.ts';
import type { ResourceVersion } from '../store/types.ts';
import { requireAccess } from './access.ts';
import type { CapabilityContribution } from './capability.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { parseExact, stringifyExact } from './exact-json.ts';
import { compileSearch, storeQuery } from './search.ts';
import { statsInput, type StatsCode, type StatsInput } from './stats-input.ts';
import { NUMERIC_STATISTICS, statistic } from './statistics.ts';

export const statsCapability: CapabilityContribution = {
  operations: [{ name: 'stats', definition: 'http://hl7.org/fhir/OperationDefinition/Observation-stats', types: ['Observation'] }],
};

/** Most Observations one call reads; more is a 422 asking for a narrower period. */
export const MAX_SOURCES = 10_000;

const STATISTICS_SYSTEM = 'http://hl7.org/fhir/observation-statistics';

interface Coding { system?: string; code?: string }
interface Quantity { value?: number; unit?: string; system?: string; code?: string }
interface Observation { code?: { coding?: Coding[] }; valueQuantity?: Quantity; component?: { code?: { coding?: Coding[] }; valueQuantity?: Quantity }[] }

/** A search value: `\`, `,`, `|` and `$` escaped. */
const escaped = (s: string) => s.replace(/[\\,|$]/g, (c) => `\\${c}`);

const holds = (concept: { coding?: Coding[] } | undefined, c: StatsCode) =>
  (concept?.coding ?? []).some((x) => x.code === c.code && (c.system === undefined || x.system === c.system));

/** The Observations of the request, as a search of them finds them, newest first. */
async function sources(deps: FhirDeps, req: FhirRequest, input: StatsInput): Promise<ResourceVersion[]> {
  const q = new URLSearchParams({ subject: input.subject, 'status:not': 'entered-in-error', _sort: '-date,-_lastUpdated' });
  q.set('combo-code', input.codes.map((c) => (c.system === undefined ? escaped(c.code) : `${escaped(c.system)}|${escaped(c.code)}`)).join(','));
  if (input.period?.start !== undefined) q.append('date', `ge${input.period.start}`);
  if (input.period?.end !== undefined) q.append('date', `le${input.period.end}`);
  const query = await storeQuery(deps, req, 'Observation', compileSearch('Observation', q, true, deps.clock.now()));
  if (query === undefined) return [];
  const rows = await deps.store.resources.search(req.tenant, { ...query, count: MAX_SOURCES + 1 });
  if (rows.length > MAX_SOURCES) {
    throw new FhirError('unprocessable', `$stats would read more than ${MAX_SOURCES} Observations: narrow it by period or duration`, { issueCode: 'too-costly', expression: ['period'] });
  }
  return rows;
}

/** A quantity's unit: its UCUM (or other system's) code, else its text. */
function unitKey(q: Quantity): string {
  return q.code !== undefined ? `${q.system ?? ''}|${q.code}` : `|${q.unit ?? ''}`;
}

/** The values of code `c` in `observations`: how many hold it, the numbers and their one unit. */
function valuesOf(observations: Observation[], c: StatsCode): { total: number; values: number[]; unit?: Quantity } {
  let total = 0;
  const values: number[] = [];
  const units = new Map<string, Quantity>();
  for (const o of observations) {
    const quantities: (Quantity | undefined)[] = [];
    if (holds(o.code, c)) quantities.push(o.valueQuantity);
    for (const comp of o.component ?? []) if (holds(comp.code, c)) quantities.push(comp.valueQuantity);
    if (quantities.length === 0) continue;
    total++;
    for (const q of quantities) {
      if (typeof q?.value !== 'number') continue;
      values.push(q.value);
      units.set(unitKey(q), q);
    }
  }
  if (units.size > 1) {
    const named = [...units.values()].map((q) => q.code ?? q.unit ?? '(none)').sort().join(', ');
    throw new FhirError('unprocessable', `The values of ${c.system === undefined ? '' : `${c.system}|`}${c.code} are in several units (${named}): $stats does not convert them; ask for a period or code of one unit`, { expression: ['code'] });
  }
  const unit = [...units.values()][0];
  return { total, values, ...(unit && { unit }) };
}

/** A statistic's value element: counts as integers, the others as quantities in the values' unit. */
function valueOf(code: string, value: number, unit: Quantity | undefined): Record<string, unknown> {
  if (code === 'count' || code === 'total-count') return { valueInteger: value };
  if (code === 'skew' || code === 'kurtosis' || unit === undefined) return { valueQuantity: { value } };
  const text = unit.unit ?? unit.code;
  if (code === 'variance') return { valueQuantity: { value, ...(text !== undefined && { unit: `(${text})^2` }) } };
  return { valueQuantity: { value, ...(text !== undefined && { unit: text }), ...(unit.system !== undefined && { system: unit.system }), ...(unit.code !== undefined && { code: unit.code }) } };
}

/** The statistics Observation of code `c`. */
function statisticsObservation(input: StatsInput, observations: Observation[], c: StatsCode): Record<string, unknown> {
  const { total, values, unit } = valuesOf(observations, c);
  const component: Record<string, unknown>[] = [];
  for (const code of input.statistics) {
    const value = code === 'total-count' ? total : statistic(code, values);
    if (value === undefined) continue;
    const display = code === 'total-count' ? 'Total Count' : NUMERIC_STATISTICS[code];
    component.push({ code: { coding: [{ system: STATISTICS_SYSTEM, code, display }] }, ...valueOf(code, value, unit) });
  }
  const effective = input.period && { effectivePeriod: { ...(input.period.start !== undefined && { start: input.period.start }), ...(input.period.end !== undefined && { end: input.period.end }) } };
  return {
    resourceType: 'Observation', status: 'final',
    code: { coding: [{ ...(c.system !== undefined && { system: c.system }), code: c.code }] },
    subject: { reference: input.subject }, ...effective,
    ...(component.length > 0 && { component }),
  };
}

/** `$stats` on the parameters given (a GET's query, or a POST's Parameters then its query); `base`: the tenant's FHIR base. */
export async function observationStats(deps: FhirDeps, req: FhirRequest, params: URLSearchParams, base: string): Promise<string> {
  requireAccess(req.access, 'Observation', 's');
  const input = statsInput(params, base, deps.clock.now());
  const rows = await sources(deps, req, input);
  // Parsed exactly: a source keeps its decimals as written.
  const observations = rows.map((r) => parseExact(r.content) as Observation);
  const parameter: Record<string, unknown>[] = input.codes.map((c) => ({ name: 'statistics', resource: statisticsObservation(input, observations, c) }));
  if (input.include) {
    const included = input.limit === undefined ? observations : observations.slice(0, input.limit);
    for (const o of included) parameter.push({ name: 'source', resource: o });
  }
  return stringifyExact({ resourceType: 'Parameters', parameter });
}
