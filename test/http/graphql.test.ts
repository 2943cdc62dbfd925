/**
 * FHIR R4 `$graphql` (graphql.html), read-only, on both databases: transport (GET, POST JSON, POST
 * application/graphql), reads, lists with search arguments (the same ids as the REST search),
 * Connections, reference resolution (batched), reverse references, variables, fragments,
 * introspection, instance level, errors and limits, and a token's reach (patient compartment, scope filters).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { getIntrospectionQuery } from 'graphql';
import { StoreUnavailableError } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, searchIds, type FhirClient, type Json } from '../helpers/fhir.ts';

const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';

await eachStore((kind, fresh) => {
  describe(`$graphql (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    /** POSTs `{query, variables, operationName}` and returns status and body. */
    const gql = async (query: string, variables?: Json, client = api, path = '$graphql', operationName?: string) => {
      const res = await client.post(path, JSON.stringify({ query, ...(variables ? { variables } : {}), ...(operationName ? { operationName } : {}) }), { 'Content-Type': 'application/json' });
      return { status: res.status, type: res.headers.get('content-type'), body: (await res.json()) as Json };
    };
    /** The data of a query that must succeed without errors. */
    const data = async (query: string, variables?: Json, client = api) => {
      const r = await gql(query, variables, client);
      expect({ status: r.status, errors: r.body.errors }).toEqual({ status: 200, errors: undefined });
      return r.body.data as Json;
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Practitioner', id: 'dr', name: [{ family: 'House' }] });
      await api.put200({
        resourceType: 'Patient', id: 'p1', gender: 'female', birthDate: '1980-02-03', active: true,
        _birthDate: { extension: [{ url: 'http://example.org/precision', valueString: 'day' }] },
        name: [{ family: 'Smith', given: ['Ann'] }], address: [{ city: 'Springfield' }], generalPractitioner: [{ reference: 'Practitioner/dr' }],
      });
      await api.put200({ resourceType: 'Patient', id: 'p2', gender: 'male', birthDate: '1990-05-06', name: [{ family: 'Smithers' }], address: [{ city: 'Shelbyville' }] });
      await api.put200({ resourceType: 'Patient', id: 'p3', gender: 'male', birthDate: '1970-01-01', name: [{ family: 'Jones' }], address: [{ city: 'Springfield' }] });
      for (let i = 0; i < 12; i++) {
        const subject = ['p1', 'p2', 'p3'][i % 3]!;
        await api.put200({
          resourceType: 'Observation', id: `o${i}`, status: 'final', subject: { reference: `Patient/${subject}` },
          // Heart rates (R4's heartrate profile: vital signs, a time, a UCUM unit), half of them laboratory results too.
          category: [{ coding: [{ system: CAT, code: 'vital-signs' }] }, ...(i % 2 ? [] : [{ coding: [{ system: CAT, code: 'laboratory' }] }])],
          code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] }, effectiveDateTime: '2024-03-01',
          valueQuantity: { value: 60 + i, unit: '/min', system: 'http://unitsofmeasure.org', code: '/min' },
          performer: [{ reference: 'Practitioner/dr' }],
        });
      }
      await api.put200({ resourceType: 'Observation', id: 'link', status: 'final', code: { text: 'x' }, performer: [{ reference: 'Patient/p1' }], focus: [{ reference: 'Patient/p2' }, { reference: 'Patient/p1' }] });
      await api.put200({ resourceType: 'Observation', id: 'ghost', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/ghost' } });
      await api.put200({
        resourceType: 'Observation', id: 'contained', status: 'final', code: { text: 'x' },
        contained: [{ resourceType: 'Patient', id: 'c1', name: [{ family: 'Inside' }] }], subject: { reference: '#c1' },
      });
    });
    afterAll(() => t.close());

    test('a read: fields by their JSON names, choice types by type, primitive extensions as _name', async () => {
      const r = await gql('{ Patient(id: "p1") { resourceType id gender birthDate _birthDate { extension { url valueString } } name { family given } } Observation(id: "o1") { valueQuantity { value unit } valueString } }');
      expect(r.status).toBe(200);
      expect(r.type).toStartWith('application/json');
      expect(r.body).toEqual({
        data: {
          Patient: {
            resourceType: 'Patient', id: 'p1', gender: 'female', birthDate: '1980-02-03',
            _birthDate: { extension: [{ url: 'http://example.org/precision', valueString: 'day' }] }, name: [{ family: 'Smith', given: ['Ann'] }],
          },
          Observation: { valueQuantity: { value: 61, unit: '/min' }, valueString: null },
        },
      });
    });

    test('GET with ?query= and POST application/graphql answer as POST application/json does', async () => {
      const q = '{ Patient(id: "p2") { id gender } }';
      const expected = { data: { Patient: { id: 'p2', gender: 'male' } } };
      const get = await api.get(`$graphql?query=${encodeURIComponent(q)}`);
      expect(get.status).toBe(200);
      expect(await get.json()).toEqual(expected);
      const raw = await api.post('$graphql', q, { 'Content-Type': 'application/graphql' });
      expect(raw.status).toBe(200);
      expect(await raw.json()).toEqual(expected);
      const vars = await api.get(`$graphql?query=${encodeURIComponent('query Q($id: ID!) { Patient(id: $id) { id gender } }')}&variables=${encodeURIComponent('{"id":"p2"}')}`);
      expect(await vars.json()).toEqual(expected);
    });

    test('{Type}List takes the search parameters as arguments and finds what the REST search finds', async () => {
      const cases: [Json, string][] = [
        [{ name: 'smith' }, 'name=smith'],
        [{ gender: 'male' }, 'gender=male'],
        [{ address_city: 'Springfield' }, 'address-city=Springfield'],
        [{ birthdate: 'ge1975-01-01' }, 'birthdate=ge1975-01-01'],
        [{ _id: 'p1,p3' }, '_id=p1,p3'],
        [{ _filter: 'gender eq male and name co "ones"' }, `_filter=${encodeURIComponent('gender eq male and name co "ones"')}`],
      ];
      for (const [args, query] of cases) {
        const d = await data('query L($name: String, $gender: String, $address_city: String, $birthdate: String, $_id: String, $_filter: String) { PatientList(name: $name, gender: $gender, address_city: $address_city, birthdate: $birthdate, _id: $_id, _filter: $_filter) { id } }', args);
        const ids = (d.PatientList as Json[]).map((p) => p.id).sort();
        expect({ args, ids }).toEqual({ args, ids: await searchIds(api, `Patient?${query}`) });
        expect(ids.length).toBeGreaterThan(0);
      }
      const obs = await data('{ ObservationList(subject: "Patient/p1", category: "laboratory", _sort: "_id") { id } }');
      expect((obs.ObservationList as Json[]).map((o) => o.id)).toEqual(['o0', 'o6']);
      const paged = await data('{ ObservationList(code: "8867-4", _count: 5, _offset: 5, _sort: "_id") { id } }');
      expect((paged.ObservationList as Json[]).map((o) => o.id)).toEqual(await searchIds(api, 'Observation?code=8867-4&_count=5&_offset=5&_sort=_id'));
      expect(paged.ObservationList).toHaveLength(5);
    });

    test('a search argument takes several values, ANDed as a repeated REST parameter; a single value and a String variable as before', async () => {
      const ids = (d: Json, field = 'PatientList') => (d[field] as Json[]).map((p) => p.id).sort();
      const two = await data('{ PatientList(birthdate: ["ge1975", "lt1985"]) { id } }');
      expect(ids(two)).toEqual(await searchIds(api, 'Patient?birthdate=ge1975&birthdate=lt1985'));
      expect(ids(two)).toEqual(['p1']);
      // One literal value is a one-item list (GraphQL input coercion).
      expect(ids(await data('{ PatientList(birthdate: "ge1975") { id } }'))).toEqual(['p1', 'p2']);
      // A variable: String (as clients of a String argument declare it), [String] with a list or one value, items as variables.
      expect(ids(await data('query Q($b: String) { PatientList(birthdate: $b) { id } }', { b: 'lt1975' }))).toEqual(['p3']);
      expect(ids(await data('query Q($b: String!) { PatientList(birthdate: $b) { id } }', { b: 'lt1975' }))).toEqual(['p3']);
      expect(ids(await data('query Q($b: [String]) { PatientList(birthdate: $b) { id } }', { b: ['ge1975', 'lt1985'] }))).toEqual(['p1']);
      expect(ids(await data('query Q($b: [String]) { PatientList(birthdate: $b) { id } }', { b: 'lt1975' }))).toEqual(['p3']);
      expect(ids(await data('query Q($a: String, $b: String) { PatientList(birthdate: [$a, $b]) { id } }', { a: 'ge1975', b: 'lt1985' }))).toEqual(['p1']);
      // The Connection and a reverse reference's _lastUpdated the same way.
      const conn = await data('{ PatientConnection(address_city: ["Springfield"], gender: ["male", "male"]) { count edges { resource { id } } } }');
      expect((conn.PatientConnection as Json).edges.map((e: Json) => e.resource.id)).toEqual(['p3']);
      const reverse = await data('{ Patient(id: "p1") { ObservationList(_reference: subject, _lastUpdated: ["ge2000-01-01", "lt2999-01-01"], _sort: "_id") { id } } }');
      expect(((reverse.Patient as Json).ObservationList as Json[]).map((o) => o.id)).toEqual(await searchIds(api, 'Observation?subject=Patient/p1'));
      // A variable of another type is still refused, and so is a list where one value is taken.
      for (const [q, v] of [['query Q($b: Int) { PatientList(birthdate: $b) { id } }', { b: 1 }], ['query Q($s: [String]) { PatientList(_sort: $s) { id } }', { s: ['_id'] }]] as const) {
        const r = await gql(q, v as Json);
        expect(r.body.data).toBeUndefined();
        expect(r.body.errors[0].message).toContain('used in position expecting type');
      }
      const arg = await data('{ __type(name: "Query") { fields { name args { name type { kind ofType { name } } } } } }');
      const patientList = ((arg.__type as Json).fields as Json[]).find((f) => f.name === 'PatientList')!;
      expect(patientList.args.find((a: Json) => a.name === 'birthdate').type).toEqual({ kind: 'LIST', ofType: { name: 'String' } });
      expect(patientList.args.find((a: Json) => a.name === '_filter').type).toEqual({ kind: 'SCALAR', ofType: null });
    });

    test('{Type}Connection pages with its cursors and counts', async () => {
      const first = await data('{ ObservationConnection(code: "8867-4", _count: 5) { count offset pagesize next edges { mode resource { id } } } }');
      const c = first.ObservationConnection as Json;
      expect(c.count).toBe(12);
      expect(c.offset).toBe(0);
      expect(c.pagesize).toBe(5);
      expect(c.edges[0].mode).toBe('match');
      expect(typeof c.next).toBe('string');
      const ids = c.edges.map((e: Json) => e.resource.id);
      const second = await data('query N($c: String) { ObservationConnection(code: "8867-4", _count: 5, _cursor: $c) { offset count edges { resource { id } } } }', { c: c.next });
      expect((second.ObservationConnection as Json).offset).toBeNull();
      expect((second.ObservationConnection as Json).count).toBe(12);
      const more = (second.ObservationConnection as Json).edges.map((e: Json) => e.resource.id);
      expect(more).toHaveLength(5);
      expect(more.filter((id: string) => ids.includes(id))).toEqual([]);
    });

    test("{Type}Connection: the page after the first has a `previous` cursor that gives the first page", async () => {
      for (let i = 0; i < 12; i++) await api.put200({ resourceType: 'Patient', id: `pg${i}`, name: [{ family: 'Pageling' }], birthDate: `19${50 + ((i * 7) % 12)}-01-01` });
      const q = 'query P($c: String) { PatientConnection(family: "Pageling", _count: 5, _sort: "birthdate", _cursor: $c) { previous next edges { resource { id birthDate } } } }';
      const at = async (c?: string) => (await data(q, c === undefined ? {} : { c })).PatientConnection as Json;
      const ids = (p: Json) => p.edges.map((e: Json) => e.resource.id as string);
      const first = await at();
      expect(first.previous).toBeNull();
      const second = await at(first.next);
      expect(typeof second.previous).toBe('string');
      const third = await at(second.next);
      expect(typeof third.previous).toBe('string');
      // Back from the second page is the first page (itself with no previous); back from the third, the second.
      const again = await at(second.previous);
      expect(ids(again)).toEqual(ids(first));
      expect(again.previous).toBeNull();
      expect(ids(await at(third.previous))).toEqual(ids(second));
      expect([...ids(first), ...ids(second), ...ids(third)]).toHaveLength(12);
      expect(first.edges.map((e: Json) => e.resource.birthDate)).toEqual(['1950-01-01', '1951-01-01', '1952-01-01', '1953-01-01', '1954-01-01']);
      expect(third.next).toBeNull();
      // A page asked by `_offset`: its previous is the page `_count` before, or the first page, as a cursor.
      const byOffset = 'query P($o: Int, $s: String) { PatientConnection(family: "Pageling", _count: 5, _sort: $s, _offset: $o) { previous edges { resource { id } } } }';
      const atOffset = async (o: number, s = 'birthdate') => (await data(byOffset, { o, s })).PatientConnection as Json;
      expect(ids(await at((await atOffset(5)).previous))).toEqual(ids(first));
      expect(ids(await at((await atOffset(7)).previous))).toEqual(ids(await atOffset(2)));
      // In id order pages go by the last row's id, not by offset: only the first page is known before one.
      const idOrder = 'query P($c: String) { PatientConnection(family: "Pageling", _count: 5, _sort: "_id", _cursor: $c) { previous edges { resource { id } } } }';
      expect(ids(await data(idOrder, { c: (await atOffset(3, '_id')).previous }).then((d) => d.PatientConnection as Json))).toEqual(ids(await atOffset(0, '_id')));
      expect((await atOffset(7, '_id')).previous).toBeNull();
    });

    test('a Reference resolves its resource, of a type asked for, contained ones too', async () => {
      const d = await data('{ Observation(id: "o0") { subject { reference resource { ... on Patient { id name { family } } } } performer { p: resource(type: "Patient") { ... on Patient { id } } d: resource(type: "Practitioner") { ... on Practitioner { name { family } } } } } c: Observation(id: "contained") { subject { resource { ... on Patient { name { family } } } } } }');
      expect(d).toEqual({
        Observation: { subject: { reference: 'Patient/p1', resource: { id: 'p1', name: [{ family: 'Smith' }] } }, performer: [{ p: null, d: { name: [{ family: 'House' }] } }] },
        c: { subject: { resource: { name: [{ family: 'Inside' }] } } },
      });
    });

    test("a resource within a resource (a Bundle's entry) resolves its #id references among its own contained resources", async () => {
      await api.put200({
        resourceType: 'Bundle', id: 'held', type: 'collection', entry: [{
          fullUrl: 'urn:uuid:4f3b7a1e-1c9b-4a53-9f1e-0d6a8f3b2c11',
          resource: {
            resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: '#c1' },
            contained: [{ resourceType: 'Patient', id: 'c1', name: [{ family: 'Held' }] }, { resourceType: 'Observation', id: 'c2', status: 'final', code: { text: 'y' }, subject: { reference: '#c1' } }],
            hasMember: [{ reference: '#c2' }],
          },
        }],
      });
      const d = await data('{ Bundle(id: "held") { entry { resource { ... on Observation { subject { resource { ... on Patient { name { family } } } } contained { ... on Observation { subject { resource { ... on Patient { id } } } } } } } } } }');
      expect(d).toEqual({ Bundle: { entry: [{ resource: { subject: { resource: { name: [{ family: 'Held' }] } }, contained: [{}, { subject: { resource: { id: 'c1' } } }] } }] } });
    });

    test('a decimal answers as it was stored: its precision and digits kept (datatypes.html), in lists, contained resources and Connections too', async () => {
      // Written as text: a JavaScript literal would already have lost them.
      const body = '{"resourceType":"Observation","id":"dec","status":"final","code":{"text":"x"},"valueQuantity":{"value":12345678901234567890.50,"unit":"g"},'
        + '"referenceRange":[{"low":{"value":1.50}},{"low":{"value":0.000000000000000000000000010}}],'
        + '"contained":[{"resourceType":"Observation","id":"in","status":"final","code":{"text":"y"},"valueQuantity":{"value":98.60}}],"hasMember":[{"reference":"#in"}]}';
      expect((await api.put('Observation/dec', body)).status).toBe(201);
      const r = await api.post('$graphql', JSON.stringify({ query: '{ Observation(id: "dec") { valueQuantity { v: value } referenceRange { low { value } } hasMember { resource { ... on Observation { valueQuantity { value } } } } } ObservationConnection(_id: "dec") { edges { score resource { valueQuantity { value } } } } }' }), { 'Content-Type': 'application/json' });
      expect(r.status).toBe(200);
      expect(await r.text()).toBe('{"data":{"Observation":{"valueQuantity":{"v":12345678901234567890.50},"referenceRange":[{"low":{"value":1.50}},{"low":{"value":0.000000000000000000000000010}}],'
        + '"hasMember":[{"resource":{"valueQuantity":{"value":98.60}}}]},"ObservationConnection":{"edges":[{"score":null,"resource":{"valueQuantity":{"value":12345678901234567890.50}}}]}}}');
      expect(await data('{ Observation(id: "o1") { valueQuantity { value } } }')).toEqual({ Observation: { valueQuantity: { value: 61 } } });
    });

    test("a list's references are read together, one query per type and level, not one read each", async () => {
      const repo = t.store.resources;
      const counts = { read: 0, search: 0 };
      const { read, search } = repo;
      repo.read = (...a) => (counts.read++, read.apply(repo, a));
      repo.search = (...a) => (counts.search++, search.apply(repo, a));
      try {
        const d = await data('{ ObservationList(code: "8867-4") { id subject { resource { ... on Patient { id generalPractitioner { resource { ... on Practitioner { id } } } } } } performer { resource { ... on Practitioner { id } } } } }');
        const list = d.ObservationList as Json[];
        expect(list).toHaveLength(12);
        for (const o of list) expect(o.performer[0].resource.id).toBe('dr');
        expect(list.find((o) => o.id === 'o0')!.subject.resource.generalPractitioner[0].resource.id).toBe('dr');
      } finally {
        repo.read = read;
        repo.search = search;
      }
      // The list; its subjects and performers (two types, one query each); the patients' practitioner was read already.
      expect(counts).toEqual({ read: 0, search: 3 });
    });

    test('reverse references: {Type}List(_reference: param) inside a resource', async () => {
      const d = await data('{ Patient(id: "p2") { id ObservationList(_reference: subject, _sort: "_id") { id } } Practitioner(id: "dr") { PatientList(_reference: general_practitioner) { id } } }');
      expect(d).toEqual({ Patient: { id: 'p2', ObservationList: [{ id: 'o1' }, { id: 'o10' }, { id: 'o4' }, { id: 'o7' }] }, Practitioner: { PatientList: [{ id: 'p1' }] } });
      const filtered = await data('{ PatientList(_id: "p1,p2", _sort: "_id") { id ObservationList(_reference: patient, _filter: "category eq laboratory", _sort: "_id") { id } } }');
      expect(filtered.PatientList).toEqual([{ id: 'p1', ObservationList: [{ id: 'o0' }, { id: 'o6' }] }, { id: 'p2', ObservationList: [{ id: 'o10' }, { id: 'o4' }] }]);
    });

    test('variables, fragments, aliases and operationName', async () => {
      const q = 'fragment P on Patient { id gender } query A($id: ID!) { a: Patient(id: $id) { ...P } b: Patient(id: "p3") { ...P } } query B { Patient(id: "p1") { id } }';
      const r = await gql(q, { id: 'p2' }, api, '$graphql', 'A');
      expect(r.body).toEqual({ data: { a: { id: 'p2', gender: 'male' }, b: { id: 'p3', gender: 'male' } } });
      const missing = await gql('query A($id: ID!) { Patient(id: $id) { id } }', {});
      expect(missing.status).toBe(200);
      expect(missing.body.errors[0].message).toContain('$id');
    });

    test("graphql.html's directives: @first, @singleton, @flatten, @slice", async () => {
      // @flatten on a value (no fields to put in its parent) is an error naming it; the value is kept, not dropped.
      const leaf = await gql('{ Patient(id: "p1") { id @flatten gender } }');
      expect(leaf.body).toEqual({ data: { Patient: { id: 'p1', gender: 'female' } }, errors: [{ message: '@flatten applies to an element with fields: id is a value', path: ['Patient', 'id'] }] });
      expect(await data('{ Patient(id: "p1") { name @first { family } id } }')).toEqual({ Patient: { name: { family: 'Smith' }, id: 'p1' } });
      expect(await data('{ Patient(id: "p1") { name @flatten { family given } } o: Observation(id: "o0") { subject @flatten { reference } } }')).toEqual({
        Patient: { family: ['Smith'], given: ['Ann'] }, o: { reference: 'Patient/p1' },
      });
      expect(await data('{ PatientList(_id: "p2") @singleton { id } none: PatientList(_id: "nobody") @first { id } }')).toEqual({ PatientList: { id: 'p2' }, none: null });
      const two = await gql('{ ObservationList(subject: "Patient/p1", _sort: "_id") @singleton { id } }');
      expect(two.body).toEqual({ data: { ObservationList: { id: 'o0' } }, errors: [{ message: '@singleton: ObservationList holds 4 items', path: ['ObservationList'] }] });
      // @slice: each item's fields (and theirs) named with '.' and what the FHIRPath path selects from the item, or its index.
      await api.put200({
        resourceType: 'Practitioner', id: 'sliced',
        name: [{ use: 'official', family: 'Chalmers', given: ['Peter', 'James'] }, { use: 'usual', given: ['Jim'] }, { use: 'maiden', family: 'Windsor', period: { end: '2002' } }],
      });
      expect(await data('{ Practitioner(id: "sliced") { id name @slice(path: "use") @flatten { given family } } }')).toEqual({
        Practitioner: { id: 'sliced', 'given.official': ['Peter', 'James'], 'family.official': ['Chalmers'], 'given.usual': ['Jim'], 'family.maiden': ['Windsor'] },
      });
      expect(await data('{ Practitioner(id: "sliced") { name @slice(path: "use") { family period { end } } } }')).toEqual({
        Practitioner: { name: [{ 'family.official': 'Chalmers', 'period.official': null }, { 'family.usual': null, 'period.usual': null }, { 'family.maiden': 'Windsor', 'period.maiden': { 'end.maiden': '2002' } }] },
      });
      expect(await data('query S($p: String!) { Practitioner(id: "sliced") { name @slice(path: $p) @flatten { given } } }', { p: '$index' })).toEqual({
        Practitioner: { 'given.0': ['Peter', 'James'], 'given.1': ['Jim'] },
      });
      // A variable left out takes its default value, as everywhere in GraphQL.
      expect(await data('query S($p: String = "use") { Practitioner(id: "sliced") { name @slice(path: $p) @flatten { family } } }')).toEqual({
        Practitioner: { 'family.official': ['Chalmers'], 'family.maiden': ['Windsor'] },
      });
      expect(await data('{ Practitioner(id: "sliced") { name @slice(path: "given.first() & \'-\' & use") @flatten { family } } }')).toEqual({
        Practitioner: { 'family.Peter-official': ['Chalmers'], 'family.-maiden': ['Windsor'] },
      });
      for (const [q, message] of [
        ['{ Practitioner(id: "sliced") { name @slice(path: "use") @first { family } } }', '@slice cannot be used with @first'],
        ['{ Practitioner(id: "sliced") { name @slice(path: "use.(") { family } } }', "@slice: the path 'use.(' cannot be evaluated"],
        ['{ PractitionerList(_id: "sliced") @slice(path: "id") { id } }', '@slice applies to the elements of a resource: PractitionerList is not one'],
        // A field that is no list: an error whatever the resource holds (an element, a primitive, nothing), not the field as if unsliced.
        ['{ Practitioner(id: "sliced") { id name { period @slice(path: "end") { end } } } }', '@slice applies to a repeating element (a list): period is not one'],
        ['{ Practitioner(id: "sliced") { gender @slice(path: "$index") } }', '@slice applies to a repeating element (a list): gender is not one'],
        ['{ Practitioner(id: "sliced") { birthDate @slice(path: "$index") } }', '@slice applies to a repeating element (a list): birthDate is not one'],
      ]) {
        const r = await gql(q!);
        expect(r.status).toBe(200);
        expect(r.body.errors[0].message).toContain(message!);
      }
      expect((await gql('{ Practitioner(id: "sliced") { name @slice { family } } }')).body.errors[0].message).toContain('argument "path" of type "String!" is required');
    });

    test('introspection describes the schema', async () => {
      const d = await data('{ __schema { queryType { name } } obs: __type(name: "Observation") { fields { name } } ref: __type(name: "Reference") { fields { name args { name } } } q: __type(name: "Query") { fields { name } } }');
      expect((d.__schema as Json).queryType.name).toBe('Query');
      const obs = (d.obs as Json).fields.map((f: Json) => f.name);
      expect(obs).toEqual(expect.arrayContaining(['valueQuantity', 'valueCodeableConcept', 'status', '_status', 'subject', 'resourceType']));
      const resource = (d.ref as Json).fields.find((f: Json) => f.name === 'resource');
      expect(resource.args.map((a: Json) => a.name).sort()).toEqual(['optional', 'type']);
      expect((d.q as Json).fields.map((f: Json) => f.name)).toEqual(expect.arrayContaining(['Patient', 'PatientList', 'PatientConnection']));
      // GraphiQL's own query (its `ofType` nested past the depth limit, which introspection is not held to).
      const full = await gql(getIntrospectionQuery());
      expect(full.body.errors).toBeUndefined();
      const types = new Map<string, Json>((full.body.data.__schema.types as Json[]).map((ty) => [ty.name, ty]));
      expect(types.get('PatientContact')!.fields.map((f: Json) => f.name)).toEqual(expect.arrayContaining(['relationship', 'name', 'telecom']));
      expect(types.get('ResourceList')!.possibleTypes).toHaveLength(146);
      expect(types.get('ObservationReferenceParam')!.enumValues.map((v: Json) => v.name)).toEqual(expect.arrayContaining(['subject', 'based_on']));
    });

    test('instance level: the resource is the root', async () => {
      const res = await api.get(`Patient/p1/$graphql?query=${encodeURIComponent('{ id name { family } ObservationList(_reference: subject, _sort: "_id") { id } }')}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ data: { id: 'p1', name: [{ family: 'Smith' }], ObservationList: [{ id: 'o0' }, { id: 'o3' }, { id: 'o6' }, { id: 'o9' }] } });
      await expectOutcome(await api.get(`Patient/nope/$graphql?query=${encodeURIComponent('{ id }')}`), 404);
      await expectOutcome(await api.get(`Nope/p1/$graphql?query=${encodeURIComponent('{ id }')}`), 404);
    });

    test('errors: syntax, unknown fields, a read of nothing (with its path), mutations, malformed requests', async () => {
      const syntax = await gql('{ Patient(id: "p1") { id ');
      expect(syntax.status).toBe(200);
      expect(syntax.body.errors[0].message).toContain('Syntax Error');
      expect(syntax.body.data).toBeUndefined();
      const unknown = await gql('{ Patient(id: "p1") { nope } }');
      expect(unknown.body.errors[0].message).toContain('Cannot query field "nope"');
      const none = await gql('{ Patient(id: "nope") { id } ok: Patient(id: "p1") { id } }');
      expect(none.status).toBe(200);
      expect(none.body.data).toEqual({ Patient: null, ok: { id: 'p1' } });
      expect(none.body.errors).toEqual([expect.objectContaining({ path: ['Patient'], extensions: { status: 404, code: 'not-found' } })]);
      const unresolvable = await gql('{ Observation(id: "ghost") { subject { resource { ... on Patient { id } } } } other: Observation(id: "ghost") { subject { resource(optional: true) { ... on Patient { id } } } } }');
      expect(unresolvable.body.data).toEqual({ Observation: { subject: { resource: null } }, other: { subject: { resource: null } } });
      expect(unresolvable.body.errors).toEqual([expect.objectContaining({ path: ['Observation', 'subject', 'resource'], extensions: { status: 404, code: 'not-found' } })]);
      // A search argument it cannot use is an error, as under `Prefer: handling=strict`, never silently dropped.
      const badValue = await gql('{ PatientList(birthdate: "not-a-date") { id } ok: PatientList(_id: "p1") { id } }');
      expect(badValue.body.data).toEqual({ PatientList: null, ok: [{ id: 'p1' }] });
      expect(badValue.body.errors).toEqual([expect.objectContaining({ path: ['PatientList'], extensions: { status: 400, code: 'invalid' } })]);
      const mutation = await gql('mutation { PatientCreate { id } }');
      expect(mutation.status).toBe(200);
      expect(mutation.body.errors[0].message).toContain('read-only');
      await expectOutcome(await api.post('$graphql', JSON.stringify({ variables: {} }), { 'Content-Type': 'application/json' }), 400);
      await expectOutcome(await api.post('$graphql', '{not json', { 'Content-Type': 'application/json' }), 400);
      await expectOutcome(await api.post('$graphql', JSON.stringify({ query: '{ x }', variables: [1] }), { 'Content-Type': 'application/json' }), 400);
      await expectOutcome(await api.post('$graphql', '{ x }', { 'Content-Type': 'text/plain' }), 415);
      await expectOutcome(await api.get('$graphql'), 400);
      await expectOutcome(await api.call('DELETE', '$graphql'), 405);
    });

    test('PUT, PATCH and DELETE on $graphql are 405 whose Allow lists every method it answers, HEAD among them', async () => {
      for (const path of ['$graphql', 'Patient/p1/$graphql']) {
        for (const method of ['PUT', 'PATCH', 'DELETE']) {
          const res = await api.call(method, path, method === 'DELETE' ? undefined : { query: '{ x }' });
          await expectOutcome(res, 405);
          expect(res.headers.get('allow')).toBe('GET, HEAD, POST');
        }
        // HEAD is answered as GET is, without the body.
        const head = await api.call('HEAD', `${path}?query=${encodeURIComponent('{ Patient(id: "p1") { id } }')}`);
        expect(head.status).toBe(200);
        expect(await head.text()).toBe('');
      }
    });

    test('a mutation sent by GET is 405 with Allow: POST, nothing run (GraphQL over HTTP); a query by GET runs', async () => {
      for (const path of ['$graphql', 'Patient/p1/$graphql']) {
        const res = await api.get(`${path}?query=${encodeURIComponent('mutation { PatientCreate { id } }')}`);
        const outcome = await expectOutcome(res, 405);
        expect(res.headers.get('allow')).toBe('POST');
        expect(outcome.issue[0].expression).toEqual(['query']);
        expect(outcome.issue[0].diagnostics).toContain('GET');
      }
      // The operation named decides: a document holding a mutation beside the query run is a query by GET.
      const doc = encodeURIComponent('query Q { Patient(id: "p2") { id } } mutation M { PatientCreate { id } }');
      const query = await api.get(`$graphql?query=${doc}&operationName=Q`);
      expect([query.status, await query.json()]).toEqual([200, { data: { Patient: { id: 'p2' } } }]);
      await expectOutcome(await api.get(`$graphql?query=${doc}&operationName=M`), 405);
    });

    test("@slice paths compute Integers in 32 bits (FHIRPath N1): an overflow gives nothing, not a number past the range", async () => {
      const body = await data('{ Patient(id: "p1") { name @slice(path: "(2147483646 + 1).toString()") { family } } }');
      expect(body.Patient).toEqual({ name: [{ 'family.2147483647': 'Smith' }] });
      const overflow = await data('{ Patient(id: "p1") { name @slice(path: "(2147483647 + 1).toString()") { family } } }');
      expect(overflow.Patient).toEqual({ name: [{ 'family.': 'Smith' }] });
    });

    test('_format=xml is 406 naming _format: a $graphql answer is always JSON (OperationDefinition Resource-graphql), as an Accept of XML alone is', async () => {
      const q = encodeURIComponent('{ Patient(id: "p2") { id } }');
      for (const format of ['xml', 'application/fhir+xml', 'text/xml']) {
        const outcome = await expectOutcome(await api.get(`$graphql?query=${q}&_format=${encodeURIComponent(format)}`, { Accept: 'application/json' }), 406);
        expect(outcome.issue[0].expression).toEqual(['_format']);
      }
      await expectOutcome(await api.get(`$graphql?query=${q}`, { Accept: 'application/fhir+xml' }), 406);
      for (const format of ['json', 'application/json', 'application/fhir+json']) {
        const res = await api.get(`$graphql?query=${q}&_format=${encodeURIComponent(format)}`);
        expect([format, res.status, res.headers.get('content-type')]).toEqual([format, 200, 'application/json; charset=utf-8']);
      }
    });

    test('limits: an answer that selects one value over and over (aliases, fragments) is refused past 64 Mi characters, not built', async () => {
      const big = 'x'.repeat(40 * 1024);
      await api.put200({
        resourceType: 'Patient', id: 'wide', name: [{ family: 'Wide', given: [big] }],
        text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml"><p>${big}</p></div>` },
      });
      // 19 aliases of a fragment of 99 aliases: 1,881 uses of a 40 KB value (some 75 MB) from a query of about 1 KB.
      const uses = (field: string, on: string, leaf: string) =>
        `{ Patient(id: "wide") { ${Array.from({ length: 19 }, (_, i) => `t${i}: ${field} { ...F }`).join(' ')} } } fragment F on ${on} { ${Array.from({ length: 99 }, (_, i) => `v${i}: ${leaf}`).join(' ')} }`;
      for (const query of [uses('text', 'Narrative', 'div'), uses('name', 'HumanName', 'given')]) {
        const r = await gql(query);
        expect(r.status).toBe(200);
        expect(JSON.stringify(r.body).length).toBeLessThan(1000);
        expect(r.body).toEqual({ data: null, errors: [{ message: expect.stringContaining('would answer more than 67108864 characters'), extensions: { status: 400, code: 'too-costly' } }] });
      }
      // A few uses are answered.
      const few = await data('{ Patient(id: "wide") { a: text { div } b: text { div } name { given } } }');
      expect(((few.Patient as Json).b as Json).div).toContain(big);
    });

    test('limits: depth, fields (aliases and fragments counted), query size, resources read', async () => {
      let nested = 'id';
      for (let i = 0; i < 13; i++) nested = `contained { ... on Patient { ${nested} } }`;
      const tooDeep = await gql(`{ Patient(id: "p1") { ${nested} } }`);
      expect(tooDeep.status).toBe(200);
      expect(tooDeep.body.errors[0].message).toContain('deeper than 12');
      const aliases = Array.from({ length: 2001 }, (_, i) => `a${i}: id`).join(' ');
      expect((await gql(`{ Patient(id: "p1") { ${aliases} } }`)).body.errors[0].message).toContain('more than 2000 fields');
      // A fragment spread over and over: counted as used, refused without expanding it all.
      let frags = 'fragment F0 on Patient { id gender }';
      for (let i = 1; i < 30; i++) frags += ` fragment F${i} on Patient { ...F${i - 1} ...F${i - 1} }`;
      expect((await gql(`{ Patient(id: "p1") { ...F29 } } ${frags}`)).body.errors[0].message).toContain('more than 2000 fields');
      expect((await gql(`{ Patient(id: "p1") { id } } #${'x'.repeat(70_000)}`)).body.errors[0].message).toContain('longer than');
      expect((await gql(`{ Patient(id: "p1") { ${'id '.repeat(10_001)}} }`)).body.errors[0].message).toContain('10000 tokens. Parsing aborted');
      // More than 200 searches in one request: the searches past it are errors.
      const lists = Array.from({ length: 201 }, (_, i) => `l${i}: PatientList(_id: "p1") { id }`).join(' ');
      const many = await gql(`{ ${lists} }`);
      expect(many.status).toBe(200);
      expect(many.body.errors[0]).toMatchObject({ extensions: { status: 400, code: 'too-costly' } });
    });

    test("limits: a Connection's count is counted once, whatever its aliases, and on the searches' budget", async () => {
      const repo = t.store.resources;
      let counts = 0;
      const { count } = repo;
      repo.count = (...a) => (counts++, count.apply(repo, a));
      try {
        const aliases = Array.from({ length: 500 }, (_, i) => `c${i}: count`).join(' ');
        const d = await data(`{ ObservationConnection(code: "8867-4", _count: 1) { ${aliases} } }`);
        expect(Object.values(d.ObservationConnection as Json)).toEqual(Array(500).fill(12));
        expect(counts).toBe(1);
        // Each counted Connection takes a search of the 200 besides its page's: 101 of them are past it.
        const connections = Array.from({ length: 101 }, (_, i) => `k${i}: ObservationConnection(code: "8867-4", _count: 1) { count }`).join(' ');
        const costly = await gql(`{ ${connections} }`);
        expect(costly.body.errors[0]).toMatchObject({ extensions: { status: 400, code: 'too-costly' } });
      } finally {
        repo.count = count;
      }
      expect(counts).toBeLessThanOrEqual(101);
    });

    test("a patient's token reaches only its compartment, through reads, lists and references", async () => {
      const patient = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p1' }));
      const d = await gql('{ ObservationList(_sort: "_id") { id subject { reference } } Patient(id: "p2") { id } PatientList { id } }', undefined, patient);
      expect(d.status).toBe(200);
      expect((d.body.data.ObservationList as Json[]).map((o) => o.id)).toEqual(['link', 'o0', 'o3', 'o6', 'o9']);
      expect(d.body.data.PatientList).toEqual([{ id: 'p1' }]);
      expect(d.body.data.Patient).toBeNull();
      expect(d.body.errors).toEqual([expect.objectContaining({ path: ['Patient'], extensions: { status: 403, code: 'forbidden' } })]);
      // Another patient's Observation, and another patient through a reference the token cannot read.
      const other = await gql('{ Observation(id: "o1") { id } }', undefined, patient);
      expect(other.body.errors[0].extensions.status).toBe(403);
      const rev = await gql('{ Patient(id: "p1") { ObservationList(_reference: subject) { id } } PatientList(_id: "p2") { id } }', undefined, patient);
      expect(rev.body.data).toEqual({ Patient: { ObservationList: [{ id: 'o0' }, { id: 'o3' }, { id: 'o6' }, { id: 'o9' }] }, PatientList: [] });
      // Its own Observation naming another patient: that patient is out of reach, its own record is not.
      const link = await gql('{ Observation(id: "link") { focus { resource { ... on Patient { id name { family } } } } } }', undefined, patient);
      expect(link.body.data).toEqual({ Observation: { focus: [{ resource: null }, { resource: { id: 'p1', name: [{ family: 'Smith' }] } }] } });
      expect(link.body.errors).toEqual([expect.objectContaining({ path: ['Observation', 'focus', 0, 'resource'], extensions: { status: 403, code: 'forbidden' } })]);
      const instance = await patient.get(`Patient/p2/$graphql?query=${encodeURIComponent('{ id }')}`);
      await expectOutcome(instance, 403);
    });

    test("a patient's token lists through a resource every patient shares only its own record, at system and instance level", async () => {
      const patient = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p1' }));
      // Practitioner/dr performs every patient's Observations and is p1's and no other's general practitioner.
      const shared = '{ ObservationList(_reference: performer, _sort: "_id") { id subject { reference } } PatientList(_reference: general_practitioner) { id } }';
      const own = { ObservationList: ['o0', 'o3', 'o6', 'o9'].map((id) => ({ id, subject: { reference: 'Patient/p1' } })), PatientList: [{ id: 'p1' }] };
      expect(await data(`{ Practitioner(id: "dr") ${shared} }`, undefined, patient)).toEqual({ Practitioner: own });
      const instance = await patient.get(`Practitioner/dr/$graphql?query=${encodeURIComponent(shared)}`);
      expect({ status: instance.status, body: await instance.json() }).toEqual({ status: 200, body: { data: own } });
      // The admin's token lists all of them through the same resource.
      const all = await data(`{ Practitioner(id: "dr") { ObservationList(_reference: performer) { id } } }`);
      expect((all.Practitioner.ObservationList as Json[]).length).toBe(12);
    });

    test('a scope filter narrows lists and reads as on REST; no token is a 401', async () => {
      const lab = fhirClient(t, await craftToken(t, 'system/Observation.rs?category=laboratory system/Patient.rs'));
      const d = await gql('{ ObservationList(_sort: "_id") { id } Observation(id: "o1") { id } o0: Observation(id: "o0") { subject { resource { ... on Patient { id } } } } }', undefined, lab);
      expect((d.body.data.ObservationList as Json[]).map((o) => o.id)).toEqual(await searchIds(lab, 'Observation?_sort=_id'));
      expect(d.body.data.ObservationList).toHaveLength(6);
      expect(d.body.data.Observation).toBeNull();
      expect(d.body.data.o0).toEqual({ subject: { resource: { id: 'p1' } } });
      expect(d.body.errors[0]).toMatchObject({ path: ['Observation'], extensions: { status: 403 } });
      const noPractitioner = await gql('{ Observation(id: "o0") { performer { resource { ... on Practitioner { id } } } } }', undefined, lab);
      expect(noPractitioner.body.errors[0]).toMatchObject({ path: ['Observation', 'performer', 0, 'resource'], extensions: { status: 403 } });
      const res = await t.request(`${api.base}/$graphql?query=${encodeURIComponent('{ Patient(id: "p1") { id } }')}`);
      await expectOutcome(res, 401);
    });

    test('the database unavailable answers the request 503 (a bug 500), as on REST, not a field error', async () => {
      const repo = t.store.resources;
      const { search } = repo;
      for (const [failure, status] of [[() => new StoreUnavailableError('connection refused'), 503], [() => new Error('disk on fire'), 500]] as const) {
        repo.search = () => Promise.reject(failure());
        try {
          const res = await api.post('$graphql', JSON.stringify({ query: '{ PatientList { id } }' }), { 'Content-Type': 'application/json' });
          const outcome = await expectOutcome(res, status);
          expect(JSON.stringify(outcome)).not.toContain('disk on fire');
        } finally {
          repo.search = search;
        }
      }
    });

    test('CORS as on every FHIR route: a preflight without a token, the headers on the answer', async () => {
      const pre = await t.request(`${api.base}/$graphql`, { method: 'OPTIONS', headers: { Origin: 'https://app.example.org', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' } });
      expect(pre.status).toBe(204);
      expect(pre.headers.get('access-control-allow-origin')).toBe('*');
      const res = await api.post('$graphql', JSON.stringify({ query: '{ Patient(id: "p1") { id } }' }), { 'Content-Type': 'application/json', Origin: 'https://app.example.org' });
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
    });

    test('the CapabilityStatement lists $graphql at system and instance level', async () => {
      const cs = (await (await api.get('metadata')).json()) as Json;
      const rest = cs.rest[0];
      expect(rest.operation).toEqual(expect.arrayContaining([{ name: 'graphql', definition: 'http://hl7.org/fhir/OperationDefinition/Resource-graphql' }]));
      const patient = rest.resource.find((r: Json) => r.type === 'Patient');
      expect(patient.operation).toEqual(expect.arrayContaining([{ name: 'graphql', definition: 'http://hl7.org/fhir/OperationDefinition/Resource-graphql' }]));
    });

    // Last: it writes an Observation the other tests do not count.
    test("a contained resource or a Bundle's entry has no reverse references: its id is no Patient/{id} of this server", async () => {
      await api.put200({
        resourceType: 'Observation', id: 'holds-p2', status: 'final', code: { text: 'x' },
        contained: [{ resourceType: 'Patient', id: 'p2', name: [{ family: 'Inside' }] }], subject: { reference: '#p2' },
      });
      const d = await data('{ Observation(id: "holds-p2") { subject { resource { ... on Patient { id name { family } ObservationList(_reference: subject) { id } } } } } }');
      // The stored Patient/p2's Observations (o1, o4...) are another patient's record, not the contained one's.
      expect(d).toEqual({ Observation: { subject: { resource: { id: 'p2', name: [{ family: 'Inside' }], ObservationList: [] } } } });
      // Nor has a Bundle's entry: a copy, here of another server's Patient/p2.
      await api.put200({ resourceType: 'Bundle', id: 'copies', type: 'collection', entry: [{ fullUrl: 'http://other.example.org/fhir/Patient/p2', resource: { resourceType: 'Patient', id: 'p2' } }] });
      const copy = await data('{ Bundle(id: "copies") { entry { resource { ... on Patient { id ObservationList(_reference: subject) { id } } } } } }');
      expect(copy).toEqual({ Bundle: { entry: [{ resource: { id: 'p2', ObservationList: [] } }] } });
      // A stored resource keeps them.
      const stored = await data('{ Patient(id: "p2") { ObservationList(_reference: subject, _sort: "_id") { id } } }');
      expect(stored).toEqual({ Patient: { ObservationList: [{ id: 'o1' }, { id: 'o10' }, { id: 'o4' }, { id: 'o7' }] } });
      // So does one a list or a reference reads.
      const listed = await data('{ PatientList(_id: "p2") { ObservationList(_reference: subject, _sort: "_id") { id } } Observation(id: "o1") { subject { resource { ... on Patient { ObservationList(_reference: subject, _sort: "_id") { id } } } } } }');
      expect(listed).toEqual({ PatientList: [{ ObservationList: [{ id: 'o1' }, { id: 'o10' }, { id: 'o4' }, { id: 'o7' }] }], Observation: { subject: { resource: { ObservationList: [{ id: 'o1' }, { id: 'o10' }, { id: 'o4' }, { id: 'o7' }] } } } });
    });
  });
});
