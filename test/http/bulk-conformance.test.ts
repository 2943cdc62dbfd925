/**
 * The checks of the two public Bulk Data test suites, reproduced through `app.request()` on both
 * databases: the SMART Bulk Data Tester (smart-on-fhir/bdt, `src/testSuite/*.test.ts`: kick-off at each
 * level, status, download, authorization, metadata) and Inferno's bulk-data-test-kit (its STU1 and 2.0.0
 * export groups). Each test names the suite and check it reproduces. Where a check asks for something
 * the contract (interface.md) or Bulk Data 2.0.0 says otherwise, the test asserts the contract or the
 * IG and says so; ARCHITECTURE.md ("Bulk Data test suites") lists those cases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { observation, patient, put, remove, runExports, type Manifest } from '../helpers/export.ts';
import { storeTargets } from '../helpers/stores.ts';

type Level = 'system' | 'patient' | 'group';
const LEVELS: Level[] = ['system', 'patient', 'group'];
const PATH: Record<Level, string> = { system: '/$export', patient: '/Patient/$export', group: '/Group/g1/$export' };
type Json = Record<string, unknown>;

/** A FHIR instant, as both suites match it (bdt assertions.ts REGEXP_INSTANT, Inferno's fhir_instant_regex). */
const INSTANT = /^([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)-(0[1-9]|1[0-2])-(0[1-9]|[1-2][0-9]|3[0-1])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00))$/;
const SUBSETTED = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED' };

/** Kick-off parameters as bdt's BulkDataClient.kickOff takes them. */
interface Params {
  _since?: string;
  _outputFormat?: string;
  patient?: string | string[];
  _type?: string | string[];
  _elements?: string | string[];
  includeAssociatedData?: string | string[];
  _typeFilter?: string | string[];
}

interface KickOptions {
  method?: 'GET' | 'POST';
  params?: Params;
  /** A POST body given whole (bdt's `json`). */
  json?: Json;
  /** Headers over bdt's defaults (`accept: application/fhir+json`, `prefer: respond-async`); null removes one. */
  headers?: Record<string, string | null>;
  /** The bearer token; null sends none. */
  token?: string | null;
}

const asArray = <T>(x: T | T[]): T[] => (Array.isArray(x) ? x : [x]);

/**
 * The Parameters body bdt builds for a POST kick-off: `_since` as valueInstant, `patient` as
 * valueReference, every other parameter as one valueString per value.
 */
function parametersOf(params: Params): Json {
  const parameter: Json[] = [];
  for (const [name, value] of Object.entries(params) as [keyof Params, string | string[]][]) {
    if (name === '_since') parameter.push({ name, valueInstant: value });
    else if (name === 'patient') parameter.push(...asArray(value).map((id) => ({ name, valueReference: { reference: `Patient/${id}` } })));
    else parameter.push(...asArray(value).map((v) => ({ name, valueString: v })));
  }
  return { resourceType: 'Parameters', parameter };
}

let t: TestApp;
let token: string;

async function kick(level: Level, o: KickOptions = {}): Promise<Response> {
  const method = o.method ?? 'GET';
  const url = new URL(t.fhir() + PATH[level]);
  let body: string | undefined;
  if (method === 'POST') body = JSON.stringify(o.json ?? parametersOf(o.params ?? {}));
  else for (const [name, value] of Object.entries(o.params ?? {})) for (const v of asArray(value as string | string[])) url.searchParams.append(name, v);
  const headers: Record<string, string> = {};
  const given = { accept: 'application/fhir+json', prefer: 'respond-async', ...o.headers };
  for (const [name, value] of Object.entries(given)) if (value !== null) headers[name] = value;
  const bearer = o.token === undefined ? token : o.token;
  if (bearer !== null) headers.authorization = `Bearer ${bearer}`;
  // got's `json` option, which bdt uses for POST bodies, sends application/json.
  if (body !== undefined) headers['content-type'] = 'application/json';
  return t.request(url.toString(), { method, headers, ...(body !== undefined && { body }) });
}

const del = (statusUrl: string, headers: Record<string, string> = {}) => t.request(statusUrl, { method: 'DELETE', headers: { authorization: `Bearer ${token}`, ...headers } });

/** bdt's cancelIfStarted: a DELETE of the status URL of a kick-off that answered 202. */
async function cancelIfStarted(res: Response): Promise<void> {
  const location = res.headers.get('content-location');
  if (res.status === 202 && location) expect((await del(location)).status).toBe(202);
}

/** bdt's expectSuccessfulKickOff: 202, a Content-Location, and a body (when there is one) that is an OperationOutcome. */
async function expectStarted(res: Response): Promise<string> {
  const text = await res.text();
  expect({ status: res.status, text }).toMatchObject({ status: 202 });
  const location = res.headers.get('content-location');
  expect(location).toMatch(/^https?:\/\//);
  if (text) expect((JSON.parse(text) as Json).resourceType).toBe('OperationOutcome');
  return location!;
}

/** bdt's expectFailedKickOff: a 4xx (not 404 or 405, which bdt reads as "not supported") with an OperationOutcome in JSON. */
async function expectRefused(res: Response, mentions?: string): Promise<Json> {
  await cancelIfStarted(res.clone());
  expect(res.status).toBeGreaterThanOrEqual(400);
  expect(res.status).toBeLessThan(500);
  expect([404, 405]).not.toContain(res.status);
  expect(res.headers.get('content-type')?.split(';')[0]).toBe('application/fhir+json');
  const body = (await res.json()) as Json;
  expect(body.resourceType).toBe('OperationOutcome');
  if (mentions) expect(JSON.stringify(body)).toContain(mentions);
  return body;
}

/** Runs the export and polls as Inferno does (Accept: application/json): the complete-status response. */
async function complete(statusUrl: string): Promise<Response> {
  await runExports(t);
  return t.request(statusUrl, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
}

async function manifestOf(statusUrl: string): Promise<Manifest> {
  const res = await complete(statusUrl);
  expect(res.status).toBe(200);
  return (await res.json()) as Manifest;
}

/** Downloads a file as bdt and Inferno do (`Accept: application/fhir+ndjson`); every line parsed. */
async function fileLines(url: string, bearer: string | null = token): Promise<{ res: Response; lines: Json[] }> {
  const headers: Record<string, string> = { accept: 'application/fhir+ndjson' };
  if (bearer !== null) headers.authorization = `Bearer ${bearer}`;
  const res = await t.request(url, { headers });
  const text = res.status === 200 ? await res.text() : '';
  const lines = text.split(/\r?\n/).filter((l) => l.trim()).map((l) => JSON.parse(l) as Json);
  return { res, lines };
}

const NOW = Date.parse('2026-01-15T10:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, '+00:00');

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((target) => target.cleanup())), 60_000);

for (const target of targets) {
  const kind = target.kind;
  describe(`Bulk Data test suites (${kind})`, () => {
    beforeAll(async () => {
      const db = await target.migrated();
      t = await createTestApp({
        clock: testClock(NOW - 3 * 86_400_000),
        store: db.open(),
        env: {
          // Each suite starts and cancels hundreds of exports in a few seconds, from one client.
          CINDER_RATE_LIMITS: 'off', CINDER_EXPORT_MAX_JOBS_PER_CLIENT: '50',
          // On PostgreSQL, the files in the database, as a server on it keeps them by default.
          ...(kind === 'postgres' && { CINDER_DATABASE_URL: db.url }),
        },
      });
      expect(t.config.exportStorage).toStartWith(kind === 'postgres' ? 'postgres' : 'file:');
      for (const id of ['p1', 'p2', 'p3']) await put(t, patient(id, { active: true, gender: id === 'p2' ? 'male' : 'female' }));
      for (const id of ['p1', 'p2', 'p3']) await put(t, observation(`o-${id}`, id));
      await put(t, { resourceType: 'Medication', id: 'm1', code: { text: 'aspirin' } });
      await put(t, { resourceType: 'Binary', id: 'b1', contentType: 'text/plain', data: btoa('note') });
      await put(t, {
        resourceType: 'DocumentReference', id: 'd1', status: 'current', subject: { reference: 'Patient/p1' },
        content: [{ attachment: { contentType: 'text/plain', url: 'Binary/b1' } }, { attachment: { contentType: 'text/plain', data: btoa('inline note') } }],
      });
      await put(t, { resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p1' } }, { entity: { reference: 'Patient/p2' } }] });
      await put(t, { resourceType: 'Medication', id: 'gone', code: { text: 'withdrawn' } });
      await remove(t, 'Medication', 'gone');
      // Two days later: "_since one day ago" finds nothing, "one week ago" everything.
      t.clock.set(NOW);
      token = await t.token();
    });
    afterAll(async () => t.close());

    for (const level of LEVELS) {
      describe(`kick-off at the ${level} level`, () => {
        test('a client asking for XML gets the kick-off and status answers in JSON, the only format Bulk Data defines for them, errors too', async () => {
          const xml = { accept: 'application/fhir+xml' };
          const json = async (res: Response, status: number) => {
            expect([res.status, res.headers.get('content-type')?.split(';')[0]]).toEqual([status, 'application/fhir+json']);
            return (await res.json()) as Json;
          };
          expect((await json(await kick(level, { params: { _type: 'NotAType' }, headers: xml }), 400)).resourceType).toBe('OperationOutcome');
          const started = await kick(level, { headers: xml });
          expect((await json(started.clone(), 202)).resourceType).toBe('OperationOutcome');
          const location = started.headers.get('content-location')!;
          const poll = () => t.request(location, { headers: { authorization: `Bearer ${token}`, ...xml } });
          expect([202, 200]).toContain((await poll()).status);
          expect(await json(await del(location, xml), 202)).toMatchObject({ resourceType: 'OperationOutcome' });
          expect(await json(await poll(), 404)).toMatchObject({ resourceType: 'OperationOutcome' });
        });

        test('bdt "Can start an export" (GET) and "from POST requests" (an empty Parameters); Inferno kick-off: 202 with Content-Location', async () => {
          const get = await kick(level);
          await expectStarted(get.clone());
          await cancelIfStarted(get);
          const post = await kick(level, { method: 'POST', json: { resourceType: 'Parameters', parameter: [] } });
          await expectStarted(post.clone());
          await cancelIfStarted(post);
        });

        test('bdt "Requires Accept header" (GET and POST): the contract starts an export without one, as Bulk Data 2.0 allows', async () => {
          // interface.md: a Group or system kick-off sends Authorization alone and is answered 202;
          // Bulk Data 2.0: "If omitted, the server MAY return an error or MAY process the request".
          for (const method of ['GET', 'POST'] as const) {
            const res = await kick(level, { method, headers: { accept: null } });
            await expectStarted(res.clone());
            await cancelIfStarted(res);
          }
        });

        test('bdt "Requires the Prefer header to contain respond-async" (GET and POST): the contract starts an export without one', async () => {
          for (const method of ['GET', 'POST'] as const) {
            const res = await kick(level, { method, headers: { prefer: null } });
            await expectStarted(res.clone());
            await cancelIfStarted(res);
          }
          // The contract's own requests: Authorization alone, with _outputFormat=ndjson (Group), and
          // a system kick-off that also sends Content-Type: application/fhir+json without a body.
          const contract: Record<string, string | null>[] = [{ accept: null, prefer: null }, { accept: null, prefer: null, 'content-type': 'application/fhir+json' }];
          for (const headers of contract) {
            const bare = await kick(level, { params: { _outputFormat: 'ndjson' }, headers });
            await expectStarted(bare.clone());
            await cancelIfStarted(bare);
          }
        });

        test('bdt "Allows the Prefer header to contain handling=lenient"', async () => {
          const res = await kick(level, { params: { _type: 'Patient' }, headers: { prefer: 'respond-async, handling=lenient' } });
          await expectStarted(res.clone());
          await cancelIfStarted(res);
        });

        test('bdt and Inferno "Accepts _outputFormat" application/fhir+ndjson, application/ndjson, ndjson (GET and POST); Inferno cancels each (202)', async () => {
          for (const _outputFormat of ['application/fhir+ndjson', 'application/ndjson', 'ndjson']) {
            for (const method of ['GET', 'POST'] as const) {
              const res = await kick(level, { method, params: { _outputFormat } });
              await expectStarted(res.clone());
              await cancelIfStarted(res);
            }
          }
        });

        test('bdt "Rejects unsupported format" application/xml, text/html, x-custom (GET and POST)', async () => {
          for (const _outputFormat of ['application/xml', 'text/html', 'x-custom']) {
            for (const method of ['GET', 'POST'] as const) await expectRefused(await kick(level, { method, params: { _outputFormat } }), '_outputFormat');
          }
        });

        test('bdt "Rejects _since={invalid date}" (GET, and POST as valueInstant)', async () => {
          for (const method of ['GET', 'POST'] as const) await expectRefused(await kick(level, { method, params: { _since: '0000-60-01T30:70:80+05:00' } }), '_since');
        });

        test('bdt "Rejects _since={future date}" (GET and POST)', async () => {
          for (const method of ['GET', 'POST'] as const) await expectRefused(await kick(level, { method, params: { _since: '2057-01-01T00:00:00+05:00' } }), '_since');
        });

        test('Inferno "supports _since": an instant a week ago (offset +00:00, its + encoded) is accepted, then cancelled (202)', async () => {
          const since = iso(NOW - 7 * 86_400_000);
          expect(since).toMatch(INSTANT);
          for (const method of ['GET', 'POST'] as const) {
            const res = await kick(level, { method, params: { _since: since } });
            await expectStarted(res.clone());
            await cancelIfStarted(res);
          }
        });

        test('bdt "Validates the _type parameter" (GET and POST): _type=MissingType is refused', async () => {
          for (const method of ['GET', 'POST'] as const) await expectRefused(await kick(level, { method, params: { _type: 'MissingType' } }), 'MissingType');
        });

        test('bdt "Accepts the includeAssociatedData parameter", as a comma-separated list and repeated', async () => {
          for (const includeAssociatedData of ['LatestProvenanceResources', 'LatestProvenanceResources,RelevantProvenanceResources', ['LatestProvenanceResources', 'RelevantProvenanceResources']]) {
            const res = await kick(level, { params: { includeAssociatedData } });
            await expectStarted(res.clone());
            await cancelIfStarted(res);
          }
        });

        test('bdt "Handles the _typeFilter parameter" (one, repeated, and by POST): refused strictly when unusable, started with handling=lenient', async () => {
          // Patient has no `status` search parameter (R4): Cinder refuses the filter, never ignores it silently.
          for (const method of ['GET', 'POST'] as const) {
            for (const _typeFilter of ['Patient?status=active', ['Patient?status=active', 'Patient?gender=male']]) {
              await expectRefused(await kick(level, { method, params: { _typeFilter } }), 'status');
              const lenient = await kick(level, { method, params: { _typeFilter }, headers: { prefer: 'respond-async, handling=lenient' } });
              await expectStarted(lenient.clone());
              await cancelIfStarted(lenient);
            }
          }
          // A usable one is applied.
          const res = await kick(level, { params: { _type: 'Patient', _typeFilter: 'Patient?gender=male' } });
          const { lines } = await fileLines((await manifestOf(await expectStarted(res.clone()))).output[0]!.url);
          expect(lines.map((r) => r.id)).toEqual(['p2']);
          await cancelIfStarted(res);
        });

        test('bdt "Accepts the _elements parameter" (GET, POST, and repeated in GET): every line has id and meta, tagged SUBSETTED', async () => {
          const cases: KickOptions[] = [
            { params: { _elements: 'id,Patient.meta', _type: 'Patient' } },
            { method: 'POST', params: { _elements: 'id,Patient.meta', _type: 'Patient' } },
            { params: { _elements: ['id', 'Patient.meta'], _type: 'Patient' } },
          ];
          for (const c of cases) {
            const res = await kick(level, c);
            const manifest = await manifestOf(await expectStarted(res.clone()));
            expect(manifest.output.length).toBeGreaterThan(0);
            const { res: file, lines } = await fileLines(manifest.output[0]!.url);
            expect(file.status).toBe(200);
            expect(lines.length).toBeGreaterThan(0);
            for (const line of lines) {
              expect(line).toContainKey('id');
              expect(line).toContainKey('meta');
              // bdt's `to.contain({system, code})` (@hapi/code, deep by default) takes a tag that also has a display.
              expect((line.meta as { tag: Json[] }).tag.some((tag) => tag.system === SUBSETTED.system && tag.code === SUBSETTED.code)).toBe(true);
              // Unlisted, optional elements are left out.
              expect(line).not.toContainKey('gender');
            }
            await cancelIfStarted(res);
          }
        });

        if (level === 'system') {
          test('bdt "Rejects system-level export with patient parameter" (POST, two valueReferences)', async () => {
            await expectRefused(await kick(level, { method: 'POST', params: { patient: ['123', '456'] } }), 'patient');
          });
        } else {
          test(`bdt "Supports the patient parameter via the ${level}-export endpoint": an export for the first Patient holds that Patient alone`, async () => {
            const first = await kick(level, { params: { _type: 'Patient' } });
            const { lines } = await fileLines((await manifestOf(await expectStarted(first.clone()))).output[0]!.url);
            // bdt cancels the first export once complete: a DELETE of a completed job is 202 too.
            await cancelIfStarted(first);
            const chosen = lines[0]!.id as string;
            const second = await kick(level, { method: 'POST', json: { resourceType: 'Parameters', parameter: [{ name: 'patient', valueReference: { reference: `Patient/${chosen}` } }, { name: '_type', valueString: 'Patient' }] } });
            const { lines: only } = await fileLines((await manifestOf(await expectStarted(second.clone()))).output[0]!.url);
            expect(only.map((r) => r.id)).toEqual([chosen]);
            await cancelIfStarted(second);
          });

          test('bdt "Can start an export with patient parameter" (Patient/123, Patient/456, not on the server): Bulk Data 2.0 says to refuse, so 400 unless lenient', async () => {
            // Bulk Data 2.0 (patient): "If a client requests patients who are not present on the server (or in
            // the case of the group level export, who are not members of the group), the server SHOULD return
            // details via a FHIR OperationOutcome resource in an error response to the request". bdt expects 202.
            await expectRefused(await kick(level, { method: 'POST', params: { patient: ['123', '456'] } }), 'Patient/123');
            const lenient = await kick(level, { method: 'POST', params: { patient: ['123', 'p1'] }, headers: { prefer: 'respond-async, handling=lenient' } });
            await expectStarted(lenient.clone());
            await cancelIfStarted(lenient);
          });
        }
      });

      describe(`authorization at the ${level} level`, () => {
        test('bdt "Requires authorization header" and Inferno "rejects without authorization": 401, an OperationOutcome when JSON', async () => {
          const res = await kick(level, { token: null });
          await cancelIfStarted(res.clone());
          expect(res.status).toBe(401);
          expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
          expect(((await res.json()) as Json).resourceType).toBe('OperationOutcome');
        });

        test('bdt "Rejects invalid token": 401 with an OperationOutcome', async () => {
          const res = await kick(level, { token: 'invalidToken' });
          await cancelIfStarted(res.clone());
          expect(res.status).toBe(401);
          expect(res.headers.get('content-type')?.split(';')[0]).toBe('application/fhir+json');
          expect(((await res.json()) as Json).resourceType).toBe('OperationOutcome');
        });
      });

      describe(`status, output and download at the ${level} level (Inferno's export and validation groups)`, () => {
        test('complete status: 200, JSON, Expires in the future, and each required field; output entries absolute, typed and counted', async () => {
          const res = await kick(level);
          const status = await expectStarted(res.clone());
          const done = await complete(status);
          expect(done.status).toBe(200);
          expect(done.headers.get('content-type')).toContain('application/json');
          const expires = Date.parse(done.headers.get('expires')!);
          expect(expires).toBeGreaterThan(NOW);
          const manifest = (await done.json()) as Manifest & Json;
          for (const key of ['transactionTime', 'request', 'requiresAccessToken', 'output', 'error']) expect(manifest).toContainKey(key);
          expect(manifest.transactionTime).toMatch(INSTANT);
          // bdt: "the 'request' property must contain the kick-off URL".
          expect(manifest.request).toBe(t.fhir() + PATH[level]);
          // The contract: downloads carry the bearer token.
          expect(manifest.requiresAccessToken).toBe(true);
          expect(manifest.output.length).toBeGreaterThan(0);
          for (const o of [...manifest.output, ...manifest.error]) {
            expect(o.url).toMatch(/^https?:\/\/.+/);
            if ('count' in o) expect(o.count).toBeGreaterThan(0);
          }
          for (const e of manifest.error) expect(e.type).toBe('OperationOutcome');

          // Inferno "NDJSON download requires access token": 400 or 401 without one.
          const anonymous = await fileLines(manifest.output[0]!.url, null);
          expect([400, 401]).toContain(anonymous.res.status);

          // Inferno "valid resources" and bdt "Generates valid file response": application/fhir+ndjson, each line
          // a resource of its entry's type, as many as its count.
          const seen: Json[] = [];
          for (const o of manifest.output) {
            const { res: file, lines } = await fileLines(o.url);
            expect(file.status).toBe(200);
            expect(file.headers.get('content-type')).toStartWith('application/fhir+ndjson');
            expect(lines).toHaveLength(o.count);
            for (const line of lines) expect(line.resourceType).toBe(o.type);
            seen.push(...lines);
          }
          // Inferno "multiple patients": at least two Patient resources.
          expect(seen.filter((r) => r.resourceType === 'Patient').length).toBeGreaterThanOrEqual(2);
          const ids = seen.map((r) => `${r.resourceType}/${r.id}`);
          if (level === 'system') expect(ids).toContain('Medication/m1');
          // A Patient or Group export holds compartment resources alone: no Medication, no Binary.
          else expect(ids.filter((id) => id.startsWith('Medication/') || id.startsWith('Binary/'))).toEqual([]);
          if (level === 'group') expect(ids.filter((id) => id.startsWith('Patient/')).sort()).toEqual(['Patient/p1', 'Patient/p2']);
          await cancelIfStarted(res);
        });

        test('bdt "Responds with 202 for active exports": X-Progress under 100 characters, Retry-After a positive whole number of seconds', async () => {
          const res = await kick(level, { params: { _type: 'Patient', _since: iso(NOW - 86_400_000) } });
          const status = await expectStarted(res.clone());
          const pending = await t.request(status, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
          expect(pending.status).toBe(202);
          expect(pending.headers.get('x-progress')!.length).toBeLessThan(100);
          const retryAfter = pending.headers.get('retry-after')!;
          expect(Number(retryAfter)).toBeGreaterThan(0);
          expect(retryAfter).toBe(String(Math.round(Number(retryAfter) * 100) / 100));
          await cancelIfStarted(res);
        });

        test('bdt "Exports can be canceled" and Inferno cancel: DELETE 202, then a second DELETE and a poll are 404 with an OperationOutcome', async () => {
          const status = await expectStarted(await kick(level));
          const first = await del(status);
          expect(first.status).toBe(202);
          const firstText = await first.text();
          if (firstText) expect((JSON.parse(firstText) as Json).resourceType).toBe('OperationOutcome');
          for (const res of [await del(status, { accept: 'application/json' }), await t.request(status, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })]) {
            expect(res.status).toBe(404);
            expect(res.headers.get('content-type')).toContain('json');
            expect(((await res.json()) as Json).resourceType).toBe('OperationOutcome');
          }
        });
      });
    }

    describe('status (system level, as bdt runs its status suite)', () => {
      test('bdt "Includes lenient errors in the payload errors array": the first parameter refused strictly is named in an OperationOutcome of the error file', async () => {
        const _since = iso(NOW - 86_400_000);
        const candidates: [keyof Params, Params[keyof Params]][] = [
          ['_typeFilter', 'Patient?status=active'], ['includeAssociatedData', 'LatestProvenanceResources'], ['_elements', 'id'], ['patient', ['test-patient-id']], ['_type', ['Patient']],
        ];
        let refused: (typeof candidates)[number] | undefined;
        for (const [name, value] of candidates) {
          const level = name === 'patient' ? 'patient' : 'system';
          const res = await kick(level, { method: name === 'patient' ? 'POST' : 'GET', params: { [name]: value, _since } });
          await cancelIfStarted(res.clone());
          if (res.status >= 400) {
            refused = [name, value];
            break;
          }
        }
        expect(refused?.[0]).toBe('_typeFilter');
        const res = await kick('system', { params: { [refused![0]]: refused![1], _since }, headers: { prefer: 'respond-async, handling=lenient' } });
        const manifest = await manifestOf(await expectStarted(res.clone()));
        // bdt looks for `resourceType: OperationOutcome` in the manifest's `error` array itself; in Bulk Data
        // 2.0 that array lists files ({type, url}) of OperationOutcome resources, which are read here.
        expect(manifest.error.length).toBeGreaterThan(0);
        const outcomes = (await Promise.all(manifest.error.map((e) => fileLines(e.url)))).flatMap((f) => f.lines);
        expect(outcomes.every((o) => o.resourceType === 'OperationOutcome')).toBe(true);
        expect(JSON.stringify(outcomes)).toContain(refused![0]);
        await cancelIfStarted(res);
      });
    });

    describe('deleted (bdt manifest checks)', () => {
      test('with _since, deleted lists files of type Bundle, absolute and counted, each line a transaction Bundle of DELETE requests', async () => {
        const res = await kick('system', { params: { _type: 'Medication', _since: iso(NOW - 7 * 86_400_000) } });
        const manifest = await manifestOf(await expectStarted(res.clone()));
        expect(manifest.deleted!.length).toBeGreaterThan(0);
        const bundles: Json[] = [];
        for (const d of manifest.deleted!) {
          expect(d.type).toBe('Bundle');
          expect(d.url).toMatch(/^https?:\/\/.+/);
          expect(d.count).toBeGreaterThan(0);
          bundles.push(...(await fileLines(d.url)).lines);
        }
        expect(bundles.map((b) => [b.resourceType, b.type])).toEqual([['Bundle', 'transaction']]);
        expect((bundles[0]!.entry as { request: Json }[])[0]!.request).toEqual({ method: 'DELETE', url: 'Medication/gone' });
        // Resources in deleted are not in output.
        const out = (await Promise.all(manifest.output.map((o) => fileLines(o.url)))).flatMap((f) => f.lines);
        expect(out.map((r) => r.id)).not.toContain('gone');
        await cancelIfStarted(res);
      });
    });

    describe('download (bdt download suite)', () => {
      test('"Requires valid access token if requiresAccessToken is true": without one the file is refused (>= 400)', async () => {
        const res = await kick('system', { params: { _type: 'Patient' } });
        const manifest = await manifestOf(await expectStarted(res.clone()));
        expect(manifest.requiresAccessToken).toBe(true);
        expect((await fileLines(manifest.output[0]!.url, null)).res.status).toBeGreaterThanOrEqual(400);
        await cancelIfStarted(res);
      });

      test('"Generates valid file response": 200, application/fhir+ndjson, every line JSON; the file ends with one newline', async () => {
        const res = await kick('system', { params: { _type: 'Observation' } });
        const manifest = await manifestOf(await expectStarted(res.clone()));
        const file = await t.request(manifest.output[0]!.url, { headers: { authorization: `Bearer ${token}`, accept: 'application/fhir+ndjson' } });
        expect(file.status).toBe(200);
        expect(file.headers.get('content-type')).toMatch(/^application\/fhir\+ndjson/);
        const text = await file.text();
        const lines = text.split(/\r?\n/);
        // bdt warns of empty lines, and of a final newline ("could confuse some parsers"): NDJSON ends each line with one.
        expect(lines.slice(0, -1).every((l) => l.length > 0)).toBe(true);
        expect(lines.at(-1)).toBe('');
        for (const line of lines.slice(0, -1)) expect(() => JSON.parse(line)).not.toThrow();
        await cancelIfStarted(res);
      });

      test('"Rejects a download if the client scopes do not cover that resource type": the same client re-authorized for Observation alone', async () => {
        const res = await kick('system', { params: { _type: 'Patient' } });
        const manifest = await manifestOf(await expectStarted(res.clone()));
        const narrow = await t.token('system/Observation.read');
        expect((await fileLines(manifest.output[0]!.url, narrow)).res.status).toBeGreaterThan(399);
        await cancelIfStarted(res);
      });

      test('"Supports binary file attachments in DocumentReference resources": data is base64, a url is absolute, refused without a token (400/401/403) and served with one', async () => {
        const res = await kick('system', { params: { _type: 'DocumentReference' } });
        const manifest = await manifestOf(await expectStarted(res.clone()));
        const docs = (await Promise.all(manifest.output.map((o) => fileLines(o.url)))).flatMap((f) => f.lines);
        expect(docs.length).toBeGreaterThan(0);
        let urls = 0;
        for (const doc of docs) {
          for (const { attachment } of doc.content as { attachment: { contentType?: string; data?: string; url?: string } }[]) {
            expect(attachment.contentType).toBeTruthy();
            expect(Boolean(attachment.data) !== Boolean(attachment.url)).toBe(true);
            if (attachment.data) expect(attachment.data).toMatch(/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/);
            if (!attachment.url) continue;
            urls++;
            expect(attachment.url).toMatch(/^https?:\/\/.+/);
            expect([400, 401, 403]).toContain((await t.request(attachment.url)).status);
            expect([200, 304]).toContain((await t.request(attachment.url, { headers: { authorization: `Bearer ${token}` } })).status);
          }
        }
        expect(urls).toBeGreaterThan(0);
        await cancelIfStarted(res);
      });

      test('"Requesting deleted files returns 404 responses": after the DELETE of a completed export its files are 404', async () => {
        const res = await kick('system', { params: { _type: 'Patient' } });
        const manifest = await manifestOf(await expectStarted(res.clone()));
        expect((await fileLines(manifest.output[0]!.url)).res.status).toBe(200);
        await cancelIfStarted(res);
        expect((await fileLines(manifest.output[0]!.url)).res.status).toBe(404);
      });
    });

    describe('token endpoint (bdt authorization suite, with client-credentials authentication)', () => {
      const tokenRequest = (body: string, contentType = 'application/x-www-form-urlencoded') =>
        t.request('/oauth2/token', { method: 'POST', headers: { 'content-type': contentType, authorization: 'Basic ' + btoa(`${t.admin.client.clientId}:${t.admin.clientSecret}`) }, body });

      test('"Clients can authorize": access_token, a positive expires_in, token_type bearer and the granted scope', async () => {
        const res = await tokenRequest('grant_type=client_credentials&scope=system%2F*.read');
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toStartWith('application/json');
        const body = (await res.json()) as Json;
        expect(body.access_token).toBeString();
        expect(body.access_token).not.toBe('');
        expect(body.expires_in as number).toBeGreaterThan(0);
        expect(body.token_type).toMatch(/^bearer$/i);
        expect(body.scope).toBe('system/*.read');
      });

      test('"Supports mixed v1 and v2 scopes": both granted as requested', async () => {
        const body = (await (await tokenRequest('grant_type=client_credentials&scope=system%2FPatient.read+system%2FObservation.rs')).json()) as Json;
        expect((body.scope as string).split(' ').sort()).toEqual(['system/Observation.rs', 'system/Patient.read']);
      });

      test('"Requires application/x-www-form-urlencoded POSTs": another body is a 400 OAuth error', async () => {
        const res = await tokenRequest(JSON.stringify({ grant_type: 'client_credentials' }), 'application/json');
        expect(res.status).toBe(400);
        expect(((await res.json()) as Json).error).toBe('invalid_request');
      });
    });

    describe('metadata (bdt metadata suite; Inferno SMART discovery)', () => {
      test('the CapabilityStatement names the token endpoint in the oauth-uris extension of rest.security', async () => {
        const cs = (await (await t.request(t.fhir() + '/metadata?_format=json', { headers: { accept: 'application/fhir+json,application/json+fhir,application/json' } })).json()) as {
          rest: { security: { extension: { url: string; extension: { url: string; valueUri?: string }[] }[] } }[];
        };
        const uris = cs.rest[0]!.security.extension.find((e) => e.url === 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris')!;
        expect(uris.extension.find((e) => e.url === 'token')?.valueUri).toMatch(/^https?:\/\/.+\/oauth2\/token$/);
      });

      test('.well-known/smart-configuration: token_endpoint; private_key_jwt with RS384 or ES384; scopes_supported an array', async () => {
        const res = await t.request(t.fhir() + '/.well-known/smart-configuration');
        expect(res.status).toBe(200);
        const config = (await res.json()) as Record<string, unknown>;
        expect(config.token_endpoint).toMatch(/^https?:\/\//);
        expect(config.token_endpoint_auth_methods_supported).toContain('private_key_jwt');
        const algs = config.token_endpoint_auth_signing_alg_values_supported as string[];
        expect(algs.includes('RS384') || algs.includes('ES384')).toBe(true);
        expect(Array.isArray(config.scopes_supported)).toBe(true);
      });
    });
  });
}
