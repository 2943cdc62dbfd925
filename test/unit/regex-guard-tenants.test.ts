/**
 * The regex guard's accounts (src/regex-guard.ts) are each tenant's, bounded each on its own: a tenant that proves
 * a thousand patterns too costly starts its own afresh, and another tenant's refusal stands (one set for all was
 * cleared, and the other tenant's pattern ran again). The time a run takes is the guard's input: here a double of
 * `performance.now` whose clock a run of a "slow" pattern moves by 200 ms, so that no test waits, and the work is
 * counted as the runs the guard let through.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { guarded, MAX_HELD, regexGuardHeld, withRegexAccounts } from '../../src/regex-guard.ts';

const realNow = performance.now.bind(performance);
let clock = 0;

beforeEach(() => {
  clock = realNow();
  performance.now = () => clock;
});
afterEach(() => {
  performance.now = realNow;
});

const tooCostly = () => new Error('too costly');

/** Runs `re` under `tenant` as a run of `ms` (the double's clock moved by it): whether it ran, and whether it was refused. */
function attempt(tenant: string, re: RegExp, ms: number): { ran: boolean; refused: boolean } {
  let ran = false;
  try {
    withRegexAccounts(tenant, () => guarded(re, () => ((ran = true), (clock += ms), false), tooCostly));
    return { ran, refused: false };
  } catch (err) {
    if ((err as Error).message !== 'too costly') throw err;
    return { ran, refused: true };
  }
}

describe('regex guard accounts per tenant', () => {
  test("guard: a pattern refused to one tenant is refused without a run there, and run for another's", () => {
    const re = /^(?!q)(a+)+$/;
    expect(attempt('r1', re, 200)).toEqual({ ran: true, refused: true });
    expect(attempt('r1', re, 200)).toEqual({ ran: false, refused: true });
    expect(attempt('r2', re, 1)).toEqual({ ran: true, refused: false });
  });

  test("one tenant proving a thousand patterns too costly clears its own refusals, never another's", () => {
    const kept = /^(?!k)(b+)+$/;
    expect(attempt('s1', kept, 200)).toEqual({ ran: true, refused: true });
    // s2 proves 1,001 patterns too costly: past its bound, its own start afresh.
    for (let i = 0; i <= 1_000; i++) expect(attempt('s2', new RegExp(`^(?!x${i})(c+)+$`), 200).refused).toBe(true);
    // s1's refusal stands: refused without a run (one set for all was cleared, and it ran again, 200 ms of s1's request).
    expect(attempt('s1', kept, 200)).toEqual({ ran: false, refused: true });
    // s2's first patterns were forgotten with its own set: run again.
    expect(attempt('s2', /^(?!x0)(c+)+$/, 1)).toEqual({ ran: true, refused: false });
  });
});

describe('regex guard memory across tenants', () => {
  test('a run that is not slow makes no entry, whatever tenant the request names', () => {
    const before = regexGuardHeld();
    for (let i = 0; i < 500; i++) expect(attempt(`unknown-${i}`, /^[a-z]+$/, 0)).toEqual({ ran: true, refused: false });
    expect(regexGuardHeld()).toEqual(before);
  });

  test('all tenants together hold at most MAX_HELD; a tenant within its share keeps its refusal', () => {
    const kept = /^(?!small)(d+)+$/;
    expect(attempt('small', kept, 200)).toEqual({ ran: true, refused: true });
    // 25 tenants prove a thousand patterns each too costly: 25,000 refusals, past what all may hold together.
    for (let t = 0; t < 25; t++) {
      for (let i = 0; i < 1_000; i++) attempt(`big-${t}`, new RegExp(`^(?!y${i})(e+)+$`), 200);
    }
    expect(regexGuardHeld().held).toBeLessThanOrEqual(MAX_HELD);
    expect(attempt('small', kept, 200)).toEqual({ ran: false, refused: true });
  });

  test("a long pattern is kept by its digest: what is held does not grow with the patterns' length", () => {
    const before = regexGuardHeld().chars;
    const long = 'z'.repeat(10_000);
    for (let i = 0; i < 100; i++) expect(attempt('long', new RegExp(`^(?!${long}${i})(f+)+$`), 200).refused).toBe(true);
    expect(regexGuardHeld().chars - before).toBeLessThan(100 * 100);
  });
});
