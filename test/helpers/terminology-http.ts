import { expect } from 'bun:test';
import { fhirInit, type TestApp } from './app.ts';
import { fixtureResources } from './memory-terminology.ts';
import { operatorAccess } from '../../src/fhir/access.ts';
import { putVersion } from '../../src/fhir/crud.ts';
import type { Resource } from '../../src/fhir/resource.ts';

export const ANIMALS = 'http://cinder.test/CodeSystem/animals';
export const VS = 'http://cinder.test/ValueSet/';

/** PUTs every terminology fixture into the tenant through the FHIR API. */
export async function putTerminologyFixtures(t: TestApp, token: string, tenant = 't1'): Promise<void> {
  for (const r of [...(await fixtureResources('code-systems.json')), ...(await fixtureResources('value-sets.json'))]) {
    await putResource(t, token, r, tenant);
  }
}

export async function putResource(
  t: TestApp,
  token: string,
  r: { readonly resourceType: string; readonly id?: string; readonly [field: string]: unknown },
  tenant = 't1',
): Promise<void> {
  if (r.id !== undefined && INVALID_ON_PURPOSE.has(r.id)) {
    await t.store.resources.write(tenant, (w) => putVersion(w, r as Resource, r.id!, { now: t.clock.now(), access: operatorAccess }, 'PUT'));
    return;
  }
  const res = await t.request(`${t.fhir(tenant)}/${r.resourceType}/${r.id}`, fhirInit(token, 'PUT', r));
  expect(res.status).toBeLessThan(300);
}

/**
 * Fixtures that are not valid R4 on purpose (an unknown filter operator, a filter without a value), to
 * test how the terminology engine treats such content: the API refuses them, so they are stored
 * straight through the store, as data written before validation existed would be.
 */
const INVALID_ON_PURPOSE = new Set(['bad-operator', 'no-filter-value']);

/** One Parameters entry. */
export type Param = { name: string } & Record<string, unknown>;

export interface OperationResponse {
  status: number;
  body: { resourceType: string; parameter?: Param[]; issue?: { severity: string; code: string; details?: { text: string } }[] } & Record<string, unknown>;
}

/** POSTs a Parameters body to `{fhir_base}/{path}`. */
export async function postOperation(t: TestApp, token: string, path: string, parameter: Param[], tenant = 't1'): Promise<OperationResponse> {
  const res = await t.request(`${t.fhir(tenant)}/${path}`, fhirInit(token, 'POST', { resourceType: 'Parameters', parameter }));
  expect(res.headers.get('content-type')).toContain('application/fhir+json');
  return { status: res.status, body: (await res.json()) as OperationResponse['body'] };
}

/** GETs `{fhir_base}/{path}?query`. */
export async function getOperation(t: TestApp, token: string, path: string, query: Record<string, string>, tenant = 't1'): Promise<OperationResponse> {
  const res = await t.request(`${t.fhir(tenant)}/${path}?${new URLSearchParams(query)}`, fhirInit(token));
  expect(res.headers.get('content-type')).toContain('application/fhir+json');
  return { status: res.status, body: (await res.json()) as OperationResponse['body'] };
}

/** `result`, `message` and `display` of a $validate-code response (asserting a 200 Parameters). */
export function outcome(r: OperationResponse): { result: unknown; message?: string; display?: string } {
  expect(r.status).toBe(200);
  expect(r.body.resourceType).toBe('Parameters');
  const get = (name: string) => r.body.parameter?.find((p) => p.name === name);
  const out: { result: unknown; message?: string; display?: string } = { result: get('result')?.valueBoolean };
  const message = get('message')?.valueString;
  const display = get('display')?.valueString;
  if (typeof message === 'string') out.message = message;
  if (typeof display === 'string') out.display = display;
  return out;
}

/** The single error issue of an OperationOutcome response with this status. */
export function errorIssue(r: OperationResponse, status: number): { severity: string; code: string; text: string } {
  expect(r.status).toBe(status);
  expect(r.body.resourceType).toBe('OperationOutcome');
  const issue = r.body.issue?.[0];
  return { severity: issue?.severity ?? '', code: issue?.code ?? '', text: issue?.details?.text ?? '' };
}

/**
 * `code@version` of each code of an expansion (flat): its `contains.version` where the expansion gives one
 * (a code system it uses in several versions), else the one version `used-codesystem` names for its system.
 */
export function codeVersions(expansion: unknown): string[] {
  const e = expansion as { contains?: { system: string; code: string; version?: string }[]; parameter?: Param[] };
  const used = new Map<string, string>();
  for (const p of e.parameter ?? []) {
    if (p.name !== 'used-codesystem' || typeof p.valueUri !== 'string') continue;
    const [url, version] = p.valueUri.split('|');
    if (url !== undefined && version !== undefined) used.set(url, version);
  }
  return (e.contains ?? []).map((c) => `${c.code}@${c.version ?? used.get(c.system)}`);
}
