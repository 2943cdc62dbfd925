/**
 * Connections opening one SQLite file at the same moment, as a server's threads do at start (writer,
 * reader, checkpointer, export workers) right after another process closed it: switching to WAL takes
 * a lock, and without the busy timeout set first, about 3 in 100 such opens failed at once with
 * "database is locked" (which stopped `cinder serve` at start).
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/store/sqlite/db.ts';

const dir = mkdtempSync(join(tmpdir(), 'cinder-open-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('four threads opening a file another connection has just closed all succeed', async () => {
  const workers = Array.from({ length: 4 }, () => new Worker(new URL('../fixtures/sqlite-open-worker.ts', import.meta.url).href));
  const failures: string[] = [];
  try {
    for (let round = 0; round < 60; round++) {
      const path = join(dir, `c${round}.db`);
      const seed = openDatabase(path);
      seed.exec('CREATE TABLE t (x)');
      seed.exec('INSERT INTO t VALUES (1)');
      seed.close();
      const answers = await Promise.all(workers.map((w) => new Promise<string>((resolve) => {
        w.onmessage = (event: MessageEvent<string>) => resolve(event.data);
        w.postMessage(path);
      })));
      failures.push(...answers.filter((a) => a !== 'ok'));
    }
  } finally {
    workers.forEach((w) => w.terminate());
  }
  expect(failures).toEqual([]);
}, 60_000);
