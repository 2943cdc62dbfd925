/**
 * The storage contract: the same tests against every adapter (SQLite always; PostgreSQL on a fresh
 * database for this file when the server is reachable, see test/helpers/stores.ts).
 */
import { afterAll, afterEach, beforeAll, describe } from 'bun:test';
import type { Store } from '../../src/store/types.ts';
import { storeTargets } from '../helpers/stores.ts';
import { accountsContract } from './contract/accounts.ts';
import { batchingContract } from './contract/batching.ts';
import { exportCleanupContract } from './contract/export-cleanup.ts';
import { expungeContract } from './contract/expunge.ts';
import { exportDownloadsContract } from './contract/export-downloads.ts';
import { exportJobsContract } from './contract/export-jobs.ts';
import { exportScratchContract } from './contract/export-scratch.ts';
import { importJobsContract } from './contract/import-jobs.ts';
import { twoInstanceContract } from './contract/concurrency.ts';
import { compartmentsContract } from './contract/compartments.ts';
import { historyContract } from './contract/history.ts';
import { indexReadsContract } from './contract/index-reads.ts';
import { insertNewContract } from './contract/insert-new.ts';
import { metacharContract } from './contract/metachars.ts';
import { oauthContract } from './contract/oauth.ts';
import { migrationContract } from './contract/migrations.ts';
import { searchContract } from './contract/search.ts';
import { searchKeysContract } from './contract/search-keys.ts';
import { snapshotContract } from './contract/snapshot.ts';
import { subscriptionEventsContract } from './contract/subscription-events.ts';
import { subscriptionOwnersContract } from './contract/subscription-owners.ts';
import { writesContract } from './contract/writes.ts';
import { writeMarkContract } from './contract/write-mark.ts';
import { versionsSinceContract } from './contract/versions-since.ts';

const targets = await storeTargets();

describe.each(targets.map((t) => [t.kind, t] as const))('%s store', (kind, target) => {
  let store: Store;
  beforeAll(async () => {
    store = target.open();
    await store.migrate();
  }, 30_000);
  // The stores a test opened besides the shared one are closed after it (their connections held to the end of
  // the file, with the other worker's, ran past PostgreSQL's default 100).
  afterEach(() => target.release([store]), 30_000);
  // Dropping databases can take seconds on a busy shared server.
  afterAll(() => target.cleanup(), 60_000);

  migrationContract(target);
  accountsContract(() => store);
  historyContract(() => store);
  searchContract(() => store);
  compartmentsContract(() => store);
  indexReadsContract(() => store);
  writesContract(() => store);
  writeMarkContract(() => store);
  versionsSinceContract(() => store);
  batchingContract(() => store);
  insertNewContract(() => store);
  metacharContract(() => store);
  oauthContract(() => store);
  expungeContract(() => store);
  subscriptionOwnersContract(() => store);
  subscriptionEventsContract(() => store);
  snapshotContract(target);
  exportJobsContract(target);
  exportScratchContract(target);
  exportDownloadsContract(target);
  exportCleanupContract(target);
  importJobsContract(() => store);
  twoInstanceContract(() => target, kind === 'postgres');
  searchKeysContract(() => target, kind === 'postgres');
});
