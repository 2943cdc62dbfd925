import { toJobSummary, type JobSummaryRow } from '../rows/job-summary.ts';
import type { ExportCleanupRepo, ExportDownloadRepo, ExportJobRepo, ExportJobState, ExportScratchRepo } from '../types.ts';
import { toJob } from '../rows/export-jobs.ts';
import type { JobRow } from '../rows/export-jobs.ts';
import type { Pg, PgTx } from './db.ts';
import { transaction } from './transaction.ts';

/**
 * The database's clock in epoch ms, as a fragment: what every lease is set and judged by, so that processes on
 * machines whose clocks disagree never take a live job for an abandoned one (a `cinder export` command's, another
 * server's). clock_timestamp(), not now(): a transaction's start may lie well before its statement.
 */
export const dbNowOf = (sql: Pg | PgTx) => sql`(extract(epoch FROM clock_timestamp()) * 1000)::bigint`;

/** A download holds the job's files now, by the database's clock. */
async function held(tx: PgTx, id: string): Promise<boolean> {
  const [r] = await tx<{ held: boolean }[]>`SELECT EXISTS (SELECT 1 FROM export_downloads WHERE job_id = ${id} AND until >= ${dbNowOf(tx)}) AS held`;
  return r!.held;
}

/**
 * Export job lifecycle on Postgres. Claims take the oldest claimable row with `FOR UPDATE SKIP LOCKED`,
 * so processes sharing the database never hand one job to two workers and never wait on each other.
 */
export function createPostgresExportJobs(sql: Pg): ExportJobRepo {
  /** The job is running under `owner`'s lease: every lease-holder update checks this. */
  const inProgressBy = (id: string, owner: string) => sql`id = ${id} AND state = 'in-progress' AND lease_owner = ${owner}`;
  return {
    async create(job, patients, maxActive) {
      return transaction(sql, async (tx) => {
        // One creator per client at a time, so the count and the insert are atomic.
        await tx`SELECT pg_advisory_xact_lock(hashtextextended(${job.tenant + '/' + job.clientId}, 0))`;
        const [active] = await tx<{ n: number }[]>`
          SELECT count(*)::int AS n FROM export_jobs
          WHERE tenant = ${job.tenant} AND client_id = ${job.clientId} AND owner_user IS NOT DISTINCT FROM ${job.ownerUser ?? null}::text
            AND state IN ('accepted', 'in-progress')`;
        if (active!.n >= maxActive) return false;
        const claim = job.claim;
        await tx`
          INSERT INTO export_jobs (id, tenant, client_id, state, request, spec, transaction_time, created_at, updated_at, progress, lease_owner, lease_until, attempts, owner_user)
          VALUES (${job.id}, ${job.tenant}, ${job.clientId}, ${claim ? 'in-progress' : 'accepted'}, ${job.request}, ${job.spec}, ${job.transactionTime},
                  ${job.createdAt}, ${job.createdAt}, ${job.progress}, ${claim?.owner ?? null}, ${claim ? tx`${dbNowOf(tx)} + ${claim.leaseMs}` : null}, ${claim ? 1 : 0}, ${job.ownerUser ?? null})`;
        if (patients.length) {
          await tx`
            INSERT INTO export_patients (job_id, patient, joined)
            SELECT ${job.id}, p, j = 't' FROM unnest(${patients.map((p) => p.id)}::text[], ${patients.map((p) => (p.joined ? 't' : 'f'))}::text[]) AS u(p, j)
            ON CONFLICT DO NOTHING`;
        }
        return true;
      });
    },
    async activeCount(tenant, clientId, ownerUser) {
      const [r] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM export_jobs
        WHERE tenant = ${tenant} AND client_id = ${clientId} AND owner_user IS NOT DISTINCT FROM ${ownerUser ?? null}::text AND state IN ('accepted', 'in-progress')`;
      return r!.n;
    },
    async get(tenant, id) {
      const [r] = await sql<JobRow[]>`SELECT * FROM export_jobs WHERE tenant = ${tenant} AND id = ${id}`;
      return r ? toJob(r) : null;
    },
    async claim(owner, now, leaseMs, id) {
      const only = id === undefined ? sql`` : sql`AND id = ${id}`;
      const [r] = await sql<JobRow[]>`
        UPDATE export_jobs SET state = 'in-progress', lease_owner = ${owner}, lease_until = ${dbNowOf(sql)} + ${leaseMs}, attempts = attempts + 1, updated_at = ${now}
        WHERE id = (
          SELECT id FROM export_jobs
          WHERE (state = 'accepted' OR (state = 'in-progress' AND lease_until < ${dbNowOf(sql)})) ${only}
          ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING *`;
      return r ? toJob(r) : null;
    },
    async checkpoint(id, owner, now, leaseMs, progress) {
      const set = progress === undefined ? sql`` : sql`, progress = ${progress}`;
      const r = await sql`
        UPDATE export_jobs SET lease_until = ${dbNowOf(sql)} + ${leaseMs}, updated_at = ${now} ${set}
        WHERE ${inProgressBy(id, owner)}`;
      return r.count > 0;
    },
    async complete(id, owner, now, progress, expiresAt) {
      const r = await sql`
        UPDATE export_jobs SET state = 'completed', progress = ${progress}, completed_at = ${now}, expires_at = ${expiresAt},
          updated_at = ${now}, lease_owner = NULL, lease_until = NULL
        WHERE ${inProgressBy(id, owner)}`;
      return r.count > 0;
    },
    async fail(id, owner, now, error, expiresAt) {
      const r = await sql`
        UPDATE export_jobs SET state = 'failed', error = ${error}, completed_at = ${now}, expires_at = ${expiresAt},
          updated_at = ${now}, lease_owner = NULL, lease_until = NULL
        WHERE ${inProgressBy(id, owner)}`;
      return r.count > 0;
    },
    async release(id, owner, now, options = {}) {
      const refund = options.refundAttempt ? 1 : 0;
      await sql`
        UPDATE export_jobs SET state = 'accepted', lease_owner = NULL, lease_until = NULL, attempts = GREATEST(0, attempts - ${refund}), updated_at = ${now}
        WHERE ${inProgressBy(id, owner)}`;
    },
    async cancel(tenant, id, now) {
      return transaction(sql, async (tx) => {
        const [r] = await tx<{ state: ExportJobState }[]>`
          SELECT state FROM export_jobs WHERE tenant = ${tenant} AND id = ${id} AND state <> 'cancelled' FOR UPDATE`;
        if (!r) return null;
        await tx`UPDATE export_jobs SET state = 'cancelled', updated_at = ${now} WHERE id = ${id}`;
        return r.state;
      });
    },
    async createdSince(since) {
      const rows = await sql<JobSummaryRow[]>`
        SELECT tenant, id, client_id, owner_user, state, request, created_at FROM export_jobs WHERE created_at >= ${since} ORDER BY created_at, id`;
      return rows.map(toJobSummary);
    },
    async countByState() {
      const rows = await sql<{ state: string; n: number }[]>`SELECT state, count(*)::int AS n FROM export_jobs WHERE NOT purged GROUP BY state`;
      return Object.fromEntries(rows.map((r) => [r.state, r.n]));
    },
  };
}

/** An export job's patients and Provenance notes on Postgres. */
export function createPostgresExportScratch(sql: Pg): ExportScratchRepo {
  return {
    async patientsIn(jobId, candidates) {
      if (candidates.length === 0) return [];
      const rows = await sql<{ patient: string; joined: boolean }[]>`
        SELECT patient, joined FROM export_patients WHERE job_id = ${jobId} AND patient = ANY(${candidates}::text[])`;
      return rows.map((r) => ({ id: r.patient, joined: r.joined }));
    },
    async noteProvenance(jobId, rows) {
      // One row per target (ON CONFLICT may touch a row once per statement): the highest rank wins here first.
      const best = new Map<string, { provenance: string; rank: string }>();
      for (const r of rows) if (!best.has(r.target) || best.get(r.target)!.rank < r.rank) best.set(r.target, r);
      if (best.size === 0) return;
      const targets = [...best.keys()];
      await sql`
        INSERT INTO export_provenance (job_id, target, provenance, rank)
        SELECT ${jobId}, t, p, r FROM unnest(${targets}::text[], ${targets.map((t) => best.get(t)!.provenance)}::text[],
          ${targets.map((t) => best.get(t)!.rank)}::text[]) AS u(t, p, r)
        ON CONFLICT (job_id, target) DO UPDATE SET provenance = excluded.provenance, rank = excluded.rank
        WHERE excluded.rank > export_provenance.rank`;
    },
    async latestProvenance(jobId, after, limit) {
      const rows = await sql<{ provenance: string }[]>`
        SELECT DISTINCT provenance FROM export_provenance WHERE job_id = ${jobId} AND provenance > ${after} ORDER BY provenance LIMIT ${limit}`;
      return rows.map((r) => r.provenance);
    },
  };
}

/**
 * Download holds on Postgres. Starting a download and removing files (createPostgresExportCleanup's
 * markPurged) both lock the job row first, so they cannot interleave.
 */
export function createPostgresExportDownloads(sql: Pg): ExportDownloadRepo {
  return {
    async holdFiles(tenant, id, download, now, holdMs, starting) {
      return transaction(sql, async (tx) => {
        const unexpired = starting ? tx`AND expires_at > ${now}` : tx``;
        const [job] = await tx`
          SELECT id FROM export_jobs WHERE tenant = ${tenant} AND id = ${id} AND state = 'completed' AND NOT purged ${unexpired} FOR SHARE`;
        if (!job) return false;
        await tx`
          INSERT INTO export_downloads (job_id, download, until) VALUES (${id}, ${download}, ${dbNowOf(tx)} + ${holdMs})
          ON CONFLICT (job_id, download) DO UPDATE SET until = excluded.until`;
        return true;
      });
    },
    async releaseFiles(id, download) {
      await sql`DELETE FROM export_downloads WHERE job_id = ${id} AND download = ${download}`;
    },
  };
}

/** Export clean-up on Postgres. */
export function createPostgresExportCleanup(sql: Pg): ExportCleanupRepo {
  return {
    async purgeable(now, limit) {
      const rows = await sql<JobRow[]>`
        SELECT * FROM export_jobs j WHERE NOT purged
          AND NOT EXISTS (SELECT 1 FROM export_downloads d WHERE d.job_id = j.id AND d.until >= ${dbNowOf(sql)})
          AND ((state IN ('completed', 'failed') AND expires_at <= ${now}) OR (state = 'cancelled' AND COALESCE(lease_until, 0) < ${dbNowOf(sql)}))
        ORDER BY updated_at LIMIT ${limit}`;
      return rows.map(toJob);
    },
    async markPurged(id, now) {
      return transaction(sql, async (tx) => {
        const [job] = await tx<{ state: ExportJobState; leased: boolean }[]>`
          SELECT state, COALESCE(lease_until, 0) >= ${dbNowOf(tx)} AS leased FROM export_jobs WHERE id = ${id} AND NOT purged FOR UPDATE`;
        if (!job || (job.state === 'cancelled' && job.leased)) return false;
        // Read after taking the lock: a download that started meanwhile is visible now.
        if (await held(tx, id)) return false;
        await tx`UPDATE export_jobs SET purged = true, updated_at = ${now} WHERE id = ${id}`;
        // The job's patients and Provenance notes: no request reads them once its files are removed.
        await tx`DELETE FROM export_patients WHERE job_id = ${id}`;
        await tx`DELETE FROM export_provenance WHERE job_id = ${id}`;
        return true;
      });
    },
    async remove(id) {
      await transaction(sql, async (tx) => {
        await tx`DELETE FROM export_patients WHERE job_id = ${id}`;
        await tx`DELETE FROM export_provenance WHERE job_id = ${id}`;
        await tx`DELETE FROM export_downloads WHERE job_id = ${id}`;
        await tx`DELETE FROM export_jobs WHERE id = ${id}`;
      });
    },
    async purgedBefore(before, limit) {
      const rows = await sql<{ id: string }[]>`SELECT id FROM export_jobs WHERE purged AND updated_at < ${before} ORDER BY updated_at LIMIT ${limit}`;
      return rows.map((r) => r.id);
    },
  };
}
