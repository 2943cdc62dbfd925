/**
 * A transaction's own CodeSystems and ValueSets in front of the stored ones (written-source.ts), as a Subscription's
 * `:in` in that transaction resolves them: by canonical URL with the versions chosen as stored ones are, a written
 * resource replacing the stored one of its id, and by id.
 */
import { describe, expect, test } from 'bun:test';
import { parseValueSet, type ValueSet } from '../../../src/terminology/model/value-set.ts';
import type { TerminologySource } from '../../../src/terminology/source.ts';
import { writtenSource, writtenTerminology } from '../../../src/terminology/written-source.ts';

const vs = (id: string, url: string, version?: string): ValueSet => parseValueSet({ resourceType: 'ValueSet', id, url, status: 'active', ...(version && { version }) });

/** A stored terminology of ValueSets alone. */
function stored(valueSets: ValueSet[]): TerminologySource {
  return {
    codeSystem: async () => null,
    valueSet: async (url, version) => valueSets.filter((v) => v.url === url && (version === undefined || v.version === version)).sort((a, b) => (b.version ?? '').localeCompare(a.version ?? ''))[0] ?? null,
    codeSystemById: async () => null,
    valueSetById: async (id) => valueSets.find((v) => v.id === id) ?? null,
    holds: async (_type, id) => valueSets.some((v) => v.id === id),
    changeToken: () => 'stored',
  };
}

describe('writtenSource', () => {
  test('a written ValueSet is found by url and id; the stored ones of other urls and ids are as they were', async () => {
    const source = writtenSource({ codeSystems: [], valueSets: [vs('new', 'http://x/new')] }, stored([vs('old', 'http://x/old')]));
    expect((await source.valueSet('http://x/new'))?.id).toBe('new');
    expect((await source.valueSetById('new'))?.id).toBe('new');
    expect((await source.valueSet('http://x/old'))?.id).toBe('old');
    expect(await source.holds!('ValueSet', 'new')).toBe(true);
    expect(await source.holds!('ValueSet', 'none')).toBe(false);
  });

  test('versions of one url are chosen among the written and the stored; a written one replaces the stored one of its id', async () => {
    const under = stored([vs('a', 'http://x/vs', '2.0')]);
    // A newer stored version wins the latest; the written one is found by its version.
    const older = writtenSource({ codeSystems: [], valueSets: [vs('b', 'http://x/vs', '1.0')] }, under);
    expect((await older.valueSet('http://x/vs'))?.version).toBe('2.0');
    expect((await older.valueSet('http://x/vs', '1.0'))?.id).toBe('b');
    // Rewriting the stored one's id with an older version leaves no 2.0.
    const replaced = writtenSource({ codeSystems: [], valueSets: [vs('a', 'http://x/vs', '1.5')] }, under);
    expect((await replaced.valueSet('http://x/vs'))?.version).toBe('1.5');
  });

  test('a ValueSet the transaction deletes is found neither by url nor by id; it still holds its id (a deleted row shadows a core one)', async () => {
    const written = writtenTerminology([undefined], [{ type: 'ValueSet', id: 'old' }, { type: 'Patient', id: 'p' }])!;
    const source = writtenSource(written, stored([vs('old', 'http://x/old'), vs('kept', 'http://x/kept')]));
    expect(await source.valueSet('http://x/old')).toBeNull();
    expect(await source.valueSetById('old')).toBeNull();
    expect((await source.valueSet('http://x/kept'))?.id).toBe('kept');
    expect(await source.holds!('ValueSet', 'old')).toBe(true);
  });

  test('writtenTerminology keeps the CodeSystems and ValueSets that parse, none when there are none', () => {
    expect(writtenTerminology([{ resourceType: 'Patient' }, undefined])).toBeUndefined();
    const found = writtenTerminology([{ resourceType: 'ValueSet', url: 'http://x/v', status: 'active' }, { resourceType: 'CodeSystem', url: 'http://x/c', status: 'active', content: 'complete' }, { resourceType: 'ValueSet', compose: 'not an object' }]);
    expect([found?.valueSets.length, found?.codeSystems.length]).toEqual([1, 1]);
  });
});
