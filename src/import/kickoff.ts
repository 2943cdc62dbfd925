import type { Clock } from '../clock.ts';
import { FhirError } from '../errors.ts';
import { requireAccess, type Access } from '../fhir/access.ts';
import { privateEndpoint, type ResolveHost } from '../fhir/subscriptions/endpoint.ts';
import type { Store } from '../store/types.ts';
import { importRequestFrom } from './kickoff-input.ts';
import { encodeProgress, encodeSpec, type ImportSpec } from './spec.ts';

export interface ImportKickoffDeps {
  store: Pick<Store, 'imports'>;
  clock: Clock;
  /** Accepted or in-progress imports one client may have at a time (CINDER_IMPORT_MAX_JOBS_PER_CLIENT). */
  maxJobsPerClient: number;
  /** CINDER_IMPORT_ALLOW_PRIVATE: inputs may be on loopback, link-local and private addresses. */
  allowPrivate: boolean;
  resolve: ResolveHost;
}

export interface ImportKickoffRequest {
  tenant: string;
  access: Access;
  /** The kick-off URL (the status body's `request`). */
  requestUrl: string;
  body: unknown;
}

/**
 * An import writes as an operator would, so the token must create and update every type it names without
 * a patient in context and without SMART v2 filters (which a line-by-line bulk load cannot be held to):
 * system/ or user/ scopes such as `system/Observation.cu`, `user/*.write`.
 */
export function requireImportAccess(access: Access, types: Iterable<string>): void {
  if (access.patient !== undefined) throw new FhirError('forbidden', 'A token with a patient in context may not import: $import needs system/ or user/ scopes');
  for (const type of new Set(types)) {
    requireAccess(access, type, 'c');
    requireAccess(access, type, 'u');
    for (const perm of ['c', 'u'] as const) {
      if (access.patientLimit(type, perm) !== undefined || access.filters?.(type, perm) !== undefined) {
        throw new FhirError('forbidden', `The access token's scopes limit writes of ${type} to some resources; $import needs them unfiltered`);
      }
    }
  }
}

/** Refuses an input whose host is, or resolves to, a private address (as a Subscription endpoint is refused). */
async function requirePublic(deps: ImportKickoffDeps, spec: ImportSpec): Promise<void> {
  if (deps.allowPrivate) return;
  for (const [i, input] of spec.inputs.entries()) {
    // A host that does not resolve now is told when the job fetches it.
    const why = await privateEndpoint(new URL(input.url), deps.resolve);
    if (why !== undefined) {
      throw new FhirError('invalid', `input[${i}].url is refused: ${why} (CINDER_IMPORT_ALLOW_PRIVATE=true allows it)`, { expression: [`input[${i}].url`] });
    }
  }
}

/** `$import` kick-off: validates the Parameters and the token, persists an accepted job and returns its id. */
export async function kickOffImport(deps: ImportKickoffDeps, req: ImportKickoffRequest): Promise<string> {
  const { spec, credential } = importRequestFrom(req.body);
  requireImportAccess(req.access, spec.inputs.map((i) => i.type));
  await requirePublic(deps, spec);
  const id = crypto.randomUUID();
  const now = deps.clock.now();
  const created = await deps.store.imports.create(
    {
      id, tenant: req.tenant, clientId: req.access.clientId, request: req.requestUrl, spec: encodeSpec(req.access.user === undefined ? spec : { ...spec, ownerUser: req.access.user.id }), progress: encodeProgress({ done: [] }), createdAt: now,
      ...(credential === undefined ? {} : { credential }),
    },
    deps.maxJobsPerClient,
  );
  if (!created) {
    throw new FhirError('too-many', `This client already has ${deps.maxJobsPerClient} import(s) in progress; wait for one to finish or cancel it`, { headers: { 'Retry-After': '30' } });
  }
  return id;
}
