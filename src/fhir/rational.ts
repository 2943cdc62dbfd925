/**
 * Exact rational numbers over BigInt, for the few conversions that must not round: a decimal as written (`37.0000000000001`)
 * and the affine temperature conversions of UCUM (`[degF]` to kelvin is (v + 459.67) * 5/9, a repeating decimal in
 * binary and in decimal), compared or rounded in decimal without a 15-digit intermediate (src/fhir/ucum.ts, temperatureOf).
 */

/** `n / d`, `d` > 0 (not reduced: only compared, added and multiplied). */
export interface Rational {
  readonly n: bigint;
  readonly d: bigint;
}

const TEN = 10n;

/** The decimal `text` (`-12.50`, `1e-7`, `1.5E+21`) exactly, or undefined when it is no decimal number. */
export function decimalRational(text: string): Rational | undefined {
  const m = /^([+-]?)(\d+)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m) return undefined;
  const fraction = m[3] ?? '';
  const exponent = Number(m[4] ?? 0) - fraction.length;
  if (!Number.isSafeInteger(exponent) || Math.abs(exponent) > 400) return undefined;
  let n = BigInt(m[2]! + fraction);
  if (m[1] === '-') n = -n;
  return exponent >= 0 ? { n: n * TEN ** BigInt(exponent), d: 1n } : { n, d: TEN ** BigInt(-exponent) };
}

/** The value of a finite number as its shortest decimal text says it (0.1 is 1/10, not the binary fraction). */
export function numberRational(x: number): Rational | undefined {
  return Number.isFinite(x) ? decimalRational(String(x)) : undefined;
}

export const add = (a: Rational, b: Rational): Rational => ({ n: a.n * b.d + b.n * a.d, d: a.d * b.d });
export const subtract = (a: Rational, b: Rational): Rational => ({ n: a.n * b.d - b.n * a.d, d: a.d * b.d });
export const multiply = (a: Rational, b: Rational): Rational => ({ n: a.n * b.n, d: a.d * b.d });

/** `a / b`; undefined when `b` is zero. */
export function divide(a: Rational, b: Rational): Rational | undefined {
  if (b.n === 0n) return undefined;
  return b.n < 0n ? { n: -a.n * b.d, d: a.d * -b.n } : { n: a.n * b.d, d: a.d * b.n };
}

/** -1, 0 or 1 as `a` is less than, equal to or greater than `b`. */
export function compare(a: Rational, b: Rational): -1 | 0 | 1 {
  const x = a.n * b.d;
  const y = b.n * a.d;
  return x < y ? -1 : x > y ? 1 : 0;
}

/** `a` rounded to `places` decimal places, halves away from zero, as a whole number of 10^-places. */
export function roundedUnits(a: Rational, places: number): bigint {
  const scale = TEN ** BigInt(places);
  const n = a.n < 0n ? -a.n : a.n;
  const scaled = n * scale;
  let q = scaled / a.d;
  if ((scaled % a.d) * 2n >= a.d) q += 1n;
  return a.n < 0n ? -q : q;
}

/** The double nearest `a` (to 20 significant digits first: 37.777... is 37.77777777777778). */
export function rationalNumber(a: Rational): number {
  const negative = a.n < 0n;
  const n = negative ? -a.n : a.n;
  const whole = n / a.d;
  let rest = n % a.d;
  let digits = '';
  const wholeDigits = whole === 0n ? 0 : whole.toString().length;
  for (let i = 0; rest !== 0n && wholeDigits + i < 20 + (whole === 0n ? leadingZeros(n, a.d) : 0); i++) {
    rest *= 10n;
    digits += (rest / a.d).toString();
    rest %= a.d;
  }
  const value = Number(`${whole}${digits === '' ? '' : `.${digits}`}`);
  return negative ? -value : value;
}

/** How many zeros follow the point before the first significant digit of n/d (n < d). */
function leadingZeros(n: bigint, d: bigint): number {
  let zeros = 0;
  for (let r = n * 10n; r < d && zeros < 400; r *= 10n) zeros++;
  return zeros;
}

/** A text equal rationals share (`1/2` for 2/4): the fraction in lowest terms. */
export function rationalKey(a: Rational): string {
  let [x, y] = [a.n < 0n ? -a.n : a.n, a.d];
  while (y !== 0n) [x, y] = [y, x % y];
  const g = x === 0n ? 1n : x;
  return `${a.n / g}/${a.d / g}`;
}
