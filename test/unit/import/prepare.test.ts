/** Version preparation for bulk import: stamp split, packing across threads, NDJSON chunks. */
import { describe, expect, test } from 'bun:test';
import type { ValidationLevel } from '../../../src/fhir/validation/validate.ts';
import { prepareNdjson, CHUNK_RESOURCES } from '../../../src/fhir/import/ndjson.ts';
import { packVersions, unpackVersions } from '../../../src/fhir/import/packing.ts';
import { prepareVersion, versionToWrite, type PreparedVersion } from '../../../src/fhir/prepared.ts';
import { parseReference } from '../../../src/fhir/references.ts';
import type { SharedKey } from '../../../src/store/types.ts';
import { carryLiterals, parseExact, stringifyExact } from '../../../src/fhir/exact-json.ts';
import { newId, SPLICED_CHARS, stamp, stampHead, stampTail, type Resource } from '../../../src/fhir/resource.ts';

/** The stored text as composed before the split: resourceType, id, meta (versionId, lastUpdated, rest), rest. */
function reference(resource: Resource, id: string, versionId: number, lastUpdated: number): string {
  const { resourceType, id: _id, meta, ...rest } = resource;
  const { versionId: _v, lastUpdated: _l, ...metaRest } = meta ?? {};
  return JSON.stringify({ resourceType, id, meta: { versionId: String(versionId), lastUpdated: new Date(lastUpdated).toISOString(), ...metaRest }, ...rest });
}

const samples: Resource[] = [
  { resourceType: 'Patient' },
  { resourceType: 'Patient', meta: {} },
  { resourceType: 'Patient', meta: { versionId: '7', lastUpdated: '2001-01-01T00:00:00Z' } },
  { gender: 'male', resourceType: 'Patient', meta: { source: 'x', versionId: '7' }, id: 'old', name: [{ family: 'Ng' }] },
  { resourceType: 'Observation', status: 'final', note: [{ text: 'tab\there "q" \\ é \u2028 \u0000' }], meta: { tag: [{ code: 'a' }] } },
];

describe('stampHead + stampTail', () => {
  test('compose exactly the stored text: meta first with version and time, other elements in their order', () => {
    for (const r of samples) {
      for (const [v, t] of [[1, 0], [42, 1_700_000_000_123]] as const) {
        expect(stampHead(r.resourceType, 'id-1', v, t) + stampTail(r)).toBe(reference(r, 'id-1', v, t));
        expect(stamp(r, 'id-1', v, t)).toBe(reference(r, 'id-1', v, t));
      }
    }
    expect(JSON.parse(stamp(samples[3]!, 'new', 3, 0))).toEqual({
      resourceType: 'Patient', id: 'new', meta: { versionId: '3', lastUpdated: '1970-01-01T00:00:00.000Z', source: 'x' }, gender: 'male', name: [{ family: 'Ng' }],
    });
  });

  test('large top-level strings are put into the text as they are, which is the text the serialiser writes', () => {
    const big = (c: string) => c.repeat(SPLICED_CHARS);
    const cases: Resource[] = [
      // Base64 last (a native Binary), first among the rest, and two of them around small elements with a number.
      { resourceType: 'Binary', contentType: 'application/octet-stream', data: big('QUJD') },
      { resourceType: 'Binary', data: big('QUJD'), contentType: 'text/plain', meta: { source: 'x' } },
      { resourceType: 'CodeSystem', url: big('a'), status: 'draft', count: 2, description: big('é'), content: 'not-present' },
      // Strings JSON escapes (a quote, a line break, a surrogate pair), and one holding what the marker's JSON looks like.
      { resourceType: 'CodeSystem', status: 'draft', description: big('"\n') + '😀', content: 'not-present' },
      { resourceType: 'CodeSystem', status: 'draft', description: big('x') + '\\u0000spliced-', content: 'not-present' },
      { resourceType: 'Basic', code: { text: big('nested') }, id: 'b' },
    ];
    for (const r of cases) expect(stamp(r, 'id-1', 2, 5) === reference(r, 'id-1', 2, 5)).toBe(true);
    // The resource is left as it was given.
    expect(cases[0]!.data === big('QUJD')).toBe(true);
  });

  test('large nested strings (an attachment\'s data) are put into the text as they are: the serialiser never writes them', () => {
    const big = (c: string) => c.repeat(SPLICED_CHARS);
    const decimal = parseExact(`{"resourceType":"Basic","code":{"text":"c"},"extension":[{"url":"urn:a","valueDecimal":1.50},{"url":"urn:b","valueBase64Binary":"${big('QUJD')}"}]}`) as Resource;
    const spliced: Resource[] = [
      // Two attachments, the data first in one and last in the other; a string of an array; a number written as sent.
      {
        resourceType: 'DocumentReference', status: 'current',
        content: [{ attachment: { data: big('QUJD'), contentType: 'application/pdf' } }, { attachment: { contentType: 'text/plain', title: 'two', data: big('QkNE') } }],
      },
      { resourceType: 'Patient', name: [{ given: ['Peter', big('J')], family: 'Chalmers' }] },
      decimal,
    ];
    const escaped: Resource[] = [
      // A nested string JSON escapes beside one it does not, and one holding what a marker's JSON looks like.
      { resourceType: 'Media', status: 'completed', content: { data: big('QUJD'), title: big('"\n') + '😀' }, note: [{ text: big('x') + '\\u0000spliced-' }] },
      // Beyond the objects the walk reads: serialised as any other string.
      { resourceType: 'List', status: 'current', mode: 'working', entry: [...Array.from({ length: 1100 }, (_, i) => ({ item: { display: `item ${i}` } })), { item: { display: big('z') } }] },
    ];
    const expected = [...spliced, ...escaped].map((r) => {
      const { resourceType, ...rest } = r;
      return stringifyExact(carryLiterals(r, { resourceType, id: 'id-1', meta: { versionId: '2', lastUpdated: new Date(5).toISOString() }, ...rest }));
    });
    const stringify = JSON.stringify;
    let longest = 0;
    JSON.stringify = ((...a: Parameters<typeof stringify>) => {
      const out = stringify.apply(JSON, a);
      longest = Math.max(longest, out?.length ?? 0);
      return out;
    }) as typeof stringify;
    const texts: string[] = [];
    const written: number[] = [];
    try {
      for (const r of [...spliced, ...escaped]) {
        longest = 0;
        texts.push(stamp(r, 'id-1', 2, 5));
        written.push(longest);
      }
    } finally {
      JSON.stringify = stringify;
    }
    texts.forEach((text, i) => expect(text === expected[i]).toBe(true));
    expect(texts[2]).toContain('"valueDecimal":1.50');
    // The serialiser wrote the small rest of the spliced ones; the escaped string and the one past the walk, whole.
    expect(written.slice(0, spliced.length).every((n) => n < 1000)).toBe(true);
    expect(written.slice(spliced.length).every((n) => n > SPLICED_CHARS)).toBe(true);
    // The resources are left as they were given.
    expect((spliced[0]!.content as { attachment: { data: string } }[])[1]!.attachment.data === big('QkNE')).toBe(true);
  });

  test('versionToWrite completes a prepared version with its number and time', () => {
    const r: Resource = { resourceType: 'Observation', id: 'o', subject: { reference: 'Patient/p' }, code: { coding: [{ system: 's', code: 'c' }] } };
    const p = prepareVersion(r, 'o', undefined);
    expect(p.compartments).toEqual(['p']);
    expect(p.index.tokens).toContainEqual({ param: 'code', system: 's', value: 'c' });
    expect(versionToWrite(p, 5, 1_000, 'PATCH')).toEqual({
      type: 'Observation', id: 'o', versionId: 5, lastUpdated: 1_000, deleted: false, content: stamp(r, 'o', 5, 1_000), index: p.index, compartments: ['p'], method: 'PATCH',
    });
    // A Patient is in its own compartment under the id it is written with, not the one in its body.
    expect(prepareVersion({ resourceType: 'Patient', id: 'body' }, 'url', undefined).compartments).toEqual(['url']);
  });
});

test('newId: time-ordered UUID v7, a valid FHIR id', () => {
  const before = Date.now();
  const ids = Array.from({ length: 3 }, () => newId());
  const after = Date.now();
  for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  // Its leading 48 bits are the milliseconds it was made at: between the clock read before and after.
  const ms = (id: string) => parseInt(id.replaceAll('-', '').slice(0, 12), 16);
  for (const id of ids) {
    expect(ms(id)).toBeGreaterThanOrEqual(before);
    expect(ms(id)).toBeLessThanOrEqual(after);
  }
  expect(ms(ids[2]!)).toBeGreaterThanOrEqual(ms(ids[0]!));
});

test('parseReference: Type/id and the other forms', () => {
  expect(parseReference('Patient/p-1.2')).toEqual({ type: 'Patient', id: 'p-1.2' });
  expect(parseReference('Patient/p1/_history/3')).toEqual({ type: 'Patient', id: 'p1', version: '3' });
  // An absolute URL is this tenant's resource under its FHIR base alone (another server's otherwise).
  const base = 'http://x.org/tenants/t1/fhir/R4';
  expect(parseReference(`${base}/Patient/p1/_history/3`, base)).toEqual({ type: 'Patient', id: 'p1', version: '3' });
  for (const other of ['http://x.org/fhir/Patient/p1', 'http://x.org/tenants/t2/fhir/R4/Patient/p1', `${base}Patient/p1`, `${base}/http://y.org/Patient/p1`]) {
    expect(parseReference(other, base)).toBeNull();
  }
  expect(parseReference(`${base}/Patient/p1`)).toBeNull();
  for (const bad of ['Spaceship/p1', 'Patient/bad id', 'Patient/', '/p1', '#Patient/p1', 'urn:uuid/x', 'Patient/p?x', 'patient/p1', `Patient/${'x'.repeat(65)}`]) {
    expect(parseReference(bad)).toBeNull();
  }
});

describe('packVersions / unpackVersions', () => {
  test('round-trip, empty fields, entries and non-Latin-1 text included', () => {
    const versions = [
      prepareVersion({ resourceType: 'Patient', id: 'a', name: [{ text: 'Zoë 张伟 😀' }], identifier: [{ system: '', value: 'ü' }] }, 'a', undefined),
      prepareVersion({ resourceType: 'Basic' }, 'b', undefined),
      {
        type: 'Observation', id: 'c', tail: '}', compartments: ['', 'p'],
        index: {
          tokens: [{ param: 'code', system: '', value: '' }, { param: 'code', system: 'http://x', value: 'v', display: 'shown' }],
          strings: [{ param: 'code:text', value: '', exact: '' }],
          ranges: [{ param: 'date', system: '', code: '', low: -Infinity, high: Infinity }],
          composites: [{ param: 'code-value-quantity', system1: 's', value1: 'c', system2: '', value2: 'mg', low: 1.5, high: 2.5 }],
        },
      },
    ];
    const packed = packVersions(versions);
    const counts = (v: PreparedVersion) => [v.index.tokens.length, v.index.strings.length, v.index.ranges.length, v.index.composites.length, v.compartments.length];
    expect(packed.shape).toEqual(new Int32Array(versions.flatMap(counts)));
    expect([...packed.shape.slice(10)]).toEqual([2, 1, 1, 1, 2]);
    const unpacked = unpackVersions(structuredClone(packed));
    expect(unpacked.map(withoutKeys)).toEqual(versions);
    // The words for full-text search travel too (and a version without any stays without).
    expect(versions[0]!.index.text).toEqual({ narrative: '', content: 'zoe 张伟 u' });
    expect(unpackVersions(structuredClone(packed)).map((v) => v.index.text)).toEqual([versions[0]!.index.text, undefined, undefined]);
    expect(unpackVersions(packVersions([]))).toEqual([]);
  });

  test('each distinct key is packed once; the entries of a key share one object, equal to their own fields', () => {
    const versions = ['a', 'b', 'c'].map((id) =>
      prepareVersion({
        resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
        category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
        valueQuantity: { value: 70, system: 'http://unitsofmeasure.org', code: '/min' }, effectiveDateTime: '2020-01-01',
      }, id, undefined));
    const packed = packVersions(versions);
    const rows = versions[0]!.index.tokens.length + versions[0]!.index.strings.length + versions[0]!.index.ranges.length + versions[0]!.index.composites.length;
    expect(packed.rowKeys.length).toBe(3 * rows);
    expect(packed.keyTables.length).toBe(rows);
    expect(packed.keyParts.length).toBe(4 * rows);
    const unpacked = unpackVersions(structuredClone(packed));
    expect(unpacked.map(withoutKeys)).toEqual(versions);
    const tables = ['tokens', 'strings', 'ranges', 'composites'] as const;
    for (const table of tables) {
      unpacked[0]!.index[table].forEach((e, i) => {
        const entry = e as unknown as Record<string, unknown> & { key: SharedKey };
        expect(unpacked[1]!.index[table][i]!.key).toBe(entry.key);
        expect(unpacked[2]!.index[table][i]!.key).toBe(entry.key);
        expect(entry.key.param).toBe(entry.param as string);
        expect(entry.key.type).toBe('Observation');
        expect(entry.key.system).toBe(table === 'tokens' || table === 'ranges' ? (entry.system as string) : '');
        expect(entry.key.code).toBe(table === 'ranges' ? (entry.code as string) : '');
      });
    }
    const quantity = unpacked[0]!.index.ranges.find((e) => e.param === 'value-quantity')!;
    expect(quantity.key).toEqual({ table: 'search_range', type: 'Observation', param: 'value-quantity', system: 'http://unitsofmeasure.org', code: '/min' });
  });
});

/** A version as it was packed: its entries without their shared keys. */
function withoutKeys(v: PreparedVersion): PreparedVersion {
  const strip = <T extends { key?: SharedKey }>(rows: T[]) => rows.map(({ key: _, ...e }) => e);
  const { tokens, strings, ranges, composites, text } = v.index;
  return { ...v, index: { tokens: strip(tokens), strings: strip(strings), ranges: strip(ranges), composites: strip(composites), ...(text ? { text } : {}) } };
}

describe('prepareNdjson', () => {
  const blob = (lines: string[]) => new Blob([lines.join('\n')]);
  async function all(b: Blob, validation: ValidationLevel = 'strict') {
    const chunks = [];
    for await (const c of prepareNdjson(b, validation, undefined)) chunks.push(c);
    return chunks;
  }

  test('prepares each line in order; bad lines become issues with their line numbers; every byte is counted', async () => {
    const lines = ['{"resourceType":"Patient","id":"a"}', '', '  ', 'nope', '{"resourceType":"Patient"}\r', '{"resourceType":"Spaceship"}', '{"resourceType":"Patient","id":"b"}'];
    const b = blob(lines);
    const chunks = await all(b);
    expect(chunks.reduce((n, c) => n + c.bytes, 0)).toBe(b.size);
    const versions = chunks.flatMap((c) => c.versions);
    expect(versions.map((v) => v.id).filter((id) => id !== 'a' && id !== 'b')).toHaveLength(1);
    expect([versions[0]!.id, versions[2]!.id]).toEqual(['a', 'b']);
    expect(chunks.flatMap((c) => c.issues)).toEqual([
      { line: 4, message: expect.stringContaining('malformed JSON'), issues: [expect.objectContaining({ severity: 'error', code: 'structure' })] },
      // Every error's issues, the element they name included.
      { line: 6, message: "Unknown resource type 'Spaceship'", issues: [expect.objectContaining({ code: 'not-supported', expression: ['resourceType'] })] },
    ]);
  });

  test('lines with a urn: reference are handed back unprepared, with their place among the versions', async () => {
    // The lines are not valid R4 (validation has tests of its own): this is about finding urn: references.
    const lines = [
      '{"resourceType":"Patient","id":"a","identifier":[{"system":"urn:oid:1.2","value":"1"}]}',
      '{"resourceType":"Observation","id":"o","subject":{"reference":"urn:uuid:6a3e0000-0000-4000-8000-000000000001"}}',
      '{"resourceType":"Patient","id":"b"}',
      '{"resourceType":"Bundle","id":"doc","type":"document","entry":[{"resource":{"resourceType":"Composition","subject":{"reference":"urn:uuid:x"}}}]}',
      '{"resourceType":"Observation","id":"p","performer":[{"reference":"urn:oid:1.2.3"}]}',
    ];
    const [chunk, ...more] = await all(blob(lines), 'off');
    expect(more).toEqual([]);
    expect(chunk!.versions.map((v) => v.id)).toEqual(['a', 'b', 'doc']);
    expect(chunk!.urns).toEqual([{ at: 1, line: 2, text: lines[1] }, { at: 3, line: 5, text: lines[4] }]);
  });

  test(`chunks of ${CHUNK_RESOURCES} resources`, async () => {
    const n = CHUNK_RESOURCES * 2 + 3;
    const chunks = await all(blob(Array.from({ length: n }, (_, i) => `{"resourceType":"Basic","id":"x${i}","code":{"text":"x"}}`)));
    expect(chunks.map((c) => c.versions.length)).toEqual([CHUNK_RESOURCES, CHUNK_RESOURCES, 3]);
    expect(chunks.flatMap((c) => c.versions).map((v) => v.id)).toEqual(Array.from({ length: n }, (_, i) => `x${i}`));
  });

  test(`failed lines count toward a chunk: an input of nothing else comes in chunks of ${CHUNK_RESOURCES}, never held whole`, async () => {
    const n = CHUNK_RESOURCES * 2 + 3;
    const lines = Array.from({ length: n }, (_, i) => (i === 1500 ? '{"resourceType":"Basic","id":"ok","code":{"text":"x"}}' : '{not json'));
    const chunks = await all(blob(lines));
    expect(chunks.map((c) => c.issues.length + c.versions.length)).toEqual([CHUNK_RESOURCES, CHUNK_RESOURCES, 3]);
    expect(chunks.flatMap((c) => c.issues).map((i) => i.line)).toEqual(Array.from({ length: n }, (_, i) => i + 1).filter((l) => l !== 1501));
    expect(chunks[1]!.versions.map((v) => [v.id, v.line])).toEqual([['ok', 1501]]);
  });
});
