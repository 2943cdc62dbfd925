import { expect, test } from 'bun:test';
import { initialised } from '../../src/cli/serve.ts';
import { loadConfig } from '../../src/config.ts';

test("the first start's banner names where the data went: the data directory, or the PostgreSQL database without its credentials", () => {
  expect(initialised(loadConfig({ CINDER_DATA_DIR: '/srv/cinder-data' }))).toBe('/srv/cinder-data');
  const pg = initialised(loadConfig({ CINDER_DATA_DIR: '/srv/unused', CINDER_DATABASE_URL: 'postgres://cinder:s3cret@db.example:5433/clinic?max=4' }));
  expect(pg).toBe('the PostgreSQL database clinic at db.example:5433');
  expect(initialised(loadConfig({ DATABASE_URL: 'postgresql://db.example/' }))).toBe('the PostgreSQL database postgres at db.example');
});
