/**
 * `If-None-Match` on updates (RFC 9110 13.1.2): `*` means "only if there is no current representation",
 * so a PUT over an existing resource is 412 and a PUT of a new or deleted one creates (R5's
 * create-on-update); a list of ETags is 412 when one names the current version. REST PUT, conditional
 * PUT, native Binary and a PUT entry's `request.ifNoneMatch`, on both databases. RFC 9110 13.1.2 has an
 * origin server evaluate it on any method: PATCH and DELETE (REST, conditional, and a PATCH or DELETE
 * entry's `request.ifNoneMatch`) are 412 by the same rule.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`If-None-Match on updates (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let n = 0;
    const bundles = bundlePoster(() => t, () => api);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    const body = (id: string, extra: Json = {}) => ({ resourceType: 'Patient', id, identifier: [{ system: 'urn:inm', value: id }], ...extra });
    /** A Patient at version `versions`; returns its id. */
    async function patient(versions = 1): Promise<string> {
      const id = `inm${++n}`;
      for (let v = 1; v <= versions; v++) await api.put200(body(id, { birthDate: `2000-01-0${v}` }));
      return id;
    }
    const version = async (id: string) => ((await (await api.get(`Patient/${id}`)).json()) as Json).meta.versionId;
    /** Asserts an OperationOutcome of `status` and that nothing was written; returns its first issue. */
    async function refused(send: () => Response | Promise<Response>, status: number): Promise<Json> {
      const before = await countVersions(t);
      const outcome = await expectOutcome(await send(), status);
      expect(await countVersions(t)).toBe(before);
      return outcome.issue[0];
    }

    test('PUT with *: 412 over an existing resource (changed or not), creates a new one, and a deleted one again', async () => {
      const id = await patient();
      const issue = await refused(() => api.put(`Patient/${id}`, body(id, { gender: 'male' }), { 'If-None-Match': '*' }), 412);
      expect(issue.code).toBe('conflict');
      expect(issue.diagnostics).toContain(`Patient/${id}`);
      // The same content would be an unchanged update: the precondition comes first.
      await refused(() => api.put(`Patient/${id}`, body(id, { birthDate: '2000-01-01' }), { 'If-None-Match': '*' }), 412);
      const created = await api.put('Patient/inm-new', body('inm-new'), { 'If-None-Match': '*' });
      expect([created.status, created.headers.get('etag')]).toEqual([201, 'W/"1"']);
      expect((await api.del(`Patient/${id}`)).status).toBe(200);
      const again = await api.put(`Patient/${id}`, body(id), { 'If-None-Match': '*' });
      expect([again.status, again.headers.get('etag')]).toEqual([201, 'W/"3"']);
    });

    test('PUT with ETags: 412 when one names the current version (weak or strong), written otherwise; malformed is 400', async () => {
      const id = await patient(2);
      for (const header of ['W/"2"', '"2"', 'W/"1", W/"2"']) {
        const issue = await refused(() => api.put(`Patient/${id}`, body(id, { gender: 'other' }), { 'If-None-Match': header }), 412);
        expect(issue.diagnostics).toContain('version 2');
      }
      expect((await api.put(`Patient/${id}`, body(id, { gender: 'male' }), { 'If-None-Match': 'W/"1"' })).status).toBe(200);
      // A tag naming no version never matches.
      expect((await api.put(`Patient/${id}`, body(id, { gender: 'female' }), { 'If-None-Match': '"abc"' })).status).toBe(200);
      expect(await version(id)).toBe('4');
      for (const header of ['W/4', '*, W/"1"', '']) {
        const issue = await refused(() => api.put(`Patient/${id}`, body(id), { 'If-None-Match': header }), 400);
        expect(issue.diagnostics).toStartWith('Malformed If-None-Match header');
        expect(issue.expression).toEqual(['If-None-Match']);
      }
    });

    test('conditional PUT with *: 412 when the condition matches, creates when it does not', async () => {
      const id = await patient();
      await refused(() => api.put(`Patient?identifier=urn:inm|${id}`, body(id, { gender: 'male' }), { 'If-None-Match': '*' }), 412);
      const created = await api.put('Patient?identifier=urn:inm|inm-cond', { resourceType: 'Patient', identifier: [{ system: 'urn:inm', value: 'inm-cond' }] }, { 'If-None-Match': '*' });
      expect(created.status).toBe(201);
      await refused(() => api.put(`Patient?identifier=urn:inm|${id}`, body(id, { gender: 'male' }), { 'If-None-Match': 'W/"1"' }), 412);
      expect((await api.put(`Patient?identifier=urn:inm|${id}`, body(id, { gender: 'male' }), { 'If-None-Match': 'W/"7"' })).status).toBe(200);
    });

    test('native Binary PUT takes If-None-Match as any update', async () => {
      const put = (ifNoneMatch: string) => api.call('PUT', 'Binary/inm-bin', `hello ${++n}`, { 'Content-Type': 'text/plain', 'If-None-Match': ifNoneMatch });
      expect((await put('*')).status).toBe(201);
      await refused(() => put('*'), 412);
      await refused(() => put('W/"1"'), 412);
      expect((await put('W/"9"')).status).toBe(200);
    });

    test('a PUT entry\'s request.ifNoneMatch: * and ETags as the header; a transaction writes nothing when one fails', async () => {
      const a = await patient();
      const put = (id: string, ifNoneMatch: string) => ({ resource: body(id, { active: true }), request: { method: 'PUT', url: `Patient/${id}`, ifNoneMatch } });
      const failed = await bundles.nothingWritten({ resourceType: 'Bundle', type: 'transaction', entry: [put('inm-tx', '*'), put(a, '*')] }, 412);
      expect(failed.issue[0].expression).toEqual(['Bundle.entry[1].request.ifNoneMatch']);
      const ok = await bundles.ok({ resourceType: 'Bundle', type: 'transaction', entry: [put('inm-tx', '*'), put(a, 'W/"7"')] });
      expect(ok.entry.map((e: Json) => e.response.status)).toEqual(['201 Created', '200 OK']);
      const batch = await bundles.ok({
        resourceType: 'Bundle', type: 'batch',
        entry: [put(a, '*'), put(a, 'W/"2"'), put('inm-batch', '*'), put(a, 'W/2'), { resource: body(a), request: { method: 'PUT', url: `Patient?identifier=urn:inm|${a}`, ifNoneMatch: '*' } }],
      });
      expect(batch.entry.map((e: Json) => e.response.status)).toEqual(['412 Precondition Failed', '412 Precondition Failed', '201 Created', '400 Bad Request', '412 Precondition Failed']);
      expect(batch.entry.map((e: Json) => e.response.outcome?.issue[0].expression)).toEqual([0, 1, undefined, 3, 4].map((i) => i === undefined ? undefined : [`Bundle.entry[${i}].request.ifNoneMatch`]));
      expect(await version(a)).toBe('2');
    });

    test("a core ValueSet the tenant never stored is current as the core's version 1, which a read serves: * is a 412, If-Match: * writes the tenant's own (as a PATCH judges it)", async () => {
      const vs = { resourceType: 'ValueSet', id: 'observation-status', status: 'draft' };
      await refused(() => api.put('ValueSet/observation-status', vs, { 'If-None-Match': '*' }), 412);
      await refused(() => api.put('ValueSet/observation-status', vs, { 'If-None-Match': 'W/"1"' }), 412);
      expect((await api.put('ValueSet/observation-status', vs, { 'If-Match': '*' })).status).toBe(201);
      await refused(() => api.put('ValueSet/observation-status', { ...vs, status: 'active' }, { 'If-None-Match': '*' }), 412);
    });

    const jsonPatch = (ops: Json[]) => JSON.stringify(ops);
    const patchHeaders = (ifNoneMatch: string) => ({ 'Content-Type': 'application/json-patch+json', 'If-None-Match': ifNoneMatch });
    const setGender = jsonPatch([{ op: 'add', path: '/gender', value: 'male' }]);

    test('PATCH: 412 with * over an existing resource or an ETag naming the current version; patched otherwise; malformed is 400', async () => {
      const id = await patient(2);
      for (const header of ['*', 'W/"2"', '"2"', 'W/"1", W/"2"']) {
        const issue = await refused(() => api.call('PATCH', `Patient/${id}`, setGender, patchHeaders(header)), 412);
        expect(issue.diagnostics).toContain(`Patient/${id}`);
      }
      const patched = await api.call('PATCH', `Patient/${id}`, setGender, patchHeaders('W/"1"'));
      expect([patched.status, patched.headers.get('etag')]).toEqual([200, 'W/"3"']);
      const issue = await refused(() => api.call('PATCH', `Patient/${id}`, setGender, patchHeaders('W/3')), 400);
      expect(issue.expression).toEqual(['If-None-Match']);
      // A patch of a missing resource stays a 404 (RFC 9110 13.2.1: a request that fails without its preconditions ignores them).
      expect((await api.call('PATCH', 'Patient/inm-none', setGender, patchHeaders('*'))).status).toBe(404);
    });

    test('conditional PATCH: 412 when the match\'s current version is named', async () => {
      const id = await patient();
      await refused(() => api.call('PATCH', `Patient?identifier=urn:inm|${id}`, setGender, patchHeaders('W/"1"')), 412);
      await refused(() => api.call('PATCH', `Patient?identifier=urn:inm|${id}`, setGender, patchHeaders('*')), 412);
      expect((await api.call('PATCH', `Patient?identifier=urn:inm|${id}`, setGender, patchHeaders('W/"5"'))).status).toBe(200);
    });

    test('DELETE: 412 with * or the current ETag, and the resource stays; deleted otherwise, and * over nothing deletes nothing', async () => {
      const id = await patient();
      for (const header of ['*', 'W/"1"']) await refused(() => api.del(`Patient/${id}`, { 'If-None-Match': header }), 412);
      expect((await api.get(`Patient/${id}`)).status).toBe(200);
      expect((await api.del(`Patient/${id}`, { 'If-None-Match': 'W/"7"' })).status).toBe(200);
      expect((await api.get(`Patient/${id}`)).status).toBe(410);
      // Deleted: no current version, so * holds (and there is nothing to delete).
      expect((await api.del(`Patient/${id}`, { 'If-None-Match': '*' })).status).toBeLessThan(300);
      expect((await api.del('Patient/inm-never', { 'If-None-Match': '*' })).status).toBeLessThan(300);
      const issue = await refused(() => api.del(`Patient/${id}`, { 'If-None-Match': '*, W/"1"' }), 400);
      expect(issue.expression).toEqual(['If-None-Match']);
    });

    test('conditional DELETE: 412 when the match\'s current version is named, deleted otherwise', async () => {
      const id = await patient();
      await refused(() => api.del(`Patient?identifier=urn:inm|${id}`, { 'If-None-Match': '*' }), 412);
      expect((await api.get(`Patient/${id}`)).status).toBe(200);
      expect((await api.del(`Patient?identifier=urn:inm|${id}`, { 'If-None-Match': 'W/"2"' })).status).toBeLessThan(300);
      expect((await api.get(`Patient/${id}`)).status).toBe(410);
    });

    test('PATCH and DELETE entries\' request.ifNoneMatch: a transaction writes nothing when one fails, a batch answers that entry', async () => {
      const a = await patient();
      const b = await patient();
      const patchEntry = (id: string, ifNoneMatch: string) => ({
        resource: { resourceType: 'Binary', contentType: 'application/json-patch+json', data: Buffer.from(setGender).toString('base64') },
        request: { method: 'PATCH', url: `Patient/${id}`, ifNoneMatch },
      });
      const deleteEntry = (id: string, ifNoneMatch: string) => ({ request: { method: 'DELETE', url: `Patient/${id}`, ifNoneMatch } });
      const failed = await bundles.nothingWritten({ resourceType: 'Bundle', type: 'transaction', entry: [patchEntry(a, 'W/"9"'), deleteEntry(b, '*')] }, 412);
      expect(failed.issue[0].expression).toEqual(['Bundle.entry[1].request.ifNoneMatch']);
      const failedPatch = await bundles.nothingWritten({ resourceType: 'Bundle', type: 'transaction', entry: [deleteEntry(b, 'W/"9"'), patchEntry(a, 'W/"1"')] }, 412);
      expect(failedPatch.issue[0].diagnostics).toContain(`Patient/${a}`);
      expect(failedPatch.issue[0].expression).toEqual(['Bundle.entry[1].request.ifNoneMatch']);
      const batch = await bundles.ok({
        resourceType: 'Bundle', type: 'batch',
        entry: [patchEntry(a, '*'), deleteEntry(b, 'W/"1"'), patchEntry(a, 'W/"9"'), deleteEntry(b, 'W/1')],
      });
      expect(batch.entry.map((e: Json) => e.response.status)).toEqual(['412 Precondition Failed', '412 Precondition Failed', '200 OK', '400 Bad Request']);
      expect(batch.entry.map((e: Json) => e.response.outcome?.issue[0].expression)).toEqual([0, 1, undefined, 3].map((i) => i === undefined ? undefined : [`Bundle.entry[${i}].request.ifNoneMatch`]));
      expect([await version(a), await version(b)]).toEqual(['2', '1']);
    });

    test('GET keeps answering If-None-Match with 304', async () => {
      const id = await patient();
      expect((await api.get(`Patient/${id}`, { 'If-None-Match': '*' })).status).toBe(304);
      expect((await api.get(`Patient/${id}`, { 'If-None-Match': 'W/"1"' })).status).toBe(304);
    });
  });
});
