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

/** Hosts the kick-off resolves at once. */
export const RESOLVE_CONCURRENCY = 16;
/**
 * How long the kick-off spends resolving its inputs' hosts in all (each resolution is also bounded, endpoint.ts): a
 * host not resolved by then is accepted as one that does not resolve is, and checked when the job fetches it.
 */
export const RESOLVE_DEADLINE_MS = 5_000;

/**
 * Refuses an input whose host is, or resolves to, a private address (as a Subscription endpoint is refused): the
 * first such input in order is named. Each distinct host is resolved once, RESOLVE_CONCURRENCY at a time, within
 * RESOLVE_DEADLINE_MS in all, so that a slow resolver costs a kick-off of 1,000 inputs seconds, not inputs × timeout.
 * A host that does not resolve now (or not within the deadline) is told when the job fetches it, where every fetch
 * is checked again.
 */
async function requirePublic(deps: ImportKickoffDeps, spec: ImportSpec): Promise<void> {
  if (deps.allowPrivate) return;
  // Each distinct host (its addresses, and so the answer, are the same whatever the URL's scheme, port or path) and
  // the first input naming it, in the inputs' order.
  const firstOf = new Map<string, { index: number; url: URL }>();
  for (const [index, input] of spec.inputs.entries()) {
    const url = new URL(input.url);
    if (!firstOf.has(url.hostname)) firstOf.set(url.hostname, { index, url });
  }
  const hosts = [...firstOf.values()];
  let refused: { index: number; why: string } | undefined;
  let next = 0;
  let expired = false;
  const worker = async () => {
    while (!expired && next < hosts.length) {
      const { index, url } = hosts[next++]!;
      // A refusal of an earlier input already decides the answer.
      if (refused && refused.index < index) return;
      const why = await privateEndpoint(url, deps.resolve);
      if (why !== undefined && (!refused || index < refused.index)) refused = { index, why };
    }
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(() => resolve(void (expired = true)), RESOLVE_DEADLINE_MS)));
  try {
    await Promise.race([Promise.all(Array.from({ length: Math.min(RESOLVE_CONCURRENCY, hosts.length) }, worker)), deadline]);
  } finally {
    clearTimeout(timer);
    expired = true;
  }
  if (refused) {
    const { index: i, why } = refused;
    throw new FhirError('invalid', `input[${i}].url is refused: ${why} (CINDER_IMPORT_ALLOW_PRIVATE=true allows it)`, { expression: [`input[${i}].url`] });
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
      ...(req.access.user === undefined ? {} : { ownerUser: req.access.user.id }),
    },
    deps.maxJobsPerClient,
  );
  if (!created) {
    // The limit is the owner's: a signed-in user's with this client, or the client's own (no user).
    const who = req.access.user === undefined ? 'This client' : 'This user of this client';
    throw new FhirError('too-many', `${who} already has ${deps.maxJobsPerClient} import(s) in progress; wait for one to finish or cancel it`, { headers: { 'Retry-After': '30' } });
  }
  return id;
}
