/**
 * The text of a Reference.reference, as HL7's validator judges it: whitespace makes it no reference (an
 * error, refused on write at strict and structural), a relative reference that is not `Type/id` or
 * `Type/id/_history/vid` of a known type is suspicious (a warning in `$validate`, accepted on write), and
 * in a Bundle entry with a fullUrl one of other than 1 or 3 slashes cannot be resolved (an error). The
 * forms R4 allows stay accepted: `#id`, `urn:uuid:`, absolute URLs, identifier-only references,
 * conditional references, and any type where the target is `Resource`. On both databases.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const observation = (subject: Json, extra: Json = {}): Json => ({ resourceType: 'Observation', status: 'final', code: { text: 'weight' }, subject, ...extra });

/** `severity expression` of each issue `$validate` gives (the all-clear information left out). */
async function validated(api: FhirClient, resource: Json): Promise<string[]> {
  const res = await api.post(`${resource.resourceType}/$validate`, resource);
  expect(res.status).toBe(200);
  const outcome = (await res.json()) as Json;
  return (outcome.issue as Json[]).filter((i) => i.severity !== 'information').map((i) => `${i.severity} ${i.expression[0]}`).sort();
}

await eachStore((kind, fresh) => {
  describe(`the text of a reference on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeEach(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterEach(() => t.close());

    test('a reference holding whitespace is refused, named at its reference, and nothing is written', async () => {
      for (const ref of ['Patient/a b', ' Patient/1', 'Patient/1\n', 'http://example.org/fhir/Patient/a b']) {
        const outcome = await expectOutcome(await api.post('Observation', observation({ reference: ref })), 422);
        const errors = (outcome.issue as Json[]).filter((i) => i.severity === 'error');
        expect(errors.map((i) => i.expression[0])).toEqual(['Observation.subject.reference']);
        expect(errors[0]!.details.text).toContain('is not a valid reference');
      }
      expect(await countVersions(t)).toBe(0);
    });

    test('a malformed relative reference is a warning in $validate, named at its reference, and the write keeps it as sent', async () => {
      for (const ref of ['Patient/', '/Patient/1', 'Patient/1/_history', 'Patient//1', 'Foo/1', 'patient/1', 'Patient/1/extra', 'Patient/1/_history/']) {
        expect(await validated(api, observation({ reference: ref }))).toEqual(['warning Observation.subject.reference']);
        const stored = await api.create(observation({ reference: ref }));
        expect(stored.subject).toEqual({ reference: ref });
      }
      const outcome = (await (await api.post('Observation/$validate', observation({ reference: 'Foo/1' }))).json()) as Json;
      expect((outcome.issue as Json[])[0]!.details.text).toContain('"Foo" is no R4 resource type');
    });

    test('the forms R4 allows are accepted without a word: contained, urn:uuid, absolute, versioned, logical, conditional, any type for a Resource target', async () => {
      const contained = observation({ reference: '#p' }, { contained: [{ resourceType: 'Patient', id: 'p' }] });
      const cases: Json[] = [
        contained,
        observation({ reference: 'urn:uuid:0b5b4b4e-4f8a-4c59-9f5e-8d7d0e3f8a11' }),
        observation({ reference: 'http://example.org/fhir/Patient/1' }),
        observation({ reference: 'https://example.org/fhir/Patient/1/_history/2' }),
        observation({ reference: 'Patient/1/_history/2' }),
        observation({ reference: 'Group/a.b-c' }),
        observation({ identifier: { system: 'http://example.org/mrn', value: '12345' } }),
        observation({ reference: 'Patient?identifier=http://example.org/mrn|12345' }),
        observation({ reference: 'Patient?identifier=http://example.org/name-key|Ann Lee' }),
        // Provenance.target and List.entry.item are Reference(Any): every resource type.
        { resourceType: 'Provenance', target: [{ reference: 'Medication/1' }, { reference: 'Basic/x' }], recorded: '2024-01-01T00:00:00Z', agent: [{ who: { reference: 'Practitioner/1' } }] },
      ];
      for (const r of cases) expect(await validated(api, r)).toEqual([]);
    });

    test('in a Bundle entry with a fullUrl, a relative reference of other than 1 or 3 slashes is an error; without a fullUrl, a warning', async () => {
      const collection = (fullUrl: string | undefined, ref: string): Json => ({
        resourceType: 'Bundle', type: 'collection',
        entry: [{ ...(fullUrl ? { fullUrl } : {}), resource: observation({ reference: ref }, { id: 'o1' }) }],
      });
      expect(await validated(api, collection('http://example.org/fhir/Observation/o1', '/Patient/1'))).toEqual(['error Bundle.entry[0].resource.subject.reference']);
      expect(await validated(api, collection('http://example.org/fhir/Observation/o1', 'Patient/1/_history'))).toEqual(['error Bundle.entry[0].resource.subject.reference']);
      // One slash, but no valid `Type/id`: only suspicious, as outside a Bundle.
      expect(await validated(api, collection('http://example.org/fhir/Observation/o1', 'Foo/1'))).toEqual(['warning Bundle.entry[0].resource.subject.reference']);
      expect((await api.post('Bundle', collection('http://example.org/fhir/Observation/o1', '/Patient/1'))).status).toBe(422);
      expect(await validated(api, collection('http://example.org/fhir/Observation/o1', 'Patient/1'))).toEqual([]);
      expect((await api.post('Bundle', collection('http://example.org/fhir/Observation/o1', 'Patient/1'))).status).toBe(201);
    });

    test('a transaction or batch entry with a fullUrl is held to the same shapes: other than 1 or 3 slashes is refused, naming the entry', async () => {
      const uuid = (n: number) => `urn:uuid:7d1c2a3b-4e5f-4a6b-8c7d-9e0f1a2b3c${String(n).padStart(2, '0')}`;
      const bundle = (type: string, entries: [string | undefined, string][]): Json => ({
        resourceType: 'Bundle', type,
        entry: entries.map(([fullUrl, ref]) => ({ ...(fullUrl ? { fullUrl } : {}), resource: observation({ reference: ref }), request: { method: 'POST', url: 'Observation' } })),
      });
      for (const ref of ['/Patient/1', 'Patient/1/_history', 'Patient//1/x/y']) {
        const before = await countVersions(t);
        // A transaction: refused whole, naming the entry's reference, nothing written.
        const outcome = await expectOutcome(await api.post('', bundle('transaction', [[uuid(1), 'Patient/1'], [uuid(2), ref]])), 422);
        const errors = (outcome.issue as Json[]).filter((i) => i.severity === 'error');
        expect(errors.map((i) => i.expression[0])).toEqual(['Bundle.entry[1].resource.subject.reference']);
        expect(errors[0]!.details.text).toContain('is not a valid relative reference');
        expect(await countVersions(t)).toBe(before);
        // A batch: that entry is refused, the other written.
        const res = await api.post('', bundle('batch', [[uuid(3), 'Patient/1'], [uuid(4), ref]]));
        expect(res.status).toBe(200);
        const answers = ((await res.json()) as Json).entry as Json[];
        expect(answers.map((e) => String(e.response.status).slice(0, 3))).toEqual(['201', '422']);
        expect((answers[1]!.response.outcome.issue as Json[]).filter((i) => i.severity === 'error').map((i) => i.expression[0])).toEqual(['Bundle.entry[1].resource.subject.reference']);
        expect(await countVersions(t)).toBe(before + 1);
      }
    });

    test('a transaction or batch entry without a fullUrl keeps such a reference as sent (a warning, as outside a Bundle)', async () => {
      for (const type of ['transaction', 'batch']) {
        const res = await api.post('', { resourceType: 'Bundle', type, entry: [{ resource: observation({ reference: '/Patient/1' }), request: { method: 'POST', url: 'Observation' } }] });
        expect(res.status).toBe(200);
        const [answer] = ((await res.json()) as Json).entry as Json[];
        expect(String(answer!.response.status)).toStartWith('201');
        const stored = (await (await api.get(String(answer!.response.location))).json()) as Json;
        expect(stored.subject).toEqual({ reference: '/Patient/1' });
      }
    });

    test('a reference to a type the element does not allow stays refused, relative or absolute', async () => {
      for (const ref of ['Medication/1', 'http://example.org/fhir/Medication/1']) {
        const outcome = await expectOutcome(await api.post('Observation', observation({ reference: ref })), 422);
        expect((outcome.issue as Json[]).map((i) => i.expression[0])).toEqual(['Observation.subject.reference']);
      }
    });

    test("a transaction's urn:uuid and conditional references are validated as written, then resolved", async () => {
      await api.create({ resourceType: 'Patient', identifier: [{ system: 'http://example.org/mrn', value: '7' }, { system: 'http://example.org/name-key', value: 'Ann Lee' }] });
      const uuid = 'urn:uuid:61ebe359-bfdc-4613-8bf2-c5e300945f0a';
      const res = await api.post('', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          { fullUrl: uuid, resource: { resourceType: 'Patient', name: [{ family: 'Chalmers' }] }, request: { method: 'POST', url: 'Patient' } },
          { resource: observation({ reference: uuid }), request: { method: 'POST', url: 'Observation' } },
          { resource: observation({ reference: 'Patient?identifier=http://example.org/mrn|7' }), request: { method: 'POST', url: 'Observation' } },
          // A conditional reference is a search: its value may hold a space, as a query's may (not a reference's text).
          { resource: observation({ reference: 'Patient?identifier=http://example.org/name-key|Ann Lee' }), request: { method: 'POST', url: 'Observation' } },
        ],
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      // Each location as `Type/id`.
      const [patient, first, second, third] = (body.entry as Json[]).map((e) => /([A-Za-z]+\/[^/]+)\/_history\/[^/]+$/.exec(e.response.location as string)![1]!);
      expect(patient).toMatch(/^Patient\//);
      const read = async (location: string) => (await (await api.get(location)).json()) as Json;
      expect((await read(first!)).subject.reference).toBe(patient!);
      expect((await read(second!)).subject.reference).toMatch(/^Patient\/[A-Za-z0-9\-.]+$/);
      expect((await read(third!)).subject.reference).toBe((await read(second!)).subject.reference);
    });
  });
});

describe('at CINDER_VALIDATION=structural', () => {
  test('a reference holding whitespace is refused too; a malformed one is accepted', async () => {
    const t = await createTestApp({ env: { CINDER_VALIDATION: 'structural' } });
    try {
      const api = fhirClient(t, await t.token());
      await expectOutcome(await api.post('Observation', observation({ reference: 'Patient/a b' })), 422);
      expect((await api.post('Observation', observation({ reference: 'Patient/' }))).status).toBe(201);
    } finally {
      t.close();
    }
  });
});
