import { describe, expect, test } from 'bun:test';
import { FhirError } from '../../../src/errors.ts';
import { expandParams } from '../../../src/terminology/input/operations.ts';
import { type ExpandedValueSet, expandInput, expandValueSet } from '../../../src/terminology/ops/expand.ts';
import { fixtureService, rejected } from '../../helpers/terminology-service.ts';

const VS = 'http://cinder.test/ValueSet/';
const { context } = await fixtureService();

async function expand(query: Record<string, string>, limit = 1000): Promise<ExpandedValueSet> {
  const input = expandInput(expandParams.fromQuery(new URLSearchParams(query)));
  return expandValueSet(input, {
    terminology: await context(),
    maxExpansionSize: limit,
    now: () => new Date('2025-01-02T03:04:05Z'),
    newId: () => 'fixed-id',
  });
}

const codes = (vs: ExpandedValueSet) => (vs.expansion.contains ?? []).map((c) => c.code);


describe('ValueSet $expand', () => {
  test('expands filters in CodeSystem order with total, flags and metadata', async () => {
    const vs = await expand({ url: `${VS}mammals` });
    expect(codes(vs)).toEqual(['mammal', 'dog', 'cat', 'whale', 'mammoth', 'platypus']);
    expect(vs.expansion).toMatchObject({ identifier: 'urn:uuid:fixed-id', timestamp: '2025-01-02T03:04:05.000Z', total: 6 });
    // No `offset` asked for: none given (R4: present "if paging is being used").
    expect(vs.expansion.offset).toBeUndefined();
    expect(vs.url).toBe(`${VS}mammals`);
    expect(vs.expansion.contains![4]).toEqual({ system: 'http://cinder.test/CodeSystem/animals', code: 'mammoth', display: 'Mammoth', inactive: true });
    expect((await expand({ url: `${VS}dog-ancestors` })).expansion.contains![0]).toMatchObject({ code: 'animal', abstract: true });
  });

  test('excludes, imports, inactive=false and activeOnly', async () => {
    expect(codes(await expand({ url: `${VS}mammals-but-whale` }))).toEqual(['mammal', 'dog', 'cat', 'mammoth', 'platypus']);
    expect(codes(await expand({ url: `${VS}land-mammals` }))).toEqual(['dog', 'cat', 'mammoth', 'platypus']);
    expect(codes(await expand({ url: `${VS}four-legged-land-mammals` }))).toEqual(['dog', 'cat', 'mammoth', 'platypus']);
    expect(codes(await expand({ url: `${VS}active-only` }))).not.toContain('dodo');
    expect(codes(await expand({ url: `${VS}mammals`, activeOnly: 'true' }))).toEqual(['mammal', 'dog', 'cat', 'whale', 'platypus']);
    expect(codes(await expand({ url: `${VS}listed` }))).toEqual(['dog', 'cat', 'animal']);
    expect(codes(await expand({ url: `${VS}expansion-only` }))).toEqual(['dog', 'group', 'cat', 'x1']);
  });

  test('filter, count and offset page through the expansion', async () => {
    expect(codes(await expand({ url: `${VS}all-animals`, filter: 'AL' }))).toEqual(['animal', 'mammal', 'whale']);
    const page = await expand({ url: `${VS}mammals`, count: '2', offset: '1' });
    expect(codes(page)).toEqual(['dog', 'cat']);
    expect(page.expansion).toMatchObject({ total: 6, offset: 1 });
    expect(page.expansion.parameter).toEqual([
      { name: 'count', valueInteger: 2 },
      { name: 'offset', valueInteger: 1 },
      { name: 'used-codesystem', valueUri: 'http://cinder.test/CodeSystem/animals|2.0.0' },
    ]);
  });

  test('a too large expansion is refused with too-costly; paging stays possible', async () => {
    const e = await rejected(expand({ url: `${VS}all-animals` }, 5));
    expect(e.issues[0]?.code).toBe('too-costly');
    expect(e.status).toBe(400);
    expect(e.message).toContain('more than 5 codes');
    expect(codes(await expand({ url: `${VS}all-animals`, count: '5' }, 5)).length).toBe(5);
    expect((await rejected(expand({ url: `${VS}all-animals`, count: '6' }, 5))).issues[0]?.code).toBe('too-costly');
  });

  test('expansions that cannot be complete are 400s', async () => {
    for (const url of ['missing-import', 'external-all', 'unknown-system', 'circular-a', 'bad-operator']) {
      expect((await rejected(expand({ url: VS + url }))).category).toBe('invalid');
    }
    expect((await rejected(expand({ url: `${VS}nothing-here` }))).message).toBe(`A definition for the value Set '${VS}nothing-here' could not be found`);
    expect((await rejected(expand({ url: `${VS}mammals`, count: '-1' }))).category).toBe('invalid');
  });
});
