/**
 * An export or import job that fails on the server (its storage, the database, a fault of Cinder's) tells
 * the client what failed and that it may be tried again, naming the job, and never the cause's own text
 * (a path, a driver's message): that goes to the operator's log, under the job's id (STYLE.md rule 2).
 * An input the client named that cannot be fetched is the client's own, and its entry still names it. On
 * both databases.
 */
import { afterEach, describe, expect, test } from 'bun:test';
import { openSink, type ExportSink } from '../../src/export/sink.ts';
import { createLogger } from '../../src/log.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore, kickOff, patient, put, runExports } from '../helpers/export.ts';

type Json = Record<string, any>;

const SECRET = 'EACCES: permission denied, open /var/lib/cinder-secret/exports/t1/job';

/** The export storage of `t`, but that writing a file fails with SECRET. */
function brokenSink(sink: ExportSink): ExportSink {
  sink.open = () => ({ write: async () => { throw new Error(SECRET); }, close: async () => undefined, abort: async () => undefined });
  return sink;
}

await eachStore((kind, fresh) => {
  describe(`a failed job's status (${kind})`, () => {
    let t: TestApp;
    let lines: string[];
    const log = () => createLogger('warn', {}, (line) => lines.push(line));
    afterEach(() => t.close());

    async function failedStatus(url: string, token: string): Promise<string> {
      const res = await t.request(url, fhirInit(token));
      expect(res.status).toBe(500);
      const body = (await res.json()) as Json;
      expect(body.resourceType).toBe('OperationOutcome');
      expect(body.issue[0].code).toBe('processing');
      return body.issue[0].details.text as string;
    }

    test("an export's says the server failed and that it may be started again; the cause is in the log under the job id", async () => {
      lines = [];
      t = await createTestApp({ store: await fresh() });
      const token = await t.token();
      await put(t, patient('p1'));
      const status = await kickOff(t, token, '/$export?_type=Patient');
      const id = status.slice(status.lastIndexOf('/') + 1);
      expect(await runExports(t, { maxAttempts: 1, log: log() }, brokenSink(openSink(t.config.exportStorage, {}, t.store)))).toEqual(['failed']);
      const text = await failedStatus(status, token);
      expect(text).not.toContain('EACCES');
      expect(text).not.toContain('/var/lib');
      expect(text).toContain(`job ${id}`);
      expect(text).toContain('again may succeed');
      const logged = lines.map((l) => JSON.parse(l) as Json).find((l) => l.msg === 'export job failed');
      expect(logged).toMatchObject({ job: id, err: { message: SECRET } });
    });

    /** Starts an import of one input whose first line is not JSON, on an app of `store`; its status URL and job id. */
    async function importing(store: Awaited<ReturnType<typeof fresh>>, exportSink?: ExportSink) {
      inputs = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('{not json\n' + JSON.stringify(patient('i1')) + '\n') });
      t = await createTestApp({ store, log: log(), env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' }, ...(exportSink && { exportSink }) });
      token = await t.token();
      const res = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', {
        resourceType: 'Parameters',
        parameter: [
          { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${inputs.port}/p.ndjson` }] },
        ],
      }));
      expect(res.status).toBe(202);
      const url = res.headers.get('content-location')!;
      return { url, id: url.slice(url.lastIndexOf('/') + 1) };
    }
    let inputs: ReturnType<typeof Bun.serve> | undefined;
    let token: string;
    afterEach(() => {
      inputs?.stop(true);
      inputs = undefined;
    });

    test("an import's says the server failed and that it may be run again; the cause is in the log under the job id", async () => {
      lines = [];
      const store = await fresh();
      // The database fails as the job ends, each attempt.
      store.imports.complete = async () => { throw new Error(SECRET); };
      const { url, id } = await importing(store);
      for (let i = 0; i < 5 && (await t.store.imports.get('t1', id))!.state !== 'failed'; i++) await t.app.imports.runOnce();
      const text = await failedStatus(url, token);
      expect(text).not.toContain('EACCES');
      expect(text).not.toContain('/var/lib');
      expect(text).toContain(`job ${id}`);
      expect(text).toContain('again may succeed');
      const logged = lines.map((l) => JSON.parse(l) as Json).find((l) => l.msg === 'import job failed');
      expect(logged).toMatchObject({ job: id, err: { message: SECRET } });
    });

    test("an input's error file that the storage refuses is a warning without the storage's message, which the log has", async () => {
      lines = [];
      const { url, id } = await importing(await fresh(), brokenSink(openSink('file:/tmp/cinder-broken-sink', {})));
      await t.app.imports.runOnce();
      const res = await t.request(url, fhirInit(token));
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      expect(body.output).toEqual([{ type: 'Patient', inputUrl: expect.any(String), count: 1, unchanged: 0 }]);
      const issues = body.error[0].outcome.issue as Json[];
      const warning = issues.find((i) => i.severity === 'warning')!;
      expect(warning.details.text).toContain('could not be written');
      expect(warning.details.text).toContain(`job ${id}`);
      expect(JSON.stringify(body)).not.toContain('EACCES');
      const logged = lines.map((l) => JSON.parse(l) as Json).find((l) => l.msg === 'import error file not written');
      expect(logged).toMatchObject({ job: id, err: { message: SECRET } });
    });

    test("an input that cannot be fetched is the client's own: its entry names it and why", async () => {
      lines = [];
      const { url } = await importing(await fresh());
      const port = inputs!.port;
      inputs!.stop(true);
      inputs = undefined;
      await t.app.imports.runOnce();
      const res = await t.request(url, fhirInit(token));
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      expect(body.error[0].outcome.issue[0].details.text).toContain(`GET http://127.0.0.1:${port}/p.ndjson failed`);
    });
  });
});
