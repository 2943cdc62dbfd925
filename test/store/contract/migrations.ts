import { describe, expect, test } from 'bun:test';
import { postgresMigrations } from '../../../src/store/postgres/migrations.ts';
import { sqliteMigrations } from '../../../src/store/sqlite/migrations.ts';
import type { StoreTarget } from '../../helpers/stores.ts';

/** Versioned migrations: applied once, recorded, safe when several processes start together. */
export function migrationContract(target: StoreTarget) {
  const all = (target.kind === 'sqlite' ? sqliteMigrations : postgresMigrations).map((m) => `${m.version}_${m.name}`);
  describe('migrations', () => {
    test('the first migrate applies every migration; later ones, from any instance, apply nothing', async () => {
      const db = await target.fresh();
      const a = db.open();
      expect(await a.migrate()).toEqual({ applied: all });
      expect(await a.migrate()).toEqual({ applied: [] });
      expect(await db.open().migrate()).toEqual({ applied: [] });
      await a.tenants.create('after-migrate', 5);
      expect(await a.tenants.get('after-migrate')).toEqual({ id: 'after-migrate', createdAt: 5 });
    });

    test('two instances migrating one fresh database at once apply each migration exactly once', async () => {
      const db = await target.fresh();
      const stores = [db.open(), db.open(), db.open()];
      const results = await Promise.all(stores.map((s) => s.migrate()));
      expect(results.flatMap((r) => r.applied)).toEqual(all);
      await stores[0]!.tenants.create('shared', 1);
      for (const s of stores) expect(await s.tenants.get('shared')).toEqual({ id: 'shared', createdAt: 1 });
    });

    test('ping succeeds on a reachable database', async () => {
      expect(await target.open().ping()).toBeUndefined();
    });
  });
}
