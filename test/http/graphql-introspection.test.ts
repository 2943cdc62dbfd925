/**
 * `$graphql` introspection off the request thread (src/fhir/graphql/introspection.ts), on both
 * databases: its answers are graphql-js's own introspection of the schema; introspection queries
 * queue behind one thread, past the queue a 429 with Retry-After; an answer given is kept by the
 * normalised document and served while the queue is full; introspection and resources are not mixed
 * in one query. And the GraphQL over HTTP media type, `application/graphql-response+json`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { execute, getIntrospectionQuery, parse } from 'graphql';
import { FhirGraphqlSchema } from '../../src/fhir/graphql/schema.ts';
import { MAX_QUEUED_INTROSPECTIONS } from '../../src/fhir/graphql/introspection.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const GR = 'application/graphql-response+json';
const schemas = new FhirGraphqlSchema();
const owned = new Map<string, Json>();
/**
 * graphql-js's own answer to `query` on a schema, as JSON: worked out once for both databases (a full introspection
 * of the system schema is 10 MB of JSON, about a second each).
 */
function own(query: string, focusType?: string): Json {
  const key = `${focusType ?? ''}\n${query}`;
  let answer = owned.get(key);
  if (answer === undefined) {
    answer = JSON.parse(JSON.stringify(execute({ schema: focusType ? schemas.instance(focusType) : schemas.system, document: parse(query) }))) as Json;
    owned.set(key, answer);
  }
  return answer;
}

await eachStore((kind, fresh) => {
  describe(`$graphql introspection and media types (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const post = async (query: string, headers: Record<string, string> = {}, path = '$graphql') => {
      const res = await api.post(path, JSON.stringify({ query }), { 'Content-Type': 'application/json', ...headers });
      return { status: res.status, type: res.headers.get('content-type'), retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Json };
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1', gender: 'female' });
    });
    afterAll(() => t.close());

    test("a full introspection answers what graphql-js's own introspection of the schema does, system and instance level", async () => {
      const q = getIntrospectionQuery({ descriptions: true, directiveIsRepeatable: true, specifiedByUrl: true });
      const system = await post(q);
      expect(system.status).toBe(200);
      expect(system.body).toEqual(own(q));
      const instance = await post(q, {}, 'Patient/p1/$graphql');
      expect(instance.status).toBe(200);
      expect(instance.body).toEqual(own(q, 'Patient'));
      expect(instance.body.data.__schema.queryType.name).toBe('Patient');
      // The focus is still read first: one that does not exist is a 404.
      expect((await post(q, {}, 'Patient/nobody/$graphql')).status).toBe(404);
      // With variables and directives, as graphql-js answers them.
      const withVars = await api.post('$graphql', JSON.stringify({
        query: 'query T($n: String!, $d: Boolean!) { __type(name: $n) { name fields @include(if: $d) { name } } }', variables: { n: 'HumanName', d: true },
      }), { 'Content-Type': 'application/json' });
      expect((await withVars.json()).data.__type).toEqual(own('{ __type(name: "HumanName") { name fields { name } } }').data.__type);
    });

    test('introspection queries queue behind one thread: past the queue a 429 with Retry-After, an answer kept is served at once', async () => {
      const kept = '{ __schema { queryType { name } types { name kind } } }';
      expect((await post(kept)).body).toEqual(own(kept));
      // Different documents (an alias each) of the full introspection, all at once.
      const n = MAX_QUEUED_INTROSPECTIONS + 4;
      const full = getIntrospectionQuery();
      const queries = Array.from({ length: n }, (_, i) => full.replace('__schema {', `s${kind}${i}: __schema {`));
      let sawRefusal!: () => void;
      const refusal = new Promise<void>((resolve) => (sawRefusal = resolve));
      const answers = queries.map((q) => post(q).then((r) => (r.status === 429 && sawRefusal(), r)));
      // Once one was refused (the queue is full), the kept answer, written differently (spacing, commas, a comment), is served.
      await Promise.race([refusal, Promise.all(answers)]);
      const again = await post('# the same\n{__schema{queryType{name},types{name,kind}}}');
      expect(again.status).toBe(200);
      expect(again.body).toEqual(own(kept));
      const done = await Promise.all(answers);
      const refused = done.filter((r) => r.status === 429);
      const answered = done.filter((r) => r.status === 200);
      // The one being answered and the ones queued are answered; at least one past the queue was refused.
      expect(answered.length).toBeGreaterThanOrEqual(MAX_QUEUED_INTROSPECTIONS + 1);
      expect(refused.length).toBeGreaterThanOrEqual(1);
      expect(answered.length + refused.length).toBe(n);
      for (const r of refused) {
        expect(r.retryAfter).toMatch(/^\d+$/);
        expect(r.body.resourceType).toBe('OperationOutcome');
        expect(r.body.issue[0].code).toBe('throttled');
      }
      expect(answered[0]!.body.data[`s${kind}0`]).toEqual(own(full).data.__schema);
      // Once the queue has drained, a refused query is answered.
      const retried = await post(queries[done.findIndex((r) => r.status === 429)]!);
      expect(retried.status).toBe(200);
    }, 120_000);

    test('a query that introspects the schema selects nothing else (not even through a fragment)', async () => {
      for (const q of [
        '{ __schema { queryType { name } } Patient(id: "p1") { id } }',
        'query { ...F } fragment F on Query { __type(name: "Patient") { name } PatientList { id } }',
      ]) {
        const r = await post(q);
        expect(r.status).toBe(200);
        expect(r.body.data).toBeUndefined();
        expect(r.body.errors[0].message).toContain('introspects the schema');
      }
      // __typename alone is no introspection of the schema.
      expect((await post('{ __typename Patient(id: "p1") { id __typename } }')).body).toEqual({ data: { __typename: 'Query', Patient: { id: 'p1', __typename: 'Patient' } } });
    });

    test('Accept: application/graphql-response+json answers in that type, a request error a 400 (GraphQL over HTTP)', async () => {
      const ok = await post('{ Patient(id: "p1") { id gender } }', { Accept: GR });
      expect({ status: ok.status, type: ok.type, body: ok.body }).toEqual({ status: 200, type: `${GR}; charset=utf-8`, body: { data: { Patient: { id: 'p1', gender: 'female' } } } });
      // Field errors (a read of nothing) are still a 200 with data.
      const field = await post('{ Patient(id: "nobody") { id } }', { Accept: GR });
      expect(field.status).toBe(200);
      expect(field.body.data).toEqual({ Patient: null });
      // A query that does not parse, validate or pass the limits: no data, a 400.
      for (const q of ['{ Patient(id: "p1") { id ', '{ Patient(id: "p1") { nope } }', 'mutation { x }']) {
        const bad = await post(q, { Accept: GR });
        expect({ status: bad.status, type: bad.type, data: bad.body.data }).toEqual({ status: 400, type: `${GR}; charset=utf-8`, data: undefined });
        expect(bad.body.errors.length).toBeGreaterThan(0);
        // In application/json, as before: a 200.
        const json = await post(q);
        expect({ status: json.status, type: json.type }).toEqual({ status: 200, type: 'application/json; charset=utf-8' });
      }
      // An operation the document does not hold (operationName) cannot run either: no data, a 400.
      for (const [query, operationName] of [['{ Patient(id: "p1") { id } }', 'Nope'], ['query A { __typename } query B { __typename }', undefined]] as [string, string | undefined][]) {
        const res = await api.post('$graphql', JSON.stringify({ query, operationName }), { 'Content-Type': 'application/json', Accept: GR });
        const body = (await res.json()) as Json;
        expect({ status: res.status, data: body.data, errors: body.errors.length }).toEqual({ status: 400, data: undefined, errors: 1 });
      }
      // By GET too, and by preference (q).
      const get = await api.get(`$graphql?query=${encodeURIComponent('{ Patient(id: "p1") { id } }')}`, { Accept: `${GR}, application/json;q=0.9` });
      expect({ status: get.status, type: get.headers.get('content-type') }).toEqual({ status: 200, type: `${GR}; charset=utf-8` });
      expect((await post('{ __typename }', { Accept: `application/json, ${GR};q=0.5` })).type).toBe('application/json; charset=utf-8');
      expect((await post('{ __typename }', { Accept: '*/*' })).type).toBe('application/json; charset=utf-8');
      // Neither acceptable: 406.
      const no = await post('{ __typename }', { Accept: 'text/html' });
      expect(no.status).toBe(406);
      expect(no.body.resourceType).toBe('OperationOutcome');
    });
  });
});
