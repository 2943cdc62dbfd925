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
import { validateResource } from '../../src/fhir/validation/validate.ts';
import { counted } from '../helpers/counted.ts';

const N = 30_000;
const range = (n: number) => Array.from({ length: n }, (_, i) => i);
/** A test's, of a few requests each of a few MiB on a loaded machine (40 to 80 s a request before these were linear). */
const WIDE_TEST_TIMEOUT = 120_000;

/** The resource `request()` creates. */
async function stored(request: () => Response | Promise<Response>): Promise<Json> {
  const res = await request();
  const body = (await res.json()) as Json;
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
  return body;
}

/** A Patient with `n` contained Practitioners, and these References. */
const patient = (n: number, refs: string[]) => ({
  resourceType: 'Patient',
  contained: range(n).map((i) => ({ resourceType: 'Practitioner', id: `c${i}` })),
  generalPractitioner: refs.map((reference) => ({ reference })),
});

/** An Observation with `n` codings and `n` components, the last repeating a coding when `repeat`. */
const observation = (n: number, repeat: boolean) => ({
  resourceType: 'Observation', status: 'final', valueString: 'x',
  code: { coding: range(n).map((i) => ({ system: 'urn:example:a', code: `a${i}` })) },
  component: range(n).map((i) => ({
    code: { coding: [repeat && i === n - 1 ? { system: 'urn:example:a', code: 'a12345' } : { system: 'urn:example:b', code: `b${i}` }] },
    valueString: 'y',
  })),
});

/** A logical StructureDefinition whose snapshot holds `n` elements under its root, the last off the type when `stray`. */
function definition(n: number, stray: boolean, url: string): Json {
  const element = (path: string) => ({ id: path, path, min: 0, max: '1', definition: 'd', base: { path, min: 0, max: '1' }, type: [{ code: 'string' }] });
  return {
    resourceType: 'StructureDefinition', url, name: 'Wide', status: 'draft', kind: 'logical',
    abstract: false, type: 'Wide', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Element', derivation: 'specialization',
    snapshot: {
      element: [
        { id: 'Wide', path: 'Wide', min: 0, max: '*', definition: 'd', base: { path: 'Wide', min: 0, max: '*' } },
        ...range(n).map((i) => element(stray && i === n - 1 ? `Other.e${i}` : `Wide.e${i}`)),
      ],
    },
  };
}

/** An ImplementationGuide of `n` groupings and `n` resources, the last resource's groupingId naming none when `stray`. */
const guide = (n: number, stray: boolean, url: string) => ({
  resourceType: 'ImplementationGuide', url, name: 'Wide', status: 'draft', packageId: 'wide',
  fhirVersion: ['4.0.1'],
  definition: {
    grouping: range(n).map((i) => ({ id: `g${i}`, name: `g${i}` })),
    resource: range(n).map((i) => ({ reference: { reference: `Patient/p${i}` }, groupingId: stray && i === n - 1 ? 'nowhere' : `g${n - 1 - i}` })),
  },
});

/** The members validating `resource` reads, and the invariants it finds broken. */
function validationWork(resource: Json): { reads: number; broken: (string | undefined)[] } {
  const reads = { n: 0 };
  const issues = validateResource(counted(resource, reads), 'strict');
  return { reads: reads.n, broken: issues.filter((i) => i.code === 'invariant').map((i) => i.invariant) };
}

describe('invariants over wide resources: their work', () => {
  // Twice the items read about twice the members: each item's check reads the collection once per walk, not once per
  // item (which read about four times as many at twice the items).
  const cases: [string, (n: number) => Json][] = [
    ['ref-1', (n) => patient(n, range(n).map((i) => `#c${i}`))],
    ['obs-7', (n) => observation(n, false)],
    ['sdf-8', (n) => definition(n, false, 'http://example.org/sd-work')],
    ['ig-1', (n) => guide(n, false, 'http://example.org/ig-work')],
  ];
  for (const [key, make] of cases) {
    test(`${key}: validating 2,000 items reads at most 2.5 times the members 1,000 do`, () => {
      const one = validationWork(make(1_000));
      const two = validationWork(make(2_000));
      expect([one.broken, two.broken]).toEqual([[], []]);
      expect(two.reads).toBeLessThan(2.5 * one.reads);
    });
  }
});

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
      const refs = range(N).map((i) => `#c${i}`);
      const outcome = await expectOutcome(await api.post('Patient', patient(N, [...refs.slice(0, 20_000), '#missing', ...refs.slice(20_000)])), 422);
      expect(invariantIssues(outcome, 'ref-1')).toEqual(['Patient.generalPractitioner[20000]']);
      const created = await stored(() => api.post('Patient', patient(N, refs)));
      expect(created.contained.length).toBe(N);
    }, WIDE_TEST_TIMEOUT);

    test('obs-7: an Observation with 30,000 codings and 30,000 components is stored; a component repeating a code is refused', async () => {
      const outcome = await expectOutcome(await api.post('Observation', observation(N, true)), 422);
      expect(invariantIssues(outcome, 'obs-7')).toEqual(['Observation']);
      const created = await stored(() => api.post('Observation', observation(N, false)));
      expect(created.component.length).toBe(N);
    }, WIDE_TEST_TIMEOUT);

    test('sdf-8: a StructureDefinition snapshot of 60,000 elements is stored; one element off the type is refused', async () => {
      // sdf-8 reads the first element's path (`%resource.snapshot.element.first()`) for each element: 60,000 took 80 s.
      const N = 60_000;
      const outcome = await expectOutcome(await api.post('StructureDefinition', definition(N, true, `http://example.org/sd-${kind}-true`)), 422);
      expect(invariantIssues(outcome, 'sdf-8')).toEqual(['StructureDefinition.snapshot']);
      const created = await stored(() => api.post('StructureDefinition', definition(N, false, `http://example.org/sd-${kind}-false`)));
      expect(created.snapshot.element.length).toBe(N + 1);
    }, WIDE_TEST_TIMEOUT);

    test('ig-1: an ImplementationGuide of 30,000 groupings and resources is stored; a groupingId naming none is refused', async () => {
      const outcome = await expectOutcome(await api.post('ImplementationGuide', guide(N, true, `http://example.org/ig-${kind}-true`)), 422);
      expect(invariantIssues(outcome, 'ig-1')).toEqual(['ImplementationGuide.definition']);
      const created = await stored(() => api.post('ImplementationGuide', guide(N, false, `http://example.org/ig-${kind}-false`)));
      expect(created.definition.resource.length).toBe(N);
    }, WIDE_TEST_TIMEOUT);
  });
});
