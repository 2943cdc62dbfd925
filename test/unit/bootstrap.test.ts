import { expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bootstrap } from '../../src/cli/bootstrap.ts';
import { systemClock } from '../../src/clock.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';

test('first start creates tenant default and one admin client; concurrent and later starts create nothing', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-boot-'));
  const a = createSqliteStore(join(dir, 'c.db'));
  const b = createSqliteStore(join(dir, 'c.db'));
  await a.migrate();
  const results = await Promise.all([bootstrap(a, systemClock), bootstrap(b, systemClock)]);
  const created = results.filter((r) => r !== null);
  expect(created).toHaveLength(1);
  expect(created[0]!.tenant).toBe('default');
  expect(await a.clients.list('default')).toHaveLength(1);
  expect(await bootstrap(a, systemClock)).toBeNull();
  await a.close();
  await b.close();
  rmSync(dir, { recursive: true, force: true });
});
