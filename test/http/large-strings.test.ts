/**
 * A large string of a resource (a Binary's `data`, an attachment's) is checked in slices that let the event
 * loop turn (primeStrings, src/fhir/validation/large-strings.ts): its character and base64 checks were one
 * pass of a regular expression each over the whole value (about 160 ms for a 50 MiB Binary's 67 Mi
 * characters), after which the answer came. What a write answers is unchanged.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';
import { tailHold } from '../helpers/loop.ts';

/** A slice of paced work, in ms (WORK_SLICE_MS, src/fhir/turns.ts): the most the loop waits between two turns. */
const SLICE_MS = 10;

/** `n` bytes of content as base64. */
function base64Of(n: number): string {
  const bytes = new Uint8Array(n);
  for (let i = 0; i < n; i++) bytes[i] = (i * 7) % 251;
  return Buffer.from(bytes).toString('base64');
}

await eachStore((kind, fresh) => {
  describe(`large strings checked in slices (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const put = (type: string, id: string, body: Json) =>
      t.request(`${t.fhir()}/${type}/${id}`, { method: 'PUT', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify(body) });
    const issues = async (res: Response) => ((await res.json()) as Json).issue.map((i: Json) => [i.expression[0], i.diagnostics]);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
    });
    afterAll(() => t.close());

    test('a large Binary is stored and read back as written, its base64 broken over lines too', async () => {
      const data = base64Of(1024 * 1024);
      const lines = data.replace(/.{76}/g, '$&\r\n');
      for (const [id, value] of [['large-1', data], ['large-2', lines]] as const) {
        const res = await put('Binary', id, { resourceType: 'Binary', id, contentType: 'application/octet-stream', data: value });
        expect(res.status).toBe(201);
        const read = (await (await t.request(`${t.fhir()}/Binary/${id}`, { headers: { Authorization: `Bearer ${token}`, Accept: 'application/fhir+json' } })).json()) as Json;
        expect(read.data === value).toBe(true);
      }
    });

    test("a large value's problems are the 422 they were, at the element, wherever they fall in it", async () => {
      const data = base64Of(1024 * 1024);
      const half = data.length / 2;
      const cases: [string, string, string][] = [
        // A character outside the alphabet far into the value, and padding in its middle.
        ['a', data.slice(0, half) + '*' + data.slice(half + 1), `${JSON.stringify(data.slice(0, 57) + '...')} is not valid base64 (RFC 4648, padded to a multiple of 4 characters)`],
        ['b', data.slice(0, half) + '=' + data.slice(half + 1), `${JSON.stringify(data.slice(0, 57) + '...')} is not valid base64 (RFC 4648, padded to a multiple of 4 characters)`],
        ['c', data.slice(0, -4) + 'AAA===', `${JSON.stringify(data.slice(0, 57) + '...')} is not valid base64 (RFC 4648, padded to a multiple of 4 characters)`],
        ['d', data.slice(0, half) + '\uFFFE' + data.slice(half + 1), 'holds U+FFFE or U+FFFF, which are no Unicode characters and which XML cannot carry (FHIR XML)'],
      ];
      for (const [id, value, diagnostics] of cases) {
        const res = await put('Binary', id, { resourceType: 'Binary', id, contentType: 'application/octet-stream', data: value });
        expect([res.status, await issues(res)]).toEqual([422, [['Binary.data', diagnostics]]]);
      }
      // A control character in a narrative past its 256 Ki characters, and an attachment's size that its data does not hold.
      const div = `<div xmlns="http://www.w3.org/1999/xhtml"><p>${'x'.repeat(300 * 1024)}\u0001</p></div>`;
      const note = await put('Basic', 'n', { resourceType: 'Basic', id: 'n', code: { text: 'note' }, text: { status: 'generated', div } });
      expect([note.status, (await issues(note))[0]]).toEqual([422, ['Basic.text.div', 'holds a control character (below U+0020 other than tab, CR, LF)']]);
      const doc = {
        resourceType: 'DocumentReference', id: 'd', status: 'current',
        content: [{ attachment: { contentType: 'application/octet-stream', data: data.replace(/.{76}/g, '$&\n'), size: 1024 * 1024 + 1 } }],
      };
      const wrong = await put('DocumentReference', 'd', doc);
      expect([wrong.status, await issues(wrong)]).toEqual([422, [['DocumentReference.content[0].attachment.size', `The attachment's size is ${1024 * 1024 + 1}, but its data holds ${1024 * 1024} bytes (size counts the bytes before base64 encoding)`]]]);
      doc.content[0]!.attachment.size = 1024 * 1024;
      expect((await put('DocumentReference', 'd', doc)).status).toBe(201);
    });
  });
});

describe('the event loop while a large value is checked', () => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await createTestApp();
    token = await t.token();
  });
  afterAll(() => t.close());

  test("a Binary's base64 is checked with turns of the event loop, up to the 422 of its last characters", async () => {
    // 11 MiB of content, its base64 within the 16 MiB of a resource's body; a character outside the alphabet at its end.
    const data = base64Of(11 * 1024 * 1024);
    const body = new TextEncoder().encode(JSON.stringify({ resourceType: 'Binary', id: 'b', contentType: 'application/octet-stream', data: `${data.slice(0, -4)}AA-=` }));
    const { result: res, took, tail } = await tailHold(() =>
      t.request(`${t.fhir()}/Binary/b`, { method: 'PUT', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body }));
    const outcome = (await res.json()) as Json;
    expect([res.status, outcome.issue[0].expression]).toEqual([422, ['Binary.data']]);
    // Checked in one pass of each rule, the value held the loop to the 422 (its tail: 60-80% of its time); in
    // slices, the loop turns every 10 ms up to the answer: its tail is at most about a slice. The bound is a slice and a
    // quarter of the time taken, so that however fast the machine (an idle one checked the 11 MiB in under 40 ms) the
    // whole pass's tail (most of the time) is told from the slices'.
    expect({ took, tail: tail < SLICE_MS + took / 4 }).toEqual({ took, tail: true });
  });
  test('$validate and $convert of a large Binary check its base64 with turns of the event loop too, with the same answers', async () => {
    const data = base64Of(11 * 1024 * 1024);
    const bad = JSON.stringify({ resourceType: 'Binary', contentType: 'application/octet-stream', data: `${data.slice(0, -4)}AA-=` });
    const headers = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' };
    const validated = await tailHold(() => t.request(`${t.fhir()}/Binary/$validate`, { method: 'POST', headers, body: new TextEncoder().encode(bad) }));
    const outcome = (await validated.result.json()) as Json;
    expect([validated.result.status, outcome.issue.filter((i: Json) => i.severity === 'error').map((i: Json) => [i.expression[0], i.diagnostics])]).toEqual([
      200, [['Binary.data', `${JSON.stringify(data.slice(0, 57) + '...')} is not valid base64 (RFC 4648, padded to a multiple of 4 characters)`]],
    ]);
    expect({ took: validated.took, tail: validated.tail < SLICE_MS + validated.took / 4 }).toEqual({ took: validated.took, tail: true });
    const converted = await tailHold(() => t.request(`${t.fhir()}/$convert`, { method: 'POST', headers: { ...headers, Accept: 'application/fhir+xml' }, body: new TextEncoder().encode(bad) }));
    expect([converted.result.status, ((await converted.result.text()).match(/Binary\.data/g) ?? []).length > 0]).toEqual([422, true]);
    expect({ took: converted.took, tail: converted.tail < SLICE_MS + converted.took / 4 }).toEqual({ took: converted.took, tail: true });
  });
});
