import type postgres from 'postgres';
import type { CompartmentReads, CompartmentRow } from '../types.ts';
import type { Pg } from './db.ts';
import type { Row as ResourceRow } from './resources.ts';

interface Row extends ResourceRow {
  patient: string;
}

/**
 * Compartment reads on PostgreSQL (CompartmentReads). Each patient is probed on its own, in a LATERAL
 * subquery (`compartments_patient`, index only for the sizes): joined as a set, the patients' rows were
 * found by reading the tenant's whole compartment index and hashing it. The rows come out in the
 * patients' order, so PostgreSQL sorts each patient's rows alone (incremental sort) and stops at the page.
 */
export function createPostgresCompartments(sql: Pg): CompartmentReads {
  /** Each patient's rows of `types`, counted up to `cap`. */
  const size = (tenant: string, types: string[], cap: number) => sql`
    CROSS JOIN LATERAL (SELECT count(*)::int AS n FROM (
      SELECT 1 FROM compartments c WHERE c.tenant = ${tenant} AND c.patient = p.id AND c.type = ANY(${types}::text[]) LIMIT ${cap}) y) s`;
  return {
    async compartmentPatients(tenant, type, ids) {
      if (!ids.length) return [];
      return sql<{ id: string; patient: string }[]>`
        SELECT x.id, c.patient FROM resources x JOIN compartments c ON c.res = x.pk
        WHERE x.tenant = ${tenant} AND x.type = ${type} AND x.id = ANY(${ids}::text[]) AND NOT x.deleted`;
    },
    async compartmentSizes(tenant, q) {
      const rows: { patient: string; n: number }[] = 'ids' in q.patients
        ? await sql`SELECT p.id AS patient, s.n FROM unnest(${q.patients.ids}::text[]) WITH ORDINALITY AS p(id, i)
            ${size(tenant, q.types, q.cap)} ORDER BY p.i`
        : await sql`SELECT p.id AS patient, s.n FROM (
              SELECT id FROM resources WHERE tenant = ${tenant} AND type = 'Patient' AND NOT deleted AND id > ${q.patients.after ?? ''}
              ORDER BY id LIMIT ${q.patients.count}) p
            ${size(tenant, q.types, q.cap)} ORDER BY p.id`;
      return rows.map((r) => ({ patient: r.patient, rows: r.n }));
    },
    async compartmentRows(tenant, q) {
      if (q.patients.length === 0 || q.types.length === 0 || q.count <= 0) return [];
      const after = q.after ?? { type: 0, id: '' };
      const since: postgres.Fragment = q.since === undefined ? sql`` : sql`AND x.last_updated >= ${q.since}::bigint`;
      // A resource a live Patient of a smaller id also holds (`compartments_res`): that patient's match. The
      // Patient is a scalar subquery, so it is looked up for those compartment rows alone: joined, without
      // statistics PostgreSQL read every Patient of the tenant for each row (58 times the page's time).
      const firstOwner: postgres.Fragment = q.firstOwner ? sql`AND (c.type = 'Patient' OR NOT EXISTS (SELECT 1 FROM compartments o
        WHERE o.res = c.res AND o.patient < p.id
          AND (SELECT NOT op.deleted FROM resources op WHERE op.tenant = ${tenant} AND op.type = 'Patient' AND op.id = o.patient)))` : sql``;
      const rows = await sql<Row[]>`
        SELECT k.patient, r.type, r.id, r.version_id, r.last_updated, r.deleted, r.content FROM (
          SELECT p.i, p.id AS patient, array_position(${q.types}::text[], c.type) AS j, x.id, c.res
          FROM unnest(${q.patients}::text[]) WITH ORDINALITY AS p(id, i)
          CROSS JOIN LATERAL (SELECT c.res, c.type FROM compartments c
            WHERE c.tenant = ${tenant} AND c.patient = p.id AND c.type = ANY(${q.types}::text[]) OFFSET 0) c
          CROSS JOIN LATERAL (SELECT x.id FROM resources x
            WHERE x.pk = c.res AND NOT x.deleted AND (c.type <> 'Patient' OR x.id = p.id) ${since} ${firstOwner} OFFSET 0) x
          WHERE (p.i, array_position(${q.types}::text[], c.type), x.id) > (1, ${Math.min(after.type, q.types.length) + 1}::int, ${after.id})
          ORDER BY 1, 3, 4 LIMIT ${q.count}
        ) k JOIN resources r ON r.pk = k.res ORDER BY k.i, k.j, k.id`;
      return rows.map((r): CompartmentRow => ({
        patient: r.patient, type: r.type, id: r.id, versionId: r.version_id, lastUpdated: r.last_updated, deleted: r.deleted, content: r.content,
      }));
    },
  };
}
