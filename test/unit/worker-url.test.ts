import { expect, test } from 'bun:test';
import { workerUrl } from '../../src/worker-url.ts';

test('workerUrl resolves a path below src/ (from source; test/e2e covers the compiled layout)', () => {
  expect(workerUrl('export/worker.ts')).toBe(new URL('../../src/export/worker.ts', import.meta.url).href);
  expect(workerUrl('a/b/c.worker.ts')).toBe(new URL('../../src/a/b/c.worker.ts', import.meta.url).href);
});
