/**
 * A FHIR JSON request body may begin with a UTF-8 byte order mark, as Windows tools write it: RFC 8259
 * 8.1 lets a parser ignore it, and Cinder does, whether the body comes with a Content-Length or streamed
 * (chunked, or in a Content-Encoding). One BOM is ignored, as UTF-8 decoding does; a second is no JSON.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { expectOutcome, type Json } from '../helpers/fhir.ts';

const BOM = new Uint8Array([0xef, 0xbb, 0xbf]);
const withBom = (value: unknown, boms = 1) => new Uint8Array([...Array.from({ length: boms }, () => [...BOM]).flat(), ...new TextEncoder().encode(JSON.stringify(value))]);

/** A body handed out in one chunk with no Content-Length, as a chunked request is. */
const streamed = (bytes: Uint8Array) => new ReadableStream<Uint8Array>({ start: (c) => (c.enqueue(bytes), c.close()) });

describe('a body beginning with a UTF-8 BOM', () => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await createTestApp();
    token = await t.token();
  });
  afterAll(() => t.close());

  const send = (method: string, path: string, body?: BodyInit, headers: Record<string, string> = {}) =>
    t.request(`${t.fhir()}/${path}`, { method, body, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json', ...headers } });

  test('is read without it: create (streamed, framed, gzip), update, transaction, $validate', async () => {
    const patient = { resourceType: 'Patient', name: [{ family: 'Bom' }] };
    const created = await send('POST', 'Patient', streamed(withBom(patient)));
    expect(created.status).toBe(201);
    const id = ((await created.json()) as Json).id as string;
    const bytes = withBom(patient);
    expect((await send('POST', 'Patient', bytes, { 'Content-Length': String(bytes.byteLength) })).status).toBe(201);
    expect((await send('POST', 'Patient', Bun.gzipSync(withBom(patient)), { 'Content-Encoding': 'gzip' })).status).toBe(201);
    const updated = await send('PUT', `Patient/${id}`, streamed(withBom({ ...patient, id, active: true })));
    expect(updated.status).toBe(200);
    expect(((await (await send('GET', `Patient/${id}`)).json()) as Json).active).toBe(true);
    const transaction = { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: patient, request: { method: 'POST', url: 'Patient' } }] };
    expect((await send('POST', '', streamed(withBom(transaction)))).status).toBe(200);
    expect((await send('POST', 'Patient/$validate', streamed(withBom(patient)))).status).toBe(200);
  });

  test('only one: a second BOM, or one in the middle, is not JSON', async () => {
    await expectOutcome(await send('POST', 'Patient', streamed(withBom({ resourceType: 'Patient' }, 2))), 400);
    const inside = new TextEncoder().encode(' \ufeff{"resourceType":"Patient"}');
    await expectOutcome(await send('POST', 'Patient', streamed(inside)), 400);
  });
});
