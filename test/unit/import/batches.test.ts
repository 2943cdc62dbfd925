/** The import's batch writer: transaction sizes, and every resource written once. */
import { expect, test } from 'bun:test';
import { systemClock } from '../../../src/clock.ts';
import { createBatchWriter, FIRST_BATCH_RESOURCES } from '../../../src/fhir/import/batches.ts';
import { createSqliteStore } from '../../../src/store/sqlite/index.ts';

async function writeAll(count: number, limits: { resources: number; chars: number }): Promise<{ committed: number[]; stored: number }> {
  const store = createSqliteStore(':memory:');
  await store.migrate();
  const committed: number[] = [];
  const writer = createBatchWriter({ store, clock: systemClock }, 't1', limits, (n) => committed.push(n));
  for (let i = 0; i < count; i++) await writer.addPrepared([writer.prepare({ resourceType: 'Basic', id: `b${i}`, code: { text: 'x' } })]);
  await writer.drain();
  const stored = await store.resources.count('t1', { type: 'Basic', sort: [], count: 0 });
  await store.close();
  return { committed, stored };
}

test('the first transaction holds a thousand resources, each next one twice as many, up to the limit', async () => {
  expect(FIRST_BATCH_RESOURCES).toBe(1000);
  const { committed, stored } = await writeAll(9_500, { resources: 3000, chars: 1 << 30 });
  expect(committed).toEqual([1000, 2000, 3000, 3000, 500]);
  expect(stored).toBe(9_500);
});

test('a limit below the first batch is kept from the start', async () => {
  const { committed } = await writeAll(1_200, { resources: 500, chars: 1 << 30 });
  expect(committed).toEqual([500, 500, 200]);
});
