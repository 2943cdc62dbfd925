/**
 * FHIRPath N1 quantity arithmetic and conversion (http://hl7.org/fhirpath/N1/#math, #toquantityunit-string-quantity):
 * `+` and `-` on quantities of one dimension, in the finer of the two units (`3 'm' + 3 'cm'` is `303 'cm'`); `*` and
 * `/` with the units multiplied or divided as UCUM writes them (`12 'cm' * 3 'cm'` is `36 'cm2'`, `12 'cm2' / 3 'cm'`
 * `4 'cm'`; a number is a quantity of unit `'1'`), nothing for a special unit (`Cel`, `[pH]`); division by zero empty; `toQuantity()`'s string form and its unit
 * conversion. Calendar durations (`1 year`, held as the unit `'year'`) convert among themselves by N1's factors (a
 * year 12 months or 365 days, a month 30 days); a calendar second or millisecond is UCUM's `s` or `ms`; a longer one
 * and a definite UCUM duration do not mix in a sum (N1 makes them unequal), and multiply as their UCUM units.
 * Units of different dimensions, or that UCUM (src/fhir/ucum.ts) cannot read, give nothing (undefined here).
 */
import { add, divide, multiply, numberRational, rationalNumber, subtract } from '../rational.ts';
import { canonicalUnit, hasSpecialUnit, temperatureOf } from '../ucum.ts';
import { decimalArithmetic } from './fhirpath-math.ts';

/** A quantity's value and unit: a calendar keyword (singular) when `calendar`, else a UCUM code (`'1'` for a number). */
export interface PlainQuantity { value: number; unit: string; calendar: boolean }

/** FHIRPath's calendar durations, each with its length in milliseconds by N1's conversion factors (a year 365 days, a month 30). */
export const CALENDAR_MS = new Map<string, number>([
  ['year', 365 * 86_400_000], ['month', 30 * 86_400_000], ['week', 7 * 86_400_000], ['day', 86_400_000],
  ['hour', 3_600_000], ['minute', 60_000], ['second', 1000], ['millisecond', 1],
]);
/** The definite-duration UCUM unit each calendar duration corresponds to (N1's table: `1 year ~ 1 'a'`, `1 second = 1 's'`). */
export const CALENDAR_UCUM = new Map<string, string>([
  ['year', 'a'], ['month', 'mo'], ['week', 'wk'], ['day', 'd'], ['hour', 'h'], ['minute', 'min'], ['second', 's'], ['millisecond', 'ms'],
]);
/** The calendar durations N1 makes equal to their UCUM units (`1 second = 1 's'`); the others only equivalent (`1 year ~ 1 'a'`). */
export const isDefiniteCalendar = (unit: string) => unit === 'second' || unit === 'millisecond';
/** A year and a month compare by months (`1 year = 12 months`); the other calendar durations by their lengths (`1 year = 365 days`). */
export const isCalendarMonths = (unit: string) => unit === 'year' || unit === 'month';

/** Two calendar durations' units in a common one: months for a year and a month, milliseconds otherwise. */
export function calendarFactors(a: string, b: string): [number, number] {
  if (isCalendarMonths(a) && isCalendarMonths(b)) return [a === 'year' ? 12 : 1, b === 'year' ? 12 : 1];
  return [CALENDAR_MS.get(a)!, CALENDAR_MS.get(b)!];
}

/** A calendar keyword, singular or plural, as its unit representation (`days` -> `day`); undefined for another word. */
export function calendarKeyword(word: string): string | undefined {
  if (CALENDAR_MS.has(word)) return word;
  const singular = word.endsWith('s') ? word.slice(0, -1) : '';
  return CALENDAR_MS.has(singular) ? singular : undefined;
}

/**
 * `a op b` (`+ - * /`) in decimal, as Decimals compute (fhirpath-math.ts: the operands as whole numbers of 10^-p, so the
 * one rounding is the last division's): `3 'm' + 3 'cm'` is 303, not 303.00000000000006, and no result is cut to 15
 * digits (`0.1234567890123456 'g' + 0 'g'` keeps its 16). NaN for a division by zero or an overflow (finite() drops it).
 */
const dec = (op: '+' | '-' | '*' | '/', a: number, b: number): number => decimalArithmetic(op, a, b) ?? Number.NaN;
/** `x * f + sign * (y * g)`, each step in decimal. */
const combined = (x: number, f: number, sign: 1 | -1, y: number, g: number) => dec(sign === 1 ? '+' : '-', dec('*', x, f), dec('*', y, g));

/** `q`, or undefined where its value overflowed (N1: an overflow gives nothing). */
const finite = (q: PlainQuantity | undefined) => (q === undefined || Number.isFinite(q.value) ? q : undefined);

/** A calendar second or millisecond as UCUM's `s` or `ms`, which N1 makes it equal to; others unchanged. */
function definite(q: PlainQuantity): PlainQuantity {
  return q.calendar && isDefiniteCalendar(q.unit) ? { value: q.value, unit: CALENDAR_UCUM.get(q.unit)!, calendar: false } : q;
}

/** A UCUM unit's factor to its canonical unit, with that unit's code; undefined for one ucum.ts cannot read or that has an offset (Cel). */
function linear(unit: string): { code: string; factor: number } | undefined {
  const c = canonicalUnit(unit);
  if (c === undefined || c.convert(0) !== 0) return undefined;
  return { code: c.code, factor: c.convert(1) };
}

/** `a + b` (`sign` 1) or `a - b` (`sign` -1) in the finer unit of the two; undefined where their units do not convert. */
export function addQuantities(a: PlainQuantity, b: PlainQuantity, sign: 1 | -1): PlainQuantity | undefined {
  return finite(sum(a, b, sign));
}

function sum(a: PlainQuantity, b: PlainQuantity, sign: 1 | -1): PlainQuantity | undefined {
  if (a.unit === b.unit && a.calendar === b.calendar) return { value: dec(sign === 1 ? '+' : '-', a.value, b.value), unit: a.unit, calendar: a.calendar };
  if (a.calendar && b.calendar) {
    const [fa, fb] = calendarFactors(a.unit, b.unit);
    const [unit, f] = fa <= fb ? [a.unit, fa] : [b.unit, fb];
    return { value: dec('/', combined(a.value, fa, sign, b.value, fb), f), unit, calendar: true };
  }
  const [x, y] = [definite(a), definite(b)];
  if (x.calendar || y.calendar) return undefined;
  if (x.unit === y.unit) return { value: dec(sign === 1 ? '+' : '-', x.value, y.value), unit: x.unit, calendar: false };
  const [ux, uy] = [linear(x.unit), linear(y.unit)];
  if (ux === undefined || uy === undefined || ux.code !== uy.code) return undefined;
  const [unit, f] = ux.factor <= uy.factor ? [x.unit, ux.factor] : [y.unit, uy.factor];
  return { value: dec('/', combined(x.value, ux.factor, sign, y.value, uy.factor), f), unit, calendar: false };
}

/** `a * b`, or `a / b` (`divide`; undefined when `b` is zero), the units multiplied or divided. */
export function multiplyQuantities(a: PlainQuantity, b: PlainQuantity, divide: boolean): PlainQuantity | undefined {
  return finite(product(a, b, divide));
}

function product(a: PlainQuantity, b: PlainQuantity, divide: boolean): PlainQuantity | undefined {
  if (divide && b.value === 0) return undefined;
  // A unit past MAX_UNIT_TEXT is none a product writes, and reading its terms costs by its length (a 1 MB code took 0.5 s).
  if (a.unit.length > MAX_UNIT_TEXT || b.unit.length > MAX_UNIT_TEXT) return undefined;
  // A special unit (an offset, Cel and [degF], or a logarithm, [pH] and B) is no multiple of a unit: its value neither
  // multiplies nor divides, by a number or by another quantity (`1 'Cel' / 2 '[degF]'`, `2 'Cel' * 3`: nothing).
  if ((!a.calendar && hasSpecialUnit(a.unit)) || (!b.calendar && hasSpecialUnit(b.unit))) return undefined;
  const value = dec(divide ? '/' : '*', a.value, b.value);
  // A calendar duration times or over a number stays one (`2 days * 3` is `6 days`); over itself it is a number.
  if (b.unit === '1' && !b.calendar) return { value, unit: a.unit, calendar: a.calendar };
  if (!divide && a.unit === '1' && !a.calendar) return { value, unit: b.unit, calendar: b.calendar };
  if (divide && a.calendar && b.calendar && a.unit === b.unit) return { value, unit: '1', calendar: false };
  const ua = a.calendar ? CALENDAR_UCUM.get(a.unit)! : a.unit;
  const ub = b.calendar ? CALENDAR_UCUM.get(b.unit)! : b.unit;
  const unit = productUnit(ua, ub, divide ? -1 : 1);
  return unit === undefined || unit.length > MAX_UNIT_TEXT ? undefined : { value, unit, calendar: false };
}

/**
 * The longest unit a product writes: past it the unit is an overflow (nothing), as a value past a number's range is.
 * A product of units the terms cannot combine is written out in full (`({a}).({a})`), doubling with `$this * $this`.
 */
const MAX_UNIT_TEXT = 4096;

/** A UCUM unit's terms (`kg.m2/s2`) as exponents by atom, or undefined where it is more than atoms joined by `.` and `/`. */
function terms(unit: string): Map<string, number> | undefined {
  const out = new Map<string, number>();
  if (unit === '1') return out;
  const parts = unit.split(/(?=[./])/);
  for (const part of parts) {
    const sign = part.startsWith('/') ? -1 : 1;
    const text = part.startsWith('/') || part.startsWith('.') ? part.slice(1) : part;
    const m = /^(\[[^\]]+\]|[A-Za-z_%'"*0-9]*[A-Za-z_%'"*\]}])([+-]?\d+)?$/.exec(text);
    if (!m || /[(){}]/.test(text)) return undefined;
    const e = sign * (m[2] === undefined ? 1 : Number(m[2]));
    out.set(m[1]!, (out.get(m[1]!) ?? 0) + e);
  }
  return out;
}

/**
 * The unit of `a` times `b` to the power `exponent` (1 or -1), written in UCUM (`cm` by `cm` is `cm2`; `g` over `m` `g/m`);
 * undefined where an atom's exponent outgrows an integer a number holds exactly (an overflow: `$this * $this` repeated).
 */
function productUnit(a: string, b: string, exponent: 1 | -1): string | undefined {
  const ta = terms(a);
  const tb = terms(b);
  if (ta === undefined || tb === undefined) return exponent === 1 ? `(${a}).(${b})` : `(${a})/(${b})`;
  for (const [atom, e] of tb) {
    const sum = (ta.get(atom) ?? 0) + exponent * e;
    if (!Number.isSafeInteger(sum)) return undefined;
    ta.set(atom, sum);
  }
  const write = (atom: string, e: number) => (e === 1 ? atom : `${atom}${e}`);
  const up = [...ta].filter(([, e]) => e > 0).map(([atom, e]) => write(atom, e));
  const down = [...ta].filter(([, e]) => e < 0).map(([atom, e]) => write(atom, -e));
  if (up.length === 0 && down.length === 0) return '1';
  return `${up.length === 0 ? '1' : up.join('.')}${down.map((d) => `/${d}`).join('')}`;
}

/** N1's toQuantity() string form: a number, then optionally a quoted UCUM unit or a calendar keyword (`'4 days'`, `'10 \'mg[Hg]\''`). */
const QUANTITY_TEXT = /^([+-]?\d+(?:\.\d+)?)\s*(?:'([^']+)'|([a-zA-Z]+))?$/;

/** A string as toQuantity() reads it, or undefined where it is no quantity (`'1 wk'`: a unit outside quotes must be a calendar keyword). */
export function parseQuantityText(text: string): PlainQuantity | undefined {
  const m = QUANTITY_TEXT.exec(text);
  if (!m) return undefined;
  const value = Number(m[1]);
  if (m[3] !== undefined) {
    const keyword = calendarKeyword(m[3]);
    return keyword === undefined ? undefined : { value, unit: keyword, calendar: true };
  }
  return { value, unit: m[2] ?? '1', calendar: false };
}

/**
 * `q` in `unit` (a UCUM code or a calendar keyword, singular or plural), as toQuantity(unit) converts: calendar durations by
 * N1's factors, a calendar second or millisecond as its UCUM unit, UCUM units of one dimension by UCUM; undefined otherwise.
 */
export function convertQuantity(q: PlainQuantity, unit: string): PlainQuantity | undefined {
  const keyword = calendarKeyword(unit);
  const target: PlainQuantity = keyword === undefined ? { value: 1, unit, calendar: false } : { value: 1, unit: keyword, calendar: true };
  if (target.unit === q.unit && target.calendar === q.calendar) return q;
  if (q.calendar && target.calendar) {
    const [fq, ft] = calendarFactors(q.unit, target.unit);
    return finite({ value: dec('/', dec('*', q.value, fq), ft), unit: target.unit, calendar: true });
  }
  const [x, y] = [definite(q), definite(target)];
  if (x.calendar || y.calendar) return undefined;
  if (x.unit === y.unit) return { value: x.value, unit: target.unit, calendar: target.calendar };
  // Units of factors alone (mg, [lb_av]): by their factors, in decimal; a temperature (Cel, [degF]) through its canonical kelvin.
  const [lx, ly] = [linear(x.unit), linear(y.unit)];
  if (lx !== undefined && ly !== undefined) {
    return lx.code === ly.code ? finite({ value: dec('/', dec('*', x.value, lx.factor), ly.factor), unit: target.unit, calendar: target.calendar }) : undefined;
  }
  // A temperature (Cel, [degF], [degRe], K) exactly, through its kelvin as a rational: `37 'Cel'.toQuantity('[degF]')` is 98.6.
  const [tx, ty, rx] = [temperatureOf(x.unit), temperatureOf(y.unit), numberRational(x.value)];
  if (tx !== undefined && ty !== undefined && rx !== undefined) {
    const value = divide(subtract(add(multiply(rx, tx.a), tx.b), ty.b), ty.a);
    return value === undefined ? undefined : finite({ value: rationalNumber(value), unit: target.unit, calendar: target.calendar });
  }
  const [cx, cy] = [canonicalUnit(x.unit), canonicalUnit(y.unit)];
  if (cx === undefined || cy === undefined || cx.code !== cy.code) return undefined;
  const zero = cy.convert(0);
  return finite({ value: dec('/', dec('-', cx.convert(x.value), zero), dec('-', cy.convert(1), zero)), unit: target.unit, calendar: target.calendar });
}
