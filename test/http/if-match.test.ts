/**
 * `If-Match: *` and lists of entity tags (RFC 9110 13.1.1) on every write that takes If-Match: update,
 * patch, delete, their conditional forms, native Binary, and Bundle entries' `request.ifMatch`, on both
 * databases. `*` holds when the resource has a current version; a list when any entry names it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };

await eachStore((kind, fresh) => {
  describe(`If-Match: * and lists (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let n = 0;
    const bundles = bundlePoster(() => t, () => api);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    /** A Patient at version `versions` (1 by default); returns its id. */
    async function patient(versions = 1, extra: Json = {}): Promise<string> {
      const id = `im${++n}`;
      for (let v = 1; v <= versions; v++) await api.put200({ resourceType: 'Patient', id, birthDate: `2000-01-0${v}`, identifier: [{ system: 'urn:im', value: id }], ...extra });
      return id;
    }
    const version = async (path: string) => ((await (await api.get(path)).json()) as Json).meta?.versionId;
    /** Asserts an OperationOutcome of `status` and that nothing was written. */
    async function refused(send: () => Response | Promise<Response>, status: number): Promise<Json> {
      const before = await countVersions(t);
      const outcome = await expectOutcome(await send(), status);
      expect(await countVersions(t)).toBe(before);
      return outcome.issue[0];
    }
    const body = (id: string, extra: Json = {}) => ({ resourceType: 'Patient', id, active: true, ...extra });

    test('update: * writes when the resource exists, 412 when it does not or was deleted (no create)', async () => {
      const id = await patient();
      const res = await api.put(`Patient/${id}`, body(id), { 'If-Match': '*' });
      expect([res.status, res.headers.get('etag')]).toEqual([200, 'W/"2"']);
      const missing = await refused(() => api.put('Patient/im-none', body('im-none'), { 'If-Match': '*' }), 412);
      expect(missing.diagnostics).toContain('Patient/im-none');
      expect((await api.get('Patient/im-none')).status).toBe(404);
      expect((await api.del(`Patient/${id}`)).status).toBe(200);
      await refused(() => api.put(`Patient/${id}`, body(id), { 'If-Match': '*' }), 412);
    });

    test('update: a list matches when any entry names the current version, weak or strong; malformed values are 400', async () => {
      const id = await patient(2);
      expect((await api.put(`Patient/${id}`, body(id), { 'If-Match': 'W/"1", W/"2"' })).status).toBe(200);
      expect((await api.put(`Patient/${id}`, body(id, { gender: 'male' }), { 'If-Match': '"7", "3" ,W/"9"' })).status).toBe(200);
      const stale = await refused(() => api.put(`Patient/${id}`, body(id, { gender: 'female' }), { 'If-Match': 'W/"1", W/"2"' }), 412);
      expect(stale.diagnostics).toContain('version 1 or 2');
      // Well-formed tags that name no version never match; an opaque tag may hold a comma.
      await refused(() => api.put(`Patient/${id}`, body(id), { 'If-Match': '"abc", "x,y"' }), 412);
      expect(await version(`Patient/${id}`)).toBe('4');
      // Malformed: * within a list, an unquoted tag, tags without a comma between, an empty value.
      for (const header of ['*, W/"1"', 'W/1', 'version-1', 'W/"4" W/"5"', '', ' , ']) {
        const issue = await refused(() => api.put(`Patient/${id}`, body(id), { 'If-Match': header }), 400);
        expect(issue.diagnostics).toStartWith('Malformed If-Match header');
      }
    });

    test('delete: * deletes what exists and is 412 on nothing; a list holds on any entry', async () => {
      const a = await patient(2);
      await refused(() => api.del(`Patient/${a}`, { 'If-Match': 'W/"1", W/"3"' }), 412);
      expect((await api.del(`Patient/${a}`, { 'If-Match': 'W/"3", W/"2"' })).status).toBe(200);
      const b = await patient();
      expect((await api.del(`Patient/${b}`, { 'If-Match': '*' })).status).toBe(200);
      expect((await api.get(`Patient/${b}`)).status).toBe(410);
      // Without If-Match deleting nothing succeeds; with * it is a precondition on something to delete.
      await refused(() => api.del(`Patient/${b}`, { 'If-Match': '*' }), 412);
      await refused(() => api.del('Patient/im-never', { 'If-Match': '*' }), 412);
      expect((await api.del('Patient/im-never')).status).toBe(200);
    });

    test('patch: * and lists as for update; a missing resource stays 404 (RFC 9110 13.2.1)', async () => {
      const id = await patient(2);
      const op = (given: string) => [{ op: 'add', path: '/name', value: [{ given: [given] }] }];
      expect((await api.call('PATCH', `Patient/${id}`, op('a'), { ...JSON_PATCH, 'If-Match': '*' })).status).toBe(200);
      expect((await api.call('PATCH', `Patient/${id}`, op('b'), { ...JSON_PATCH, 'If-Match': 'W/"2", W/"3"' })).status).toBe(200);
      await refused(() => api.call('PATCH', `Patient/${id}`, op('c'), { ...JSON_PATCH, 'If-Match': 'W/"2", W/"3"' }), 412);
      await refused(() => api.call('PATCH', `Patient/${id}`, op('c'), { ...JSON_PATCH, 'If-Match': '*, W/"4"' }), 400);
      // A patch of nothing is a 404 without a precondition, so the precondition is not evaluated.
      await refused(() => api.call('PATCH', 'Patient/im-none', op('d'), { ...JSON_PATCH, 'If-Match': '*' }), 404);
      expect(await version(`Patient/${id}`)).toBe('4');
    });

    test('conditional update, patch and delete: If-Match applies to the match; with no match it cannot hold', async () => {
      const id = await patient(2);
      const q = `identifier=urn:im|${id}`;
      expect((await api.put(`Patient?${q}`, body(id, { identifier: [{ system: 'urn:im', value: id }] }), { 'If-Match': '*' })).status).toBe(200);
      await refused(() => api.put(`Patient?${q}`, body(id), { 'If-Match': 'W/"1", W/"2"' }), 412);
      expect((await api.call('PATCH', `Patient?${q}`, [{ op: 'replace', path: '/active', value: false }], { ...JSON_PATCH, 'If-Match': 'W/"3"' })).status).toBe(200);
      // No match: a conditional update would create, a conditional delete would delete nothing.
      await refused(() => api.put('Patient?identifier=urn:im|nobody', { resourceType: 'Patient', identifier: [{ system: 'urn:im', value: 'nobody' }] }, { 'If-Match': '*' }), 412);
      await refused(() => api.put('Patient?identifier=urn:im|nobody', { resourceType: 'Patient', identifier: [{ system: 'urn:im', value: 'nobody' }] }, { 'If-Match': 'W/"1"' }), 412);
      await refused(() => api.del('Patient?identifier=urn:im|nobody', { 'If-Match': '*' }), 412);
      await refused(() => api.del(`Patient?${q}`, { 'If-Match': 'W/"1", W/"2"' }), 412);
      expect((await api.del(`Patient?${q}`, { 'If-Match': 'W/"1", W/"4"' })).status).toBe(200);
      expect((await api.get(`Patient/${id}`)).status).toBe(410);
    });

    test('native Binary update takes * and lists', async () => {
      let content = 0;
      const put = (id: string, ifMatch: string) =>
        api.call('PUT', `Binary/${id}`, `hello ${++content}`, { 'Content-Type': 'text/plain', 'If-Match': ifMatch });
      await refused(() => put('im-bin', '*'), 412);
      expect((await api.call('PUT', 'Binary/im-bin', 'hello', { 'Content-Type': 'text/plain' })).status).toBe(201);
      expect((await put('im-bin', '*')).status).toBe(200);
      expect((await put('im-bin', 'W/"9", W/"2"')).status).toBe(200);
      await refused(() => put('im-bin', 'W/"9", W/"2"'), 412);
    });

    test('transaction and batch entries: request.ifMatch takes * and lists, as the header', async () => {
      const a = await patient(2);
      const b = await patient();
      const entry = (method: string, url: string, ifMatch: string, resource?: Json) => ({ ...(resource ? { resource } : {}), request: { method, url, ifMatch } });
      const ok = await bundles.ok({
        resourceType: 'Bundle', type: 'transaction', entry: [
          entry('PUT', `Patient/${a}`, 'W/"1", W/"2"', body(a)),
          entry('PATCH', `Patient/${b}`, '*', { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Patient.birthDate' }, { name: 'value', valueDate: '1999-09-09' }] }] }),
        ],
      });
      expect(ok.entry.map((e: Json) => e.response.status)).toEqual(['200 OK', '200 OK']);
      // One entry's precondition fails: the transaction writes nothing.
      await bundles.nothingWritten({
        resourceType: 'Bundle', type: 'transaction', entry: [
          entry('PUT', `Patient/${b}`, '*', body(b, { gender: 'other' })),
          entry('PUT', 'Patient/im-tx-none', '*', body('im-tx-none')),
        ],
      }, 412);
      await bundles.nothingWritten({ resourceType: 'Bundle', type: 'transaction', entry: [entry('DELETE', 'Patient?identifier=urn:im|nobody', '*')] }, 412);
      await bundles.nothingWritten({ resourceType: 'Bundle', type: 'transaction', entry: [entry('DELETE', `Patient/${a}`, '*, W/"3"')] }, 400);
      const batch = await bundles.ok({
        resourceType: 'Bundle', type: 'batch', entry: [
          entry('DELETE', `Patient/${a}`, 'W/"2", W/"4"'),
          entry('DELETE', `Patient/${a}`, 'W/"3"'),
          entry('DELETE', `Patient/${b}`, '*'),
          entry('DELETE', 'Patient/im-batch-none', '*'),
        ],
      });
      expect(batch.entry.map((e: Json) => e.response.status)).toEqual(['412 Precondition Failed', '204 No Content', '204 No Content', '412 Precondition Failed']);
      expect((await api.get(`Patient/${a}`)).status).toBe(410);
      expect((await api.get(`Patient/${b}`)).status).toBe(410);
    });

    test('a create names no version for If-Match to hold: POST ignores it, REST and Bundle entries alike (a Bundle entry was a 412)', async () => {
      const rest = await api.post('Patient', { resourceType: 'Patient', identifier: [{ system: 'urn:post-im', value: 'rest' }] }, { 'If-Match': 'W/"1"' });
      expect(rest.status).toBe(201);
      const post = (ifMatch: string, extra: Json = {}) => ({ request: { method: 'POST', url: 'Patient', ifMatch, ...extra }, resource: { resourceType: 'Patient', identifier: [{ system: 'urn:post-im', value: ifMatch }] } });
      for (const type of ['transaction', 'batch']) {
        const out = await bundles.ok({ resourceType: 'Bundle', type, entry: [post('W/"1"'), post('*')] });
        expect(out.entry.map((e: Json) => e.response.status)).toEqual(['201 Created', '201 Created']);
      }
      // A conditional create that matches writes nothing, whatever its ifMatch.
      const matched = await bundles.ok({ resourceType: 'Bundle', type: 'transaction', entry: [post('W/"9"', { ifNoneExist: 'identifier=urn:post-im|rest' })] });
      expect(matched.entry[0].response.status).toBe('200 OK');
      // Still a string, as every precondition of an entry.
      await bundles.nothingWritten({ resourceType: 'Bundle', type: 'transaction', entry: [{ ...post('x'), request: { method: 'POST', url: 'Patient', ifMatch: 1 } }] }, 400);
    });
  });
});
