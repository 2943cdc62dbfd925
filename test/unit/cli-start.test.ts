import { expect, test } from 'bun:test';
import { initialised } from '../../src/cli/serve.ts';
import { loadConfig } from '../../src/config.ts';

test("the first start's banner names where the data went: the data directory, or the PostgreSQL database without its credentials", () => {
  expect(initialised(loadConfig({ CINDER_DATA_DIR: '/srv/cinder-data' }))).toBe('/srv/cinder-data');
  const pg = initialised(loadConfig({ CINDER_DATA_DIR: '/srv/unused', CINDER_DATABASE_URL: 'postgres://cinder:s3cret@db.example:5433/clinic?max=4' }));
  expect(pg).toBe('the PostgreSQL database clinic at db.example:5433');
  // No database named: libpq's, the user's name (here the URL's; without one the operating system's, which differs by machine).
  expect(initialised(loadConfig({ DATABASE_URL: 'postgresql://alice@db.example/' }))).toBe('the PostgreSQL database alice at db.example');
});

test('a data directory that cannot be created: one line naming the path and the settings, exit 1', async () => {
  const proc = Bun.spawn([process.execPath, 'src/main.ts', 'migrate'], {
    cwd: new URL('../..', import.meta.url).pathname, stdin: 'ignore', stdout: 'ignore', stderr: 'pipe',
    env: { PATH: process.env.PATH ?? '', CINDER_DATA_DIR: '/proc/cinder-cannot-be-here' },
  });
  const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  expect(code).toBe(1);
  expect(stderr).toBe('cinder: cannot create the directory of the SQLite database /proc/cinder-cannot-be-here/cinder.db (CINDER_DATA_DIR or CINDER_DATABASE_URL): ENOENT\n');
}, 30_000);
