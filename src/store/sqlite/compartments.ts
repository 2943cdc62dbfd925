import type { Database } from 'bun:sqlite';
import type { CompartmentReads, CompartmentRow } from '../types.ts';
import type { Row as ResourceRow } from './resources.ts';

/** Each patient's rows of the types (`?3`, a JSON array) on the compartment index, up to `?4`. */
const SIZE = `(SELECT COUNT(*) FROM (SELECT 1 FROM compartments c WHERE c.tenant = ?1 AND c.patient = p.patient
  AND +c.type IN (SELECT value FROM json_each(?3)) LIMIT ?4))`;

/**
 * Compartment reads on SQLite (CompartmentReads). Sizes count one range of `compartments_patient` per
 * patient, the types tested on its entries (`+c.type`: seeking each of 67 types in turn took four
 * times as long). Rows: the patients' compartment rows, each joined to its resource row for its id,
 * sorted and cut to the page, then the page's stored texts read by key. CROSS JOIN keeps the patients
 * outside (SQLite otherwise read the tenant's whole compartment index and probed the list), and the
 * types are a materialized list with an automatic index (a JSON array scanned for each row, or
 * `instr` in a string, cost more than the rest of the statement). `firstOwner` probes the resource's
 * other compartment rows by the primary key `(res, patient)`, for a live Patient of a smaller id.
 */
export function createSqliteCompartments(reader: Database): CompartmentReads {
  const sizesOf = reader.query<{ patient: string; n: number }, [string, string, string, number]>(
    `WITH p(i, patient) AS (SELECT key, value FROM json_each(?2)) SELECT p.patient, ${SIZE} AS n FROM p ORDER BY p.i`,
  );
  const sizesAfter = reader.query<{ patient: string; n: number }, [string, string, string, number, number]>(
    `WITH p(patient) AS (SELECT id FROM resources WHERE tenant = ?1 AND type = 'Patient' AND deleted = 0 AND id > ?2 ORDER BY id LIMIT ?5)
     SELECT p.patient, ${SIZE} AS n FROM p ORDER BY p.patient`,
  );
  const rows = reader.query<Row, [string, string, string, number | null, number, string, number, number]>(`
    WITH p(i, patient) AS (SELECT key, value FROM json_each(?2)),
    t(j, type) AS MATERIALIZED (SELECT key, value FROM json_each(?3)),
    k AS (
      SELECT p.i AS i, t.j AS j, x.id AS id, c.res AS res, p.patient AS patient
      FROM p CROSS JOIN compartments c ON c.tenant = ?1 AND c.patient = p.patient
      CROSS JOIN resources x ON x.pk = c.res
      JOIN t ON t.type = c.type
      WHERE x.deleted = 0 AND (c.type <> 'Patient' OR x.id = p.patient) AND (?4 IS NULL OR x.last_updated >= ?4)
        AND (p.i, t.j, x.id) > (0, ?5, ?6)
        AND (?8 = 0 OR c.type = 'Patient' OR NOT EXISTS (SELECT 1 FROM compartments o CROSS JOIN resources op
          ON op.tenant = ?1 AND op.type = 'Patient' AND op.id = o.patient AND op.deleted = 0
          WHERE o.res = c.res AND o.patient < p.patient))
      ORDER BY 1, 2, 3 LIMIT ?7)
    SELECT k.patient, r.type, r.id, r.version_id, r.last_updated, r.deleted, r.content
    FROM k CROSS JOIN resources r ON r.pk = k.res ORDER BY k.i, k.j, k.id`);
  const patientsOf = reader.query<{ id: string; patient: string }, [string, string, string]>(`
    SELECT x.id, c.patient FROM json_each(?3) i CROSS JOIN resources x ON x.tenant = ?1 AND x.type = ?2 AND x.id = i.value
    CROSS JOIN compartments c ON c.res = x.pk WHERE x.deleted = 0`);
  return {
    async compartmentPatients(tenant, type, ids) {
      return ids.length ? patientsOf.all(tenant, type, JSON.stringify(ids)) : [];
    },
    async compartmentSizes(tenant, q) {
      const types = JSON.stringify(q.types);
      const found = 'ids' in q.patients
        ? sizesOf.all(tenant, JSON.stringify(q.patients.ids), types, q.cap)
        : sizesAfter.all(tenant, q.patients.after ?? '', types, q.cap, q.patients.count);
      return found.map((r) => ({ patient: r.patient, rows: r.n }));
    },
    async compartmentRows(tenant, q) {
      if (q.patients.length === 0 || q.types.length === 0 || q.count <= 0) return [];
      const after = q.after ?? { type: 0, id: '' };
      const found = rows.all(tenant, JSON.stringify(q.patients), JSON.stringify(q.types), q.since ?? null,
        Math.min(after.type, q.types.length), after.id, q.count, q.firstOwner ? 1 : 0);
      return found.map((r): CompartmentRow => ({
        patient: r.patient, type: r.type, id: r.id, versionId: r.version_id, lastUpdated: r.last_updated, deleted: r.deleted === 1, content: r.content,
      }));
    },
  };
}

interface Row extends ResourceRow {
  patient: string;
}
