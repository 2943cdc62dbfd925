import { toJobSummary, type JobSummaryRow } from '../rows/job-summary.ts';
import type { ImportJobRepo, ImportJobState } from '../types.ts';
import { toImportJob, type ImportJobRow } from '../rows/import-jobs.ts';
import type { Pg } from './db.ts';
import { transaction } from './transaction.ts';
import { dbNowOf } from './export-jobs.ts';

/**
 * Import job lifecycle on Postgres. Claims take the oldest claimable row with `FOR UPDATE SKIP LOCKED`
 * (as export jobs), so processes sharing the database never hand one job to two runners.
 */
export function createPostgresImportJobs(sql: Pg): ImportJobRepo {
  const inProgressBy = (id: string, owner: string) => sql`id = ${id} AND state = 'in-progress' AND lease_owner = ${owner}`;
  return {
    async create(job, maxActive) {
      return transaction(sql, async (tx) => {
        // One creator per client at a time, so the count and the insert are atomic.
        await tx`SELECT pg_advisory_xact_lock(hashtextextended(${'import/' + job.tenant + '/' + job.clientId}, 0))`;
        const [active] = await tx<{ n: number }[]>`
          SELECT count(*)::int AS n FROM import_jobs
          WHERE tenant = ${job.tenant} AND client_id = ${job.clientId} AND owner_user IS NOT DISTINCT FROM ${job.ownerUser ?? null}::text
            AND state IN ('accepted', 'in-progress')`;
        if (active!.n >= maxActive) return false;
        await tx`
          INSERT INTO import_jobs (id, tenant, client_id, state, request, spec, created_at, updated_at, progress, credential, attempts, owner_user)
          VALUES (${job.id}, ${job.tenant}, ${job.clientId}, 'accepted', ${job.request}, ${job.spec}, ${job.createdAt}, ${job.createdAt}, ${job.progress},
                  ${job.credential ?? null}, 0, ${job.ownerUser ?? null})`;
        return true;
      });
    },
    async get(tenant, id) {
      const [r] = await sql<ImportJobRow[]>`SELECT * FROM import_jobs WHERE tenant = ${tenant} AND id = ${id}`;
      return r ? toImportJob(r) : null;
    },
    async claim(owner, now, leaseMs) {
      const [r] = await sql<ImportJobRow[]>`
        UPDATE import_jobs SET state = 'in-progress', lease_owner = ${owner}, lease_until = ${dbNowOf(sql)} + ${leaseMs}, attempts = attempts + 1, counts = NULL, updated_at = ${now}
        WHERE id = (
          SELECT id FROM import_jobs WHERE state = 'accepted' OR (state = 'in-progress' AND lease_until < ${dbNowOf(sql)})
          ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING *`;
      return r ? toImportJob(r) : null;
    },
    async checkpoint(id, owner, now, leaseMs, progress, counts) {
      const set = progress !== undefined
        ? sql`, progress = ${progress}, counts = ${counts ?? null}`
        : counts !== undefined ? sql`, counts = ${counts}` : sql``;
      const r = await sql`UPDATE import_jobs SET lease_until = ${dbNowOf(sql)} + ${leaseMs}, updated_at = ${now} ${set} WHERE ${inProgressBy(id, owner)}`;
      return r.count > 0;
    },
    async complete(id, owner, now, progress) {
      const r = await sql`
        UPDATE import_jobs SET state = 'completed', credential = NULL, counts = NULL, progress = ${progress}, completed_at = ${now}, updated_at = ${now}, lease_owner = NULL, lease_until = NULL
        WHERE ${inProgressBy(id, owner)}`;
      return r.count > 0;
    },
    async fail(id, owner, now, error, progress) {
      const r = await sql`
        UPDATE import_jobs SET state = 'failed', credential = NULL, counts = NULL, error = ${error}, progress = ${progress}, completed_at = ${now}, updated_at = ${now},
          lease_owner = NULL, lease_until = NULL
        WHERE ${inProgressBy(id, owner)}`;
      return r.count > 0;
    },
    async release(id, owner, now, refund = false) {
      await sql`UPDATE import_jobs SET state = 'accepted', lease_owner = NULL, lease_until = NULL, attempts = GREATEST(0, attempts - ${refund ? 1 : 0}), updated_at = ${now}
        WHERE ${inProgressBy(id, owner)}`;
    },
    async cancel(tenant, id, now) {
      const [r] = await sql<{ state: ImportJobState }[]>`
        UPDATE import_jobs SET state = 'cancelled', credential = NULL, updated_at = ${now}
        FROM (SELECT id, state FROM import_jobs WHERE tenant = ${tenant} AND id = ${id} AND state <> 'cancelled' FOR UPDATE) AS old
        WHERE import_jobs.id = old.id
        RETURNING old.state`;
      return r ? r.state : null;
    },
    async removeEnded(before) {
      return [...(await sql<{ tenant: string; id: string }[]>`
        DELETE FROM import_jobs WHERE state IN ('completed', 'failed', 'cancelled') AND updated_at < ${before} AND COALESCE(lease_until, 0) < ${dbNowOf(sql)}
        RETURNING tenant, id`)];
    },
    async createdSince(since) {
      const rows = await sql<JobSummaryRow[]>`
        SELECT tenant, id, client_id, owner_user, state, request, created_at FROM import_jobs WHERE created_at >= ${since} ORDER BY created_at, id`;
      return rows.map(toJobSummary);
    },
    async countByState() {
      const out: Record<string, number> = {};
      for (const r of await sql<{ state: string; n: number }[]>`SELECT state, count(*)::int AS n FROM import_jobs GROUP BY state`) out[r.state] = r.n;
      return out;
    },
  };
}
