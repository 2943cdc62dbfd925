import type { Database } from 'bun:sqlite';
import { JOB_SUMMARY_COLUMNS, toJobSummary, type JobSummaryRow } from '../rows/job-summary.ts';
import type { ExportCleanupRepo, ExportDownloadRepo, ExportJobRepo, ExportJobState, ExportPatient, ExportScratchRepo } from '../types.ts';
import { toJob } from '../rows/export-jobs.ts';
import type { JobRow } from '../rows/export-jobs.ts';
import { writeTransaction, type createMutex } from './db.ts';

const IN_PROGRESS_BY = "state = 'in-progress' AND id = ? AND lease_owner = ?";
/**
 * The database's clock in epoch ms: what every lease is set and judged by, as on PostgreSQL (one rule, though a
 * SQLite file has one machine's clock), never the caller's `now`.
 */
export const DB_NOW = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)";
/** No download holds the job's files now, by the database's clock. */
const NOT_HELD = `NOT EXISTS (SELECT 1 FROM export_downloads d WHERE d.job_id = export_jobs.id AND d.until >= ${DB_NOW})`;

/** The connections the export repositories share. Writes go through the writer connection's queue (`serial`); reads use `reader`. */
export interface SqliteExportDb {
  writer: Database;
  reader: Database;
  serial: ReturnType<typeof createMutex>;
}

/**
 * `w`: runs a write in the queue, in a writeTransaction (waiting for another process's lock without
 * blocking the thread); `changed`: runs an UPDATE or DELETE and tells whether it touched a row.
 */
function writes({ writer, serial }: SqliteExportDb) {
  return {
    w: <T>(fn: () => T) => serial(() => writeTransaction(writer, fn)),
    changed: (sql: string, ...params: (string | number | null)[]) => writer.query(sql).run(...params).changes > 0,
  };
}

/** An owner's (a client and a user, or the client's own authority: null) accepted and in-progress jobs (the limit). */
const ACTIVE_JOBS = "SELECT COUNT(*) AS n FROM export_jobs WHERE tenant = ? AND client_id = ? AND owner_user IS ? AND state IN ('accepted', 'in-progress')";

/** Export job lifecycle on SQLite. */
export function createSqliteExportJobs(db: SqliteExportDb): ExportJobRepo {
  const { writer, reader } = db;
  const { w, changed } = writes(db);
  return {
    create(job, patients, maxActive) {
      return w(() => {
        const active = writer.query<{ n: number }, [string, string, string | null]>(ACTIVE_JOBS).get(job.tenant, job.clientId, job.ownerUser ?? null)!.n;
        if (active >= maxActive) return false;
        writer
          .query(
            `INSERT INTO export_jobs (id, tenant, client_id, state, request, spec, transaction_time, created_at, updated_at, progress,
               lease_owner, lease_until, attempts, owner_user) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ${DB_NOW} + ?, ?, ?)`,
          )
          .run(
            job.id, job.tenant, job.clientId, job.claim ? 'in-progress' : 'accepted', job.request, job.spec, job.transactionTime,
            job.createdAt, job.createdAt, job.progress, job.claim?.owner ?? null, job.claim?.leaseMs ?? null, job.claim ? 1 : 0, job.ownerUser ?? null,
          );
        const add = writer.query('INSERT OR IGNORE INTO export_patients (job_id, patient, joined) VALUES (?, ?, ?)');
        for (const p of patients) add.run(job.id, p.id, p.joined ? 1 : 0);
        return true;
      });
    },
    async activeCount(tenant, clientId, ownerUser) {
      return reader.query<{ n: number }, [string, string, string | null]>(ACTIVE_JOBS).get(tenant, clientId, ownerUser ?? null)!.n;
    },
    async get(tenant, id) {
      const r = reader.query<JobRow, [string, string]>('SELECT * FROM export_jobs WHERE tenant = ? AND id = ?').get(tenant, id);
      return r ? toJob(r) : null;
    },
    claim(owner, now, leaseMs, id) {
      return w(() => {
        const pick = id
          ? writer.query<{ id: string }, [string]>(
              `SELECT id FROM export_jobs WHERE id = ? AND (state = 'accepted' OR (state = 'in-progress' AND lease_until < ${DB_NOW}))`,
            ).get(id)
          : writer.query<{ id: string }, []>(
              `SELECT id FROM export_jobs WHERE state = 'accepted' OR (state = 'in-progress' AND lease_until < ${DB_NOW}) ORDER BY created_at, id LIMIT 1`,
            ).get();
        if (!pick) return null;
        const r = writer
          .query<JobRow, [string, number, number, string]>(
            `UPDATE export_jobs SET state = 'in-progress', lease_owner = ?, lease_until = ${DB_NOW} + ?, attempts = attempts + 1, updated_at = ? WHERE id = ? RETURNING *`,
          )
          .get(owner, leaseMs, now, pick.id)!;
        return toJob(r);
      });
    },
    checkpoint(id, owner, now, leaseMs, progress) {
      return w(() =>
        progress === undefined
          ? changed(`UPDATE export_jobs SET lease_until = ${DB_NOW} + ?, updated_at = ? WHERE ${IN_PROGRESS_BY}`, leaseMs, now, id, owner)
          : changed(`UPDATE export_jobs SET lease_until = ${DB_NOW} + ?, updated_at = ?, progress = ? WHERE ${IN_PROGRESS_BY}`, leaseMs, now, progress, id, owner),
      );
    },
    complete(id, owner, now, progress, expiresAt) {
      return w(() =>
        changed(
          `UPDATE export_jobs SET state = 'completed', progress = ?, completed_at = ?, expires_at = ?, updated_at = ?, lease_owner = NULL, lease_until = NULL WHERE ${IN_PROGRESS_BY}`,
          progress, now, expiresAt, now, id, owner,
        ),
      );
    },
    fail(id, owner, now, error, expiresAt) {
      return w(() =>
        changed(
          `UPDATE export_jobs SET state = 'failed', error = ?, completed_at = ?, expires_at = ?, updated_at = ?, lease_owner = NULL, lease_until = NULL WHERE ${IN_PROGRESS_BY}`,
          error, now, expiresAt, now, id, owner,
        ),
      );
    },
    async release(id, owner, now, options = {}) {
      const refund = options.refundAttempt ? 1 : 0;
      await w(() => changed(
        `UPDATE export_jobs SET state = 'accepted', lease_owner = NULL, lease_until = NULL, attempts = MAX(0, attempts - ?), updated_at = ? WHERE ${IN_PROGRESS_BY}`,
        refund, now, id, owner,
      ));
    },
    cancel(tenant, id, now) {
      return w(() => {
        const r = writer
          .query<{ state: ExportJobState }, [string, string]>("SELECT state FROM export_jobs WHERE tenant = ? AND id = ? AND state <> 'cancelled'")
          .get(tenant, id);
        if (!r) return null;
        writer.query("UPDATE export_jobs SET state = 'cancelled', updated_at = ? WHERE id = ?").run(now, id);
        return r.state;
      });
    },
    async createdSince(since) {
      return reader
        .query<JobSummaryRow, [number]>(`SELECT ${JOB_SUMMARY_COLUMNS} FROM export_jobs WHERE created_at >= ? ORDER BY created_at, id`)
        .all(since)
        .map(toJobSummary);
    },
    async countByState() {
      const out: Record<string, number> = {};
      for (const r of reader.query<{ state: string; n: number }, []>('SELECT state, COUNT(*) AS n FROM export_jobs WHERE purged = 0 GROUP BY state').all()) {
        out[r.state] = r.n;
      }
      return out;
    },
  };
}

/** An export job's patients and Provenance notes on SQLite. */
export function createSqliteExportScratch(db: SqliteExportDb): ExportScratchRepo {
  const { writer, reader } = db;
  const { w } = writes(db);
  return {
    async patientsIn(jobId, candidates) {
      if (candidates.length === 0) return [];
      const marks = candidates.map(() => '?').join(', ');
      return reader
        .query<{ patient: string; joined: number }, string[]>(
          `SELECT patient, joined FROM export_patients WHERE job_id = ? AND patient IN (${marks})`,
        )
        .all(jobId, ...candidates)
        .map((r): ExportPatient => ({ id: r.patient, joined: r.joined === 1 }));
    },
    noteProvenance(jobId, rows) {
      return w(() => {
        const q = writer.query(
          'INSERT INTO export_provenance (job_id, target, provenance, rank) VALUES (?, ?, ?, ?) ' +
            'ON CONFLICT (job_id, target) DO UPDATE SET provenance = excluded.provenance, rank = excluded.rank WHERE excluded.rank > export_provenance.rank',
        );
        for (const r of rows) q.run(jobId, r.target, r.provenance, r.rank);
      });
    },
    async latestProvenance(jobId, after, limit) {
      return reader
        .query<{ provenance: string }, [string, string, number]>(
          'SELECT DISTINCT provenance FROM export_provenance WHERE job_id = ? AND provenance > ? ORDER BY provenance LIMIT ?',
        )
        .all(jobId, after, limit)
        .map((r) => r.provenance);
    },
  };
}

/** Download holds on SQLite. */
export function createSqliteExportDownloads(db: SqliteExportDb): ExportDownloadRepo {
  const { writer } = db;
  const { w } = writes(db);
  return {
    holdFiles(tenant, id, download, now, holdMs, starting) {
      return w(() => {
        const ok = writer
          .query<{ id: string }, [string, string, number]>(
            "SELECT id FROM export_jobs WHERE tenant = ? AND id = ? AND state = 'completed' AND purged = 0" + (starting ? ' AND expires_at > ?' : ' AND ? IS NOT NULL'),
          )
          .get(tenant, id, now);
        if (!ok) return false;
        writer.query(`INSERT OR REPLACE INTO export_downloads (job_id, download, until) VALUES (?, ?, ${DB_NOW} + ?)`).run(id, download, holdMs);
        return true;
      });
    },
    async releaseFiles(id, download) {
      await w(() => writer.query('DELETE FROM export_downloads WHERE job_id = ? AND download = ?').run(id, download));
    },
  };
}

/** Export clean-up on SQLite. */
export function createSqliteExportCleanup(db: SqliteExportDb): ExportCleanupRepo {
  const { writer, reader } = db;
  const { w, changed } = writes(db);
  /** The job's patients and Provenance notes, which no request reads once its files are removed. */
  const dropScratch = (id: string) => {
    writer.query('DELETE FROM export_patients WHERE job_id = ?').run(id);
    writer.query('DELETE FROM export_provenance WHERE job_id = ?').run(id);
  };
  return {
    async purgeable(now, limit) {
      return reader
        .query<JobRow, [number, number]>(
          `SELECT * FROM export_jobs WHERE purged = 0 AND ${NOT_HELD} AND (
             (state IN ('completed', 'failed') AND expires_at <= ?) OR (state = 'cancelled' AND COALESCE(lease_until, 0) < ${DB_NOW}))
           ORDER BY updated_at LIMIT ?`,
        )
        .all(now, limit)
        .map(toJob);
    },
    markPurged(id, now) {
      return w(() => {
        const purged = changed(
          `UPDATE export_jobs SET purged = 1, updated_at = ? WHERE id = ? AND purged = 0 AND ${NOT_HELD} AND (state <> 'cancelled' OR COALESCE(lease_until, 0) < ${DB_NOW})`,
          now, id,
        );
        if (purged) dropScratch(id);
        return purged;
      });
    },
    remove(id) {
      return w(() => {
        dropScratch(id);
        writer.query('DELETE FROM export_downloads WHERE job_id = ?').run(id);
        writer.query('DELETE FROM export_jobs WHERE id = ?').run(id);
      });
    },
    async purgedBefore(before, limit) {
      return reader
        .query<{ id: string }, [number, number]>('SELECT id FROM export_jobs WHERE purged = 1 AND updated_at < ? ORDER BY updated_at LIMIT ?')
        .all(before, limit)
        .map((r) => r.id);
    },
  };
}
