/**
 * FHIRPath's precision and component functions (2.0 / 3.0 STU, http://hl7.org/fhirpath/#lowboundaryprecision-integer-decimal--date--datetime--time,
 * #highboundary..., #precision--integer) on the texts of Decimals, Dates, DateTimes and Times: a value stands for every
 * value it rounds from at its own precision, and its boundaries are the least and the greatest of those, written to a
 * precision (a Decimal's places, a date's digits). Computed on the decimal digits (BigInt), never in binary: `1.587` is
 * the range 1.5865 to 1.5875, `1.587.lowBoundary(8)` is `1.58650000`.
 */

import type { TemporalKind } from './fhirpath-temporal.ts';

/** The places a Decimal boundary takes without a precision (the specification: "at least 8"). */
export const DEFAULT_DECIMAL_PRECISION = 8;
/** The most places a Decimal boundary is written to: past it (or below 0) the boundary is empty, as the specification says of a precision the implementation does not hold. */
export const MAX_DECIMAL_PRECISION = 28;

const DECIMAL_TEXT = /^([+-]?)(\d+)(?:\.(\d+))?$/;
const pow10 = (n: number): bigint => 10n ** BigInt(n);

/** The places of a Decimal's text (`1.58700` 5, `120` 0): its precision() ; undefined for a text that is no decimal. */
export function decimalPrecision(text: string): number | undefined {
  const m = DECIMAL_TEXT.exec(text);
  return m ? (m[3]?.length ?? 0) : undefined;
}

/** `digits` (a whole number of 10^-`places`, not negative) as decimal text, `negative` writing a minus (`-0.0` too). */
function writeScaled(digits: bigint, places: number, negative: boolean): string {
  const text = digits.toString().padStart(places + 1, '0');
  const body = places === 0 ? text : `${text.slice(0, text.length - places)}.${text.slice(text.length - places)}`;
  return negative ? `-${body}` : body;
}

/**
 * The low (or `high`) boundary of the Decimal written `text` (an Integer's text too: `1` is 0.5 to 1.5), to `precision`
 * places: the value less (more) half a unit of its last place, then cut to the places asked. Of the two ends of a
 * positive value's range the low one is truncated and the high one rounded half up, and a negative value's are the
 * positive one's mirrored (`(-1.587).lowBoundary(2)` is -1.59, `0.0034.highBoundary(1)` 0.0, `(-0.0034).lowBoundary(1)`
 * -0.0), as HL7's test cases and Java implementation have them. Undefined for a precision outside 0 to
 * MAX_DECIMAL_PRECISION or a text that is no decimal.
 */
export function decimalBoundary(text: string, precision: number, high: boolean): string | undefined {
  if (!Number.isInteger(precision) || precision < 0 || precision > MAX_DECIMAL_PRECISION) return undefined;
  const m = DECIMAL_TEXT.exec(text);
  if (!m) return undefined;
  const negative = m[1] === '-';
  const fraction = m[3] ?? '';
  const places = fraction.length;
  // The magnitude and half its last place, as whole numbers of 10^-scale: one place finer than both the value and the answer.
  const scale = Math.max(places + 1, precision);
  const magnitude = BigInt(m[2]! + fraction) * pow10(scale - places);
  const half = 5n * pow10(scale - places - 1);
  const cut = pow10(scale - precision);
  const truncated = (v: bigint) => v / cut;
  const rounded = (v: bigint) => (scale === precision ? v : (v + 5n * pow10(scale - precision - 1)) / cut);
  // The magnitude's own low end (truncated) or high end (rounded); a negative value's low end is its magnitude's high one.
  const towardZero = high === negative;
  let digits = towardZero ? truncated(magnitude - half) : rounded(magnitude + half);
  let sign = negative;
  if (digits < 0n) {
    // Zero's low end: -0.5.
    digits = -digits;
    sign = !sign;
  }
  return writeScaled(digits, precision, sign);
}


/** The precisions (digits) each kind is written to: a year 4, a month 6, a day 8, an hour 10, a minute 12, a second 14, a millisecond 17; a Time's from its hour. */
const PRECISIONS: Record<TemporalKind, readonly number[]> = {
  date: [4, 6, 8],
  dateTime: [4, 6, 8, 10, 12, 14, 17],
  time: [2, 4, 6, 9],
};

const DATE_TIME = /^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?(?:T(?:(\d{2})(?::(\d{2})(?::(\d{2})(?:\.(\d+))?)?)?)?)?(Z|[+-]\d{2}:\d{2})?$/;
const TIME = /^(\d{2})(?::(\d{2})(?::(\d{2})(?:\.(\d+))?)?)?$/;

interface Parts {
  fields: (string | undefined)[];
  fraction: string | undefined;
  zone: string | undefined;
}

function partsOf(text: string, kind: TemporalKind): Parts | undefined {
  if (kind === 'time') {
    const m = TIME.exec(text.startsWith('T') ? text.slice(1) : text);
    return m ? { fields: [m[1], m[2], m[3]], fraction: m[4], zone: undefined } : undefined;
  }
  const m = DATE_TIME.exec(text);
  if (!m) return undefined;
  return { fields: [m[1], m[2], m[3], m[4], m[5], m[6]], fraction: m[7], zone: m[8] };
}

/** The digits of precision of a Date, DateTime or Time text (`2014` 4, `2014-01-05T10:30:00.000` 17, `10:30` 4); undefined for a text that is none. */
export function temporalPrecision(text: string, kind: TemporalKind): number | undefined {
  const parts = partsOf(text, kind);
  if (parts === undefined) return undefined;
  const widths = kind === 'time' ? [2, 2, 2] : [4, 2, 2, 2, 2, 2];
  let digits = 0;
  for (let i = 0; i < parts.fields.length && parts.fields[i] !== undefined; i++) digits += widths[i]!;
  return digits + (parts.fraction?.length ?? 0);
}

const daysIn = (year: number, month: number) => new Date(Date.UTC(year, month, 0)).getUTCDate();

/**
 * The low (or `high`) boundary of a Date, DateTime or Time text at `precision` digits (the kind's finest without one):
 * the components it lacks at their least (greatest: December, the month's last day, 23:59:59.999), those past the
 * precision cut. A DateTime with a time part and no offset takes the earliest offset for its low boundary (+14:00) and
 * the latest for its high (-12:00), so the range holds the instant wherever it was written. Undefined for a precision
 * the kind is not written to (`@2014.lowBoundary(17)`: a Date has no time) or a text that is none of the kind.
 */
export function temporalBoundary(text: string, kind: TemporalKind, precision: number | undefined, high: boolean): string | undefined {
  const allowed = PRECISIONS[kind];
  const digits = precision ?? allowed[allowed.length - 1]!;
  const index = allowed.indexOf(digits);
  if (index < 0) return undefined;
  const parts = partsOf(text, kind);
  if (parts === undefined) return undefined;
  const f = parts.fields;
  const out: string[] = [];
  if (kind === 'time') {
    out.push(f[0]!, f[1] ?? (high ? '59' : '00'), f[2] ?? (high ? '59' : '00'));
  } else {
    const year = f[0]!;
    const month = f[1] ?? (high ? '12' : '01');
    const day = f[2] ?? (high ? String(daysIn(Number(year), Number(month))).padStart(2, '0') : '01');
    out.push(year, month, day, f[3] ?? (high ? '23' : '00'), f[4] ?? (high ? '59' : '00'), f[5] ?? (high ? '59' : '00'));
  }
  const fraction = (parts.fraction ?? '').slice(0, 3).padEnd(3, high ? '9' : '0');
  // The components the precision keeps: for a Time hour, minute, second (index 0..2) then the fraction; for a date the same from the year.
  const kept = Math.min(index + 1, out.length);
  const withFraction = index + 1 > out.length;
  let written: string;
  if (kind === 'time') {
    written = out.slice(0, kept).join(':') + (withFraction ? `.${fraction}` : '');
  } else {
    written = out.slice(0, Math.min(kept, 3)).join('-');
    if (kept > 3) {
      written += `T${out.slice(3, kept).join(':')}${withFraction ? `.${fraction}` : ''}`;
      written += parts.zone ?? (high ? '-12:00' : '+14:00');
    }
  }
  return written;
}

/** The components FHIRPath 2.0's component functions read (yearOf() ... millisecondOf()). */
export type TemporalComponent = 'year' | 'month' | 'day' | 'hour' | 'minute' | 'second' | 'millisecond';

const COMPONENT_FIELD: Record<Exclude<TemporalComponent, 'millisecond'>, number> = { year: 0, month: 1, day: 2, hour: 3, minute: 4, second: 5 };

/**
 * A component of a Date, DateTime or Time text as an Integer (`millisecond` from the fraction of a second: `.5` is 500),
 * or undefined where the value lacks it (`@2012.monthOf()`) or the text is none of the kind. A Time's components start
 * at its hour; a Date has none past its day.
 */
export function temporalComponent(text: string, kind: TemporalKind, component: TemporalComponent): number | undefined {
  const parts = partsOf(text, kind);
  if (parts === undefined) return undefined;
  if (component === 'millisecond') {
    if (parts.fraction === undefined) return undefined;
    return Number(parts.fraction.slice(0, 3).padEnd(3, '0'));
  }
  const field = COMPONENT_FIELD[component] - (kind === 'time' ? 3 : 0);
  const value = field < 0 ? undefined : parts.fields[field];
  return value === undefined ? undefined : Number(value);
}

/** A DateTime text's offset in hours as Decimal text (`-07:00` -7.0, `+05:30` 5.5, `Z` 0.0); undefined without one. */
export function timezoneOffset(text: string): string | undefined {
  const zone = partsOf(text, 'dateTime')?.zone;
  if (zone === undefined) return undefined;
  if (zone === 'Z') return '0.0';
  const minutes = Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6));
  const hours = minutes / 60;
  const magnitude = Number.isInteger(hours) ? `${hours}.0` : String(hours);
  return zone[0] === '-' && minutes !== 0 ? `-${magnitude}` : magnitude;
}

/** A DateTime text's date part (`2012-01-01T12:30` 2012-01-01; a DateTime of a year its year); undefined for another text. */
export function datePart(text: string): string | undefined {
  return partsOf(text, 'dateTime') === undefined ? undefined : text.split('T')[0]!;
}

/** A DateTime text's time part without its offset (`2012-01-01T12:30:00.000-07:00` 12:30:00.000); undefined where it has none. */
export function timePart(text: string): string | undefined {
  const parts = partsOf(text, 'dateTime');
  if (parts === undefined || parts.fields[3] === undefined) return undefined;
  const clock = parts.fields.slice(3).filter((f) => f !== undefined).join(':');
  return parts.fraction === undefined ? clock : `${clock}.${parts.fraction}`;
}
