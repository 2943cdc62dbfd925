import { afterAll, beforeAll, describe } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import type { Store } from '../../src/store/types.ts';
import { oauthContract } from './contract/oauth.ts';

describe('sqlite store (auth)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-store-'));
  let store: Store;
  beforeAll(async () => {
    store = createSqliteStore(join(dir, 'auth.db'));
    await store.migrate();
  });
  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  oauthContract(() => store);
});
