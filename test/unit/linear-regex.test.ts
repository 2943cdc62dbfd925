/**
 * src/linear-regex.ts against JavaScript's own RegExp: on thousands of generated patterns and inputs
 * (every construct it compiles, each flag it accepts) its `test` answers as `RegExp.prototype.test`
 * does; patterns it cannot decide have no linear form; a pattern that backtracks without end is
 * answered in linear time; and a test past its step budget gives up (undefined).
 */
import { describe, expect, test } from 'bun:test';
import { linearRegex, MAX_STEPS } from '../../src/linear-regex.ts';
import { prng } from '../helpers/prng.ts';

const ATOMS = ['a', 'b', 'x', '.', '[ab]', '[^a]', '[a-c]', '\\d', '\\w', '\\s', '\\W', '\\.', '[\\d\\s]', '[^\\w]', '\\u0061', '\\x62', '[-a]', '[a-]', '😀', '[😀a]', '\\u{1F600}'];
const QUANTIFIERS = ['', '', '', '*', '+', '?', '{2}', '{1,3}', '{0,2}', '{2,}', '*?', '+?', '??', '{1,2}?'];

function pattern(next: () => number, depth: number, unicode: boolean): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
  const items: string[] = [];
  const n = 1 + Math.floor(next() * 3);
  for (let i = 0; i < n; i++) {
    const r = next();
    let atom: string;
    if (r < 0.05) atom = '^';
    else if (r < 0.1) atom = '$';
    else if (r < 0.3 && depth > 0) atom = `(${next() < 0.5 ? '?:' : ''}${pattern(next, depth - 1, unicode)})`;
    else {
      atom = pick(ATOMS);
      if (!unicode && (atom.includes('😀') || atom === '\\u{1F600}')) atom = 'a';
    }
    items.push(atom === '^' || atom === '$' ? atom : atom + pick(QUANTIFIERS));
  }
  const seq = items.join('');
  return next() < 0.2 ? `${seq}|${pattern(next, depth - 1, unicode)}` : seq;
}

const CHARS = ['a', 'a', 'b', 'x', '1', ' ', '\n', '.', '-', '😀', '\u2028'];
function input(next: () => number): string {
  let s = '';
  const n = Math.floor(next() * 9);
  for (let i = 0; i < n; i++) s += CHARS[Math.floor(next() * CHARS.length)];
  return s;
}

describe('linear regular expressions', () => {
  for (const flags of ['', 's', 'u', 'us']) {
    test(`answer as RegExp.prototype.test does, on generated patterns and inputs (flags '${flags}')`, () => {
      const next = prng(0x5eed + flags.length * 7 + (flags.includes('u') ? 1 : 0));
      let compared = 0;
      for (let p = 0; p < 1500; p++) {
        const source = pattern(next, 2, flags.includes('u'));
        const re = new RegExp(source, flags);
        const lin = linearRegex(re);
        if (lin === undefined) throw new Error(`no linear form for /${source}/${flags}`);
        for (let i = 0; i < 12; i++) {
          const s = input(next);
          const want = re.test(s);
          if (lin.test(s) !== want) throw new Error(`/${source}/${flags} on ${JSON.stringify(s)}: RegExp says ${want}`);
          compared++;
        }
      }
      expect(compared).toBe(18_000);
    });
  }

  test('the forms the filter and FHIRPath build: a whole-string pattern, anchors inside alternatives, empty parts', () => {
    const cases: [string, string, string[], string[]][] = [
      ['^(?:abc-[0-9])$', '', ['abc-1'], ['abc-12', 'xabc-1', 'abc-']],
      ['^(?:a|^b|c$)', '', ['a', 'bx', 'c'], ['xb', 'cx']],
      ['a||b', '', ['', 'zz'], []],
      ['()x(|y)', '', ['x', 'xy'], ['y']],
      ['[\\b]', '', ['\b'], ['b']],
      ['\\0', '', ['\0'], ['0']],
      ['^[^]$', '', ['\n', 'a'], ['', 'ab']],
      ['^[]$', '', [], ['', 'a']],
      ['^.$', 'u', ['😀', '\n'.replace('\n', 'a')], ['\n', '😀😀']],
      ['^..$', '', ['😀'], ['a']],
      ['^\\u{1F600}{2}$', 'u', ['😀😀'], ['😀']],
      ['^[\\u0041-\\u005A]+$', '', ['ABC'], ['abc']],
      ['^\\@\\\'$', '', ['@\''], ['\\@']],
      ['^(?<year>\\d{4})-\\d{2}$', 'u', ['2024-01'], ['24-01']],
      ['^(a{2,3}){2}$', '', ['aaaa', 'aaaaaa'], ['aaa', 'aaaaaaa']],
    ];
    for (const [source, flags, yes, no] of cases) {
      const re = new RegExp(source, flags);
      const lin = linearRegex(re)!;
      expect(lin).toBeDefined();
      for (const s of [...yes, ...no]) expect([source, s, lin.test(s)]).toEqual([source, s, re.test(s)]);
      for (const s of yes) expect([source, s, lin.test(s)]).toEqual([source, s, true]);
      for (const s of no) expect([source, s, lin.test(s)]).toEqual([source, s, false]);
    }
  });

  test('patterns an automaton cannot decide, or that Annex B reads leniently, have no linear form', () => {
    for (const [source, flags] of [
      ['(a)\\1', ''], ['(?=a)a', ''], ['(?!a)b', ''], ['(?<=a)b', ''], ['\\bword', ''], ['\\Bx', ''], ['\\p{L}', 'u'],
      ['a', 'i'], ['a', 'g'], ['a', 'm'], ['a{', ''], ['a}', ''], [']', ''], ['[\\d-z]', ''], ['\\cJ', ''], ['a{100000}', ''],
      ['(?:a{100}){100}', ''],
    ] as const) {
      expect([source, flags, linearRegex(new RegExp(source, flags))]).toEqual([source, flags, undefined]);
    }
  });

  test('a pattern that backtracks without end is answered, right, in linear time', () => {
    // The work is counted, not timed: a test visits at most `states` states a character, and past MAX_STEPS visits
    // answers undefined, so a true or false answer is one of at most `states` x the input's length visits.
    // (The backtracking engine gives up on far shorter inputs than these; the time is bench/hostile-input.ts's.)
    for (const [re, input, answer] of [
      [/^(?:(a+)+)$/, `${'a'.repeat(5_000)}!`, false],
      [/^(?:(a+)+)$/, 'a'.repeat(5_000), true],
      [/((a+)+)+b/s, `${'a'.repeat(10_000)}!`, false],
      [/(x+x+)+y/, `${'x'.repeat(3_000)}y`, true],
    ] as const) {
      const lin = linearRegex(re)!;
      expect([re.source, lin.test(input)]).toEqual([re.source, answer]);
      expect(lin.states * (input.length + 1)).toBeLessThanOrEqual(MAX_STEPS);
    }
  });

  test('a test past its step budget gives up: a long input against a large pattern', () => {
    const lin = linearRegex(/a{2000}b/)!;
    expect(lin.test(`${'a'.repeat(2000)}b`)).toBe(true);
    expect(lin.test('a'.repeat(30_000))).toBeUndefined();
  });
});
