/**
 * `NamingSystem/$preferred-id` (R4 OperationDefinition NamingSystem-preferred-id) and the system-level
 * `$versions` (R4 OperationDefinition CapabilityStatement-versions).
 *
 * `$preferred-id?id=..&type=..`: the tenant's NamingSystem that has a `uniqueId` whose value is `id`
 * (an OID matches in both its plain and `urn:oid:` forms, a UUID in both its plain and `urn:uuid:`
 * forms), found by the search engine (`NamingSystem?value:exact=..`, so the token's scopes apply as to
 * a search), retired ones left out; its `uniqueId` of `type` (oid, uuid, uri, other), the one marked
 * `preferred` first, else the first, as `result` (an OID plain, R4: "OIDs are return as plain OIDs").
 * An `id` no NamingSystem has is a 404, as is a NamingSystem without an identifier of that type; two
 * NamingSystems having it is a 422 (R4: "It is an error if more than one system matches"). Cinder
 * ships no NamingSystems of its own, so only the tenant's are consulted; `uniqueId.period` is not weighed.
 */
import { FhirError } from '../errors.ts';
import { requireAccess } from './access.ts';
import type { CapabilityContribution } from './capability.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { compileSearch, storeQuery } from './search.ts';
import { unknownParameters } from './operation-params.ts';

export const namingSystemCapability: CapabilityContribution = {
  operations: [
    { name: 'preferred-id', definition: 'http://hl7.org/fhir/OperationDefinition/NamingSystem-preferred-id', types: ['NamingSystem'] },
    { name: 'versions', definition: 'http://hl7.org/fhir/OperationDefinition/CapabilityStatement-versions' },
  ],
};

/** R4's namingsystem-identifier-type codes. */
const TYPES = ['oid', 'uuid', 'uri', 'other'];

const OID = /^[0-2](\.(0|[1-9]\d*))+$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface UniqueId { type?: string; value?: string; preferred?: boolean }

/** The forms `id` may be recorded in: as given, and an OID or UUID with and without its `urn:` prefix. */
function forms(id: string): string[] {
  for (const [prefix, pattern] of [['urn:oid:', OID], ['urn:uuid:', UUID]] as const) {
    if (id.startsWith(prefix) && pattern.test(id.slice(prefix.length))) return [id, id.slice(prefix.length)];
    if (pattern.test(id)) return [id, `${prefix}${id}`];
  }
  return [id];
}

function one(params: URLSearchParams, name: string): string {
  const values = params.getAll(name);
  if (values.length !== 1 || values[0]!.trim() === '') throw new FhirError(values.length === 0 ? 'required' : 'invalid', `$preferred-id takes one '${name}' parameter`, { expression: [name] });
  return values[0]!.trim();
}

/** The search value of `s`: `\`, `,`, `|` and `$` escaped. */
const escaped = (s: string) => s.replace(/[\\,|$]/g, (c) => `\\${c}`);

/** `NamingSystem/$preferred-id`: a Parameters with `result`. */
export async function preferredId(deps: FhirDeps, req: FhirRequest, params: URLSearchParams, strict: boolean): Promise<Record<string, unknown>> {
  requireAccess(req.access, 'NamingSystem', 's');
  unknownParameters(params, ['id', 'type'], '$preferred-id', strict);
  const id = one(params, 'id');
  const type = one(params, 'type');
  if (!TYPES.includes(type)) throw new FhirError('invalid', `Unknown identifier type '${type}' (known: ${TYPES.join(', ')})`, { expression: ['type'] });
  const wanted = forms(id);
  const q = new URLSearchParams({ 'value:exact': wanted.map(escaped).join(','), 'status:not': 'retired' });
  const query = await storeQuery(deps, req, 'NamingSystem', compileSearch('NamingSystem', q, true, deps.clock.now()));
  const rows = query === undefined ? [] : await deps.store.resources.search(req.tenant, { ...query, count: 2 });
  if (rows.length === 0) throw new FhirError('not-found', `No NamingSystem has the identifier '${id}'`, { expression: ['id'] });
  if (rows.length > 1) {
    throw new FhirError('unprocessable', `More than one NamingSystem has the identifier '${id}' (${rows.map((r) => `NamingSystem/${r.id}`).join(', ')})`, { expression: ['id'] });
  }
  const uniqueIds = ((JSON.parse(rows[0]!.content) as { uniqueId?: UniqueId[] }).uniqueId ?? []).filter((u) => u.type === type && typeof u.value === 'string');
  const chosen = uniqueIds.find((u) => u.preferred === true) ?? uniqueIds[0];
  if (chosen === undefined) throw new FhirError('not-found', `NamingSystem/${rows[0]!.id} has no identifier of type '${type}'`, { expression: ['type'] });
  const value = type === 'oid' && chosen.value!.startsWith('urn:oid:') ? chosen.value!.slice(8) : chosen.value!;
  return { resourceType: 'Parameters', parameter: [{ name: 'result', valueString: value }] };
}

/** `$versions`: the FHIR versions this server answers in (R4 alone: 4.0) and its default. */
export function versions(params: URLSearchParams, strict: boolean): Record<string, unknown> {
  unknownParameters(params, [], '$versions', strict);
  return { resourceType: 'Parameters', parameter: [{ name: 'version', valueCode: '4.0' }, { name: 'default', valueCode: '4.0' }] };
}
