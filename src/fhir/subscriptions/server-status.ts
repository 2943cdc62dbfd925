/**
 * The server's own writes of a Subscription's status (R4 subscription.html: `error` after failed deliveries or while its
 * owner's client is disabled, `off` past its `end` or once its owner's authority is gone; the Backport IG: `active` once a
 * topic rest-hook's handshake is accepted; back to `active` or `requested` once the client is enabled): the next version
 * over the one read, as the operator, which activates nothing (its owner stays).
 */
import type { Clock } from '../../clock.ts';
import { FhirError } from '../../errors.ts';
import type { ResourceVersion } from '../../store/types.ts';
import { operatorAccess } from '../access.ts';
import { putOptions, putVersion, writeTx, type FhirDeps } from '../crud.ts';
import type { Resource } from '../resource.ts';
import { atWriteTime } from '../../store/write-times.ts';

/**
 * Writes the Subscription's next version with `status` (and `error`), as the server, over the version read
 * (`current`, parsed as `sub`): false when a client wrote it since (their version stands). An `active` or `requested`
 * one carries no `error` (R4: the last error; one that went away is not the state it is in).
 */
export async function writeServerStatus(
  fhir: FhirDeps, clock: Clock, tenant: string, current: ResourceVersion, sub: Record<string, unknown>, status: 'off' | 'error' | 'active' | 'requested', error?: string,
): Promise<boolean> {
  const { error: earlier, ...rest } = sub;
  const kept = error ?? (status === 'active' || status === 'requested' ? undefined : earlier);
  const resource = { ...rest, status, ...(kept !== undefined && { error: kept }) } as unknown as Resource;
  try {
    await atWriteTime(fhir.store, clock, (now) => {
      const { activateSubscription: _activation, ...write } = putOptions(fhir, { tenant, access: operatorAccess }, now);
      const opts = { ...write, ifMatch: [current.versionId] };
      return writeTx(fhir, tenant, (w) => putVersion(w, resource, current.id, opts, 'PUT'));
    });
    return true;
  } catch (err) {
    if (err instanceof FhirError && (err.status === 412 || err.status === 409)) return false;
    throw err;
  }
}
