import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import type { Store } from '../../src/store/types.ts';
import { BASE, createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';

/** A store whose ping fails while `state.down` is set; everything else goes to the real store. */
function flakyStore(inner: Store, state: { down: boolean }): Store {
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'ping') {
        return async () => {
          if (state.down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
          await target.ping();
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

let t: TestApp;
const state = { down: false };
const dir = mkdtempSync(join(tmpdir(), 'cinder-ops-'));

beforeAll(async () => {
  t = await createTestApp({ store: flakyStore(createSqliteStore(join(dir, 'ops.db')), state) });
});
afterAll(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The value of one sample line of the Prometheus text, or undefined. */
async function sample(name: string, labels: Record<string, string>): Promise<number | undefined> {
  const text = await (await t.request('/metrics')).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue;
    const inner = line.slice(name.length + 1, line.lastIndexOf('}'));
    const got = inner.split(',');
    if (want.every((w) => got.includes(w)) && got.length === want.length) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

describe('/healthz and /readyz', () => {
  test('/healthz answers 200 whatever the database does', async () => {
    state.down = true;
    try {
      const res = await t.request('/healthz');
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: 'ok' });
    } finally {
      state.down = false;
    }
  });

  test('/readyz is 200 when the database answers and 503 when it does not', async () => {
    const ok = await t.request('/readyz');
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ status: 'ok', database: 'sqlite', exportStorage: 'file' });
    state.down = true;
    try {
      const down = await t.request('/readyz');
      expect(down.status).toBe(503);
      const body = (await down.json()) as Record<string, unknown>;
      expect(body).toEqual({ status: 'unavailable', database: 'sqlite', unavailable: 'database' });
      expect(JSON.stringify(body)).not.toContain('ECONNREFUSED');
    } finally {
      state.down = false;
    }
    expect((await t.request('/readyz')).status).toBe(200);
  });
});

describe('/metrics', () => {
  test('is Prometheus text and counts requests by method, route and status', async () => {
    const before = (await sample('cinder_http_requests_total', { method: 'GET', route: '/healthz', status: '200' })) ?? 0;
    await t.request('/healthz');
    await t.request('/healthz');
    const res = await t.request('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toStartWith('text/plain; version=0.0.4');
    const text = await res.text();
    expect(text).toContain('# TYPE cinder_http_requests_total counter');
    expect(text).toContain('# TYPE cinder_http_request_duration_seconds histogram');
    expect(text).toMatch(/^process_resident_memory_bytes \d+$/m);
    expect(await sample('cinder_http_requests_total', { method: 'GET', route: '/healthz', status: '200' })).toBe(before + 2);
  });

  test('FHIR requests are labelled with their route pattern, not the concrete path', async () => {
    const token = await t.token();
    await t.request(`${t.fhir()}/Patient/nobody-${crypto.randomUUID()}`, fhirInit(token));
    await t.request(`${t.fhir()}/Patient/another-${crypto.randomUUID()}`, fhirInit(token));
    const text = await (await t.request('/metrics')).text();
    expect(text).not.toContain('nobody-');
    const count = await sample('cinder_http_requests_total', { method: 'GET', route: '/tenants/:tenant/fhir/R4/:type/:id', status: '404' });
    expect(count).toBe(2);
    const bucket = await sample('cinder_http_request_duration_seconds_count', { method: 'GET', route: '/tenants/:tenant/fhir/R4/:type/:id', status: '404' });
    expect(bucket).toBe(2);
  });

  test('reports the database connections and the write queue (SQLite)', async () => {
    expect(await sample('cinder_db_pool', { stat: 'connections' })).toBe(3);
    expect(await sample('cinder_db_pool', { stat: 'write_queue' })).toBe(0);
  });

  test('unmatched paths share one label', async () => {
    await t.request(`/no/such/${crypto.randomUUID()}`);
    const text = await (await t.request('/metrics')).text();
    expect(text).toContain('route="unmatched"');
    expect(text).not.toContain('/no/such/');
  });
});

describe('X-Request-Id', () => {
  test('a well-formed incoming id is echoed, on success and on error', async () => {
    for (const path of ['/healthz', `${t.fhir()}/Patient/x`, '/nowhere']) {
      const res = await t.request(path, { headers: { 'X-Request-Id': 'req-123.abc_DEF' } });
      expect(res.headers.get('x-request-id')).toBe('req-123.abc_DEF');
    }
  });

  test('a missing or unsafe id is replaced by a fresh one', async () => {
    const none = await t.request('/healthz');
    expect(none.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const other = await t.request('/healthz');
    expect(other.headers.get('x-request-id')).not.toBe(none.headers.get('x-request-id'));
    for (const bad of ['a b', 'x'.repeat(200), 'evil\u00e9', '<script>']) {
      const res = await t.request('/healthz', { headers: { 'X-Request-Id': bad } });
      expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  test('is on FHIR error responses from every layer (tenant, auth, handler)', async () => {
    const token = await t.token();
    const cases: [string, RequestInit][] = [
      [`${BASE}/tenants/nope/fhir/R4/Patient`, {}],
      [`${t.fhir()}/Patient`, {}],
      [`${t.fhir()}/Patient/bad_id`, fhirInit(token)],
      [`${t.fhir()}/Patient`, fhirInit(token, 'POST', '{')],
    ];
    for (const [url, init] of cases) {
      const res = await t.request(url, { ...init, headers: { ...(init.headers as Record<string, string>), 'X-Request-Id': 'trace-1' } });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.headers.get('x-request-id')).toBe('trace-1');
    }
  });
});
