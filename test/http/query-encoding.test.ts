/**
 * A malformed percent-encoding in a search or a condition (`%E0%A4%A`: bytes that are no UTF-8, or a `%`
 * without two hex digits) is a 400 naming the parameter, wherever it comes from (a search URL or form,
 * a conditional update, delete or patch URL, If-None-Exist, a Bundle entry's request.url or
 * ifNoneExist, a conditional reference): URLSearchParams would read it as U+FFFD and a condition would
 * then match nothing and create. A time zone's `+` sent unencoded (form-decoded as a space) in a date
 * is read as `+`. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BAD = '%E0%A4%A';
const message = (p: string) => `The parameter '${p}' is not well percent-encoded (a '%' must start two hex digits, and the bytes they encode must be UTF-8)`;

await eachStore((kind, fresh) => {
  describe(`malformed percent-encoding (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let token: string;
    const { ok, nothingWritten } = bundlePoster(() => t, () => api);
    const refused = async (res: Response, name: string, expression = [name]) => {
      const outcome = await expectOutcome(res, 400);
      expect([outcome.issue[0].expression, outcome.issue[0].diagnostics]).toEqual([expression, message(name)]);
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      api = fhirClient(t, token);
    });
    afterAll(() => t.close());

    test('REST: a search, its form, a conditional update, delete or patch, If-None-Exist', async () => {
      const before = await countVersions(t);
      await refused(await api.get(`Patient?name=${BAD}`), 'name');
      await refused(await api.get('Patient?name=100%'), 'name');
      const form = await t.request(`${api.base}/Patient/_search`, fhirInit(token, 'POST', `family=${BAD}`, { 'Content-Type': 'application/x-www-form-urlencoded' }));
      await refused(form, 'family');
      await refused(await api.put(`Patient?name=${BAD}`, { resourceType: 'Patient' }), 'name');
      await refused(await api.del(`Patient?name=${BAD}`), 'name');
      await refused(await t.request(`${api.base}/Patient`, fhirInit(token, 'POST', { resourceType: 'Patient' }, { 'If-None-Exist': `name=${BAD}` })), 'name', ['If-None-Exist']);
      expect(await countVersions(t)).toBe(before);
      // Well encoded, or a literal % encoded as %25, is searched.
      expect((await api.get('Patient?name=%E0%A4%A4')).status).toBe(200);
      expect((await api.get('Patient?name=100%25')).status).toBe(200);
    });

    test("Bundle entries: request.url and ifNoneExist in a transaction, an entry's 400 in a batch", async () => {
      const entries: [Json, string][] = [
        [{ resource: { resourceType: 'Patient' }, request: { method: 'PUT', url: `Patient?name=${BAD}` } }, 'request.url'],
        [{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient', ifNoneExist: `name=${BAD}` } }, 'request.ifNoneExist'],
        [{ request: { method: 'GET', url: `Patient?name=${BAD}` } }, 'request.url'],
        [{ resource: { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: `Patient?name=${BAD}` } }, request: { method: 'POST', url: 'Observation' } }, 'resource.subject'],
      ];
      for (const [entry, element] of entries) {
        const outcome = await nothingWritten({ resourceType: 'Bundle', type: 'transaction', entry: [entry] }, 400);
        expect([outcome.issue[0].expression, outcome.issue[0].diagnostics]).toEqual([[`Bundle.entry[0].${element}`], `Bundle.entry[0]: ${message('name')}`]);
        const batch = await ok({ resourceType: 'Bundle', type: 'batch', entry: [entry, { request: { method: 'GET', url: 'Patient' } }] });
        expect(batch.entry.map((e: Json) => e.response.status)).toEqual(['400 Bad Request', '200 OK']);
        expect(batch.entry[0].response.outcome.issue[0].expression).toEqual([`Bundle.entry[0].${element}`]);
      }
    });
  });
});

await eachStore((kind, fresh) => {
  describe(`a time zone's + sent unencoded (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ids = async (q: string) => ((await api.search(q)).entry ?? []).map((e: Json) => e.resource.id).sort();

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1' });
      await api.put200({ resourceType: 'Observation', id: 'early', status: 'final', code: { text: 'x' }, effectiveDateTime: '2024-01-31T10:30:00Z' });
      await api.put200({ resourceType: 'Observation', id: 'late', status: 'final', code: { text: 'x' }, effectiveDateTime: '2024-01-31T11:30:00Z' });
    });
    afterAll(() => t.close());

    test('is read as + in a date search, _lastUpdated and history _since, as bulk export reads it', async () => {
      // `+01:00` unencoded arrives as a space: 12:00+01:00 is 11:00Z.
      expect(await ids('Observation?date=ge2024-01-31T12:00:00+01:00')).toEqual(['late']);
      expect(await ids('Observation?date=lt2024-01-31T12:00+01:00')).toEqual(['early']);
      expect(await ids(`Observation?date=ge${encodeURIComponent('2024-01-31T12:00:00+01:00')}`)).toEqual(['late']);
      expect(await ids('Observation?_lastUpdated=gt2020-01-01T00:00:00+01:00')).toEqual(['early', 'late']);
      expect((await api.get('Patient/p1/_history?_since=2020-01-01T00:00:00+01:00')).status).toBe(200);
      expect((await api.get('Patient/p1/_history?_at=2030-01-01T00:00:00+01:00')).status).toBe(200);
      // Any other space stays a 400 naming the parameter.
      const outcome = await expectOutcome(await api.get('Observation?date=ge2024-01-31%2012:00:00'), 400);
      expect(outcome.issue[0].expression).toEqual(['date']);
      await expectOutcome(await api.get('Patient/p1/_history?_since=2024-01-31T12:00:00%20+01:00'), 400);
    });
  });
});
