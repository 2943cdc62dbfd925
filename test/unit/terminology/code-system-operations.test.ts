import { describe, expect, test } from 'bun:test';
import { FhirError } from '../../../src/errors.ts';
import { codeSystemValidateCodeParams, lookupParams } from '../../../src/terminology/input/operations.ts';
import { lookupCode, lookupInput } from '../../../src/terminology/ops/lookup.ts';
import { codeSystemValidateCodeInput, validateCodeSystemCode } from '../../../src/terminology/ops/validate-code-system-code.ts';
import type { Parameters, ParametersParameter } from '../../../src/terminology/model/parameters.ts';
import { fixtureService, rejected } from '../../helpers/terminology-service.ts';

const ANIMALS = 'http://cinder.test/CodeSystem/animals';
const { context } = await fixtureService();

async function validate(parameter: Record<string, unknown>[]) {
  const raw = codeSystemValidateCodeParams.fromBody({ resourceType: 'Parameters', parameter });
  return validateCodeSystemCode(codeSystemValidateCodeInput(raw), { terminology: await context() });
}

async function lookup(query: Record<string, string> | [string, string][]): Promise<Parameters> {
  return lookupCode(lookupInput(lookupParams.fromQuery(new URLSearchParams(query))), { terminology: await context() });
}


const values = (p: Parameters, name: string): ParametersParameter[] => p.parameter.filter((x) => x.name === name);
const properties = (p: Parameters): string[] =>
  values(p, 'property').map((x) => {
    const [code, value] = x.part ?? [];
    const v = value === undefined ? undefined : Object.entries(value).find(([k]) => k !== 'name')?.[1];
    return `${code?.valueCode}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`;
  });

describe('CodeSystem $validate-code', () => {
  test('code with url, versions, display and abstract rules', async () => {
    expect(await validate([{ name: 'url', valueUri: ANIMALS }, { name: 'code', valueCode: 'cat' }])).toEqual({
      result: true, display: 'Cat', coding: { code: 'cat', system: ANIMALS, version: '2.0.0' }, issues: [],
    });
    expect((await validate([{ name: 'url', valueUri: ANIMALS }, { name: 'code', valueCode: 'wolf' }])).result).toBe(false);
    expect((await validate([{ name: 'url', valueUri: ANIMALS }, { name: 'version', valueString: '1.0.0' }, { name: 'code', valueCode: 'wolf' }])).result).toBe(true);
    expect((await validate([{ name: 'url', valueUri: `${ANIMALS}|1.0.0` }, { name: 'code', valueCode: 'wolf' }])).result).toBe(true);
    const display = await validate([{ name: 'url', valueUri: ANIMALS }, { name: 'code', valueCode: 'cat' }, { name: 'display', valueString: 'Kitty' }]);
    expect(display.result).toBe(false);
    expect(display.issues.map((i) => i.text).join()).toContain("Wrong Display Name 'Kitty'");
    const abstract = await validate([{ name: 'url', valueUri: ANIMALS }, { name: 'code', valueCode: 'vertebrate' }, { name: 'abstract', valueBoolean: false }]);
    expect(abstract.result).toBe(false);
  });

  test('coding and codeableConcept inputs; the system must match', async () => {
    expect((await validate([{ name: 'coding', valueCoding: { system: ANIMALS, code: 'dog' } }])).result).toBe(true);
    const other = await validate([{ name: 'url', valueUri: ANIMALS }, { name: 'coding', valueCoding: { system: 'urn:other', code: 'dog' } }]);
    expect(other.result).toBe(false);
    expect(other.issues.map((i) => i.text).join()).toContain("is not the CodeSystem 'http://cinder.test/CodeSystem/animals'");
    const cc = await validate([
      { name: 'url', valueUri: ANIMALS },
      { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: ANIMALS, code: 'nope' }, { system: ANIMALS, code: 'ant' }] } },
    ]);
    expect(cc).toMatchObject({ result: true, display: 'Ant' });
    expect(cc.issues.map((i) => i.text).join()).toContain("Unknown code 'nope'");
  });

  test('fragment code systems answer true with a warning; an unknown CodeSystem answers false, caused by it', async () => {
    const blue = await validate([{ name: 'url', valueUri: 'http://cinder.test/CodeSystem/colors' }, { name: 'code', valueCode: 'blue' }]);
    expect(blue.result).toBe(true);
    expect(blue.issues.map((i) => i.text).join()).toContain("Unknown Code 'blue' in the CodeSystem 'http://cinder.test/CodeSystem/colors'");
    expect(blue.issues.map((i) => i.messageId)).toEqual(['UNKNOWN_CODE_IN_FRAGMENT']);
    const unknown = await validate([{ name: 'url', valueUri: 'urn:nothing' }, { name: 'code', valueCode: 'x' }]);
    expect(unknown).toMatchObject({ result: false, causedByUnknownSystems: ['urn:nothing'] });
    expect(unknown.issues.map((i) => i.text)).toEqual(["A definition for CodeSystem 'urn:nothing' could not be found, so the code cannot be validated"]);
  });

  test('inline codeSystem', async () => {
    const r = await validate([
      { name: 'codeSystem', resource: { resourceType: 'CodeSystem', url: 'urn:inline', content: 'complete', concept: [{ code: 'a', display: 'A' }] } },
      { name: 'code', valueCode: 'a' },
    ]);
    expect(r).toEqual({ result: true, display: 'A', coding: { code: 'a', system: 'urn:inline', version: undefined }, issues: [] });
  });
});

describe('CodeSystem $lookup', () => {
  test('display, designations, properties, parent and child', async () => {
    const p = await lookup({ system: ANIMALS, code: 'dog' });
    expect(values(p, 'name')[0]?.valueString).toBe('Animals');
    expect(values(p, 'version')[0]?.valueString).toBe('2.0.0');
    expect(values(p, 'display')[0]?.valueString).toBe('Dog');
    expect(values(p, 'designation').map((d) => d.part?.find((x) => x.name === 'value')?.valueString)).toEqual(['Dog', 'Domestic dog', 'Hund']);
    expect(properties(p)).toEqual(['legs=4', 'habitat=land', 'inactive=false', 'parent=mammal']);
    const insect = await lookup({ system: ANIMALS, code: 'insect' });
    expect(properties(insect)).toEqual(['inactive=false', 'parent=invertebrate', 'child=ant']);
  });

  test('property selects outputs; version and coding inputs', async () => {
    const p = await lookup([['system', ANIMALS], ['code', 'mammal'], ['property', 'child']]);
    expect(properties(p)).toEqual(['child=dog', 'child=cat', 'child=whale', 'child=mammoth', 'child=platypus']);
    // `*` asks for every property, as the reference servers read it.
    const all = await lookup([['system', ANIMALS], ['code', 'dog'], ['property', '*']]);
    expect(properties(all)).toEqual(['legs=4', 'habitat=land', 'inactive=false', 'parent=mammal']);
    const v1 = await lookup({ system: ANIMALS, code: 'eagle', version: '1.0.0' });
    expect(values(v1, 'display')[0]?.valueString).toBe('Eagle (old name)');
    const raw = lookupParams.fromBody({ resourceType: 'Parameters', parameter: [{ name: 'coding', valueCoding: { system: ANIMALS, code: 'dodo' } }] });
    const dodo = await lookupCode(lookupInput(raw), { terminology: await context() });
    expect(properties(dodo)).toContain('status=retired');
    expect(properties(dodo)).toContain('inactive=true');
  });

  test('unknown code or system is a 404; a code without system is a 400', async () => {
    expect((await rejected(lookup({ system: ANIMALS, code: 'unicorn' }))).category).toBe('not-found');
    expect((await rejected(lookup({ system: 'urn:none', code: 'x' }))).category).toBe('not-found');
    expect((await rejected(lookup({ code: 'x' }))).category).toBe('invalid');
    expect((await rejected(lookup({}))).category).toBe('invalid');
  });
});
