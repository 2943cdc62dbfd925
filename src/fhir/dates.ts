import { FhirError } from '../errors.ts';
import type { Comparator, TimeCriterion } from '../store/types.ts';

const DATE = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/;

/**
 * The half-open interval [low, high) in epoch ms that a FHIR date/dateTime/instant value denotes at its
 * precision (FHIR R4 search 3.1.1.5.9). Values without a zone are read as UTC.
 */
export function dateRange(value: string): { low: number; high: number } | null {
  const m = DATE.exec(value);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  const year = Number(y);
  const month = mo ? Number(mo) - 1 : 0;
  const day = d ? Number(d) : 1;
  if (mo && (month < 0 || month > 11)) return null;
  if (d && (day < 1 || day > 31)) return null;
  if (h !== undefined && (Number(h) > 23 || Number(mi) > 59 || (s !== undefined && Number(s) > 59))) return null;
  const offset = zone && zone !== 'Z' ? (zone[0] === '-' ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4))) : 0;
  const ms = frac ? Number(frac.slice(0, 3).padEnd(3, '0')) : 0;
  const low = Date.UTC(year, month, day, h ? Number(h) : 0, mi ? Number(mi) : 0, s ? Number(s) : 0, ms) - offset * 60000;
  let high: number;
  if (!mo) high = Date.UTC(year + 1, 0, 1);
  else if (!d) high = Date.UTC(year, month + 1, 1);
  else if (h === undefined) high = Date.UTC(year, month, day + 1);
  else if (s === undefined) high = low + 60000;
  else if (!frac) high = low + 1000;
  else high = low + 1;
  return { low, high };
}

const PREFIXES: Comparator[] = ['eq', 'ne', 'gt', 'ge', 'lt', 'le'];

/** Parses a `_lastUpdated` search value with its optional prefix (`ge2024-01-01`). */
export function parseTimeCriterion(raw: string, param = '_lastUpdated'): TimeCriterion {
  const prefix = PREFIXES.find((p) => raw.startsWith(p));
  const value = prefix ? raw.slice(2) : raw;
  const range = dateRange(value);
  if (!range) {
    throw new FhirError('invalid', `Invalid ${param} value '${raw}': expected [eq|ne|gt|ge|lt|le]<FHIR date or dateTime>`, {
      expression: [param],
    });
  }
  return { op: prefix ?? 'eq', ...range };
}
