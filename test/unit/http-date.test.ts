/** HTTP-date parsing (RFC 9110 5.6.7) for If-Modified-Since: the three forms, nothing else. */
import { expect, test } from 'bun:test';
import { parseHttpDate } from '../../src/http/http-date.ts';

const NOW = Date.parse('2026-03-01T00:00:00Z');
const T = Date.parse('1994-11-06T08:49:37Z');

test('IMF-fixdate, RFC 850 and asctime name the same instant', () => {
  expect(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT', NOW)).toBe(T);
  expect(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT', NOW)).toBe(T);
  expect(parseHttpDate('Sun Nov  6 08:49:37 1994', NOW)).toBe(T);
  expect(parseHttpDate('  Sun, 06 Nov 1994 08:49:37 GMT ', NOW)).toBe(T);
});

test('a two-digit year more than 50 years ahead is the previous century', () => {
  expect(parseHttpDate('Tuesday, 01-Jan-30 00:00:00 GMT', NOW)).toBe(Date.parse('2030-01-01T00:00:00Z'));
  expect(parseHttpDate('Friday, 01-Jan-99 00:00:00 GMT', NOW)).toBe(Date.parse('1999-01-01T00:00:00Z'));
});

test('anything else is not an HTTP-date: ISO 8601, other zones, lists, impossible days, garbage', () => {
  for (const bad of [
    '2026-03-01', '2026-03-01T08:30:15Z', 'Sun, 01 Mar 2026 08:30:15 +0000', 'Sun, 01 Mar 2026 08:30:15 UTC',
    'Sun, 1 Mar 2026 08:30:15 GMT', 'Sun, 01 Mar 2026 08:30:15 GMT, Mon, 02 Mar 2026 08:30:15 GMT',
    'Sat, 31 Feb 2026 00:00:00 GMT', 'Sun, 01 Foo 2026 00:00:00 GMT', 'Sun, 01 Mar 2026 24:00:00 GMT', 'yesterday', '',
  ]) {
    expect({ bad, parsed: parseHttpDate(bad, NOW) }).toEqual({ bad, parsed: null });
  }
});
