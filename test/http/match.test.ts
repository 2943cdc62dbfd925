/**
 * `Patient/$match` (R4 Patient-match) on both databases: certain, probable and possible matches graded
 * and ordered by score, no match, onlyCertainMatches, count, deleted Patients, a search's access (scopes,
 * SMART v2 filters, patient context) and bad input.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const MRN = 'http://hospital.example/mrn';
const OTHER = 'http://clinic.example/ids';
const GRADE = 'http://hl7.org/fhir/StructureDefinition/match-grade';

const params = (patient: Json, more: Json[] = []) => ({ resourceType: 'Parameters', parameter: [{ name: 'resource', resource: patient }, ...more] });
const zoe = (extra: Json = {}) => ({
  resourceType: 'Patient', name: [{ family: 'MULLER', given: ['zoe'] }], birthDate: '1980-04-12', gender: 'female', ...extra,
});
/** `[id, grade]` of a Bundle's matches, in order. */
const graded = (b: Json) => (b.entry ?? []).filter((e: Json) => e.search.mode === 'match')
  .map((e: Json) => [e.resource.id, e.search.extension.find((x: Json) => x.url === GRADE).valueCode]);

await eachStore((kind, fresh) => {
  describe(`Patient/$match (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const match = async (body: unknown, client = api) => {
      const res = await client.post('Patient/$match', body);
      const out = (await res.json()) as Json;
      expect({ status: res.status, out }).toMatchObject({ status: 200 });
      expect(out.type).toBe('searchset');
      return out;
    };
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const put = (id: string, p: Json) => api.put200({ resourceType: 'Patient', id, ...p });
      const address = [{ line: ['1 Main St'], postalCode: '12345' }];
      await put('certain', { identifier: [{ system: MRN, value: '123' }], name: [{ family: 'Müller', given: ['Zoë'] }], birthDate: '1980-04-12', gender: 'female', address });
      await put('same-demographics', { name: [{ family: 'Muller', given: ['Zoe', 'Anne'] }], birthDate: '1980-04-12', gender: 'female' });
      await put('other-system', { identifier: [{ system: OTHER, value: '123' }], name: [{ family: 'Muller', given: ['Zoe'] }], birthDate: '1980-04-12' });
      await put('other-system-only', { identifier: [{ system: OTHER, value: '123' }], name: [{ family: 'Jones', given: ['Ann'] }], birthDate: '1990-01-01' });
      await put('phonetic', { name: [{ family: 'Moller', given: ['Z'] }], birthDate: '1980-04-12' });
      await put('other-mrn', { identifier: [{ system: MRN, value: '999' }], name: [{ family: 'Muller', given: ['Zoe'] }], birthDate: '1980-04-12', gender: 'female', address });
      await put('unrelated', { identifier: [{ system: MRN, value: '555' }], name: [{ family: 'Brown', given: ['Bob'] }], birthDate: '1950-01-01', gender: 'male' });
      await put('deleted', { identifier: [{ system: MRN, value: '123' }], name: [{ family: 'Muller', given: ['Zoe'] }], birthDate: '1980-04-12' });
      expect((await api.del('Patient/deleted')).status).toBeLessThan(300);
      for (const id of ['twin-a', 'twin-b']) await put(id, { identifier: [{ system: MRN, value: '777' }], name: [{ family: 'Twin', given: ['Tom'] }], birthDate: '2001-02-03' });
      await put('phone', { name: [{ family: 'Okafor', given: ['Ada'] }], telecom: [{ system: 'phone', value: '(555) 010-2000' }, { system: 'email', value: 'Ada@Example.org' }] });
    });
    afterAll(() => t.close());

    test('graded, scored and ordered: certain, probable, possible; a deleted or unrelated Patient never', async () => {
      const b = await match(params(zoe({ identifier: [{ system: MRN, value: '123' }] })));
      expect(graded(b)).toEqual([['certain', 'certain'], ['other-system', 'probable'], ['same-demographics', 'probable'], ['other-mrn', 'possible'], ['phonetic', 'possible']]);
      const scores = b.entry.map((e: Json) => e.search.score);
      expect([...scores].sort((x: number, y: number) => y - x)).toEqual(scores);
      for (const s of scores) expect(s).toBeGreaterThan(0);
      expect(scores[0]).toBeGreaterThanOrEqual(0.9);
      expect(scores[0]).toBeLessThanOrEqual(1);
      expect(b.entry[0].search).toEqual({ extension: [{ url: GRADE, valueCode: 'certain' }], mode: 'match', score: scores[0] });
      expect(b.entry[0].fullUrl).toBe(`${api.base}/Patient/certain`);
      expect(b.total).toBe(5);
      expect(b.link[0]).toEqual({ relation: 'self', url: `${api.base}/Patient/$match` });
    });

    test('an identifier of the same value in another system alone is no match; same system, other value disagrees', async () => {
      const b = await match(params({ resourceType: 'Patient', identifier: [{ system: MRN, value: '123' }] }));
      // Only the identifier given: the same system and value is certain; the same value elsewhere is not enough.
      expect(graded(b)).toEqual([['certain', 'certain']]);
      const other = await match(params({ resourceType: 'Patient', identifier: [{ system: OTHER, value: '123' }], name: [{ family: 'Jones', given: ['Ann'] }], birthDate: '1990-01-01' }));
      // The same identifier with name and birth date disagreeing is still shown, as possible.
      expect(graded(other)).toEqual([['other-system-only', 'certain'], ['other-system', 'possible']]);
      const noSystem = await match(params({ resourceType: 'Patient', identifier: [{ value: '555' }], name: [{ family: 'Brown' }] }));
      expect(graded(noSystem)).toEqual([['unrelated', 'possible']]);
    });

    test('telecoms compare by their digits (phones) or case-insensitively; names without a birth date', async () => {
      expect(graded(await match(params({ resourceType: 'Patient', name: [{ family: 'okafor', given: ['ADA'] }], telecom: [{ system: 'phone', value: '555-010-2000' }] }))))
        .toEqual([['phone', 'possible']]);
      expect(graded(await match(params({ resourceType: 'Patient', name: [{ family: 'Okafor' }], telecom: [{ system: 'email', value: 'ada@example.org' }] }))))
        .toEqual([['phone', 'possible']]);
    });

    test('no match: an empty searchset', async () => {
      const b = await match(params({ resourceType: 'Patient', name: [{ family: 'Nobody', given: ['Here'] }], birthDate: '2020-01-01' }));
      expect(b.entry).toBeUndefined();
      expect(b.total).toBe(0);
    });

    test('onlyCertainMatches: the certain one; none when several are, with an informational issue', async () => {
      const only = [{ name: 'onlyCertainMatches', valueBoolean: true }];
      expect(graded(await match(params(zoe({ identifier: [{ system: MRN, value: '123' }] }), only)))).toEqual([['certain', 'certain']]);
      const twins = { resourceType: 'Patient', identifier: [{ system: MRN, value: '777' }], name: [{ family: 'Twin' }] };
      expect(graded(await match(params(twins)))).toEqual([['twin-a', 'certain'], ['twin-b', 'certain']]);
      const b = await match(params(twins, only));
      expect(graded(b)).toEqual([]);
      const outcome = b.entry.find((e: Json) => e.search.mode === 'outcome').resource;
      expect(outcome.issue[0]).toMatchObject({ severity: 'information', code: 'multiple-matches' });
      expect(graded(await match(params(zoe(), only)))).toEqual([]);
    });

    test('count bounds the matches, the best first, and says how many it left out', async () => {
      const b = await match(params(zoe({ identifier: [{ system: MRN, value: '123' }] }), [{ name: 'count', valueInteger: 2 }]));
      expect(graded(b)).toEqual([['certain', 'certain'], ['other-system', 'probable']]);
      expect(b.entry.at(-1).resource.issue[0].diagnostics).toContain('3 more');
      // A count past the most (100) is that most. Without the identifier nothing is certain, and no MRN
      // disagrees: equal scores by id.
      expect(graded(await match(params(zoe(), [{ name: 'count', valueInteger: 100000 }]))))
        .toEqual([['certain', 'probable'], ['other-mrn', 'probable'], ['same-demographics', 'probable'], ['other-system', 'probable'], ['phonetic', 'possible']]);
    });

    test('access: a search\'s scopes, SMART v2 filters and patient context', async () => {
      const query = params(zoe({ identifier: [{ system: MRN, value: '123' }] }));
      const filtered = fhirClient(t, await craftToken(t, 'system/Patient.rs?birthdate=1980'));
      expect(graded(await match(query, filtered)).map(([id]: string[]) => id)).toEqual(['certain', 'other-system', 'same-demographics', 'other-mrn', 'phonetic']);
      const female = fhirClient(t, await craftToken(t, 'system/Patient.rs?gender=female'));
      expect(graded(await match(query, female)).map(([id]: string[]) => id)).toEqual(['certain', 'same-demographics', 'other-mrn']);
      const own = fhirClient(t, await craftToken(t, 'patient/Patient.rs', { patient: 'same-demographics' }));
      expect(graded(await match(query, own))).toEqual([['same-demographics', 'probable']]);
      const stranger = fhirClient(t, await craftToken(t, 'patient/Patient.rs', { patient: 'unrelated' }));
      expect(graded(await match(query, stranger))).toEqual([]);
      await expectOutcome(await fhirClient(t, await craftToken(t, 'system/Observation.rs')).post('Patient/$match', query), 403);
      await expectOutcome(await fhirClient(t, await craftToken(t, 'system/Patient.c')).post('Patient/$match', query), 403);
    });

    test('bad input: 400 naming the parameter, 422 naming the invalid element, 405 for GET', async () => {
      const expr = async (body: unknown, status: number) => (await expectOutcome(await api.post('Patient/$match', body), status)).issue[0].expression;
      expect(await expr(zoe(), 400)).toEqual(['resource']);
      expect(await expr({ resourceType: 'Parameters' }, 400)).toEqual(['resource']);
      expect(await expr({ resourceType: 'Parameters', parameter: [{ name: 'resource', valueString: 'x' }] }, 400)).toEqual(['resource']);
      expect(await expr(params({ resourceType: 'Observation', status: 'final', code: { text: 'x' } }), 400)).toEqual(['resource']);
      expect(await expr(params({ resourceType: 'Patient', gender: 'female' }), 400)).toEqual(['resource']);
      expect(await expr(params(zoe(), [{ name: 'count', valueInteger: 0 }]), 400)).toEqual(['count']);
      expect(await expr(params(zoe(), [{ name: 'count', valueString: '5' }]), 400)).toEqual(['count']);
      expect(await expr(params(zoe(), [{ name: 'onlyCertainMatches', valueString: 'true' }]), 400)).toEqual(['onlyCertainMatches']);
      expect(await expr(params(zoe(), [{ name: 'count', valueInteger: 1 }, { name: 'count', valueInteger: 2 }]), 400)).toEqual(['count']);
      expect(await expr(params(zoe(), [{ name: 'limit', valueInteger: 1 }]), 400)).toEqual(['Parameters.parameter[1]']);
      const invalid = await expectOutcome(await api.post('Patient/$match', params(zoe({ birthDate: 'yesterday', gender: 'woman' }))), 422);
      expect(invalid.issue.map((i: Json) => i.expression[0]).sort()).toEqual(['Parameters.parameter[0].resource.birthDate', 'Parameters.parameter[0].resource.gender']);
      const get = await api.get('Patient/$match');
      await expectOutcome(get, 405);
      expect(get.headers.get('allow')).toBe('POST');
      await expectOutcome(await api.post('Observation/$match', params(zoe())), 404);
    });

    test('CINDER_VALIDATION=off: a malformed Patient is matched by what can be read of it, never a 500', async () => {
      const off = await createTestApp({ store: await fresh(), env: { CINDER_VALIDATION: 'off' } });
      try {
        const client = fhirClient(off, await off.token());
        await client.put200({ resourceType: 'Patient', id: 'odd', name: 'Muller', identifier: [{ system: MRN, value: '123' }], birthDate: 1980, telecom: [null] });
        const b = await match(params({ resourceType: 'Patient', identifier: [{ system: MRN, value: '123' }, 'x'], name: [{ family: 7, given: 'zoe' }], birthDate: 'soon', address: [null] }), client);
        expect(graded(b)).toEqual([['odd', 'certain']]);
        // Nothing readable to match by is still a 400.
        await expectOutcome(await client.post('Patient/$match', params({ resourceType: 'Patient', name: 'x' })), 400);
      } finally {
        off.close();
      }
    });

    test('a block of more than 100 Patients scores 100 of them and says so', async () => {
      const entry = Array.from({ length: 101 }, (_, i) => ({
        resource: { resourceType: 'Patient', name: [{ family: 'Common', given: ['Pat'] }], birthDate: `1${String(i).padStart(3, '0')}-01-01` },
        request: { method: 'POST', url: 'Patient' },
      }));
      expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry })).status).toBe(200);
      const b = await match(params({ resourceType: 'Patient', name: [{ family: 'common', given: ['pat'] }] }));
      expect(graded(b).length).toBe(10);
      const issues = b.entry.at(-1).resource.issue;
      expect(issues[0]).toMatchObject({ severity: 'warning', code: 'too-costly' });
      expect(issues[0].diagnostics).toContain('family=common&given=pat');
      expect(issues[1].diagnostics).toContain('90 more');
    });

    test('the CapabilityStatement lists the operation on Patient', async () => {
      const cs = (await (await api.get('metadata')).json()) as Json;
      const patient = cs.rest[0].resource.find((r: Json) => r.type === 'Patient');
      expect(patient.operation).toContainEqual({ name: 'match', definition: 'http://hl7.org/fhir/OperationDefinition/Patient-match' });
    });
  });
});
