import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { BASE, createTestApp, testClock, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, finish, kickOff, observation, patient, put, refs } from '../helpers/export.ts';

let t: TestApp;
let clock: ReturnType<typeof testClock>;
let token: string;
beforeEach(async () => {
  t = await createTestApp({ clock: (clock = testClock()) });
  token = await t.token();
  await put(t, patient('p1', { gender: 'female', name: [{ family: 'One' }], birthDate: '1970-01-01' }));
  await put(t, patient('p2', { gender: 'male' }));
  await put(t, observation('o1', 'p1', 'A'));
  await put(t, observation('o2', 'p2', 'B'));
  await put(t, { resourceType: 'Medication', id: 'm1', code: { text: 'aspirin' } });
});
afterEach(async () => t.close());

const get = (path: string, headers: Record<string, string> = {}, tok = token) => t.request(t.fhir() + path, fhirInit(tok, 'GET', undefined, headers));
const post = (path: string, parameter: unknown[], headers: Record<string, string> = {}) =>
  t.request(t.fhir() + path, fhirInit(token, 'POST', { resourceType: 'Parameters', parameter }, headers));

async function outcomeText(res: Response): Promise<string> {
  expect(res.headers.get('content-type')).toContain('application/fhir+json');
  const body = (await res.json()) as { resourceType: string; issue: { details: { text: string } }[] };
  expect(body.resourceType).toBe('OperationOutcome');
  return body.issue.map((i) => i.details.text).join(' | ');
}

async function errorLines(manifest: { error: { url: string }[] }): Promise<string> {
  const files = await download(t, token, manifest.error as never);
  return JSON.stringify(files.OperationOutcome ?? []);
}

describe('kick-off', () => {
  test('GET answers 202 at once with an absolute Content-Location (no Prefer or Accept needed)', async () => {
    const res = await get('/$export');
    expect(res.status).toBe(202);
    const location = res.headers.get('content-location')!;
    expect(location.startsWith(`${BASE}/tenants/t1/fhir/R4/$export-status/`)).toBe(true);
    const poll = await t.request(location, fhirInit(token));
    expect(poll.status).toBe(202);
  });

  test('Prefer: respond-async and Accept: application/fhir+json are accepted', async () => {
    const res = await get('/$export', { Prefer: 'respond-async', Accept: 'application/fhir+json' });
    expect(res.status).toBe(202);
  });

  test('POST with a Parameters body; the manifest request has no parameters', async () => {
    const res = await post('/$export', [{ name: '_type', valueString: 'Patient' }, { name: '_outputFormat', valueString: 'ndjson' }]);
    expect(res.status).toBe(202);
    const manifest = await finish(t, token, res.headers.get('content-location')!);
    expect(manifest.request).toBe(`${BASE}/tenants/t1/fhir/R4/$export`);
    expect(refs(await download(t, token, manifest.output))).toEqual(['Patient/p1', 'Patient/p2']);
  });

  test('POST with parameters both in the URL and in its Parameters body is a 400 naming them, not one set ignored', async () => {
    for (const query of ['?_type=Patient', '?_since=2026-01-01T00:00:00Z&_type=Patient']) {
      const res = await post(`/$export${query}`, [{ name: '_type', valueString: 'Observation' }]);
      expect(res.status).toBe(400);
      const text = await outcomeText(res);
      expect(text).toContain("'_type'");
      expect(text).toContain('not both');
    }
    const lenient = await post('/Patient/$export?_type=Patient', [{ name: '_type', valueString: 'Patient' }], { Prefer: 'handling=lenient' });
    expect(lenient.status).toBe(400);
    // _format is the FHIR layer's, not an export parameter.
    expect((await post('/$export?_format=json', [{ name: '_type', valueString: 'Patient' }])).status).toBe(202);
  });

  test('POST needs a Parameters resource', async () => {
    const res = await t.request(t.fhir() + '/$export', fhirInit(token, 'POST', { resourceType: 'Patient' }));
    expect(res.status).toBe(400);
  });

  test.each(['application/fhir+ndjson', 'application/ndjson', 'ndjson'])('_outputFormat=%s is NDJSON', async (format) => {
    expect((await get(`/$export?_outputFormat=${encodeURIComponent(format)}`)).status).toBe(202);
  });

  test('_outputFormat=application/fhir+ndjson with its + left unencoded is NDJSON', async () => {
    const status = await kickOff(t, token, '/$export?_type=Patient&_outputFormat=application/fhir+ndjson');
    const manifest = await finish(t, token, status);
    expect(refs(await download(t, token, manifest.output))).toEqual(['Patient/p1', 'Patient/p2']);
  });

  test.each([
    'application/fhir+ndjson;charset=utf-8', 'application/ndjson; charset=UTF-8', 'ndjson;charset="utf-8"', 'APPLICATION/FHIR+NDJSON ; Charset=Utf-8',
    'application/fhir+ndjson;',
  ])('_outputFormat=%s (a parameter that changes nothing) is NDJSON', async (format) => {
    expect((await get(`/$export?_outputFormat=${encodeURIComponent(format)}`)).status).toBe(202);
  });

  test('_outputFormat with charset=utf-8, by POST or with its + left unencoded, exports NDJSON', async () => {
    const posted = await post('/$export', [{ name: '_type', valueString: 'Patient' }, { name: '_outputFormat', valueString: 'application/fhir+ndjson; charset=utf-8' }]);
    expect(posted.status).toBe(202);
    const status = await kickOff(t, token, '/$export?_type=Patient&_outputFormat=application/fhir+ndjson;charset=utf-8');
    const manifest = await finish(t, token, status);
    expect(refs(await download(t, token, manifest.output))).toEqual(['Patient/p1', 'Patient/p2']);
  });

  test.each(['application/fhir+ndjson;charset=iso-8859-1', 'ndjson; profile="http://example.org/x"', 'application/ndjson;charset'])(
    '_outputFormat=%s (a parameter Cinder cannot honour) is a 400 naming it',
    async (format) => {
      const res = await get(`/$export?_outputFormat=${encodeURIComponent(format)}`);
      expect(res.status).toBe(400);
      const text = await outcomeText(res);
      expect(text).toContain(`_outputFormat parameter '${format.split(';')[1]!.trim()}' is not supported`);
      expect(text).toContain('charset=utf-8');
    },
  );

  test('any other _outputFormat is a 400 OperationOutcome', async () => {
    const res = await get('/$export?_outputFormat=application/fhir%2Bjson');
    expect(res.status).toBe(400);
    expect(await outcomeText(res)).toContain('_outputFormat');
    expect((await get('/$export?_outputFormat=ndjson&_outputFormat=ndjson')).status).toBe(400);
  });

  test('the manifest request is the full kick-off URL of a GET', async () => {
    const status = await kickOff(t, token, '/$export?_type=Patient');
    const manifest = await finish(t, token, status);
    expect(manifest.request).toBe(`${BASE}/tenants/t1/fhir/R4/$export?_type=Patient`);
  });

  test('_type repeated or comma-separated', async () => {
    const status = await kickOff(t, token, '/$export?_type=Patient&_type=Observation,Medication');
    const manifest = await finish(t, token, status);
    expect(manifest.output.map((o) => o.type).sort()).toEqual(['Medication', 'Observation', 'Patient']);
  });

  test('_type given but empty is a 400, not an export of every type; with handling=lenient it is ignored and reported', async () => {
    for (const query of ['_type=', '_type=,', '_type=%20', '_typeFilter=', '_elements=']) {
      const res = await get(`/$export?${query}`);
      expect({ query, status: res.status }).toEqual({ query, status: 400 });
      expect(await outcomeText(res)).toContain(`${query.split('=')[0]} is given but names nothing`);
    }
    const posted = await post('/$export', [{ name: '_type', valueString: '' }]);
    expect(posted.status).toBe(400);
    expect(await outcomeText(posted)).toContain('_type');
    const status = await kickOff(t, token, '/$export?_type=', { Prefer: 'handling=lenient' });
    const manifest = await finish(t, token, status);
    expect(manifest.output.map((o) => o.type).sort()).toEqual(['Medication', 'Observation', 'Patient']);
    expect(await errorLines(manifest)).toContain('_type is given but names nothing');
  });

  test('_type with empty items or spaces around its commas names the types it holds', async () => {
    for (const query of ['_type=Patient,,Observation,', '_type=%20Patient%20,%20Observation', '_type=&_type=Patient,Observation']) {
      const manifest = await finish(t, token, await kickOff(t, token, `/$export?${query}`));
      expect({ query, types: manifest.output.map((o) => o.type) }).toEqual({ query, types: ['Patient', 'Observation'] });
    }
  });

  test('an unknown _type is a 400; with handling=lenient it is left out and reported in error', async () => {
    const res = await get('/$export?_type=Patient,Bogus');
    expect(res.status).toBe(400);
    expect(await outcomeText(res)).toContain('Bogus');
    const status = await kickOff(t, token, '/$export?_type=Patient,Bogus', { Prefer: 'respond-async, handling=lenient' });
    const manifest = await finish(t, token, status);
    expect(manifest.output.map((o) => o.type)).toEqual(['Patient']);
    expect(manifest.error).toHaveLength(1);
    expect(manifest.error[0]!.type).toBe('OperationOutcome');
    expect(await errorLines(manifest)).toContain('Bogus');
  });

  test('unknown parameters are refused unless lenient', async () => {
    expect((await get('/$export?_frobnicate=1')).status).toBe(400);
    const status = await kickOff(t, token, '/$export?_frobnicate=1&_type=Medication', { Prefer: 'handling=lenient' });
    const manifest = await finish(t, token, status);
    expect(await errorLines(manifest)).toContain('_frobnicate');
  });

  test('patient is refused in a GET and ignored with an issue in a lenient system export', async () => {
    expect((await get('/Patient/$export?patient=Patient/p1')).status).toBe(400);
    const strict = await post('/$export', [{ name: 'patient', valueReference: { reference: 'Patient/p1' } }]);
    expect(strict.status).toBe(400);
    const lenient = await post('/$export', [{ name: 'patient', valueReference: { reference: 'Patient/p1' } }, { name: '_type', valueString: 'Patient' }], {
      Prefer: 'handling=lenient',
    });
    expect(lenient.status).toBe(202);
  });
});

describe('_since', () => {
  test.each([
    ['2026-01-15T10:00:00Z'],
    ['2026-01-15T12:00:00+02:00'],
    ['2026-01-15T12:00:00%2B0200'],
    ['2026-01-15T12:00:00+02:00'.replace('+', '%20')],
    ['2026-01-15T12:00:00.000+02'],
  ])('accepts %s (any ISO 8601 offset form)', async (since) => {
    const status = await kickOff(t, token, `/$export?_type=Patient&_since=${since}`);
    const manifest = await finish(t, token, status);
    expect(manifest.output).toEqual([]);
    expect(manifest.deleted).toEqual([]);
  });

  test('an invalid _since is a 400', async () => {
    for (const bad of ['yesterday', '2026-01-15', '2026-13-01T00:00:00Z', '2026-01-15T10:00:00']) {
      const res = await get(`/$export?_since=${bad}`);
      expect(res.status).toBe(400);
      expect(await outcomeText(res)).toContain('_since');
    }
  });

  test('only resources changed after _since, and deletions since then in deleted', async () => {
    clock.advance(60_000);
    const since = new Date(t.clock.now()).toISOString();
    clock.advance(1000);
    await put(t, observation('o1', 'p1', 'A2'));
    await put(t, observation('o3', 'p1', 'C'));
    await (await import('../helpers/export.ts')).remove(t, 'Observation', 'o2');
    const status = await kickOff(t, token, `/$export?_type=Observation,Patient&_since=${since}`);
    const manifest = await finish(t, token, status);
    const files = await download(t, token, manifest.output);
    expect(refs(files)).toEqual(['Observation/o1', 'Observation/o3']);
    expect(manifest.deleted).toHaveLength(1);
    const deleted = await download(t, token, manifest.deleted!);
    expect(deleted.Bundle).toHaveLength(1);
    const bundle = deleted.Bundle![0] as { type: string; entry: { request: { method: string; url: string } }[] };
    expect(bundle.type).toBe('transaction');
    expect(bundle.entry).toEqual([{ request: { method: 'DELETE', url: 'Observation/o2' } }]);
  });
});
