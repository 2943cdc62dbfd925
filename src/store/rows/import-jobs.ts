import type { ImportJob, ImportJobState } from '../types.ts';

/** An `import_jobs` row as both adapters read it. */
export interface ImportJobRow {
  id: string;
  tenant: string;
  client_id: string;
  state: ImportJobState;
  request: string;
  spec: string;
  created_at: number | string;
  updated_at: number | string;
  lease_owner: string | null;
  lease_until: number | string | null;
  attempts: number;
  progress: string;
  counts?: string | null;
  credential: string | null;
  error: string | null;
  completed_at: number | string | null;
}

const num = (v: number | string | null): number | null => (v === null ? null : Number(v));

/** Maps an `import_jobs` row to the domain ImportJob (PostgreSQL's BIGINT may arrive as text). */
export function toImportJob(r: ImportJobRow): ImportJob {
  return {
    id: r.id, tenant: r.tenant, clientId: r.client_id, state: r.state, request: r.request, spec: r.spec,
    createdAt: Number(r.created_at), updatedAt: Number(r.updated_at), leaseOwner: r.lease_owner, leaseUntil: num(r.lease_until),
    attempts: r.attempts, credential: r.credential ?? null, progress: r.progress, counts: r.counts ?? null, error: r.error, completedAt: num(r.completed_at),
  };
}
