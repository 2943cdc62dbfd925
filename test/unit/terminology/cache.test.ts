import { describe, expect, test } from 'bun:test';
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
