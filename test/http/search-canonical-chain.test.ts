/**
 * Chains and `_has` through canonical references (`QuestionnaireResponse.questionnaire`,
 * `ConceptMap.source`), on both databases and in the in-memory matcher (a SMART scope filter on read):
 * a canonical `url` names the resources of the target type whose `url` it is, `url|version` those of
 * that `version` too, as `_include` resolves them (search-include.test.ts).
 */
import { beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const Q = 'http://forms.example/Questionnaire/intake';
const Q2 = 'http://forms.example/Questionnaire/other';
const V = 'http://forms.example/ValueSet/genders';

await eachStore((kind, fresh) => {
  describe(`chains and _has through canonical references on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ids = async (query: string) => ((await api.search(query)).entry ?? [])
      .filter((e: Json) => e.search.mode === 'match').map((e: Json) => e.resource.id).sort();

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of [
        { resourceType: 'Questionnaire', id: 'q1', url: Q, version: '1', title: 'Intake', status: 'active' },
        { resourceType: 'Questionnaire', id: 'q2', url: Q, version: '2', title: 'Intake, revised', status: 'draft' },
        { resourceType: 'Questionnaire', id: 'q3', url: Q2, title: 'Other', status: 'active' },
        { resourceType: 'QuestionnaireResponse', id: 'r1', status: 'completed', questionnaire: `${Q}|1` },
        { resourceType: 'QuestionnaireResponse', id: 'r2', status: 'in-progress', questionnaire: Q },
        { resourceType: 'QuestionnaireResponse', id: 'r3', status: 'completed', questionnaire: `${Q}|2` },
        { resourceType: 'QuestionnaireResponse', id: 'r4', status: 'completed', questionnaire: 'http://forms.example/Questionnaire/unknown' },
        { resourceType: 'QuestionnaireResponse', id: 'r5', status: 'amended', questionnaire: Q2 },
        { resourceType: 'Observation', id: 'o3', status: 'final', code: { text: 'x' }, derivedFrom: [{ reference: 'QuestionnaireResponse/r3' }] },
        { resourceType: 'ValueSet', id: 'vs1', url: V, name: 'Genders', status: 'active' },
        { resourceType: 'ConceptMap', id: 'cm1', status: 'draft', sourceCanonical: V },
        { resourceType: 'ConceptMap', id: 'cm2', status: 'draft', sourceUri: V },
      ]) await api.put200(r);
    }, 60_000);

    test('a chain through a canonical reference reaches the resources its url (and version) names', async () => {
      expect(await ids('QuestionnaireResponse?questionnaire.title=intake')).toEqual(['r1', 'r2', 'r3']);
      // r1 names version 1 alone: q2 is not its Questionnaire, though r1 is found by questionnaire=<url> too.
      expect(await ids('QuestionnaireResponse?questionnaire.status=draft')).toEqual(['r2', 'r3']);
      expect(await ids('QuestionnaireResponse?questionnaire:Questionnaire._id=q1')).toEqual(['r1', 'r2']);
      expect(await ids('QuestionnaireResponse?questionnaire.version=2')).toEqual(['r2', 'r3']);
      expect(await ids('QuestionnaireResponse?questionnaire._id=q3')).toEqual(['r5']);
      expect(await ids('QuestionnaireResponse?questionnaire.title=nothing')).toEqual([]);
      expect(await ids('QuestionnaireResponse?questionnaire.status=draft&status=completed')).toEqual(['r3']);
      expect(await ids('QuestionnaireResponse?questionnaire.status:not=draft')).toEqual(['r1', 'r2', 'r5']);
      // Two levels: a literal reference, then a canonical one; and `_filter`'s paths.
      expect(await ids('Observation?derived-from:QuestionnaireResponse.questionnaire.status=draft')).toEqual(['o3']);
      expect(await ids('Observation?derived-from:QuestionnaireResponse.questionnaire.status=active')).toEqual([]);
      expect(await ids(`QuestionnaireResponse?_filter=${encodeURIComponent('questionnaire.status eq draft')}`)).toEqual(['r2', 'r3']);
      // ConceptMap.source (a canonical) and source-uri (a uri) name a ValueSet by its url.
      expect(await ids('ConceptMap?source.name=genders')).toEqual(['cm1']);
      expect(await ids('ConceptMap?source-uri.name=genders')).toEqual(['cm2']);
    });

    test('_has through a canonical reference finds the resources whose url (and version) the referring ones name', async () => {
      expect(await ids('Questionnaire?_has:QuestionnaireResponse:questionnaire:status=in-progress')).toEqual(['q1', 'q2']);
      expect(await ids('Questionnaire?_has:QuestionnaireResponse:questionnaire:_id=r1')).toEqual(['q1']);
      expect(await ids('Questionnaire?_has:QuestionnaireResponse:questionnaire:_id=r3')).toEqual(['q2']);
      expect(await ids('Questionnaire?_has:QuestionnaireResponse:questionnaire:status=completed')).toEqual(['q1', 'q2']);
      expect(await ids('Questionnaire?_has:QuestionnaireResponse:questionnaire:status=amended')).toEqual(['q3']);
      expect(await ids('Questionnaire?_has:QuestionnaireResponse:questionnaire:status=entered-in-error')).toEqual([]);
      expect(await ids('Questionnaire?status=draft&_has:QuestionnaireResponse:questionnaire:status=completed')).toEqual(['q2']);
      expect(await ids('Questionnaire?_has:QuestionnaireResponse:questionnaire:_has:Observation:derived-from:status=final')).toEqual(['q2']);
      expect(await ids('ValueSet?_has:ConceptMap:source:_id=cm1')).toEqual(['vs1']);
      expect(await ids('ValueSet?_has:ConceptMap:source-uri:status=draft')).toEqual(['vs1']);
      expect((await api.search('Questionnaire?_has:QuestionnaireResponse:questionnaire:status=completed&_summary=count')).total).toBe(2);
    });

    test('a canonical reference names no resource of a type without a url: a 400 naming the parameter', async () => {
      for (const q of ['ActivityDefinition?composed-of:Patient.name=x', 'Patient?_has:ActivityDefinition:composed-of:status=active']) {
        const body = await expectOutcome(await api.get(q), 400);
        expect([q, body.issue[0].expression]).toEqual([q, [q.split('?')[1]!.split('=')[0]]]);
      }
    });

    test('a SMART scope filter holding such a chain or _has is read in memory as the search finds it', async () => {
      const token = await t.tokenFor('t1', ['system/QuestionnaireResponse.rs', 'system/Questionnaire.rs'],
        'system/QuestionnaireResponse.rs?questionnaire.status=draft system/Questionnaire.rs?_has:QuestionnaireResponse:questionnaire:_id=r1');
      const scoped = fhirClient(t, token);
      expect(((await scoped.search('QuestionnaireResponse')).entry ?? []).map((e: Json) => e.resource.id).sort()).toEqual(['r2', 'r3']);
      expect(((await scoped.search('Questionnaire')).entry ?? []).map((e: Json) => e.resource.id).sort()).toEqual(['q1']);
      for (const [path, status] of [
        ['QuestionnaireResponse/r2', 200], ['QuestionnaireResponse/r3', 200], ['QuestionnaireResponse/r1', 403], ['QuestionnaireResponse/r5', 403],
        ['Questionnaire/q1', 200], ['Questionnaire/q2', 403],
      ] as const) expect([path, (await scoped.get(path)).status]).toEqual([path, status]);
    });

    test('a deleted or updated target changes what the chain and _has find at once', async () => {
      expect((await api.del('Questionnaire/q3')).status).toBe(200);
      expect(await ids('QuestionnaireResponse?questionnaire._id=q3')).toEqual([]);
      await api.put200({ resourceType: 'Questionnaire', id: 'q1', url: Q, version: '1', title: 'Intake', status: 'draft' });
      expect(await ids('QuestionnaireResponse?questionnaire.status=draft')).toEqual(['r1', 'r2', 'r3']);
      await api.put200({ resourceType: 'QuestionnaireResponse', id: 'r1', status: 'completed', questionnaire: Q2 });
      expect(await ids('Questionnaire?_has:QuestionnaireResponse:questionnaire:_id=r1')).toEqual([]);
      await t.close();
    });
  });
});
