/**
 * The input of `Observation/$stats` (R4 OperationDefinition Observation-stats), from a GET's query or a
 * POSTed Parameters resource (then the URL's query after it), checked once: each error a 400 naming its
 * parameter. src/fhir/stats.ts computes.
 *
 * - `subject` (`Type/id`, or its URL under the tenant's base) or `patient` (`id` or `Patient/id`), one.
 * - The codes: `code` (one or more, or comma-separated) with an optional `system` (without one, a code of
 *   any system), and/or `coding` (a Coding; by GET `system|code`). At least one, at most MAX_CODES.
 * - `duration` (hours before now, a positive decimal) or `period` (a Period; by GET `start,end`, either
 *   side may be empty), not both.
 * - `statistic` (one or more, or comma-separated): StatisticsCode codes; `include`, `limit`.
 */
import { FhirError } from '../errors.ts';
import { parseReference } from './references.ts';
import { ID_PATTERN } from './resource-types.ts';
import { NUMERIC_STATISTICS } from './statistics.ts';
import { dateTest } from './search-compile.ts';
import { unknownParameters } from './operation-params.ts';

/** A requested code: `system` undefined matches a code of any system. */
export interface StatsCode {
  system?: string;
  code: string;
}

export interface StatsInput {
  /** `Type/id`. */
  subject: string;
  codes: StatsCode[];
  /** The effective period (ms since the epoch; an open side undefined), with its text as given. */
  period?: { low?: number; high?: number; start?: string; end?: string };
  statistics: string[];
  include: boolean;
  limit?: number;
}

/** The StatisticsCode codes $stats answers, in R4's order; `regression` is not one (stats.ts). */
export const STATISTICS = [...Object.keys(NUMERIC_STATISTICS).slice(0, 4), 'total-count', ...Object.keys(NUMERIC_STATISTICS).slice(4)];

/**
 * Most distinct codes of one call: they are searched together (stats.ts, `combo-code`: two search values
 * each, beside the subject, the status and a period's two, of a search's 1,000), and more was refused as
 * a search's count of values, naming no parameter.
 */
export const MAX_CODES = 498;

const NAMES = ['subject', 'patient', 'code', 'system', 'coding', 'duration', 'period', 'statistic', 'include', 'limit'];

const bad = (name: string, text: string) => new FhirError('invalid', text, { expression: [name] });

/** A POSTed parameter's value as the text its GET form takes. */
function valueText(item: Record<string, unknown>, i: number): [string, string] {
  const name = item.name;
  const at = `Parameters.parameter[${i}]`;
  const values = Object.entries(item).filter(([k]) => k.startsWith('value'));
  if (typeof name !== 'string' || values.length !== 1) throw bad(at, `${at} must have a name and one value`);
  const [key, value] = values[0]!;
  // A Coding or a Period is an object whose members are strings: another value is refused, never read as a code or dropped.
  const members = (names: string[]) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw bad(`${at}.${key}`, `${at}.${key} must be a ${key.slice(5)}`);
    const m = value as Record<string, unknown>;
    for (const n of names) if (m[n] !== undefined && typeof m[n] !== 'string') throw bad(`${at}.${key}.${n}`, `${at}.${key}.${n} must be a string`);
    return m as Record<string, string | undefined>;
  };
  if (key === 'valueCoding') {
    const c = members(['system', 'code']);
    if (c.code === undefined) throw bad(name, `${at}: a coding needs a code`);
    return [name, `${c.system ?? ''}|${c.code}`];
  }
  if (key === 'valuePeriod') {
    const p = members(['start', 'end']);
    return [name, `${p.start ?? ''},${p.end ?? ''}`];
  }
  if (!['string', 'number', 'boolean'].includes(typeof value)) throw bad(at, `${at} must have a primitive value, a Coding or a Period`);
  return [name, String(value)];
}

/** The parameters of a POSTed Parameters resource, then the URL's. */
export function statsParams(query: URLSearchParams, body: unknown): URLSearchParams {
  if (body === undefined) return query;
  const p = body as { resourceType?: unknown; parameter?: unknown };
  if (p === null || typeof p !== 'object' || p.resourceType !== 'Parameters') throw new FhirError('invalid', 'The body of an operation is a Parameters resource');
  const out = new URLSearchParams();
  for (const [i, item] of (Array.isArray(p.parameter) ? p.parameter : []).entries()) out.append(...valueText((item ?? {}) as Record<string, unknown>, i));
  for (const [k, v] of query) out.append(k, v);
  return out;
}

/** All values of `name`, commas splitting them where `split`. */
const all = (params: URLSearchParams, name: string, split = true) => params.getAll(name).flatMap((v) => (split ? v.split(',') : [v])).map((v) => v.trim());

function one(params: URLSearchParams, name: string): string | undefined {
  const values = params.getAll(name);
  if (values.length > 1) throw bad(name, `$stats takes at most one '${name}' parameter`);
  return values[0];
}

function subjectOf(params: URLSearchParams, base: string): string {
  const subject = one(params, 'subject');
  const patient = one(params, 'patient');
  if ((subject === undefined) === (patient === undefined)) {
    throw new FhirError('required', '$stats needs the subject of the Observations: subject=Type/id or patient=id, one of them', { expression: ['subject'] });
  }
  if (patient !== undefined) {
    const id = patient.startsWith('Patient/') ? patient.slice(8) : patient;
    if (!ID_PATTERN.test(id)) throw bad('patient', `Invalid patient '${patient}': an id or Patient/id`);
    return `Patient/${id}`;
  }
  const ref = parseReference(subject!, base);
  if (ref === null || ref.version !== undefined) throw bad('subject', `Invalid subject '${subject}': Type/id of this server's resource`);
  return `${ref.type}/${ref.id}`;
}

function codesOf(params: URLSearchParams): StatsCode[] {
  const system = one(params, 'system');
  if (system !== undefined && system === '') throw bad('system', 'system is empty');
  const codes: StatsCode[] = all(params, 'code').map((code) => {
    if (code === '') throw bad('code', 'A code is empty');
    return system === undefined ? { code } : { system, code };
  });
  if (system !== undefined && codes.length === 0) throw bad('system', "'system' is given without a 'code'");
  for (const raw of all(params, 'coding', false)) {
    const bar = raw.indexOf('|');
    const [s, code] = bar < 0 ? ['', raw] : [raw.slice(0, bar), raw.slice(bar + 1)];
    if (code === '' || code.includes('|')) throw bad('coding', `Invalid coding '${raw}': system|code`);
    codes.push(s === '' ? { code } : { system: s, code });
  }
  if (codes.length === 0) throw new FhirError('required', '$stats needs the codes it computes statistics of: code (with system) or coding', { expression: ['code'] });
  const seen = new Set<string>();
  const distinct = codes.filter((c) => !seen.has(`${c.system ?? ''}|${c.code}`) && seen.add(`${c.system ?? ''}|${c.code}`));
  if (distinct.length > MAX_CODES) {
    throw new FhirError('invalid', `$stats takes at most ${MAX_CODES} codes a call, not ${distinct.length}: ask for them in several calls`, { issueCode: 'too-costly', expression: ['code'] });
  }
  return distinct;
}

/** 0001-01-01T00:00:00Z, the earliest instant a FHIR dateTime writes. */
const EARLIEST = Date.parse('0001-01-01T00:00:00Z');

function periodOf(params: URLSearchParams, now: number): StatsInput['period'] {
  const duration = one(params, 'duration');
  const period = one(params, 'period');
  if (duration !== undefined && period !== undefined) throw bad('period', "$stats takes 'duration' or 'period', not both");
  if (duration !== undefined) {
    if (!/^\d+(\.\d+)?$/.test(duration) || Number(duration) <= 0) throw bad('duration', `Invalid duration '${duration}': a positive number of hours`);
    const low = now - Number(duration) * 3_600_000;
    // The period's start is written as a dateTime: one before year 1 has none (and was a 500).
    if (!(low >= EARLIEST)) throw bad('duration', `Invalid duration '${duration}': it reaches back before the year 1`);
    return { low, high: now, start: new Date(low).toISOString(), end: new Date(now).toISOString() };
  }
  if (period === undefined) return undefined;
  const parts = period.split(',');
  if (parts.length !== 2 || parts.every((p) => p.trim() === '')) throw bad('period', `Invalid period '${period}': a Period (by GET: start,end)`);
  const side = (text: string, which: 'low' | 'high') => {
    if (text === '') return undefined;
    // A date as written, not a search value with its prefix (`ge2026`).
    if (!/^\d{4}/.test(text)) throw bad('period', `Invalid period '${period}': '${text}' is not a date`);
    try {
      return dateTest('period', text, now)[which];
    } catch {
      throw bad('period', `Invalid period '${period}': '${text}' is not a date`);
    }
  };
  const [start, end] = parts.map((p) => p.trim()) as [string, string];
  const out: NonNullable<StatsInput['period']> = {};
  const low = side(start, 'low');
  const high = side(end, 'high');
  if (low !== undefined) Object.assign(out, { low, start });
  if (high !== undefined) Object.assign(out, { high, end });
  if (low !== undefined && high !== undefined && low >= high) throw bad('period', `Invalid period '${period}': its start is not before its end`);
  return out;
}

function statisticsOf(params: URLSearchParams): string[] {
  const codes = [...new Set(all(params, 'statistic'))];
  if (codes.length === 0) throw new FhirError('required', `$stats needs at least one statistic (${STATISTICS.join(', ')})`, { expression: ['statistic'] });
  for (const c of codes) {
    if (c === 'regression') throw new FhirError('not-supported', "The statistic 'regression' is not supported", { expression: ['statistic'] });
    if (!STATISTICS.includes(c)) throw bad('statistic', `Unknown statistic '${c}' (known: ${STATISTICS.join(', ')})`);
  }
  return STATISTICS.filter((c) => codes.includes(c));
}

/** The checked input of a `$stats` (`base`: the tenant's FHIR base; `now`: the clock's; another parameter ignored unless `strict`). */
export function statsInput(params: URLSearchParams, base: string, now: number, strict: boolean): StatsInput {
  unknownParameters(params, NAMES, '$stats', strict);
  const include = one(params, 'include');
  if (include !== undefined && include !== 'true' && include !== 'false') throw bad('include', `Invalid include '${include}': true or false`);
  const limit = one(params, 'limit');
  // R4: without include the server SHALL ignore limit.
  if (include === 'true' && limit !== undefined && !/^0*[1-9]\d{0,8}$/.test(limit)) throw bad('limit', `Invalid limit '${limit}': a positive integer`);
  const period = periodOf(params, now);
  const input: StatsInput = { subject: subjectOf(params, base), codes: codesOf(params), statistics: statisticsOf(params), include: include === 'true' };
  if (period !== undefined) input.period = period;
  if (limit !== undefined && input.include) input.limit = Number(limit);
  return input;
}
