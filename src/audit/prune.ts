/**
 * Retention of the audit trail (`cinder audit prune`): AuditEvents recorded before an instant are removed
 * physically, with everything they own (ExpungeRepo). The REST API keeps AuditEvents append-only, and
 * `$expunge` never takes them: this command, run by the operator, is the one way they go.
 */
import type { Clock } from '../clock.ts';
import { operatorAccess } from '../fhir/access.ts';
import { AUDIT_TYPE } from '../fhir/expunge.ts';
import { searchResources } from '../fhir/search.ts';
import type { Store } from '../store/types.ts';

/** AuditEvents removed per transaction. */
export const PRUNE_BATCH = 500;

/** An instant with its time zone (FHIR `instant`): the only form `--before` takes, so that it means one moment. */
export const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/**
 * Removes the tenant's AuditEvents whose `recorded` (the `date` search parameter) is before `before`
 * (an INSTANT), in batches of PRUNE_BATCH, each one transaction; returns how many versions went.
 * Each batch is the first page of the same search, oldest first (`_sort=date`, read in the date index's
 * order), so memory stays flat and an interrupted prune has removed the oldest events.
 */
export async function pruneAudit(
  deps: { store: Store; clock: Clock }, tenant: string, before: string, onProgress?: (removed: number) => void,
): Promise<number> {
  if (!INSTANT.test(before) || Number.isNaN(Date.parse(before))) throw new RangeError(`'${before}' is not an instant with a time zone (e.g. 2026-01-01T00:00:00Z)`);
  const params = new URLSearchParams({ date: `lt${before}`, _count: String(PRUNE_BATCH), _sort: 'date', _elements: 'id' });
  let removed = 0;
  for (;;) {
    const page = await searchResources(deps, { tenant, access: operatorAccess }, AUDIT_TYPE, params, true);
    const ids = page.rows.map((r) => r.id);
    if (!ids.length) return removed;
    let after = 0;
    for (let done = false; !done; ) {
      const r = await deps.store.expunge.batch({ tenant, type: AUDIT_TYPE, mode: 'all', ids, after, limit: PRUNE_BATCH });
      removed += r.removed;
      ({ after, done } = r);
    }
    onProgress?.(removed);
  }
}
