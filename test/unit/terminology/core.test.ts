import { describe, expect, test } from 'bun:test';
import { CoreTerminology } from '../../../src/terminology/core/core-source.ts';
import { valueSetValidateCodeParams } from '../../../src/terminology/input/operations.ts';
import { validateValueSetCode, valueSetValidateCodeInput } from '../../../src/terminology/ops/validate-value-set-code.ts';
import { TerminologyService } from '../../../src/terminology/service.ts';
import { MemoryTerminologySource } from '../../helpers/memory-terminology.ts';
import { testCore } from '../../helpers/terminology-service.ts';

async function check(service: TerminologyService, tenant: string, url: string, system: string, code: string) {
  const raw = valueSetValidateCodeParams.fromBody({
    resourceType: 'Parameters',
    parameter: [{ name: 'url', valueUri: url }, { name: 'code', valueCode: code }, { name: 'system', valueUri: system }],
  });
  return validateValueSetCode(valueSetValidateCodeInput(raw), { terminology: await service.context(tenant) });
}

describe('FHIR R4 core terminology', () => {
  const own = new MemoryTerminologySource();
  const empty = new MemoryTerminologySource();
  const service = new TerminologyService({ core: testCore(), sourceFor: (t) => (t === 'own' ? own : empty) });

  test('core value sets validate for every tenant', async () => {
    const gender = await check(service, 'a', 'http://hl7.org/fhir/ValueSet/administrative-gender', 'http://hl7.org/fhir/administrative-gender', 'female');
    expect(gender).toEqual({ result: true, display: 'Female', coding: { code: 'female', system: 'http://hl7.org/fhir/administrative-gender', version: '4.0.1' }, issues: [] });
    const status = await check(service, 'b', 'http://hl7.org/fhir/ValueSet/observation-status', 'http://hl7.org/fhir/observation-status', 'final');
    expect(status.result).toBe(true);
    const wrong = await check(service, 'b', 'http://hl7.org/fhir/ValueSet/observation-status', 'http://hl7.org/fhir/observation-status', 'done');
    expect(wrong.result).toBe(false);
  });

  test('v3 value sets defined by is-a over a v3 code system', async () => {
    const url = 'http://terminology.hl7.org/ValueSet/v3-ActEncounterCode';
    const system = 'http://terminology.hl7.org/CodeSystem/v3-ActCode';
    expect((await check(service, 'a', url, system, 'AMB')).result).toBe(true);
    expect((await check(service, 'a', url, system, 'IMP')).result).toBe(true);
    expect((await check(service, 'a', url, system, 'CPT')).result).toBe(false);
  });

  test('v2 tables are loaded', async () => {
    const r = await check(service, 'a', 'http://terminology.hl7.org/ValueSet/v2-0203', 'http://terminology.hl7.org/CodeSystem/v2-0203', 'MR');
    expect(r).toMatchObject({ result: true, display: 'Medical record number' });
  });

  test("a tenant's own resource with the same URL wins for that tenant only", async () => {
    own.put({
      resourceType: 'CodeSystem',
      id: 'g',
      url: 'http://hl7.org/fhir/administrative-gender',
      version: 'local',
      content: 'complete',
      concept: [{ code: 'female', display: 'Woman' }, { code: 'x', display: 'X' }],
    });
    const system = 'http://hl7.org/fhir/administrative-gender';
    const url = 'http://hl7.org/fhir/ValueSet/administrative-gender';
    expect(await check(service, 'own', url, system, 'female')).toMatchObject({ result: true, display: 'Woman' });
    expect((await check(service, 'own', url, system, 'x')).result).toBe(true);
    expect((await check(service, 'own', url, system, 'male')).result).toBe(false);
    expect((await check(service, 'other', url, system, 'male')).result).toBe(true);
  });

  test('the core is loaded lazily, once, and is read-only', async () => {
    const core = new CoreTerminology();
    expect(await core.changeToken()).toBe('core');
    const [a, b] = await Promise.all([core.codeSystem('http://hl7.org/fhir/administrative-gender'), core.codeSystem('http://hl7.org/fhir/administrative-gender')]);
    expect(a).toBe(b);
    expect(a?.concept?.map((c) => c.code)).toEqual(['male', 'female', 'other', 'unknown']);
    expect(await core.valueSetById('administrative-gender')).not.toBeNull();
    expect(await core.valueSet('http://hl7.org/fhir/ValueSet/no-such')).toBeNull();
  });
});
