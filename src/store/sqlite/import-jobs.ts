import { JOB_SUMMARY_COLUMNS, toJobSummary, type JobSummaryRow } from '../rows/job-summary.ts';
import type { ImportJobRepo, ImportJobState } from '../types.ts';
import { toImportJob, type ImportJobRow } from '../rows/import-jobs.ts';
import type { SqliteExportDb } from './export-jobs.ts';
import { writeTransaction } from './db.ts';
import { DB_NOW } from './export-jobs.ts';

const IN_PROGRESS_BY = "state = 'in-progress' AND id = ? AND lease_owner = ?";
/** An owner's (a client and a user, or the client's own authority: null) accepted and in-progress jobs (the limit). */
const ACTIVE_JOBS = "SELECT COUNT(*) AS n FROM import_jobs WHERE tenant = ? AND client_id = ? AND owner_user IS ? AND state IN ('accepted', 'in-progress')";

/** Import job lifecycle on SQLite: writes through the writer's queue, reads on the reader (as export jobs). */
export function createSqliteImportJobs({ writer, reader, serial }: SqliteExportDb): ImportJobRepo {
  const w = <T>(fn: () => T) => serial(() => writeTransaction(writer, fn));
  const changed = (sql: string, ...params: (string | number | null)[]) => writer.query(sql).run(...params).changes > 0;
  return {
    create(job, maxActive) {
      return w(() => {
        if (writer.query<{ n: number }, [string, string, string | null]>(ACTIVE_JOBS).get(job.tenant, job.clientId, job.ownerUser ?? null)!.n >= maxActive) return false;
        writer
          .query(`INSERT INTO import_jobs (id, tenant, client_id, state, request, spec, created_at, updated_at, progress, credential, attempts, owner_user)
                  VALUES (?, ?, ?, 'accepted', ?, ?, ?, ?, ?, ?, 0, ?)`)
          .run(job.id, job.tenant, job.clientId, job.request, job.spec, job.createdAt, job.createdAt, job.progress, job.credential ?? null, job.ownerUser ?? null);
        return true;
      });
    },
    async get(tenant, id) {
      const r = reader.query<ImportJobRow, [string, string]>('SELECT * FROM import_jobs WHERE tenant = ? AND id = ?').get(tenant, id);
      return r ? toImportJob(r) : null;
    },
    claim(owner, now, leaseMs) {
      return w(() => {
        const pick = writer
          .query<{ id: string }, []>(
            `SELECT id FROM import_jobs WHERE state = 'accepted' OR (state = 'in-progress' AND lease_until < ${DB_NOW}) ORDER BY created_at, id LIMIT 1`,
          )
          .get();
        if (!pick) return null;
        const r = writer
          .query<ImportJobRow, [string, number, number, string]>(
            `UPDATE import_jobs SET state = 'in-progress', lease_owner = ?, lease_until = ${DB_NOW} + ?, attempts = attempts + 1, counts = NULL, updated_at = ? WHERE id = ? RETURNING *`,
          )
          .get(owner, leaseMs, now, pick.id)!;
        return toImportJob(r);
      });
    },
    checkpoint(id, owner, now, leaseMs, progress, counts) {
      return w(() => {
        if (progress !== undefined) {
          return changed(`UPDATE import_jobs SET lease_until = ${DB_NOW} + ?, updated_at = ?, progress = ?, counts = ? WHERE ${IN_PROGRESS_BY}`, leaseMs, now, progress, counts ?? null, id, owner);
        }
        if (counts !== undefined) return changed(`UPDATE import_jobs SET lease_until = ${DB_NOW} + ?, updated_at = ?, counts = ? WHERE ${IN_PROGRESS_BY}`, leaseMs, now, counts, id, owner);
        return changed(`UPDATE import_jobs SET lease_until = ${DB_NOW} + ?, updated_at = ? WHERE ${IN_PROGRESS_BY}`, leaseMs, now, id, owner);
      });
    },
    complete(id, owner, now, progress) {
      return w(() =>
        changed(
          `UPDATE import_jobs SET state = 'completed', credential = NULL, counts = NULL, progress = ?, completed_at = ?, updated_at = ?, lease_owner = NULL, lease_until = NULL WHERE ${IN_PROGRESS_BY}`,
          progress, now, now, id, owner,
        ),
      );
    },
    fail(id, owner, now, error, progress) {
      return w(() =>
        changed(
          `UPDATE import_jobs SET state = 'failed', credential = NULL, counts = NULL, error = ?, progress = ?, completed_at = ?, updated_at = ?, lease_owner = NULL, lease_until = NULL WHERE ${IN_PROGRESS_BY}`,
          error, progress, now, now, id, owner,
        ),
      );
    },
    async release(id, owner, now, refund = false) {
      await w(() => changed(`UPDATE import_jobs SET state = 'accepted', lease_owner = NULL, lease_until = NULL, attempts = MAX(0, attempts - ?), updated_at = ? WHERE ${IN_PROGRESS_BY}`, refund ? 1 : 0, now, id, owner));
    },
    cancel(tenant, id, now) {
      return w(() => {
        const r = writer
          .query<{ state: ImportJobState }, [string, string]>("SELECT state FROM import_jobs WHERE tenant = ? AND id = ? AND state <> 'cancelled'")
          .get(tenant, id);
        if (!r) return null;
        writer.query("UPDATE import_jobs SET state = 'cancelled', credential = NULL, updated_at = ? WHERE id = ?").run(now, id);
        return r.state;
      });
    },
    removeEnded(before) {
      return w(() =>
        writer
          .query<{ tenant: string; id: string }, [number]>(
            `DELETE FROM import_jobs WHERE state IN ('completed', 'failed', 'cancelled') AND updated_at < ? AND COALESCE(lease_until, 0) < ${DB_NOW} RETURNING tenant, id`,
          )
          .all(before),
      );
    },
    async createdSince(since) {
      return reader
        .query<JobSummaryRow, [number]>(`SELECT ${JOB_SUMMARY_COLUMNS} FROM import_jobs WHERE created_at >= ? ORDER BY created_at, id`)
        .all(since)
        .map(toJobSummary);
    },
    async countByState() {
      const out: Record<string, number> = {};
      for (const r of reader.query<{ state: string; n: number }, []>('SELECT state, COUNT(*) AS n FROM import_jobs GROUP BY state').all()) out[r.state] = r.n;
      return out;
    },
  };
}
