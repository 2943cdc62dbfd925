/**
 * R4's own Questionnaire/QuestionnaireResponse example pairs (npm hl7.fhir.r4.examples) checked against
 * each other through `$validate`, on both databases. Three responses (3141, bb, f201) name no
 * Questionnaire; they are checked against the Questionnaire of the same id, whose url is given to them
 * here. R4's examples hold real defects, each asserted and explained below.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const DIR = 'node_modules/hl7.fhir.r4.examples/';
const read = (name: string) => Bun.file(`${DIR}${name}.json`).json() as Promise<Json>;

await eachStore((kind, fresh) => {
  describe(`R4's Questionnaire examples (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const verdict = async (name: string, questionnaire?: string, change?: (qr: Json) => void) => {
      const qr = await read(`QuestionnaireResponse-${name}`);
      if (questionnaire !== undefined) qr.questionnaire = questionnaire;
      change?.(qr);
      const outcome = (await (await api.post('QuestionnaireResponse/$validate', qr)).json()) as Json;
      return (outcome.issue as Json[]).filter((i) => i.severity !== 'information').map((i) => `${i.severity} ${i.expression[0]} ${i.details.text}`);
    };
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const name of ['3141', 'bb', 'f201', 'gcs']) {
        const q = await read(`Questionnaire-${name}`);
        expect((await api.put(`Questionnaire/${q.id}`, q)).status).toBe(201);
      }
    });
    afterAll(() => t.close());

    test('gcs: valid, its answers in the value sets the Questionnaire contains (#verbal, #motor, #eye), found by the relative reference Questionnaire/gcs', async () => {
      expect(await verdict('gcs')).toEqual([]);
      // The motor score's code given as the verbal answer: not in #verbal.
      const swapped = await verdict('gcs', undefined, (qr) => void (qr.item[0].answer[0].valueCoding = qr.item[1].answer[0].valueCoding));
      expect(swapped).toEqual(["error QuestionnaireResponse.item[0].answer[0] The answer 'http://loinc.org|LA6566-9' to the item '1.1' is not in its answerValueSet #verbal"]);
    });

    test('3141: its answers use a code system of its own, not the yesnodontknow codes the Questionnaire binds, so 1.1.1 is not enabled; 1.1.1.3 is no item of the Questionnaire', async () => {
      const P = 'QuestionnaireResponse.item[0].item[0].answer[0]';
      expect((await verdict('3141', 'http://hl7.org/fhir/Questionnaire/3141')).sort()).toEqual([
        `error ${P} The answer 'http://cancer.questionnaire.org/system/code/yesno|1' to the item '1.1' is not in its answerValueSet http://hl7.org/fhir/ValueSet/yesnodontknow`,
        `error ${P}.item[0] The item '1.1.1' is not enabled (its enableWhen conditions are not met), but has answers`,
        `error ${P}.item[0].item[0].answer[0] The answer 'http://cancer.questionnaire.org/system/code/yesno|1' to the item '1.1.1.1' is not in its answerValueSet http://hl7.org/fhir/ValueSet/yesnodontknow`,
        `error ${P}.item[0].item[1].answer[0] The answer 'http://cancer.questionnaire.org/system/code/yesno|1' to the item '1.1.1.2' is not in its answerValueSet http://hl7.org/fhir/ValueSet/yesnodontknow`,
        `error ${P}.item[0].item[2] The Questionnaire http://hl7.org/fhir/Questionnaire/3141 has no item with linkId '1.1.1.3'`,
      ]);
    });

    test("bb: 'f' is not the option 'F' (codes are case-sensitive); the Questionnaire spells its linkIds vitaminiKDose1 and vitaminiKDose2", async () => {
      expect(await verdict('bb', 'http://hl7.org/fhir/Questionnaire/bb')).toEqual([
        "error QuestionnaireResponse.item[0].item[0].item[1].answer[0] The answer 'f' to the item 'sex' is not one of its answerOptions",
        "error QuestionnaireResponse.item[0].item[1].item[2].answer[0].item[0].item[0] The Questionnaire http://hl7.org/fhir/Questionnaire/bb has no item with linkId 'vitaminKDose1'",
        "error QuestionnaireResponse.item[0].item[1].item[2].answer[0].item[0].item[1] The Questionnaire http://hl7.org/fhir/Questionnaire/bb has no item with linkId 'vitaminKDose2'",
      ]);
    });

    test('f201: item 1, a boolean question, holds an item 1.1 the Questionnaire does not have (and not under an answer); 3.1 and 3.2 are boolean questions answered with text', async () => {
      expect(await verdict('f201', 'http://hl7.org/fhir/Questionnaire/f201')).toEqual([
        "error QuestionnaireResponse.item[0].item[0] The items nested in the question '1' belong under its answers (answer.item), not under the item",
        "error QuestionnaireResponse.item[2].item[0].answer[0] The answer to the item '3.1' (type boolean) must be a Boolean, not a String",
        "error QuestionnaireResponse.item[2].item[1].answer[0] The answer to the item '3.2' (type boolean) must be a Boolean, not a String",
      ]);
    });

    test("ussg-fht-answers names Questionnaire/ussg-fht, which R4's examples do not hold (Bundle-ussg-fht's Questionnaire is 54127-6): a warning", async () => {
      const bundle = await read('Bundle-ussg-fht');
      for (const e of bundle.entry as Json[]) expect((await api.put(`${e.resource.resourceType}/${e.resource.id}`, e.resource)).status).toBe(201);
      expect(await verdict('ussg-fht-answers')).toEqual(['warning QuestionnaireResponse.questionnaire The Questionnaire Questionnaire/ussg-fht is not known here: the response was not checked against it']);
    });
  });
});
