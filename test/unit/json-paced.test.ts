/**
 * A request body's JSON read in slices with turns of the event loop (src/fhir/json-paced.ts): the same value,
 * the same literals of numbers (and marks of the holders above them), and the same 400s as parseJson reads at
 * once, on texts split at every few characters; a scan read in slices answers as scanJson does.
 */
import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { holdsLiterals, literalOf, scanJson, scanResult, scanTo, startScan, stringifyExact } from '../../src/fhir/exact-json.ts';
import { parseJsonPaced } from '../../src/fhir/json-paced.ts';
import { parseJson } from '../../src/fhir/resource.ts';

/** A turn that costs nothing and a budget that is always spent: every slice and piece is followed by a turn. */
const pacing = (slice: number) => ({ slice, budgetMs: -1, turn: async () => {} });

/** What a read gives: its value's text with literals, where literals and marks are, or its error's status and message. */
async function outcome(read: () => unknown): Promise<unknown> {
  try {
    const value = await read();
    return { text: stringifyExact(value), marks: marks(value, '') };
  } catch (err) {
    const e = err as { status?: number; message: string; issues?: unknown };
    return { status: e.status, message: e.message, issues: e.issues };
  }
}

/** Every holder of literals (or of holders of them) and every recorded literal, by path. */
function marks(value: unknown, path: string): string[] {
  if (value === null || typeof value !== 'object') return [];
  const out = holdsLiterals(value) ? [path || '/'] : [];
  for (const key of Object.keys(value)) {
    const literal = literalOf(value, key);
    if (literal !== undefined) out.push(`${path}/${key}=${literal}`);
    out.push(...marks((value as Record<string, unknown>)[key], `${path}/${key}`));
  }
  return out;
}

const bundle = (entries: string) => `{"resourceType":"Bundle","type":"transaction","total":1.0,"entry":${entries},"meta":{"lastUpdated":"2020-01-01T00:00:00Z"}}`;
const patient = (i: number, extra = '') => `{"fullUrl":"urn:uuid:${i}","resource":{"resourceType":"Patient","name":[{"family":"a\\"b,]}"}]${extra}},"request":{"method":"POST","url":"Patient"}}`;

const concepts = (n: number) => Array.from({ length: n }, (_, i) => `{"code":"c${i}","display":"Concept ${i}","property":[{"code":"w","valueDecimal":${i}.50}]}`).join(',');
const codeSystem = (concept: string) => `{"resourceType":"CodeSystem","url":"http://example.org/cs","status":"draft","content":"complete","concept":${concept},"count":3}`;

const TEXTS: Record<string, string> = {
  'entries without literals': bundle(`[${[1, 2, 3].map((i) => patient(i)).join(',')}]`),
  'literals in entries and around them': bundle(`[ ${patient(1, ',"x":98.60')} , ${patient(2)},${patient(3, ',"y":[1e2,2,-0]')} ]`),
  'numbers and other values as items': bundle('[1.50, 2, null, "s", [3.0], {"a":-0}]'),
  'an empty entry array': bundle('[ ]'),
  'an entry that is not an array': '{"resourceType":"Bundle","entry":{"a":1.0},"x":"' + 'y'.repeat(200) + '"}',
  'a member named entry deeper only': '{"resourceType":"Bundle","meta":{"entry":[1,2]},"x":"' + 'y'.repeat(200) + '"}',
  'malformed in an entry': bundle(`[${patient(1)},{"a":1,},${patient(2)}]`),
  'malformed around the entries': bundle(`[${patient(1)},${patient(2)}]`).replace('"type"', '"type" "x"'),
  'a trailing comma in the entries': bundle(`[${patient(1)},${patient(2)},]`),
  'mismatched brackets': bundle(`[${patient(1)},{"a":[1}]]`),
  'a name given twice in an entry': bundle(`[${patient(1)},{"a":1,"a":2},${patient(2)}]`),
  'a name given twice, escaped': bundle(`[${patient(1)},{"id":1,"\\u0069d":2}]`),
  'an unterminated string': bundle(`[${patient(1)},{"a":"b}]}`),
  'nested too deep': bundle(`[${'['.repeat(1200)}${']'.repeat(1200)}]`),
  'entry given twice': `{"resourceType":"Bundle","entry":[${patient(1)}],"entry":[${patient(2)}]}`,
  'malformed after the entries': bundle(`[${patient(1)},${patient(2)}]`).replace('"meta":{', '"meta":{,'),
  'malformed before the entries and in one': bundle(`[${patient(1)},{"a":1,},${patient(2)}]`).replace('"total":1.0', '"total":1.'),
  'malformed in an entry and after the entries': bundle(`[${patient(1)},{"a":1,},${patient(2)}]`).replace('"meta":{', '"meta":{,'),
  'an item left out between commas': bundle(`[${patient(1)},,${patient(2)}]`),
  'a blank item between commas': bundle(`[${patient(1)}, ,${patient(2)}]`),
  'a leading comma in the entries': bundle(`[,${patient(1)}]`),
  'two entries without a comma': bundle(`[${patient(1)} ${patient(2)},${patient(3)}]`),
  'an entry closed early': bundle(`[${patient(1)},${patient(2).slice(0, -1)}],${patient(3)}]`),
  'a name given twice before the entries': bundle(`[${patient(1)},${patient(2)}]`).replace('"total":1.0', '"total":1.0,"total":2'),
  'a name given twice after the entries': bundle(`[${patient(1)},${patient(2)}]`).replace('"meta":{', '"meta":{"id":"a","id":"b",'),
  'a name given twice in an entry object': bundle(`[${patient(1)},${patient(2).replace('"fullUrl"', '"request":{},"fullUrl"')}]`),
  'a name given twice in an item that is an array': bundle(`[${patient(1)},[{"a":1},{"b":1,"b":2}]]`),
  'a name given twice in malformed text': bundle(`[${patient(1)},{"a":1,"a":2},{"b":1,}]`),
  'nested too deep, and malformed after': bundle(`[${'['.repeat(1200)}${']'.repeat(1200)},{"a":}]`),
  'nested too deep, a name given twice': bundle(`[${'['.repeat(1200)}${']'.repeat(1200)},{"a":1,"a":1}]`),
  'a resource whose longest array is read in pieces': codeSystem(`[${concepts(40)}]`),
  'a resource with two arrays, the shorter first': `{"resourceType":"Questionnaire","status":"draft","code":[{"code":"a"}],"item":[${concepts(30)}],"x":1.50}`,
  'a resource whose array is written with escapes in its name': `{"resourceType":"CodeSystem","con\\u0063ept":[${concepts(30)}]}`,
  'malformed in an item of a resource': codeSystem(`[${concepts(20)},{"code":"x",},${concepts(5)}]`),
  'a name given twice in an item of a resource': codeSystem(`[${concepts(20)},{"code":"x","code":"y"},${concepts(5)}]`),
  'a name given twice deeper, after the array of a resource': `${codeSystem(`[${concepts(30)}]`).slice(0, -1)},"meta":{"tag":[{"code":"a","code":"b"}]}}`,
  'a name given twice after the array of a resource': `${codeSystem(`[${concepts(30)}]`).slice(0, -1)},"status":"active"}`,
};

describe('parseJsonPaced', () => {
  for (const [name, text] of Object.entries(TEXTS)) {
    test(`${name}: as parseJson reads it, however the text is sliced`, async () => {
      const want = await outcome(() => parseJson(text));
      for (const slice of [1, 7, 64, text.length - 1]) expect(await outcome(() => parseJsonPaced(text, pacing(slice)))).toEqual(want);
    });
  }

  test('a Bundle, or another resource, changed at any one place (a character left out, a comma, bracket, quote or colon put in) reads as parseJson reads it', async () => {
    for (const text of [bundle(`[${patient(1, ',"x":98.60')},${patient(2)},${patient(3)}]`), codeSystem(`[${concepts(4)}]`).replace('"count":3', '"count":3,"identifier":[{"value":"a"}]')]) await changedAnywhere(text);
  });

  async function changedAnywhere(text: string): Promise<void> {
    const changes = (i: number) => [text.slice(0, i) + text.slice(i + 1), ...[',', '}', ']', '{', '[', '"', ':'].map((c) => text.slice(0, i) + c + text.slice(i))];
    for (let i = 0; i < text.length; i++) {
      for (const changed of changes(i)) {
        const want = await outcome(() => parseJson(changed));
        for (const slice of [1, 40, 200]) expect({ changed, got: await outcome(() => parseJsonPaced(changed, pacing(slice))) }).toEqual({ changed, got: want });
      }
    }
  }

  test('plain: read as JSON.parse reads it, nested deeper than a request body may or giving a name twice, whole or in slices', async () => {
    const deep = bundle(`[${patient(1)},${'['.repeat(1200)}${']'.repeat(1200)},${patient(2)}]`);
    const twice = `{"resourceType":"Bundle","entry":[${patient(1)}],"entry":[${patient(2)},${patient(3)}]}`;
    const texts = [deep, twice, TEXTS['literals in entries and around them']!, TEXTS['a name given twice in an entry']!];
    for (const text of texts) {
      for (const slice of [1, 64, text.length]) expect(JSON.stringify(await parseJsonPaced(text, { ...pacing(slice), plain: true }))).toBe(JSON.stringify(JSON.parse(text)));
    }
    for (const text of [TEXTS['malformed in an entry']!, TEXTS['malformed after the entries']!]) {
      const want = (() => { try { JSON.parse(text); } catch (err) { return (err as Error).message; } return 'parsed'; })();
      for (const slice of [1, 64, text.length]) {
        const got = await (async () => { try { await parseJsonPaced(text, { ...pacing(slice), plain: true }); } catch (err) { return [(err as Error).name, (err as Error).message]; } return ['parsed']; })();
        expect(got).toEqual(['SyntaxError', want]);
      }
    }
  });

  test('a text whose names hold escapes is checked for a name given twice in slices too, with turns between them', async () => {
    const text = TEXTS['literals in entries and around them']!;
    // The same length, a name written with an escape (`\u0061` is `a`) or as a name no other one repeats.
    const escaped = text.replace('"family"', '"f\\u0061mily"');
    const unescaped = text.replace('"family"', '"familyzzzzz"');
    expect(escaped.length).toBe(unescaped.length);
    const turns = async (t: string) => {
      let n = 0;
      await parseJsonPaced(t, { slice: 64, budgetMs: -1, turn: async () => void n++ });
      return n;
    };
    expect(await turns(escaped)).toBeGreaterThanOrEqual((await turns(unescaped)) + Math.floor(text.length / 64) - 1);
  });

  test('a text of one slice or less is read without a promise', () => {
    expect(parseJsonPaced('{"resourceType":"Patient"}') instanceof Promise).toBe(false);
    expect(parseJsonPaced(TEXTS['entries without literals']!, pacing(16)) instanceof Promise).toBe(true);
  });

  test('every R4 example Bundle reads the same in slices (value, literals and marks)', async () => {
    const dir = new URL('../../node_modules/hl7.fhir.r4.examples/', import.meta.url);
    const files = readdirSync(dir).filter((f) => f.startsWith('Bundle-') && f.endsWith('.json'));
    expect(files.length).toBeGreaterThan(10);
    for (const f of files) {
      const text = readFileSync(new URL(f, dir), 'utf8');
      expect({ f, got: await outcome(() => parseJsonPaced(text, pacing(4099))) }).toEqual({ f, got: await outcome(() => parseJson(text)) });
    }
  });
});

/** A seeded generator (the same texts on every run). */
function random(seed: number): () => number {
  return () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
}

describe('parseJsonPaced over generated texts', () => {
  test('objects of arrays (of objects, arrays, numbers written otherwise, escaped strings and names, names given twice), changed at up to three places, read as parseJson reads them', async () => {
    const rnd = random(20261130);
    const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;
    const names = ['a', 'b', 'entry', 'id', '\\u0069d', 'resource', 'concept', 'e\\u006etry', '__proto__'];
    const scalars = ['"s"', '"a\\"b,]}"', '"\\\\"', '"\\u0041"', '"\\ud83d\\ude00"', '"[{"', '""', '1', '1.50', '1e2', '-0', '2.0', '12345678901234567890', 'true', 'null'];
    const value = (d: number): string => {
      const r = rnd();
      if (d > 4 || r < 0.35) return pick(scalars);
      const n = Math.floor(rnd() * 5);
      if (r < 0.65) return `{${Array.from({ length: n }, () => `"${pick(names)}"${pick([':', ' : '])}${value(d + 1)}`).join(pick([',', ' , ', ',\n']))}}`;
      return `[${Array.from({ length: n }, () => value(d + 1)).join(pick([',', ', ']))}]`;
    };
    const members = () => Array.from({ length: 1 + Math.floor(rnd() * 5) }, () => `"${pick(names)}":${rnd() < 0.5 ? `[${Array.from({ length: Math.floor(rnd() * 12) }, () => value(2)).join(',')}]` : value(1)}`);
    const text = () => {
      const r = rnd();
      if (r < 0.15) return `[${members().map((m) => `{${m}}`).join(',')}]`;
      if (r < 0.25) return `{"a":[[${members().map((m) => `{${m}}`).join(',')}]]}`;
      return `${pick(['', ' ', '\n'])}{${members().join(',')}}${rnd() < 0.1 ? pick([' x', '{}']) : pick(['', ' ', '\n'])}`;
    };
    const change = (t: string) => {
      for (let j = Math.floor(rnd() * 3); j >= 0; j--) {
        const i = Math.floor(rnd() * (t.length + 1));
        const r = rnd();
        if (r < 0.3) t = t.slice(0, i) + t.slice(i + 1);
        else if (r < 0.8) t = t.slice(0, i) + pick([',', '}', ']', '{', '[', '"', ':', '1', ' ', '\\', 'x', '-', '.']) + t.slice(i);
        else t = t.slice(0, i) + t.slice(i, i + Math.floor(rnd() * 10)) + t.slice(i);
      }
      return t;
    };
    for (let c = 0; c < 2000; c++) {
      const t = rnd() < 0.6 ? text() : change(text());
      const want = await outcome(() => parseJson(t));
      for (const slice of [1, 7, 40, Math.max(1, t.length - 1)]) expect({ t, slice, got: await outcome(() => parseJsonPaced(t, pacing(slice))) }).toEqual({ t, slice, got: want });
    }
  });
});

describe('a scan read in slices', () => {
  test('answers as scanJson does', () => {
    for (const text of Object.values(TEXTS)) {
      for (const slice of [1, 5, 33]) {
        const state = startScan(true, true);
        while (!scanTo(text, state, state.at + slice));
        expect(scanResult(text, state)).toEqual(scanJson(text, true));
      }
    }
  });
});
