/** The Encounter compartment Cinder carries is R4's CompartmentDefinition (hl7.fhir.r4.examples), type by type and in order. */
import { expect, test } from 'bun:test';
import definition from 'hl7.fhir.r4.examples/CompartmentDefinition-encounter.json' with { type: 'json' };
import { encounterCompartment, paramOf } from '../../src/fhir/definitions.ts';

test('encounterCompartment() lists the R4 definition\'s member types and parameters, each a reference parameter of its type', () => {
  const r4 = (definition as { resource: { code: string; param?: string[] }[] }).resource
    .filter((r) => r.param?.length)
    .map((r): [string, string[]] => [r.code, r.param![0] === '{def}' ? [] : r.param!]);
  expect([...encounterCompartment()].map(([type, params]) => [type, [...params]])).toEqual(r4);
  for (const [type, params] of encounterCompartment()) for (const p of params) expect({ type, p, kind: paramOf(type, p)?.type }).toEqual({ type, p, kind: 'reference' });
});
