/**
 * An update that changes nothing is the no-op it is (200, the current version, no new version), even where
 * the rules of this release or level refuse the stored resource: it was stored before them (under
 * CINDER_VALIDATION=structural here, or by an earlier release), and a client that PUTs back what it read must
 * not fail after every upgrade that tightens validation. Any change is validated as before (422), and so is
 * the same content from a token whose reach of the type is limited. On both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { putVersion } from '../../src/fhir/crud.ts';
import { operatorAccess } from '../../src/fhir/access.ts';
import type { Resource } from '../../src/fhir/resource.ts';

/** A Patient strict validation refuses (its gender is outside the required AdministrativeGender binding), which `structural` stores. */
const legacy = (id: string): Json => ({ resourceType: 'Patient', id, active: true, gender: 'banana', name: [{ family: 'Legacy' }] });

/** The `expression`s of an OperationOutcome's issues. */
const where = (outcome: Json): string[] => (outcome.issue as Json[]).flatMap((i) => (i.expression as string[] | undefined) ?? []);

await eachStore((kind, fresh) => {
  describe(`an unchanged update of a resource the rules now refuse (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    /** Stores `resource` as its current version, as an earlier release or `structural` did: through the store, unvalidated. */
    const storeUnvalidated = (resource: Json) =>
      t.store.resources.write('t1', (w) => putVersion(w, resource as Resource, resource.id as string, { now: t.clock.now(), access: operatorAccess }, 'PUT'));
    /** The current version id of `type/id` as stored. */
    const versionOf = async (type: string, id: string) => (await t.store.resources.read('t1', type, id))!.versionId;

    test('PUT of the stored content answers 200 with the current version and writes none; a change is still a 422', async () => {
      await storeUnvalidated(legacy('p1'));
      const stored = (await (await api.get('Patient/p1')).json()) as Json;
      expect(stored.meta.versionId).toBe('1');
      // What the client read, PUT back: the no-op it is.
      const same = await api.put('Patient/p1', stored);
      expect(same.status).toBe(200);
      expect(same.headers.get('etag')).toBe('W/"1"');
      expect(((await same.json()) as Json).meta.versionId).toBe('1');
      // Asked for an outcome: unchanged, with what the rules refuse in it as warnings.
      const told = (await (await api.put('Patient/p1', stored, { Prefer: 'return=OperationOutcome' })).json()) as Json;
      expect((told.issue as Json[]).map((i) => [i.severity, i.expression?.[0]])).toEqual([['information', undefined], ['warning', 'Patient.gender']]);
      expect(told.issue[0].diagnostics).toContain('Patient/p1 unchanged');
      // Without its meta, too (versionId and lastUpdated are the server's).
      expect((await api.put('Patient/p1', legacy('p1'))).status).toBe(200);
      expect(await versionOf('Patient', 'p1')).toBe(1);
      // Any change is validated: the 422 names the element the rules refuse.
      const changed = await expectOutcome(await api.put('Patient/p1', { ...legacy('p1'), active: false }), 422);
      expect(where(changed)).toEqual(['Patient.gender']);
      expect(await versionOf('Patient', 'p1')).toBe(1);
      // A correction is written.
      const fixed = await api.put('Patient/p1', { ...legacy('p1'), gender: 'unknown' });
      expect(fixed.status).toBe(200);
      expect(await versionOf('Patient', 'p1')).toBe(2);
    });

    test('a vital sign stored before the vital-signs profile applied to it unclaimed is sent back unchanged', async () => {
      // Heart rate without the subject and effective[x] the profile requires.
      const pulse: Json = {
        resourceType: 'Observation', id: 'hr1', status: 'final',
        category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
        code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }] },
        valueQuantity: { value: 72, unit: 'beats/minute', system: 'http://unitsofmeasure.org', code: '/min' },
      };
      await storeUnvalidated(pulse);
      expect((await api.put('Observation/hr1', pulse)).status).toBe(200);
      expect(await versionOf('Observation', 'hr1')).toBe(1);
      const changed = await expectOutcome(await api.put('Observation/hr1', { ...pulse, valueQuantity: { ...(pulse.valueQuantity as Json), value: 73 } }), 422);
      expect(where(changed)).toEqual(['Observation.subject', 'Observation.effective']);
      expect(await versionOf('Observation', 'hr1')).toBe(1);
    });

    test('a conditional update matching it is the no-op too; one matching nothing or several is refused as before', async () => {
      const identified = (id: string): Json => ({ ...legacy(id), identifier: [{ system: 'urn:oid:2.16.840.1.113883.4.1', value: `cond-${id}` }] });
      await storeUnvalidated(identified('p5'));
      const same = await api.put('Patient?identifier=urn:oid:2.16.840.1.113883.4.1|cond-p5', identified('p5'));
      expect(same.status).toBe(200);
      expect(((await same.json()) as Json).meta.versionId).toBe('1');
      const { id: _, ...unidentified } = identified('p5');
      expect((await api.put('Patient?identifier=urn:oid:2.16.840.1.113883.4.1|cond-p5', unidentified)).status).toBe(200);
      expect(where(await expectOutcome(await api.put('Patient?identifier=urn:oid:2.16.840.1.113883.4.1|cond-p5', { ...identified('p5'), active: false }), 422))).toEqual(['Patient.gender']);
      expect(await versionOf('Patient', 'p5')).toBe(1);
      // No match: a create, validated.
      await expectOutcome(await api.put('Patient?identifier=urn:oid:2.16.840.1.113883.4.1|nobody', { ...unidentified, identifier: [] }), 422);
      // Several matches: the refusal, as before the search.
      await storeUnvalidated(legacy('p6'));
      await expectOutcome(await api.put('Patient?active=true', unidentified), 422);
    });

    test('a transaction PUT or PATCH entry of the stored content is the no-op; a changed one refuses the transaction', async () => {
      await storeUnvalidated(legacy('p7'));
      await storeUnvalidated(legacy('p9'));
      const fresh: Json = { resourceType: 'Patient', active: true, gender: 'female' };
      const replaceActive = (value: boolean): Json => ({
        resourceType: 'Parameters',
        parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Patient.active' }, { name: 'value', valueBoolean: value }] }],
      });
      const bundle = (type: string, ...entry: Json[]) => api.post('', { resourceType: 'Bundle', type, entry });
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `Patient/${resource.id}` } });
      const res = await bundle('transaction', put(legacy('p7')), { fullUrl: 'urn:uuid:5b0e4a1c-3b7e-4f0e-9a53-0c6a5f1d2e01', resource: fresh, request: { method: 'POST', url: 'Patient' } },
        { resource: replaceActive(true), request: { method: 'PATCH', url: 'Patient/p9' } });
      const out = (await res.json()) as Json;
      expect(res.status).toBe(200);
      expect((out.entry as Json[]).map((e) => [e.response.status, e.response.etag])).toEqual([['200 OK', 'W/"1"'], ['201 Created', 'W/"1"'], ['200 OK', 'W/"1"']]);
      const warned = (e: Json) => (e.response.outcome.issue as Json[]).filter((i) => i.severity === 'warning').map((i) => i.expression[0]);
      expect(warned(out.entry[0])).toEqual(['Bundle.entry[0].resource.gender']);
      expect(warned(out.entry[2])).toEqual(['Patient.gender']);
      expect([await versionOf('Patient', 'p7'), await versionOf('Patient', 'p9')]).toEqual([1, 1]);
      const before = (await t.store.resources.history('t1', { count: 100000 })).length;
      const refused = await expectOutcome(await bundle('transaction', put({ ...legacy('p7'), active: false }), { resource: fresh, request: { method: 'POST', url: 'Patient' } }), 422);
      expect(where(refused)).toEqual(['Bundle.entry[0].resource.gender']);
      await expectOutcome(await bundle('transaction', { resource: replaceActive(false), request: { method: 'PATCH', url: 'Patient/p9' } }), 422);
      expect((await t.store.resources.history('t1', { count: 100000 })).length).toBe(before);
      expect([await versionOf('Patient', 'p7'), await versionOf('Patient', 'p9')]).toEqual([1, 1]);
    });

    test('a transaction entry refused by both base validation and a profile is the no-op, its outcome warning of both', async () => {
      const pulse: Json = {
        resourceType: 'Observation', id: 'hr2', status: 'bogus',
        category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
        code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }] },
        valueQuantity: { value: 72, unit: 'beats/minute', system: 'http://unitsofmeasure.org', code: '/min' },
      };
      await storeUnvalidated(pulse);
      const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: pulse, request: { method: 'PUT', url: 'Observation/hr2' } }] });
      expect(res.status).toBe(200);
      const [entry] = ((await res.json()) as Json).entry as Json[];
      const warned = (entry!.response.outcome.issue as Json[]).filter((i) => i.severity === 'warning').flatMap((i) => i.expression as string[]);
      expect(warned).toContain('Bundle.entry[0].resource.status');
      expect(warned).toContain('Bundle.entry[0].resource.subject');
      expect(await versionOf('Observation', 'hr2')).toBe(1);
    });

    test('a batch PUT entry of the stored content is the no-op; a changed one is that entry\'s 422', async () => {
      await storeUnvalidated(legacy('p8'));
      const res = await api.post('', {
        resourceType: 'Bundle', type: 'batch',
        entry: [
          { resource: legacy('p8'), request: { method: 'PUT', url: 'Patient/p8' } },
          { resource: { ...legacy('p8'), active: false }, request: { method: 'PUT', url: 'Patient/p8' } },
        ],
      });
      expect(res.status).toBe(200);
      const [same, changed] = ((await res.json()) as Json).entry as Json[];
      expect(same!.response.status).toBe('200 OK');
      expect(same!.response.etag).toBe('W/"1"');
      expect(changed!.response.status).toStartWith('422');
      expect(await versionOf('Patient', 'p8')).toBe(1);
    });

    test('If-Match holds on the no-op as on any update', async () => {
      await storeUnvalidated(legacy('p2'));
      expect((await api.put('Patient/p2', legacy('p2'), { 'If-Match': 'W/"1"' })).status).toBe(200);
      await expectOutcome(await api.put('Patient/p2', legacy('p2'), { 'If-Match': 'W/"7"' }), 412);
      expect(await versionOf('Patient', 'p2')).toBe(1);
    });

    test('PATCH yielding the stored content is the no-op; one that changes it is a 422', async () => {
      await storeUnvalidated(legacy('p3'));
      const patch = (ops: Json[]) => api.call('PATCH', 'Patient/p3', ops, { 'Content-Type': 'application/json-patch+json' });
      const same = await patch([{ op: 'replace', path: '/active', value: true }]);
      expect(same.status).toBe(200);
      expect(((await same.json()) as Json).meta.versionId).toBe('1');
      expect(where(await expectOutcome(await patch([{ op: 'replace', path: '/active', value: false }]), 422))).toEqual(['Patient.gender']);
      expect(await versionOf('Patient', 'p3')).toBe(1);
    });

    test('a token that cannot update the type is refused as before, and one limited to a patient is validated', async () => {
      await storeUnvalidated(legacy('p4'));
      const reader = fhirClient(t, await craftToken(t, 'system/Patient.read'));
      await expectOutcome(await reader.put('Patient/p4', legacy('p4')), 422);
      const own = fhirClient(t, await craftToken(t, 'patient/Patient.*', { patient: 'p4' }));
      await expectOutcome(await own.put('Patient/p4', legacy('p4')), 422);
      expect(await versionOf('Patient', 'p4')).toBe(1);
    });
  });
});
