/**
 * `_total=accurate` is counted while the page is read: the answer carries both, the same as one after
 * the other, and a page that fails answers its error while the count, failing later too, is caught
 * (an unhandled rejection would fail this file).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoreUnavailableError } from '../../src/store/interface/errors.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import type { Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';

describe('_total=accurate', () => {
  let t: TestApp;
  let token: string;
  /** Whether the store's searches and counts fail now, and the order they were called in. */
  const state = { failing: false, calls: [] as string[] };

  beforeAll(async () => {
    const store = createSqliteStore(join(mkdtempSync(join(tmpdir(), 'cinder-total-')), 'cinder.db'));
    await store.migrate();
    const resources = store.resources;
    const wrapped: Store = {
      ...store,
      resources: {
        ...resources,
        async search(tenant, query) {
          state.calls.push('search');
          if (state.failing) throw new StoreUnavailableError('the page failed');
          return resources.search(tenant, query);
        },
        async count(tenant, query) {
          state.calls.push('count');
          if (state.failing) {
            await Bun.sleep(30);
            throw new StoreUnavailableError('the count failed, after the page');
          }
          await Bun.sleep(5);
          return resources.count(tenant, query);
        },
      },
    };
    t = await createTestApp({ store: wrapped });
    token = await t.token();
    for (let i = 0; i < 7; i++) {
      const res = await t.request(`${t.fhir()}/Patient`, fhirInit(token, 'POST', { resourceType: 'Patient', gender: i % 2 ? 'female' : 'male' }));
      expect(res.status).toBe(201);
    }
  });
  afterAll(() => t.close());

  test('the page and its total, the count begun before the page is read', async () => {
    state.calls.length = 0;
    const res = await t.request(`${t.fhir()}/Patient?gender=male&_total=accurate&_count=2`, fhirInit(token));
    expect(res.status).toBe(200);
    const bundle = (await res.json()) as Json;
    expect(bundle.total).toBe(4);
    expect(bundle.entry).toHaveLength(2);
    expect(state.calls.slice(0, 2)).toEqual(['count', 'search']);
  });

  test('a page that fails answers 503; the count failing after it is caught', async () => {
    state.failing = true;
    try {
      const res = await t.request(`${t.fhir()}/Patient?_total=accurate`, fhirInit(token));
      expect(res.status).toBe(503);
      expect(((await res.json()) as Json).issue[0].code).toBe('transient');
      await Bun.sleep(60);
    } finally {
      state.failing = false;
    }
  });
});
