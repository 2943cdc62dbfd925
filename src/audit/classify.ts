/**
 * Which FHIR RESTful interaction a request to `{fhir_base}` is (FHIR R4 http.html), from its method and
 * path alone, so that the request path pays for one URL split. Requests that are not a tenant's FHIR
 * interaction (metadata, discovery, the websocket) are not audited.
 */
import { TENANT_ID } from '../auth/admin.ts';
import type { Interaction, Touched } from './event.ts';

export interface Classified {
  tenant: string;
  interaction: Interaction;
  operation?: string;
  /** The instance the path names (`Type/id`, with the version of a vread). */
  target?: Touched;
  /** The type the path names (a type-level search, create, conditional write, history or operation). */
  type?: string;
  /** Patients the path itself names: `Patient/{id}/…`. */
  pathPatient?: string;
  /** The query string, without `?`. */
  search: string;
  /** Whether the raw query (path and query string) is recorded: searches and histories. */
  isQuery: boolean;
}

const PREFIX = /^\/tenants\/([^/]+)\/fhir\/R4(\/.*)?$/;
const TYPE = /^[A-Z][A-Za-z]+$/;
const UNAUDITED = new Set(['metadata', '.well-known', 'websocket']);

function segments(rest: string): string[] {
  return rest.split('/').filter((s) => s !== '').map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
}

/** The interaction of `method` on `path` (`search`: the query string), or undefined when it is not audited. */
export function classify(method: string, path: string, search: string): Classified | undefined {
  const m = PREFIX.exec(path);
  if (!m || !TENANT_ID.test(m[1]!)) return undefined;
  const tenant = m[1]!;
  const s = segments(m[2] ?? '');
  const get = method === 'GET' || method === 'HEAD';
  const base = { tenant, search };
  const query = (interaction: Interaction, more: Partial<Classified> = {}): Classified => ({ ...base, interaction, isQuery: true, ...more });
  const plain = (interaction: Interaction, more: Partial<Classified> = {}): Classified => ({ ...base, interaction, isQuery: false, ...more });
  const op = (name: string, more: Partial<Classified> = {}): Classified => ({ ...base, interaction: 'operation', operation: name, isQuery: search !== '', ...more });
  const [a, b, c, d] = s;
  if (a === undefined) {
    if (method === 'POST') return plain('transaction'); // transaction or batch: the response Bundle's type tells
    return get ? query('search') : undefined;
  }
  if (UNAUDITED.has(a)) return undefined;
  if (a.startsWith('$')) return op(a);
  if (a === '_history') return query('history');
  if (a === '_search') return query('search');
  if (!TYPE.test(a)) return undefined;
  const type = a;
  const patientOf = (id: string) => (type === 'Patient' ? { pathPatient: id } : {});
  if (b === undefined) {
    if (get) return query('search', { type });
    if (method === 'POST') return plain('create', { type });
    if (method === 'PUT') return plain('update', { type, isQuery: true });
    if (method === 'PATCH') return plain('patch', { type, isQuery: true });
    if (method === 'DELETE') return plain('delete', { type, isQuery: true });
    return undefined;
  }
  if (b === '_search') return query('search', { type });
  if (b === '_history') return query('history', { type });
  if (b.startsWith('$')) return op(b, { type });
  const target: Touched = { type, id: b };
  if (c === undefined) {
    if (get) return plain('read', { type, target, ...patientOf(b) });
    if (method === 'PUT') return plain('update', { type, target, ...patientOf(b) });
    if (method === 'PATCH') return plain('patch', { type, target, ...patientOf(b) });
    if (method === 'DELETE') return plain('delete', { type, target, ...patientOf(b) });
    return undefined;
  }
  if (c.startsWith('$')) return op(c, { type, target, ...patientOf(b) });
  if (c === '_history') {
    const v = d === undefined ? NaN : Number(d);
    // An operation on a version (`_history/{vid}/$meta`, `$expunge`): the operation, on that version.
    const e = s[4];
    if (e?.startsWith('$')) return op(e, { type, target: Number.isInteger(v) && v > 0 ? { ...target, versionId: v } : target, ...patientOf(b) });
    if (d !== undefined && Number.isInteger(v) && v > 0) return plain('vread', { type, target: { ...target, versionId: v }, ...patientOf(b) });
    return query('history', { type, target, ...patientOf(b) });
  }
  // A compartment search: `Patient/{id}/Observation`, `Patient/{id}/*`; another compartment's focal resource
  // (`Encounter/{id}/Observation`) is named as what the search reached through, with its patients.
  if (TYPE.test(c) || c === '*') return query('search', { type: c === '*' ? undefined : c, ...(type === 'Patient' ? patientOf(b) : { target }) });
  return undefined;
}
