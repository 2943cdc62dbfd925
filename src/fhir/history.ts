import { FhirError } from '../errors.ts';
import type { HistoryQuery, ResourceVersion } from '../store/types.ts';
import { requireAccess, type FhirDeps, type FhirRequest } from './crud.ts';
import { dateRange } from './dates.ts';
import { checkTypeAndId } from './resource.ts';
import { DEFAULT_COUNT, MAX_COUNT } from './search.ts';

export interface HistoryResult {
  rows: ResourceVersion[];
  next?: string;
  self: URLSearchParams;
}

type Before = NonNullable<HistoryQuery['before']>;

function decodeBefore(raw: string): Before {
  try {
    const [lastUpdated, type, id, versionId] = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if ([lastUpdated, versionId].every((n) => typeof n === 'number') && typeof type === 'string' && typeof id === 'string') {
      return { lastUpdated, type, id, versionId };
    }
  } catch {
    // fall through
  }
  throw new FhirError('invalid', `Invalid _cursor '${raw}'`, { expression: ['_cursor'] });
}

function instant(param: string, raw: string, edge: 'low' | 'high'): number {
  const r = dateRange(raw);
  if (!r) throw new FhirError('invalid', `Invalid ${param} '${raw}': expected a FHIR instant`, { expression: [param] });
  return edge === 'low' ? r.low : r.high - 1;
}

/**
 * Instance, type or system history (FHIR R4 3.1.0.11) with `_since`, `_at`, `_count`, newest first.
 * With a patient-context token only instance history of readable resources is offered.
 */
export async function history(
  deps: FhirDeps, req: FhirRequest, params: URLSearchParams, type?: string, id?: string,
): Promise<HistoryResult> {
  if (type) checkTypeAndId(type, id);
  if (type) requireAccess(req.access, type, 'r');
  else if (!req.access.can('*', 'r')) throw new FhirError('forbidden', 'System history needs read access to every type');
  if (!id && req.access.patientLimit(type ?? '*') !== undefined) throw new FhirError('forbidden', 'Patient-context tokens cannot read type or system history');
  const self = new URLSearchParams();
  const count = params.get('_count');
  if (count !== null && !/^\d{1,6}$/.test(count)) throw new FhirError('invalid', `Invalid _count '${count}'`, { expression: ['_count'] });
  const query: HistoryQuery = { count: Math.min(count === null ? DEFAULT_COUNT : Number(count), MAX_COUNT) };
  if (count !== null) self.set('_count', count);
  if (type) query.type = type;
  if (id) query.id = id;
  const since = params.get('_since');
  if (since !== null) (query.since = instant('_since', since, 'low')), self.set('_since', since);
  const at = params.get('_at');
  if (at !== null) (query.at = instant('_at', at, 'high')), self.set('_at', at);
  const cursor = params.get('_cursor');
  if (cursor !== null) query.before = decodeBefore(cursor);
  const rows = await deps.store.resources.history(req.tenant, { ...query, count: query.count + 1 });
  const result: HistoryResult = { rows: rows.slice(0, query.count), self };
  if (rows.length > query.count && query.count > 0) {
    const l = result.rows[result.rows.length - 1]!;
    result.next = Buffer.from(JSON.stringify([l.lastUpdated, l.type, l.id, l.versionId])).toString('base64url');
  }
  return result;
}
