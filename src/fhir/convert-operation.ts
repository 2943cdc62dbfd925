/**
 * `$convert` (R4 OperationDefinition Resource-convert): a resource given in one format, answered in
 * another. The body is the resource itself (as HAPI FHIR takes it), or a Parameters whose only
 * parameter is `input` holding it; it is read as FHIR JSON or XML by its Content-Type and answered in
 * the format the request asks for (Accept or `_format`: the FHIR API's format layer,
 * src/http/xml-format.ts). It is validated against the R4 base definitions as a create would validate
 * it (structure, cardinality, types, required bindings, invariants; a 422 naming every problem), at the
 * strict level whatever CINDER_VALIDATION says, but not against the profiles it claims (`$validate`
 * does that); it is never stored: it touches no data, so any token of the tenant may call it.
 */
import { FhirError } from '../errors.ts';
import type { CapabilityContribution } from './capability.ts';
import { asResource, type Resource } from './resource.ts';
import { requireValidPaced } from './validation/check.ts';

/** `$convert` at the system level, in the CapabilityStatement. */
export const convertCapability: CapabilityContribution = {
  operations: [{ name: 'convert', definition: 'http://hl7.org/fhir/OperationDefinition/Resource-convert' }],
};

/** The resource to convert: the body, or the `input` of a Parameters holding only that. */
function inputOf(body: unknown): Resource {
  const r = asResource(body);
  if (r.resourceType !== 'Parameters' || !Array.isArray(r.parameter)) return r;
  const params = r.parameter as Record<string, unknown>[];
  if (params.length !== 1 || params[0]?.name !== 'input') return r;
  const input = params[0].resource;
  if (input === undefined) throw new FhirError('required', "Parameters.parameter[0] 'input' must hold the resource to convert in 'resource'", { expression: ['Parameters.parameter[0].resource'] });
  return asResource(input);
}

/** `POST [base]/$convert`: the resource, validated (its large strings read in slices first: requireValidPaced), to be answered in the format asked for. */
export async function convertOperation(body: unknown): Promise<Resource> {
  const resource = inputOf(body);
  await requireValidPaced(resource, 'strict');
  return resource;
}
