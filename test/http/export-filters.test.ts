import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { Database } from 'bun:sqlite';
import { join } from 'node:path';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, finish, kickOff, observation, patient, put, refs } from '../helpers/export.ts';
import { craftToken } from '../helpers/fhir.ts';

let t: TestApp;
let token: string;
beforeEach(async () => {
  t = await createTestApp();
  token = await t.token();
  await put(t, patient('p1', { gender: 'female', name: [{ family: 'One' }], birthDate: '1970-01-01', identifier: [{ system: 'urn:mrn', value: '1' }] }));
  await put(t, patient('p2', { gender: 'male', identifier: [{ system: 'urn:mrn', value: '2' }] }));
  await put(t, observation('o1', 'p1', 'A'));
  await put(t, observation('o2', 'p2', 'B'));
  await put(t, observation('o3', 'p2', 'C'));
  await put(t, { resourceType: 'Condition', id: 'c1', subject: { reference: 'Patient/p1' }, code: { text: 'x' } });
});
afterEach(async () => t.close());

const get = (path: string, headers: Record<string, string> = {}) => t.request(t.fhir() + path, fhirInit(token, 'GET', undefined, headers));
const enc = encodeURIComponent;

describe('_typeFilter', () => {
  test('filters a type by FHIR search queries, ORed, leaving other types whole', async () => {
    const filters = [enc('Observation?code=http://loinc.org|A'), enc('Observation?subject=Patient/p2&code=C')].join(',');
    const status = await kickOff(t, token, `/$export?_type=Observation,Condition&_typeFilter=${filters}`);
    const files = await download(t, token, (await finish(t, token, status)).output);
    expect(refs(files)).toEqual(['Condition/c1', 'Observation/o1', 'Observation/o3']);
  });

  test('patient, which shares the index rows of subject, filters like it', async () => {
    const status = await kickOff(t, token, `/$export?_type=Observation,Condition&_typeFilter=${enc('Observation?patient=p2')},${enc('Condition?patient=Patient/p9')}`);
    const files = await download(t, token, (await finish(t, token, status)).output);
    expect(refs(files)).toEqual(['Observation/o2', 'Observation/o3']);
  });

  test('a chain reaches into contained resources, as in search', async () => {
    await put(t, {
      resourceType: 'Observation', id: 'oc', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: 'D' }] },
      contained: [{ resourceType: 'Patient', id: 'p', name: [{ family: 'One' }] }], subject: { reference: '#p' },
    });
    const status = await kickOff(t, token, `/$export?_type=Observation&_typeFilter=${enc('Observation?subject:Patient.family=one')}`);
    const files = await download(t, token, (await finish(t, token, status)).output);
    expect(refs(files)).toEqual(['Observation/o1', 'Observation/oc']);
  });

  test('a parameter with no value is a 400 naming it (ignored, as a search ignores it, it would widen the export); lenient, it is left out with a warning', async () => {
    const filters = `_typeFilter=${enc('Observation?code=&subject=Patient/p2')},${enc('Patient?gender=')}`;
    const res = await get(`/$export?_type=Observation,Patient&${filters}`);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { issue: { details: { text: string }; expression: string[] }[] };
    expect(body.issue[0]!.details.text).toContain("_typeFilter 'Observation?code=&subject=Patient/p2': the parameter 'code' has no value");
    expect(body.issue[0]!.expression).toEqual(['_typeFilter']);
    const manifest = await finish(t, token, await kickOff(t, token, `/$export?_type=Observation,Patient&${filters}`, { Prefer: 'handling=lenient' }));
    expect(refs(await download(t, token, manifest.output))).toEqual(['Observation/o2', 'Observation/o3', 'Patient/p1', 'Patient/p2']);
    const warnings = JSON.stringify(await download(t, token, manifest.error));
    expect(warnings).toContain("the parameter 'code' has no value");
    expect(warnings).toContain("the parameter 'gender' has no value");
  });

  test('repeated _typeFilter parameters and a whole-value-encoded list', async () => {
    const status = await kickOff(t, token, `/$export?_type=Patient,Observation&_typeFilter=${enc('Patient?identifier=urn:mrn|2,Observation?_id=o1')}&_typeFilter=${enc('Observation?_id=o2')}`);
    const files = await download(t, token, (await finish(t, token, status)).output);
    expect(refs(files)).toEqual(['Observation/o1', 'Observation/o2', 'Patient/p2']);
  });

  test('a query sent unencoded keeps the commas of its values: a piece that starts no query continues the one before', async () => {
    // Before: a 400, "'B' is not a resource type", the value taken for a query of its own.
    const status = await kickOff(t, token, '/$export?_type=Observation&_typeFilter=Observation?code=A,B');
    expect(refs(await download(t, token, (await finish(t, token, status)).output))).toEqual(['Observation/o1', 'Observation/o2']);
    const two = await kickOff(t, token, '/$export?_type=Observation,Patient&_typeFilter=Observation?code=http://loinc.org|A,http://loinc.org|C,Patient?gender=male');
    expect(refs(await download(t, token, (await finish(t, token, two)).output))).toEqual(['Observation/o1', 'Observation/o3', 'Patient/p2']);
    // A piece naming a resource type still starts a query, as does an encoded one.
    for (const [query, named] of [['Observation?code=A,Blood,Nope?x=1', 'Nope'], ['Observation?code=A,observation?code=B', 'observation']]) {
      const res = await get(`/$export?_type=Observation&_typeFilter=${query}`);
      expect(res.status).toBe(400);
      expect(JSON.stringify(await res.json())).toContain(`'${named}' is not a resource type`);
    }
  });

  test(':in and :not-in expand the ValueSet through the terminology service at kick-off', async () => {
    await put(t, {
      resourceType: 'ValueSet', id: 'ac', status: 'active', url: 'http://example.org/fhir/ValueSet/ac',
      compose: { include: [{ system: 'http://loinc.org', concept: [{ code: 'A' }, { code: 'C' }] }] },
    });
    const inSet = await kickOff(t, token, `/$export?_type=Observation,Patient&_typeFilter=${enc('Observation?code:in=http://example.org/fhir/ValueSet/ac')},${enc('Patient?gender:in=http://hl7.org/fhir/ValueSet/administrative-gender')}`);
    expect(refs(await download(t, token, (await finish(t, token, inSet)).output))).toEqual(['Observation/o1', 'Observation/o3', 'Patient/p1', 'Patient/p2']);
    const notIn = await kickOff(t, token, `/$export?_type=Observation&_typeFilter=${enc('Observation?code:not-in=http://example.org/fhir/ValueSet/ac')}`);
    expect(refs(await download(t, token, (await finish(t, token, notIn)).output))).toEqual(['Observation/o2']);
    // Inside a chain and `_has` as well (p1 is female, p2 male; o1 and o3 have codes of `ac`).
    await put(t, {
      resourceType: 'ValueSet', id: 'men', status: 'active', url: 'http://example.org/fhir/ValueSet/men',
      compose: { include: [{ system: 'http://hl7.org/fhir/administrative-gender', concept: [{ code: 'male' }] }] },
    });
    const linked = await kickOff(t, token, `/$export?_type=Observation,Patient&_typeFilter=${enc('Observation?subject:Patient.gender:in=http://example.org/fhir/ValueSet/men')},${enc('Patient?_has:Observation:subject:code:in=http://example.org/fhir/ValueSet/ac&gender=male')}`);
    expect(refs(await download(t, token, (await finish(t, token, linked)).output))).toEqual(['Observation/o2', 'Observation/o3', 'Patient/p2']);
  });

  test('_filter expressions, value sets inside them expanded at kick-off', async () => {
    const filters = [
      enc(`Patient?_filter=${enc('gender eq male or (birthdate lt 1971 and not (gender in http://hl7.org/fhir/ValueSet/administrative-gender))')}`),
      enc(`Observation?_filter=${enc('code eq loinc|A or (subject.gender eq male and not (code eq http://loinc.org|B))')}`),
    ].join(',');
    const status = await kickOff(t, token, `/$export?_type=Patient,Observation&_typeFilter=${filters}`);
    expect(refs(await download(t, token, (await finish(t, token, status)).output))).toEqual(['Observation/o1', 'Observation/o3', 'Patient/p2']);
    // The job keeps each `or`'s alternatives as ORed filters, so that one of codes is read by its codes' rows.
    const job = (await t.store.exports.jobs.get('t1', status.split('/').pop()!))!;
    const kept = JSON.parse(job.spec).filters as Record<string, { kind: string }[][]>;
    // (A chain is an `or`: the chained resource, or one the Observation contains.)
    expect(kept.Observation!.map((alt) => alt.map((c) => c.kind))).toEqual([['token'], ['or', 'not']]);
    expect(kept.Patient!.map((alt) => alt.map((c) => c.kind))).toEqual([['token'], ['date', 'not']]);
    const bad = await get(`/$export?_type=Patient&_typeFilter=${enc(`Patient?_filter=${enc('gender co male')}`)}`);
    expect(bad.status).toBe(400);
  });

  test("_filter's case-insensitive tokens and unequal values export what they search, in a job of data version 3", async () => {
    await put(t, observation('o4', 'p1', 'A'));
    await put(t, { resourceType: 'Observation', id: 'o5', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: 'A' }] } });
    const filters = [
      enc(`Patient?_filter=${enc('gender eq MALE or identifier eq URN:MRN|1')}`),
      // o5 has no subject: no item unequal to p1.
      enc(`Observation?_filter=${enc('subject ne Patient/p1 and code ne b')}`),
    ].join(',');
    const status = await kickOff(t, token, `/$export?_type=Patient,Observation&_typeFilter=${filters}`);
    expect(refs(await download(t, token, (await finish(t, token, status)).output))).toEqual(['Observation/o3', 'Patient/p1', 'Patient/p2']);
    const job = (await t.store.exports.jobs.get('t1', status.split('/').pop()!))!;
    expect(JSON.parse(job.spec).version).toBe(3);
  });

  test('a filter Cinder cannot apply is a 400, never silently ignored', async () => {
    for (const q of ['Observation?nonsense=5', 'Observation?code:nonsense=x', 'Observation?_sort=_id', 'Observation?_include=Observation:subject', 'Observation?date=yesterday', 'Observation?code:in=http://example.org/vs']) {
      const res = await get(`/$export?_type=Observation&_typeFilter=${enc(q)}`);
      expect(res.status).toBe(400);
      const body = (await res.json()) as { issue: { details: { text: string } }[] };
      expect(body.issue[0]!.details.text).toContain('_typeFilter');
    }
    // Of a type outside `_type` too: the query is checked as any other.
    const outside = await get(`/$export?_type=Patient&_typeFilter=${enc('Observation?nonsense=5')}`);
    expect(outside.status).toBe(400);
    expect(JSON.stringify(await outside.json())).toContain("_typeFilter 'Observation?nonsense=5'");
  });

  test('a query whose percent-encoding is malformed is a 400 naming it, as a search is (it looked for the characters written)', async () => {
    // The query string encodes each query once more: `%25ZZ` is the query's own `%ZZ`.
    for (const q of ['Observation?code=%ZZ', 'Observation?code=%E9', 'Observation?%ZZ=A']) {
      const res = await get(`/$export?_type=Observation&_typeFilter=${enc(q)}`);
      expect([q, res.status]).toEqual([q, 400]);
      const body = (await res.json()) as { issue: { details: { text: string }; expression: string[] }[] };
      expect(body.issue[0]!.details.text).toContain(`_typeFilter '${q}'`);
      expect(body.issue[0]!.details.text).toContain('not well percent-encoded');
      expect(body.issue[0]!.expression).toEqual(['_typeFilter']);
      // As a search of the same query answers.
      expect((await get(`/${q}`)).status).toBe(400);
    }
    // Well encoded, the same value is searched as sent.
    const m = await finish(t, token, await kickOff(t, token, `/$export?_type=Observation&_typeFilter=${enc('Observation?code=%41')}`));
    expect(refs(await download(t, token, m.output))).toEqual(['Observation/o1']);
  });

  test('a filter of a type _type leaves out selects nothing and excludes nothing (Bulk Data 2.0: it filters what would be returned)', async () => {
    const status = await kickOff(t, token, `/$export?_type=Patient,Condition&_typeFilter=${enc('Observation?code=A')},${enc('Condition?code:text=nothing')}`);
    const manifest = await finish(t, token, status);
    expect(refs(await download(t, token, manifest.output))).toEqual(['Patient/p1', 'Patient/p2']);
    expect(manifest.error).toEqual([]);
    // Lenient, a query Cinder cannot apply of such a type is a warning, as of any other.
    const lenient = await finish(t, token, await kickOff(t, token, `/$export?_type=Patient&_typeFilter=${enc('Observation?nonsense=5')}`, { Prefer: 'handling=lenient' }));
    expect(refs(await download(t, token, lenient.output))).toEqual(['Patient/p1', 'Patient/p2']);
    expect(JSON.stringify(await download(t, token, lenient.error))).toContain("_typeFilter 'Observation?nonsense=5'");
  });

  test('the _typeFilter queries of a kick-off hold at most 100 tests together: more is a 400 too-costly, lenient or not', async () => {
    // Four tests a query, so that 100 tests fit in the 32 queries a type may hold.
    const filters = (n: number) => Array.from({ length: n }, (_, i) => enc(`Observation?code:not=x${i}&code:not=y${i}&code:not=w${i}&status=final`)).join(',');
    const status = await kickOff(t, token, `/$export?_type=Observation&_typeFilter=${filters(25)}`);
    expect(refs(await download(t, token, (await finish(t, token, status)).output))).toEqual(['Observation/o1', 'Observation/o2', 'Observation/o3']);
    for (const headers of [{}, { Prefer: 'handling=lenient' }] as Record<string, string>[]) {
      for (const query of [`_typeFilter=${filters(26)}`, `_typeFilter=${filters(13)}&_typeFilter=${filters(13)}`]) {
        const res = await get(`/$export?_type=Observation&${query}`, headers);
        expect(res.status).toBe(400);
        const body = (await res.json()) as { issue: { code: string; details: { text: string } }[] };
        expect(body.issue[0]!.code).toBe('too-costly');
        expect(body.issue[0]!.details.text).toBe('The _typeFilter queries hold more than 100 tests together (parameters, _filter tests, chained steps)');
      }
    }
  });

  test('with handling=lenient an unusable filter is reported and its type exported unfiltered', async () => {
    const status = await kickOff(t, token, `/$export?_type=Observation&_typeFilter=${enc('Observation?nonsense=5')}`, { Prefer: 'handling=lenient' });
    const manifest = await finish(t, token, status);
    expect(refs(await download(t, token, manifest.output))).toEqual(['Observation/o1', 'Observation/o2', 'Observation/o3']);
    const errors = await download(t, token, manifest.error);
    expect(JSON.stringify(errors)).toContain('nonsense');
  });
});

describe('_elements', () => {
  test('keeps requested and mandatory elements and tags SUBSETTED; unnamed types stay whole', async () => {
    const status = await kickOff(t, token, '/$export?_type=Patient,Observation,Condition&_elements=Patient.gender,Observation.subject');
    const files = await download(t, token, (await finish(t, token, status)).output);
    const p1 = files.Patient!.find((p) => p.id === 'p1')!;
    expect(Object.keys(p1).sort()).toEqual(['gender', 'id', 'meta', 'resourceType']);
    const tags = (p1.meta as { tag: { code: string }[] }).tag;
    expect(tags.map((x) => x.code)).toContain('SUBSETTED');
    const o1 = files.Observation!.find((o) => o.id === 'o1')!;
    expect(Object.keys(o1).sort()).toEqual(['code', 'id', 'meta', 'resourceType', 'status', 'subject']);
    const c1 = files.Condition![0]!;
    expect(c1.code).toEqual({ text: 'x' });
    expect((c1.meta as { tag?: unknown }).tag).toBeUndefined();
  });

  test('a bare element applies to every exported type that has it', async () => {
    const status = await kickOff(t, token, '/$export?_type=Patient,Observation&_elements=identifier');
    const files = await download(t, token, (await finish(t, token, status)).output);
    expect(Object.keys(files.Patient![0]!).sort()).toEqual(['id', 'identifier', 'meta', 'resourceType']);
    expect(Object.keys(files.Observation![0]!).sort()).toEqual(['code', 'id', 'meta', 'resourceType', 'status']);
  });

  test('a stored resource that cannot be subset is left out and reported in the error file', async () => {
    const db = new Database(join(t.dir, 'cinder.db'));
    db.query("UPDATE resources SET content = '{not json' WHERE tenant = 't1' AND type = 'Patient' AND id = 'p2'").run();
    db.close();
    const status = await kickOff(t, token, '/$export?_type=Patient&_elements=gender');
    const manifest = await finish(t, token, status);
    expect(refs(await download(t, token, manifest.output))).toEqual(['Patient/p1']);
    const errors = await download(t, token, manifest.error);
    expect(errors.OperationOutcome).toHaveLength(1);
    expect(JSON.stringify(errors.OperationOutcome)).toContain('could not be exported');
  });

  test('unknown or nested elements are a 400', async () => {
    expect((await get('/$export?_type=Patient&_elements=Patient.bogus')).status).toBe(400);
    expect((await get('/$export?_type=Patient&_elements=name.family')).status).toBe(400);
  });
});

describe('scopes', () => {
  test('only types the token may read are exported', async () => {
    const narrow = await t.tokenFor('t1', ['system/Patient.read', 'system/Condition.rs']);
    const status = await kickOff(t, narrow, '/$export');
    const manifest = await finish(t, narrow, status);
    expect(manifest.output.map((o) => o.type).sort()).toEqual(['Condition', 'Patient']);
  });

  test('asking for a type the token may not read is a 403, or an issue with lenient handling', async () => {
    const narrow = await t.tokenFor('t1', ['system/Patient.read']);
    const res = await t.request(t.fhir() + '/$export?_type=Patient,Observation', fhirInit(narrow));
    expect(res.status).toBe(403);
    const status = await kickOff(t, narrow, '/$export?_type=Patient,Observation', { Prefer: 'handling=lenient' });
    const manifest = await finish(t, narrow, status);
    expect(manifest.output.map((o) => o.type)).toEqual(['Patient']);
    expect(JSON.stringify(await download(t, narrow, manifest.error))).toContain('Observation');
  });

  test('a patient-context token cannot start a system export (Patient/$export is its export)', async () => {
    // client_credentials grants no patient/ scopes (no patient in context): a code-flow token's, with one.
    const res = await t.request(t.fhir() + '/$export?_type=Patient', fhirInit(await craftToken(t, 'patient/*.read', { patient: 'p1' })));
    expect(res.status).toBe(403);
  });
});
