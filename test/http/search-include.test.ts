/**
 * `_include` and `_revinclude` (src/fhir/search.ts addIncludes), on both databases: a parameter with a
 * target type in its expression (`patient`: `subject.where(resolve() is Patient)`) keeps to it, `:Type`
 * narrows further (a `_revinclude`'s too), versioned (to the version named) and absolute references of this
 * server are followed and contained ones are not, an update or a deletion changes what a resource includes at once, and canonical references
 * (`QuestionnaireResponse.questionnaire`) reach the resources whose `url` (and `version`) they name.
 * search-differential.test.ts compares every reference parameter of generated data with HL7's engine.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const code = { coding: [{ system: 'http://loinc.org', code: '718-7' }] };

for (const target of targets) {
  describe(`_include on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    /** The `include` entries of a search, as `Type/id`, sorted. */
    const included = async (query: string) =>
      ((await api.search(query)).entry ?? []).filter((e: Json) => e.search.mode === 'include').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();

    beforeAll(async () => {
      ({ t, api } = await appOnFresh(target));
      for (const r of [
        { resourceType: 'Patient', id: 'p1' }, { resourceType: 'Patient', id: 'p2' },
        { resourceType: 'Group', id: 'g1', type: 'person', actual: true },
        { resourceType: 'Practitioner', id: 'dr1' }, { resourceType: 'Organization', id: 'org1', name: 'Clinic' },
        { resourceType: 'Location', id: 'loc1' },
      ]) await api.put200(r);
      await api.put200({
        resourceType: 'Observation', id: 'oa', status: 'final', code,
        subject: { reference: 'Patient/p1/_history/1' },
        performer: [{ reference: 'Practitioner/dr1' }, { reference: `${api.base}/Organization/org1` }, { reference: '#pr' }, { reference: 'Practitioner/missing' }],
        contained: [{ resourceType: 'Practitioner', id: 'pr' }],
      });
      await api.put200({ resourceType: 'Observation', id: 'ob', status: 'final', code, subject: { reference: 'Group/g1' } });
      const Q = 'http://forms.example/Questionnaire/intake';
      for (const r of [
        { resourceType: 'Questionnaire', id: 'q1', url: Q, version: '1', status: 'active' },
        { resourceType: 'Questionnaire', id: 'q2', url: Q, version: '2', status: 'active' },
        { resourceType: 'Questionnaire', id: 'q3', url: 'http://forms.example/Questionnaire/other', status: 'active' },
        { resourceType: 'QuestionnaireResponse', id: 'r1', status: 'completed', questionnaire: `${Q}|1`, subject: { reference: 'Patient/p1' } },
        { resourceType: 'QuestionnaireResponse', id: 'r2', status: 'completed', questionnaire: Q },
        { resourceType: 'QuestionnaireResponse', id: 'r3', status: 'completed', questionnaire: 'http://forms.example/Questionnaire/unknown' },
        { resourceType: 'QuestionnaireResponse', id: 'r4', status: 'completed', questionnaire: `${Q}|2` },
      ]) await api.put200(r);
      await api.put200({
        resourceType: 'Encounter', id: 'e1', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
        subject: { reference: 'Patient/p2' }, location: [{ location: { reference: 'Location/loc1' } }],
      });
    }, 60_000);
    afterAll(() => t.close());

    test('a parameter whose expression names a target type keeps to it; :Type narrows', async () => {
      expect(await included('Observation?_include=Observation:patient')).toEqual(['Patient/p1']);
      expect(await included('Observation?_include=Observation:subject')).toEqual(['Group/g1', 'Patient/p1']);
      expect(await included('Observation?_include=Observation:subject:Group')).toEqual(['Group/g1']);
      expect(await included('Observation?_include=Observation:patient&_include=Observation:subject:Group')).toEqual(['Group/g1', 'Patient/p1']);
      expect(await included('Observation?_id=ob&_include=Observation:patient')).toEqual([]);
    });

    test('versioned and absolute references are followed; contained and dangling ones are not', async () => {
      expect(await included('Observation?_id=oa&_include=Observation:performer')).toEqual(['Organization/org1', 'Practitioner/dr1']);
      expect(await included('Observation?_id=oa&_include=Observation:performer:Organization')).toEqual(['Organization/org1']);
      expect(await included('Observation?_id=oa&_include=*')).toEqual(['Organization/org1', 'Patient/p1', 'Practitioner/dr1']);
    });

    test('_revinclude keeps to its :Type: only what refers to the page through it by a reference to that type', async () => {
      await api.put200({ resourceType: 'Provenance', id: 'pv1', recorded: '2024-01-01T00:00:00Z', target: [{ reference: 'Patient/p1' }], agent: [{ who: { display: 'x' } }] });
      await api.put200({ resourceType: 'Provenance', id: 'pv2', recorded: '2024-01-01T00:00:00Z', target: [{ reference: 'Observation/oa' }], agent: [{ who: { display: 'x' } }] });
      expect(await included('Patient?_id=p1&_revinclude=Observation:subject:Group')).toEqual([]);
      expect(await included('Patient?_id=p1&_revinclude=Observation:subject:Patient')).toEqual(['Observation/oa']);
      expect(await included('Group?_id=g1&_revinclude=Observation:subject:Group')).toEqual(['Observation/ob']);
      expect(await included('?_type=Patient,Group&_id=p1,g1&_revinclude=Observation:subject:Group')).toEqual(['Observation/ob']);
      expect(await included('Patient?_id=p1&_revinclude=Observation:subject&_revinclude:iterate=Provenance:target:Patient')).toEqual(['Observation/oa', 'Provenance/pv1']);
      expect(await included('Patient?_id=p1&_revinclude=Observation:subject&_revinclude:iterate=Provenance:target')).toEqual(['Observation/oa', 'Provenance/pv1', 'Provenance/pv2']);
      expect(await included('Patient?_id=p1&_revinclude=Provenance:*:Observation')).toEqual([]);
      expect(await included('Observation?_id=oa&_revinclude=Provenance:*:Observation')).toEqual(['Provenance/pv2']);
      // A canonical resource is named by its url (and version): the target type is its own type.
      expect(await included('Questionnaire?_id=q1&_revinclude=QuestionnaireResponse:questionnaire:Questionnaire')).toEqual([
        'QuestionnaireResponse/r1', 'QuestionnaireResponse/r2',
      ]);
    });

    test('a :Type the parameter cannot refer to, or a source type not searched, is a 400 under strict handling, else a warning', async () => {
      const strict = { Prefer: 'handling=strict' };
      for (const [q, key] of [
        ['Observation?_include=Observation:subject:Practitioner', '_include'],
        ['Observation?_include:iterate=Observation:subject:Practitioner', '_include:iterate'],
        ['Patient?_revinclude=Observation:subject:Practitioner', '_revinclude'],
        ['Patient?_revinclude=Observation:patient:Group', '_revinclude'],
        ['Patient?_revinclude:iterate=QuestionnaireResponse:questionnaire:ValueSet', '_revinclude:iterate'],
        ['Patient?_include=Patient:*:Observation', '_include'],
        ['?_type=Observation,Encounter&_include=Observation:subject:Practitioner', '_include'],
        // An include of another source type follows nothing without :iterate.
        ['Patient?_include=Observation:subject', '_include'],
        ['?_type=Patient,Encounter&_include=Observation:subject', '_include'],
      ] as const) {
        const body = await expectOutcome(await api.get(q, strict), 400);
        expect([q, body.issue[0].expression]).toEqual([q, [key]]);
        expect(body.issue[0].diagnostics).toContain(q.split('=').at(-1)!);
        const lenient = await api.search(q);
        const outcome = lenient.entry.find((e: Json) => e.search.mode === 'outcome');
        expect([q, outcome?.resource.issue.map((i: Json) => [i.severity, i.expression])]).toEqual([q, [['warning', [key]]]]);
        expect(lenient.entry.filter((e: Json) => e.search.mode === 'include')).toEqual([]);
        // Left out of a type's self link, as an unknown parameter is (a search across types links the query as asked).
        if (!q.startsWith('?')) expect(lenient.link.find((l: Json) => l.relation === 'self').url).not.toContain(key.split(':')[0]);
      }
      // Possible ones are taken under strict handling.
      for (const q of ['Observation?_include=Observation:subject:Group', 'Patient?_revinclude=Observation:subject:Patient', 'Observation?_include=Observation:*:Practitioner',
        'Patient?_revinclude=Provenance:target:Patient', 'QuestionnaireResponse?_include=QuestionnaireResponse:questionnaire:Questionnaire']) {
        expect([q, (await api.get(q, strict)).status]).toEqual([q, 200]);
      }
    });

    test('a page of several types follows each type its own parameters', async () => {
      expect(await included('?_type=Observation,Encounter&_include=Encounter:location&_include=Observation:patient')).toEqual(['Location/loc1', 'Patient/p1']);
      expect(await included('Encounter?_include=Encounter:subject&_include:iterate=Patient:general-practitioner')).toEqual(['Patient/p2']);
    });

    test('_elements names for every type subset the matches alone, a type-prefixed name the included resources of its type too', async () => {
      // R4 search.html, "Elements": "The list of elements does not apply to included resources".
      const SUBSETTED = 'SUBSETTED';
      const entries = async (query: string) => Object.fromEntries((await api.search(query)).entry
        .filter((e: Json) => e.search.mode !== 'outcome').map((e: Json) => [`${e.search.mode}:${e.resource.resourceType}/${e.resource.id}`, e.resource]));
      const tags = (r: Json) => (r.meta?.tag ?? []).map((t: Json) => t.code);
      const plain = await entries('Observation?_id=oa&_include=Observation:performer&_elements=status');
      expect(Object.keys(plain['match:Observation/oa']!).sort()).toEqual(['code', 'id', 'meta', 'resourceType', 'status']);
      expect(tags(plain['match:Observation/oa']!)).toEqual([SUBSETTED]);
      expect(plain['include:Organization/org1']!.name).toBe('Clinic');
      expect(tags(plain['include:Organization/org1']!)).toEqual([]);
      const revincluded = await entries('Patient?_id=p1&_revinclude=Observation:subject&_elements=gender');
      expect(revincluded['include:Observation/oa']!.performer).toHaveLength(4);
      expect(tags(revincluded['include:Observation/oa']!)).toEqual([]);
      // A name prefixed with the included resource's type applies to it (as later FHIR versions say), the others not.
      const prefixed = await entries('Observation?_id=oa&_include=Observation:performer&_elements=status,Organization.id');
      expect(Object.keys(prefixed['include:Organization/org1']!).sort()).toEqual(['id', 'meta', 'resourceType']);
      expect(tags(prefixed['include:Organization/org1']!)).toEqual([SUBSETTED]);
      expect(Object.keys(prefixed['match:Observation/oa']!).sort()).toEqual(['code', 'id', 'meta', 'resourceType', 'status']);
      // _summary still shapes included resources.
      const summary = await entries('Observation?_id=oa&_include=Observation:performer&_summary=true');
      expect(tags(summary['include:Organization/org1']!)).toEqual([SUBSETTED]);
    });

    test('a version-specific reference includes the version it names; a deletion or a missing version none', async () => {
      await api.put200({ resourceType: 'Patient', id: 'pe', gender: 'male' });
      await api.put200({ resourceType: 'Patient', id: 'pe', gender: 'female' });
      await api.put200({ resourceType: 'Patient', id: 'pd', gender: 'other' });
      expect((await api.del('Patient/pd')).status).toBe(200);
      await api.put200({ resourceType: 'Observation', id: 'ov1', status: 'final', code, subject: { reference: 'Patient/pe/_history/1' } });
      await api.put200({ resourceType: 'Observation', id: 'ov2', status: 'final', code, subject: { reference: `${api.base}/Patient/pe/_history/2` } });
      await api.put200({ resourceType: 'Observation', id: 'ov3', status: 'final', code, subject: { reference: 'Patient/pe/_history/7' } });
      await api.put200({ resourceType: 'Observation', id: 'ov4', status: 'final', code, subject: { reference: 'Patient/pd/_history/2' } });
      await api.put200({ resourceType: 'Observation', id: 'ov5', status: 'final', code, subject: { reference: 'Patient/pd/_history/1' } });
      const versions = async (query: string) => ((await api.search(query)).entry ?? []).filter((e: Json) => e.search.mode === 'include')
        .map((e: Json) => `${e.resource.resourceType}/${e.resource.id}/${e.resource.meta.versionId}:${e.resource.gender}`).sort();
      expect(await versions('Observation?_id=ov1&_include=Observation:subject')).toEqual(['Patient/pe/1:male']);
      expect(await versions('Observation?_id=ov2&_include=Observation:patient')).toEqual(['Patient/pe/2:female']);
      expect(await versions('Observation?_id=ov3,ov4&_include=Observation:subject')).toEqual([]);
      // Version 1 of a Patient deleted since is the version named.
      expect(await versions('Observation?_id=ov5&_include=Observation:subject')).toEqual(['Patient/pd/1:other']);
      expect(await versions('Observation?_id=ov1,ov2&_include=*')).toEqual(['Patient/pe/1:male']);
      // A reference to the current version's type and id alone includes the current version.
      await api.put200({ resourceType: 'Observation', id: 'ov6', status: 'final', code, subject: { reference: 'Patient/pe' } });
      expect(await versions('Observation?_id=ov6&_include=Observation:subject')).toEqual(['Patient/pe/2:female']);
      expect(await versions('Observation?_id=ov1&_include=Observation:subject:Group')).toEqual([]);
      // Iterated from an included version, and read as the token may read it.
      await api.put200({ resourceType: 'Observation', id: 'ov8', status: 'final', code, subject: { reference: 'Patient/pe/_history/1' } });
      await api.put200({ resourceType: 'Observation', id: 'ov8', status: 'final', code, subject: { reference: 'Patient/p1' } });
      await api.put200({ resourceType: 'Observation', id: 'ov7', status: 'final', code, hasMember: [{ reference: 'Observation/ov8/_history/1' }] });
      expect(await versions('Observation?_id=ov7&_include=Observation:has-member&_include:iterate=Observation:subject')).toEqual(['Observation/ov8/1:undefined', 'Patient/pe/1:male']);
      const limited = fhirClient(t, await t.tokenFor('t1', ['system/Observation.rs']));
      const bundle = await limited.search('Observation?_id=ov1&_include=Observation:subject');
      expect(bundle.entry.map((e: Json) => e.resource.id)).toEqual(['ov1']);
    });

    test('a canonical reference includes the resources of its url, of its version where it names one', async () => {
      expect(await included('QuestionnaireResponse?_id=r1&_include=QuestionnaireResponse:questionnaire')).toEqual(['Questionnaire/q1']);
      expect(await included('QuestionnaireResponse?_id=r2&_include=QuestionnaireResponse:questionnaire')).toEqual(['Questionnaire/q1', 'Questionnaire/q2']);
      expect(await included('QuestionnaireResponse?_id=r3,r4&_include=QuestionnaireResponse:questionnaire')).toEqual(['Questionnaire/q2']);
      expect(await included('QuestionnaireResponse?_id=r1&_include=*')).toEqual(['Patient/p1', 'Questionnaire/q1']);
      expect(await included('QuestionnaireResponse?_id=r1&_include=QuestionnaireResponse:questionnaire:Questionnaire')).toEqual(['Questionnaire/q1']);
      // The core ValueSets are canonical resources too; a ConceptMap's source names one by its url.
      await api.put200({
        resourceType: 'ConceptMap', id: 'cm1', status: 'draft',
        sourceUri: 'http://hl7.org/fhir/ValueSet/administrative-gender', targetUri: 'http://forms.example/ValueSet/none',
      });
      expect(await included('ConceptMap?_id=cm1&_include=ConceptMap:source-uri&_include=ConceptMap:target-uri')).toEqual(['ValueSet/administrative-gender']);
      // Iterated from a literal reference's target, and back: what refers to a Questionnaire's url.
      expect(await included('Patient?_id=p1&_revinclude=QuestionnaireResponse:subject&_include:iterate=QuestionnaireResponse:questionnaire'))
        .toEqual(['Questionnaire/q1', 'QuestionnaireResponse/r1']);
    });

    test('a canonical resource is revincluded by what names its url alone, or its url and its own version', async () => {
      // r1 names `url|1` (q1), r4 `url|2` (q2), r2 the url alone (either): as `_has` and chains read them
      // (src/fhir/search-canonical.ts); every version, as before, revincluded r4 with q1.
      expect(await included('Questionnaire?_id=q1&_revinclude=QuestionnaireResponse:questionnaire')).toEqual([
        'QuestionnaireResponse/r1', 'QuestionnaireResponse/r2',
      ]);
      expect(await included('Questionnaire?_id=q3&_revinclude=QuestionnaireResponse:questionnaire')).toEqual([]);
      expect(await included('Questionnaire?_id=q2&_revinclude=*')).toEqual(['QuestionnaireResponse/r2', 'QuestionnaireResponse/r4']);
      expect(await included('Questionnaire?_id=q1,q2&_revinclude=QuestionnaireResponse:questionnaire')).toEqual([
        'QuestionnaireResponse/r1', 'QuestionnaireResponse/r2', 'QuestionnaireResponse/r4',
      ]);
      for (const q of ['q1', 'q2']) {
        const has = await api.search(`QuestionnaireResponse?questionnaire:Questionnaire._id=${q}`);
        const rev = await included(`Questionnaire?_id=${q}&_revinclude=QuestionnaireResponse:questionnaire`);
        expect(rev).toEqual((has.entry ?? []).map((e: Json) => `QuestionnaireResponse/${e.resource.id}`).sort());
      }
      // Through an iteration too: the Questionnaire a response names, back to the responses naming that version.
      expect(await included('QuestionnaireResponse?_id=r4&_include=QuestionnaireResponse:questionnaire&_revinclude:iterate=QuestionnaireResponse:questionnaire'))
        .toEqual(['Questionnaire/q2', 'QuestionnaireResponse/r2']);
      // A token that may not read QuestionnaireResponses gets none of them.
      const limited = fhirClient(t, await t.tokenFor('t1', ['system/Questionnaire.read']));
      const bundle = await limited.search('Questionnaire?_id=q1&_revinclude=QuestionnaireResponse:questionnaire');
      expect(bundle.entry.map((e: Json) => e.resource.id)).toEqual(['q1']);
    });

    test('_include:iterate=* follows every reference parameter of the included resources too', async () => {
      await api.put200({ resourceType: 'Organization', id: 'org2', name: 'Ward', partOf: { reference: 'Organization/org1' } });
      await api.put200({ resourceType: 'Patient', id: 'p3', managingOrganization: { reference: 'Organization/org2' }, generalPractitioner: [{ reference: 'Practitioner/dr1' }] });
      await api.put200({ resourceType: 'Observation', id: 'oi', status: 'final', code, subject: { reference: 'Patient/p3' } });
      const all = ['Organization/org1', 'Organization/org2', 'Patient/p3', 'Practitioner/dr1'];
      expect(await included('Observation?_id=oi&_include=*')).toEqual(['Patient/p3']);
      expect(await included('Observation?_id=oi&_include:iterate=*')).toEqual(all);
      expect(await included('Observation?_id=oi&_include=*&_include:iterate=*')).toEqual(all);
      expect(await included('?_type=Observation,Encounter&_id=oi&_include:iterate=*')).toEqual(all);
    });

    test('an update or a deletion changes what a resource includes at once', async () => {
      await api.put200({ resourceType: 'Observation', id: 'ob', status: 'final', code, subject: { reference: 'Patient/p2' } });
      expect(await included('Observation?_id=ob&_include=Observation:subject')).toEqual(['Patient/p2']);
      expect((await api.del('Patient/p2')).status).toBe(200);
      expect(await included('Observation?_id=ob&_include=Observation:subject')).toEqual([]);
      expect((await api.del('Observation/oa')).status).toBe(200);
      expect(await included('Observation?_include=Observation:performer')).toEqual([]);
    });
  });
}
