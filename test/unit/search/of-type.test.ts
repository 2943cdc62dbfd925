/**
 * `:of-type` is R4's for Identifiers alone (search.html: "token (only Identifier)"): a token parameter
 * takes it where one of its paths may reach an Identifier, whatever its other paths reach, and one the
 * R4 model cannot follow counts as one that may.
 */
import { describe, expect, test } from 'bun:test';
import { paramOf, type ParamDefinition } from '../../../src/fhir/definitions.ts';
import { holdsIdentifiers, tokenModifiers } from '../../../src/fhir/search-compile.ts';

/** A token parameter of `base` over `keys`, as definitions.ts compiles them (only `key` is read here). */
const over = (base: string, ...keys: string[]): ParamDefinition => ({
  code: 'x', type: 'token', url: '', base, expression: '', targets: [],
  paths: keys.map((key) => ({ key, evaluate: () => [] })),
});

describe('holdsIdentifiers', () => {
  test('R4 parameters: identifier, masterIdentifier | identifier, relatesTo.target as Identifier; not code, gender, a union of CodeableConcepts', () => {
    expect(holdsIdentifiers(paramOf('Patient', 'identifier')!)).toBe(true);
    expect(holdsIdentifiers(paramOf('DocumentReference', 'identifier')!)).toBe(true);
    expect(holdsIdentifiers(paramOf('Composition', 'related-id')!)).toBe(true);
    expect(holdsIdentifiers(paramOf('Patient', 'gender')!)).toBe(false);
    expect(holdsIdentifiers(paramOf('Observation', 'code')!)).toBe(false);
    expect(holdsIdentifiers(paramOf('Observation', 'combo-code')!)).toBe(false);
    expect(holdsIdentifiers(paramOf('Patient', 'email')!)).toBe(false);
  });

  test('a parameter over several types takes it if one path reaches Identifiers; a path the model cannot follow may', () => {
    expect(holdsIdentifiers(over('Observation', 'code', 'identifier'))).toBe(true);
    expect(holdsIdentifiers(over('Observation', 'code', 'category'))).toBe(false);
    expect(holdsIdentifiers(over('Patient', "extension.where(url='http://example.org/x').value"))).toBe(true);
    expect(tokenModifiers(over('Observation', 'code'))).not.toContain('of-type');
    expect(tokenModifiers(over('Observation', 'code', 'identifier'))).toContain('of-type');
  });
});
