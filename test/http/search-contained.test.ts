/**
 * Chains into contained resources (R4 search: "a chained condition will be evaluated inside contained
 * resources"), on both databases: `Observation?subject:Patient.name=..` finds an Observation whose
 * subject is a Patient it contains as well as one whose subject is a stored Patient, through every
 * parameter type, `:missing` and `:not`, several levels (contained to contained, contained to stored),
 * `_filter`, updates and deletions, a Bundle's inline composition and message; contained resources are
 * results only with `_contained` (containers, or the contained resources with `_containedType=contained`,
 * paged, counted, within the token's scopes); the in-memory matcher (a SMART scope filter) agrees; and a
 * database of index model 5 gets the rows by the reindex.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { compartmentsOf, storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, reindex } from '../../src/fhir/reindex.ts';
import { parameterCondition } from '../../src/fhir/search-compile.ts';
import { NOTHING, selectsNothing, withoutAbsentKeys } from '../../src/store/search-sql.ts';
import type { Condition, SearchQuery } from '../../src/store/types.ts';
import type { TestApp } from '../helpers/app.ts';
import { download, finish, kickOff, refs } from '../helpers/export.ts';
import { expectOutcome, fhirClient, matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh, statementRunner } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const code = { coding: [{ system: 'http://loinc.org', code: '718-7' }] };
const RX = 'http://www.nlm.nih.gov/research/umls/rxnorm';

const observation = (id: string, extra: Json): Json => ({ resourceType: 'Observation', id, status: 'final', code, ...extra });
const patient = (id: string, extra: Json = {}): Json => ({ resourceType: 'Patient', id, ...extra });

const DATA: Json[] = [
  patient('ext1', { name: [{ family: 'Taylor' }], gender: 'male', birthDate: '1950-01-01' }),
  { resourceType: 'Organization', id: 'acme', name: 'Acme Health' },
  // A stored Medication and the ones the requests contain.
  { resourceType: 'Medication', id: 'med2', code: { coding: [{ system: RX, code: '123' }] } },
  observation('o1', { contained: [patient('p1', { name: [{ family: 'Taylor', given: ['Ann'] }], gender: 'female', birthDate: '1970-05-01' })], subject: { reference: '#p1' } }),
  observation('o2', { subject: { reference: 'Patient/ext1' } }),
  observation('o3', { contained: [patient('p1', { name: [{ family: 'Jones' }] })], subject: { reference: '#p1' } }),
  // A contained Patient that the subject does not name (the performer does).
  observation('o4', { contained: [patient('x', { name: [{ family: 'Taylor' }] })], subject: { reference: 'Patient/ext1' }, performer: [{ reference: '#x' }] }),
  // A contained Practitioner named Taylor as the performer; no subject.
  observation('o5', { contained: [{ resourceType: 'Practitioner', id: 'pr', name: [{ family: 'Taylor' }] }], performer: [{ reference: '#pr' }] }),
  // Contained to contained, and contained to stored.
  observation('o6', {
    contained: [patient('p', { name: [{ family: 'Lee' }], managingOrganization: { reference: '#org' } }), { resourceType: 'Organization', id: 'org', name: 'Acme Clinic' }],
    subject: { reference: '#p' },
  }),
  observation('o7', { contained: [patient('p', { managingOrganization: { reference: 'Organization/acme' } })], subject: { reference: '#p' } }),
  // A Location, not a Patient, as the subject.
  observation('o8', { contained: [{ resourceType: 'Location', id: 'l', name: 'Taylor' }], subject: { reference: '#l' } }),
  ...['mr1', 'mr2', 'mr3'].map((id, i): Json => ({
    resourceType: 'MedicationRequest', id, status: 'active', intent: 'order', subject: { reference: 'Patient/ext1' },
    ...(i === 0 ? { contained: [{ resourceType: 'Medication', id: 'm', code: { coding: [{ system: RX, code: '123' }] }, form: { text: 'tablet' } }], medicationReference: { reference: '#m' } }
      : i === 1 ? { medicationReference: { reference: 'Medication/med2' } }
      : { medicationCodeableConcept: { coding: [{ system: RX, code: '123' }] } }),
  })),
];

for (const target of targets) {
  describe(`chains into contained resources on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ids = async (query: string) => ((await api.search(`${query}&_count=100`)).entry ?? []).map((e: Json) => e.resource.id as string).sort();

    beforeAll(async () => {
      ({ t, api } = await appOnFresh(target));
      for (const r of DATA) await api.put200(r);
    }, 60_000);
    afterAll(() => t.close());

    test('a chain finds the contained target its reference names, beside stored ones', async () => {
      expect(await ids('Observation?subject:Patient.name=taylor')).toEqual(['o1', 'o2', 'o4']);
      expect(await ids('Observation?subject.name=taylor')).toEqual(['o1', 'o2', 'o4', 'o8']);
      expect(await ids('Observation?patient.name=taylor')).toEqual(['o1', 'o2', 'o4']);
      expect(await ids('Observation?subject:Patient.family=jones')).toEqual(['o3']);
      expect(await ids('Observation?performer:Patient.name=taylor')).toEqual(['o4']);
      expect(await ids('Observation?performer:Practitioner.name=taylor')).toEqual(['o5']);
      expect(await ids('Observation?subject:Location.name=taylor')).toEqual(['o8']);
      // Tokens, dates, exact strings, ORed values, several chains ANDed.
      expect(await ids('Observation?subject:Patient.gender=female')).toEqual(['o1']);
      expect(await ids('Observation?subject:Patient.gender=female,male')).toEqual(['o1', 'o2', 'o4']);
      expect(await ids('Observation?subject:Patient.birthdate=ge1960')).toEqual(['o1']);
      expect(await ids('Observation?subject:Patient.birthdate=lt1960')).toEqual(['o2', 'o4']);
      expect(await ids('Observation?subject:Patient.name:exact=Taylor')).toEqual(['o1', 'o2', 'o4']);
      expect(await ids('Observation?subject:Patient.given=ann&subject:Patient.family=taylor')).toEqual(['o1']);
      expect(await ids('MedicationRequest?medication.code=123')).toEqual(['mr1', 'mr2']);
      expect(await ids(`MedicationRequest?medication.code=${encodeURIComponent(`${RX}|123`)}`)).toEqual(['mr1', 'mr2']);
      expect(await ids('MedicationRequest?medication.form:text=tab')).toEqual(['mr1']);
      expect(await ids('MedicationRequest?code=123')).toEqual(['mr3']);
      // Counted the same.
      expect((await api.search('Observation?subject:Patient.name=taylor&_summary=count')).total).toBe(3);
    });

    test('several levels: contained to contained, and contained to stored', async () => {
      expect(await ids('Observation?subject:Patient.organization.name=acme')).toEqual(['o6', 'o7']);
      expect(await ids('Observation?subject:Patient.organization.name=acme%20clinic')).toEqual(['o6']);
      expect(await ids('Observation?subject:Patient.organization=Organization/acme')).toEqual(['o7']);
      expect(await ids('Observation?subject:Patient.organization:missing=false')).toEqual(['o6', 'o7']);
      // The references to contained resources are there for `:missing`.
      expect(await ids('Observation?performer:missing=false')).toEqual(['o4', 'o5']);
      expect(await ids('Observation?subject:missing=true')).toEqual(['o5']);
      expect(await ids('Observation?patient:missing=false')).toEqual(['o1', 'o2', 'o3', 'o4', 'o6', 'o7']);
    });

    test(':missing and :not on a contained target need one to be there', async () => {
      // o3 (contained, no gender) and nothing without a Patient subject (o5, o8).
      expect(await ids('Observation?subject:Patient.gender:missing=true')).toEqual(['o3', 'o6', 'o7']);
      expect(await ids('Observation?subject:Patient.gender:not=female')).toEqual(['o2', 'o3', 'o4', 'o6', 'o7']);
      expect(await ids('Observation?subject:Patient.gender:missing=false')).toEqual(['o1', 'o2', 'o4']);
    });

    test('contained resources are not results of their own, and _filter chains into them too', async () => {
      expect(await ids('Patient?name=taylor')).toEqual(['ext1']);
      expect(await ids('Medication?code=123')).toEqual(['med2']);
      expect(await ids(`Observation?_filter=${encodeURIComponent('subject.name co "aylo"')}`)).toEqual(['o1', 'o2', 'o4', 'o8']);
      expect(await ids(`Observation?_filter=${encodeURIComponent('patient[gender eq female].name eq "taylor"')}`)).toEqual(['o1']);
      expect(await ids(`Observation?_filter=${encodeURIComponent('patient[gender eq male].name eq "taylor"')}`)).toEqual(['o2', 'o4']);
    });

    test('a bulk export filtered by a chain exports what the search finds', async () => {
      const token = await t.token();
      const status = await kickOff(t, token, `/$export?_type=Observation&_typeFilter=${encodeURIComponent('Observation?subject:Patient.name=taylor')}`);
      expect(refs(await download(t, token, (await finish(t, token, status)).output))).toEqual(['Observation/o1', 'Observation/o2', 'Observation/o4']);
    });

    test('a SMART scope filter with a chain admits what the search finds (the in-memory matcher)', async () => {
      const scoped = fhirClient(t, await t.tokenFor('t1', ['system/Observation.rs?subject:Patient.name=taylor', 'system/Patient.rs']));
      expect((await scoped.get('Observation/o1')).status).toBe(200);
      expect((await scoped.get('Observation/o2')).status).toBe(200);
      await expectOutcome(await scoped.get('Observation/o3'), 403);
      expect(((await scoped.search('Observation?_count=100')).entry ?? []).map((e: Json) => e.resource.id).sort()).toEqual(['o1', 'o2', 'o4']);
    });

    /** Each match of a search as [fullUrl below the FHIR base, resourceType/id], in the Bundle's order. */
    const found = async (query: string) => {
      const bundle = await api.search(query);
      return (bundle.entry ?? []).filter((e: Json) => e.search.mode === 'match')
        .map((e: Json) => [(e.fullUrl as string).slice(t.fhir().length + 1), `${e.resource.resourceType}/${e.resource.id}`]);
    };

    test('_contained=true finds the contained resources and returns their containers', async () => {
      expect(await found('Patient?family=taylor&_contained=true')).toEqual([['Observation/o1', 'Observation/o1'], ['Observation/o4', 'Observation/o4']]);
      expect(await found('Medication?code=123&_contained=true')).toEqual([['MedicationRequest/mr1', 'MedicationRequest/mr1']]);
      // Contained in a contained Patient (o6's Organization), and by its local id.
      expect(await found('Organization?name=acme&_contained=true')).toEqual([['Observation/o6', 'Observation/o6']]);
      expect(await found('Patient?_id=x&_contained=true')).toEqual([['Observation/o4', 'Observation/o4']]);
      expect(await found('Patient?gender=female&_contained=true')).toEqual([['Observation/o1', 'Observation/o1']]);
      // `false` (the default) is a search of the type's own resources.
      expect(await found('Patient?family=taylor&_contained=false')).toEqual([['Patient/ext1', 'Patient/ext1']]);
    });

    test('_contained=both adds the type\'s own matches, first', async () => {
      expect(await found('Patient?family=taylor&_contained=both')).toEqual([['Patient/ext1', 'Patient/ext1'], ['Observation/o1', 'Observation/o1'], ['Observation/o4', 'Observation/o4']]);
      expect(await found('Medication?code=123&_contained=both')).toEqual([['Medication/med2', 'Medication/med2'], ['MedicationRequest/mr1', 'MedicationRequest/mr1']]);
      expect((await api.search('Organization?name=acme&_contained=both&_summary=count')).total).toBe(2);
    });

    test('_containedType=contained returns each contained match alone, its fullUrl its container\'s with #id', async () => {
      expect(await found('Patient?family=taylor&_contained=true&_containedType=contained')).toEqual([['Observation/o1#p1', 'Patient/p1'], ['Observation/o4#x', 'Patient/x']]);
      expect(await found('Patient?family=taylor&_contained=both&_containedType=contained')).toEqual([['Patient/ext1', 'Patient/ext1'], ['Observation/o1#p1', 'Patient/p1'], ['Observation/o4#x', 'Patient/x']]);
      const med = await api.search('Medication?code=123&_contained=true&_containedType=contained');
      expect(med.total).toBe(1);
      expect((await api.search('Medication?code=123&_contained=true&_containedType=contained&_total=none')).total).toBeUndefined();
      expect(med.entry[0].resource).toEqual({ resourceType: 'Medication', id: 'm', code: { coding: [{ system: RX, code: '123' }] }, form: { text: 'tablet' } });
      expect(await found('Organization?name=acme&_contained=true&_containedType=contained')).toEqual([['Observation/o6#org', 'Organization/org']]);
      // Each contained resource is tested on its own: o6 also contains a Patient, not an Organization named acme.
      expect(await found('Patient?name=lee&_contained=true&_containedType=contained')).toEqual([['Observation/o6#p', 'Patient/p']]);
    });

    test('_contained pages, counts and totals across the container types', async () => {
      const all = ['o1', 'o3', 'o4', 'o6', 'o7'];
      expect(await matchesOfAllPages(api, 'Patient?_contained=true&_count=2')).toEqual(all);
      expect((await api.search('Patient?_contained=true&_summary=count')).total).toBe(all.length);
      expect((await api.search('Patient?_contained=true&_total=accurate&_count=2')).total).toBe(all.length);
      expect(await matchesOfAllPages(api, 'Patient?_contained=both&_count=2')).toEqual(['ext1', ...all]);
      const page = await api.search('Patient?_contained=true&_count=2');
      expect(page.link.find((l: Json) => l.relation === 'self').url).toContain('_contained=true');
      expect(page.link.find((l: Json) => l.relation === 'next').url).toContain('_contained=true');
    });

    test('_contained reaches only the containers the token may search', async () => {
      const patients = fhirClient(t, await t.tokenFor('t1', ['system/Patient.rs']));
      expect(((await patients.search('Patient?family=taylor&_contained=true')).entry ?? [])).toEqual([]);
      const both = fhirClient(t, await t.tokenFor('t1', ['system/Patient.rs', 'system/Observation.rs?subject:Patient.gender=female']));
      expect(((await both.search('Patient?family=taylor&_contained=true')).entry ?? []).map((e: Json) => e.resource.id)).toEqual(['o1']);
      await expectOutcome(await fhirClient(t, await t.tokenFor('t1', ['system/Observation.rs'])).get('Patient?_contained=true'), 403);
    });

    test('_contained: bad values, and what it cannot be used with, are 400s naming the parameter', async () => {
      for (const [q, expr] of [
        ['Patient?_contained=maybe', '_contained'],
        ['Patient?_contained=true&_containedType=inside', '_containedType'],
        ['Patient?_lastUpdated=gt2000&_contained=true', '_lastUpdated'],
        ['Patient?_has:Observation:subject:code=x&_contained=true', '_has'],
        ['Patient?_sort=name&_contained=true', '_sort'],
        ['Patient?_include=Patient:organization&_contained=true', '_include'],
        ['?_type=Patient&_contained=true', '_contained'],
      ]) {
        const body = await expectOutcome(await api.get(q), 400);
        expect([q, body.issue[0].expression]).toEqual([q, [expr]]);
      }
      await expectOutcome(await api.call('PUT', 'Patient?family=taylor&_contained=true', patient('new')), 400);
      const token = await t.token();
      const bad = await t.request(`${t.fhir()}/$export?_type=Patient&_typeFilter=${encodeURIComponent('Patient?_contained=true')}`, { headers: { Authorization: `Bearer ${token}`, Accept: 'application/fhir+json', Prefer: 'respond-async' } });
      expect(bad.status).toBe(400);
    });

    test('an update or a deletion of the container changes what the chain finds at once', async () => {
      await api.put200(observation('u1', { contained: [patient('p1', { name: [{ family: 'Novak' }] })], subject: { reference: '#p1' } }));
      expect(await ids('Observation?subject:Patient.name=novak')).toEqual(['u1']);
      await api.put200(observation('u1', { contained: [patient('p1', { name: [{ family: 'Horvat' }] })], subject: { reference: '#p1' } }));
      expect(await ids('Observation?subject:Patient.name=novak')).toEqual([]);
      expect(await ids('Observation?subject:Patient.name=horvat')).toEqual(['u1']);
      expect((await api.call('DELETE', 'Observation/u1')).ok).toBe(true);
      expect(await ids('Observation?subject:Patient.name=horvat')).toEqual([]);
    });

    test("a Bundle's composition and message are chained into inline", async () => {
      const composition = {
        resourceType: 'Composition', id: 'c1', status: 'final', type: { coding: [{ system: 'http://loinc.org', code: '60591-5' }] },
        subject: { reference: 'Patient/ext1' }, date: '2026-11-01', author: [{ display: 'Dr Who' }], title: 'Patient summary',
      };
      await api.put200({
        resourceType: 'Bundle', id: 'doc1', type: 'document', identifier: { system: 'urn:ietf:rfc:3986', value: 'urn:uuid:0c3151bd-1cbf-4d64-b04d-cd9187a4c6e0' },
        timestamp: '2026-11-01T10:00:00Z', entry: [{ fullUrl: 'urn:uuid:0c3151bd-1cbf-4d64-b04d-cd9187a4c6e1', resource: composition }],
      });
      await api.put200({
        resourceType: 'Bundle', id: 'msg1', type: 'message', timestamp: '2026-11-01T10:00:00Z',
        entry: [{
          fullUrl: 'urn:uuid:0c3151bd-1cbf-4d64-b04d-cd9187a4c6e2',
          resource: { resourceType: 'MessageHeader', id: 'h1', eventCoding: { system: 'http://example.org/events', code: 'admit' }, source: { endpoint: 'http://example.org/a' } },
        }],
      });
      expect(await ids('Bundle?composition.type=60591-5')).toEqual(['doc1']);
      expect(await ids('Bundle?composition.title=patient')).toEqual(['doc1']);
      expect(await ids('Bundle?composition.subject:Patient.name=taylor')).toEqual(['doc1']);
      expect(await ids('Bundle?composition.subject:Patient.name=jones')).toEqual([]);
      expect(await ids('Bundle?message.event=admit')).toEqual(['msg1']);
      expect(await ids('Bundle?composition.type=admit')).toEqual([]);
      expect(await ids('Composition?type=60591-5')).toEqual([]);
    });

    test('a reference parameter restricted to a type (AuditEvent.patient, EpisodeOfCare.care-manager) reaches a contained one', async () => {
      await api.put200({
        resourceType: 'AuditEvent', id: 'ae1', type: { system: 'http://dicom.nema.org/resources/ontology/DCM', code: '110110' }, recorded: '2026-11-01T10:00:00Z',
        contained: [patient('ap', { name: [{ family: 'Quill' }] }), { resourceType: 'Organization', id: 'ao', name: 'Quill Labs' }],
        agent: [{ who: { reference: '#ap' }, requestor: true }], entity: [{ what: { reference: '#ao' } }], source: { observer: { display: 'x' } },
      });
      await api.put200({
        resourceType: 'EpisodeOfCare', id: 'eoc1', status: 'active', patient: { reference: 'Patient/ext1' },
        contained: [{ resourceType: 'Practitioner', id: 'cm', name: [{ family: 'Quill' }] }], careManager: { reference: '#cm' },
      });
      expect(await ids('AuditEvent?patient.name=quill')).toEqual(['ae1']);
      expect(await ids('AuditEvent?patient:missing=false')).toEqual(['ae1']);
      // The entity is an Organization: `patient` (resolve() is Patient) does not name it.
      expect(await ids('AuditEvent?patient.name=quill%20labs')).toEqual([]);
      expect(await ids('EpisodeOfCare?care-manager.name=quill')).toEqual(['eoc1']);
      expect(await found('Patient?family=quill&_contained=true&_containedType=contained')).toEqual([['AuditEvent/ae1#ap', 'Patient/ap']]);
    });

    test('a chain or _has through a reference no resource made finds nothing, until one is written', async () => {
      const found = async (query: string) => ((await api.search(query)).entry ?? []).map((e: Json) => e.resource.id).sort();
      expect(await found('Observation?_has:Observation:has-member:code=718-7')).toEqual([]);
      expect((await api.search('Observation?_has:Observation:has-member:code=718-7&_summary=count')).total).toBe(0);
      expect(await found('Observation?has-member.code=718-7')).toEqual([]);
      expect(await found('Observation?_has:Observation:has-member:code:not=1234-5&_count=100')).toEqual([]);
      await api.put200(observation('panel', { hasMember: [{ reference: 'Observation/o2' }] }));
      expect(await found('Observation?_has:Observation:has-member:code=718-7')).toEqual(['o2']);
      expect((await api.search('Observation?_has:Observation:has-member:code=718-7&_summary=count')).total).toBe(1);
      expect(await found('Observation?has-member.code=718-7')).toEqual(['panel']);
      await api.call('DELETE', 'Observation/panel');
    });

    test('a tenant that never held a contained resource finds one as soon as it is written', async () => {
      const other = fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't2');
      const found = async () => ((await other.search('Observation?subject:Patient.name=taylor')).entry ?? []).map((e: Json) => e.resource.id).sort();
      await other.put200(patient('ext1', { name: [{ family: 'Taylor' }] }));
      await other.put200(observation('o2', { subject: { reference: 'Patient/ext1' } }));
      expect(await found()).toEqual(['o2']);
      expect((await other.search('Observation?subject:Patient.name=taylor&_summary=count')).total).toBe(1);
      await other.put200(observation('o1', { contained: [patient('p1', { name: [{ family: 'Taylor' }] })], subject: { reference: '#p1' } }));
      expect(await found()).toEqual(['o1', 'o2']);
      expect((await other.search('Observation?subject:Patient.name=taylor&_summary=count')).total).toBe(2);
    });

    test('a database of index model 5 gets the rows of contained resources by the reindex', async () => {
      // As model 5 wrote them: no rows under a contained resource's prefix.
      const page = await t.store.resources.indexing.page(0, 1000);
      const items = page.filter((r) => r.tenant === 't1' && (r.content.includes('"contained"') || r.type === 'Bundle')).map((r) => {
        const resource = JSON.parse(r.content);
        const index = storedIndex(resource);
        index.tokens = index.tokens.filter((e) => !e.param.includes('.') && !e.value.startsWith('#'));
        index.strings = index.strings.filter((e) => !e.param.includes('.'));
        index.ranges = index.ranges.filter((e) => !e.param.includes('.'));
        return { type: r.type, id: r.id, versionId: r.versionId, index, compartments: compartmentsOf(resource) };
      });
      expect(items.length).toBeGreaterThanOrEqual(8);
      await t.store.resources.write('t1', (w) => w.replaceIndex(items));
      await t.store.resources.indexing.setState({ model: 5, after: 0 });
      expect(await ids('Observation?subject:Patient.name=taylor')).toEqual(['o2', 'o4']);
      const run = await reindex(t.store);
      // Those of t1 (the Bundles too) and the one of t2.
      expect(run).toMatchObject({ ran: true, rebuilt: items.length + 1 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      expect(await ids('Observation?subject:Patient.name=taylor')).toEqual(['o1', 'o2', 'o4']);
      expect(await ids('MedicationRequest?medication.code=123')).toEqual(['mr1', 'mr2']);
      expect(await ids('Bundle?composition.type=60591-5')).toEqual(['doc1']);
    });

    test('a database of index model 6 gets the rows of contained resources a restricted parameter names by the reindex', async () => {
      // As model 6 wrote them: `where(resolve() is Patient)` did not see a contained Patient.
      const page = await t.store.resources.indexing.page(0, 1000);
      const items = page.filter((r) => r.tenant === 't1' && (r.type === 'AuditEvent' || r.type === 'EpisodeOfCare')).map((r) => {
        const resource = JSON.parse(r.content);
        const index = storedIndex(resource);
        index.tokens = index.tokens.filter((e) => !e.param.startsWith('patient') && !e.param.startsWith('care-manager'));
        index.strings = index.strings.filter((e) => !e.param.startsWith('patient:') && !e.param.startsWith('care-manager:'));
        return { type: r.type, id: r.id, versionId: r.versionId, index, compartments: compartmentsOf(resource) };
      });
      expect(items.map((i) => i.id).sort()).toEqual(['ae1', 'eoc1']);
      await t.store.resources.write('t1', (w) => w.replaceIndex(items));
      await t.store.resources.indexing.setState({ model: 6, after: 0 });
      expect(await ids('AuditEvent?patient.name=quill')).toEqual([]);
      const run = await reindex(t.store);
      // ae1 and eoc1; and, for model 11 (a Coding's display or a string text), mr1 (a form's text) and the
      // Bundle doc1 (an author's display).
      expect(run).toMatchObject({ ran: true, rebuilt: 4 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      expect(await ids('AuditEvent?patient.name=quill')).toEqual(['ae1']);
      expect(await ids('EpisodeOfCare?care-manager.name=quill')).toEqual(['eoc1']);
    });
  });
}

for (const target of targets) {
  describe(`a contained quantity's rows on ${target.kind}`, () => {
    const UCUM = 'http://unitsofmeasure.org';
    const contained = (id: string, value: number, unit: string): Json =>
      observation(id, { valueQuantity: { value, unit, system: UCUM, code: unit } });

    test('are searched with _contained and through chains, but hold no rows for _sort (only its own sort rows are kept)', async () => {
      const { t, api, url } = await appOnFresh(target);
      try {
        await api.put200({ resourceType: 'DiagnosticReport', id: 'dr1', status: 'final', code, contained: [contained('q', 5.4, 'mg')], result: [{ reference: '#q' }] });
        await api.put200(observation('own', { valueQuantity: { value: 7, unit: 'mg', system: UCUM, code: 'mg' } }));
        // A document Bundle: its Composition, indexed inline, holds an Observation it refers to.
        await api.put200({
          resourceType: 'Bundle', id: 'doc', type: 'document', timestamp: '2024-01-01T00:00:00Z', identifier: { system: 'urn:x', value: 'doc' },
          entry: [{
            fullUrl: 'urn:uuid:6a1f8d1e-9a3b-4c5d-8e7f-0a1b2c3d4e5f',
            resource: {
              resourceType: 'Composition', status: 'final', type: code, date: '2024-01-01', title: 'Doc', author: [{ display: 'A' }],
              contained: [contained('cq', 2, 'g')], section: [{ title: 'S', entry: [{ reference: '#cq' }] }],
            },
          }],
        });
        const runner = await statementRunner(target.kind, url);
        try {
          const rows = (await runner.runner.rows('SELECT k.type, k.param FROM search_range r JOIN search_keys k ON k.k = r.k', [])) as { type: string; param: string }[];
          const params = rows.map((r) => `${r.type} ${r.param}`);
          // The contained Observations' quantities are indexed under their prefixes, without their sort rows.
          expect(params).toContain('DiagnosticReport result:Observation.value-quantity');
          expect(params).toContain('Bundle composition:Composition.entry:Observation.value-quantity');
          expect(params.filter((p) => p.includes('.') && p.endsWith(':sort'))).toEqual([]);
          // A stored resource keeps its own.
          expect(params).toContain('Observation value-quantity:sort');
        } finally {
          await runner.close();
        }
        const found = async (query: string) => ((await api.search(query)).entry ?? []).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();
        expect(await found(`Observation?value-quantity=5.4|${UCUM}|mg&_contained=true`)).toEqual(['DiagnosticReport/dr1']);
        expect(await found(`Observation?value-quantity=5400|${UCUM}|ug&_contained=true`)).toEqual(['DiagnosticReport/dr1']);
        expect(await found('Observation?value-quantity=gt5&_contained=both')).toEqual(['DiagnosticReport/dr1', 'Observation/own']);
        expect(await found(`DiagnosticReport?result.value-quantity=lt6|${UCUM}|mg`)).toEqual(['DiagnosticReport/dr1']);
        expect(await found(`Bundle?composition.entry:Observation.value-quantity=2000|${UCUM}|mg`)).toEqual(['Bundle/doc']);
        await expectOutcome(await api.get('Observation?_sort=value-quantity&_contained=true'), 400);
      } finally {
        await t.close();
      }
    }, 60_000);
  });
}

describe('withoutAbsentKeys', () => {
  const compile = (type: string, key: string, raw: string) => parameterCondition(type, key, raw, Date.now()) as Condition;
  const query = (...where: Condition[]): SearchQuery => ({ type: 'Observation', where, sort: [], count: 10 });
  const asked: string[] = [];
  /** Keys of references exist; of contained resources' ids, those `contained` accepts. */
  const keys = (contained: (type: string, param: string) => boolean) => (type: string, param: string, system: string) =>
    (asked.push(`${type} ${param} ${system}`.trim()), system !== '' || contained(type, param));

  test('drops the alternative on contained resources where the type never had one there', async () => {
    const chained = compile('Observation', 'subject:Patient.name', 'taylor');
    expect(chained).toMatchObject({ kind: 'or', contained: 'subject:Patient._id', any: [{ kind: 'chain' }, { kind: 'string', param: 'subject:Patient.name' }] });
    asked.length = 0;
    const none = await withoutAbsentKeys(query(chained), keys(() => false));
    expect(none.where).toEqual([(chained as Extract<Condition, { kind: 'or' }>).any[0]!]);
    expect(asked).toEqual(['Observation subject:Patient._id', 'Observation subject Patient']);
    const q = query(chained);
    expect(await withoutAbsentKeys(q, () => true)).toBe(q);
    // Nested: the inner chain's alternative is the Patient's (contained to stored), asked of Patient.
    const nested = compile('Observation', 'subject:Patient.organization.name', 'acme');
    asked.length = 0;
    const pruned = await withoutAbsentKeys(query(nested), keys(() => false));
    expect(asked).toEqual(['Observation subject:Patient._id', 'Observation subject Patient', 'Patient organization:Organization._id', 'Patient organization Organization']);
    expect(JSON.stringify(pruned.where)).not.toContain('"contained"');
    expect(pruned.where).toEqual([{ kind: 'chain', param: 'subject', targetType: 'Patient', where: [{ kind: 'chain', param: 'organization', targetType: 'Organization', where: [expect.objectContaining({ kind: 'string', param: 'name' })] }] }]);
    // Kept, the contained Patient's own alternative (a contained Organization) is asked of Observation.
    asked.length = 0;
    await withoutAbsentKeys(query(nested), keys((type, param) => type === 'Observation' && !param.includes('Organization')));
    expect(asked).toEqual([
      'Observation subject:Patient._id', 'Observation subject Patient', 'Patient organization:Organization._id', 'Patient organization Organization',
      'Observation subject:Patient.organization:Organization._id', 'Observation subject:Patient.organization Organization',
    ]);
    // A search without chains or _has is left as it is.
    const plain = query(compile('Observation', 'code', '718-7'));
    expect(await withoutAbsentKeys(plain, () => { throw new Error('not asked'); })).toBe(plain);
  });

  test('a chain or _has through reference rows that were never written selects nothing', async () => {
    const has = compile('Patient', '_has:Observation:subject:code', '718-7');
    asked.length = 0;
    const none = await withoutAbsentKeys({ type: 'Patient', where: [has], sort: [], count: 10 }, () => false);
    expect(none.where).toEqual([NOTHING]);
    expect(selectsNothing(none)).toBe(true);
    // Under a negation it is the opposite.
    const negated = await withoutAbsentKeys({ type: 'Patient', where: [{ kind: 'not', condition: has }], sort: [], count: 10 }, () => false);
    expect(negated.where).toEqual([{ kind: 'not', condition: NOTHING }]);
    expect(selectsNothing(negated)).toBe(false);
    const kept = await withoutAbsentKeys({ type: 'Patient', where: [has], sort: [], count: 10 }, keys(() => false));
    expect(kept.where).toEqual([has]);
    expect(asked).toEqual(['Observation subject Patient']);
  });
});
