/** The RelatedPerson, Practitioner and Device compartments Cinder carries are R4's CompartmentDefinitions (hl7.fhir.r4.examples), type by type and in order. */
import { expect, test } from 'bun:test';
import device from 'hl7.fhir.r4.examples/CompartmentDefinition-device.json' with { type: 'json' };
import practitioner from 'hl7.fhir.r4.examples/CompartmentDefinition-practitioner.json' with { type: 'json' };
import relatedPerson from 'hl7.fhir.r4.examples/CompartmentDefinition-relatedPerson.json' with { type: 'json' };
import { COMPARTMENT_TYPES, compartmentMembers, membership } from '../../src/fhir/compartments.ts';
import { paramOf } from '../../src/fhir/definitions.ts';

type Definition = { code: string; resource: { code: string; param?: string[] }[] };

test('compartmentMembers() lists each R4 definition\'s member types and parameters, each a reference parameter of its type', () => {
  for (const definition of [relatedPerson, practitioner, device] as Definition[]) {
    const r4 = definition.resource.filter((r) => r.param?.length).map((r): [string, string[]] => [r.code, r.param![0] === '{def}' ? [] : r.param!]);
    expect({ compartment: definition.code, members: [...compartmentMembers(definition.code)].map(([type, params]) => [type, [...params]]) }).toEqual({ compartment: definition.code, members: r4 });
  }
  for (const compartment of COMPARTMENT_TYPES) {
    for (const [type, params] of compartmentMembers(compartment)) {
      for (const p of params) expect({ compartment, type, p, kind: paramOf(type, p)?.type }).toEqual({ compartment, type, p, kind: 'reference' });
      if (compartment !== 'Patient') expect(() => membership({ type: compartment, id: 'x' }, type)).not.toThrow();
    }
  }
});
