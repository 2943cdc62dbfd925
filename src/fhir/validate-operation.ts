/**
 * FHIR R4 `$validate` (resource-operation-validate.html) at type and instance level: validates a
 * resource against the R4 base definitions, always at the strict level whatever CINDER_VALIDATION
 * says, and against the profile `profile` names and those its `meta.profile` claims (profile/), and
 * answers 200 with an OperationOutcome of every problem found.
 */
import { FhirError, type FhirIssue } from '../errors.ts';
import type { CapabilityContribution } from './capability.ts';
import { readResource, requireStoredInReach, type FhirDeps, type FhirRequest } from './crud.ts';
import { parseExact } from './exact-json.ts';
import { requireAccess } from './access.ts';
import { issue, operationOutcome } from './outcome.ts';
import { asResource, checkTypeAndId, type Resource } from './resource.ts';
import { REST_RESOURCE_TYPES } from './resource-types.ts';
import { outcomeIssues, validationIssuesPaced } from './validation/check.ts';
import type { ValidationIssue } from './validation/validate.ts';
import { distinctIssues, profilesToCheck, readsProfiles } from './validation/profile/profile-check.ts';
import { profileCost } from './validation/profile/run.ts';

type Json = Record<string, unknown>;

/** `$validate` on every resource type, in the CapabilityStatement. */
export const validateCapability: CapabilityContribution = {
  operations: [{ name: 'validate', definition: 'http://hl7.org/fhir/OperationDefinition/Resource-validate', types: [...REST_RESOURCE_TYPES] }],
};
type Mode = 'create' | 'update' | 'delete';
const MODES = new Set(['create', 'update', 'delete', 'profile']);
const BASE_PROFILE = 'http://hl7.org/fhir/StructureDefinition/';

interface ValidateInput {
  resource?: unknown;
  mode?: string;
  profile?: string;
}

/** The operation's input: a Parameters resource (`resource`, `mode`, `profile`) or the resource itself. */
function input(body: unknown, query: URLSearchParams): ValidateInput {
  const out: ValidateInput = {};
  const mode = query.get('mode');
  const profile = query.get('profile');
  if (mode !== null) out.mode = mode;
  if (profile !== null) out.profile = profile;
  if (body === undefined) return out;
  const b = body as Json | null;
  if (b !== null && typeof b === 'object' && b.resourceType === 'Parameters') {
    const params = Array.isArray(b.parameter) ? (b.parameter as Json[]) : [];
    for (const [i, p] of params.entries()) {
      const name = p?.name;
      if (name === 'resource') out.resource = p.resource;
      else if (name === 'mode' && typeof p.valueCode === 'string') out.mode = p.valueCode;
      else if (name === 'profile' && (typeof p.valueUri === 'string' || typeof p.valueCanonical === 'string')) out.profile = (p.valueUri ?? p.valueCanonical) as string;
      else throw new FhirError('invalid', `Parameters.parameter[${i}]: $validate takes resource, mode (code) and profile (uri)`, { expression: [`Parameters.parameter[${i}]`] });
    }
    return out;
  }
  out.resource = body;
  return out;
}

/** `[type]/$validate` (id absent) and `[type]/[id]/$validate`: the OperationOutcome to answer with 200. */
export async function validateOperation(
  deps: FhirDeps, req: FhirRequest, type: string, id: string | undefined, body: unknown, query: URLSearchParams,
): Promise<Json> {
  checkTypeAndId(type, id);
  const args = input(body, query);
  if (args.mode !== undefined && !MODES.has(args.mode)) {
    throw new FhirError('invalid', `Unknown $validate mode '${args.mode}': expected create, update, delete or profile`, { expression: ['mode'] });
  }
  const mode: Mode | undefined = args.mode === 'create' || args.mode === 'update' || args.mode === 'delete' ? args.mode : undefined;
  const issues: FhirIssue[] = [];
  if (mode === 'delete') {
    if (id === undefined) throw new FhirError('invalid', '$validate with mode=delete needs an instance: [type]/[id]/$validate');
    requireAccess(req.access, type, 'd');
    await requireStoredInReach(deps, req, type, id, 'd');
    const current = await deps.store.resources.read(req.tenant, type, id);
    if (!current || current.deleted) throw new FhirError('not-found', `${type}/${id} is not known`);
    return outcome(issues);
  }
  let resource: Resource;
  if (args.resource === undefined) {
    if (id === undefined) throw new FhirError('required', '$validate needs a resource: the body, or a Parameters resource with a resource parameter');
    resource = parseExact((await readResource(deps, req, type, id)).content) as Resource;
  } else {
    resource = asResource(args.resource, type);
    requireAccess(req.access, type, mode === 'update' || (mode === undefined && id !== undefined) ? 'u' : 'c');
  }
  if (mode === 'update' || (mode === undefined && id !== undefined && args.resource !== undefined)) {
    if (resource.id === undefined) issues.push(issue('error', 'required', 'A resource to update must carry an id', [`${type}.id`]));
    else if (id !== undefined && resource.id !== id) issues.push(issue('error', 'invalid', `Resource id '${resource.id}' does not match the URL id '${id}'`, [`${type}.id`]));
  }
  // Its large strings (a Binary's data) read in slices first, and a large array validated in parts, letting the event loop turn (check.ts).
  issues.push(...outcomeIssues(await validationIssuesPaced(resource, 'strict')));
  issues.push(...outcomeIssues(await profileIssues(deps, req.tenant, resource, args.profile, readsProfiles(req.access))));
  issues.push(...outcomeIssues((await deps.questionnaires?.issues(req.tenant, resource as Json, { warnings: true, access: req.access })) ?? []));
  return outcome(issues);
}

/**
 * The problems of `resource` against the profile the operation names (`profile`: an unknown one is an
 * error, as the client asked for it) and those it claims in `meta.profile` (an unknown one a warning:
 * R4 lets a resource claim profiles a server has never seen), the profiles its contained resources and a
 * document's or collection's entries claim, and its extensions against their definitions, warnings included.
 */
async function profileIssues(deps: FhirDeps, tenant: string, resource: Resource, profile: string | undefined, reads: boolean): Promise<ValidationIssue[]> {
  const out: ValidationIssue[] = [];
  const json = resource as Json;
  if (profile !== undefined && deps.profiles === undefined && profile.split('|')[0] !== BASE_PROFILE + resource.resourceType) {
    out.push({ severity: 'error', code: 'not-supported', expression: 'profile', text: `Validation against the profile '${profile}' is not supported here` });
  }
  if (deps.profiles === undefined) return out;
  const cost = profileCost();
  if (profile !== undefined) {
    const named = await deps.profiles.issues(tenant, json, [profile], { warnings: true, namedAt: () => 'profile', cost, reads });
    for (const i of named) out.push(i.code === 'not-supported' && i.expression === 'profile' && i.severity === 'warning' ? { ...i, severity: 'error', text: `The profile ${profile} is not known to Cinder, so the resource cannot be validated against it` } : i);
  }
  // Those it claims, and the vital signs profile R4 requires of a vital sign that may claim none (named by the resource).
  const claimed = (json.meta as Json | undefined)?.profile;
  const urls = profilesToCheck(json).filter((c) => c !== profile);
  if (urls.length > 0) {
    const namedAt = (i: number) => (Array.isArray(claimed) && claimed.includes(urls[i]) ? `${resource.resourceType}.meta.profile[${claimed.indexOf(urls[i])}]` : resource.resourceType);
    out.push(...(await deps.profiles.issues(tenant, json, urls, { warnings: true, namedAt, cost, reads })));
  }
  out.push(...(await deps.profiles.nestedIssues(tenant, json, { warnings: true, cost, reads })));
  out.push(...(await deps.profiles.extensionIssues(tenant, json, { warnings: true, cost, reads })));
  return distinctIssues(out);
}

function outcome(issues: FhirIssue[]): Json {
  if (issues.length === 0) return operationOutcome([issue('information', 'informational', 'No issues found: the resource is valid FHIR R4')]);
  return operationOutcome(issues);
}
