import { FhirError } from '../errors.ts';
import type { Comparator, DateTest } from '../store/types.ts';

const DATE = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/;

/** A time zone written `+hh:mm` in a URL without encoding its `+`, which form decoding read as a space. */
const UNENCODED_PLUS = /T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)? \d{2}:\d{2}$/;

/**
 * dateRange of a date a client put in a URL (a search value, history's `_since` and `_at`): a time zone
 * `+01:00` sent unencoded arrives as ` 01:00` and is read as `+01:00`, as bulk export's `_since` reads
 * it (src/export/since.ts) and as HAPI FHIR does; any other space stays invalid.
 */
export function queryDateRange(value: string): { low: number; high: number } | null {
  return dateRange(value) ?? (UNENCODED_PLUS.test(value) ? dateRange(value.replace(' ', '+')) : null);
}

/**
 * The half-open interval [low, high) in epoch ms that a FHIR date/dateTime/instant value denotes at its
 * precision (FHIR R4 search 3.1.1.5.9). Values without a zone are read as UTC. A fraction of a second
 * is a precision too: `.1` is 100 ms wide, `.12` 10 ms, `.123` 1 ms. Digits past the millisecond are
 * dropped (bounds are whole milliseconds): `.1234` is the millisecond containing it, [.123, .124).
 * A leap second (`23:59:60`, which the R4 dateTime and instant regexes allow: `([0-5][0-9]|60)`) comes
 * after every other second of its minute and before the next minute, which epoch milliseconds leave no
 * room for: it is the last millisecond of its minute, [mm:59.999, mm+1:00), whatever its fraction.
 */
export function dateRange(value: string): { low: number; high: number } | null {
  const m = DATE.exec(value);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  const year = Number(y);
  const month = mo ? Number(mo) - 1 : 0;
  const day = d ? Number(d) : 1;
  if (month < 0 || month > 11 || day < 1 || day > daysIn(year, month)) return null;
  if (h !== undefined && (Number(h) > 23 || Number(mi) > 59 || (s !== undefined && Number(s) > 60))) return null;
  if (zone && zone !== 'Z' && (Number(zone.slice(1, 3)) > 14 || Number(zone.slice(4)) > 59)) return null;
  const offset = zone && zone !== 'Z' ? (zone[0] === '-' ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4))) : 0;
  if (s === '60') {
    const low = utc(year, month, day, Number(h), Number(mi), 59, 999) - offset * 60000;
    return { low, high: low + 1 };
  }
  const ms = frac ? Number(frac.slice(0, 3).padEnd(3, '0')) : 0;
  const low = utc(year, month, day, h ? Number(h) : 0, mi ? Number(mi) : 0, s ? Number(s) : 0, ms) - offset * 60000;
  let high: number;
  if (!mo) high = utc(year + 1, 0, 1);
  else if (!d) high = utc(year, month + 1, 1);
  else if (h === undefined) high = utc(year, month, day + 1);
  else if (s === undefined) high = low + 60000;
  else if (!frac) high = low + 1000;
  else high = low + 10 ** (3 - Math.min(frac.length, 3));
  return { low, high };
}

/** `Date.UTC` without its mapping of years 0-99 to 1900-1999. */
function utc(year: number, month: number, day: number, h = 0, mi = 0, s = 0, ms = 0): number {
  const date = new Date(Date.UTC(2000, month, day, h, mi, s, ms));
  date.setUTCFullYear(year + Math.floor(month / 12), month % 12, day);
  return date.getTime();
}

function daysIn(year: number, month: number): number {
  return new Date(utc(year, month + 1, 1) - 86_400_000).getUTCDate();
}

const PREFIXES: Comparator[] = ['eq', 'ne', 'gt', 'ge', 'lt', 'le'];

/** Parses a `_lastUpdated` search value with its optional prefix (`ge2024-01-01`). */
export function parseTimeCriterion(raw: string, param = '_lastUpdated'): DateTest {
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
