import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { collectExports } from '../../src/export/gc.ts';
import { openSink } from '../../src/export/sink.ts';
import { silentLogger } from '../../src/log.ts';
import { createTestApp, testClock, fhirInit, type TestApp } from '../helpers/app.ts';
import { finish, kickOff, observation, patient, put, runExports, type Manifest } from '../helpers/export.ts';
import { craftToken } from '../helpers/fhir.ts';

let t: TestApp;
let clock: ReturnType<typeof testClock>;
let token: string;
beforeEach(async () => {
  t = await createTestApp({ clock: (clock = testClock()), env: { CINDER_EXPORT_FILE_TTL: '600' } });
  token = await t.token();
  await put(t, patient('p1'));
  for (let i = 0; i < 30; i++) await put(t, observation(`o${i}`, 'p1'));
});
afterEach(async () => t.close());

const exportsDir = () => join(t.dir, 'exports', 't1');
const gc = () => collectExports({ store: t.store, sink: openSink(t.config.exportStorage, {}), clock: t.clock, log: silentLogger, retentionMs: 3600_000 });

async function completed(): Promise<{ status: string; manifest: Manifest }> {
  const status = await kickOff(t, token, '/$export?_type=Patient,Observation');
  return { status, manifest: await finish(t, token, status) };
}

async function outcome(res: Response) {
  expect(res.headers.get('content-type')).toContain('application/fhir+json');
  return (await res.json()) as { resourceType: string; issue: { code: string; details: { text: string } }[] };
}

describe('status', () => {
  test('202 with X-Progress and Retry-After while the job runs', async () => {
    const status = await kickOff(t, token, '/$export');
    const res = await t.request(status, fhirInit(token));
    expect(res.status).toBe(202);
    expect(res.headers.get('x-progress')).toBe('queued');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  test('200 with the complete-status body and Expires when done', async () => {
    const status = await kickOff(t, token, '/$export?_type=Patient,Observation');
    await runExports(t);
    const res = await t.request(status, fhirInit(token));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(Date.parse(res.headers.get('expires')!)).toBe(t.clock.now() + 600_000 - (t.clock.now() % 1000));
    const m = (await res.json()) as Manifest;
    expect(m.transactionTime).toBe(new Date(t.clock.now()).toISOString());
    expect(m.requiresAccessToken).toBe(true);
    expect(m.output).toEqual([
      { type: 'Patient', url: expect.stringMatching(/^http:\/\/cinder\.test\/tenants\/t1\/fhir\/R4\/\$export-file\//), count: 1 },
      { type: 'Observation', url: expect.stringContaining('/Observation-1.ndjson'), count: 30 },
    ]);
    expect(m.error).toEqual([]);
    expect(m.deleted).toBeUndefined();
  });

  test('files split at the configured size, each with its count', async () => {
    await t.close();
    t = await createTestApp({ clock: (clock = testClock()), env: { CINDER_EXPORT_FILE_MAX_BYTES: '2048' } });
    token = await t.token();
    for (let i = 0; i < 50; i++) await put(t, observation(`o${i}`, 'p1'));
    const status = await kickOff(t, token, '/$export?_type=Observation');
    const m = await finish(t, token, status, { pageSize: 10 });
    expect(m.output.length).toBeGreaterThan(1);
    expect(m.output.reduce((n, o) => n + o.count, 0)).toBe(50);
    const ids = new Set<string>();
    for (const o of m.output) {
      const text = await (await t.request(o.url, fhirInit(token))).text();
      for (const line of text.trim().split('\n')) ids.add((JSON.parse(line) as { id: string }).id);
    }
    expect(ids.size).toBe(50);
  });

  test('a failed job answers 500 with an OperationOutcome saying what failed, not the cause (the log has it)', async () => {
    const status = await kickOff(t, token, '/$export?_type=Patient');
    const broken = openSink(t.config.exportStorage, {});
    broken.open = () => ({ write: async () => { throw new Error('disk on fire'); }, close: async () => undefined, abort: async () => undefined });
    const { runExports: run } = await import('../helpers/export.ts');
    expect(await run(t, { maxAttempts: 1 }, broken)).toEqual(['failed']);
    const res = await t.request(status, fhirInit(token));
    expect(res.status).toBe(500);
    const body = await outcome(res);
    expect(body.issue[0]!.details.text).toContain('The export failed on the server after 1 attempts');
    expect(body.issue[0]!.details.text).not.toContain('disk on fire');
  });

  test('an unknown job is a 404 OperationOutcome', async () => {
    const res = await t.request(t.fhir() + '/$export-status/nope', fhirInit(token));
    expect(res.status).toBe(404);
    expect((await outcome(res)).resourceType).toBe('OperationOutcome');
  });
});

describe('status polling', () => {
  async function pollingApp(env: Record<string, string>) {
    await t.close();
    t = await createTestApp({ clock: (clock = testClock()), env });
    token = await t.token();
  }

  test('a job polled more often than its limit a minute gets 429 with Retry-After until the minute ends; its other jobs are not held', async () => {
    await pollingApp({ CINDER_EXPORT_STATUS_RATE_LIMIT: '5' });
    const status = await kickOff(t, token, '/$export');
    const other = await kickOff(t, token, '/$export?_type=Patient');
    for (let i = 0; i < 5; i++) expect((await t.request(status, fhirInit(token))).status).toBe(202);
    const res = await t.request(status, fhirInit(token));
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('60');
    const body = await outcome(res);
    expect(body.issue[0]!.code).toBe('throttled');
    expect(body.issue[0]!.details.text).toContain('Too many status requests for this export');
    expect((await t.request(other, fhirInit(token))).status).toBe(202);
    clock.advance(45_000);
    const later = await t.request(status, fhirInit(token));
    expect([later.status, later.headers.get('retry-after')]).toEqual([429, '15']);
    clock.advance(15_000);
    expect((await t.request(status, fhirInit(token))).status).toBe(202);
  });

  test('by default a job may be polled 300 times a minute, ten times what its Retry-After of 2 s asks', async () => {
    const status = await kickOff(t, token, '/$export');
    for (let i = 0; i < 300; i++) {
      const res = await t.request(status, fhirInit(token));
      if (res.status !== 202) throw new Error(`poll ${i + 1}: ${res.status}`);
    }
    expect((await t.request(status, fhirInit(token))).status).toBe(429);
  });

  test('CINDER_RATE_LIMITS=off lifts it', async () => {
    await pollingApp({ CINDER_EXPORT_STATUS_RATE_LIMIT: '2', CINDER_RATE_LIMITS: 'off' });
    const status = await kickOff(t, token, '/$export');
    for (let i = 0; i < 10; i++) expect((await t.request(status, fhirInit(token))).status).toBe(202);
  });
});

describe('cancel', () => {
  test('DELETE of a running job: 202, then 404; kick-off then DELETE back-to-back never hits the limit', async () => {
    for (let i = 0; i < 5; i++) {
      const status = await kickOff(t, token, '/$export');
      const del = await t.request(status, fhirInit(token, 'DELETE'));
      expect(del.status).toBe(202);
      expect((await t.request(status, fhirInit(token))).status).toBe(404);
      expect((await t.request(status, fhirInit(token, 'DELETE'))).status).toBe(404);
    }
    expect(await runExports(t)).toEqual([]);
  });

  test('DELETE of a completed job removes its files', async () => {
    const { status, manifest } = await completed();
    const jobDir = join(exportsDir(), status.split('/').pop()!);
    expect(existsSync(jobDir)).toBe(true);
    expect((await t.request(status, fhirInit(token, 'DELETE'))).status).toBe(202);
    expect(existsSync(jobDir)).toBe(false);
    expect((await t.request(status, fhirInit(token))).status).toBe(404);
    expect((await t.request(manifest.output[0]!.url, fhirInit(token))).status).toBe(404);
  });

  test('a job cancelled while a worker runs it stops and its files go', async () => {
    const status = await kickOff(t, token, '/$export?_type=Observation');
    let cancelled = false;
    const outcomes = await runExports(t, {
      pageSize: 5, fileMaxBytes: 1024,
      onProgress: () => {
        if (cancelled) return;
        cancelled = true;
        void t.request(status, fhirInit(token, 'DELETE'));
      },
    });
    expect(outcomes).toEqual(['cancelled']);
    expect(existsSync(join(exportsDir(), status.split('/').pop()!))).toBe(false);
  });

  test('a client over its export limit gets 429 with Retry-After', async () => {
    await t.close();
    t = await createTestApp({ clock: (clock = testClock()), env: { CINDER_EXPORT_MAX_JOBS_PER_CLIENT: '1' } });
    token = await t.token();
    const first = await kickOff(t, token, '/$export');
    const res = await t.request(t.fhir() + '/$export', fhirInit(token));
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await outcome(res)).issue[0]!.code).toBe('throttled');
    const other = await t.tokenFor('t1', ['system/*.read']);
    expect((await t.request(t.fhir() + '/$export', fhirInit(other))).status).toBe(202);
    await t.request(first, fhirInit(token, 'DELETE'));
    expect((await t.request(t.fhir() + '/$export', fhirInit(token))).status).toBe(202);
  });

  test('a client starting more exports a minute than its limit, cancelled or refused ones included, gets 429 with Retry-After until the minute ends', async () => {
    await t.close();
    t = await createTestApp({ clock: (clock = testClock()), env: { CINDER_EXPORT_KICKOFF_RATE_LIMIT: '4' } });
    token = await t.token();
    for (let i = 0; i < 3; i++) await t.request(await kickOff(t, token, '/$export'), fhirInit(token, 'DELETE'));
    expect((await t.request(t.fhir() + '/$export?_type=Bogus', fhirInit(token))).status).toBe(400);
    const res = await t.request(t.fhir() + '/$export', fhirInit(token));
    expect([res.status, res.headers.get('retry-after')]).toEqual([429, '60']);
    const body = await outcome(res);
    expect(body.issue[0]!.code).toBe('throttled');
    expect(body.issue[0]!.details.text).toContain('This client started too many exports in the last minute');
    expect(await t.store.exports.jobs.activeCount('t1', t.admin.client.clientId)).toBe(0);
    // Another client has its own count; the next minute this one starts again.
    expect((await t.request(t.fhir() + '/$export', fhirInit(await t.tokenFor('t1', ['system/*.read'])))).status).toBe(202);
    clock.advance(60_000);
    expect((await t.request(t.fhir() + '/$export', fhirInit(await t.token()))).status).toBe(202);
  });

  test('a kick-off over the limit is refused before its parameters are looked at (429, not their 400 or 404)', async () => {
    await t.close();
    t = await createTestApp({ clock: (clock = testClock()), env: { CINDER_EXPORT_MAX_JOBS_PER_CLIENT: '1' } });
    token = await t.token();
    await kickOff(t, token, '/$export');
    for (const path of ['/$export?_type=Bogus', '/Group/no-such-group/$export', `/$export?_typeFilter=${encodeURIComponent('Observation?code:in=http://example.org/no-such-vs')}&_type=Observation`]) {
      const res = await t.request(t.fhir() + path, fhirInit(token));
      expect({ path, status: res.status }).toEqual({ path, status: 429 });
      expect((await outcome(res)).issue[0]!.code).toBe('throttled');
    }
  });
});

describe('who may see a job', () => {
  test('another client of the tenant gets 404 for status, cancel and files, and the job survives', async () => {
    const { status, manifest } = await completed();
    const other = await t.tokenFor('t1', ['system/*.*']);
    for (const [url, method] of [[status, 'GET'], [status, 'DELETE'], [manifest.output[0]!.url, 'GET']] as const) {
      const res = await t.request(url, fhirInit(other, method));
      expect(res.status).toBe(404);
      expect((await outcome(res)).issue[0]!.details.text).not.toContain('client');
    }
    expect((await t.request(status, fhirInit(token))).status).toBe(200);
  });

  test('a job belongs to its client and the patient in context: the same app for another patient, or for none, gets 404', async () => {
    // A user scope lifts the patient bound on Observation, so this patient-context token exports it.
    const mine = await craftToken(t, 'patient/*.rs user/Observation.rs', { patient: 'p1' });
    const status = await kickOff(t, mine, '/$export?_type=Observation');
    const manifest = await finish(t, mine, status);
    for (const other of [await craftToken(t, 'patient/*.rs user/Observation.rs', { patient: 'p2' }), await craftToken(t, 'user/Observation.rs')]) {
      for (const [url, method] of [[status, 'GET'], [status, 'DELETE'], [manifest.output[0]!.url, 'GET']] as const) {
        expect((await t.request(url, fhirInit(other, method))).status).toBe(404);
      }
    }
    expect((await t.request(manifest.output[0]!.url, fhirInit(mine))).status).toBe(200);
    // And a job of no patient is not the patient's.
    const system = await craftToken(t, 'user/Observation.rs');
    const theirs = await kickOff(t, system, '/$export?_type=Observation');
    await finish(t, system, theirs);
    expect((await t.request(theirs, fhirInit(mine))).status).toBe(404);
  });

  test("another tenant's token is refused at this tenant (403), and at its own tenant the job is unknown (404)", async () => {
    const { status, manifest } = await completed();
    const foreign = await t.tokenFor('t2', ['system/*.*']);
    expect((await t.request(status, fhirInit(foreign))).status).toBe(403);
    expect((await t.request(manifest.output[0]!.url, fhirInit(foreign))).status).toBe(403);
    const there = status.replace('/tenants/t1/', '/tenants/t2/');
    expect((await t.request(there, fhirInit(foreign))).status).toBe(404);
    expect((await t.request(manifest.output[0]!.url.replace('/tenants/t1/', '/tenants/t2/'), fhirInit(foreign))).status).toBe(404);
  });

  test('no token: 401', async () => {
    const { status, manifest } = await completed();
    expect((await t.request(status)).status).toBe(401);
    expect((await t.request(manifest.output[0]!.url)).status).toBe(401);
  });
});

describe('expiry', () => {
  test('after the file time-to-live status and files are 404 and the files are collected', async () => {
    const { status, manifest } = await completed();
    const jobDir = join(exportsDir(), status.split('/').pop()!);
    clock.advance(599_000);
    token = await t.token();
    expect((await gc()).purged).toBe(0);
    expect((await t.request(status, fhirInit(token))).status).toBe(200);
    clock.advance(1000);
    expect((await t.request(status, fhirInit(token))).status).toBe(404);
    expect((await t.request(manifest.output[0]!.url, fhirInit(token))).status).toBe(404);
    expect(await gc()).toEqual({ purged: 1, removed: 0 });
    expect(existsSync(jobDir)).toBe(false);
  });

  test('files are never collected while a download of them runs', async () => {
    const { status, manifest } = await completed();
    const jobDir = join(exportsDir(), status.split('/').pop()!);
    clock.advance(590_000);
    token = await t.token();
    const res = await t.request(manifest.output[1]!.url, fhirInit(token));
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    clock.advance(20_000);
    expect((await t.request(status, fhirInit(token))).status).toBe(404);
    expect((await gc()).purged).toBe(0);
    expect(readdirSync(jobDir).length).toBeGreaterThan(0);
    let text = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text.trim().split('\n')).toHaveLength(30);
    clock.advance(41_000);
    expect((await gc()).purged).toBe(1);
    expect(existsSync(jobDir)).toBe(false);
  });
});
