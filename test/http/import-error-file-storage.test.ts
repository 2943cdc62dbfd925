/**
 * `$import` when the export storage cannot take an input's error file (full, unreachable): the input's lines
 * are imported and its first failures listed inline as always, with a warning that the file is missing; the
 * job completes instead of failing its attempt and importing the input again. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSink, type ExportSink } from '../../src/export/sink.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';

type Json = Record<string, any>;

/** A file sink whose writes of `.../errors.ndjson` files fail, as a full disk would. */
function failingErrorFiles(): ExportSink {
  const sink = openSink(`file:${mkdtempSync(join(tmpdir(), 'cinder-sink-'))}`, {});
  return {
    ...sink,
    kind: sink.kind,
    open(key) {
      const writer = sink.open(key);
      if (!key.endsWith('errors.ndjson')) return writer;
      return { ...writer, write: () => Promise.reject(new Error('ENOSPC: no space left on device')) };
    },
  };
}

await eachStore((kind, fresh) => {
  describe(`$import error files on a storage that refuses them (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const lines = `${JSON.stringify({ resourceType: 'Patient', id: 'ok1' })}\n{not json\n${JSON.stringify({ resourceType: 'Patient', id: 'ok2' })}\n`;
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(lines) });

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), exportSink: failingErrorFiles(), env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      token = await t.token();
    });
    afterAll(async () => {
      await t.app.imports.stop();
      server.stop(true);
      await t.close();
    });

    test('the input is imported, its failures listed inline with a warning, and the job completes', async () => {
      const kick = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', {
        resourceType: 'Parameters',
        parameter: [
          { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
          { name: 'inputSource', valueUri: 'https://source.example.org/fhir' },
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${server.port}/p.ndjson` }] },
        ],
      }));
      expect(kick.status).toBe(202);
      const url = kick.headers.get('content-location')!;
      await t.app.imports.runOnce();
      const res = await t.request(url, fhirInit(token));
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      expect(body.output).toEqual([{ type: 'Patient', inputUrl: `http://127.0.0.1:${server.port}/p.ndjson`, count: 2, unchanged: 0 }]);
      expect(body.error).toHaveLength(1);
      expect(body.error[0].url).toBeUndefined();
      const issues = body.error[0].outcome.issue as Json[];
      expect(issues[0].location).toEqual(['Line[2]']);
      expect(issues.at(-1)).toMatchObject({ severity: 'warning', code: 'exception' });
      // The storage's own error goes to the log; the client is told which job to ask about.
      expect(issues.at(-1)!.details.text).toContain('could not be written to the export storage');
      expect(issues.at(-1)!.details.text).toContain(`under job ${url.slice(url.lastIndexOf('/') + 1)}`);
      expect(issues.at(-1)!.details.text).not.toContain('ENOSPC');
      expect((await t.store.imports.get('t1', url.slice(url.lastIndexOf('/') + 1)))!.attempts).toBe(1);
      for (const id of ['ok1', 'ok2']) expect((await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token))).status).toBe(200);
    });
  });
});
