/**
 * FHIR R4 `StructureDefinition/$snapshot` (structuredefinition-operation-snapshot.html): the
 * StructureDefinition given (`definition`, a resource in Parameters), named (`url`: the tenant's, else an R4
 * core canonical) or stored (`StructureDefinition/{id}/$snapshot`), answered with the snapshot generated
 * from its differential (validation/profile/snapshot.ts), as HAPI FHIR answers it.
 */
import { FhirError } from '../errors.ts';
import type { CapabilityContribution } from './capability.ts';
import { readable, readResource, type FhirDeps, type FhirRequest } from './crud.ts';
import { requireAccess } from './access.ts';
import { parseExact } from './exact-json.ts';
import type { Resource } from './resource.ts';
import { requireValid } from './validation/check.ts';
import { storeProfiles } from './validation/profile/definitions.ts';
import { ProfileRegistry } from './validation/profile/registry.ts';
import { generateSnapshot, SnapshotError, type DefinitionLookup, type SnapshotOptions } from './validation/profile/snapshot.ts';
import { unknownParameters } from './operation-params.ts';

type Json = Record<string, unknown>;

/** `$snapshot` on StructureDefinition (type and instance level), in the CapabilityStatement. */
export const snapshotCapability: CapabilityContribution = {
  operations: [{ name: 'snapshot', definition: 'http://hl7.org/fhir/OperationDefinition/StructureDefinition-snapshot', types: ['StructureDefinition'] }],
};

interface SnapshotInput {
  definition?: unknown;
  url?: string;
}

/** The operation's input: `url` in the query, or a Parameters body with `definition` (a resource) or `url`; another query parameter ignored unless `strict`. */
function input(body: unknown, query: URLSearchParams, strict: boolean): SnapshotInput {
  const out: SnapshotInput = {};
  if (query.has('definition')) throw new FhirError('invalid', '$snapshot takes definition (a resource) only in a Parameters body', { expression: ['definition'] });
  unknownParameters(query, ['url'], '$snapshot', strict);
  const url = query.get('url');
  if (url !== null) out.url = url;
  if (body === undefined) return out;
  const b = body as Json | null;
  if (b === null || typeof b !== 'object' || b.resourceType !== 'Parameters') {
    throw new FhirError('invalid', '$snapshot takes a Parameters resource (definition or url)', { expression: ['Parameters'] });
  }
  for (const [i, p] of (Array.isArray(b.parameter) ? (b.parameter as Json[]) : []).entries()) {
    if (p?.name === 'definition' && p.resource !== undefined) out.definition = p.resource;
    else if (p?.name === 'url' && typeof (p.valueString ?? p.valueUri ?? p.valueCanonical) === 'string') out.url = (p.valueString ?? p.valueUri ?? p.valueCanonical) as string;
    else throw new FhirError('invalid', `Parameters.parameter[${i}]: $snapshot takes definition (a StructureDefinition) and url (string)`, { expression: [`Parameters.parameter[${i}]`] });
  }
  return out;
}

/**
 * The tenant's StructureDefinitions (else R4 core's) by canonical, as `lookup` finds them, but only
 * those the request may read: one a read of it would refuse (a SMART v2 scope filter such as
 * `StructureDefinition.rs?status=active` leaving it out) is not found, as a search by its url would
 * find nothing, whether it is the one asked for or a base the snapshot stands on.
 */
function inReach(deps: FhirDeps, req: FhirRequest, lookup: DefinitionLookup): DefinitionLookup {
  const { access } = req;
  if (access.filters?.('StructureDefinition', 'r') === undefined && access.patientLimit('StructureDefinition', 'r') === undefined) return lookup;
  return async (canonical) => {
    const found = await lookup(canonical);
    if (found === undefined || typeof found.id !== 'string') return found;
    const stored = await deps.store.resources.read(req.tenant, 'StructureDefinition', found.id);
    // R4's own (not stored in the tenant) are everyone's.
    if (!stored || stored.deleted || (JSON.parse(stored.content) as Json).url !== found.url) return found;
    return (await readable(deps, req, stored)) ? found : undefined;
  };
}

/** `StructureDefinition/$snapshot` (id absent) and `StructureDefinition/{id}/$snapshot`: the StructureDefinition with its generated snapshot. */
export async function snapshotOperation(deps: FhirDeps, req: FhirRequest, id: string | undefined, body: unknown, query: URLSearchParams, strict: boolean): Promise<Json> {
  const args = input(body, query, strict);
  const registry = deps.profiles?.registry ?? new ProfileRegistry(storeProfiles(deps.store));
  const lookup = inReach(deps, req, registry.definitionLookup(req.tenant));
  let sd: Json;
  if (id !== undefined) {
    if (args.definition !== undefined || args.url !== undefined) throw new FhirError('invalid', 'StructureDefinition/[id]/$snapshot takes no definition or url: it generates the stored one\'s snapshot', { expression: [args.url !== undefined ? 'url' : 'definition'] });
    sd = parseExact((await readResource(deps, req, 'StructureDefinition', id)).content) as Json;
  } else {
    requireAccess(req.access, 'StructureDefinition', 'r');
    if ((args.definition === undefined) === (args.url === undefined)) {
      throw new FhirError('invalid', '$snapshot needs exactly one of definition (a StructureDefinition in a Parameters body) and url', { expression: ['definition'] });
    }
    if (args.definition !== undefined) {
      const d = args.definition as Json | null;
      if (d === null || typeof d !== 'object' || Array.isArray(d) || d.resourceType !== 'StructureDefinition') {
        throw new FhirError('invalid', 'The definition parameter must be a StructureDefinition', { expression: ['definition'] });
      }
      // A definition given inline must be structurally valid R4 (a 422 listing its problems); its invariants are not
      // required, so that a differential of paths without ids (sdf-14), as older profiles have, is generated too.
      requireValid(d as Resource, 'structural');
      sd = d;
    } else {
      const found = await lookup(args.url!);
      if (found === undefined) throw new FhirError('not-found', `No StructureDefinition has the url ${args.url}`, { expression: ['url'] });
      sd = found;
    }
  }
  // The tenant's terminology judges a required binding's value set replaced by another (registry.snapshot's, with the lookup in the token's reach).
  const options: SnapshotOptions = registry.valueSets === undefined ? {} : { valueSets: registry.valueSets(req.tenant) };
  try {
    return await generateSnapshot(sd, lookup, options);
  } catch (err) {
    if (!(err instanceof SnapshotError)) throw err;
    throw new FhirError('unprocessable', err.message, { expression: [err.element ?? 'StructureDefinition.differential'], cause: err });
  }
}
