/**
 * `_filter` (FHIR R4 search_filter.html, src/fhir/search-filter.ts) on both databases. Each test of a
 * filter has a plain search that means the same (`gender ne female` is `gender:not=female`), so random
 * `and` / `or` / `not` expressions over those tests are checked against the set algebra of the plain
 * searches' answers; what no plain search expresses (`eq` and `ew` on strings, `po` on dates) is
 * checked against the test's own evaluation of the stored resources. Then chains with a target filter,
 * value sets and subsumption inside logic, paging, and the 400s a malformed or unsupported filter gets.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { generatePatients } from '../../bench/lib/generator.ts';
import type { TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';
import { prng } from '../helpers/prng.ts';

const DATA = [...generatePatients({ patients: 8, seed: 'filter' })] as Json[];
const CLIN = 'http://terminology.hl7.org/CodeSystem/condition-clinical';
const GENDERS = 'http://hl7.org/fhir/ValueSet/administrative-gender';

/** Patients whose family names differ in case, accents and what surrounds "peter". */
const NAMED: Json[] = [
  { resourceType: 'Patient', id: 'f-peter', gender: 'male', name: [{ family: 'Peter', given: ['Anna'] }] },
  { resourceType: 'Patient', id: 'f-peterson', gender: 'female', name: [{ family: 'Peterson', given: ['Bo'] }] },
  { resourceType: 'Patient', id: 'f-saint', gender: 'other', name: [{ family: 'Saint-Péter', given: ['Cy'] }] },
  { resourceType: 'Patient', id: 'f-upper', name: [{ family: 'PETER', given: ['Di, Jr.'] }] },
  { resourceType: 'Patient', id: 'f-none', name: [{ given: ['Eve'] }] },
];

/** Encounters over months, so that overlapping (`po`) and lying within (`eq`) a month differ. */
const LONG: Json[] = [
  { resourceType: 'Encounter', id: 'f-jan-feb', status: 'finished', class: { code: 'IMP' }, period: { start: '2018-01-20T10:00:00Z', end: '2018-02-10T10:00:00Z' } },
  { resourceType: 'Encounter', id: 'f-feb', status: 'finished', class: { code: 'IMP' }, period: { start: '2018-02-03T10:00:00Z', end: '2018-02-04T10:00:00Z' } },
  { resourceType: 'Encounter', id: 'f-open', status: 'in-progress', class: { code: 'IMP' }, period: { start: '2017-12-30T10:00:00Z' } },
  // With no encounter, and no subject: a chain through either reaches nothing.
  { resourceType: 'Observation', id: 'f-alone', status: 'final', code: { text: 'note' } },
];

/** A filter test and the plain search query meaning the same. */
type Atom = [filter: string, plain: string];

const fold = (s: string) => s.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase();

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`_filter on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const found = async (query: string): Promise<string[]> => ((await api.search(`${query}${query.includes('?') ? '&' : '?'}_count=1000`)).entry ?? [])
      .filter((e: Json) => e.search.mode === 'match').map((e: Json) => e.resource.id as string).sort();
    const filtered = (type: string, filter: string) => found(`${type}?_filter=${encodeURIComponent(filter)}`);
    const resources = async (type: string): Promise<Json[]> => ((await api.search(`${type}?_count=1000`)).entry ?? []).map((e: Json) => e.resource as Json);
    const patient = DATA.find((r) => r.resourceType === 'Patient')!;
    const practitioner = patient.generalPractitioner[0].reference as string;

    const ATOMS: Record<string, Atom[]> = {
      Patient: [
        ['gender eq female', 'gender=female'],
        // `ne`: a gender, not female (search_filter.html: "An item in the set has an unequal value").
        ['gender ne female', 'gender:missing=false&gender:not=female'],
        ['birthdate ge 1970', 'birthdate=ge1970'],
        ['birthdate lt 1990-06-15', 'birthdate=lt1990-06-15'],
        ['family sw "pet"', 'family=pet'],
        ['name co "er"', 'name:contains=er'],
        ['family pr false', 'family:missing=true'],
        [`_id eq ${patient.id}`, `_id=${patient.id}`],
        [`general-practitioner re ${practitioner}`, `general-practitioner=${practitioner}`],
        [`gender in ${GENDERS}`, `gender:in=${GENDERS}`],
      ],
      Observation: [
        ['code eq loinc|29463-7', 'code=http://loinc.org|29463-7'],
        ['category eq vital-signs', 'category=vital-signs'],
        ['date ge 2018', 'date=ge2018'],
        ['date eb 2016-06', 'date=eb2016-06'],
        ['value-quantity gt 80', 'value-quantity=gt80'],
        [`subject re Patient/${patient.id}`, `subject=Patient/${patient.id}`],
        ['subject.gender eq male', 'subject:Patient.gender=male'],
        ['subject.birthdate lt 1960', 'subject:Patient.birthdate=lt1960'],
        ['encounter.class eq AMB', 'encounter.class=AMB'],
        ['value-quantity pr false', 'value-quantity:missing=true'],
      ],
      Condition: [
        ['clinical-status eq active', 'clinical-status=active'],
        [`clinical-status ss ${CLIN}|inactive`, `clinical-status:below=${CLIN}|inactive`],
        [`clinical-status sb ${CLIN}|relapse`, `clinical-status:above=${CLIN}|relapse`],
        ['onset-date ge 2015', 'onset-date=ge2015'],
        ['patient.gender eq male', 'patient.gender=male'],
      ],
    };

    beforeAll(async () => {
      ({ t, api } = await appOnFresh(target));
      const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [...DATA, ...NAMED, ...LONG].map((resource) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } })) });
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).entry.every((e: Json) => e.response.status.startsWith('20'))).toBe(true);
    }, 60_000);
    afterAll(() => t.close());

    test('each test means its plain search, and matches something', async () => {
      for (const [type, atoms] of Object.entries(ATOMS)) {
        for (const [filter, plain] of atoms) {
          const expected = await found(`${type}?${plain}`);
          expect({ filter, ids: await filtered(type, filter) }).toEqual({ filter, ids: expected });
        }
      }
      expect((await found('Patient?gender=female')).length).toBeGreaterThan(0);
      expect((await found('Observation?subject:Patient.birthdate=lt1960')).length).toBeGreaterThan(0);
      expect((await found('Condition?clinical-status=active')).length).toBeGreaterThan(0);
    });

    test('random and / or / not expressions equal the set algebra of the plain searches', async () => {
      const next = prng(20261126);
      for (const [type, atoms] of Object.entries(ATOMS)) {
        const all = new Set(await found(type));
        const answers = new Map<string, Set<string>>();
        for (const [filter, plain] of atoms) answers.set(filter, new Set(await found(`${type}?${plain}`)));
        /** An expression of `depth` levels and its expected answer. */
        const expression = (depth: number): [string, Set<string>] => {
          const r = next();
          if (depth === 0 || r < 0.3) {
            const [filter] = atoms[Math.floor(next() * atoms.length)]!;
            return [filter, answers.get(filter)!];
          }
          if (r < 0.45) {
            const [inner, set] = expression(depth - 1);
            return [`not (${inner})`, new Set([...all].filter((id) => !set.has(id)))];
          }
          const [a, sa] = expression(depth - 1);
          const [b, sb] = expression(depth - 1);
          const and = r < 0.75;
          const set = and ? new Set([...sa].filter((id) => sb.has(id))) : new Set([...sa, ...sb]);
          return [`(${a}) ${and ? 'and' : 'or'} (${b})`, set];
        };
        for (let i = 0; i < 25; i++) {
          const [filter, set] = expression(3);
          expect({ filter, ids: await filtered(type, filter) }).toEqual({ filter, ids: [...set].sort() });
        }
      }
    });

    test('and / or join left to right, without precedence; keywords and operations in any case', async () => {
      const [a, b, c] = await Promise.all(['gender=female', 'birthdate=ge1970', 'family=pet'].map((q) => found(`Patient?${q}`)));
      const leftToRight = [...new Set([...a!, ...b!])].filter((id) => c!.includes(id)).sort();
      expect(await filtered('Patient', 'gender eq female or birthdate ge 1970 and family sw pet')).toEqual(leftToRight);
      expect(await filtered('Patient', 'gender EQ female OR birthdate GE 1970 AND family SW pet')).toEqual(leftToRight);
      const grouped = [...new Set([...a!, ...b!.filter((id) => c!.includes(id))])].sort();
      expect(await filtered('Patient', 'gender eq female or (birthdate ge 1970 and family sw pet)')).toEqual(grouped);
      expect(grouped).not.toEqual(leftToRight);
      expect(await filtered('Patient', 'NOT(gender eq female)')).toEqual(await found('Patient?gender:not=female'));
    });

    test('strings: eq the whole value and ew its end, case- and accent-insensitive; ne is a value unequal to it', async () => {
      const patients = await resources('Patient');
      const families = (p: Json) => (p.name ?? []).map((n: Json) => fold(n.family ?? '')).filter(Boolean) as string[];
      const where = (test: (f: string) => boolean) => patients.filter((p) => families(p).some(test)).map((p) => p.id as string).sort();
      expect(await filtered('Patient', 'family eq "peter"')).toEqual(where((f) => f === 'peter'));
      expect(await filtered('Patient', 'family eq "peter"')).toEqual(['f-peter', 'f-upper']);
      expect(await filtered('Patient', 'family eq PÉTER')).toEqual(['f-peter', 'f-upper']);
      expect(await filtered('Patient', 'family ew "PETER"')).toEqual(where((f) => f.endsWith('peter')));
      expect(await filtered('Patient', 'family ew "PETER"')).toEqual(['f-peter', 'f-saint', 'f-upper']);
      // An unequal family name, which a patient without one has not (search_filter.html: "An item in the set has an unequal value").
      expect(await filtered('Patient', 'family ne "peter"')).toEqual(where((f) => f !== 'peter'));
      expect(await filtered('Patient', 'family ne "peter"')).toEqual(expect.arrayContaining(['f-peterson', 'f-saint']));
      expect(await filtered('Patient', 'family ne "PETER"')).not.toContain('f-none');
      // A JSON string keeps its commas, quotes and spaces as one value.
      expect(await filtered('Patient', 'given eq "Di, Jr."')).toEqual(['f-upper']);
      expect(await filtered('Patient', 'given eq "di, jr." or given eq "\\u0041nna"')).toEqual(['f-peter', 'f-upper']);
      // `sw` and `co` are the plain search's default and :contains.
      expect(await filtered('Patient', 'family sw Saint-P')).toEqual(['f-saint']);
      expect(await filtered('Patient', 'family co "nt-pe"')).toEqual(['f-saint']);
    });

    test('dates: po overlaps the value\'s period, eq lies within it', async () => {
      const encounters = await resources('Encounter');
      const overlaps = (from: string, to: string) => encounters.filter((e) => {
        const lo = Date.parse(e.period?.start ?? '0000-01-01T00:00:00Z');
        const hi = e.period?.end ? Date.parse(e.period.end) + 1000 : Infinity;
        return lo < Date.parse(to) && hi > Date.parse(from);
      }).map((e) => e.id as string).sort();
      const feb = await filtered('Encounter', 'date po 2018-02');
      expect(feb).toEqual(overlaps('2018-02-01T00:00:00Z', '2018-03-01T00:00:00Z'));
      expect(feb).toEqual(expect.arrayContaining(['f-jan-feb', 'f-feb', 'f-open']));
      expect(await filtered('Encounter', 'date eq 2018-02')).toEqual(await found('Encounter?date=2018-02'));
      expect(await found('Encounter?date=2018-02')).not.toContain('f-jan-feb');
      expect(await filtered('Encounter', 'date po 2018-02-03T12:00:00Z')).toEqual(overlaps('2018-02-03T12:00:00Z', '2018-02-03T12:00:01Z'));
      expect(await filtered('Encounter', 'date po 2016')).toEqual(overlaps('2016-01-01T00:00:00Z', '2017-01-01T00:00:00Z'));
      // `_lastUpdated` takes the date operations too.
      expect((await filtered('Encounter', '_lastUpdated po 2000-01-01 or _lastUpdated lt 2000')).length).toBe(0);
      expect(await filtered('Encounter', '_lastUpdated gt 2000')).toEqual(encounters.map((e) => e.id as string).sort());
    });

    test('a path through a reference is a chain; [filter] is a condition on the target', async () => {
      const [female, old, amb, male] = await Promise.all([
        'subject:Patient.gender=female', 'subject:Patient.birthdate=lt1990', 'encounter:Encounter.class=AMB', 'encounter.subject:Patient.gender=male',
      ].map((q) => found(`Observation?${q}`)));
      expect(await filtered('Observation', 'subject[gender eq female].birthdate lt 1990')).toEqual(female!.filter((id) => old!.includes(id)));
      expect(await filtered('Observation', 'encounter[class eq AMB].subject.gender eq male')).toEqual(amb!.filter((id) => male!.includes(id)));
      expect(await filtered('Observation', 'encounter[class eq AMB and not (status eq finished)].subject.gender eq male')).toEqual([]);
      expect(await filtered('Observation', 'subject[gender eq female or gender eq male].birthdate lt 1990')).toEqual(old);
      // `pr false` through a chain: the path reaches no value, also where there is no reference at all.
      const withoutEncounter = await found('Observation?encounter:missing=true');
      expect(withoutEncounter.length).toBeGreaterThan(0);
      expect(await filtered('Observation', 'encounter.status pr false')).toEqual(withoutEncounter);
      expect(await filtered('Observation', 'subject.gender pr false')).toEqual(await found('Observation?_filter=not%20(subject.gender%20pr%20true)'));
    });

    test('value sets and subsumption inside or and not', async () => {
      const everyone = await found('Patient');
      expect(await filtered('Patient', `not (gender in ${GENDERS})`)).toEqual(await found('Patient?gender:missing=true'));
      expect(await filtered('Patient', `gender ni ${GENDERS}`)).toEqual(await found(`Patient?gender:not-in=${GENDERS}`));
      const gendered = await found(`Patient?gender:in=${GENDERS}`);
      const unnamed = await found('Patient?family:missing=true');
      expect(await filtered('Patient', `gender in ${GENDERS} or family pr false`)).toEqual([...new Set([...gendered, ...unnamed])].sort());
      // f-upper has a family name and no gender.
      expect(everyone.filter((id) => !gendered.includes(id) && !unnamed.includes(id))).toEqual(['f-upper']);
      const inactive = await found(`Condition?clinical-status:below=${CLIN}|inactive`);
      const active = await found('Condition?clinical-status=active');
      expect(inactive.length).toBeGreaterThan(0);
      expect(await filtered('Condition', `clinical-status eq active or clinical-status ss ${CLIN}|inactive`)).toEqual([...active, ...inactive].sort());
      const unknown = await expectOutcome(await api.get(`Patient?_filter=${encodeURIComponent('gender eq male or gender in http://example.org/nope')}`), 400);
      expect(unknown.issue[0].expression).toEqual(['_filter']);
    });

    test('with the other parameters, sorted and paged; repeated _filter parameters AND', async () => {
      const both = await found('Observation?category=vital-signs&date=ge2018');
      expect(await found(`Observation?category=vital-signs&_filter=${encodeURIComponent('date ge 2018')}`)).toEqual(both);
      expect(await found(`Observation?_filter=${encodeURIComponent('category eq vital-signs')}&_filter=${encodeURIComponent('date ge 2018')}`)).toEqual(both);
      const plain = await matchesOfAllPages(api, 'Observation?category=vital-signs&date=ge2018&_sort=-date,_id&_count=7');
      expect(plain.length).toBeGreaterThan(7);
      expect(await matchesOfAllPages(api, `Observation?_filter=${encodeURIComponent('category eq vital-signs and date ge 2018')}&_sort=-date,_id&_count=7`)).toEqual(plain);
      const counted = await api.search(`Observation?_filter=${encodeURIComponent('category eq vital-signs and date ge 2018')}&_summary=count`);
      expect(counted.total).toBe(both.length);
      // An `or` of `and`s, which the server also drives by each alternative's subject (withImpliedDrivers).
      const [p1, p2] = DATA.filter((r) => r.resourceType === 'Patient').map((r) => r.id as string);
      const first = await found(`Observation?subject=Patient/${p1}&date=ge2018`);
      const second = await found(`Observation?subject=Patient/${p2}&category=vital-signs`);
      expect(first.length * second.length).toBeGreaterThan(0);
      const either = `(subject re Patient/${p1} and date ge 2018) or (subject re Patient/${p2} and category eq vital-signs)`;
      expect(await filtered('Observation', either)).toEqual([...first, ...second].sort());
      expect((await api.search(`Observation?_filter=${encodeURIComponent(either)}&_summary=count`)).total).toBe(first.length + second.length);
    });

    test('malformed or unsupported filters are a 400 naming _filter, under lenient handling too', async () => {
      const cases: [string, string, string][] = [
        ['name co', 'invalid', "a value after 'co'"],
        ['name xx "a"', 'invalid', 'unknown operation'],
        ['(name eq a', 'invalid', "expected ')'"],
        ['name eq a)', 'invalid', 'unexpected'],
        ['name eq "unterminated', 'invalid', 'string'],
        ['nonsense eq 1', 'invalid', "'nonsense' is not a search parameter of Patient"],
        ['gender co male', 'not-supported', "'co' is not supported on a token parameter"],
        ['general-practitioner co x', 'not-supported', "'co' is not supported on a reference parameter"],
        ['birthdate eq yesterday', 'invalid', 'not a date value'],
        ['birthdate eq 2000-13', 'invalid', 'Invalid date'],
        ['family pr maybe', 'invalid', "'pr' takes true or false"],
        ['general-practitioner[name eq x] eq y', 'invalid', "expected '.'"],
        ['gender.name eq x', 'invalid', 'not a reference'],
        ['name eq a and', 'invalid', 'expected a search parameter name'],
        ['name eqa', 'invalid', 'unknown operation'],
        [`${'('.repeat(40)}name eq a${')'.repeat(40)}`, 'too-costly', 'nested more than'],
        ['link.link.link.link.link.link.name eq a', 'too-costly', 'chains more than'],
      ];
      for (const [filter, code, text] of cases) {
        const body = await expectOutcome(await api.get(`Patient?_filter=${encodeURIComponent(filter)}`, { Prefer: 'handling=lenient' }), 400, code);
        expect({ filter, expression: body.issue[0].expression, text: body.issue[0].details.text }).toMatchObject({ filter, expression: ['_filter'], text: expect.stringContaining(text) });
        expect(body.issue[0].details.text).toStartWith('_filter: ');
      }
      await expectOutcome(await api.get(`Patient?_filter:exact=${encodeURIComponent('name eq a')}`), 400, 'invalid');
      // Long filters are answered, within the database's expression limits; beyond the values a search may carry, a 400,
      // and beyond the tests it may hold (100; ORed tests of one parameter are one test of several values).
      const ored = Array.from({ length: 300 }, (_, i) => `family eq "n${i}"`).join(' or ');
      expect(await filtered('Patient', `${ored} or family eq peter`)).toEqual(['f-peter', 'f-upper']);
      const anded = (n: number) => Array.from({ length: n }, (_, i) => `family ne "n${i}"`).join(' and ');
      expect(await filtered('Patient', `${anded(99)} and family eq peter`)).toEqual(['f-peter', 'f-upper']);
      const tooMany = await expectOutcome(await api.get(`Patient?_filter=${encodeURIComponent(`${anded(300)} and family eq peter`)}`), 400, 'too-costly');
      expect(tooMany.issue[0].details.text).toContain('The search has 301 tests');
      const nested = `${'not ('.repeat(30)}family eq peter${')'.repeat(30)}`;
      expect(await filtered('Patient', nested)).toEqual(['f-peter', 'f-upper']);
      const tooLong = Array.from({ length: 1100 }, (_, i) => `_id eq n${i}`).join(' or ');
      const refused = await expectOutcome(await api.get(`Patient?_filter=${encodeURIComponent(tooLong)}`), 400, 'too-costly');
      expect(refused.issue[0].details.text).toContain('longer than 8192 characters');
    });

    test('a SMART v2 scope filter may be a _filter: reads are judged by the in-memory matcher', async () => {
      const scope = `system/Patient.rs?_filter=${encodeURIComponent('family ew peter or (family eq "Peterson" and not (gender eq male))')}`;
      const token = await t.tokenFor('t1', ['system/Patient.rs'], scope);
      const scoped = fhirClient(t, token);
      for (const id of ['f-peter', 'f-saint', 'f-upper', 'f-peterson']) expect({ id, status: (await scoped.get(`Patient/${id}`)).status }).toEqual({ id, status: 200 });
      await expectOutcome(await scoped.get('Patient/f-none'), 403);
      await expectOutcome(await scoped.get(`Patient/${patient.id}`), 403);
      const searched = ((await scoped.search('Patient?_count=1000')).entry ?? []).map((e: Json) => e.resource.id as string).sort();
      expect(searched).toEqual(['f-peter', 'f-peterson', 'f-saint', 'f-upper']);
    });

    test('a path reaches the target types that have its parameters; only when none has them is it a 400', async () => {
      const glucose = { coding: [{ system: 'http://loinc.org', code: '2339-0' }] };
      await api.put200({ resourceType: 'Location', id: 'f-loc', name: 'Peter Street' });
      await api.put200({ resourceType: 'Observation', id: 'f-ob-peter', status: 'final', code: glucose, subject: { reference: 'Patient/f-peter' } });
      await api.put200({ resourceType: 'Observation', id: 'f-ob-loc', status: 'final', code: glucose, subject: { reference: 'Location/f-loc' } });
      // Observation.subject may be a Group, Device, Patient or Location; only Patients have a gender.
      const men = await filtered('Observation', 'subject[gender eq male].name co "pet"');
      expect(men).toEqual(await found('Observation?subject:Patient.gender=male&subject:Patient.name:contains=pet'));
      expect(men).toContain('f-ob-peter');
      expect(men).not.toContain('f-ob-loc');
      expect(await filtered('Observation', 'subject[gender eq male]._id eq f-peter')).toEqual(['f-ob-peter']);
      expect(await filtered('Observation', 'subject[name co "street"]._id eq f-loc')).toEqual(['f-ob-loc']);
      // A later step of the path likewise: an Encounter's subject is a Patient or a Group (an
      // Observation's encounter may be an EpisodeOfCare, which has no subject).
      const later = await filtered('Observation', 'encounter.subject[gender eq male]._lastUpdated gt 2000');
      expect(later).toEqual(await found('Observation?encounter.subject:Patient.gender=male'));
      expect(later.length).toBeGreaterThan(0);
      for (const [filter, text] of [
        ['subject[nonsense eq 1].name co "pet"', "'nonsense' is not a search parameter of Group or Device or Patient or Location; 'name' is not a search parameter of Group or Device"],
        ['subject[gender eq male].nonsense eq 1', "'nonsense' is not a search parameter of Group or Device or Patient or Location; 'gender' is not a search parameter of Group or Device or Location"],
        ['encounter.subject[nonsense eq 1]._id eq x', "'nonsense' is not a search parameter of Group or Patient; 'subject' is not a search parameter of EpisodeOfCare"],
      ]) {
        const body = await expectOutcome(await api.get(`Observation?_filter=${encodeURIComponent(filter!)}`), 400, 'invalid');
        expect({ filter, expression: body.issue[0].expression, text: body.issue[0].details.text }).toEqual({ filter, expression: ['_filter'], text: `_filter: ${text}` });
      }
    });

    test('ucum| names the unit system of a quantity, also in a composite', async () => {
      const glucose = { coding: [{ system: 'http://loinc.org', code: '2339-0' }] };
      const ucum = 'http://unitsofmeasure.org';
      await api.put200({ resourceType: 'Observation', id: 'f-mg', status: 'final', code: glucose, valueQuantity: { value: 5.4, unit: 'mg', system: ucum, code: 'mg' } });
      await api.put200({ resourceType: 'Observation', id: 'f-ug', status: 'final', code: glucose, valueQuantity: { value: 5400, unit: 'ug', system: ucum, code: 'ug' } });
      const mg = await found(`Observation?value-quantity=5.4|${ucum}|mg`);
      expect(mg).toEqual(expect.arrayContaining(['f-mg', 'f-ug']));
      expect(await filtered('Observation', 'value-quantity eq 5.4|ucum|mg')).toEqual(mg);
      expect(await filtered('Observation', 'value-quantity ge 5.4|ucum|mg')).toEqual(await found(`Observation?value-quantity=ge5.4|${ucum}|mg`));
      const coded = await found(`Observation?code-value-quantity=http://loinc.org|2339-0$5.4|${ucum}|mg`);
      expect(coded).toEqual(['f-mg', 'f-ug']);
      expect(await filtered('Observation', 'code-value-quantity eq loinc|2339-0$5.4|ucum|mg')).toEqual(coded);
      expect(await filtered('Observation', 'combo-code-value-quantity eq loinc|2339-0$5.4|ucum|mg')).toEqual(coded);
    });

    test('the CapabilityStatement lists _filter on every type', async () => {
      const cs = (await (await t.request(`${api.base}/metadata`)).json()) as Json;
      const resources = cs.rest[0].resource as Json[];
      for (const type of ['Patient', 'Observation', 'Condition']) {
        const r = resources.find((x) => x.type === type)!;
        expect(r.searchParam.find((p: Json) => p.name === '_filter')).toMatchObject({ type: 'special' });
      }
    });
  });
}
