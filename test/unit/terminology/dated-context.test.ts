import { describe, expect, test } from 'bun:test';
import { parseDateTime } from '../../../src/terminology/model/date-time.ts';
import { fixtureService } from '../../helpers/terminology-service.ts';

const ANIMALS = 'http://cinder.test/CodeSystem/animals';
const VS = 'http://cinder.test/ValueSet/';
const date = (text: string) => parseDateTime(text) ?? undefined;

describe('the terminology context at a date', () => {
  test('chooses versions by date, keeps the current ones apart, and caches each date', async () => {
    const { context, source } = await fixtureService();
    const now = await context();
    const then = now.at(date('2021'));
    expect((await now.codeSystem(ANIMALS))?.version).toBe('2.0.0');
    expect((await then.codeSystem(ANIMALS))?.version).toBe('1.0.0');
    expect((await then.codeSystem(ANIMALS, '2.0.0'))?.version).toBe('2.0.0');
    expect(then.asOf?.text).toBe('2021');
    expect(now.at(undefined)).toBe(now);
    const reads = source.reads.codeSystem;
    await then.codeSystem(ANIMALS);
    await now.at(date('2021')).codeSystem(ANIMALS);
    expect(source.reads.codeSystem).toBe(reads);
  });

  test('a ValueSet compiled at a date checks codes against the CodeSystem of that date, imports included', async () => {
    const { context } = await fixtureService();
    const now = await context();
    const then = now.at(date('2022-01-01'));
    const wolf = { system: ANIMALS, code: 'wolf' };
    const landMammals = async (ctx: typeof now) => (await (await ctx.valueSet(`${VS}land-mammals`))?.check(wolf, ctx))?.member;
    expect(await landMammals(now)).toBe(false);
    expect(await landMammals(then)).toBe(true);
    expect((await now.at(date('2019')).valueSet(`${VS}versioned`))).toBeNull();
    expect((await now.at(date('2021')).valueSet(`${VS}versioned`))?.resource.version).toBe('1');
  });
});
