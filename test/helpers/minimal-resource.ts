/**
 * Completes a partial resource with made-up values for the elements R4 requires (and that the test
 * did not give), so that tests about other things can write resources of any type that pass
 * validation. Values come from the validator's own model: the first allowed type of each element, the
 * first code of a required binding, a reference to the first allowed target type.
 */
import { typeModel, type BindingModel, type ElementModel } from '../../src/fhir/validation/model.ts';

type Json = Record<string, unknown>;

function code(binding: BindingModel | undefined): { system?: string; code: string } {
  if (binding?.kind === 'codes') {
    const first = [...binding.systemCodes][0]!;
    const bar = first.lastIndexOf('|');
    return { system: first.slice(0, bar), code: first.slice(bar + 1) };
  }
  return { code: binding?.kind === 'syntax' && binding.syntax === 'mime-type' ? 'text/plain' : 'x' };
}

const PRIMITIVE_VALUES: Record<string, unknown> = {
  boolean: true, integer: 1, positiveInt: 1, unsignedInt: 1, decimal: 1, string: 'x', markdown: 'x', uri: 'urn:x', url: 'http://x.example',
  canonical: 'http://x.example/c', oid: 'urn:oid:1.2.3', uuid: 'urn:uuid:0c3c9e3e-6e5b-4d0a-8f2a-1c2d3e4f5a6b', id: 'x', date: '2020-01-01',
  dateTime: '2020-01-01', instant: '2020-01-01T00:00:00Z', time: '10:00:00', base64Binary: 'eA==', xhtml: '<div xmlns="http://www.w3.org/1999/xhtml">x</div>',
};

function value(type: string, element: ElementModel, depth: number): unknown {
  if (type === 'code') return code(element.binding).code;
  if (type in PRIMITIVE_VALUES) return PRIMITIVE_VALUES[type];
  if (type === 'CodeableConcept') {
    const c = code(element.binding);
    return c.system ? { coding: [c] } : { text: 'x' };
  }
  if (type === 'Coding') return { system: 'urn:x', code: 'x' };
  if (type === 'Reference') return { reference: `${element.targets ? [...element.targets][0] : 'Patient'}/x` };
  if (type === 'Resource') return { resourceType: 'Basic', code: { text: 'x' } };
  return complete({}, type, depth + 1);
}

/** `partial` with every required element of `type` (recursively) given a value. */
function complete(partial: Json, type: string, depth = 0): Json {
  const model = typeModel(type);
  if (!model || depth > 6) return partial;
  const out: Json = { ...partial };
  for (const element of model.bounded) {
    if (element.min === 0 || element.names.some((n) => out[n] !== undefined || out['_' + n] !== undefined)) continue;
    const name = element.names[0]!;
    const slot = model.slots.get(name)!;
    const v = value(slot.type, element, depth);
    out[name] = element.max > 1 ? Array.from({ length: element.min }, () => v) : v;
  }
  // An element that has no required children still needs one child (ele-1).
  if (Object.keys(out).length === 0) {
    const [name, slot] = [...model.slots].find(([n, s]) => n !== 'id' && n !== 'extension' && s.primitive) ?? [];
    if (name && slot) out[name] = value(slot.type, slot.element, depth);
  }
  return out;
}

/** What some types need beyond their required elements to meet their invariants (org-1, app-3, lnk-1, ...). */
const INVARIANT_EXTRAS: Record<string, Json> = {
  AllergyIntolerance: { clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }] } },
  Appointment: { status: 'proposed', participant: [{ actor: { reference: 'Patient/x' }, status: 'accepted' }] },
  AppointmentResponse: { actor: { reference: 'Patient/x' } },
  CapabilityStatement: { kind: 'instance', implementation: { description: 'x' }, rest: [{ mode: 'server' }] },
  Consent: { policyRule: { text: 'x' } },
  EventDefinition: { trigger: [{ type: 'named-event', name: 'x' }] },
  ImmunizationRecommendation: { recommendation: [{ vaccineCode: [{ text: 'x' }], forecastStatus: { text: 'x' } }] },
  InsurancePlan: { name: 'x' },
  Linkage: { item: [{ type: 'source', resource: { reference: 'Patient/x' } }, { type: 'alternate', resource: { reference: 'Patient/y' } }] },
  Organization: { name: 'x' },
  // Off: a Subscription asking to be active is checked and delivered (src/fhir/subscriptions/); a minimal one is not.
  Subscription: { status: 'off' },
  StructureDefinition: { differential: { element: [{ id: 'Basic', path: 'Basic' }] }, type: 'Basic', kind: 'resource', abstract: true },
  TerminologyCapabilities: { kind: 'instance', implementation: { description: 'x' } },
};

/** A resource of `partial.resourceType` holding `partial` and a made-up value of each element R4 requires. */
export function minimalResource<T extends Json & { resourceType: string }>(partial: T): T {
  return complete({ ...INVARIANT_EXTRAS[partial.resourceType], ...partial }, partial.resourceType) as T;
}

/** An identifier element's value for `type`: an array, or one Identifier where R4 allows only one. */
export function identifierOf(type: string, identifier: Json): Json | Json[] {
  return (typeModel(type)?.slots.get('identifier')?.element.max ?? 1) > 1 ? [identifier] : identifier;
}
