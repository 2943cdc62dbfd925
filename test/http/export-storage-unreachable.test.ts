/**
 * A download (an export file, an `$import` error file) while the export storage cannot tell whether the file
 * is there (S3 unreachable or answering 5xx, a disk error): a 503 `transient` with Retry-After, and the
 * file once the storage answers again; never the 410 of a file removed for good, which tells a client to
 * start its export again. A file that is not stored is still a 410. A job whose storage cannot be reached
 * while it writes waits for it and resumes (its attempt refunded), rather than failing after a burst of
 * retries; one that stays away longer than the wait fails then. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSink, type ExportSink } from '../../src/export/sink.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore, finish, kickOff, patient, put, runExports } from '../helpers/export.ts';

/** A file sink whose `size`, and the writes of the files it opens, fail while `down` is set, as an unreachable storage's do. */
function flakySink(dir: string): ExportSink & { down: boolean } {
  const sink = openSink(`file:${dir}`, {});
  const refused = () => Promise.reject(new Error('ECONNREFUSED 127.0.0.1:9000'));
  const flaky = {
    ...sink,
    kind: sink.kind,
    down: false,
    size: (key: string) => (flaky.down ? refused() : sink.size(key)),
    open: (key: string) => {
      const w = sink.open(key);
      return { write: (c: string | Uint8Array) => (flaky.down ? refused() : w.write(c)), close: () => (flaky.down ? refused() : w.close()), abort: () => w.abort() };
    },
  };
  return flaky;
}

await eachStore((kind, fresh) => {
  describe(`downloads while the export storage cannot be reached (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const dir = mkdtempSync(join(tmpdir(), 'cinder-sink-'));
    const sink = flakySink(dir);
    const lines = `${JSON.stringify({ resourceType: 'Patient', id: 'ok1' })}\n{not json\n`;
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(lines) });

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), exportSink: sink, env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      token = await t.token();
      await put(t, patient('p1'));
    });
    afterAll(async () => {
      await t.app.imports.stop();
      server.stop(true);
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const unavailable = async (res: Response) => {
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      const body = (await res.json()) as { issue: { code: string; diagnostics: string }[] };
      expect(body.issue[0]!.code).toBe('transient');
      expect(body.issue[0]!.diagnostics).not.toContain('ECONNREFUSED');
    };

    test('an export file is a 503 with Retry-After, then downloads; a file not stored is a 410', async () => {
      const manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Patient'), { sink });
      const url = manifest.output[0]!.url;
      sink.down = true;
      await unavailable(await t.request(url, fhirInit(token)));
      sink.down = false;
      const res = await t.request(url, fhirInit(token));
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('"id":"p1"');
      rmSync(dir, { recursive: true, force: true });
      expect((await t.request(url, fhirInit(token))).status).toBe(410);
    });

    test('a job whose storage cannot be reached waits for it and resumes, not failed; one that stays away fails after the wait', async () => {
      const status = await kickOff(t, token, '/$export?_type=Patient');
      sink.down = true;
      setTimeout(() => (sink.down = false), 1200);
      // Handed back with its attempt refunded once the storage answers, then completed by the next claim.
      expect(await runExports(t, {}, sink)).toEqual(['paused', 'completed']);
      const manifest = (await (await t.request(status, fhirInit(token))).json()) as { output: { url: string; count: number }[] };
      expect(manifest.output.map((o) => o.count)).toEqual([1]);
      const res = await t.request(manifest.output[0]!.url, fhirInit(token));
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('"id":"p1"');
      // A storage away longer than the wait: the job fails then (another attempt would wait as long again).
      const gone = await kickOff(t, token, '/$export?_type=Patient');
      sink.down = true;
      try {
        expect(await runExports(t, { storageWaitMs: 50 }, sink)).toEqual(['failed']);
      } finally {
        sink.down = false;
      }
      expect((await t.request(gone, fhirInit(token))).status).toBe(500);
    });

    test("an $import input's error file is a 503 with Retry-After, then downloads", async () => {
      const kick = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', {
        resourceType: 'Parameters',
        parameter: [
          { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
          { name: 'inputSource', valueUri: 'https://source.example.org/fhir' },
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${server.port}/p.ndjson` }] },
        ],
      }));
      expect(kick.status).toBe(202);
      await t.app.imports.runOnce();
      const body = (await (await t.request(kick.headers.get('content-location')!, fhirInit(token))).json()) as { error: { url: string }[] };
      const url = body.error[0]!.url;
      sink.down = true;
      await unavailable(await t.request(url, fhirInit(token)));
      sink.down = false;
      const res = await t.request(url, fhirInit(token));
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('Line[2]');
    });
  });
});
