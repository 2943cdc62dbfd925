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

/** The k-th central moment of `values` about `mean`, over N. */
function moment(values: number[], mean: number, k: number): number {
  let s = 0;
  for (const v of values) s += (v - mean) ** k;
  return s / values.length;
}

const QUANTILES: Record<string, number> = {
  '20-percent': 0.2, '80-percent': 0.8, '4-lower': 0.25, '4-upper': 0.75, '5-1': 0.2, '5-2': 0.4, '5-3': 0.6, '5-4': 0.8,
};

/**
 * Statistic `code` of `values` (NUMERIC_STATISTICS); undefined where it is not defined: any but `count`
 * of no numbers, skew and kurtosis of numbers that do not vary.
 */
export function statistic(code: string, values: number[]): number | undefined {
  if (code === 'count') return values.length;
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const sum = values.reduce((a, b) => a + b, 0);
  const mean = sum / values.length;
  if (code in QUANTILES) return quantile(sorted, QUANTILES[code]!);
  switch (code) {
    case 'average': return mean;
    case 'sum': return sum;
    case 'maximum': return sorted[sorted.length - 1];
    case 'minimum': return sorted[0];
    case 'median': return quantile(sorted, 0.5);
    case 'variance': return moment(values, mean, 2);
    case 'std-dev': return Math.sqrt(moment(values, mean, 2));
    case '4-dev': return (quantile(sorted, 0.75) - quantile(sorted, 0.25)) / 2;
  }
  const m2 = moment(values, mean, 2);
  if (m2 === 0) return undefined;
  if (code === 'skew') return moment(values, mean, 3) / m2 ** 1.5;
  if (code === 'kurtosis') return moment(values, mean, 4) / m2 ** 2;
  throw new Error(`unknown statistic ${code}`);
}
