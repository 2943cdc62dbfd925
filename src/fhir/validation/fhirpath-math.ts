/**
 * FHIRPath N1 § 5.7 Math (http://hl7.org/fhirpath/N1/#math-1) on numbers: abs, ceiling, exp, floor, ln, log, power,
 * round, sqrt, truncate. A result no number holds (an overflow, `(-1).power(0.5)`, `(-1).sqrt()`, `0.ln()`) is
 * undefined here, which the engine gives as empty, as N1 says of power and sqrt and of an arithmetic overflow.
 */

/** A function's result, or undefined where it is not a finite number. */
const finite = (x: number): number | undefined => (Number.isFinite(x) ? x : undefined);

/** `x` rounded to `precision` decimal places, halves away from zero (`2.5` to 3, `-2.5` to -3, `1.005` to 1.01 as written). */
export function roundTo(x: number, precision: number): number | undefined {
  // Shifted in decimal text, not by multiplying: 1.005 * 100 is 100.49999999999999 in binary.
  const shifted = Number(`${Math.abs(x)}e${precision}`);
  const rounded = Number(`${Math.round(shifted)}e-${precision}`);
  return finite(Math.sign(x) * rounded || 0);
}

/** `base` to the power `exponent`, or undefined where that is no real number (`(-1).power(0.5)`) or overflows. */
export function power(base: number, exponent: number): number | undefined {
  return finite(base ** exponent);
}

/** The logarithm of `x` to `base`, or undefined where it is not defined (`0.ln()`, `1.log(1)`). */
export function logarithm(x: number, base: number | undefined): number | undefined {
  const ln = Math.log(x);
  return finite(base === undefined ? ln : ln / Math.log(base));
}

/** The functions of one number: their results, undefined where they have none. */
export const UNARY_MATH: ReadonlyMap<string, (x: number) => number | undefined> = new Map([
  ['ceiling', (x: number) => Math.ceil(x) || 0],
  ['floor', (x: number) => Math.floor(x)],
  ['truncate', (x: number) => Math.trunc(x) || 0],
  ['exp', (x: number) => finite(Math.exp(x))],
  ['ln', (x: number) => logarithm(x, undefined)],
  ['sqrt', (x: number) => finite(Math.sqrt(x))],
]);
