import { describe, expect, test } from 'bun:test';
import { CodeSystemIndex } from '../../../src/terminology/compile/code-system-index.ts';
import { compileValueSet } from '../../../src/terminology/compile/compile-value-set.ts';
import type { CodeSystemLookup } from '../../../src/terminology/compile/membership.ts';
import { valueSetValidateCodeParams } from '../../../src/terminology/input/operations.ts';
import { validateValueSetCode, valueSetValidateCodeInput } from '../../../src/terminology/ops/validate-value-set-code.ts';
import { TerminologyService } from '../../../src/terminology/service.ts';
import { MemoryTerminologySource } from '../../helpers/memory-terminology.ts';
import { fixtureService } from '../../helpers/terminology-service.ts';

const ANIMALS = 'http://cinder.test/CodeSystem/animals';
const VS = 'http://cinder.test/ValueSet/';

async function check(service: TerminologyService, vs: string, code: string): Promise<boolean> {
  const raw = valueSetValidateCodeParams.fromBody({
    resourceType: 'Parameters',
    parameter: [{ name: 'url', valueUri: VS + vs }, { name: 'code', valueCode: code }, { name: 'system', valueUri: ANIMALS }],
  });
  return (await validateValueSetCode(valueSetValidateCodeInput(raw), { terminology: await service.context('t') })).result;
}

describe('compiled ValueSet cache', () => {
  test('repeated validations read the source only once, plus one change check per call', async () => {
    const { service, source } = await fixtureService();
    await check(service, 'land-mammals', 'dog');
    const after = { ...source.reads };
    for (let i = 0; i < 50; i++) await check(service, 'land-mammals', i % 2 === 0 ? 'dog' : 'whale');
    expect(source.reads.valueSet).toBe(after.valueSet);
    expect(source.reads.codeSystem).toBe(after.codeSystem);
    expect(source.reads.changeToken).toBe(after.changeToken + 50);
  });

  test('concurrent first calls share one compile', async () => {
    const { service, source } = await fixtureService();
    const results = await Promise.all(Array.from({ length: 20 }, () => check(service, 'mammals', 'dog')));
    expect(results.every(Boolean)).toBe(true);
    expect(source.reads.valueSet).toBe(1);
  });

  test('a changed ValueSet, imported ValueSet or CodeSystem is seen on the next call', async () => {
    const { service, source } = await fixtureService();
    expect(await check(service, 'land-mammals', 'whale')).toBe(false);
    // the imported 'land-animals' now takes sea animals
    source.put({
      resourceType: 'ValueSet',
      id: 'land-animals',
      url: `${VS}land-animals`,
      compose: { include: [{ system: ANIMALS, filter: [{ property: 'habitat', op: '=', value: 'sea' }] }] },
    });
    expect(await check(service, 'land-mammals', 'whale')).toBe(true);
    expect(await check(service, 'mammals', 'tiger')).toBe(false);
    const cs = (await source.codeSystem(ANIMALS)) as { resourceType: 'CodeSystem'; concept: unknown[] };
    source.put({ ...cs, concept: [...cs.concept, { code: 'tiger', display: 'Tiger', property: [{ code: 'parent', valueCode: 'mammal' }] }] });
    expect(await check(service, 'mammals', 'tiger')).toBe(true);
  });

  test('a circular import is reported on every call and never hangs, also concurrently', async () => {
    const { service } = await fixtureService();
    const attempts = await Promise.allSettled([check(service, 'circular-a', 'dog'), check(service, 'circular-b', 'dog'), check(service, 'circular-a', 'dog')]);
    for (const a of attempts) {
      expect(a.status).toBe('rejected');
      expect(String((a as PromiseRejectedResult).reason)).toContain('circular ValueSet import');
    }
    expect(check(service, 'circular-a', 'dog')).rejects.toThrow('circular');
  });

  test('each tenant has its own source and cache', async () => {
    const { source } = await fixtureService();
    const empty = new MemoryTerminologySource();
    const service = new TerminologyService({ core: empty, sourceFor: (tenant) => (tenant === 't' ? source : empty) });
    expect(await check(service, 'mammals', 'dog')).toBe(true);
    expect(await (await service.context('other')).valueSet(`${VS}mammals`)).toBeNull();
  });
});

describe('membership checks and CodeSystem loading', () => {
  const system = (url: string, codes: string[]) =>
    new CodeSystemIndex({ resourceType: 'CodeSystem', url, status: 'active', content: 'complete', concept: codes.map((code) => ({ code })) });
  const A = 'http://cinder.test/CodeSystem/a';
  const B = 'http://cinder.test/CodeSystem/b';
  const systems = new Map([[A, system(A, ['a1', 'a2'])], [B, system(B, ['b1'])]]);

  /** A lookup that counts loads; `keeps` says whether loaded CodeSystems stay available at once (without a promise). */
  function lookup(keeps: boolean) {
    const kept = new Map<string, CodeSystemIndex | null>();
    const loads: string[] = [];
    const l: CodeSystemLookup = {
      codeSystem(url) {
        if (kept.has(url)) return kept.get(url)!;
        loads.push(url);
        const cs = systems.get(url) ?? null;
        if (keeps) kept.set(url, cs);
        return Promise.resolve(cs);
      },
    };
    return { l, loads };
  }

  // `ab`: codes of A that are also in the imported `a1` (only a1), minus a2; `b`: all of B.
  async function valueSets() {
    const none = { importValueSet: async () => null } as never;
    const b = await compileValueSet({ resourceType: 'ValueSet', status: 'active', url: `${VS}b`, compose: { include: [{ system: B }] } }, none);
    const a1 = await compileValueSet(
      { resourceType: 'ValueSet', status: 'active', url: `${VS}a1`, compose: { include: [{ system: A, concept: [{ code: 'a1' }] }] } }, none,
    );
    const ab = await compileValueSet(
      {
        resourceType: 'ValueSet', status: 'active', url: `${VS}ab`,
        compose: { include: [{ system: A, valueSet: [`${VS}a1`] }, { system: B }], exclude: [{ system: A, concept: [{ code: 'a2' }] }] },
      },
      { importValueSet: async () => a1 } as never,
    );
    return { ab, b };
  }

  test('a check loads what it needs once, then decides without loading again', async () => {
    const { ab } = await valueSets();
    const { l, loads } = lookup(true);
    expect((await ab.check({ system: A, code: 'a1' }, l)).member).toBe(true);
    expect((await ab.check({ system: A, code: 'a2' }, l)).member).toBe(false);
    expect((await ab.check({ system: A, code: 'zz' }, l)).member).toBe(false);
    expect((await ab.check({ system: B, code: 'b1' }, l)).member).toBe(true);
    expect(loads).toEqual([A, B]);
    // Loaded now: the check answers at once, a plain value rather than a promise.
    const warm = ab.check({ system: A, code: 'a1' }, l);
    expect(warm).not.toBeInstanceOf(Promise);
    expect(warm).toMatchObject({ member: true, code: 'a1' });
    expect(ab.check({ system: B, code: 'b2' }, l)).toMatchObject({ member: false });
  });

  test('a check whose CodeSystems never stay cached still ends, loading each one once per call', async () => {
    const { b } = await valueSets();
    const { l, loads } = lookup(false);
    expect(b.check({ system: B, code: 'b1' }, l)).toBeInstanceOf(Promise);
    expect((await b.check({ system: B, code: 'b1' }, l)).member).toBe(true);
    expect((await b.check({ system: B, code: 'nope' }, l)).member).toBe(false);
    expect(loads).toEqual([B, B, B]);
  });
});
