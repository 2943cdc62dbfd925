/**
 * An import's lease renewals store the running input's counts, not its whole progress: the progress holds every
 * finished input's listed issues (up to 10,000 in a job, megabytes), which each renewal rewrote into the job's row.
 * The status still shows the running counts. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';

const line = (r: Record<string, unknown>) => JSON.stringify(r) + '\n';
// 1,100 lines failing validation (an invalid UCUM code): 1,000 issues listed in the progress.
const BAD = Array.from({ length: 1100 }, (_, i) =>
  line({ resourceType: 'Observation', id: `o${i}`, status: 'final', code: { text: 'x' }, valueQuantity: { value: 1, system: 'http://unitsofmeasure.org', code: 'mgg' } })).join('');

let release!: () => void;
let released = new Promise<void>((r) => (release = r));
const server = Bun.serve({
  port: 0, hostname: '127.0.0.1',
  fetch: (req) => new URL(req.url).pathname === '/bad.ndjson'
    ? new Response(BAD)
    : new Response(new ReadableStream({
      async start(c) {
        c.enqueue(new TextEncoder().encode(line({ resourceType: 'Patient', id: 'held1' })));
        await released;
        c.enqueue(new TextEncoder().encode(line({ resourceType: 'Patient', id: 'held2' })));
        c.close();
      },
    })),
});
afterAll(() => server.stop(true));

await eachStore((kind, fresh) => describe(`import lease renewals (${kind})`, () => {
  let t: TestApp;
  beforeAll(async () => {
    // A lease of 2 s: renewed every 666 ms.
    t = await createTestApp({ store: await fresh(), env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true', CINDER_EXPORT_LEASE_SECONDS: '2' } });
  });
  afterAll(async () => {
    await t.app.imports.stop();
    await t.close();
  });

  test("renewals during an input store its counts; the progress with the issues before it is left as the input before's end stored it", async () => {
    released = new Promise<void>((r) => (release = r));
    const token = await t.token();
    const input = (type: string, path: string) => ({ name: 'input', part: [{ name: 'type', valueCode: type }, { name: 'url', valueUri: `http://127.0.0.1:${server.port}${path}` }] });
    const kick = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', { resourceType: 'Parameters', parameter: [input('Observation', '/bad.ndjson'), input('Patient', '/held.ndjson')] }));
    expect(kick.status).toBe(202);
    const status = kick.headers.get('content-location')!;
    const id = status.slice(status.lastIndexOf('/') + 1);
    const ran = t.app.imports.runOnce();
    // The first input done, the second held: renewals come every 666 ms.
    let job = await t.store.imports.get('t1', id);
    for (let i = 0; i < 600 && (JSON.parse(job!.progress) as { done: unknown[] }).done.length < 1; i++) {
      await Bun.sleep(25);
      job = await t.store.imports.get('t1', id);
    }
    const stored = job!.progress;
    expect(stored.length).toBeGreaterThan(200_000);
    for (let i = 0; i < 200 && job!.counts === null; i++) {
      await Bun.sleep(25);
      job = await t.store.imports.get('t1', id);
    }
    await Bun.sleep(1_500);
    job = await t.store.imports.get('t1', id);
    // Renewed with the counts alone (a few bytes); the progress is what the first input's end stored.
    expect(job!.progress).toBe(stored);
    expect(JSON.parse(job!.counts!)).toEqual({ imported: 0, failed: 0 });
    const running = await t.request(status, fhirInit(token));
    expect(running.status).toBe(202);
    expect(running.headers.get('x-progress')).toBe('input 2 of 2 (Patient), 0 resources imported, 1100 failed');
    release();
    expect(await ran).toBe(1);
    const done = await t.request(status, fhirInit(token));
    expect(done.status).toBe(200);
    const body = (await done.json()) as { output: { count: number }[]; error: { count: number; outcome: { issue: unknown[] } }[] };
    expect(body.output.map((o) => o.count)).toEqual([0, 2]);
    expect(body.error[0]!.count).toBe(1100);
    expect(body.error[0]!.outcome.issue).toHaveLength(1001);
    expect((await t.store.imports.get('t1', id))!.counts).toBeNull();
  }, 60_000);
}));
