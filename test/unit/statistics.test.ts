/**
 * The statistics of R4's StatisticsCode as `Observation/$stats` computes them (src/fhir/statistics.ts):
 * each definition on small sets whose answers are worked out by hand, and where each is undefined.
 */
import { describe, expect, test } from 'bun:test';
import { NUMERIC_STATISTICS, quantile, statistic } from '../../src/fhir/statistics.ts';

describe('statistics', () => {
  test('median and quantiles: linear interpolation between closest ranks (type 7)', () => {
    expect(statistic('median', [4, 1, 3, 2])).toBe(2.5);
    expect(statistic('median', [7])).toBe(7);
    // h = (N - 1) p: for 1..10, the 20th percentile is at rank 1.8 (2.8), the 4th quintile at 7.2 (8.2).
    const ten = [10, 9, 8, 7, 6, 5, 4, 3, 2, 1];
    expect(statistic('20-percent', ten)).toBeCloseTo(2.8, 12);
    expect(statistic('5-4', ten)).toBeCloseTo(8.2, 12);
    expect(statistic('4-lower', ten)).toBeCloseTo(3.25, 12);
    expect(statistic('4-upper', ten)).toBeCloseTo(7.75, 12);
    expect(statistic('4-dev', ten)).toBeCloseTo(2.25, 12);
    expect(quantile([5], 0.8)).toBe(5);
  });

  test('variance and std-dev over N; skew and kurtosis as standardized moments', () => {
    expect(statistic('variance', [2, 4, 4, 4, 5, 5, 7, 9])).toBe(4);
    expect(statistic('std-dev', [2, 4, 4, 4, 5, 5, 7, 9])).toBe(2);
    expect(statistic('variance', [3])).toBe(0);
    // Symmetric: no skew; two points: kurtosis 1 (its least possible value).
    expect(statistic('skew', [1, 2, 3])).toBe(0);
    expect(statistic('kurtosis', [1, 3])).toBe(1);
    expect(statistic('skew', [5, 5, 5])).toBeUndefined();
    expect(statistic('kurtosis', [5])).toBeUndefined();
  });

  test('no values: only count is defined', () => {
    for (const code of Object.keys(NUMERIC_STATISTICS)) expect({ code, value: statistic(code, []) }).toEqual({ code, value: code === 'count' ? 0 : undefined });
    expect(statistic('sum', [1.5, -2])).toBe(-0.5);
    expect(statistic('maximum', [-3, -1, -2])).toBe(-1);
    expect(statistic('minimum', [-3, -1, -2])).toBe(-3);
  });
});
