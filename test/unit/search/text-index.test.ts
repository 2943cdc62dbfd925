/** The words of `_text` and `_content` (src/fhir/text-index.ts): what is text, how it is cut into words, the query syntax. */
import { describe, expect, test } from 'bun:test';
import { FhirError } from '../../../src/errors.ts';
import {
  narrativeText, TEXT_MAX_CHARS, TEXT_MAX_QUERY_WORDS, TEXT_WORD_CHARS, textIndexOf, textMatches, textWords,
} from '../../../src/fhir/text-index.ts';
import { parseTextQuery, TEXT_MAX_QUERY_CLAUSES } from '../../../src/fhir/text-query.ts';
import { textScope } from '../../../src/store/text-scope.ts';
import type { TextQuery } from '../../../src/store/types.ts';

describe('textWords', () => {
  test('letters and digits, accents removed, lower case; everything else separates', () => {
    expect(textWords('Hémoglobine A1c/Total')).toEqual(['hemoglobine', 'a1c', 'total']);
    expect(textWords("  O'Brien-Smith, Zoë_2 ")).toEqual(['o', 'brien', 'smith', 'zoe', '2']);
    expect(textWords('张伟 Ångström 😀 ΑΘΗΝΑ')).toEqual(['张伟', 'angstrom', 'αθηνα']);
    expect(textWords('...')).toEqual([]);
  });

  test('long words are cut', () => {
    expect(textWords('x'.repeat(100))).toEqual(['x'.repeat(TEXT_WORD_CHARS)]);
  });
});

describe('narrativeText', () => {
  test('tags and comments are word breaks; character references decoded', () => {
    const div = '<div xmlns="http://www.w3.org/1999/xhtml"><p>Caf&#233;<br/>and&nbsp;bar &amp; gri&#xE9;ll</p><!-- hidden --><td>a</td><td>b</td></div>';
    expect(textWords(narrativeText(div))).toEqual(['cafe', 'and', 'bar', 'griell', 'a', 'b']);
    expect(textWords(narrativeText('<p>&bogus; &#0; x</p>'))).toEqual(['x']);
  });
});

describe('textIndexOf', () => {
  test('content: the text values of the resource, its narrative and its contained resources; narrative: the narrative alone', () => {
    const entry = textIndexOf({
      resourceType: 'Observation', id: 'obs-77', meta: { versionId: '3', tag: [{ display: 'Tagged' }] },
      text: { status: 'generated', div: '<div><b>Blood</b> sugar</div>' },
      status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2339-0', display: 'Glucose' }], text: 'Glucose in blood' },
      subject: { reference: 'Patient/p-123', display: 'Peter Chalmers' },
      effectiveDateTime: '2020-03-01T10:00:00+01:00', issued: '2020-03-01T10:05:00.123Z', valueTime: '10:30:00',
      valueQuantity: { value: 5.4, unit: 'mmol/L' },
      extension: [{ url: 'http://example.org/ext', valueUri: 'urn:oid:1.2.3', valueString: 'Fasting' }],
      contained: [{ resourceType: 'Practitioner', id: 'dr', name: [{ family: 'House' }] }],
      presentedForm: [{ contentType: 'text/plain', data: 'aGVsbG8=', title: 'Report' }],
    });
    expect(entry!.narrative).toBe('blood sugar');
    expect([...new Set(entry!.content.split(' '))].sort()).toEqual(
      ['blood', 'sugar', 'final', '2339', '0', 'glucose', 'in', 'peter', 'chalmers', 'mmol', 'l', 'fasting', 'house', 'report'].sort(),
    );
  });

  test('none for a resource without text; a limit on characters, cut at a word\'s end', () => {
    expect(textIndexOf({ resourceType: 'Basic', id: 'b' })).toBeUndefined();
    expect(textIndexOf({ resourceType: 'Basic', id: 'b', code: { text: '2020-01-01' } })).toBeUndefined();
    const long = Array.from({ length: 5_000 }, (_, i) => `${'y'.repeat(TEXT_WORD_CHARS - 6)}${String(i).padStart(6, '0')}`).join(' ');
    const content = textIndexOf({ resourceType: 'Basic', id: 'b', code: { text: long } })!.content;
    expect(content.length).toBeLessThanOrEqual(TEXT_MAX_CHARS);
    expect(content.length).toBeGreaterThan(TEXT_MAX_CHARS - TEXT_WORD_CHARS - 1);
    expect(content.split(' ').every((w) => w.length === TEXT_WORD_CHARS)).toBe(true);
    // An ASCII word longer than the cut is cut as on the Unicode path.
    expect(textIndexOf({ resourceType: 'Basic', id: 'b', code: { text: `A${'b'.repeat(80)} c` } })!.content).toBe(`a${'b'.repeat(TEXT_WORD_CHARS - 1)} c`);
  });

  test('the words of many text values, read a batch at a time up to the limit: those of all the values joined, cut as one', () => {
    let seed = 50;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const pieces = ['Concept', 'número', ' ', '', '...', 'x'.repeat(70), 'Ångström', '\u0301accent', 'A1c/Total', '张伟', '--', 'İstanbul', 'word'];
    const value = () => Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => pieces[Math.floor(rnd() * pieces.length)]).join(rnd() < 0.5 ? ' ' : '');
    // From a few values to far more text than the limit (the last cases: about 2 and 7 times it).
    for (const n of [1, 3, 40, 2_000, 30_000, 100_000]) {
      const concept = Array.from({ length: n }, (_, i) => ({ code: `c${i}`, display: value(), definition: rnd() < 0.3 ? value() : undefined }));
      const r = { resourceType: 'CodeSystem', status: 'draft', content: 'complete', title: value(), concept };
      // All the text joined, its words cut once (what textIndexOf made before it read a batch at a time).
      const all = [r.status, r.content, r.title, ...concept.flatMap((c) => [c.code, c.display, c.definition])].filter((v): v is string => v !== undefined);
      const words = textWords(all.join(' ')).join(' ');
      const cut = words.length <= TEXT_MAX_CHARS ? words : words.slice(0, words.lastIndexOf(' ', TEXT_MAX_CHARS));
      expect(textIndexOf(r)?.content ?? '').toBe(cut);
    }
    // Three values of more than a batch each whose words end 51 characters short of the limit: the fourth is read,
    // and the words cut within it.
    const words = (n: number) => 'ab '.repeat(n).slice(0, n);
    const given = [words(66_650), words(66_650), words(66_647), 'cd '.repeat(100)];
    expect(given.slice(0, 3).join(' ').length).toBe(TEXT_MAX_CHARS - 51);
    const content = textIndexOf({ resourceType: 'Patient', name: [{ given }] })!.content;
    expect([content.length, content.endsWith(' cd cd')]).toEqual([TEXT_MAX_CHARS, true]);
  });
});

describe('parseTextQuery and textMatches', () => {
  test('words ANDed; a trailing * makes a prefix of the last word of its part; punctuation and quotes separate', () => {
    expect(parseTextQuery('_content', 'Blood  glucose').alternatives).toEqual([[{ word: 'blood', prefix: false }, { word: 'glucose', prefix: false }]]);
    expect(parseTextQuery('_content', 'diab* "heart-att*"').alternatives).toEqual([[
      { word: 'diab', prefix: true }, { word: 'heart', prefix: false }, { word: 'att', prefix: true },
    ]]);
    expect(parseTextQuery('_text', 'Zoë').alternatives).toEqual([[{ word: 'zoe', prefix: false }]]);
  });

  test('a value without words, or with too many, is a 400 naming the parameter', () => {
    for (const raw of ['', '***', ' - ']) {
      let err: unknown;
      try {
        parseTextQuery('_content', raw);
      } catch (e) {
        err = e;
      }
      if (!(err instanceof FhirError)) throw new Error(`'${raw}' was accepted`);
      expect(err.status).toBe(400);
      expect(err.issues[0]!.expression).toEqual(['_content']);
    }
    expect(() => parseTextQuery('_content', Array.from({ length: TEXT_MAX_QUERY_WORDS + 1 }, (_, i) => `w${i}`).join(' '))).toThrow(/at most/);
  });

  test('AND (also implied) binds tighter than OR, operators in any case, parentheses, quoted groups', () => {
    const words = (raw: string) => parseTextQuery('_text', raw).alternatives.map((c) => c.map((t) => t.word + (t.prefix ? '*' : '')));
    expect(words('(bone OR liver) and metastases')).toEqual([['bone', 'metastases'], ['liver', 'metastases']]);
    expect(words('a OR b c')).toEqual([['a'], ['b', 'c']]);
    expect(words('a or b AND c')).toEqual([['a'], ['b', 'c']]);
    expect(words('(a OR b) (c OR d*)')).toEqual([['a', 'c'], ['a', 'd*'], ['b', 'c'], ['b', 'd*']]);
    expect(words('"bone or not liver"')).toEqual([['bone', 'or', 'not', 'liver']]);
    expect(words('x-ray ((y))')).toEqual([['x', 'ray', 'y']]);
  });

  test('the expression as written is kept beside its alternatives: each word once', () => {
    const written = (raw: string) => {
      const show = (q: TextQuery): string => ('word' in q ? q.word + (q.prefix ? '*' : '') : `(${('all' in q ? q.all : q.any).map(show).join('all' in q ? ' & ' : ' | ')})`);
      return show(parseTextQuery('_text', raw).query);
    };
    expect(written('(bone OR liver) and metastases')).toBe('((bone | liver) & metastases)');
    expect(written('a OR b c')).toBe('(a | (b & c))');
    expect(written('(a OR b) (c OR d*) (e OR f) (g OR h) (i OR j)')).toBe('((a | b) & (c | d*) & (e | f) & (g | h) & (i | j))');
    expect(written('x-ray ((y))')).toBe('((x & ray) & y)');
    expect(written('gluc*')).toBe('gluc*');
  });

  test('malformed expressions, NOT and too many alternatives are 400s naming the parameter', () => {
    const refused = (raw: string, pattern: RegExp) => {
      let err: unknown;
      try {
        parseTextQuery('_text', raw);
      } catch (e) {
        err = e;
      }
      if (!(err instanceof FhirError)) throw new Error(`'${raw}' was accepted`);
      expect(err.status).toBe(400);
      expect(err.issues[0]!.expression).toEqual(['_text']);
      expect(err.message).toMatch(pattern);
    };
    for (const raw of ['(a', 'a)', '(a OR b))', 'a (', '(a OR) b']) refused(raw, /parenthes|needs a term/);
    for (const raw of ['a OR', 'OR a', 'a OR OR b', 'a AND', 'and a', 'a AND OR b']) refused(raw, /needs a term on each side/);
    refused('"a b', /quotes/);
    for (const raw of ['NOT a', 'a not b', 'a -b']) refused(raw, /not supported/);
    refused(Array.from({ length: 6 }, (_, i) => `(a${i} OR b${i})`).join(' '), new RegExp(`more than ${TEXT_MAX_QUERY_CLAUSES}`));
  });

  test('textMatches: whole words, prefixes, every term', () => {
    const one = (key: string, raw: string) => parseTextQuery(key, raw).alternatives[0]!;
    const words = 'blood glucose fasting';
    expect(textMatches(words, one('q', 'glucose blood'))).toBe(true);
    expect(textMatches(words, one('q', 'gluc'))).toBe(false);
    expect(textMatches(words, one('q', 'gluc*'))).toBe(true);
    expect(textMatches(words, one('q', 'glucose insulin'))).toBe(false);
    expect(textMatches('', one('q', 'x*'))).toBe(false);
  });
});

describe('textScope', () => {
  test('one token of letters and digits per tenant and type, the same every time', () => {
    const scopes = new Set<string>();
    for (const tenant of ['t1', 't2', 'default', 'a\u0000b', 'Zoë']) for (const type of ['Patient', 'Observation', 'Condition']) scopes.add(textScope(tenant, type));
    expect(scopes.size).toBe(15);
    for (const s of scopes) expect(s).toMatch(/^s[0-9a-z]{14}$/);
    expect(textScope('t1', 'Patient')).toBe(textScope('t1', 'Patient'));
    // The separator keeps the parts apart: ("t1P", "atient") is another scope than ("t1", "Patient").
    expect(textScope('t1P', 'atient')).not.toBe(textScope('t1', 'Patient'));
  });
});
