/**
 * `cinder compact` in-process on SQLite: the page size conversion that docs/operations.md describes for
 * files of older versions (4 KiB pages to 16 KiB and back), with every resource kept and the database left
 * in WAL mode with nothing beside it; a database named through a symbolic link replaced where the link
 * points (compact and restore); bad --page-size values and a missing database are usage errors.
 */
import { Database } from 'bun:sqlite';
import { describe, expect, test } from 'bun:test';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { createTestApp } from '../helpers/app.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { fhirClient } from '../helpers/fhir.ts';

/** The page size of `path` and the ids of its t1 Patients. */
function inspect(path: string): { pageSize: number; ids: string[] } {
  // Read-write, so that closing it removes the -wal and -shm that opening a WAL database makes (it writes nothing).
  const db = new Database(path, { readwrite: true, create: false });
  try {
    const pageSize = db.query<{ page_size: number }, []>('PRAGMA page_size').get()!.page_size;
    const ids = db.query<{ id: string }, []>("SELECT id FROM resources WHERE tenant = 't1' AND type = 'Patient' ORDER BY id").all().map((r) => r.id);
    return { pageSize, ids };
  } finally {
    db.close();
  }
}

describe('cinder compact (sqlite)', () => {
  test('converts the page size both ways, keeping every resource, in WAL mode, nothing left beside the file', async () => {
    const t = await createTestApp();
    const api = fhirClient(t, await t.token());
    for (const id of ['a', 'b', 'c']) await api.put200({ resourceType: 'Patient', id, name: [{ family: id }] });
    const source = createCliEnv({ CINDER_DATABASE_URL: join(t.dir, 'cinder.db') });
    const cli = createCliEnv({}, { database: false });
    const path = join(cli.dir, 'cinder.db');
    (cli.env as Record<string, string>).CINDER_DATABASE_URL = path;
    try {
      // A copy of the app's database that no process holds open.
      expect((await source.run(['backup', '--out', path])).code).toBe(0);
      const small = await cli.run(['compact', '--page-size', '4096', '--json']);
      expect(small.stderr).toBe('');
      expect(small.code).toBe(0);
      expect(JSON.parse(small.stdout)).toMatchObject({ database: path, page_size_before: 16384, page_size: 4096 });
      expect(inspect(path)).toEqual({ pageSize: 4096, ids: ['a', 'b', 'c'] });
      // WAL mode (file format versions 2), as Cinder keeps its database.
      expect([...readFileSync(path).subarray(18, 20)]).toEqual([2, 2]);
      const back = await cli.run(['compact']);
      expect(back.code).toBe(0);
      expect(back.stdout).toContain('page_size_before: 4096\npage_size: 16384\n');
      expect(inspect(path)).toEqual({ pageSize: 16384, ids: ['a', 'b', 'c'] });
      expect(readdirSync(cli.dir)).toEqual(['cinder.db']);
      expect((await cli.run(['check'])).code).toBe(0);
    } finally {
      cli.close();
      source.close();
      await t.close();
    }
  });

  test('a database reached through a symbolic link is compacted and restored where the link points; the link stays', async () => {
    const t = await createTestApp();
    const api = fhirClient(t, await t.token());
    for (const id of ['a', 'b']) await api.put200({ resourceType: 'Patient', id, name: [{ family: id }] });
    const source = createCliEnv({ CINDER_DATABASE_URL: join(t.dir, 'cinder.db') });
    const cli = createCliEnv();
    // The database on another disk (a directory of its own here), CINDER_DATABASE_URL naming a link to it.
    const disk = join(cli.dir, 'disk');
    mkdirSync(disk);
    const real = join(disk, 'cinder.db');
    const link = join(cli.dir, 'cinder.db');
    symlinkSync(real, link);
    (cli.env as Record<string, string>).CINDER_DATABASE_URL = link;
    try {
      expect((await source.run(['backup', '--out', real])).code).toBe(0);
      expect((await source.run(['backup', '--out', join(cli.dir, 'backup.db')])).code).toBe(0);
      const compacted = await cli.run(['compact', '--page-size', '4096']);
      expect([compacted.code, compacted.stderr]).toEqual([0, '']);
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
      expect(inspect(real)).toEqual({ pageSize: 4096, ids: ['a', 'b'] });
      const restored = await cli.run(['restore', '--from', join(cli.dir, 'backup.db')]);
      expect([restored.code, restored.stderr]).toEqual([0, '']);
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
      expect(inspect(real)).toEqual({ pageSize: 16384, ids: ['a', 'b'] });
      expect(readdirSync(disk)).toEqual(['cinder.db']);
    } finally {
      cli.close();
      source.close();
      await t.close();
    }
  });

  test('bad --page-size values and a missing database are usage errors; nothing is created', async () => {
    const cli = createCliEnv({}, { database: false });
    try {
      for (const size of ['1000', 'abc', '256', '131072', '0']) {
        const r = await cli.run(['compact', '--page-size', size]);
        expect(r.code).toBe(2);
        expect(r.stderr).toContain(`cinder compact: --page-size: '${size}' is not a power of two from 512 to 65536`);
      }
      const missing = await cli.run(['compact']);
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain(`no SQLite database at ${join(cli.dir, 'data', 'cinder.db')}`);
      expect(existsSync(join(cli.dir, 'data'))).toBe(false);
    } finally {
      cli.close();
    }
  });
});
