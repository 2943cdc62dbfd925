import { afterEach, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function store() {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-queue-'));
  dirs.push(dir);
  const s = createSqliteStore(join(dir, 'c.db'));
  await s.migrate();
  return s;
}

test('an account write issued while a resource transaction is open is not swallowed by its rollback', async () => {
  const s = await store();
  let release!: () => void;
  let opened!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const open = new Promise<void>((r) => (opened = r));
  const tx = s.resources.write('t', async (w) => {
    await w.put({ type: 'Patient', id: 'p', versionId: 1, lastUpdated: 1, deleted: false, content: '{}', index: [], compartments: [] });
    opened();
    await held;
    throw new Error('roll back');
  });
  await open;
  // Issued while the transaction above holds the writer connection.
  const created = s.tenants.create('t2', 5);
  release();
  await expect(tx).rejects.toThrow('roll back');
  await created;
  expect(await s.tenants.get('t2')).toEqual({ id: 't2', createdAt: 5 });
  expect(await s.resources.read('t', 'Patient', 'p')).toBeNull();
  await s.close();
});
