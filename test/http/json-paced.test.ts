/**
 * A large JSON Bundle lets the process's other requests run while it is read (src/fhir/json-paced.ts) and while
 * its entries and its own elements are checked (parseBundle, pacedShellErrors): each ran over the whole body in
 * one synchronous step (a 49 MiB transaction held the event loop about 2.4 s before its entries' paced steps).
 * What it answers is unchanged: the numbers as written, the 400s of the whole text.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';
import { tailHold } from '../helpers/loop.ts';
import { parseJson } from '../../src/fhir/resource.ts';

function patient(i: number): Json {
  return {
    fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    resource: { resourceType: 'Patient', name: [{ family: `Lee ${i}`, given: ['Ann'] }], birthDate: '1970-01-01' },
    request: { method: 'POST', url: 'Patient' },
  };
}

/** Twice the text read between two looks at the clock (JSON_SLICE, src/fhir/json-paced.ts). */
const SLICES = 2 * 256 * 1024;

const bundle = (n: number, type = 'transaction'): Json => ({ resourceType: 'Bundle', type, entry: Array.from({ length: n }, (_, i) => patient(i)) });

await eachStore((kind, fresh) => {
  describe(`JSON Bundles read in slices (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const post = (body: BodyInit) =>
      t.request(t.fhir(), { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body });
    const count = async (type: string) =>
      ((await (await t.request(`${t.fhir()}/${type}?_summary=count`, { headers: { Authorization: `Bearer ${token}` } })).json()) as Json).total as number;
    /** The status, diagnostics and expression parseJson gives of the whole text. */
    const refusal = (text: string) => {
      try {
        parseJson(text);
      } catch (err) {
        return [400, (err as Error).message, (err as { issues: Json[] }).issues[0]!.expression];
      }
      throw new Error('the text parses');
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
    });
    afterAll(() => t.close());

    test('a transaction many slices long stores every entry, a number written otherwise keeping its text far into the body', async () => {
      const b = bundle(3000);
      (b.entry[2500].resource as Json).multipleBirthInteger = 2;
      b.entry[2600].resource = { resourceType: 'Observation', status: 'final', code: { text: 'w' }, valueQuantity: { value: 1, unit: 'kg', system: 'http://unitsofmeasure.org', code: 'kg' } };
      b.entry[2600].request = { method: 'POST', url: 'Observation' };
      const text = JSON.stringify(b).replace('"valueQuantity":{"value":1,', '"valueQuantity":{"value":70.50,');
      expect(text.length).toBeGreaterThan(SLICES);
      const res = await post(text);
      const answer = (await res.json()) as Json;
      expect([res.status, answer.entry.length]).toEqual([200, 3000]);
      const read = await t.request(answer.entry[2600].response.location.replace(/\/_history\/.*$/, ''), { headers: { Authorization: `Bearer ${token}` } });
      expect(await read.text()).toContain('"valueQuantity":{"value":70.50,');
    });

    test('malformed JSON in an entry far into a long body is the 400 the whole text gives, and nothing is stored', async () => {
      const before = await count('Patient');
      const text = JSON.stringify(bundle(3000)).replace('"family":"Lee 2900",', '"family":"Lee 2900",,');
      expect(text.length).toBeGreaterThan(SLICES);
      const res = await post(text);
      const body = (await res.json()) as Json;
      expect([res.status, body.issue[0].diagnostics, body.issue[0].expression]).toEqual(refusal(text));
      expect(await count('Patient')).toBe(before);
    });

    test('a member name given twice far into a long body is the 400 naming where, as the whole text gives it', async () => {
      const text = JSON.stringify(bundle(3000)).replace('"family":"Lee 2900",', '"family":"Lee 2900","family":"Li",');
      const res = await post(text);
      const body = (await res.json()) as Json;
      const want = refusal(text);
      expect(want[2]).toEqual(['Bundle.entry[2900].resource.name[0].family']);
      expect([res.status, body.issue[0].diagnostics, body.issue[0].expression]).toEqual(want);
    });

    test("a large transaction's entries and its own elements are checked with turns of the event loop, up to the 400 of its last entry", async () => {
      const n = 60_000;
      const b = bundle(n);
      b.entry[n - 1].request = { method: 'POST', url: 'Patient/x' };
      // Encoded before: what the client does is not the server's work.
      const body = new TextEncoder().encode(JSON.stringify(b));
      const { result: res, took, tail } = await tailHold(() => post(body));
      const outcome = (await res.json()) as Json;
      expect([res.status, outcome.issue.map((i: Json) => i.expression[0])]).toEqual([400, [`Bundle.entry[${n - 1}].request.url`]]);
      // Read, parsed, its entries' requests and the Bundle's own elements checked in one hold up to the 400 (its
      // tail: most of its time); paced, the loop turns every 10 ms (WORK_SLICE_MS) up to the answer.
      expect({ took: took > 80, tail: tail < took / 4 }).toEqual({ took: true, tail: true });
    });

    test("a large transaction whose entries have element ids is checked with turns of the event loop, up to the 422 of an id given again in its last entry", async () => {
      const n = 60_000;
      // With an id of its own, which is no element id.
      const b: Json = { id: 'tx-1', ...bundle(n) };
      b.entry.forEach((e: Json, i: number) => (e.id = `e${i}`));
      b.entry[n - 1].id = 'e0';
      const body = new TextEncoder().encode(JSON.stringify(b));
      const { result: res, took, tail } = await tailHold(() => post(body));
      const outcome = (await res.json()) as Json;
      expect([res.status, outcome.issue.map((i: Json) => [i.expression[0], i.diagnostics])]).toEqual([
        422, [[`Bundle.entry[${n - 1}].id`, "Element ids must be unique within a resource: 'e0' is also the id of Bundle.entry[0]"]],
      ]);
      // Entries with element ids were validated in one call of the whole Bundle (its tail: most of its time); in chunks
      // sharing the ids met, the loop turns every 10 ms up to the answer.
      expect({ took: took > 80, tail: tail < took / 4 }).toEqual({ took: true, tail: true });
    });
  });
});

describe('the event loop while a JSON body is read', () => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await createTestApp();
    token = await t.token();
  });
  afterAll(() => t.close());

  test('a large JSON Bundle lets the event loop turn while it is read, up to its answer', async () => {
    // A collection is no transaction: the answer is the 400 that follows reading the body, with no other work after it.
    const body = new TextEncoder().encode(JSON.stringify(bundle(120_000, 'collection')));
    const { result: res, took, tail } = await tailHold(() =>
      t.request(t.fhir(), { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body }));
    const outcome = (await res.json()) as Json;
    expect([res.status, outcome.issue[0].expression]).toEqual([400, ['Bundle.type']]);
    // Scanned and parsed in one call, the body held the loop to the 400 (its tail: most of its time); read in
    // slices and entries, the loop turns every 10 ms.
    expect({ took: took > 80, tail: tail < took / 4 }).toEqual({ took: true, tail: true });
  });

  test('a large JSON Bundle malformed far into it, or giving a name twice there, is the 400 of the whole text with turns of the event loop up to it', async () => {
    const n = 100_000;
    const text = JSON.stringify(bundle(n));
    const at = `"family":"Lee ${n - 100}",`;
    const cases: [string, string[] | undefined][] = [[text.replace(at, `${at},`), undefined], [text.replace(at, `${at}"family":"Li",`), [`Bundle.entry[${n - 100}].resource.name[0].family`]]];
    for (const [changed, expression] of cases) {
      const body = new TextEncoder().encode(changed);
      const { result: res, took, tail } = await tailHold(() =>
        t.request(t.fhir(), { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body }));
      const outcome = (await res.json()) as Json;
      const [status, diagnostics, want] = refusalOf(changed);
      expect([res.status, outcome.issue[0].diagnostics, outcome.issue[0].expression]).toEqual([status, diagnostics, want]);
      expect(want).toEqual(expression);
      // Parsed whole for the 400's words (and its path walked from the start), the body held the loop to the answer (its
      // tail: 30-60% of its time); read in pieces, the 400 comes from the piece that holds it (1%).
      expect({ took: took > 80, tail: tail < took / 4 }).toEqual({ took: true, tail: true });
    }
  });
});

describe('the event loop while a large resource that is no Bundle is read', () => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await createTestApp();
    token = await t.token();
  });
  afterAll(() => t.close());

  test("a CodeSystem's concepts are parsed a slice's worth at a time, up to the 400 of a name given twice or malformed JSON in its last concepts", async () => {
    const n = 110_000;
    const concept = Array.from({ length: n }, (_, i) => ({ code: `c${i}`, display: `Concept number ${i} of a large code system`, designation: [{ language: 'de', value: `Begriff ${i}` }] }));
    const text = JSON.stringify({ resourceType: 'CodeSystem', id: 'big', url: 'http://example.org/cs', status: 'draft', content: 'complete', concept });
    const at = `"code":"c${n - 10}",`;
    const cases: [string, string[] | undefined][] = [[text.replace(at, `${at},`), undefined], [text.replace(at, `${at}"code":"again",`), [`CodeSystem.concept[${n - 10}].code`]]];
    for (const [changed, expression] of cases) {
      const body = new TextEncoder().encode(changed);
      const { result: res, took, tail } = await tailHold(() =>
        t.request(`${t.fhir()}/CodeSystem/big`, { method: 'PUT', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body }));
      const outcome = (await res.json()) as Json;
      const [status, diagnostics, want] = refusalOf(changed);
      expect([res.status, outcome.issue[0].diagnostics, outcome.issue[0].expression]).toEqual([status, diagnostics, want]);
      expect(want).toEqual(expression);
      // A resource that is no Bundle was parsed whole, to its 400 (its tail: most of what follows reading the body); its
      // longest array is now read as a Bundle's entries are.
      expect({ took: took > 60, tail: tail < took / 4 }).toEqual({ took: true, tail: true });
    }
  });
});

/** The status, diagnostics and expression parseJson gives of the whole text. */
function refusalOf(text: string): [number, string, string[] | undefined] {
  try {
    parseJson(text);
  } catch (err) {
    return [400, (err as Error).message, (err as { issues: Json[] }).issues[0]!.expression];
  }
  throw new Error('the text parses');
}
