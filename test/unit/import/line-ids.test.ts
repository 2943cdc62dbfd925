/** Ids of the id-less lines of a resumable input: a function of (job, input, line), ordered, valid FHIR ids. */
import { expect, test } from 'bun:test';
import { lineId, lineIds } from '../../../src/fhir/import/line-ids.ts';
import { prepareNdjson } from '../../../src/fhir/import/ndjson.ts';

const job = '0d6c7a52-2c1e-4f7e-9d55-8f1f3b7c2a10';
const created = Date.UTC(2026, 10, 29, 12, 0, 0);

test('the same line of the same input of the same job gets the same id; another job, input or line another one', () => {
  const ids = lineIds(job, 3, created);
  expect(lineId(lineIds(job, 3, created), 17)).toBe(lineId(ids, 17)!);
  const others = [lineId(ids, 18), lineId(lineIds(job, 4, created), 17), lineId(lineIds('another-job', 3, created), 17)];
  expect(new Set([lineId(ids, 17), ...others]).size).toBe(4);
});

test('ids are UUIDv7-shaped, valid FHIR ids, and ascend with the line (and the input) as the text sorts', () => {
  const ids = lineIds(job, 0, created);
  const seq = [1, 2, 9, 10, 255, 256, 65_536, 2 ** 32, 2 ** 36 - 1].map((n) => lineId(ids, n)!);
  for (const id of seq) {
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(id.length).toBeLessThanOrEqual(64);
    expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(created);
  }
  expect([...seq].sort()).toEqual(seq);
  expect(lineId(lineIds(job, 1, created), 1)! > lineId(ids, 2 ** 36 - 1)!).toBe(true);
  expect(lineId(ids, 2 ** 36)).toBeUndefined();
  expect(() => lineIds(job, 4096, created)).toThrow(RangeError);
});

test('prepareNdjson gives id-less lines their line id, keeps given ids, and leaves blank lines uncounted', async () => {
  const ids = lineIds(job, 0, created);
  const text = '{"resourceType":"Patient"}\n\n{"resourceType":"Patient","id":"given"}\n{"resourceType":"Patient"}\n';
  const read = async () => {
    const out: string[] = [];
    for await (const chunk of prepareNdjson(new Blob([text]), 'strict', undefined, undefined, 'Patient', ids)) out.push(...chunk.versions.map((v) => v.id));
    return out;
  };
  const first = await read();
  expect(first).toEqual([lineId(ids, 1)!, 'given', lineId(ids, 4)!]);
  expect(await read()).toEqual(first);
});
