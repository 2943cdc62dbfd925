import { dateRange } from '../fhir/dates.ts';
import { parseReference } from '../fhir/references.ts';
import type { ResourceVersion, Store } from '../store/types.ts';

type Json = Record<string, unknown>;

/** The version of `type/id` as of `at` (current or from history), or null when it did not exist then. */
export async function readAsOf(store: Store, tenant: string, type: string, id: string, at: number): Promise<ResourceVersion | null> {
  const current = await store.resources.read(tenant, type, id);
  if (!current) return null;
  const v = current.lastUpdated <= at ? current : (await store.resources.history(tenant, { type, id, at, count: 1 }))[0];
  return v && !v.deleted ? v : null;
}

/** Whether a Group.member counts at `at`: not inactive, and `at` within its period (bounds at their precision). */
function memberAt(member: Json, at: number): boolean {
  if (member.inactive === true) return false;
  const period = member.period as { start?: string; end?: string } | undefined;
  const start = period?.start ? dateRange(period.start) : null;
  const end = period?.end ? dateRange(period.end) : null;
  if (start && start.low > at) return false;
  if (end && end.high <= at) return false;
  return true;
}

/**
 * The patients that are members of Group `id` at time `at` (FHIR R4 Group.member: `entity`,
 * `inactive`, `period`); members that are Groups are followed, cycles ignored.
 */
export async function groupPatients(store: Store, tenant: string, id: string, at: number): Promise<Set<string>> {
  const patients = new Set<string>();
  const seen = new Set<string>();
  const pending = [id];
  while (pending.length) {
    const gid = pending.pop()!;
    if (seen.has(gid)) continue;
    seen.add(gid);
    const v = await readAsOf(store, tenant, 'Group', gid, at);
    if (!v) continue;
    const group = JSON.parse(v.content) as Json;
    for (const member of (Array.isArray(group.member) ? group.member : []) as Json[]) {
      const ref = (member.entity as Json | undefined)?.reference;
      const parsed = typeof ref === 'string' ? parseReference(ref) : null;
      if (!parsed || !memberAt(member, at)) continue;
      if (parsed.type === 'Patient') patients.add(parsed.id);
      else if (parsed.type === 'Group') pending.push(parsed.id);
    }
  }
  return patients;
}
