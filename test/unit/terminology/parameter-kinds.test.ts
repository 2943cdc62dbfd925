import { describe, expect, test } from 'bun:test';
import { valueSetValidateCodeParams } from '../../../src/terminology/input/operations.ts';
import { P } from '../../../src/terminology/input/parameters.ts';

/** Values of every JSON shape, including the edges the kinds' schemas draw. */
const SAMPLES: unknown[] = [
  '', ' ', 'x', 'http://loinc.org', 'de', 'en-GB', 'en_GB', 'toolonglanguage', 'de-', '-de', 'zh-Hant-TW',
  0, -0, 1, -1, 1.5, 2 ** 53, 2 ** 53 - 1, Number.NaN, Number.POSITIVE_INFINITY,
  true, false, null, undefined, {}, [], ['x'], { code: 'x' },
];

describe('parameter kinds: the zod-free check agrees with the schema', () => {
  for (const [name, kind] of Object.entries(P)) {
    const plain = kind.plain;
    if (plain === undefined) continue;
    test(name, () => {
      for (const value of SAMPLES) {
        const parsed = kind.schema.safeParse(value);
        const unchanged = parsed.success && Object.is(parsed.data, value);
        expect({ value, plain: plain(value) }).toEqual({ value, plain: unchanged });
      }
    });
  }
});

describe('Parameters bodies: the fast envelope check and zod give the same inputs and errors', () => {
  const message = (body: unknown) => {
    try {
      return { inputs: valueSetValidateCodeParams.fromBody(body) };
    } catch (err) {
      return { error: (err as Error).message };
    }
  };

  test.each([
    ['a plain body', { resourceType: 'Parameters', parameter: [{ name: 'code', valueCode: 'x' }, { name: 'system', valueUri: 'http://s' }, { name: 'other', valueString: 'ignored' }] }, { inputs: { code: 'x', system: 'http://s' } }],
    ['no parameters', { resourceType: 'Parameters' }, { inputs: {} }],
    ['an empty code', { resourceType: 'Parameters', parameter: [{ name: 'code', valueCode: '' }] }, 'error'],
    ['a number as a code', { resourceType: 'Parameters', parameter: [{ name: 'code', valueCode: 7 }] }, 'error'],
    ['abstract as a string', { resourceType: 'Parameters', parameter: [{ name: 'abstract', valueBoolean: 'yes' }] }, 'error'],
    ['a bad language tag', { resourceType: 'Parameters', parameter: [{ name: 'displayLanguage', valueCode: 'en_GB' }] }, 'error'],
    ['another resource', { resourceType: 'Patient' }, 'error'],
    ['parameter not a list', { resourceType: 'Parameters', parameter: {} }, 'error'],
    ['parameter null', { resourceType: 'Parameters', parameter: null }, 'error'],
    ['an entry without a name', { resourceType: 'Parameters', parameter: [{ valueCode: 'x' }] }, 'error'],
    ['an array body', [], 'error'],
  ] as const)('%s', (_, body, expected) => {
    const got = message(body);
    if (expected === 'error') {
      expect(got.error).toBeString();
      expect(got.error!.length).toBeGreaterThan(10);
    } else {
      expect(got).toEqual(expected);
    }
  });
});
