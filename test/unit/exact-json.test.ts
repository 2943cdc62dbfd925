/**
 * Numbers kept as written (src/fhir/exact-json.ts): the scan that decides whether a text is parsed with
 * the recording reviver (scanJson) against the reviver's own test (`String(value) !== source`) and a
 * reference depth, on many generated literals in many JSON contexts and on every R4 example; the round
 * trip of parseExact and stringifyExact; the helpers that carry literals through copies and patches.
 */
import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { Random } from '../../bench/lib/prng.ts';
import { parseBundle } from '../../src/fhir/bundle-entries.ts';
import { entriesPerAttempt } from '../../src/fhir/bundle-ops.ts';
import { prepareVersion } from '../../src/fhir/prepared.ts';
import { asResource, parseJson, withoutId } from '../../src/fhir/resource.ts';
import {
  carryLiterals, cloneExact, holdsLiterals, literalOf, parseExact, parseLiterally, refreshLiterals, scanJson, setLiteral, spliceExact, stringifyExact,
} from '../../src/fhir/exact-json.ts';

/** Whether JSON.parse reads a number of `text` that String does not write back as it was written. */
function exactlyHolds(text: string): boolean {
  let found = false;
  JSON.parse(text, ((_key: string, value: unknown, context?: { source?: string }) => {
    if (typeof value === 'number' && String(value) !== context!.source) found = true;
    return value;
  }) as (key: string, value: unknown) => unknown);
  return found;
}

/**
 * Where parseExact's recorded literals differ from what a reviver reads (TC39 source text access) of
 * each number that String does not write back, and marks where none are below (with `marks`): the
 * paths and literals of the differences, or none.
 */
function recordingDiffers(text: string, marks = true): string[] {
  const oracle = new WeakMap<object, Map<string, string>>();
  const read = JSON.parse(text, function (this: object, key: string, value: unknown, context?: { source?: string }) {
    if (typeof value === 'number' && String(value) !== context!.source) {
      if (!oracle.has(this)) oracle.set(this, new Map());
      oracle.get(this)!.set(key, context!.source!);
    }
    return value;
  } as (key: string, value: unknown) => unknown);
  const out: string[] = [];
  /** Compares the literals below `mine` with the reviver's, and its mark with whether any are below; returns whether any are. */
  const walk = (mine: unknown, theirs: unknown, path: string): boolean => {
    if (mine === null || typeof mine !== 'object') return false;
    let below = false;
    for (const key of Object.keys(mine)) {
      const [a, b] = [(mine as Record<string, unknown>)[key], (theirs as Record<string, unknown>)[key]];
      if (typeof a === 'number') {
        const [got, want] = [literalOf(mine, key), oracle.get(theirs as object)?.get(key)];
        if (got !== want) out.push(`${path}/${key}: ${got} instead of ${want}`);
        if (want !== undefined) below = true;
      } else if (walk(a, b, `${path}/${key}`)) below = true;
    }
    if (marks && holdsLiterals(mine) !== below) out.push(`${path || '/'}: marked ${holdsLiterals(mine)}, holds ${below}`);
    return below;
  };
  walk(parseExact(text), read, '');
  return out;
}

/** How deep a JSON value nests objects and arrays. */
function depthOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  return 1 + Math.max(0, ...Object.values(value).map(depthOf));
}

const digits = (r: Random, n: number) => Array.from({ length: n }, () => String(r.int(0, 9))).join('');

/** A JSON number literal of every shape: short and long, with fractions ending in zeros or not, exponents, zeros and tiny values. */
function literal(r: Random): string {
  const sign = r.chance(0.3) ? '-' : '';
  const whole = r.chance(0.35) ? '0' : String(r.int(1, 9)) + digits(r, r.chance(0.2) ? r.int(10, 25) : r.int(0, 6));
  let fraction = '';
  if (r.chance(0.6)) {
    const zeros = r.chance(0.2) ? '0'.repeat(r.int(1, 9)) : '';
    fraction = '.' + zeros + digits(r, r.chance(0.2) ? r.int(8, 22) : r.int(1, 5)) + (r.chance(0.2) ? '0'.repeat(r.int(1, 3)) : '');
  }
  let exponent = '';
  if (r.chance(0.15)) exponent = (r.chance(0.5) ? 'e' : 'E') + (['', '+', '-'][r.int(0, 2)]!) + String(r.int(0, r.chance(0.1) ? 400 : 30));
  return sign + whole + fraction + exponent;
}

/** `lit` placed in a JSON text: as a member or an array item, compact or indented, among decoys in strings. */
function placed(r: Random, lit: string): string {
  const ws = () => [' ', '', '\n  ', '\t', '\r\n'][r.int(0, 4)]!;
  const decoy = ['"2023-04-03T15:30:10.010+01:00"', '"urn:oid:2.16.840.1.113883.19.5"', '"1.0, [2.50]}"', '"3fa85f64-5717-4562-b3fc-2c963f66afa6"', '"a\\"1.0 {["', '"\\\\"', '"x\\\\\\"-0\\\\"'][r.int(0, 6)]!;
  switch (r.int(0, 5)) {
    case 0: return `{"value":${lit}}`;
    case 1: return `{${ws()}"a"${ws()}:${ws()}${decoy},${ws()}"value"${ws()}:${ws()}${lit}${ws()}}`;
    case 2: return `[${ws()}${lit}${ws()}]`;
    case 3: return `[1,${ws()}${lit},${ws()}${decoy}]`;
    case 4: return `{"x":{"y":[{"z":${lit}},${decoy}]},"w":true}`;
    default: return `{"v":[${lit},${ws()}${literal(r)}]${ws()},"s":${decoy}}`;
  }
}

describe('the scan finds exactly the texts the reviver would record a literal of, and their depth; parseExact records what the reviver reads', () => {
  test('on 50,000 generated literals in generated contexts', () => {
    const r = new Random(20261130, 1);
    let flagged = 0;
    for (let i = 0; i < 50_000; i++) {
      const text = placed(r, literal(r));
      const scan = scanJson(text);
      const exact = exactlyHolds(text);
      if (scan.literals !== exact) throw new Error(`scanJson says ${scan.literals}, the reviver ${exact}, of ${text}`);
      if (scan.depth !== depthOf(JSON.parse(text))) throw new Error(`scanJson finds depth ${scan.depth} in ${text}`);
      const differences = recordingDiffers(text);
      if (differences.length > 0) throw new Error(`parseExact records ${differences.join(', ')} in ${text}`);
      if (exact) flagged++;
    }
    // Both answers occur often enough for the comparison to mean something.
    expect(flagged).toBeGreaterThan(10_000);
    expect(flagged).toBeLessThan(40_000);
  });

  test('on literals of each kind that String does not give back, and on ones it does', () => {
    const recorded = [
      '98.60', '1.0', '0.010', '1e21', '1E2', '1e+2', '12345678901234567890.5', '-0.0', '-0', '0.00000000000000000000000001', '0.0000001', '-0.0000005',
      '9007199254740993', '100000000000000000000000', '1e400', '0.10000000000000001',
    ];
    const kept = ['98.6', '0', '-1', '0.5', '-0.5', '100', '0.000001', '123456789012345', '1.5', '2147483647', '1e+21', '1e-26', '1e-7', '5e-324', '1.7976931348623157e+308', '9007199254740992'];
    for (const [lits, literals] of [[recorded, true], [kept, false]] as const) {
      for (const lit of lits) {
        for (const text of [`{"a":${lit}}`, `{"a": ${lit} }`, `[${lit}]`, `[1,\n  ${lit}\n]`]) {
          expect({ text, exact: exactlyHolds(text), scan: scanJson(text).literals }).toEqual({ text, exact: literals, scan: literals });
        }
      }
    }
  });

  test('with keys given twice (JSON.parse keeps the last) and keys written with escapes', () => {
    // A key given twice may leave a mark above no literal (it only costs the replacer's walk).
    for (const text of ['{"n":1.0,"n":1}', '{"n":1,"n":1.0}', '{"n":1.0,"n":2.50}', '{"a":{"x":1.0},"a":{"x":1}}', '{"a":{"x":1.0},"a":{"y":2.0}}', '{"a":[1.0,2],"a":[1,2.0]}', '{"a":{"x":1.0},"a":"s"}']) {
      expect({ text, differences: recordingDiffers(text, false) }).toEqual({ text, differences: [] });
    }
    for (const text of ['{"\\u0061":1.0,"b\\"c":[2.0]}', '{"__proto__":{"v":1.0},"w":[{"x":-0}]}', '{"a":[[1.0],[[2],[3.0]]],"b":{"c":{"d":1}}}']) {
      expect({ text, differences: recordingDiffers(text) }).toEqual({ text, differences: [] });
    }
  });

  test('on every R4 example', () => {
    const dir = new URL('../../node_modules/hl7.fhir.r4.examples/', import.meta.url);
    let files = 0;
    let flagged = 0;
    for (const name of readdirSync(dir)) {
      if (!name.endsWith('.json')) continue;
      const text = readFileSync(new URL(name, dir), 'utf8');
      files++;
      const exact = exactlyHolds(text);
      if (scanJson(text).literals !== exact) throw new Error(`scanJson disagrees with the reviver on ${name}`);
      if (exact && recordingDiffers(text).length > 0) throw new Error(`parseExact records ${recordingDiffers(text).join(', ')} in ${name}`);
      if (exact) flagged++;
    }
    // 42 of the 5,307 examples write a number so (Money amounts such as 80.00, decimals such as 4.0).
    expect([files > 2000, flagged > 10]).toEqual([true, true]);
  });
});

describe('parseExact and stringifyExact', () => {
  test('a text written compactly comes back as it was, whatever its numbers', () => {
    const r = new Random(20261130, 2);
    for (let i = 0; i < 20_000; i++) {
      const lit = literal(r);
      const text = `{"resourceType":"Observation","valueQuantity":{"value":${lit}},"component":[{"v":[${literal(r)},${lit}]}],"n":${literal(r)}}`;
      // Beyond a double JSON.parse reads Infinity, which no JSON text holds; such a text is refused by validation (decimal).
      if (!Number.isFinite(Number(lit))) continue;
      expect(stringifyExact(parseExact(text))).toBe(text);
    }
  });

  test('the values are numbers; only literals String would not give back are recorded, by member name and index', () => {
    const v = parseExact('{"a":98.60,"b":98.6,"c":[1.0,2,-0.0],"d":{"e":1e-26,"f":12345678901234567890.5},"g":"1.0"}') as Record<string, any>;
    // structuredClone drops the symbol-keyed Maps, which toEqual would compare.
    expect(structuredClone(v)).toEqual({ a: 98.6, b: 98.6, c: [1, 2, -0], d: { e: 1e-26, f: 12345678901234567000 }, g: '1.0' });
    expect([literalOf(v, 'a'), literalOf(v, 'b'), literalOf(v.c, 0), literalOf(v.c, 1), literalOf(v.c, 2), literalOf(v.d, 'e'), literalOf(v.d, 'f')])
      .toEqual(['98.60', undefined, '1.0', undefined, '-0.0', undefined, '12345678901234567890.5']);
    expect([holdsLiterals(v), holdsLiterals(v.c), holdsLiterals(v.d)]).toEqual([true, true, true]);
    expect(holdsLiterals(parseExact('{"a":98.6,"b":{"c":[1]}}'))).toBe(false);
  });

  test('a copy of an object holds the literals of the original once carried, nested objects being shared; cloneExact copies them all, structuredClone none', () => {
    const v = parseExact('{"id":"x","n":1.0,"q":{"value":2.50}}') as Record<string, unknown>;
    const { id: _, ...rest } = v;
    // Uncarried, the copy is not known to hold any literal, even below it.
    expect(stringifyExact(rest)).toBe('{"n":1,"q":{"value":2.5}}');
    expect(stringifyExact(carryLiterals(v, rest))).toBe('{"n":1.0,"q":{"value":2.50}}');
    expect(stringifyExact(carryLiterals(v, { ...v, id: 'y' }))).toBe('{"id":"y","n":1.0,"q":{"value":2.50}}');
    expect(stringifyExact(structuredClone(v))).toBe('{"id":"x","n":1,"q":{"value":2.5}}');
    const copy = cloneExact(v);
    expect(stringifyExact(copy)).toBe('{"id":"x","n":1.0,"q":{"value":2.50}}');
    setLiteral(copy, 'n', '1.00');
    expect([stringifyExact(copy), stringifyExact(v)]).toEqual(['{"id":"x","n":1.00,"q":{"value":2.50}}', '{"id":"x","n":1.0,"q":{"value":2.50}}']);
  });

  test('a number changed since it was read is written as its value, not as the old literal', () => {
    const v = parseExact('{"a":1.0,"b":[2.50]}') as { a: number; b: number[] };
    v.a = 2;
    v.b[0] = 3;
    expect(stringifyExact(v)).toBe('{"a":2,"b":[3]}');
  });

  test('a Bundle assembled from parsed resources writes their literals; pretty output too', () => {
    const resource = parseExact('{"resourceType":"Observation","valueQuantity":{"value":98.60}}');
    expect(stringifyExact({ resourceType: 'Bundle', entry: [{ response: { status: '201' }, resource }] })).toContain('"value":98.60');
    expect(stringifyExact(resource, 2)).toContain('"value": 98.60');
  });

  test('spliceExact moves literals with their items; refreshLiterals marks the holders above a literal put in', () => {
    const v = parseExact('{"xs":[1.0,2,3.50]}') as { xs: unknown[] };
    spliceExact(v.xs, 0, 1);
    expect(stringifyExact(v)).toBe('{"xs":[2,3.50]}');
    spliceExact(v.xs, 1, 0, [4], ['4.00']);
    expect(stringifyExact(v)).toBe('{"xs":[2,4.00,3.50]}');
    const plain = parseExact('{"a":{"b":[{"c":1}]}}') as { a: { b: Record<string, unknown>[] } };
    plain.a.b[0]!.c = 1;
    setLiteral(plain.a.b[0]!, 'c', '1.0');
    expect(stringifyExact(plain)).toBe('{"a":{"b":[{"c":1}]}}');
    expect(refreshLiterals(plain)).toBe(true);
    expect(stringifyExact(plain)).toBe('{"a":{"b":[{"c":1.0}]}}');
  });

  test('parseLiterally tells 1.0 from 1 and keeps equal texts equal', () => {
    expect(Bun.deepEquals(parseLiterally('{"a":[1.0]}'), parseLiterally('{"a":[1]}'))).toBe(false);
    expect(Bun.deepEquals(parseLiterally('{"a":[1.0]}'), parseLiterally('{ "a": [1.0] }'))).toBe(true);
  });
});

describe('the write paths carry literals through their copies', () => {
  test('a create drops the id by a copy, whose root-level numbers keep their literals in the stored text', () => {
    const body = parseJson('{"resourceType":"Media","id":"x","status":"completed","content":{"contentType":"video/mp4"},"duration":12.50,"extension":[{"url":"u","valueDecimal":5.50}]}');
    const tail = prepareVersion(asResource(withoutId(body)), 'new', undefined).tail;
    expect(tail).toBe('},"status":"completed","content":{"contentType":"video/mp4"},"duration":12.50,"extension":[{"url":"u","valueDecimal":5.50}]}');
  });

  test('the attempts of a conditional transaction after the first start from copies that keep the literals', async () => {
    const bundle = parseJson('{"resourceType":"Bundle","type":"transaction","entry":[{"resource":{"resourceType":"Observation","status":"final","code":{"text":"t"},"valueQuantity":{"value":98.60}},"request":{"method":"POST","url":"Observation","ifNoneExist":"identifier=a|b"}}]}');
    const { entries } = await parseBundle(bundle, 'http://h/fhir');
    const second = entriesPerAttempt(entries, true)(2)[0]!.resource!;
    expect(second).not.toBe(entries[0]!.resource);
    expect(stringifyExact(second)).toContain('"valueQuantity":{"value":98.60}');
  });
});
