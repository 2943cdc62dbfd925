/**
 * Full-text search (`_text` on the narrative, `_content` on all of a resource's text) through the REST
 * API, on both databases: words in any order, accents and case ignored, `word*` prefixes, the boolean
 * syntax (AND, OR, parentheses, quotes), `,` and repeated parameters, updates and deletes, other tenants
 * and types, chains, `_has`, the planner's counts, SMART scope filters (matched in memory), and errors.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { generatePatients } from '../../bench/lib/generator.ts';
import { textIndexOf, textMatches } from '../../src/fhir/text-index.ts';
import type { TextTerm } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { firstVersions } from '../helpers/versions.ts';
import { download, eachStore, finish, kickOff, refs } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';
const narrative = (html: string) => ({ status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">${html}</div>` });

const DATA: Json[] = [
  { resourceType: 'Patient', id: 'p1', name: [{ family: 'Chalmers', given: ['Peter'] }], text: narrative('<p>Peter <b>Chalmers</b>, born in Zürich &amp; raised in Brisbane</p>') },
  { resourceType: 'Patient', id: 'p2', name: [{ family: 'Müller', given: ['Zoë'] }], address: [{ city: 'Brisbane' }] },
  {
    resourceType: 'Observation', id: 'o1', status: 'final', subject: { reference: 'Patient/p1' }, effectiveDateTime: '2020-03-01T10:00:00Z',
    code: { coding: [{ system: LOINC, code: '2339-0', display: 'Glucose [Mass/volume] in Blood' }], text: 'Blood glucose' },
    note: [{ text: 'Fasting since midnight.' }],
  },
  {
    resourceType: 'Observation', id: 'o2', status: 'final', subject: { reference: 'Patient/p1' },
    // A blood pressure as R4's bp profile, which a vital sign is held to unclaimed, wants it.
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }], effectiveDateTime: '2020-03-02T10:00:00Z',
    code: { coding: [{ system: LOINC, code: '85354-9', display: 'Blood pressure panel' }] },
    component: [
      { code: { coding: [{ system: LOINC, code: '8480-6' }] }, valueQuantity: { value: 140, unit: 'mmHg', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' } },
      { code: { coding: [{ system: LOINC, code: '8462-4' }] }, valueQuantity: { value: 90, unit: 'mmHg', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' } },
    ],
    text: narrative('<p>Blood pressure 140/90, taken after <i>glucose</i> test</p>'),
  },
  {
    resourceType: 'Observation', id: 'o3', status: 'final', subject: { reference: 'Patient/p2' },
    code: { coding: [{ system: LOINC, code: '2339-0', display: 'Glucose' }] },
    contained: [{ resourceType: 'Practitioner', id: 'dr', name: [{ family: 'Ångström' }] }], performer: [{ reference: '#dr' }],
  },
  { resourceType: 'Condition', id: 'c1', subject: { reference: 'Patient/p1' }, code: { text: 'Type 2 diabetes mellitus' } },
  { resourceType: 'Condition', id: 'c2', subject: { reference: 'Patient/p2' }, code: { text: 'Gestational diabetes' }, note: [{ text: 'Resolved after delivery; glucose normal' }] },
  // R4 search.html's example, `(bone OR liver) and metastases`, on the narrative.
  { resourceType: 'Condition', id: 'm1', subject: { reference: 'Patient/p2' }, text: narrative('<p>Bone metastases</p>') },
  { resourceType: 'Condition', id: 'm2', subject: { reference: 'Patient/p2' }, text: narrative('<p>Liver metastases</p>') },
  { resourceType: 'Condition', id: 'm3', subject: { reference: 'Patient/p2' }, text: narrative('<p>Bone fracture, left or right arm</p>') },
];

await eachStore((kind, fresh) => {
  describe(`full-text search on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const found = async (query: string): Promise<string[]> => {
      const bundle = await api.search(query);
      const outcome = (bundle.entry ?? []).find((e: Json) => e.search?.mode === 'outcome');
      if (outcome) throw new Error(`${query}: ${JSON.stringify(outcome.resource)}`);
      return (bundle.entry ?? []).filter((e: Json) => e.search.mode === 'match').map((e: Json) => e.resource.id).sort();
    };
    const total = async (query: string): Promise<number> => (await api.search(`${query}&_total=accurate`)).total;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
      // The same words in another tenant: never found from t1.
      const other = fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't2');
      await other.put200({ resourceType: 'Observation', id: 'x1', status: 'final', code: { text: 'Blood glucose' } });
    });
    afterAll(() => t.close());

    test('_content: every word, in any order, case- and accent-insensitive, anywhere in the resource', async () => {
      expect(await found('Observation?_content=glucose')).toEqual(['o1', 'o2', 'o3']);
      expect(await found('Observation?_content=GLUCOSE%20blood')).toEqual(['o1', 'o2']);
      expect(await found('Observation?_content=glucose%20fasting')).toEqual(['o1']);
      expect(await found('Patient?_content=muller')).toEqual(['p2']);
      expect(await found('Patient?_content=Zoe')).toEqual(['p2']);
      expect(await found('Patient?_content=brisbane')).toEqual(['p1', 'p2']);
      // Punctuation separates words; a phrase in quotes is its words.
      expect(await found('Observation?_content=%22mass/volume%22')).toEqual(['o1']);
      // Contained resources are part of the content.
      expect(await found('Observation?_content=angstrom')).toEqual(['o3']);
      // Whole words: a part of one is not a match.
      expect(await found('Observation?_content=gluc')).toEqual([]);
    });

    test('_content: word* prefixes, `,` ORs values, repeated parameters AND', async () => {
      expect(await found('Observation?_content=gluc*')).toEqual(['o1', 'o2', 'o3']);
      expect(await found('Condition?_content=diab*%20mell*')).toEqual(['c1']);
      expect(await found('Condition?_content=mellitus,delivery')).toEqual(['c1', 'c2']);
      expect(await found('Condition?_content=diabetes&_content=glucose')).toEqual(['c2']);
      expect(await found('Observation?_content=pressure,fasting&_content=blood')).toEqual(['o1', 'o2']);
    });

    test('boolean syntax: AND (also implied) binds tighter than OR, operators in any case, parentheses', async () => {
      const q = (type: string, param: string, expr: string) => found(`${type}?${param}=${encodeURIComponent(expr)}`);
      expect(await q('Condition', '_text', '(bone OR liver) and metastases')).toEqual(['m1', 'm2']);
      expect(await q('Condition', '_content', '(bone OR liver) and metastases')).toEqual(['m1', 'm2']);
      expect(await q('Condition', '_text', '(liver OR bone) AND fracture')).toEqual(['m3']);
      // `a OR b c` is `a OR (b AND c)`.
      expect(await q('Condition', '_text', 'liver OR bone fracture')).toEqual(['m2', 'm3']);
      expect(await q('Condition', '_text', 'liver or bone And fracture')).toEqual(['m2', 'm3']);
      expect(await q('Condition', '_text', 'BONE oR liver')).toEqual(['m1', 'm2', 'm3']);
      expect(await q('Observation', '_content', '(pressure OR fasting) blood')).toEqual(['o1', 'o2']);
      expect(await q('Condition', '_content', 'mell* OR (delivery glucose)')).toEqual(['c1', 'c2']);
      // In quotes, operators are words (the indexes keep no positions: a quoted phrase is its words ANDed).
      expect(await q('Condition', '_text', 'fracture "or"')).toEqual(['m3']);
      expect(await q('Condition', '_text', '"arm bone"')).toEqual(['m3']);
    });

    test('boolean syntax with `,` between values and repeated parameters', async () => {
      expect(await found(`Condition?_text=${encodeURIComponent('liver OR fracture')},mellitus`)).toEqual(['m2', 'm3']);
      expect(await found(`Condition?_text=${encodeURIComponent('bone OR liver')}&_text=metastases`)).toEqual(['m1', 'm2']);
      expect(await found(`Condition?_content=${encodeURIComponent('gestational OR mellitus')}&_content=${encodeURIComponent('type OR delivery')}`)).toEqual(['c1', 'c2']);
      expect(await found(`Patient?_has:Condition:patient:_text=${encodeURIComponent('liver OR zzz')}`)).toEqual(['p2']);
      expect(await found(`Condition?_filter=${encodeURIComponent('_text co "(bone OR liver) metastases"')}`)).toEqual(['m1', 'm2']);
    });

    test('boolean syntax: malformed expressions and NOT are 400s naming the parameter', async () => {
      const refused = async (query: string, expression: string, diagnostics: RegExp) => {
        const outcome = await expectOutcome(await api.get(query), 400);
        expect(outcome.issue[0].expression).toEqual([expression]);
        expect(outcome.issue[0].diagnostics).toMatch(diagnostics);
      };
      for (const expr of ['(bone OR liver', 'bone)', '(bone OR liver)) metastases', '()']) await refused(`Condition?_text=${encodeURIComponent(expr)}`, '_text', /parenthes|word/);
      for (const expr of ['bone OR', 'OR bone', 'bone OR OR liver', 'bone AND', 'bone and or liver']) await refused(`Condition?_text=${encodeURIComponent(expr)}`, '_text', /needs a term on each side/);
      await refused(`Condition?_content=${encodeURIComponent('"bone metastases')}`, '_content', /quotes/);
      await refused(`Condition?_text=${encodeURIComponent('bone NOT fracture')}`, '_text', /not supported/);
      await refused(`Condition?_text=${encodeURIComponent('bone -fracture')}`, '_text', /not supported/);
      await refused(`Condition?_content=${encodeURIComponent('not bone')}`, '_content', /not supported/);
      await refused(`Observation?subject:Patient._text=${encodeURIComponent('zurich OR')}`, 'subject:Patient._text', /needs a term/);
    });

    test('identities, links, systems, codes of the stamp and dates are not content', async () => {
      expect(await found('Observation?_content=loinc')).toEqual([]);
      expect(await found('Observation?_content=p1')).toEqual([]);
      expect(await found('Observation?_content=2020')).toEqual([]);
      expect(await found('Observation?_content=o1')).toEqual([]);
    });

    test('_text: the narrative alone, markup and character references removed', async () => {
      expect(await found('Patient?_text=zurich')).toEqual(['p1']);
      expect(await found('Patient?_text=brisbane')).toEqual(['p1']);
      expect(await found('Patient?_text=muller')).toEqual([]);
      expect(await found('Observation?_text=glucose')).toEqual(['o2']);
      expect(await found('Observation?_text=fasting')).toEqual([]);
      // `&amp;` is a character, not the word "amp"; tags are not words.
      expect(await found('Patient?_text=amp')).toEqual([]);
      expect(await found('Patient?_text=div')).toEqual([]);
      expect(await found('Patient?_content=zurich')).toEqual(['p1']);
    });

    test('with other conditions, as the planner drives or probes, and counted on this tenant and type only', async () => {
      expect(await found('Observation?patient=p1&_content=glucose')).toEqual(['o1', 'o2']);
      expect(await found('Observation?code=2339-0&_content=blood')).toEqual(['o1']);
      expect(await found('Patient/p1/Observation?_content=pressure')).toEqual(['o2']);
      expect(await total('Observation?_content=glucose')).toBe(3);
      expect(await total('Observation?_content=blood')).toBe(2);
      expect((await api.search('Observation?_content=glucose&_summary=count')).total).toBe(3);
      expect(await total('Condition?_content=glucose')).toBe(1);
      expect(await found('Observation?_content=glucose&_sort=-_id&_count=2')).toEqual(['o2', 'o3']);
    });

    test('in chains and _has', async () => {
      expect(await found('Observation?subject:Patient._content=zurich')).toEqual(['o1', 'o2']);
      expect(await found('Observation?subject:Patient._text=brisbane')).toEqual(['o1', 'o2']);
      expect(await found('Patient?_has:Condition:patient:_content=gestational')).toEqual(['p2']);
      expect(await found('Patient?_has:Observation:patient:_content=fasting&_content=brisbane')).toEqual(['p1']);
    });

    test('an update replaces the words, a deletion removes them', async () => {
      await api.put200({ resourceType: 'Condition', id: 'c3', subject: { reference: 'Patient/p1' }, code: { text: 'Seasonal rhinitis' } });
      expect(await found('Condition?_content=rhinitis')).toEqual(['c3']);
      await api.put200({ resourceType: 'Condition', id: 'c3', subject: { reference: 'Patient/p1' }, code: { text: 'Chronic sinusitis' } });
      expect(await found('Condition?_content=rhinitis')).toEqual([]);
      expect(await found('Condition?_content=sinusitis')).toEqual(['c3']);
      expect((await api.del('Condition/c3')).status).toBe(200);
      expect(await found('Condition?_content=sinusitis')).toEqual([]);
      // In a transaction, and in a conditional create's query.
      const transaction = async () => {
        const res = await api.post('', {
          resourceType: 'Bundle', type: 'transaction',
          entry: [{ request: { method: 'POST', url: 'Condition', ifNoneExist: '_content=asthma' }, resource: { resourceType: 'Condition', subject: { reference: 'Patient/p2' }, code: { text: 'Asthma' } } }],
        });
        expect(res.status).toBe(200);
        return ((await res.json()) as Json).entry[0].response.status as string;
      };
      expect(await transaction()).toStartWith('201');
      expect(await transaction()).toStartWith('200');
      expect((await found('Condition?_content=asthma')).length).toBe(1);
    });

    test('SMART scope filters on _content are matched on reads as in searches', async () => {
      const scoped = fhirClient(t, await t.tokenFor('t1', ['system/Observation.rs?_content=fasting']));
      expect((await scoped.get('Observation/o1')).status).toBe(200);
      expect((await scoped.get('Observation/o2')).status).toBe(403);
      const bundle = await scoped.search('Observation?_content=blood');
      expect(bundle.entry.filter((e: Json) => e.search.mode === 'match').map((e: Json) => e.resource.id)).toEqual(['o1']);
    });

    test('SMART scope filters and _typeFilter read the boolean syntax as searches do', async () => {
      const scoped = fhirClient(t, await t.tokenFor('t1', ['system/Condition.rs?_text=(bone+OR+liver)+metastases']));
      expect((await scoped.get('Condition/m1')).status).toBe(200);
      expect((await scoped.get('Condition/m2')).status).toBe(200);
      expect((await scoped.get('Condition/m3')).status).toBe(403);
      const bundle = await scoped.search('Condition?_text=bone');
      expect(bundle.entry.filter((e: Json) => e.search.mode === 'match').map((e: Json) => e.resource.id)).toEqual(['m1']);
      const token = await t.token();
      const filter = `Condition?_text=${encodeURIComponent('liver OR bone fracture')}`;
      const status = await kickOff(t, token, `/$export?_type=Condition&_typeFilter=${encodeURIComponent(filter)}`);
      expect(refs(await download(t, token, (await finish(t, token, status)).output))).toEqual(['Condition/m2', 'Condition/m3']);
    });

    test('bulk export: _typeFilter with _content and _text', async () => {
      const token = await t.token();
      const filters = [`Observation?_content=${encodeURIComponent('glucose blood')}`, 'Condition?_text=gestational,diabetes', 'Patient?_content=zurich'];
      const status = await kickOff(t, token, `/$export?_type=Observation,Condition,Patient&_typeFilter=${filters.map(encodeURIComponent).join(',')}`);
      const manifest = await finish(t, token, status);
      // Conditions have no narrative: `_text` finds none of them.
      expect(refs(await download(t, token, manifest.output))).toEqual(['Observation/o1', 'Observation/o2', 'Patient/p1']);
    });

    test('errors: modifiers, values without words, sorting, _text on a type without a narrative', async () => {
      const refused = async (query: string, expression: string, headers?: Record<string, string>) => {
        const outcome = await expectOutcome(await api.get(query, headers), 400);
        expect(outcome.issue[0].expression).toEqual([expression]);
      };
      await refused('Observation?_content:exact=glucose', '_content:exact');
      await refused('Observation?_content=%2A%2A%2A', '_content');
      await refused('Observation?_text=a,', '_text');
      await refused('Observation?_sort=_content', '_sort');
      await refused('Binary?_text=x', '_text', { Prefer: 'handling=strict' });
      expect((await api.search('Binary?_content=x')).resourceType).toBe('Bundle');
    });

    test('the core CodeSystems and ValueSets are searched by their content too (they carry no narrative)', async () => {
      expect(await found('ValueSet?_content=administrative%20gender')).toEqual(['administrative-gender']);
      expect(await found('CodeSystem?_content=administrative%20gender&_id=administrative-gender,observation-status')).toEqual(['administrative-gender']);
      expect(await found('ValueSet?_text=gender')).toEqual([]);
    });

    test('the CapabilityStatement lists _text and _content', async () => {
      const cs = (await (await api.get('metadata')).json()) as Json;
      const resource = (type: string) => cs.rest[0].resource.find((r: Json) => r.type === type);
      const names = (type: string) => resource(type).searchParam.map((p: Json) => p.name);
      expect(names('Observation')).toEqual(expect.arrayContaining(['_text', '_content']));
      expect(names('Binary')).toContain('_content');
      expect(names('Binary')).not.toContain('_text');
      expect(resource('Observation').searchParam.find((p: Json) => p.name === '_text').definition).toBe('http://hl7.org/fhir/SearchParameter/DomainResource-text');
    });
  });
});

/**
 * The databases' full-text indexes against the in-memory definition (text-index.ts, which scope filters
 * and bulk export's history reads use): on generated patient records, words and prefixes taken from
 * the data, alone and in pairs, answered through the REST API and by textMatches over every resource.
 */
const GENERATED = [...generatePatients({ patients: 6, seed: 'full-text' })] as Json[];

function sampleQueries(): { type: string; query: string; terms: TextTerm[][] }[] {
  const out: { type: string; query: string; terms: TextTerm[][] }[] = [];
  const seen = new Set<string>();
  for (const r of GENERATED.filter((_, i) => i % 7 === 0)) {
    const words = textIndexOf(r)!.content.split(' ');
    const a = words[Math.floor(words.length / 3)]!;
    const b = words[words.length - 1]!;
    const c = words[0]!;
    const candidates: [string, TextTerm[][]][] = [
      [a, [[{ word: a, prefix: false }]]],
      [`${a} ${b}`, [[{ word: a, prefix: false }, { word: b, prefix: false }]]],
      [`${b.slice(0, 3)}*`, [[{ word: b.slice(0, 3), prefix: true }]]],
      [`${a},${b}`, [[{ word: a, prefix: false }], [{ word: b, prefix: false }]]],
      [`${a} OR ${c}`, [[{ word: a, prefix: false }], [{ word: c, prefix: false }]]],
      [`(${a} or ${c}) ${b}`, [[{ word: a, prefix: false }, { word: b, prefix: false }], [{ word: c, prefix: false }, { word: b, prefix: false }]]],
    ];
    for (const [query, terms] of candidates) {
      const key = `${r.resourceType}?${query}`;
      if (!seen.has(key)) seen.add(key), out.push({ type: r.resourceType as string, query, terms });
    }
  }
  return out;
}

await eachStore((kind, fresh) => {
  describe(`full-text search on ${kind}, against the in-memory definition`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await t.store.resources.write('t1', async (w) => {
        await w.insertNew(firstVersions(GENERATED));
      });
    });
    afterAll(() => t.close());

    test('every sampled query finds exactly the resources whose words match', async () => {
      const queries = sampleQueries();
      expect(queries.length).toBeGreaterThan(40);
      const disagreements: string[] = [];
      let nonEmpty = 0;
      for (const { type, query, terms } of queries) {
        const expected = GENERATED.filter((r) => r.resourceType === type && terms.some((v) => textMatches(textIndexOf(r)?.content ?? '', v))).map((r) => r.id as string).sort();
        const bundle = await api.search(`${type}?_content=${encodeURIComponent(query)}&_count=1000&_total=accurate`);
        const got = (bundle.entry ?? []).map((e: Json) => e.resource.id as string).sort();
        if (JSON.stringify(got) !== JSON.stringify(expected) || bundle.total !== expected.length) disagreements.push(`${type}?_content=${query}: ${got.length} (total ${bundle.total}) != ${expected.length}`);
        if (expected.length) nonEmpty++;
      }
      expect(disagreements).toEqual([]);
      expect(nonEmpty).toBe(queries.length);
    });
  });
});
