/**
 * Existing databases and the index model: a database holding rows of an older model (or none, as one
 * migrated from before every parameter was indexed) is reindexed, resumably, by `reindex` (which
 * `cinder serve` runs at start) and by `cinder reindex`; searches then find what they should.
 */
import { describe, expect, test } from 'bun:test';
import { indexEntries, normalizeString, storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, reindex, tablesSince, touchedSince } from '../../src/fhir/reindex.ts';
import { NO_INDEX_ROWS, type Store } from '../../src/store/types.ts';
import { createTestApp } from '../helpers/app.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`reindex on ${kind}`, () => {
    test('rows of an older model are rebuilt, an interrupted run resumes where it stopped', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const api = fhirClient(t, await t.token());
        // In one transaction, in id order (p0 ... p1199 in key order, as the pages below read them): a
        // transaction each took most of the test's 20 s on PostgreSQL.
        const { prepareVersion, versionToWrite } = await import('../../src/fhir/prepared.ts');
        await t.store.resources.write('t1', (w) => w.insertNew(Array.from({ length: 1_200 }, (_, i) => {
          const p = { resourceType: 'Patient', id: `p${i}`, name: [{ family: i % 2 ? 'Odd' : 'Even' }], birthDate: `19${String(i % 100).padStart(2, '0')}` };
          return versionToWrite(prepareVersion(p as never, `p${i}`, undefined), 1, 1_000 + i, 'PUT');
        })));
        const count = async (q: string) => ((await api.search(`Patient?${q}&_summary=count`)) as Json).total;
        expect(await count('family=odd')).toBe(600);
        expect(await count('_content=odd')).toBe(600);
        expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
        // As a database written by an older model: no string, range or full-text rows, model 0.
        await wipeNewRows(t.store);
        await t.store.resources.indexing.setState({ model: 0, after: 0 });
        expect(await count('family=odd')).toBe(0);
        expect(await count('_content=odd')).toBe(0);

        // An interrupted run: the first 500 done, the position recorded.
        const page = await t.store.resources.indexing.page(0, 500);
        await t.store.resources.indexing.setState({ model: 0, after: page.at(-1)!.pk });
        const progress: number[] = [];
        const result = await reindex(t.store, { batch: 500, onProgress: (p) => progress.push(p.done) });
        expect(result).toEqual({ ran: true, done: 700, rebuilt: 700 });
        expect(progress).toEqual([500, 700]);
        expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
        // Only the 700 after the recorded position were done: the odd ones among p500..p1199.
        expect(await count('family=odd')).toBe(350);
        expect(await count('_content=odd')).toBe(350);
        // Once the model is current, nothing runs.
        expect(await reindex(t.store)).toEqual({ ran: false, done: 0, rebuilt: 0 });
        // Forced: everything, the first 500 included.
        expect((await reindex(t.store, { force: true })).done).toBe(1_200);
        expect(await count('family=odd')).toBe(600);
        expect(await count('_content=odd')).toBe(600);
        expect(await count('birthdate=1999')).toBe(12);
      } finally {
        await t.close();
      }
    }, 60_000);
  });
});

await eachStore((kind, fresh) => {
  describe(`reindex from model 2 on ${kind}`, () => {
    test('rebuilds only the resources holding an Identifier type text, and identifier:text then finds them', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const api = fhirClient(t, await t.token());
        const mr = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0203', code: 'MR' }], text: 'Medical record number' };
        await api.put200({ resourceType: 'Patient', id: 'typed', identifier: [{ system: 'urn:mrn', value: 'M1', type: mr }] });
        await api.put200({ resourceType: 'Patient', id: 'untyped', identifier: [{ system: 'urn:mrn', value: 'M2' }], name: [{ text: 'Medical Person' }] });
        await api.put200({ resourceType: 'Patient', id: 'plain', gender: 'other' });
        const ids = async (q: string) => ((await api.search(`Patient?${q}`)).entry ?? []).map((e: Json) => e.resource.id).sort();
        expect(await ids('identifier:text=medical')).toEqual(['typed']);
        // As model 2 wrote them: an Identifier's rows without its type's text.
        const page = await t.store.resources.indexing.page(0, 500);
        await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
          const index = storedIndex(JSON.parse(r.content));
          index.tokens = index.tokens.map((e) => (e.param === 'identifier' ? { param: e.param, system: e.system, value: e.value } : e));
          return { type: r.type, id: r.id, index, compartments: [] };
        })));
        await t.store.resources.indexing.setState({ model: 2, after: 0 });
        expect(await ids('identifier:text=medical')).toEqual([]);

        const progress: { done: number; rebuilt: number }[] = [];
        // `typed`; and `untyped`, whose name's text model 11's test (a string `text`) names too.
        expect(await reindex(t.store, { onProgress: ({ done, rebuilt }) => progress.push({ done, rebuilt }) })).toEqual({ ran: true, done: 3, rebuilt: 2 });
        expect(progress).toEqual([{ done: 3, rebuilt: 2 }]);
        expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
        expect(await ids('identifier:text=medical')).toEqual(['typed']);
        expect(await ids('identifier=M2')).toEqual(['untyped']);
        expect(await ids('gender=other')).toEqual(['plain']);
      } finally {
        await t.close();
      }
    }, 60_000);
  });
});

await eachStore((kind, fresh) => {
  describe(`reindex beside writes on ${kind}`, () => {
    test('a resource updated after the reindexer read it keeps the rows its own write gave it', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const api = fhirClient(t, await t.token());
        await api.put200({ resourceType: 'Patient', id: 'x', name: [{ family: 'Old' }] });
        await api.put200({ resourceType: 'Patient', id: 'y', name: [{ family: 'Same' }] });
        const page = await t.store.resources.indexing.page(0, 10);
        expect(page.map((r) => [r.id, r.versionId])).toEqual([['x', 1], ['y', 1]]);
        // Updated between the reindexer's read and its write.
        await api.put200({ resourceType: 'Patient', id: 'x', name: [{ family: 'New' }] });
        await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
          const resource = JSON.parse(r.content);
          // What the reindexer computes from what it read (here marked, to see which rows were written).
          resource.name[0].family += 'reindexed';
          return { type: r.type, id: r.id, versionId: r.versionId, index: storedIndex(resource), compartments: [] };
        })));
        const ids = async (q: string) => ((await api.search(`Patient?${q}`)).entry ?? []).map((e: Json) => e.resource.id).sort();
        expect(await ids('family=new')).toEqual(['x']);
        expect(await ids('family=oldreindexed')).toEqual([]);
        expect(await ids('family=samereindexed')).toEqual(['y']);
      } finally {
        await t.close();
      }
    }, 60_000);
  });
});

describe('touchedSince', () => {
  test('model 10 touches every resource holding a character whose normalised form it changed, and no other', () => {
    // Model 9's normalised form: accents removed, lower case.
    const model9 = (s: string) => s.normalize('NFD').replace(/[\u0300-\u036f]/g, '').toLowerCase();
    const since9 = touchedSince(9);
    const changed: string[] = [];
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const c = String.fromCodePoint(cp);
      if (normalizeString(c) === model9(c)) continue;
      changed.push(c);
      expect({ c, touched: since9(`{"name":[{"family":"x${c}y"}]}`) }).toEqual({ c, touched: true });
    }
    // 38 of model 10's full case folding, 36 of model 22's letters (which model 10's test touches too).
    expect(changed.length).toBe(74);
    for (let cp = 0; cp < 0x80; cp++) expect(normalizeString(`${String.fromCharCode(cp)}ß`)).toBe(`${String.fromCharCode(cp).toLowerCase()}ss`);
  });

  test('model 22 touches every resource holding a character whose normalised form it changed, raw or escaped, and no other', () => {
    // Model 21's normalised form: accents removed, full case folding, the letters whose mark does not decompose kept.
    const model21 = (s: string) => {
      const folded = s.normalize('NFD').replace(/[\u0300-\u036f]/g, '');
      return /[^\x00-\x7f]/.test(folded) ? folded.toUpperCase().toLowerCase().replace(/\u03c2/g, '\u03c3').replace(/\u00df/g, 'ss') : folded.toLowerCase();
    };
    const since21 = touchedSince(21);
    const changed: string[] = [];
    for (let cp = 0x80; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const c = String.fromCodePoint(cp);
      if (normalizeString(c) === model21(c)) continue;
      changed.push(c);
      expect({ c, touched: since21(`{"name":[{"family":"x${c}y"}]}`), escaped: since21(`{"name":[{"family":"x\\u${cp.toString(16).padStart(4, '0')}y"}]}`) }).toEqual({ c, touched: true, escaped: true });
    }
    expect(changed.join('')).toBe('ÆÐØÞæðøþĐđĦħĲĳĿŀŁłŊŋŒœŦŧƀƗƵƶǢǣǼǽǾǿɃɨ');
    expect(normalizeString('Søren Łukasz Æsa Þór Guðrún')).toBe('soren lukasz aesa thor gudrun');
    // (`ß` is model 10's, whose characters model 23 touches again: it folds the full-text words alike.)
    expect(since21('{"resourceType":"Patient","name":[{"family":"Müller","given":["José","Strasse"]}]}')).toBe(false);
  });

  test('models 1 and 2 touch every resource; model 3 those with a type object and a text', () => {
    for (const m of [0, 1]) expect(touchedSince(m)('{"resourceType":"Patient"}')).toBe(true);
    const since2 = touchedSince(2);
    expect(since2('{"identifier":[{"type":{"text":"MRN"},"value":"1"}]}')).toBe(true);
    expect(since2('{"identifier":[{"type" : {"coding":[]}, "value":"1"}],"name":[{"text":"x"}]}')).toBe(true);
    expect(since2('{"identifier":[{"type":{"coding":[{"code":"MR"}]},"value":"1"}]}')).toBe(false);
    expect(since2('{"subject":{"reference":"Patient/1","type":"Patient"},"text":{"status":"empty","div":"<div/>"}}')).toBe(false);
    expect(touchedSince(INDEX_MODEL)('{"identifier":[{"type":{"text":"MRN"}}]}')).toBe(false);
  });

  test('a reindex rewrites the tables its models name, every row when one of them names none (models 0, 1 and 8)', () => {
    // Model 8 changed reference rows and the compartments: every row of the resources it touches.
    for (const model of [0, 1, 2, 3, 5, 6, 7]) expect(tablesSince(model)).toBeUndefined();
    expect(tablesSince(INDEX_MODEL)).toEqual([]);
    // Model 9: date ranges, in range rows (code-value-date keeps no composite rows); then model 10's.
    expect(tablesSince(8)).toEqual(['search_range', 'search_index', 'search_string', 'search_composite', 'search_text']);
    // Model 9: resources holding a Timing's events (null where one has only extensions), or a dateTime or
    // instant with a fraction of one or two digits; not a bounds Period alone, nor three or more digits.
    const since8 = touchedSince(8);
    expect(since8('{"resourceType":"Observation","effectiveTiming":{"event":["2020-03-05T08:00:00Z","2020-04-05T08:00:00Z"]}}')).toBe(true);
    expect(since8('{"resourceType":"Observation","effectiveTiming":{"event": [ null, "2020-03-05"],"_event":[{"extension":[]},null]}}')).toBe(true);
    expect(since8('{"resourceType":"Observation","effectiveDateTime":"2020-03-01T10:30:00.1Z"}')).toBe(true);
    expect(since8('{"resourceType":"Observation","effectiveDateTime":"2020-03-01T11:30:00.12+01:00"}')).toBe(true);
    expect(since8('{"resourceType":"Observation","effectiveDateTime":"2020-03-01T10:30:00.123Z","issued":"2020-03-01T10:30:00.1234Z"}')).toBe(false);
    expect(since8('{"resourceType":"Observation","effectiveTiming":{"repeat":{"boundsPeriod":{"start":"2020-03-10"},"frequency":1}}}')).toBe(false);
    expect(since8('{"resourceType":"Composition","event":[{"period":{"start":"2020-03-10"}}],"date":"2020-03-10T10:00:00Z"}')).toBe(false);
    expect(since8('{"resourceType":"Observation","valueTime":"10:30:00.1","valueString":"at 2020-03-01T10:30:00.1Z"}')).toBe(false);
    // Model 10: normalised strings, in string rows, token rows (a `:text` display) and composite rows;
    // model 11 token rows, model 12 range and composite rows; model 15 string rows.
    expect(tablesSince(9)).toEqual(['search_index', 'search_string', 'search_composite', 'search_range', 'search_text']);
    expect(tablesSince(10)).toEqual(['search_index', 'search_range', 'search_composite', 'search_string', 'search_text']);
    expect(tablesSince(11)).toEqual(['search_range', 'search_composite', 'search_string', 'search_index', 'search_text']);
    expect(tablesSince(12)).toEqual(['search_range', 'search_composite', 'search_string', 'search_index', 'search_text']);
    expect(tablesSince(13)).toEqual(['search_range', 'search_composite', 'search_string', 'search_index', 'search_text']);
    expect(tablesSince(14)).toEqual(['search_string', 'search_range', 'search_index', 'search_composite', 'search_text']);
    // Model 16: range rows (a quantity's sort rows); model 17 token rows (an email address lower-cased);
    // model 18 string rows (a Coding's display without a code); model 19 token, string and composite rows
    // (a system without a code).
    // Model 20 range and composite rows (a UCUM unit of any atom of the essence).
    expect(tablesSince(15)).toEqual(['search_range', 'search_index', 'search_string', 'search_composite', 'search_text']);
    expect(tablesSince(16)).toEqual(['search_index', 'search_string', 'search_composite', 'search_range', 'search_text']);
    expect(tablesSince(17)).toEqual(['search_string', 'search_index', 'search_composite', 'search_range', 'search_text']);
    expect(tablesSince(18)).toEqual(['search_index', 'search_string', 'search_composite', 'search_range', 'search_text']);
    // Model 22: token, string and composite rows (normalised strings); model 23 the full-text words alone (search_text).
    expect(tablesSince(19)).toEqual(['search_range', 'search_composite', 'search_index', 'search_string', 'search_text']);
    // Model 20: resources holding a UCUM unit of an atom the table before it did not read (in a component too), a
    // binary prefix, `[g]` with a prefix or a barn with one; not those of the units it read.
    const since19 = touchedSince(19);
    const quantity = (code: string, system = 'http://unitsofmeasure.org') => JSON.stringify({ resourceType: 'Observation', valueQuantity: { value: 5, system, code } });
    for (const code of ['[psi]', 'Torr', '[HPF]', '[CFU]/mL', 'mg/[HPF]', '[mi_us]', 'KiBy', 'k[g]', 'mb', 'ug/(mb.s)', '[degRe]']) expect({ code, touched: since19(quantity(code)) }).toEqual({ code, touched: true });
    for (const code of ['mg', 'mg/dL', 'mm[Hg]', '[lb_av]', 'Cel', '[degF]', '10*9/L', '{beats}/min', 'bar', '[pH]', 'm/s2', 'b']) expect({ code, touched: since19(quantity(code)) }).toEqual({ code, touched: false });
    expect(since19(JSON.stringify({ resourceType: 'Observation', component: [{ valueQuantity: { value: 2, system: 'http://unitsofmeasure.org', code: '[psi]' } }] }))).toBe(true);
    expect(since19(quantity('[psi]', 'http://example.org/units'))).toBe(false);
    // Model 21 range and composite rows: resources holding a UCUM unit with a leading `/` and more after its first
    // component (read as the whole unit divided before), or an annotated number or parenthesis (not read before).
    expect(tablesSince(20)).toEqual(['search_range', 'search_composite', 'search_index', 'search_string', 'search_text']);
    expect(tablesSince(21)).toEqual(['search_index', 'search_string', 'search_composite', 'search_text']);
    expect(tablesSince(22)).toEqual(['search_text', 'search_index']);
    expect(tablesSince(23)).toEqual(['search_index']);
    // Model 24: canonical resources with a url and a version, and resources with a versioned canonical of a long url.
    const since23 = touchedSince(23);
    const long = `http://forms.example/Questionnaire/${'x'.repeat(2000)}`;
    expect(since23('{"resourceType":"Questionnaire","url":"http://forms.example/Q","version":"1","status":"active"}')).toBe(true);
    expect(since23(JSON.stringify({ resourceType: 'QuestionnaireResponse', status: 'completed', questionnaire: `${long}|1` }))).toBe(true);
    expect(since23(JSON.stringify({ resourceType: 'QuestionnaireResponse', status: 'completed', questionnaire: long }))).toBe(false);
    expect(since23('{"resourceType":"QuestionnaireResponse","status":"completed","questionnaire":"http://forms.example/Q|1"}')).toBe(false);
    expect(since23('{"resourceType":"Questionnaire","url":"http://forms.example/Q","status":"active"}')).toBe(false);
    const since20 = touchedSince(20);
    for (const code of ['/kg/d', '/s.m', '/L/h', '/100{WBCs}', '{#}/100{WBCs}', '(2){x}', 'mg/(kg.d){x}']) expect({ code, touched: since20(quantity(code)) }).toEqual({ code, touched: true });
    for (const code of ['/min', '/h', '/[HPF]', '/10*3', '/{tot}', 'mL/kg/d', 'mg/dL/h', '{cells}/uL', '10*3{copies}/mL', 'mg', '[psi]']) expect({ code, touched: since20(quantity(code)) }).toEqual({ code, touched: false });
    expect(since20(quantity('/kg/d', 'http://example.org/units'))).toBe(false);
    // Model 18: resources holding a display (a Coding's; those with a code too, which the test cannot tell apart).
    const since17 = touchedSince(17);
    expect(since17('{"resourceType":"Condition","code":{"coding":[{"display":"Headache"}]}}')).toBe(true);
    expect(since17('{"resourceType":"Condition","code":{"text":"Headache"},"subject":{"reference":"Patient/1"}}')).toBe(false);
    // Model 14: resources holding a Quantity with a comparator.
    const since13 = touchedSince(13);
    expect(since13('{"resourceType":"Observation","valueQuantity":{"value":5,"comparator":"<","unit":"mg"}}')).toBe(true);
    expect(since13('{"resourceType":"Observation","valueCodeableConcept":{"text":"x"},"note":[{"text":"comparator"}]}')).toBe(false);
    // (A quantity without a comparator is rebuilt too from model 15: model 16 gave every number value a sort row.)
    expect(since13('{"resourceType":"Observation","valueQuantity":{"value":5,"unit":"mg"},"note":[{"text":"comparator"}]}')).toBe(true);
    // Model 13: resources holding a dateTime or instant at a leap second.
    const since12 = touchedSince(12);
    expect(since12('{"resourceType":"Observation","effectiveDateTime":"2016-12-31T23:59:60Z"}')).toBe(true);
    expect(since12('{"resourceType":"Observation","issued":"2017-01-01T00:59:60.25+01:00"}')).toBe(true);
    expect(since12('{"resourceType":"Observation","effectiveDateTime":"2016-12-31T23:59:59Z","valueString":"at 23:59:60"}')).toBe(false);
    // Model 10: resources holding a character the full case folding changes, or its JSON escape; a
    // capital sigma, which lower-casing made `ς` at a word's end; not accents, nor ASCII alone.
    const since9 = touchedSince(9);
    expect(since9('{"resourceType":"Patient","name":[{"family":"Straße"}]}')).toBe(true);
    expect(since9('{"resourceType":"Patient","name":[{"family":"Stra\\u00DFe"}]}')).toBe(true);
    expect(since9('{"resourceType":"Patient","name":[{"family":"Işık"}]}')).toBe(true);
    expect(since9('{"resourceType":"Patient","name":[{"text":"ﬁne"}]}')).toBe(true);
    expect(since9('{"resourceType":"Patient","name":[{"family":"ΟΔΟΣ"}]}')).toBe(true);
    expect(since9('{"resourceType":"Observation","valueQuantity":{"value":5,"unit":"µg"}}')).toBe(true);
    expect(since9('{"resourceType":"Patient","name":[{"family":"Müller","given":["José","İlker"]}]}')).toBe(false);
    expect(since9('{"resourceType":"Patient","name":[{"family":"Strasse"}],"text":{"div":"\\u00e9"}}')).toBe(false);
    expect(since8('{"resourceType":"Patient","name":[{"family":"Straße"}]}')).toBe(true);
    // Model 8: resources holding an absolute reference (not a `urn:`).
    expect(touchedSince(7)('{"resourceType":"Observation","subject":{"reference":"http://other.org/fhir/Patient/p"}}')).toBe(true);
    expect(touchedSince(7)('{"resourceType":"Observation","subject":{"reference" : "https://x.org/Patient/p"}}')).toBe(true);
    expect(touchedSince(7)('{"resourceType":"Observation","subject":{"reference":"Patient/p"},"valueString":"see http://x.org"}')).toBe(false);
    expect(touchedSince(7)('{"resourceType":"Observation","subject":{"reference":"urn:uuid:0d6e9c4e-1f5a-4a8e-9b8e-2f3c4d5e6f70"}}')).toBe(false);
    expect(touchedSince(5)('{"resourceType":"Observation","contained": [{"resourceType":"Patient","id":"p"}],"subject":{"reference":"#p"}}')).toBe(true);
    expect(touchedSince(5)('{"resourceType":"Observation","subject":{"reference":"Patient/p"},"valueString":"contained"}')).toBe(false);
    // Model 7: resources of the types with a restricted reference parameter (AuditEvent, EpisodeOfCare) that contain resources.
    expect(touchedSince(6)('{"resourceType":"AuditEvent","contained":[{"resourceType":"Patient","id":"p"}],"agent":[{"who":{"reference":"#p"}}]}')).toBe(true);
    expect(touchedSince(6)('{"resourceType":"Observation","contained":[{"resourceType":"Patient","id":"p"}],"subject":{"reference":"#p"}}')).toBe(false);
    expect(touchedSince(6)('{"resourceType":"AuditEvent","agent":[{"who":{"reference":"Patient/p"}}]}')).toBe(false);
    expect(touchedSince(4)('{"valueQuantity":{"value":1,"system":"http://unitsofmeasure.org","code":"mg"}}')).toBe(true);
    // (A number value without UCUM is rebuilt too from model 4: model 16 gave it a sort row.)
    expect(touchedSince(4)('{"valueQuantity":{"value":1,"unit":"mg"}}')).toBe(true);
    expect(touchedSince(4)('{"valueString":"1 mg"}')).toBe(false);
    // Model 16: resources holding a number value, a Quantity's or a Range end's.
    expect(touchedSince(15)('{"valueQuantity":{"value": 0.5,"unit":"mg"}}')).toBe(true);
    expect(touchedSince(15)('{"valueRange":{"low":{"value":-1}}}')).toBe(true);
    expect(touchedSince(15)('{"valueString":"1 mg","identifier":[{"value":"12"}]}')).toBe(false);
  });
});

/** Rewrites every resource's index rows as the model before #14 wrote them: token rows only. */
async function wipeNewRows(store: Store): Promise<void> {
  for (let after = 0; ;) {
    const page = await store.resources.indexing.page(after, 500);
    if (!page.length) return;
    const items = page.map((r) => {
      const rows = indexEntries(JSON.parse(r.content));
      return { type: r.type, id: r.id, index: { ...NO_INDEX_ROWS, tokens: rows.tokens }, compartments: [] };
    });
    await store.resources.write('t1', (w) => w.replaceIndex(items));
    after = page.at(-1)!.pk;
  }
}

describe('cinder reindex', () => {
  test('rebuilds every resource (--if-needed only when the model is old) and reports it', async () => {
    const cli = createCliEnv();
    try {
      expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
      const file = `${cli.dir}/p.ndjson`;
      await Bun.write(file, [1, 2, 3].map((i) => JSON.stringify({ resourceType: 'Patient', id: `p${i}`, gender: 'other' })).join('\n') + '\n');
      expect((await cli.run(['import', '--tenant', 't1', file])).code).toBe(0);
      const forced = await cli.run(['reindex', '--json']);
      expect(forced.code).toBe(0);
      expect(JSON.parse(forced.stdout)).toMatchObject({ reindexed: 3, ran: true });
      const needed = await cli.run(['reindex', '--if-needed', '--json']);
      expect(JSON.parse(needed.stdout)).toMatchObject({ reindexed: 0, ran: false });
      const store = cli.store();
      expect(await store.resources.count('t1', { type: 'Patient', where: [{ kind: 'token', param: 'gender', values: [{ value: 'other' }] }], sort: [], count: 0 })).toBe(3);
      await store.close();
    } finally {
      cli.close();
    }
  });
});
