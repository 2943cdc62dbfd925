/**
 * `$meta`, `$meta-add` and `$meta-delete` (R4 Resource-meta, Resource-meta-add, Resource-meta-delete) on
 * both databases: the levels each takes, the new version a change makes (history, `_tag` / `_security` /
 * `_profile` searches), a change that changes nothing, a historical version, If-Match, concurrent
 * changes, profile validation, bad input, and the access checks of the interactions they resemble.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

const TAGS = 'http://example.org/tags';
const SEC = 'http://terminology.hl7.org/CodeSystem/v3-Confidentiality';
const BP = 'http://hl7.org/fhir/StructureDefinition/bp';

const metaParams = (meta: Json) => ({ resourceType: 'Parameters', parameter: [{ name: 'meta', valueMeta: meta }] });
const returned = (body: Json): Json => {
  expect(body.resourceType).toBe('Parameters');
  expect(body.parameter.map((p: Json) => p.name)).toEqual(['return']);
  return body.parameter[0].valueMeta;
};
const codes = (list: Json[] | undefined) => (list ?? []).map((c) => `${c.system ?? ''}|${c.code}`);

await eachStore((kind, fresh) => {
  describe(`$meta, $meta-add, $meta-delete (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    const ok = async (res: Response) => {
      const body = (await res.json()) as Json;
      expect({ status: res.status, body }).toMatchObject({ status: 200 });
      return returned(body);
    };

    test('instance $meta by GET and POST, and a version\'s by _history/{vid}/$meta', async () => {
      await api.put200({ resourceType: 'Patient', id: 'm1', meta: { tag: [{ system: TAGS, code: 'a' }] }, gender: 'male' });
      await api.put200({ resourceType: 'Patient', id: 'm1', meta: { tag: [{ system: TAGS, code: 'b' }] }, gender: 'male' });
      const now = await ok(await api.get('Patient/m1/$meta'));
      expect(now).toMatchObject({ versionId: '2', tag: [{ system: TAGS, code: 'b' }] });
      expect(typeof now.lastUpdated).toBe('string');
      expect(await ok(await api.post('Patient/m1/$meta', { resourceType: 'Parameters' }))).toEqual(now);
      expect(await ok(await api.get('Patient/m1/_history/1/$meta'))).toMatchObject({ versionId: '1', tag: [{ system: TAGS, code: 'a' }] });
      await expectOutcome(await api.get('Patient/nobody/$meta'), 404);
      // $meta takes no parameters: another is ignored, or a 400 naming it under strict handling.
      expect(await ok(await api.get('Patient/m1/$meta?foo=1'))).toEqual(now);
      expect((await expectOutcome(await api.get('Patient/m1/$meta?foo=1', { Prefer: 'handling=strict' }), 400)).issue[0].expression).toEqual(['foo']);
      const body = { resourceType: 'Parameters', parameter: [{ name: 'bar', valueString: 'x' }] };
      expect((await expectOutcome(await api.post('$meta', body, { Prefer: 'handling=strict' }), 400)).issue[0].expression).toEqual(['bar']);
      await expectOutcome(await api.get('Patient/m1/_history/7/$meta'), 404);
    });

    test('$meta-add makes a new version through the write path: history, _tag/_security/_profile searches; a repeat writes nothing', async () => {
      await api.put200({ resourceType: 'Patient', id: 'm2', gender: 'female' });
      const res = await api.post('Patient/m2/$meta-add', metaParams({
        tag: [{ system: TAGS, code: 'x', display: 'X' }, { system: TAGS, code: 'x' }], security: [{ system: SEC, code: 'R' }],
        profile: ['http://example.org/unknown-profile'],
      }));
      expect(res.headers.get('etag')).toBe('W/"2"');
      const meta = await ok(res);
      expect(meta).toMatchObject({ versionId: '2', tag: [{ system: TAGS, code: 'x', display: 'X' }], security: [{ system: SEC, code: 'R' }], profile: ['http://example.org/unknown-profile'] });
      expect((await (await api.get('Patient/m2')).json()).meta).toEqual(meta);
      expect(ids(await api.search(`Patient?_tag=${TAGS}|x`))).toEqual(['m2']);
      expect(ids(await api.search(`Patient?_security=${SEC}|R`))).toEqual(['m2']);
      expect(ids(await api.search(`Patient?_profile=${encodeURIComponent('http://example.org/unknown-profile')}`))).toEqual(['m2']);
      const history = await api.search('Patient/m2/_history');
      expect(history.entry.map((e: Json) => [e.resource.meta.versionId, e.request.method])).toEqual([['2', 'PATCH'], ['1', 'PUT']]);
      // Tags are sets by system and code: another display of the same tag adds nothing, and nothing is written.
      const again = await ok(await api.post('Patient/m2/$meta-add', metaParams({ tag: [{ system: TAGS, code: 'x', display: 'Other' }] })));
      expect(again).toEqual(meta);
    });

    test('$meta-add and $meta-delete keep the rest of the resource as stored: a decimal keeps its precision', async () => {
      // Written as text: a JavaScript literal would already have lost it.
      const text = '{"resourceType":"Observation","id":"dec","status":"final","code":{"text":"x"},"valueQuantity":{"value":1.50,"unit":"g"},"referenceRange":[{"low":{"value":12345678901234567890.50}}]}';
      expect((await api.put('Observation/dec', text)).status).toBe(201);
      for (const op of ['$meta-add', '$meta-delete']) {
        expect((await api.post(`Observation/dec/${op}`, metaParams({ tag: [{ system: TAGS, code: 'd' }] }))).status).toBe(200);
        const stored = await (await api.get('Observation/dec')).text();
        expect(stored).toContain('"valueQuantity":{"value":1.50,"unit":"g"}');
        expect(stored).toContain('"low":{"value":12345678901234567890.50}');
      }
    });

    test('$meta-delete removes by system and code (display and version ignored); absent ones are no error', async () => {
      await api.put200({ resourceType: 'Patient', id: 'm3', meta: { tag: [{ system: TAGS, code: 'k' }, { system: TAGS, code: 'gone', display: 'G' }], security: [{ system: SEC, code: 'N' }] } });
      const meta = await ok(await api.post('Patient/m3/$meta-delete', metaParams({ tag: [{ system: TAGS, code: 'gone', display: 'whatever', version: '9' }, { system: TAGS, code: 'never' }], security: [{ system: SEC, code: 'N' }] })));
      expect(meta.versionId).toBe('2');
      expect(codes(meta.tag)).toEqual([`${TAGS}|k`]);
      expect(meta.security).toBeUndefined();
      expect(ids(await api.search(`Patient?_tag=${TAGS}|gone`))).toEqual([]);
      expect(ids(await api.search(`Patient?_security=${SEC}|N`))).toEqual([]);
      expect(ids(await api.search(`Patient?_tag=${TAGS}|k`))).toEqual(['m3']);
      const none = await ok(await api.post('Patient/m3/$meta-delete', metaParams({ tag: [{ system: TAGS, code: 'never' }] })));
      expect(none.versionId).toBe('2');
    });

    test('on _history/{vid}: the current version is changed (a new version); an older one is a 409, an unknown one 404', async () => {
      await api.put200({ resourceType: 'Patient', id: 'm4' });
      await api.put200({ resourceType: 'Patient', id: 'm4', gender: 'other' });
      expect((await ok(await api.post('Patient/m4/_history/2/$meta-add', metaParams({ tag: [{ system: TAGS, code: 'v' }] })))).versionId).toBe('3');
      const old = await expectOutcome(await api.post('Patient/m4/_history/1/$meta-add', metaParams({ tag: [{ system: TAGS, code: 'w' }] })), 409, 'conflict');
      expect(old.issue[0].diagnostics).toContain('not its current version');
      await expectOutcome(await api.post('Patient/m4/_history/2/$meta-delete', metaParams({ tag: [{ system: TAGS, code: 'v' }] })), 409);
      await expectOutcome(await api.post('Patient/m4/_history/9/$meta-add', metaParams({ tag: [{ system: TAGS, code: 'w' }] })), 404);
      // The stored versions are as they were written.
      expect((await (await api.get('Patient/m4/_history/1')).json()).meta.tag).toBeUndefined();
    });

    test('If-Match: a stale version is a 412, the current one holds', async () => {
      await api.put200({ resourceType: 'Patient', id: 'm5' });
      await expectOutcome(await api.post('Patient/m5/$meta-add', metaParams({ tag: [{ system: TAGS, code: 'i' }] }), { 'If-Match': 'W/"4"' }), 412);
      expect((await ok(await api.post('Patient/m5/$meta-add', metaParams({ tag: [{ system: TAGS, code: 'i' }] }), { 'If-Match': 'W/"1"' }))).versionId).toBe('2');
    });

    test('concurrent $meta-add calls on one resource each land: no change is lost', async () => {
      await api.put200({ resourceType: 'Patient', id: 'm6' });
      const n = 8;
      const results = await Promise.all(Array.from({ length: n }, (_, i) => api.post('Patient/m6/$meta-add', metaParams({ tag: [{ system: TAGS, code: `c${i}` }] }))));
      expect(results.map((r) => r.status)).toEqual(Array(n).fill(200));
      const meta = await ok(await api.get('Patient/m6/$meta'));
      expect(meta.versionId).toBe(String(n + 1));
      expect(codes(meta.tag).sort()).toEqual(Array.from({ length: n }, (_, i) => `${TAGS}|c${i}`).sort());
    });

    test('a profile added is validated as a write claiming it is (422), and nothing is written', async () => {
      await api.put200({ resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' } });
      const outcome = await expectOutcome(await api.post('Observation/o1/$meta-add', metaParams({ profile: [BP] })), 422);
      expect(JSON.stringify(outcome)).toContain(BP);
      expect((await ok(await api.get('Observation/o1/$meta'))).versionId).toBe('1');
    });

    test('bad input is a 400 naming the element; GET of $meta-add is a 405', async () => {
      await api.put200({ resourceType: 'Patient', id: 'm7' });
      const cases: [unknown, string][] = [
        [{ resourceType: 'Patient' }, 'resourceType'],
        [{ resourceType: 'Parameters' }, 'Parameters.parameter'],
        [{ resourceType: 'Parameters', parameter: [{ name: 'tag', valueString: 'x' }] }, 'Parameters.parameter[0].name'],
        [{ resourceType: 'Parameters', parameter: [{ name: 'meta', valueString: 'x' }] }, 'Parameters.parameter[0].valueMeta'],
        [metaParams({ tag: [{ display: 'no code' }] }), 'Parameters.parameter[0].valueMeta.tag[0]'],
        [metaParams({ tag: { system: TAGS, code: 'x' } }), 'Parameters.parameter[0].valueMeta.tag'],
        [metaParams({ profile: [7] }), 'Parameters.parameter[0].valueMeta.profile'],
      ];
      for (const [body, expression] of cases) {
        const outcome = await expectOutcome(await api.post('Patient/m7/$meta-add', body), 400);
        expect({ body, expression: outcome.issue[0].expression }).toEqual({ body, expression: [expression] });
      }
      expect((await api.get('Patient/m7/$meta-add')).status).toBe(405);
      await expectOutcome(await api.post('Patient/nobody/$meta-add', metaParams({ tag: [{ system: TAGS, code: 'x' }] })), 404);
      await expectOutcome(await api.get('NotAType/$meta'), 404);
    });

    test('type- and system-level $meta: the union in use on current resources, per tenant, from the index', async () => {
      const other = fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't2');
      await other.put200({ resourceType: 'Patient', id: 'elsewhere', meta: { tag: [{ system: TAGS, code: 'other-tenant' }] } });
      await api.put200({ resourceType: 'Basic', id: 'u1', code: { text: 'b' }, meta: { tag: [{ system: 'urn:u', code: 'z' }, { code: 'nosystem' }], security: [{ system: SEC, code: 'V' }] } });
      await api.put200({ resourceType: 'Basic', id: 'u2', code: { text: 'b' }, meta: { tag: [{ system: 'urn:u', code: 'a' }, { system: 'urn:u', code: 'z' }], profile: ['http://example.org/p'] } });
      await api.put200({ resourceType: 'Basic', id: 'u3', code: { text: 'b' }, meta: { tag: [{ system: 'urn:u', code: 'deleted-only' }] } });
      expect((await api.del('Basic/u3')).status).toBe(200);
      const basic = await ok(await api.get('Basic/$meta'));
      expect(basic).toEqual({ profile: ['http://example.org/p'], security: [{ system: SEC, code: 'V' }], tag: [{ code: 'nosystem' }, { system: 'urn:u', code: 'a' }, { system: 'urn:u', code: 'z' }] });
      expect(await ok(await api.post('Basic/$meta', { resourceType: 'Parameters' }))).toEqual(basic);
      const all = await ok(await api.get('$meta'));
      expect(codes(all.tag)).toContain('urn:u|z');
      expect(codes(all.tag)).toContain(`${TAGS}|x`);
      expect(codes(all.tag)).not.toContain('urn:u|deleted-only');
      expect(codes(all.tag)).not.toContain(`${TAGS}|other-tenant`);
      expect(all.profile).toContain('http://example.org/p');
      expect(await ok(await other.get('$meta'))).toEqual({ tag: [{ system: TAGS, code: 'other-tenant' }] });
    });

    test('type-level $meta lists a tag or security label of a system alone as its system (no empty code), on both databases alike', async () => {
      await api.put200({ resourceType: 'Device', id: 'sys-alone', meta: { tag: [{ system: 'urn:alone' }, { system: 'urn:alone', code: 'a' }], security: [{ system: SEC }] } });
      expect(await ok(await api.get('Device/$meta'))).toEqual({ security: [{ system: SEC }], tag: [{ system: 'urn:alone' }, { system: 'urn:alone', code: 'a' }] });
    });

    test('access: read for $meta, update for the changes; scope filters, patient context', async () => {
      await api.put200({ resourceType: 'Patient', id: 'pa' });
      await api.put200({ resourceType: 'Patient', id: 'pb', gender: 'male' });
      await api.put200({ resourceType: 'Observation', id: 'oa', status: 'final', code: { text: 'a' }, subject: { reference: 'Patient/pa' }, meta: { tag: [{ system: TAGS, code: 'pa-only' }] } });
      await api.put200({ resourceType: 'Observation', id: 'ob', status: 'final', code: { text: 'b' }, subject: { reference: 'Patient/pb' }, meta: { tag: [{ system: TAGS, code: 'pb-only' }] } });
      const add = metaParams({ tag: [{ system: TAGS, code: 'by-token' }] });

      const reader = fhirClient(t, await craftToken(t, 'system/Patient.rs system/Observation.rs'));
      expect((await reader.get('Patient/pa/$meta')).status).toBe(200);
      await expectOutcome(await reader.post('Patient/pa/$meta-add', add), 403, 'forbidden');
      await expectOutcome(await fhirClient(t, await craftToken(t, 'system/Observation.rs')).get('Patient/pa/$meta'), 403);

      const own = fhirClient(t, await craftToken(t, 'patient/*.cruds', { patient: 'pa' }));
      expect((await own.post('Observation/oa/$meta-add', add)).status).toBe(200);
      await expectOutcome(await own.post('Observation/ob/$meta-add', add), 403);
      await expectOutcome(await own.get('Observation/ob/$meta'), 403);
      // The union at the type level would tell what other patients' Observations carry.
      await expectOutcome(await own.get('Observation/$meta'), 403, 'forbidden');
      expect(await ok(await own.get('$meta'))).toEqual({});

      const filtered = fhirClient(t, await craftToken(t, 'system/Patient.cruds?gender=male'));
      expect((await filtered.post('Patient/pb/$meta-add', add)).status).toBe(200);
      await expectOutcome(await filtered.post('Patient/pa/$meta-add', add), 403);
      await expectOutcome(await filtered.get('Patient/$meta'), 403);

      // A Binary is read through its securityContext: a token that may not read every resource a context
      // names reads Binary in part, so the union would tell the labels of Binaries it may not read.
      await api.put200({ resourceType: 'Binary', id: 'bb', contentType: 'text/plain', data: 'aGk=', securityContext: { reference: 'Patient/pb' }, meta: { tag: [{ system: TAGS, code: 'pb-binary' }], security: [{ system: TAGS, code: 'pb-label' }] } });
      const binaries = fhirClient(t, await craftToken(t, 'system/Binary.rs'));
      await expectOutcome(await binaries.get('Binary/bb/$meta'), 403);
      await expectOutcome(await binaries.get('Binary/$meta'), 403, 'forbidden');
      expect(await ok(await binaries.get('$meta'))).toEqual({});
      const female = fhirClient(t, await craftToken(t, 'system/Binary.rs system/Patient.rs?gender=female'));
      await expectOutcome(await female.get('Binary/$meta'), 403, 'forbidden');
      expect(JSON.stringify(await ok(await female.get('$meta')))).not.toContain('pb-');
      // A token reading every resource reads every Binary.
      expect((await ok(await api.get('Binary/$meta'))).tag).toEqual([{ system: TAGS, code: 'pb-binary' }]);

      const elsewhere = fhirClient(t, await t.tokenFor('t3', ['system/*.*']), 't1');
      await expectOutcome(await elsewhere.get('Patient/pa/$meta'), 403);
      await expectOutcome(await elsewhere.post('Patient/pa/$meta-add', add), 403);
    });
  });
});
