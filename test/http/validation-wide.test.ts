/**
 * R4 invariants that compare each of many values with a collection the resource holds once are checked
 * in time proportional to the resource, on both databases: ref-1 (each `#id` Reference against
 * `%rootResource.contained.id`), obs-7 (each component's code against `%resource.code.coding`), sdf-8
 * (each snapshot element's path against `%resource.snapshot.element.first()`) and ig-1 (each groupingId
 * against `%context.grouping.id`). With 30,000 of each (60,000 for sdf-8) they were evaluated once per
 * item, each time over the whole collection: 40 to 80 s of the event loop each, for a body of a few MiB.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const N = 30_000;
const range = (n: number) => Array.from({ length: n }, (_, i) => i);
/** The time a request may take (package.json's `bun test --timeout 30000`): 40 to 80 s before these were linear. */
const TIMEOUT = 30_000;
/** A test's, of a few such requests: their own bound is TIMEOUT, which a loaded machine's two may exceed together. */
const WIDE_TEST_TIMEOUT = 120_000;

/**
 * `request()`, which must answer within TIMEOUT: Bun does not end a test whose event loop a
 * request holds, so the timeout is checked when the answer comes.
 */
async function answered(request: () => Response | Promise<Response>): Promise<Response> {
  const started = performance.now();
  const res = await request();
  expect(performance.now() - started).toBeLessThan(TIMEOUT);
  return res;
}

/** The resource `request()` creates, answered within TIMEOUT. */
async function stored(request: () => Response | Promise<Response>): Promise<Json> {
  const res = await answered(request);
  const body = (await res.json()) as Json;
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
  return body;
}

/** The issues of an OperationOutcome naming invariant `key`, by expression. */
function invariantIssues(outcome: Json, key: string): string[] {
  return outcome.issue.filter((i: Json) => i.details?.text?.includes(`(${key})`)).map((i: Json) => i.expression?.[0]);
}

await eachStore((kind, fresh) => {
  describe(`invariants over wide resources on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('ref-1: 30,000 References to 30,000 contained resources are stored; one to a missing #id is refused at its index', async () => {
      const patient = (refs: string[]) => ({
        resourceType: 'Patient',
        contained: range(N).map((i) => ({ resourceType: 'Practitioner', id: `c${i}` })),
        generalPractitioner: refs.map((reference) => ({ reference })),
      });
      const refs = range(N).map((i) => `#c${i}`);
      const outcome = await expectOutcome(await answered(() => api.post('Patient', patient([...refs.slice(0, 20_000), '#missing', ...refs.slice(20_000)]))), 422);
      expect(invariantIssues(outcome, 'ref-1')).toEqual(['Patient.generalPractitioner[20000]']);
      const created = await stored(() => api.post('Patient', patient(refs)));
      expect(created.contained.length).toBe(N);
    }, WIDE_TEST_TIMEOUT);

    test('obs-7: an Observation with 30,000 codings and 30,000 components is stored; a component repeating a code is refused', async () => {
      const observation = (repeat: boolean) => ({
        resourceType: 'Observation', status: 'final', valueString: 'x',
        code: { coding: range(N).map((i) => ({ system: 'urn:example:a', code: `a${i}` })) },
        component: range(N).map((i) => ({
          code: { coding: [repeat && i === N - 1 ? { system: 'urn:example:a', code: 'a12345' } : { system: 'urn:example:b', code: `b${i}` }] },
          valueString: 'y',
        })),
      });
      const outcome = await expectOutcome(await answered(() => api.post('Observation', observation(true))), 422);
      expect(invariantIssues(outcome, 'obs-7')).toEqual(['Observation']);
      const created = await stored(() => api.post('Observation', observation(false)));
      expect(created.component.length).toBe(N);
    }, WIDE_TEST_TIMEOUT);

    test('sdf-8: a StructureDefinition snapshot of 60,000 elements is stored; one element off the type is refused', async () => {
      // sdf-8 reads the first element's path (`%resource.snapshot.element.first()`) for each element: 60,000 took 80 s.
      const N = 60_000;
      const element = (path: string) => ({ id: path, path, min: 0, max: '1', definition: 'd', base: { path, min: 0, max: '1' }, type: [{ code: 'string' }] });
      const definition = (stray: boolean) => ({
        resourceType: 'StructureDefinition', url: `http://example.org/sd-${kind}-${stray}`, name: 'Wide', status: 'draft', kind: 'logical',
        abstract: false, type: 'Wide', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Element', derivation: 'specialization',
        snapshot: {
          element: [
            { id: 'Wide', path: 'Wide', min: 0, max: '*', definition: 'd', base: { path: 'Wide', min: 0, max: '*' } },
            ...range(N).map((i) => element(stray && i === N - 1 ? `Other.e${i}` : `Wide.e${i}`)),
          ],
        },
      });
      const outcome = await expectOutcome(await answered(() => api.post('StructureDefinition', definition(true))), 422);
      expect(invariantIssues(outcome, 'sdf-8')).toEqual(['StructureDefinition.snapshot']);
      const created = await stored(() => api.post('StructureDefinition', definition(false)));
      expect(created.snapshot.element.length).toBe(N + 1);
    }, WIDE_TEST_TIMEOUT);

    test('ig-1: an ImplementationGuide of 30,000 groupings and resources is stored; a groupingId naming none is refused', async () => {
      const guide = (stray: boolean) => ({
        resourceType: 'ImplementationGuide', url: `http://example.org/ig-${kind}-${stray}`, name: 'Wide', status: 'draft', packageId: 'wide',
        fhirVersion: ['4.0.1'],
        definition: {
          grouping: range(N).map((i) => ({ id: `g${i}`, name: `g${i}` })),
          resource: range(N).map((i) => ({ reference: { reference: `Patient/p${i}` }, groupingId: stray && i === N - 1 ? 'nowhere' : `g${N - 1 - i}` })),
        },
      });
      const outcome = await expectOutcome(await answered(() => api.post('ImplementationGuide', guide(true))), 422);
      expect(invariantIssues(outcome, 'ig-1')).toEqual(['ImplementationGuide.definition']);
      const created = await stored(() => api.post('ImplementationGuide', guide(false)));
      expect(created.definition.resource.length).toBe(N);
    }, WIDE_TEST_TIMEOUT);
  });
});
