/**
 * FHIRPath N1 § 5.7 Math (http://hl7.org/fhirpath/N1/#math-1) on numbers: abs, ceiling, exp, floor, ln, log, power,
 * round, sqrt, truncate. A result no number holds (an overflow, `(-1).power(0.5)`, `(-1).sqrt()`, `0.ln()`) is
 * undefined here, which the engine gives as empty, as N1 says of power and sqrt and of an arithmetic overflow.
 */

/** A function's result, or undefined where it is not a finite number. */
const finite = (x: number): number | undefined => (Number.isFinite(x) ? x : undefined);

/** `x` times 10^`n`, in decimal text: its exponent moved (a text already in exponent notation, `1.5e-7`, too). */
function shift(x: number, n: number): number {
  const s = String(x);
  const e = s.indexOf('e');
  return e < 0 ? Number(`${s}e${n}`) : Number(`${s.slice(0, e)}e${Number(s.slice(e + 1)) + n}`);
}

/** `x` rounded to `precision` decimal places, halves away from zero (`2.5` to 3, `-2.5` to -3, `1.005` to 1.01 as written). */
export function roundTo(x: number, precision: number): number | undefined {
  // Shifted in decimal text, not by multiplying: 1.005 * 100 is 100.49999999999999 in binary.
  const shifted = shift(Math.abs(x), precision);
  const rounded = shift(Math.round(shifted), -precision);
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

/**
 * `x` at 15 significant digits (what a binary double holds of a decimal exactly, as fhirpath-quantity-math.ts keeps
 * quantities) when it is within two units of its last place of that (`0.3 / 0.1` is 2.9999999999999996 in binary: 3),
 * else `x` as it is (`1 / 3` keeps its 16 digits, so `1 / 3 * 3` is 1, not 0.999999999999999).
 */
function snapped(x: number): number {
  const t = Number(x.toPrecision(15));
  return Math.abs(t - x) <= Math.abs(x) * 2 * Number.EPSILON ? t : x;
}

/** Powers of ten a double holds exactly. */
const POW10 = Array.from({ length: 23 }, (_, i) => 10 ** i);

/**
 * The fewest decimal places `p` (at most 15) at which a whole number of 10^-p gives `x` back (`0.1` 1, `12.25` 2), by
 * arithmetic alone; -1 when there is none such under 2^53 (`1e-20`, a value of 16 or 17 digits):
 * the common case without the text conversions `decimalPlaces` makes.
 */
function fastPlaces(x: number): number {
  for (let p = 0; p <= 15; p++) {
    const m = x * POW10[p]!;
    if (!(Math.abs(m) < 2 ** 53)) return -1;
    // The one rounding of k / 10^p is exact, so it gives `x` back only where k·10^-p is a decimal `x` is the double of.
    if (Math.round(m) / POW10[p]! === x) return p;
  }
  return -1;
}

/**
 * `a op b` (`+ - * /`) on the operands as whole numbers of 10^-p, each exact, so the one rounding is the last
 * division's: the double nearest the exact decimal result (`0.1 + 0.2` is 3 / 10, 0.3; `3.3 / 3` 33 / 30, 1.1). Undefined
 * where an operand or a product is past what this holds exactly: the caller's slower path then.
 */
function scaledArithmetic(op: string, a: number, b: number): number | undefined {
  const pa = fastPlaces(a);
  const pb = pa < 0 ? -1 : fastPlaces(b);
  if (pb < 0) return undefined;
  const p = op === '*' ? pa + pb : Math.max(pa, pb);
  if (p >= POW10.length) return undefined;
  const x = Math.round(a * POW10[op === '*' ? pa : p]!);
  const y = Math.round(b * POW10[op === '*' ? pb : p]!);
  const r = op === '+' ? x + y : op === '-' ? x - y : op === '*' ? x * y : x / y;
  if (op === '/') return Number.isSafeInteger(x) && Number.isSafeInteger(y) ? r : undefined;
  return Number.isSafeInteger(x) && Number.isSafeInteger(y) && Number.isSafeInteger(r) ? r / POW10[p]! : undefined;
}

/** The decimal places `x` is written with in its shortest form (`0.1` 1, `1e-7` 7, `120` 0). */
export function decimalPlaces(x: number): number {
  const s = String(x);
  const e = s.indexOf('e');
  const mantissa = e < 0 ? s : s.slice(0, e);
  const dot = mantissa.indexOf('.');
  return Math.max(0, (dot < 0 ? 0 : mantissa.length - dot - 1) - (e < 0 ? 0 : Number(s.slice(e + 1))));
}

/**
 * `a op b` on Decimals (N1 § 6.6; a Decimal is a decimal, not a binary fraction): `+ - * /` on the operands as whole
 * numbers of 10^-p (scaledArithmetic), so the result is the double nearest the exact decimal one (`0.1 + 0.2 = 0.3`,
 * `1.1 * 3 = 3.3`, `0.3 / 0.1 = 3`, `1 / 3` 0.3333333333333333), and a value of 16 or 17 digits, or past 2^53, is
 * computed as the double it is (`x + 0 = x`, `1 / 3 * 3 = 1`); `div` and `mod` on the operands scaled to whole
 * numbers, so `0.3 mod 0.1` is 0 and `0.3 div 0.1` is 3 (a binary remainder was 0.09999999999999998, a quotient 2).
 * Undefined for a division by zero or a result no number holds.
 */
export function decimalArithmetic(op: string, a: number, b: number): number | undefined {
  let r: number;
  switch (op) {
    case '+': r = scaledArithmetic(op, a, b) ?? a + b; break;
    case '-': r = scaledArithmetic(op, a, b) ?? a - b; break;
    case '*': r = scaledArithmetic(op, a, b) ?? a * b; break;
    case '/': if (b === 0) return undefined; r = scaledArithmetic(op, a, b) ?? a / b; break;
    default: {
      if (b === 0) return undefined;
      const scale = 10 ** Math.max(decimalPlaces(a), decimalPlaces(b));
      const x = Math.round(a * scale);
      const y = Math.round(b * scale);
      const whole = Number.isSafeInteger(x) && Number.isSafeInteger(y) && scale <= 1e15;
      if (op === 'div') r = whole ? Math.trunc(x / y) : Math.trunc(a / b);
      else r = whole ? (x % y) / scale : snapped(a % b);
    }
  }
  return Number.isFinite(r) ? r || 0 : undefined;
}

/**
 * A number's text as N1's toString() writes it, `(\\+|-)?\\d+(.\\d+)?`: never in exponent notation, which JavaScript uses
 * from 1e21 and below 1e-6 (`0.0000001` was `'1e-7'`).
 */
export function numberText(x: number): string {
  const s = String(x);
  if (!s.includes('e')) return s;
  return Number.isInteger(x) ? BigInt(x).toString() : x.toFixed(Math.min(100, decimalPlaces(x)));
}
