/**
 * Reading a large request body lets the process's other requests run (eachChunk, src/http/body.ts): a body
 * already received was decoded from UTF-8, or encoded as base64 for a native Binary, in one call (48 MiB held
 * the event loop 0.7 s), since reading a stream that holds the whole body never waits.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { tailHold } from '../helpers/loop.ts';

describe('the event loop while a large body is read', () => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await createTestApp();
    token = await t.token();
  });
  afterAll(() => t.close());

  test('a native Binary upload is encoded with turns of the event loop, up to the 400 that follows reading it', async () => {
    const body = new Uint8Array(40 * 1024 * 1024).map((_, i) => i % 251);
    // An empty X-Security-Context is refused once the body is read, before anything is written.
    const { result: res, took, tail } = await tailHold(() =>
      t.request(`${t.fhir()}/Binary`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/octet-stream', 'X-Security-Context': '' }, body }));
    const outcome = (await res.json()) as Json;
    expect([res.status, outcome.issue[0].diagnostics]).toEqual([400, 'X-Security-Context is empty: send a reference such as Patient/123']);
    // Encoded in one call, the body held the loop to the 400 (its tail: 70-100% of its time on two busy cores); in
    // parts, it turns every 10 ms, and the parts' text joined into one string (as it is stored) is its tail (15-25%).
    expect({ took: took > 40, tail: tail < took / 2 }).toEqual({ took: true, tail: true });
  });

  test('a JSON body is decoded and scanned with turns of the event loop, up to the 400 of its parse', async () => {
    // Malformed at its first character: the answer is JSON.parse's 400, right after the body is read and scanned.
    const body = new TextEncoder().encode(`x${' '.repeat(40 * 1024 * 1024)}`);
    const { result: res, took, tail } = await tailHold(() =>
      t.request(t.fhir(), { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body }));
    const outcome = (await res.json()) as Json;
        expect([res.status, outcome.issue[0].diagnostics.startsWith('Request body is not valid JSON: ')]).toEqual([400, true]);
    // Decoded and scanned in one call each, the body held the loop to the 400 (its tail: all of its time).
    expect({ took: took > 60, tail: tail < took / 4 }).toEqual({ took: true, tail: true });
  });
});
