import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { createClient } from '../../src/auth/admin.ts';
import { disableClient, updateClient } from '../../src/auth/client-lifecycle.ts';
import { openSink } from '../../src/export/sink.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome } from '../helpers/fhir.ts';

type Json = Record<string, any>;

const line = (r: Json) => JSON.stringify(r) + '\n';
const pat = (id: string, extra: Json = {}) => ({ resourceType: 'Patient', id, ...extra });
const obs = (id: string) => ({ resourceType: 'Observation', id, status: 'final', code: { text: 'x' } });

const LATIN1_LINES = Buffer.concat([Buffer.from(line(pat('l1', { name: [{ family: 'K\u00f6ln' }] }))), Buffer.from(line(pat('l2', { name: [{ family: 'M\xfcller' }] })), 'latin1'), Buffer.from(line(pat('l3')))]);

/** A file server for the inputs, on a real port. `/slow` sends one line, then waits for `release()`. */
function inputServer() {
  let release!: () => void;
  let released = new Promise<void>((r) => (release = r));
  const files: Record<string, () => Response> = {
    '/patients.ndjson': () => new Response(line(pat('a1')) + line(pat('a2')) + line(pat('a3'))),
    '/mixed.ndjson': () => new Response(line(pat('m1')) + '{not json\n' + line(pat('m2', { gender: 'sometimes' })) + '\n' + line(pat('m3'))),
    // Line 2's id is not a FHIR id (a 400 naming `id`, not a validation's 422).
    '/bad-id.ndjson': () => new Response(line(pat('b1')) + line(pat('b_2!')) + line(pat('b3'))),
    // Line 2 in Latin-1 (M\xfcller: byte 0xFC), the others UTF-8; gzipped too.
    '/latin1.ndjson': () => new Response(LATIN1_LINES),
    '/latin1.ndjson.gz': () => new Response(gzipSync(LATIN1_LINES)),
    '/observations.ndjson': () => new Response(line(obs('o1')) + line(pat('stray')) + line(obs('o2'))),
    '/patients.ndjson.gz': () => new Response(gzipSync(line(pat('g1')) + line(pat('g2'))), { headers: { 'Content-Type': 'application/gzip' } }),
    '/moved': () => new Response(null, { status: 302, headers: { Location: '/patients.ndjson' } }),
    '/big.ndjson': () => new Response(Array.from({ length: 200 }, (_, i) => line(pat(`big${i}`, { name: [{ family: 'x'.repeat(40) }] }))).join('')),
    // No Content-Length (chunked), and a gzip file small on the wire: the limit holds for the bytes as read and decompressed.
    '/big-stream.ndjson': () => new Response(new ReadableStream({ pull: (c) => { c.enqueue(new TextEncoder().encode(line(pat('x', { name: [{ family: 'y'.repeat(500) }] })))); } })),
    '/big.ndjson.gz': () => new Response(gzipSync(line(pat('z', { name: [{ family: 'z'.repeat(8000) }] })))),
    '/bad.ndjson': () => new Response('{\n'.repeat(1005)),
    // A response breaking its Questionnaire (hidden-questionnaire below): an answer longer than maxLength, a wrong option, a required item left out.
    '/responses.ndjson': () => new Response(line({
      resourceType: 'QuestionnaireResponse', id: 'qr-bad', status: 'completed', questionnaire: 'http://example.org/Questionnaire/hidden',
      item: [{ linkId: 'secret-name', answer: [{ valueString: 'far too long for it' }] }, { linkId: 'secret-colour', answer: [{ valueCoding: { system: 'urn:colours', code: 'green' } }] }],
    })),
    // A Patient breaking the tenant's profile (hidden-profile below): its invariant and its cardinality.
    '/profiled.ndjson': () => new Response(line(pat('pr-bad', { meta: { profile: ['http://example.org/fhir/StructureDefinition/hidden-profile'] }, gender: 'male' }))),
    '/slow.ndjson': () => new Response(new ReadableStream({
      async start(c) {
        c.enqueue(new TextEncoder().encode(line(pat('s1'))));
        await released;
        c.enqueue(new TextEncoder().encode(line(pat('s2'))));
        c.close();
      },
    })),
  };
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: (req) => files[new URL(req.url).pathname]?.() ?? new Response('no such file', { status: 404 }) });
  return {
    url: (path: string) => `http://127.0.0.1:${server.port}${path}`,
    release: () => release(),
    rearm: () => void (released = new Promise<void>((r) => (release = r))),
    stop: () => server.stop(true),
  };
}

const params = (inputs: [string, string][], extra: Json[] = []) => ({
  resourceType: 'Parameters',
  parameter: [
    { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
    { name: 'inputSource', valueUri: 'https://source.example.org/fhir' },
    ...extra,
    ...inputs.map(([type, url]) => ({ name: 'input', part: [{ name: 'type', valueCode: type }, { name: 'url', valueUri: url }] })),
  ],
});

await eachStore((kind, fresh) => {
  describe(`$import (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const files = inputServer();
    const kick = (body: unknown, tok = token) => t.request(`${t.fhir()}/$import`, fhirInit(tok, 'POST', body));
    const accepted = async (body: unknown, tok = token) => {
      const res = await kick(body, tok);
      if (res.status !== 202) throw new Error(`kick-off: ${res.status} ${await res.text()}`);
      return res.headers.get('content-location')!;
    };
    const status = (url: string, tok = token) => t.request(url, fhirInit(tok));
    const done = async (url: string) => {
      await t.app.imports.runOnce();
      const res = await status(url);
      expect(res.status).toBe(200);
      return (await res.json()) as Json;
    };
    const read = (path: string) => t.request(`${t.fhir()}/${path}`, fhirInit(token));
    const jobId = (url: string) => url.slice(url.lastIndexOf('/') + 1);

    beforeAll(async () => {
      t = await createTestApp({
        store: await fresh(),
        // One client starts more imports than the kick-off rate limit's 30 a minute (import-user-owner.test.ts tries the limit).
        env: {
          CINDER_IMPORT_ALLOW_PRIVATE: 'true', CINDER_IMPORT_MAX_INPUT_BYTES: '4096', CINDER_EXPORT_LEASE_SECONDS: '2', CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true',
          CINDER_EXPORT_KICKOFF_RATE_LIMIT: '1000',
        },
      });
      token = await t.token();
    });
    afterAll(async () => {
      await t.app.imports.stop();
      files.stop();
      await t.close();
    });

    test('a kick-off answers 202 with the status URL; the status is 202 until the job ran, then lists what each input imported', async () => {
      const url = await accepted(params([['Patient', files.url('/patients.ndjson')], ['Patient', files.url('/patients.ndjson.gz')], ['Patient', files.url('/moved')]]));
      expect(url).toStartWith(`${t.fhir()}/$import-status/`);
      const waiting = await status(url);
      expect(waiting.status).toBe(202);
      expect(waiting.headers.get('x-progress')).toBe('queued');
      const body = await done(url);
      expect(body.request).toBe(`${t.fhir()}/$import`);
      expect(body.inputSource).toBe('https://source.example.org/fhir');
      expect(body.output).toEqual([
        { type: 'Patient', inputUrl: files.url('/patients.ndjson'), count: 3, unchanged: 0 },
        { type: 'Patient', inputUrl: files.url('/patients.ndjson.gz'), count: 2, unchanged: 0 },
        // The same file again through a redirect: stored already, no new versions.
        { type: 'Patient', inputUrl: files.url('/moved'), count: 3, unchanged: 3 },
      ]);
      expect(body.error).toEqual([]);
      for (const id of ['a1', 'a2', 'a3', 'g1', 'g2']) expect((await read(`Patient/${id}`)).status).toBe(200);
      expect(((await (await read('Patient/a1/_history')).json()) as Json).entry).toHaveLength(1);
    });

    test('bad lines are reported with their line numbers and the others are imported', async () => {
      const body = await done(await accepted(params([['Patient', files.url('/mixed.ndjson')]])));
      expect(body.output).toEqual([{ type: 'Patient', inputUrl: files.url('/mixed.ndjson'), count: 2, unchanged: 0 }]);
      expect(body.error).toHaveLength(1);
      const [entry] = body.error;
      expect(entry).toMatchObject({ type: 'OperationOutcome', inputUrl: files.url('/mixed.ndjson'), count: 2 });
      const issues = entry.outcome.issue as Json[];
      expect(issues.map((i) => i.location[0])).toEqual(['Line[2]', 'Line[3]']);
      expect(issues[1]).toMatchObject({ severity: 'error', expression: ['Patient.gender'] });
      expect((await read('Patient/m3')).status).toBe(200);
      expect((await read('Patient/m2')).status).toBe(404);
    });

    test("a line whose id is not a FHIR id is a failed line naming the element, as the REST API's 400 does; the others are imported", async () => {
      const body = await done(await accepted(params([['Patient', files.url('/bad-id.ndjson')]])));
      expect(body.output).toEqual([{ type: 'Patient', inputUrl: files.url('/bad-id.ndjson'), count: 2, unchanged: 0 }]);
      expect(body.error).toHaveLength(1);
      const issues = body.error[0].outcome.issue as Json[];
      expect(issues).toHaveLength(1);
      expect(issues[0]).toMatchObject({ severity: 'error', location: ['Line[2]'], expression: ['id'] });
      expect(issues[0].diagnostics).toStartWith('line 2: ');
      expect(issues[0].diagnostics).toContain('b_2!');
      for (const id of ['b1', 'b3']) expect((await read(`Patient/${id}`)).status).toBe(200);
    });

    test('a line that is not UTF-8 is a failed line at its Line[n], naming its offsets and element; the lines around it are imported (plain and gzip)', async () => {
      const body = await done(await accepted(params([['Patient', files.url('/latin1.ndjson')], ['Patient', files.url('/latin1.ndjson.gz')]])));
      expect(body.output.map((o: Json) => o.count)).toEqual([2, 2]);
      const inLine = Buffer.from(line(pat('l2', { name: [{ family: 'M\xfcller' }] })), 'latin1').indexOf(0xfc);
      const inFile = LATIN1_LINES.indexOf(0xfc);
      for (const entry of body.error as Json[]) {
        expect(entry.count).toBe(1);
        expect(entry.outcome.issue).toEqual([{
          severity: 'error', code: 'structure', location: ['Line[2]'], expression: ['Patient.name[0].family'],
          details: { text: `line 2: the line is not valid UTF-8: byte 0xFC at byte offset ${inLine} (counting from 0) of the line, byte offset ${inFile} of the input, in Patient.name[0].family: not read` },
          diagnostics: `line 2: the line is not valid UTF-8: byte 0xFC at byte offset ${inLine} (counting from 0) of the line, byte offset ${inFile} of the input, in Patient.name[0].family: not read`,
        }]);
      }
      expect(((await (await read('Patient/l1')).json()) as Json).name[0].family).toBe('K\u00f6ln');
      expect((await read('Patient/l3')).status).toBe(200);
      expect((await read('Patient/l2')).status).toBe(404);
    });

    test('an input lists its first 1,000 failures inline, counts the rest, and links the NDJSON file of every one', async () => {
      const url = await accepted(params([['Patient', files.url('/bad.ndjson')]]));
      const body = await done(url);
      expect(body.output[0].count).toBe(0);
      expect(body.error[0].count).toBe(1005);
      const issues = body.error[0].outcome.issue as Json[];
      expect(issues).toHaveLength(1001);
      expect(issues[999].location).toEqual(['Line[1000]']);
      expect(issues[1000]).toMatchObject({ severity: 'information', details: { text: '5 more failures are not listed: the error file (url) lists every failure' } });
      expect(body.error[0].url).toBe(`${url}/error-0.ndjson`);
      expect(body.requiresAccessToken).toBe(true);

      const file = await t.request(body.error[0].url, fhirInit(token));
      expect(file.status).toBe(200);
      expect(file.headers.get('content-type')).toBe('application/fhir+ndjson');
      const lines = (await file.text()).trimEnd().split('\n').map((l) => JSON.parse(l) as Json);
      expect(lines).toHaveLength(1005);
      expect(lines.every((o) => o.resourceType === 'OperationOutcome')).toBe(true);
      expect(lines[1004].issue[0]).toMatchObject({ severity: 'error', location: ['Line[1005]'] });
      expect(lines[0].issue[0]).toEqual(issues[0]);
      // As an export file: byte ranges.
      const head = await t.request(body.error[0].url, { ...fhirInit(token), headers: { ...fhirInit(token).headers, Range: 'bytes=0-9' } });
      expect(head.status).toBe(206);
      expect(await head.text()).toBe('{"resource');
      // Only the job's client sees it, and only inputs with failures have one.
      await expectOutcome(await t.request(body.error[0].url, fhirInit(await craftToken(t, 'system/*.*'))), 404, 'not-found');
      await expectOutcome(await t.request(`${url}/error-1.ndjson`, fhirInit(token)), 404, 'not-found');
    });

    test('lines failing validation mid-file, across transactions, are counted and listed; the lines around them are imported once each', async () => {
      const good = (n: number) => line({ resourceType: 'Patient', identifier: [{ system: 'urn:mid', value: `v${n}` }] });
      const text = [good(1), good(2), line({ resourceType: 'Patient', gender: 'sometimes' }), good(4), '{"resourceType":"Patient",\n', good(6), good(7),
        line({ resourceType: 'Patient', birthDate: 'yesterday' }), good(9), good(10)].join('');
      const mid = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(text) });
      try {
        const storage = { name: 'storageDetail', part: [{ name: 'type', valueCode: 'http' }, { name: 'maxBatchResourceCount', valueString: '2' }] };
        const body = await done(await accepted(params([['Patient', `http://127.0.0.1:${mid.port}/mid.ndjson`]], [storage])));
        expect(body.output[0]).toMatchObject({ count: 7, unchanged: 0 });
        expect(body.error[0].count).toBe(3);
        expect((body.error[0].outcome.issue as Json[]).map((i) => i.location[0])).toEqual(['Line[3]', 'Line[5]', 'Line[8]']);
        const file = (await (await t.request(body.error[0].url, fhirInit(token))).text()).trimEnd().split('\n').map((l) => JSON.parse(l) as Json);
        expect(file.map((o) => o.issue[0].location[0])).toEqual(['Line[3]', 'Line[5]', 'Line[8]']);
        const found = (await (await read('Patient?identifier=urn:mid|&_summary=count')).json()) as Json;
        expect(found.total).toBe(7);
      } finally {
        mid.stop(true);
      }
    });

    test('a resource of another type than its input is a failed line; the rest of the input is imported', async () => {
      const body = await done(await accepted(params([['Observation', files.url('/observations.ndjson')]])));
      expect(body.output[0]).toMatchObject({ type: 'Observation', count: 2 });
      const issues = body.error[0].outcome.issue as Json[];
      expect(issues).toHaveLength(1);
      expect(issues[0].location).toEqual(['Line[2]']);
      expect(issues[0].diagnostics).toContain("resourceType 'Patient' is not the type of this input (Observation)");
      expect((await read('Patient/stray')).status).toBe(404);
      expect((await read('Observation/o2')).status).toBe(200);
    });

    test('a line changing a stored AuditEvent is a failed line (the audit trail is append-only); new ones and equal ones are imported', async () => {
      const event = (extra: Json = {}) => ({
        resourceType: 'AuditEvent', type: { system: 'http://dicom.nema.org/resources/ontology/DCM', code: '110100' }, recorded: '2020-01-01T00:00:00Z',
        agent: [{ requestor: true, who: { display: 'someone' } }], source: { observer: { display: 'a system' } }, outcome: '0', ...extra,
      });
      const created = await t.request(`${t.fhir()}/AuditEvent`, fhirInit(token, 'POST', event()));
      expect(created.status).toBe(201);
      const id = ((await created.json()) as Json).id as string;
      // As the REST API refuses it.
      await expectOutcome(await t.request(`${t.fhir()}/AuditEvent/${id}`, fhirInit(token, 'PUT', event({ id, outcome: '8' }))), 405);
      const text = line(event({ id, outcome: '8' })) + line(event({ id: 'ae-new' })) + line(event({ id }));
      const source = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(text) });
      try {
        const body = await done(await accepted(params([['AuditEvent', `http://127.0.0.1:${source.port}/audit.ndjson`]])));
        expect(body.output[0]).toMatchObject({ count: 2, unchanged: 1 });
        expect(body.error[0].count).toBe(1);
        const issues = body.error[0].outcome.issue as Json[];
        expect(issues).toHaveLength(1);
        expect(issues[0]).toMatchObject({ severity: 'error', code: 'not-supported', location: ['Line[1]'], expression: ['AuditEvent.id'] });
        expect(issues[0].diagnostics).toBe(`line 1: AuditEvent/${id} is stored already, and an AuditEvent cannot be updated: the audit trail is append-only`);
        const stored = (await (await read(`AuditEvent/${id}`)).json()) as Json;
        expect([stored.meta.versionId, stored.outcome]).toEqual(['1', '0']);
        expect((await read('AuditEvent/ae-new')).status).toBe(200);
      } finally {
        source.stop(true);
      }
    });

    test("a Subscription written over by an import loses its owner: it notifies nothing, under the owner's authority or any", async () => {
      const got: string[] = [];
      let text = '';
      const hooks = Bun.serve({
        port: 0, hostname: '127.0.0.1',
        async fetch(req) {
          const path = new URL(req.url).pathname;
          if (path === '/subscriptions.ndjson') return new Response(text);
          got.push(`${path} ${await req.text()}`);
          return new Response(null);
        },
      });
      const at = (path: string) => `http://127.0.0.1:${hooks.port}${path}`;
      try {
        const owner = await t.tokenFor('t1', ['system/*.*']);
        // May write Subscriptions (and import them), but read no Patient.
        const importer = await t.tokenFor('t1', ['system/Subscription.cu']);
        const created = await t.request(`${t.fhir()}/Subscription`, fhirInit(owner, 'POST', {
          resourceType: 'Subscription', status: 'requested', reason: 'owned', criteria: 'Observation?code=http://loinc.org|1',
          channel: { type: 'rest-hook', endpoint: at('/owner'), payload: 'application/fhir+json' },
        }));
        expect(created.status).toBe(201);
        const { meta: _meta, ...stored } = (await created.json()) as Json;
        expect(stored.status).toBe('active');
        const importOf = async (resource: Json) => {
          text = line(resource);
          const url = await accepted(params([['Subscription', at('/subscriptions.ndjson')]]), importer);
          await t.app.imports.runOnce();
          const res = await status(url, importer);
          expect(res.status).toBe(200);
          return (await res.json()) as Json;
        };
        // The same content again writes nothing: it stays its owner's.
        expect((await importOf(stored)).output[0]).toMatchObject({ count: 1, unchanged: 1 });
        expect((await t.store.subscriptions.owners('t1')).has(stored.id)).toBe(true);
        // Other criteria and another endpoint: a new version, without the owner.
        const body = await importOf({ ...stored, criteria: 'Patient?', channel: { type: 'rest-hook', endpoint: at('/importer'), payload: 'application/fhir+json' } });
        expect(body.output[0]).toMatchObject({ count: 1, unchanged: 0 });
        expect((await t.store.subscriptions.owners('t1')).has(stored.id)).toBe(false);
        t.clock.advance(10_000);
        expect((await t.request(`${t.fhir()}/Patient/hidden`, fhirInit(owner, 'PUT', { resourceType: 'Patient', id: 'hidden', name: [{ family: 'Hidden' }] }))).status).toBe(201);
        for (let i = 0; i < 20 && (await t.app.subscriptions.runOnce()) > 0; i++);
        expect(got).toEqual([]);
        expect((await t.request(`${t.fhir()}/Patient/hidden`, fhirInit(importer))).status).toBe(403);
      } finally {
        hooks.stop(true);
      }
    });

    test('an unreachable, missing or oversized input is its error entry; the other inputs are imported', async () => {
      const body = await done(await accepted(params([
        ['Patient', 'http://127.0.0.1:1/nothing.ndjson'],
        ['Patient', files.url('/missing.ndjson')],
        ['Patient', files.url('/big.ndjson')],
        ['Patient', files.url('/big-stream.ndjson')],
        ['Patient', files.url('/big.ndjson.gz')],
        ['Patient', 'http://nowhere.invalid/p.ndjson'],
        ['Patient', files.url('/patients.ndjson')],
      ])));
      expect(body.output.map((o: Json) => o.count)).toEqual([0, 0, 0, 0, 0, 0, 3]);
      const text = (i: number) => body.error[i].outcome.issue[0].diagnostics as string;
      expect(body.error).toHaveLength(6);
      expect(text(0)).toContain('GET http://127.0.0.1:1/nothing.ndjson failed');
      expect(text(1)).toContain('answered 404');
      expect(text(2)).toContain('more than the 4096 an input may hold (CINDER_IMPORT_MAX_INPUT_BYTES)');
      expect(text(3)).toContain('big-stream.ndjson holds more than the 4096 bytes an input may hold');
      expect(text(4)).toContain('big.ndjson.gz holds more than the 4096 bytes an input may hold');
      // A name that does not resolve: no hint at CINDER_IMPORT_ALLOW_PRIVATE, which is on here and would not help.
      expect(text(5)).toBe('http://nowhere.invalid/p.ndjson is refused: its host nowhere.invalid does not resolve');
      expect(body.error.map((e: Json) => e.count)).toEqual([0, 0, 0, 0, 0, 0]);
      expect((await read('Patient/big0')).status).toBe(404);
    });

    test('DELETE cancels a queued job: nothing is imported and its status is gone', async () => {
      const url = await accepted(params([['Patient', files.url('/slow.ndjson')]]));
      const res = await t.request(url, fhirInit(token, 'DELETE'));
      expect(res.status).toBe(202);
      await expectOutcome(await status(url), 404);
      expect(await t.app.imports.runOnce()).toBe(0);
      expect((await read('Patient/s1')).status).toBe(404);
      await expectOutcome(await t.request(url, fhirInit(token, 'DELETE')), 404);
    });

    test('DELETE stops a running job (the serving loop), which stays cancelled', async () => {
      files.rearm();
      const url = await accepted(params([['Patient', files.url('/slow.ndjson')], ['Patient', files.url('/patients.ndjson')]]));
      t.app.imports.start();
      try {
        const id = jobId(url);
        for (let i = 0; i < 100 && (await t.store.imports.get('t1', id))?.state !== 'in-progress'; i++) await Bun.sleep(50);
        expect((await status(url)).headers.get('x-progress')).toStartWith('input 1 of 2 (Patient)');
        expect((await t.request(url, fhirInit(token, 'DELETE'))).status).toBe(202);
        files.release();
        for (let i = 0; i < 200 && t.app.imports.busy() > 0; i++) await Bun.sleep(50);
        expect(t.app.imports.busy()).toBe(0);
        expect((await t.store.imports.get('t1', id))!.state).toBe('cancelled');
        await expectOutcome(await status(url), 404);
      } finally {
        await t.app.imports.stop();
      }
    });

    test('the jobs of a client disabled (cinder client disable) are cancelled: a queued one never runs, a running one stops', async () => {
      const registered = await createClient(t.store, t.clock, { tenant: 't1', name: 'importer', scopes: ['system/*.*'] });
      const own = await t.token(undefined, registered.client.clientId, registered.clientSecret!);
      files.rearm();
      const running = jobId(await accepted(params([['Patient', files.url('/slow.ndjson')]]), own));
      t.app.imports.start();
      try {
        for (let i = 0; i < 100 && (await t.store.imports.get('t1', running))?.state !== 'in-progress'; i++) await Bun.sleep(50);
        expect((await t.store.imports.get('t1', running))!.state).toBe('in-progress');
        const queued = jobId(await accepted(params([['Patient', files.url('/patients.ndjson')]]), own));
        await disableClient(t.store, t.clock, registered.client.clientId);
        t.clock.advance(6_000); // past the client cache (5 s), as the token endpoint sees it
        for (let i = 0; i < 200 && t.app.imports.busy() > 0; i++) await Bun.sleep(50);
        expect((await t.store.imports.get('t1', running))!.state).toBe('cancelled');
        files.release();
        for (let i = 0; i < 200 && (await t.store.imports.get('t1', queued))?.state !== 'cancelled'; i++) await Bun.sleep(50);
        expect((await t.store.imports.get('t1', queued))!.attempts).toBeLessThanOrEqual(1);
        expect((await t.store.imports.get('t1', queued))!.state).toBe('cancelled');
      } finally {
        files.release();
        await t.app.imports.stop();
      }
    });

    test('a job handed back as its process stops is resumed by the next runner and imports everything', async () => {
      files.rearm();
      // Whether the cancelled job of the test before wrote s1 and s2 depends on when it saw its cancel.
      const stored = (await Promise.all(['s1', 's2'].map(async (p) => (await read(`Patient/${p}`)).status === 200))).filter(Boolean).length;
      const url = await accepted(params([['Patient', files.url('/slow.ndjson')]]));
      t.app.imports.start();
      const id = jobId(url);
      for (let i = 0; i < 100 && (await t.store.imports.get('t1', id))?.state !== 'in-progress'; i++) await Bun.sleep(50);
      const stopped = t.app.imports.stop();
      files.release();
      await stopped;
      expect((await t.store.imports.get('t1', id))!.state).toBe('accepted');
      const body = await done(url);
      // The input is read again from its first line: what was stored before is found unchanged, nothing twice.
      expect(body.output).toEqual([{ type: 'Patient', inputUrl: files.url('/slow.ndjson'), count: 2, unchanged: stored }]);
      expect(((await (await read('Patient/s1/_history')).json()) as Json).entry).toHaveLength(1);
    });

    test("a job whose process died is resumed once its lease runs out, from the first input it had not finished", async () => {
      const url = await accepted(params([['Patient', files.url('/patients.ndjson')], ['Patient', files.url('/patients.ndjson.gz')]]));
      const claimed = await t.store.imports.claim('dead-process', t.clock.now(), 2000);
      expect(claimed!.id).toBe(jobId(url));
      // The dead process had finished the first input.
      const first = { type: 'Patient', url: files.url('/patients.ndjson'), imported: 3, unchanged: 3, failed: 0, issues: [], omitted: 0 };
      expect(await t.store.imports.checkpoint(claimed!.id, 'dead-process', t.clock.now(), 2000, JSON.stringify({ done: [first] }))).toBe(true);
      expect(await t.app.imports.runOnce()).toBe(0);
      expect((await status(url)).status).toBe(202);
      // Its last renewal's lease is over (by the database's clock, which a lease is judged by).
      expect(await t.store.imports.checkpoint(claimed!.id, 'dead-process', t.clock.now(), -1)).toBe(true);
      // The dead process left the input it was reading in its spool directory (one of another host on a shared data
      // volume, which no start here removes); another job's download is not this job's to remove.
      const deadRunner = join(t.dir, 'import-spool', 'another.host-1-deadbeef');
      mkdirSync(deadRunner, { recursive: true });
      const left = join(deadRunner, `cinder-import-${claimed!.id}-deadbeef-1.ndjson`);
      const others = join(deadRunner, `cinder-import-${crypto.randomUUID()}-deadbeef-1.ndjson`);
      writeFileSync(left, line(pat('half')));
      writeFileSync(others, line(pat('other')));
      t.clock.advance(5000);
      const body = await done(url);
      expect(body.output.map((o: Json) => [o.inputUrl, o.count])).toEqual([[files.url('/patients.ndjson'), 3], [files.url('/patients.ndjson.gz'), 2]]);
      expect((await t.store.imports.get('t1', claimed!.id))!.attempts).toBe(2);
      expect([existsSync(left), existsSync(others)]).toEqual([false, true]);
      rmSync(others);
    });

    test('a job whose process ended while running it three times fails with the reason, not tried a fourth time; a stop hands the attempt back', async () => {
      const url = await accepted(params([['Patient', files.url('/patients.ndjson')]]));
      const id = jobId(url);
      for (let i = 0; i < 3; i++) {
        // Each claimer died at once: its lease (by the database's clock) is already over.
        expect((await t.store.imports.claim(`dead-${i}`, t.clock.now(), -1))!.id).toBe(id);
        t.clock.advance(5000);
      }
      expect(await t.app.imports.runOnce()).toBe(1);
      const job = (await t.store.imports.get('t1', id))!;
      expect([job.state, job.attempts]).toEqual(['failed', 4]);
      expect(job.error).toContain('ended 3 times');
      // Handed back as its process stops (a restart, not the job's fault): the attempt is not counted.
      files.rearm();
      const again = jobId(await accepted(params([['Patient', files.url('/slow.ndjson')]])));
      t.app.imports.start();
      for (let i = 0; i < 100 && (await t.store.imports.get('t1', again))?.state !== 'in-progress'; i++) await Bun.sleep(50);
      const stopped = t.app.imports.stop();
      files.release();
      await stopped;
      expect((await t.store.imports.get('t1', again))!).toMatchObject({ state: 'accepted', attempts: 0 });
      await t.app.imports.runOnce();
    });

    test('storageDetail.credentialHttpBasic goes as Basic authorization to the input origin only, is never in the status, and is wiped when the job ends', async () => {
      const credential = 'reader:pa:ss wörd';
      const expected = `Basic ${Buffer.from(credential, 'utf8').toString('base64')}`;
      const seen: Record<string, (string | null)[]> = {};
      const note = (req: Request) => (seen[new URL(req.url).pathname] ??= []).push(req.headers.get('authorization'));
      // Another origin (another port): what a redirect there must reach without the credential.
      const other = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: (req) => (note(req), new Response(line(pat('cred-other')))) });
      const locked = Bun.serve({
        port: 0, hostname: '127.0.0.1',
        fetch(req) {
          note(req);
          const path = new URL(req.url).pathname;
          if (path === '/to-other') return new Response(null, { status: 302, headers: { Location: `http://127.0.0.1:${other.port}/open.ndjson` } });
          if (req.headers.get('authorization') !== expected) return new Response('who are you', { status: 401, headers: { 'WWW-Authenticate': 'Basic realm="files"' } });
          if (path === '/moved') return new Response(null, { status: 302, headers: { Location: '/patients.ndjson' } });
          return new Response(line(pat('cred-1')) + line(pat('cred-2')));
        },
      });
      const at = (server: { port?: number }, path: string) => `http://127.0.0.1:${server.port}${path}`;
      const storage = (value: string) => ({ name: 'storageDetail', part: [{ name: 'type', valueCode: 'http' }, { name: 'credentialHttpBasic', valueString: value }] });
      try {
        const url = await accepted(params([['Patient', at(locked, '/patients.ndjson')], ['Patient', at(locked, '/moved')], ['Patient', at(locked, '/to-other')]], [storage(credential)]));
        // Kept for the process that runs the job (another one, after a restart), not in its spec or progress.
        const queued = (await t.store.imports.get('t1', jobId(url)))!;
        expect(queued.credential).toBe(credential);
        expect(queued.spec + queued.progress).not.toContain('pa:ss');
        const body = await done(url);
        expect(body.output.map((o: Json) => o.count)).toEqual([2, 2, 1]);
        expect(body.error).toEqual([]);
        expect(seen['/patients.ndjson']).toEqual([expected, expected]);
        expect(seen['/moved']).toEqual([expected]);
        expect(seen['/to-other']).toEqual([expected]);
        expect(seen['/open.ndjson']).toEqual([null]);
        const text = JSON.stringify(body);
        for (const secret of ['pa:ss', expected.slice('Basic '.length)]) expect(text).not.toContain(secret);
        expect((await t.store.imports.get('t1', jobId(url)))!.credential).toBeNull();

        // Without it (or with a wrong one) the input is refused: its error entry says so, and names no credential.
        const without = await done(await accepted(params([['Patient', at(locked, '/patients.ndjson')]])));
        expect(without.error[0].outcome.issue[0].details.text).toBe(`GET ${at(locked, '/patients.ndjson')} answered 401 Unauthorized`);
        const wrong = await done(await accepted(params([['Patient', at(locked, '/patients.ndjson')]], [storage('reader:nope')])));
        expect(wrong.output[0].count).toBe(0);
        expect(JSON.stringify(wrong)).not.toContain('nope');

        // A cancelled job's credential is wiped at once.
        const cancelled = await accepted(params([['Patient', at(locked, '/patients.ndjson')]], [storage(credential)]));
        expect((await t.request(cancelled, fhirInit(token, 'DELETE'))).status).toBe(202);
        expect((await t.store.imports.get('t1', jobId(cancelled)))!.credential).toBeNull();

        // A malformed one is a 400 naming the parameter and never repeating the value.
        for (const bad of ['no-colon', ':no-user', 'line\nbreak:x']) {
          const outcome = await expectOutcome(await kick(params([['Patient', at(locked, '/p.ndjson')]], [storage(bad)])), 400, 'invalid');
          expect(outcome.issue[0].expression).toEqual(['storageDetail.credentialHttpBasic']);
          expect(JSON.stringify(outcome)).not.toContain(bad.slice(0, 5));
        }
      } finally {
        locked.stop(true);
        other.stop(true);
      }
    });

    test('the token must create and update every type it imports, without a patient in context', async () => {
      const body = params([['Patient', files.url('/patients.ndjson')], ['Observation', files.url('/observations.ndjson')]]);
      for (const scopes of [['system/Patient.cu', 'system/Observation.r'], ['system/*.c'], ['system/*.read']]) {
        await expectOutcome(await kick(body, await t.tokenFor('t1', scopes)), 403, 'forbidden');
      }
      await expectOutcome(await kick(body, await craftToken(t, 'system/*.*', { patient: 'a1' })), 403, 'forbidden');
      const url = await accepted(body, await t.tokenFor('t1', ['system/Patient.cu', 'system/Observation.cu']));
      // Another client sees no such job.
      await expectOutcome(await status(url, await t.tokenFor('t1', ['system/*.*'])), 404);
      await t.app.imports.runOnce();
    });

    test('a client has at most CINDER_IMPORT_MAX_JOBS_PER_CLIENT waiting or running imports (429 beyond); storageDetail may set the batch size', async () => {
      const storage = { name: 'storageDetail', part: [{ name: 'type', valueCode: 'https' }, { name: 'maxBatchResourceCount', valueString: '1' }] };
      const body = params([['Patient', files.url('/patients.ndjson')]], [storage]);
      const urls = [await accepted(body), await accepted(body), await accepted(body)];
      const refused = await kick(body);
      await expectOutcome(refused, 429, 'throttled');
      expect(refused.headers.get('retry-after')).toBe('30');
      expect((await t.request(urls[0]!, fhirInit(token, 'DELETE'))).status).toBe(202);
      const fourth = await accepted(body);
      await t.app.imports.runOnce();
      for (const url of [urls[1]!, urls[2]!, fourth]) expect((await status(url)).status).toBe(200);
      // A token of the job's client that no longer may write what the job imports is refused its status.
      await expectOutcome(await status(fourth, await t.token('system/*.read')), 403, 'forbidden');
      await expectOutcome(await t.request(fourth, fhirInit(await t.token('system/*.read'), 'DELETE')), 403, 'forbidden');
    });

    test("a client's scopes narrowed while its job runs (cinder client update --scope): the job stops writing the types it lost, saying so per input, and imports the rest", async () => {
      const registered = await createClient(t.store, t.clock, { tenant: 't1', name: 'narrowed importer', scopes: ['system/*.*'] });
      const own = await t.token(undefined, registered.client.clientId, registered.clientSecret!);
      const inputs: [string, string][] = [['Patient', files.url('/slow.ndjson')], ['Observation', files.url('/observations.ndjson')], ['Patient', files.url('/big.ndjson')]];
      files.rearm();
      const url = await accepted(params(inputs), own);
      const id = jobId(url);
      t.app.imports.start();
      try {
        for (let i = 0; i < 100 && (await t.store.imports.get('t1', id))?.state !== 'in-progress'; i++) await Bun.sleep(50);
        expect((await t.store.imports.get('t1', id))!.state).toBe('in-progress');
        await updateClient(t.store, t.clock, registered.client.clientId, { scopes: ['system/Observation.cruds'] });
        t.clock.advance(6_000); // past the client cache (5 s), as the token endpoint sees it
        for (let i = 0; i < 200 && (await t.store.imports.get('t1', id))?.state === 'in-progress'; i++) await Bun.sleep(50);
      } finally {
        files.release();
        await t.app.imports.stop();
      }
      expect((await t.store.imports.get('t1', id))!.state).toBe('completed');
      // A token of the narrowed client sees the status: the Patient inputs are stopped, the Observations imported.
      // (Issued after the narrowing, which PostgreSQL times by its own clock: this test's clock moved past it, and back.)
      const was = t.clock.now();
      t.clock.set(Math.max(was, Date.now()) + 6_000);
      const res = await status(url, await t.token(undefined, registered.client.clientId, registered.clientSecret!));
      t.clock.set(was + 6_000);
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      expect(body.output).toEqual([
        { type: 'Patient', inputUrl: files.url('/slow.ndjson'), count: 0, unchanged: 0 },
        { type: 'Observation', inputUrl: files.url('/observations.ndjson'), count: 2, unchanged: expect.any(Number) },
        { type: 'Patient', inputUrl: files.url('/big.ndjson'), count: 0, unchanged: 0 },
      ]);
      const refusal = (index: number, text: string) => ({
        type: 'OperationOutcome', inputUrl: inputs[index]![1], count: 0,
        outcome: { resourceType: 'OperationOutcome', issue: [expect.objectContaining({ severity: 'error', code: 'forbidden', expression: [`input[${index}].type`], details: { text: expect.stringContaining(text) } })] },
      });
      expect(body.error).toEqual([
        refusal(0, 'no longer allow it to create and update Patient (narrowed while the import ran): the input was stopped after 0 resources'),
        expect.objectContaining({ inputUrl: files.url('/observations.ndjson'), count: 1 }),
        refusal(2, 'no longer allow it to create and update Patient (narrowed after the import was requested): the input was not imported'),
      ]);
      expect((await read('Patient/big0')).status).toBe(404);
    });

    test("a client that may not read Questionnaires imports a response: its errors tell nothing of the Questionnaire, as a REST write's would not", async () => {
      const hidden = {
        resourceType: 'Questionnaire', url: 'http://example.org/Questionnaire/hidden', status: 'active',
        item: [
          { linkId: 'secret-name', type: 'string', maxLength: 5 },
          { linkId: 'secret-colour', type: 'choice', answerOption: [{ valueCoding: { system: 'urn:colours', code: 'mauve-secret' } }] },
          { linkId: 'secret-required', type: 'boolean', required: true },
        ],
      };
      expect((await t.request(`${t.fhir()}/Questionnaire`, fhirInit(token, 'POST', hidden))).status).toBe(201);
      const input: [string, string][] = [['QuestionnaireResponse', files.url('/responses.ndjson')]];
      const blind = await createClient(t.store, t.clock, { tenant: 't1', name: 'blind importer', scopes: ['system/QuestionnaireResponse.cruds'] });
      const blindToken = await t.token(undefined, blind.client.clientId, blind.clientSecret!);
      const outcomeOf = async (tok: string) => {
        const url = await accepted(params(input), tok);
        await t.app.imports.runOnce();
        const res = await status(url, tok);
        expect(res.status).toBe(200);
        const body = (await res.json()) as Json;
        expect(body.output).toEqual([{ type: 'QuestionnaireResponse', inputUrl: input[0]![1], count: 0, unchanged: 0 }]);
        expect(body.error).toHaveLength(1);
        const file = await (await t.request(body.error[0].url, fhirInit(tok))).text();
        return { inline: JSON.stringify(body.error[0].outcome), file };
      };
      const withheld = await outcomeOf(blindToken);
      // Still refused, with the one error a REST write by this client gets; no linkId, option, limit or count.
      expect(withheld.inline).toContain('the access token may not read Questionnaires');
      for (const told of [withheld.inline, withheld.file]) {
        for (const secret of ['secret-name', 'secret-colour', 'secret-required', 'mauve-secret', 'maxLength', 'answerOption']) expect(told).not.toContain(secret);
      }
      expect((await read('QuestionnaireResponse/qr-bad')).status).toBe(404);
      // A client that reads Questionnaires is told the problems.
      const reader = await createClient(t.store, t.clock, { tenant: 't1', name: 'reading importer', scopes: ['system/QuestionnaireResponse.cruds', 'system/Questionnaire.rs'] });
      const told = await outcomeOf(await t.token(undefined, reader.client.clientId, reader.clientSecret!));
      expect(told.inline).toContain('secret-name');
    });

    test('a client that may not read StructureDefinitions imports a resource claiming a tenant profile: its errors tell nothing of the profile', async () => {
      const url = 'http://example.org/fhir/StructureDefinition/hidden-profile';
      const el = (path: string, min: number, extra: Json = {}) => ({ id: path, path, short: path, definition: path, min, max: '*', base: { path, min: 0, max: '*' }, ...extra });
      const hidden = {
        resourceType: 'StructureDefinition', url, name: 'HiddenProfile', status: 'active', kind: 'resource', abstract: false, type: 'Patient',
        baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint', fhirVersion: '4.0.1',
        snapshot: { element: [el('Patient', 0, { constraint: [{ key: 'hid-1', severity: 'error', human: 'secret-rule-text', expression: "gender = 'other'" }] }), el('Patient.name', 3)] },
      };
      expect((await t.request(`${t.fhir()}/StructureDefinition`, fhirInit(token, 'POST', hidden))).status).toBe(201);
      const input: [string, string][] = [['Patient', files.url('/profiled.ndjson')]];
      const outcomeOf = async (scopes: string[]) => {
        const client = await createClient(t.store, t.clock, { tenant: 't1', name: 'profiled importer', scopes });
        const tok = await t.token(undefined, client.client.clientId, client.clientSecret!);
        const statusUrl = await accepted(params(input), tok);
        await t.app.imports.runOnce();
        const body = (await (await status(statusUrl, tok)).json()) as Json;
        expect(body.output).toEqual([{ type: 'Patient', inputUrl: input[0]![1], count: 0, unchanged: 0 }]);
        const file = await (await t.request(body.error[0].url, fhirInit(tok))).text();
        return JSON.stringify(body.error[0].outcome) + file;
      };
      const withheld = await outcomeOf(['system/Patient.cruds']);
      expect(withheld).toContain('the access token may not read StructureDefinitions');
      for (const secret of ['secret-rule-text', 'hid-1', 'at least 3', 'Patient.name']) expect({ secret, told: withheld.includes(secret) }).toEqual({ secret, told: false });
      expect((await read('Patient/pr-bad')).status).toBe(404);
      const told = await outcomeOf(['system/Patient.cruds', 'system/StructureDefinition.rs']);
      expect(told).toContain('secret-rule-text');
    });

    test('a malformed request is a 400 naming the parameter', async () => {
      const expression = async (body: unknown) => ((await expectOutcome(await kick(body), 400)).issue[0].expression as string[])[0];
      expect(await expression({ resourceType: 'Parameters', parameter: [] })).toBe('input');
      expect(await expression(params([['Patient', files.url('/p.ndjson')]], [{ name: 'inputFormat', valueCode: 'text/csv' }]))).toBe('inputFormat');
      // NDJSON is UTF-8: a format naming another charset is refused naming it; UTF-8 or ASCII named is read.
      const latin1 = await expectOutcome(await kick(params([['Patient', files.url('/p.ndjson')]], [{ name: 'inputFormat', valueCode: 'application/fhir+ndjson; charset=ISO-8859-1' }])), 400);
      expect(latin1.issue[0]).toMatchObject({
        code: 'not-supported', expression: ['inputFormat'],
        diagnostics: "inputFormat 'application/fhir+ndjson; charset=ISO-8859-1' declares charset ISO-8859-1: inputs are read in UTF-8 only (FHIR NDJSON is UTF-8); send them in UTF-8, with charset=utf-8 or no charset",
      });
      for (const charset of ['utf-8', 'UTF8', 'us-ascii']) {
        const res = await kick(params([['Patient', files.url('/p.ndjson')]], [{ name: 'inputFormat', valueCode: `application/fhir+ndjson;charset=${charset}` }]));
        expect(res.status).toBe(202);
        // Cancelled at once: a client has few imports waiting (CINDER_IMPORT_MAX_JOBS_PER_CLIENT).
        expect((await t.request(res.headers.get('content-location')!, { method: 'DELETE', headers: { Authorization: `Bearer ${token}` } })).status).toBe(202);
      }
      expect(await expression(params([['Nonsense', files.url('/p.ndjson')]]))).toBe('input[0].type');
      expect(await expression(params([['Patient', 'ftp://example.org/p.ndjson']]))).toBe('input[0].url');
      expect(await expression(params([['Patient', 'https://u:p@example.org/p.ndjson']]))).toBe('input[0].url');
      const credentials = { name: 'storageDetail', part: [{ name: 'type', valueCode: 'https' }, { name: 'credentialHttpBasic', valueString: 'ab' }] };
      expect(await expression(params([['Patient', files.url('/p.ndjson')]], [credentials]))).toBe('storageDetail.credentialHttpBasic');
      expect(await expression(params([['Patient', files.url('/p.ndjson')]], [{ name: 'storageDetail', part: [{ name: 'bearerToken', valueString: 'x' }] }]))).toBe('storageDetail.bearerToken');
      expect(await expression({ resourceType: 'Patient' })).toBe('Parameters');
    });

    // Last: it moves the clock past the results' retention.
    test('a job removed after its retention takes its error files with it', async () => {
      const id = jobId(await accepted(params([['Patient', files.url('/mixed.ndjson')]])));
      await t.app.imports.runOnce();
      const key = (JSON.parse((await t.store.imports.get('t1', id))!.progress) as Json).done[0].errors.key as string;
      const sink = openSink(t.config.exportStorage, {}, t.store);
      expect(await sink.size(key)).toBeGreaterThan(0);
      t.clock.advance(8 * 24 * 3600 * 1000);
      t.app.imports.start();
      try {
        for (let i = 0; i < 100 && (await t.store.imports.get('t1', id)) !== null; i++) await Bun.sleep(50);
      } finally {
        await t.app.imports.stop();
      }
      expect(await t.store.imports.get('t1', id)).toBeNull();
      expect(await sink.size(key)).toBeNull();
    });
  });
});

test('the CapabilityStatement lists $import at the system level', async () => {
  const t = await createTestApp();
  try {
    const cs = (await (await t.request(`${t.fhir()}/metadata`)).json()) as Json;
    expect(cs.rest[0].operation).toContainEqual({ name: 'import', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/import' });
  } finally {
    await t.close();
  }
});

await eachStore((kind, fresh) => describe(`$import input addresses (${kind})`, () => {
  let t: TestApp;
  /** Names rebound by a hostile DNS server: the answers in turn, the last one ever after. */
  const rebinding = new Map<string, string[]>();
  /** How many times each name was resolved. */
  const lookups = new Map<string, number>();
  /** What the app fetched (with the Host header when the URL holds an address). */
  const sent: string[] = [];
  beforeAll(async () => {
    const resolveHost = async (host: string) => {
      lookups.set(host, (lookups.get(host) ?? 0) + 1);
      const answers = rebinding.get(host);
      if (answers) return [answers.length > 1 ? answers.shift()! : answers[0]!];
      if (host.endsWith('.invalid')) throw new Error(`getaddrinfo ENOTFOUND ${host}`);
      return host === 'inside.example' ? ['10.1.2.3'] : ['93.184.215.14'];
    };
    const fetch = async (input: string | URL | Request, init?: RequestInit) => {
      const host = new Headers(init?.headers).get('host');
      sent.push(host === null ? String(input) : `${String(input)} (Host: ${host})`);
      if (new URL(String(input)).pathname === '/moved') return new Response(null, { status: 302, headers: { Location: 'http://next.example/p.ndjson' } });
      return new Response(line(pat('fetched')), { status: 200 });
    };
    t = await createTestApp({ store: await fresh(), resolveHost, fetch: fetch as typeof globalThis.fetch });
  });
  afterAll(() => t.close());
  /** Kicks off an import of `url` (a 202), runs the job, and answers its status: counts and errors. */
  const imported = async (url: string) => {
    const token = await t.token();
    const res = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', params([['Patient', url]])));
    expect(res.status).toBe(202);
    await t.app.imports.runOnce();
    const body = (await (await t.request(res.headers.get('content-location')!, fhirInit(token))).json()) as Json;
    return { counts: body.output.map((o: Json) => o.count) as number[], errors: body.error.map((e: Json) => e.outcome.issue[0].diagnostics) as string[] };
  };

  test('an input on a loopback or private address is refused unless CINDER_IMPORT_ALLOW_PRIVATE=true', async () => {
    const token = await t.token();
    for (const url of ['http://127.0.0.1:8080/p.ndjson', 'http://localhost/p.ndjson', 'https://inside.example/p.ndjson']) {
      const body = await expectOutcome(await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', params([['Patient', url]]))), 400);
      expect(body.issue[0].expression).toEqual(['input[0].url']);
      expect(body.issue[0].diagnostics).toContain('CINDER_IMPORT_ALLOW_PRIVATE=true');
    }
    expect(await t.store.imports.countByState()).toEqual({});
  });

  test('an input is fetched from the address checked, naming its host', async () => {
    expect(await imported('https://files.example:8443/p.ndjson')).toEqual({ counts: [1], errors: [] });
    expect(sent).toEqual(['https://93.184.215.14:8443/p.ndjson (Host: files.example:8443)']);
    sent.length = 0;
  });

  test('an input whose name is rebound to loopback after the job resolved it (DNS rebinding) is fetched from the address checked, never the rebound one', async () => {
    // Public to the kick-off's lookup and to the job's, 127.0.0.1 to every lookup after (a connection's own, were there one).
    rebinding.set('rebind.example', ['93.184.215.14', '93.184.215.14', '127.0.0.1']);
    expect(await imported('http://rebind.example/p.ndjson')).toEqual({ counts: [1], errors: [] });
    expect(sent).toEqual(['http://93.184.215.14/p.ndjson (Host: rebind.example)']);
    sent.length = 0;
    // Public to the next kick-off, loopback to its job's lookup: refused there, never fetched inside.
    rebinding.set('rebind.example', ['93.184.215.14', '127.0.0.1']);
    expect(await imported('http://rebind.example/p.ndjson')).toEqual({ counts: [0], errors: [
      'http://rebind.example/p.ndjson is refused: its host rebind.example resolves to 127.0.0.1, which is a loopback, link-local or private address (CINDER_IMPORT_ALLOW_PRIVATE=true allows it)',
    ] });
    expect(sent).toEqual([]);
  });

  test('an input whose name does not resolve is accepted, then its error says so, naming no setting (none would help)', async () => {
    expect(await imported('http://nowhere.invalid/p.ndjson')).toEqual({ counts: [0], errors: [
      'http://nowhere.invalid/p.ndjson is refused: its host nowhere.invalid does not resolve',
    ] });
    expect(sent).toEqual([]);
  });

  test('each fetch and each redirect hop resolves its host once', async () => {
    lookups.clear();
    expect(await imported('http://hop.example/moved')).toEqual({ counts: [1], errors: [] });
    // The kick-off's lookup, then one per request of the job.
    expect(Object.fromEntries(lookups)).toEqual({ 'hop.example': 2, 'next.example': 1 });
    expect(sent).toEqual(['http://93.184.215.14/moved (Host: hop.example)', 'http://93.184.215.14/p.ndjson (Host: next.example)']);
    sent.length = 0;
  });
}));
