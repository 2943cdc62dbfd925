import { afterAll, expect } from 'bun:test';
import type { Store } from '../../src/store/types.ts';
import { storeTargets } from './stores.ts';
import { deleteResource, updateResource } from '../../src/fhir/crud.ts';
import { operatorAccess } from '../../src/fhir/access.ts';
import { drainJobs, runSettings } from '../../src/export/runner.ts';
import type { RunDeps } from '../../src/export/run-job.ts';
import { openSink, type ExportSink } from '../../src/export/sink.ts';
import { silentLogger } from '../../src/log.ts';
import { fhirInit, type TestApp } from './app.ts';

/** Writes `resource` as `type/id` in tenant t1 (or `tenant`) at the app clock's time. */
export async function put(t: TestApp, resource: Record<string, unknown> & { resourceType: string; id: string }, tenant = 't1') {
  return updateResource({ store: t.store, clock: t.clock, fhirBase: t.fhir }, { tenant, access: operatorAccess }, resource.resourceType, resource.id, resource);
}

export async function remove(t: TestApp, type: string, id: string, tenant = 't1') {
  return deleteResource({ store: t.store, clock: t.clock }, { tenant, access: operatorAccess }, type, id);
}

export const patient = (id: string, extra: Record<string, unknown> = {}) => ({ resourceType: 'Patient', id, ...extra });
export const observation = (id: string, patientId: string, code = '1234-5') => ({
  resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: 'http://loinc.org', code }] }, subject: { reference: `Patient/${patientId}` },
});

/** Runs every claimable export job in this thread, exactly as a pool worker would. */
export async function runExports(t: TestApp, overrides: Partial<RunDeps> = {}, sink?: ExportSink) {
  return drainJobs({
    ...runSettings(t.config), settleMs: 0, store: t.store, sink: sink ?? openSink(t.config.exportStorage, {}, t.store), clock: t.clock,
    log: silentLogger, owner: 'test-runner', ...overrides,
  });
}

/** GET kick-off; expects 202 and returns the status URL. */
export async function kickOff(t: TestApp, token: string, pathAndQuery: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await t.request(t.fhir() + pathAndQuery, fhirInit(token, 'GET', undefined, headers));
  if (res.status !== 202) throw new Error(`kick-off ${pathAndQuery}: ${res.status} ${await res.text()}`);
  return res.headers.get('content-location')!;
}

export interface Manifest {
  transactionTime: string;
  request: string;
  requiresAccessToken: boolean;
  output: { type: string; url: string; count: number }[];
  deleted?: { type: string; url: string; count: number }[];
  error: { type: string; url: string; count: number }[];
}

/** Runs pending jobs and reads the manifest (expects 200). */
export async function finish(t: TestApp, token: string, statusUrl: string, overrides: Partial<RunDeps> = {}): Promise<Manifest> {
  await runExports(t, overrides);
  const res = await t.request(statusUrl, fhirInit(token));
  expect(res.status).toBe(200);
  return (await res.json()) as Manifest;
}

/** Downloads every file of a manifest section; returns the parsed lines per type. */
export async function download(t: TestApp, token: string, entries: Manifest['output']): Promise<Record<string, Record<string, unknown>[]>> {
  const out: Record<string, Record<string, unknown>[]> = {};
  for (const e of entries) {
    const res = await t.request(e.url, fhirInit(token));
    expect(res.status).toBe(200);
    const text = await res.text();
    const lines = text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.length).toBe(e.count);
    (out[e.type] ??= []).push(...lines);
  }
  return out;
}

/** `Type/id` of every exported resource, sorted. */
export function refs(files: Record<string, Record<string, unknown>[]>): string[] {
  return Object.values(files).flat().map((r) => `${r.resourceType}/${r.id}`).sort();
}

/**
 * Runs `suite` once per store kind (SQLite; PostgreSQL when reachable, see test/helpers/stores.ts).
 * `fresh()` gives a new, migrated store on a database of its own for one test app.
 */
export async function eachStore(suite: (kind: string, fresh: () => Promise<Store>) => void): Promise<void> {
  // Only fresh databases are used here: no main one to create and drop on PostgreSQL.
  const targets = await storeTargets({ main: false });
  afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);
  for (const target of targets) {
    suite(target.kind, async () => {
      // Migrated already (a copy of a migrated template on PostgreSQL); migrate() finds nothing to do.
      const store = (await target.migrated()).open();
      await store.migrate();
      return store;
    });
  }
}
