import type { Condition, DateTest, TokenValue, IndexEntry, NewExportJob, ResourceVersion, Store, VersionToWrite, WriteMethod } from '../../../src/store/types.ts';
import { StoreConflictError } from '../../../src/store/types.ts';
import type { StoreTarget } from '../../helpers/stores.ts';

/** A tenant id no other test uses, so tests can share one database. */
export function uniqueTenant(prefix = 't'): string {
  return `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
}

export interface VersionSpec {
  versionId?: number;
  lastUpdated?: number;
  deleted?: boolean;
  index?: IndexEntry[];
  compartments?: string[];
  /** Extra JSON members. */
  body?: Record<string, unknown>;
  /** The interaction that writes it (default: DELETE for a deletion, POST for version 1, PUT after). */
  method?: WriteMethod;
}

/** A version as the FHIR layer would write it: content carries meta.versionId / meta.lastUpdated. */
export function version(type: string, id: string, spec: VersionSpec = {}): VersionToWrite {
  const versionId = spec.versionId ?? 1;
  const lastUpdated = spec.lastUpdated ?? 1_700_000_000_000;
  const deleted = spec.deleted ?? false;
  const meta = { versionId: String(versionId), lastUpdated: new Date(lastUpdated).toISOString() };
  return {
    type,
    id,
    versionId,
    lastUpdated,
    deleted,
    content: deleted ? '' : JSON.stringify({ resourceType: type, id, meta, ...spec.body }),
    index: { tokens: deleted ? [] : (spec.index ?? []), strings: [], ranges: [], composites: [] },
    compartments: deleted ? [] : (spec.compartments ?? []),
    method: spec.method ?? (deleted ? 'DELETE' : versionId === 1 ? 'POST' : 'PUT'),
  };
}

/** Writes one version per transaction, taking the next version number from current(). */
export async function save(store: Store, tenant: string, type: string, id: string, spec: VersionSpec = {}): Promise<VersionToWrite> {
  return store.resources.write(tenant, async (w) => {
    const cur = await w.current(type, id);
    const v = version(type, id, { ...spec, versionId: (cur?.versionId ?? 0) + 1 });
    await w.put(v);
    return v;
  });
}

/** `save` retried on StoreConflictError, as a caller racing another process would. */
export async function saveRetrying(store: Store, tenant: string, type: string, id: string, spec: VersionSpec = {}) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await save(store, tenant, type, id, spec);
    } catch (err) {
      if (!(err instanceof StoreConflictError) || attempt >= 20) throw err;
    }
  }
}

/** The public fields of a stored version, for comparison with what was written. */
export function stored(v: VersionToWrite): ResourceVersion {
  return { type: v.type, id: v.id, versionId: v.versionId, lastUpdated: v.lastUpdated, deleted: v.deleted, content: v.content };
}

export const ids = (rs: ResourceVersion[]) => rs.map((r) => r.id);
export const versions = (rs: ResourceVersion[]) => rs.map((r) => r.versionId);

/** Token conditions (`search_index` rows), ANDed. */
export function tokens(params: { param: string; values: TokenValue[] }[]): Condition[] {
  return params.map((p) => ({ kind: 'token', param: p.param, values: p.values }));
}

/** `_lastUpdated` tests, ANDed. */
export function times(tests: DateTest[]): Condition[] {
  return tests.map((t) => ({ kind: 'lastUpdated', tests: [t] }));
}

/** A new, migrated database of `target`, for tests that need a store holding only what they write. */
export async function freshStore(target: StoreTarget): Promise<Store> {
  const store = (await target.migrated()).open();
  await store.migrate();
  return store;
}

/** An export job of tenant t1 created at `at`. */
export const exportJob = (id: string, at: number, clientId = 'c1'): NewExportJob => ({
  id, tenant: 't1', clientId, request: 'http://x/$export', spec: '{}', transactionTime: at, progress: '{"step":0}', createdAt: at,
});
