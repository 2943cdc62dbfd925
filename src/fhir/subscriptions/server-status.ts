/**
 * The server's own writes of a Subscription's status (R4 subscription.html: `error` after failed deliveries, `off`
 * past its `end` or once its owner's authority is gone; the Backport IG: `active` once a topic rest-hook's handshake
 * is accepted): the next version over the one read, as the operator, which activates nothing (its owner stays).
 */
import type { Clock } from '../../clock.ts';
import { FhirError } from '../../errors.ts';
import type { ResourceVersion } from '../../store/types.ts';
import { operatorAccess } from '../access.ts';
import { putOptions, putVersion, writeTx, type FhirDeps } from '../crud.ts';
import type { Resource } from '../resource.ts';

/**
 * Writes the Subscription's next version with `status` (and `error`), as the server, over the version read
 * (`current`, parsed as `sub`): false when a client wrote it since (their version stands).
 */
export async function writeServerStatus(
  fhir: FhirDeps, clock: Clock, tenant: string, current: ResourceVersion, sub: Record<string, unknown>, status: 'off' | 'error' | 'active', error?: string,
): Promise<boolean> {
  const resource = { ...sub, status, ...(error !== undefined && { error }) } as unknown as Resource;
  const { activateSubscription: _activation, ...write } = putOptions(fhir, { tenant, access: operatorAccess }, clock.now());
  const opts = { ...write, ifMatch: [current.versionId] };
  try {
    await writeTx(fhir, tenant, (w) => putVersion(w, resource, current.id, opts, 'PUT'));
    return true;
  } catch (err) {
    if (err instanceof FhirError && (err.status === 412 || err.status === 409)) return false;
    throw err;
  }
}
