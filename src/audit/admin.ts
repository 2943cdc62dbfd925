/**
 * AuditEvents of what the operator does with the command line (`cinder client|user create|update|disable|enable|delete`,
 * `client rotate-secret`, `tenant create`, `keys rotate`, `expunge`, `audit prune`), written at once into the tenant
 * when CINDER_AUDIT is on, through the store's bulk insert as the audit trail writes:
 * who cut whose access, and when, is on record beside what they did with it.
 */
import type { Clock } from '../clock.ts';
import type { Resource } from '../fhir/resource.ts';
import { newId } from '../fhir/resource.ts';
import { prepareVersion, versionToWrite } from '../fhir/prepared.ts';
import type { Store } from '../store/types.ts';
import { adminAuditEvent, type AdminEvent } from './event.ts';
import { atWriteTime } from '../store/write-times.ts';

/** Records `event` in `tenant` (its FHIR base is `event.server`). */
export async function recordAdminChange(store: Store, clock: Clock, tenant: string, event: Omit<AdminEvent, 'recorded'>): Promise<void> {
  await atWriteTime(store, clock, (now) => {
    const resource = adminAuditEvent({ ...event, recorded: new Date(now).toISOString() }) as Resource;
    const version = versionToWrite(prepareVersion(resource, newId(), event.server), 1, now, 'POST');
    return store.resources.write(tenant, (w) => w.insertNew([version]));
  });
}
