import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import type { Store } from '../../src/store/types.ts';

export interface StoreFactory {
  name: string;
  /** A fresh, migrated store and how to dispose of it; null (with a printed notice) when unavailable. */
  open(): Promise<{ store: Store; url: string; dispose(): Promise<void> } | null>;
}

export const sqliteFactory: StoreFactory = {
  name: 'sqlite',
  async open() {
    const dir = mkdtempSync(join(tmpdir(), 'cinder-export-store-'));
    const url = 'sqlite:' + join(dir, 'cinder.db');
    const store = createSqliteStore(join(dir, 'cinder.db'));
    await store.migrate();
    return { store, url, dispose: async () => (await store.close(), rmSync(dir, { recursive: true, force: true })) };
  },
};

export const exportStoreFactories: StoreFactory[] = [sqliteFactory];
