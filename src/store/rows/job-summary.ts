import type { JobSummary } from '../interface/export-jobs.ts';

/** The columns of an export or import job a JobSummary is read from. */
export const JOB_SUMMARY_COLUMNS = 'tenant, id, client_id, owner_user, state, request, created_at';

export interface JobSummaryRow {
  tenant: string;
  id: string;
  client_id: string;
  owner_user: string | null;
  state: JobSummary['state'];
  request: string;
  created_at: number | string | bigint;
}

/** A row of JOB_SUMMARY_COLUMNS as a JobSummary (PostgreSQL's BIGINT arrives as a string). */
export function toJobSummary(r: JobSummaryRow): JobSummary {
  return { tenant: r.tenant, id: r.id, clientId: r.client_id, ownerUser: r.owner_user ?? null, state: r.state, request: r.request, createdAt: Number(r.created_at) };
}
