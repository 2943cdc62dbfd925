import { afterAll, describe, expect, test } from 'bun:test';
import { createTerminology } from '../../../src/terminology/create.ts';
import { createTestApp } from '../../helpers/app.ts';

const t = await createTestApp();
afterAll(() => t.close());

describe("a tenant's terminology context: one function, at once in the steady state", () => {
  test('read once, then given without a promise within the check interval, and read again after it or a write', async () => {
    const { service, markChanged } = createTerminology({ store: t.store, clock: t.clock, checkIntervalMs: 250 });
    const first = service.context('t1');
    expect(first).toBeInstanceOf(Promise); // the change token must be read
    const context = await first;
    expect(service.context('t1')).not.toBeInstanceOf(Promise); // the performance property
    expect(service.context('t1')).toEqual(context);
    markChanged('t1'); // a write of this process: the token is read again at once
    const afterWrite = service.context('t1');
    expect(afterWrite).toBeInstanceOf(Promise);
    await afterWrite;
    t.clock.advance(250); // another process's write may have come: read again
    try {
      const later = service.context('t1');
      expect(later).toBeInstanceOf(Promise);
      await later;
      expect(service.context('t1')).not.toBeInstanceOf(Promise);
    } finally {
      t.clock.advance(-250);
    }
  });
});
