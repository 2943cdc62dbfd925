/**
 * The statistics of R4's StatisticsCode (valueset-observation-statistics.html) over a set of numbers,
 * as `Observation/$stats` reports them (src/fhir/stats.ts). Exact definitions:
 *
 * - `average`: the arithmetic mean; `sum`; `maximum`; `minimum`; `count`: how many numbers.
 * - `median`: the middle number of the sorted numbers, or the mean of the two middle ones.
 * - `variance` and `std-dev`: of the N numbers as a population (the squared deviations' sum over N),
 *   and its square root: the statistic "of N measurements", defined for N = 1 (0).
 * - Quantiles by linear interpolation between closest ranks (Hyndman & Fan type 7, the default of R,
 *   NumPy and spreadsheets' PERCENTILE.INC): for p in [0, 1], h = (N - 1) p, the number at rank
 *   floor(h) plus (h - floor(h)) times the step to the next. `20-percent` p = 0.2, `80-percent` 0.8,
 *   `4-lower` 0.25, `4-upper` 0.75, `5-1`..`5-4` 0.2, 0.4, 0.6, 0.8; `4-dev`, the quartile deviation,
 *   is (Q3 - Q1) / 2, half the interquartile range (as R4 defines it).
 * - `skew`: the population skewness g1 = m3 / m2^(3/2) and `kurtosis` the fourth standardized moment
 *   m4 / m2^2 (not the excess), with m_k the k-th central moment (sum of (x - mean)^k over N);
 *   undefined (left out) when the numbers do not vary (m2 = 0).
 *
 * `total-count` counts Observations, not numbers, and `regression` needs time; stats.ts answers both.
 */

/** The StatisticsCode codes this module computes, with their R4 display. */
export const NUMERIC_STATISTICS: Record<string, string> = {
  average: 'Average', maximum: 'Maximum', minimum: 'Minimum', count: 'Count', median: 'Median',
  'std-dev': 'Standard Deviation', sum: 'Sum', variance: 'Variance', '20-percent': '20th Percentile',
  '80-percent': '80th Percentile', '4-lower': 'Lower Quartile', '4-upper': 'Upper Quartile',
  '4-dev': 'Quartile Deviation', '5-1': '1st Quintile', '5-2': '2nd Quintile', '5-3': '3rd Quintile',
  '5-4': '4th Quintile', skew: 'Skew', kurtosis: 'Kurtosis',
};

/** The quantile of p (0..1) of `sorted` (ascending, not empty): linear interpolation between closest ranks. */
export function quantile(sorted: number[], p: number): number {
  const h = (sorted.length - 1) * p;
  const lo = Math.floor(h);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo]! + (h - lo) * (sorted[hi]! - sorted[lo]!);
}

/** The power of two nearest below the largest magnitude among `values` (1 when all are 0). */
function scaleOf(values: number[]): number {
  let max = 0;
  for (const v of values) max = Math.max(max, Math.abs(v));
  return max === 0 ? 1 : 2 ** Math.floor(Math.log2(max));
}

/** The mean of the k-th powers of `values`. */
function meanPower(values: number[], k: number): number {
  let s = 0;
  for (const v of values) s += v ** k;
  return s / values.length;
}

/** A result that is a double, or undefined (left out) where it is none: beyond the range, or underflowed to 0 from a nonzero `exact`. */
const representable = (value: number, nonzero = false) => (Number.isFinite(value) && !(nonzero && value === 0) ? value : undefined);

const QUANTILES: Record<string, number> = {
  '20-percent': 0.2, '80-percent': 0.8, '4-lower': 0.25, '4-upper': 0.75, '5-1': 0.2, '5-2': 0.4, '5-3': 0.6, '5-4': 0.8,
};

/**
 * Statistic `code` of `values` (NUMERIC_STATISTICS); undefined where it is not defined: any but `count`
 * of no numbers, skew and kurtosis of numbers that do not vary, and any whose value is no double
 * (beyond +-1.8e308, as the variance of numbers near 1e200, or below 5e-324 though not 0, as the
 * variance of numbers near 1e-200).
 *
 * The numbers are computed over as multiples of a power of two near their largest magnitude (an exact
 * scaling), and the moments over the deviations from the mean as multiples of one near the largest
 * deviation: a sum or difference of numbers near 1e308 does not overflow on the way (the median of -1e308
 * and 1e308 is 0), nor do powers of tiny deviations underflow (the standard deviation of numbers near
 * 1e-200 is not 0).
 */
export function statistic(code: string, values: number[]): number | undefined {
  if (code === 'count') return values.length;
  if (values.length === 0) return undefined;
  const scale = scaleOf(values);
  const scaled = values.map((v) => v / scale);
  const sorted = [...scaled].sort((a, b) => a - b);
  const sum = scaled.reduce((a, b) => a + b, 0);
  const mean = sum / values.length;
  if (code in QUANTILES) return quantile(sorted, QUANTILES[code]!) * scale;
  switch (code) {
    case 'average': return mean * scale;
    case 'sum': return representable(sum * scale);
    case 'maximum': return sorted[sorted.length - 1]! * scale;
    case 'minimum': return sorted[0]! * scale;
    case 'median': return quantile(sorted, 0.5) * scale;
    case '4-dev': return ((quantile(sorted, 0.75) - quantile(sorted, 0.25)) / 2) * scale;
  }
  const deviations = scaled.map((v) => v - mean);
  const spread = scaleOf(deviations);
  const e = deviations.map((d) => d / spread);
  const m2 = meanPower(e, 2);
  if (code === 'variance') return m2 === 0 ? 0 : representable(m2 * spread * scale * spread * scale, true);
  if (code === 'std-dev') return m2 === 0 ? 0 : representable(Math.sqrt(m2) * spread * scale, true);
  if (m2 === 0) return undefined;
  if (code === 'skew') return meanPower(e, 3) / m2 ** 1.5;
  if (code === 'kurtosis') return meanPower(e, 4) / m2 ** 2;
  throw new Error(`unknown statistic ${code}`);
}
