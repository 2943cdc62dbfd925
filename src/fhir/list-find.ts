/**
 * `List/$find` (R4 OperationDefinition List-find): a patient's functional list (lifecycle.html,
 * "Current Resource Lists"), `GET [base]/List/$find?patient=42&name=$current-allergies`: the List with
 * status `current`, coded as that kind (functionalList), whose subject is the patient, the most recently
 * updated when there are several; 404 when there is none. Found by the search engine, so the token's
 * scopes apply as to `List?patient=..`.
 */
import { FhirError } from '../errors.ts';
import type { ResourceVersion } from '../store/types.ts';
import type { CapabilityContribution } from './capability.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { ID_PATTERN } from './resource-types.ts';
import { searchResources } from './search.ts';
import { functionalList } from './search-compile.ts';

/** The patient-level operations of search, in the CapabilityStatement: `List/$find`, `Patient/$everything`. */
export const patientOperationsCapability: CapabilityContribution = {
  operations: [
    { name: 'find', definition: 'http://hl7.org/fhir/OperationDefinition/List-find', types: ['List'] },
    { name: 'everything', definition: 'http://hl7.org/fhir/OperationDefinition/Patient-everything', types: ['Patient'] },
  ],
};

/** A value as one search value: its `\`, `,`, `|` and `$` escaped. */
const escaped = (s: string) => s.replace(/[\\,|$]/g, (c) => `\\${c}`);

/** The one value of parameter `name` of the operation; a missing or repeated one is a 400 naming it. */
function single(params: URLSearchParams, name: string): string {
  const values = params.getAll(name);
  if (values.length !== 1 || values[0] === '') throw new FhirError('invalid', `List/$find takes one '${name}' parameter`, { expression: [name] });
  return values[0]!;
}

export async function findFunctionalList(deps: FhirDeps, req: FhirRequest, params: URLSearchParams): Promise<ResourceVersion> {
  const patient = single(params, 'patient');
  if (!ID_PATTERN.test(patient)) throw new FhirError('invalid', `Invalid patient id '${patient}'`, { expression: ['patient'] });
  const raw = single(params, 'name');
  const name = raw.startsWith('$') ? raw : `$${raw}`;
  const list = functionalList(name);
  if (!list) throw new FhirError('invalid', `Unknown functional list '${raw}' (known: $current-problems, $current-medications, $current-allergies, $current-drug-allergies)`, { expression: ['name'] });
  const query = new URLSearchParams({
    patient: `Patient/${patient}`, status: 'current', code: list.codes.map((c) => `${escaped(c.system ?? '')}|${escaped(c.value ?? '')}`).join(','),
    _sort: '-_lastUpdated', _count: '1',
  });
  const [found] = (await searchResources(deps, req, 'List', query, true)).rows;
  if (!found) throw new FhirError('not-found', `Patient/${patient} has no current ${name} list`);
  return found;
}
