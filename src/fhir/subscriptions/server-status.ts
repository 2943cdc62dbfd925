/**
 * The server's own writes of a Subscription's status (R4 subscription.html: `error` after failed deliveries or while its
 * owner's client is disabled, `off` past its `end` or once its owner's authority is gone; the Backport IG: `active` once a
 * topic rest-hook's handshake is accepted; back to `active` or `requested` once the client is enabled): the next version
 * over the one read, as the operator, which activates nothing (its owner stays).
 */
import type { Clock } from '../../clock.ts';
import { FhirError } from '../../errors.ts';
import type { ResourceVersion, ResourceWriter } from '../../store/types.ts';
import { operatorAccess } from '../access.ts';
import { putOptions, putVersion, writeTx, type FhirDeps } from '../crud.ts';
import type { Resource } from '../resource.ts';
import { atWriteTime } from '../../store/write-times.ts';
import { activatedIn, BOUND_ERROR, MAX_ACTIVE } from './activation.ts';

type Status = 'off' | 'error' | 'active' | 'requested';

/**
 * Writes the Subscription's next version with `status` (and `error`), as the server, over the version read
 * (`current`, parsed as `sub`): false when a client wrote it since (their version stands). An `active` or `requested`
 * one carries no `error` (R4: the last error; one that went away is not the state it is in).
 */
export async function writeServerStatus(
  fhir: FhirDeps, clock: Clock, tenant: string, current: ResourceVersion, sub: Record<string, unknown>, status: Status, error?: string,
): Promise<boolean> {
  return (await writeOver(fhir, clock, tenant, current, sub, async () => ({ status, error }))) !== undefined;
}

/**
 * Sets a Subscription the server paused back to `status` (`active`, or `requested` awaiting its handshake), as
 * writeServerStatus does, unless its tenant holds MAX_ACTIVE activated ones already (counted in the write's
 * transaction): then it is set `off`, its `error` naming the bound (BOUND_ERROR), as activation would refuse it, for
 * the hub matches no more. What was written (`off` at the bound), or undefined when a client wrote it since.
 */
export function resumeServerPaused(
  fhir: FhirDeps, clock: Clock, tenant: string, current: ResourceVersion, sub: Record<string, unknown>, status: 'active' | 'requested',
): Promise<Status | undefined> {
  return writeOver(fhir, clock, tenant, current, sub, async (w) => ((await activatedIn(w, current.id)) >= MAX_ACTIVE ? { status: 'off', error: BOUND_ERROR } : { status }));
}

/** The next version over `current` with the status (and `error`) `choose` picks in the write's transaction; undefined when a client wrote it since. */
async function writeOver(
  fhir: FhirDeps, clock: Clock, tenant: string, current: ResourceVersion, sub: Record<string, unknown>,
  choose: (w: ResourceWriter) => Promise<{ status: Status; error?: string | undefined }>,
): Promise<Status | undefined> {
  const { error: earlier, ...rest } = sub;
  try {
    return await atWriteTime(fhir.store, clock, (now) => {
      const { activateSubscription: _activation, ...write } = putOptions(fhir, { tenant, access: operatorAccess }, now);
      const opts = { ...write, ifMatch: [current.versionId] };
      return writeTx(fhir, tenant, async (w) => {
        const { status, error } = await choose(w);
        const kept = error ?? (status === 'active' || status === 'requested' ? undefined : earlier);
        const resource = { ...rest, status, ...(kept !== undefined && { error: kept }) } as unknown as Resource;
        await putVersion(w, resource, current.id, opts, 'PUT');
        return status;
      });
    });
  } catch (err) {
    if (err instanceof FhirError && (err.status === 412 || err.status === 409)) return undefined;
    throw err;
  }
}
