/**
 * FHIRPath N1 § 6.6 Date/Time Arithmetic (http://hl7.org/fhirpath/N1/#datetime-arithmetic): a Date, DateTime or
 * Time moved by a time-valued quantity with calendar semantics. A year or a month is added to its component (a day
 * the resulting month lacks becomes its last: `@2019-01-31 + 1 month` is `@2019-02-28`); a week is 7 days; a day to
 * a millisecond is added with carries through the calendar. Above seconds the quantity's decimals are dropped. A
 * quantity finer than the value's precision is first converted to that precision by N1's calendar factors (a year
 * 12 months or 365 days, a month 30 days, a day 24 hours) and truncated: `@2014 + 23 months` is `@2015`, `@2016 +
 * 365 days` is `@2017`. A Date takes years to days, a Time hours to milliseconds (wrapping at midnight), a DateTime
 * any; another unit is an error. The UCUM units N1's table relates to a calendar duration (`'wk'`, `'d'`, `'h'`,
 * `'min'`, `'s'`, `'ms'`: its "or an equivalent unit") act as it; `'a'` and `'mo'`, whose lengths are not a
 * calendar year's or month's, are errors, as are definite units of no time. The value keeps its precision and
 * its time-zone offset; a result outside the years 1 to 9999 is an error.
 */

/** Why a value cannot be moved by a quantity: FHIRPath's "signal an error". */
export class TemporalArithmeticError extends Error {}

export type TemporalKind = 'date' | 'dateTime' | 'time';

/** The precisions: 0 year .. 5 second (a millisecond is a second's decimals, N1 § 5.2.6). */
const YEAR = 0;
const MONTH = 1;
const DAY = 2;
const HOUR = 3;
const MINUTE = 4;
const SECOND = 5;

/** Each calendar keyword (held singular) and its UCUM equivalent: the precision it adds at, and its length in that precision's steps. */
const UNITS = new Map<string, [precision: number, steps: number]>([
  ['year', [YEAR, 1]], ['month', [MONTH, 1]], ['week', [DAY, 7]], ['day', [DAY, 1]],
  ['hour', [HOUR, 1]], ['minute', [MINUTE, 1]], ['second', [SECOND, 1000]], ['millisecond', [SECOND, 1]],
  ['wk', [DAY, 7]], ['d', [DAY, 1]], ['h', [HOUR, 1]], ['min', [MINUTE, 1]], ['s', [SECOND, 1000]], ['ms', [SECOND, 1]],
]);

/** A precision's step in days (year: N1's 365; month: 30) or in milliseconds from the day down. */
const DAYS_PER = [365, 30, 1];
const MS_PER = [0, 0, 86_400_000, 3_600_000, 60_000, 1];

interface Parts { y: number; mo: number; d: number; h: number; mi: number; ms: number; precision: number; fraction: boolean; zone: string }

const DATE_TIME = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2})(?::(\d{2})(?::(\d{2})(\.\d+)?)?)?)?)?)?(Z|[+-]\d{2}:\d{2})?$/;
const TIME = /^(\d{2})(?::(\d{2})(?::(\d{2})(\.\d+)?)?)?$/;

function parse(kind: TemporalKind, text: string): Parts {
  if (kind === 'time') {
    const m = TIME.exec(text);
    if (!m) throw new TemporalArithmeticError(`'${text}' is not a time`);
    const precision = m[3] !== undefined ? SECOND : m[2] !== undefined ? MINUTE : HOUR;
    return { y: 2000, mo: 1, d: 1, h: +m[1]!, mi: +(m[2] ?? 0), ms: +(m[3] ?? 0) * 1000 + fractionMs(m[4]), precision, fraction: m[4] !== undefined, zone: '' };
  }
  const m = DATE_TIME.exec(text);
  if (!m) throw new TemporalArithmeticError(`'${text}' is not a date or dateTime`);
  const present = [m[2], m[3], m[4], m[5], m[6]].findIndex((x) => x === undefined);
  const precision = present < 0 ? SECOND : present;
  return {
    y: +m[1]!, mo: +(m[2] ?? 1), d: +(m[3] ?? 1), h: +(m[4] ?? 0), mi: +(m[5] ?? 0), ms: +(m[6] ?? 0) * 1000 + fractionMs(m[7]),
    precision, fraction: m[7] !== undefined, zone: m[8] ?? '',
  };
}

const fractionMs = (f: string | undefined) => (f === undefined ? 0 : Math.round(Number(`0${f}`) * 1000));

/** The Gregorian calendar repeats every 400 years (146,097 days): Date.UTC is used 400 years on, past its two-digit years. */
const CYCLE_MS = 146_097 * 86_400_000;
const instant = (p: Parts) => Date.UTC(p.y + 400, p.mo - 1, p.d, p.h, p.mi, 0, p.ms) - CYCLE_MS;

function fromInstant(t: number, p: Parts): void {
  const d = new Date(t + CYCLE_MS);
  p.y = d.getUTCFullYear() - 400; p.mo = d.getUTCMonth() + 1; p.d = d.getUTCDate(); p.h = d.getUTCHours(); p.mi = d.getUTCMinutes();
  p.ms = d.getUTCSeconds() * 1000 + d.getUTCMilliseconds();
}

/** The days of month `mo` of year `y` (2000 was a leap year, 2001 was not). */
const daysIn = (y: number, mo: number) => new Date(Date.UTC((y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 2000 : 2001, mo, 0)).getUTCDate();

/**
 * `amount` of `unit` (a calendar keyword, singular, or a UCUM time) as whole steps of `precision`: truncated above the
 * second, converted down by N1's factors where the unit is finer than the value (months to years by 12, days to months
 * by 30 and to years by 365, times to days by their lengths).
 */
function steps(amount: number, unitPrecision: number, perUnit: number, precision: number): number {
  if (unitPrecision < SECOND) amount = Math.trunc(amount);
  if (unitPrecision <= precision) return Math.trunc(amount * perUnit);
  if (precision === YEAR && unitPrecision === MONTH) return Math.trunc(amount / 12);
  if (precision <= DAY) {
    const days = unitPrecision === MONTH ? amount * 30 : (amount * perUnit * MS_PER[unitPrecision]!) / MS_PER[DAY]!;
    return Math.trunc(days / DAYS_PER[precision]!);
  }
  return Math.trunc((amount * perUnit * MS_PER[unitPrecision]!) / MS_PER[precision]!);
}

/** `text` (a FHIR or FHIRPath value of `kind`, without `@`) plus `amount` `unit` (negative to subtract), in the same form. */
export function shiftTemporal(kind: TemporalKind, text: string, amount: number, unit: string): string {
  const known = UNITS.get(unit);
  if (known === undefined) {
    throw new TemporalArithmeticError(unit === 'a' || unit === 'mo'
      ? `'${unit}' has no calendar length: date/time arithmetic takes years and months as calendar durations (\`1 year\`, \`1 month\`)`
      : `'${unit}' is not a time-valued unit date/time arithmetic takes`);
  }
  const [unitPrecision, perUnit] = known;
  if ((kind === 'date' && unitPrecision > DAY) || (kind === 'time' && unitPrecision < HOUR)) {
    throw new TemporalArithmeticError(`a ${kind === 'date' ? 'Date' : 'Time'} cannot be moved by a quantity in ${unit}`);
  }
  const p = parse(kind, text);
  const n = steps(amount, unitPrecision, perUnit, p.precision);
  const at = Math.min(unitPrecision, p.precision);
  if (at <= MONTH) {
    const months = p.y * 12 + p.mo - 1 + (at === YEAR ? n * 12 : n);
    p.y = Math.floor(months / 12);
    p.mo = months - p.y * 12 + 1;
    p.d = Math.min(p.d, daysIn(p.y, p.mo));
  } else if (at === DAY) {
    fromInstant(instant(p) + n * MS_PER[DAY]!, p);
  } else if (kind === 'time') {
    const day = MS_PER[DAY]!;
    const shift = n * MS_PER[at]!;
    // Wrapped at midnight, but only an amount whose milliseconds a number holds exactly (1e20 hours gave 17:36).
    if (!Number.isSafeInteger(shift)) throw new TemporalArithmeticError(`${amount} ${unit} is more than a time can be moved by`);
    const t = ((((p.h * 60 + p.mi) * 60_000 + p.ms + shift) % day) + day) % day;
    p.h = Math.floor(t / 3_600_000); p.mi = Math.floor(t / 60_000) % 60; p.ms = t % 60_000;
  } else {
    fromInstant(instant(p) + n * MS_PER[at]!, p);
  }
  if (!(p.y >= 1 && p.y <= 9999)) throw new TemporalArithmeticError('the result lies outside the years 0001 to 9999');
  return format(kind, p);
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

function format(kind: TemporalKind, p: Parts): string {
  const clock = [pad(p.h), pad(p.mi), pad(Math.floor(p.ms / 1000))].slice(0, p.precision - HOUR + 1).join(':');
  const ms = p.ms % 1000;
  const fraction = p.precision === SECOND && (p.fraction || ms !== 0) ? `.${pad(ms, 3)}` : '';
  if (kind === 'time') return clock + fraction;
  const date = [pad(p.y, 4), pad(p.mo), pad(p.d)].slice(0, Math.min(p.precision, DAY) + 1).join('-');
  return p.precision >= HOUR ? `${date}T${clock}${fraction}${p.zone}` : date;
}

/** `now()` (a DateTime to the millisecond, in UTC), `today()` (a Date) and `timeOfDay()` (a Time) at the instant `ms`. */
export function currentTemporal(kind: TemporalKind, ms: number): string {
  const iso = new Date(ms).toISOString();
  return kind === 'date' ? iso.slice(0, 10) : kind === 'time' ? iso.slice(11, 23) : `${iso.slice(0, 23)}Z`;
}
