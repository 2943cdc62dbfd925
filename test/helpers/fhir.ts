import { expect } from 'bun:test';
import { signAccessToken } from '../../src/auth/tokens.ts';
import { fhirInit, type TestApp } from './app.ts';

export type Json = Record<string, any>;

/** A small FHIR client over a TestApp: every call goes through `app.request()`. */
export function fhirClient(t: TestApp, token: string, tenant = 't1') {
  const base = t.fhir(tenant);
  const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    t.request(path.startsWith('http') ? path : `${base}/${path.replace(/^\//, '')}`, fhirInit(token, method, body, headers));
  return {
    base,
    call,
    get: (path: string, headers?: Record<string, string>) => call('GET', path, undefined, headers),
    post: (path: string, body: unknown, headers?: Record<string, string>) => call('POST', path, body, headers),
    put: (path: string, body: unknown, headers?: Record<string, string>) => call('PUT', path, body, headers),
    del: (path: string, headers?: Record<string, string>) => call('DELETE', path, undefined, headers),
    /** Creates a resource and returns its stored JSON (asserting 201). */
    async create(resource: Json): Promise<Json> {
      const res = await call('POST', resource.resourceType, resource);
      const body = await res.json();
      if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(body)}`);
      return body as Json;
    },
    /** PUTs a resource with a client id and returns its stored JSON (asserting 200/201). */
    async put200(resource: Json): Promise<Json> {
      const res = await call('PUT', `${resource.resourceType}/${resource.id}`, resource);
      const body = await res.json();
      if (res.status !== 200 && res.status !== 201) throw new Error(`update failed: ${res.status} ${JSON.stringify(body)}`);
      return body as Json;
    },
    /** GETs a search and returns the Bundle (asserting 200). */
    async search(query: string): Promise<Json> {
      const res = await call('GET', query);
      const body = await res.json();
      if (res.status !== 200) throw new Error(`search ${query} failed: ${res.status} ${JSON.stringify(body)}`);
      return body as Json;
    },
  };
}

export type FhirClient = ReturnType<typeof fhirClient>;

/** Ids of the `match` entries of a searchset Bundle. */
export function ids(bundle: Json): string[] {
  return (bundle.entry ?? []).filter((e: Json) => e.search?.mode !== 'outcome').map((e: Json) => e.resource.id);
}

/** The ids of the `match` entries of a search's pages, the first and every page its `next` links lead to. */
export async function matchesOfAllPages(api: FhirClient, query: string): Promise<string[]> {
  const seen: string[] = [];
  let next: string | undefined = query;
  for (let pages = 0; next; pages++) {
    // A cursor that leads back to a page already read would loop forever.
    if (pages === 1000) throw new Error(`${query}: more than 1,000 pages`);
    const b = await api.search(next);
    seen.push(...(b.entry ?? []).filter((e: Json) => e.search.mode === 'match').map((e: Json) => e.resource.id));
    next = link(b, 'next');
  }
  return seen;
}

/** The link of `relation` in a Bundle, if any. */
export function link(bundle: Json, relation: string): string | undefined {
  return bundle.link?.find((l: Json) => l.relation === relation)?.url;
}

/** Asserts a response is an OperationOutcome with `status` and returns it. */
export async function expectOutcome(res: Response, status: number, code?: string): Promise<Json> {
  const text = await res.text();
  expect({ status: res.status, text }).toMatchObject({ status });
  expect(res.headers.get('content-type')).toStartWith('application/fhir+json');
  const body = JSON.parse(text) as Json;
  expect(body.resourceType).toBe('OperationOutcome');
  expect(body.issue.length).toBeGreaterThan(0);
  expect(body.issue[0].severity).toBe('error');
  if (code) expect(body.issue[0].code).toBe(code);
  return body;
}

/** Signs an access token directly with the app's keys (for patient-context or expiring tokens). */
export async function craftToken(t: TestApp, scope: string, opts: { tenant?: string; patient?: string; ttl?: number } = {}) {
  const tenant = opts.tenant ?? 't1';
  const claims: Parameters<typeof signAccessToken>[3] = {
    sub: 'crafted', aud: t.fhir(tenant), client_id: 'crafted', scope, tenant,
  };
  if (opts.patient) claims.patient = opts.patient;
  return (await signAccessToken(t.keys, t.clock, t.config.baseUrl, claims, opts.ttl ?? 300)).token;
}

/** How many versions (of any resource) the tenant holds, for "nothing was written" checks. */
export async function countVersions(t: TestApp, tenant = 't1'): Promise<number> {
  const rows = await t.store.resources.history(tenant, { count: 100000 });
  return rows.length;
}

/**
 * Bundles posted to the FHIR base of the app and client the getters give (set in a `beforeAll`):
 * `send` as is, `ok` asserting 200 and returning the response Bundle, `nothingWritten` asserting an
 * OperationOutcome of `status` and no new version in the tenant.
 */
export function bundlePoster(app: () => TestApp, client: () => FhirClient) {
  const send = (bundle: Json, c = client()) => c.post(c.base, bundle);
  const ok = async (bundle: Json, c = client()): Promise<Json> => {
    const res = await send(bundle, c);
    const body = (await res.json()) as Json;
    if (res.status !== 200) throw new Error(`bundle failed: ${res.status} ${JSON.stringify(body)}`);
    return body;
  };
  const nothingWritten = async (bundle: Json, status: number): Promise<Json> => {
    const before = await countVersions(app());
    const outcome = await expectOutcome(await send(bundle), status);
    expect(await countVersions(app())).toBe(before);
    return outcome;
  };
  return { send, ok, nothingWritten };
}

/** The sorted ids of the resources a search matches (its first page). */
export async function searchIds(api: FhirClient, query: string): Promise<string[]> {
  return ((await api.search(query)).entry ?? []).map((e: Json) => e.resource.id as string).sort();
}

/**
 * Checks a search both ways, as the SQL and the in-memory matcher answer it: `Type?query` matches
 * `expected`, and of `candidates` a token scoped `system/{type}.rs?{query}` may read `expected` (readableUnder).
 */
export async function expectBothWays(t: TestApp, api: FhirClient, type: string, query: string, candidates: string[], expected: string[]): Promise<void> {
  const found = await searchIds(api, `${type}?${query}`);
  const readable = await readableUnder(t, type, query, candidates);
  expect({ query, found, readable }).toEqual({ query, found: expected, readable: expected });
}

/**
 * Which of `ids` (of `type`) a token scoped `system/{type}.rs?{query}` may read (200, else 403): the
 * in-memory matcher's answer to a search, to set beside the SQL's.
 */
export async function readableUnder(t: TestApp, type: string, query: string, ids: string[]): Promise<string[]> {
  const filtered = fhirClient(t, await craftToken(t, `system/${type}.rs?${query}`));
  const readable: string[] = [];
  for (const id of ids) {
    const status = (await filtered.get(`${type}/${id}`)).status;
    expect([200, 403]).toContain(status);
    if (status === 200) readable.push(id);
  }
  return readable.sort();
}
