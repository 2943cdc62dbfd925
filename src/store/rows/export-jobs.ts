import type { ExportJob, ExportJobState } from '../types.ts';

/** An `export_jobs` row as both adapters read it; `purged` is INTEGER 0/1 on SQLite and BOOLEAN on Postgres. */
export interface JobRow {
  id: string;
  tenant: string;
  client_id: string;
  state: ExportJobState;
  request: string;
  spec: string;
  transaction_time: number;
  created_at: number;
  updated_at: number;
  lease_owner: string | null;
  lease_until: number | null;
  attempts: number;
  progress: string;
  error: string | null;
  completed_at: number | null;
  expires_at: number | null;
  purged: boolean | number;
}

/** Maps an `export_jobs` row to the domain ExportJob. */
export function toJob(r: JobRow): ExportJob {
  return {
    id: r.id, tenant: r.tenant, clientId: r.client_id, state: r.state, request: r.request, spec: r.spec,
    transactionTime: r.transaction_time, createdAt: r.created_at, updatedAt: r.updated_at, leaseOwner: r.lease_owner,
    leaseUntil: r.lease_until, attempts: r.attempts, progress: r.progress, error: r.error, completedAt: r.completed_at,
    expiresAt: r.expires_at, purged: Boolean(r.purged),
  };
}
