/**
 * A large resource that is not a Bundle (a Group or List of tens of thousands of members or entries, a CodeSystem of
 * 100,000 concepts) is validated in parts (validateInParts), indexed in pieces (storedIndexPaced) and, on SQLite,
 * its index rows written a slice at a time, with turns of the event loop between: each was one synchronous call,
 * which held every other request of the process (a 16 MB CodeSystem about 1.5 s in all). What a write answers is
 * unchanged. The pieces are compared with the whole in test/unit/validation-parts.test.ts and
 * test/unit/indexer-paced.test.ts, and SQLite's rows in test/store/sqlite-paced-writes.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';
import { tailHold } from '../helpers/loop.ts';

const N = 30_000;
const ITEMS = 20_000;
/** Members of the Group refused: enough that their whole validation outweighs any other hold of the request (a collection, code compiled on first use). */
const BAD_ITEMS = 80_000;


/** A List of `n` entries, each naming a Patient. */
function list(id: string, n: number, title = 'v1'): Uint8Array<ArrayBuffer> {
  const entry = Array.from({ length: n }, (_, i) => ({ item: { reference: `Patient/p${i}` } }));
  return new TextEncoder().encode(JSON.stringify({ resourceType: 'List', id, status: 'current', mode: 'working', title, entry }));
}

/** A Group of `n` members, each a Patient over a period. */
function group(id: string, n: number, change: (member: Json, i: number) => void = () => {}): Uint8Array<ArrayBuffer> {
  const member = Array.from({ length: n }, (_, i) => {
    const m: Json = { entity: { reference: `Patient/p${i}` }, period: { start: '2020-01-01', end: '2021-01-01' }, inactive: false };
    change(m, i);
    return m;
  });
  return new TextEncoder().encode(JSON.stringify({ resourceType: 'Group', id, type: 'person', actual: true, member }));
}

/**
 * `work`'s answer and whether, in one of up to three tries, it let the loop turn as paced work does: a longest hold
 * under a third of all it held (more than 40 ms). One synchronous walk cannot show that shape in any try (its hold
 * is most of `held`); a busy machine can spoil one try of the paced work (a collection of garbage, the thread
 * taken off its core mid-part), which is why a try that shows it is enough.
 */
async function pacedTry<T>(work: () => T | Promise<T>): Promise<{ result: T; paced: boolean }> {
  let last: T | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    const { result, longest, held } = await tailHold(work);
    last = result;
    if (held > 40 && longest < held / 3) return { result, paced: true };
  }
  return { result: last as T, paced: false };
}

await eachStore((kind, fresh) => {
  describe(`a large resource validated, indexed and written with turns of the event loop (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const put = (path: string, body: Uint8Array<ArrayBuffer>) =>
      t.request(`${t.fhir()}/${path}`, { method: 'PUT', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body });
    const get = async (path: string) => (await (await t.request(`${t.fhir()}/${path}`, { headers: { Authorization: `Bearer ${token}` } })).json()) as Json;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
    });
    afterAll(() => t.close());

    test('a Group of 20,000 members, validated in parts, is stored as written, each member indexed and in its compartment', async () => {
      expect((await put('Group/big', group('big', ITEMS))).status).toBe(201);
      const read = await get('Group/big');
      expect([(read.member as Json[]).length, (read.member as Json[])[ITEMS - 1].entity.reference]).toEqual([ITEMS, `Patient/p${ITEMS - 1}`]);
      for (const i of [ITEMS - 1, 0]) {
        expect(((await get(`Group?member=Patient/p${i}&_elements=id`)).entry as Json[]).map((e) => e.resource.id)).toEqual(['big']);
        expect(((await get(`Patient/p${i}/Group?_elements=id`)).entry as Json[]).map((e) => e.resource.id)).toEqual(['big']);
      }
    });

    test('the 422 of problems in its last member and a middle one comes with the same issues, the loop let turn up to it', async () => {
      const body = group('bad', BAD_ITEMS, (m, i) => {
        if (i === BAD_ITEMS - 1) m.period = { start: '2021-01-01', end: '2020-01-01' };
        if (i === BAD_ITEMS / 2) m.bogus = true;
      });
      const { result: res, paced } = await pacedTry(() => put('Group/bad', body));
      const outcome = (await res.json()) as Json;
      expect([res.status, outcome.issue.map((i: Json) => [i.expression[0], i.diagnostics])]).toEqual([422, [
        [`Group.member[${BAD_ITEMS / 2}].bogus`, "Unknown element 'bogus' in Group.member"],
        [`Group.member[${BAD_ITEMS - 1}].period`, 'If present, start SHALL have a lower value than end (per-1)'],
      ]]);
      // Validated in one walk, its members held the loop for 54-80% of the time the request held it in every try (`held`: `took` less
      // its waits for the database); in parts, a part or another step of the request at most (5-12%, the most on a first
      // request, its code not yet compiled, or a collection of garbage).
      expect(paced).toBe(true);
      expect((await t.request(`${t.fhir()}/Group/bad`, { headers: { Authorization: `Bearer ${token}` } })).status).toBe(404);
    });

    test('$validate of such a Group answers the same issues, the loop let turn up to them', async () => {
      const body = group('checked', BAD_ITEMS, (m, i) => {
        if (i === BAD_ITEMS - 1) m.period = { start: '2021-01-01', end: '2020-01-01' };
      });
      const { result: res, paced } = await pacedTry(() =>
        t.request(`${t.fhir()}/Group/$validate`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body }));
      const outcome = (await res.json()) as Json;
      expect([res.status, outcome.issue.filter((i: Json) => i.severity === 'error').map((i: Json) => i.expression[0])]).toEqual([200, [`Group.member[${BAD_ITEMS - 1}].period`]]);
      expect(paced).toBe(true);
    });

    test('a List of 30,000 entries is indexed in pieces and its rows written in slices: every entry is found by its item', async () => {
      expect((await put('List/big', list('big', N))).status).toBe(201);
      const read = await get('List/big');
      expect([(read.entry as Json[]).length, (read.entry as Json[])[N - 1].item.reference]).toEqual([N, `Patient/p${N - 1}`]);
      for (const i of [N - 1, N / 2, 0]) expect(((await get(`List?item=Patient/p${i}&_elements=id`)).entry as Json[]).map((e) => e.resource.id)).toEqual(['big']);
    });

    test("an update of such a List that keeps its text's length is a new version (told from the stored one by the sums of their characters)", async () => {
      expect((await put('List/same-length', list('same-length', N))).status).toBe(201);
      const res = await put('List/same-length', list('same-length', N, 'v2'));
      expect([res.status, res.headers.get('etag')]).toEqual([200, 'W/"2"']);
      expect((await get('List/same-length')).title).toBe('v2');
      // The same content again, its members in another order: the same characters, parsed and compared, no version.
      const reordered = new TextEncoder().encode(JSON.stringify({ title: 'v2', entry: (JSON.parse(new TextDecoder().decode(list('x', N))) as Json).entry, mode: 'working', status: 'current', id: 'same-length', resourceType: 'List' }));
      const again = await put('List/same-length', reordered);
      expect([again.status, again.headers.get('etag')]).toEqual([200, 'W/"2"']);
    });
  });
});
