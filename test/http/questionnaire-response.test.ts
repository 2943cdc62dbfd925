/**
 * A QuestionnaireResponse validated against the Questionnaire its `questionnaire` canonical names
 * (R4 questionnaireresponse.html): `$validate` always, writes and transaction entries at `strict`, on
 * both databases; a Questionnaire changed through one server seen by another.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, secondServer, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { storeTargets } from '../helpers/stores.ts';
import { countVersions, craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const URL = 'http://example.org/Questionnaire/intake';
const OPS = 'http://example.org/Questionnaire/enable-when';
const GENDER = 'http://hl7.org/fhir/ValueSet/administrative-gender';
const COLOURS = 'http://example.org/colours';

/** A Questionnaire with an item of each type, a group, a display item and nested questions. */
function intake(version = '1', extra: Json[] = []): Json {
  return {
    resourceType: 'Questionnaire', url: URL, version, status: 'active',
    item: [
      { linkId: 'intro', type: 'display', text: 'Please answer' },
      { linkId: 'name', type: 'string', text: 'Name', required: true, maxLength: 10 },
      { linkId: 'smoker', type: 'boolean', text: 'Do you smoke?', required: true },
      { linkId: 'packs', type: 'integer', text: 'Packs a day', required: true, enableWhen: [{ question: 'smoker', operator: '=', answerBoolean: true }] },
      { linkId: 'weight', type: 'decimal' },
      { linkId: 'dob', type: 'date' },
      { linkId: 'seen', type: 'dateTime' },
      { linkId: 'wake', type: 'time' },
      { linkId: 'notes', type: 'text' },
      { linkId: 'site', type: 'url' },
      { linkId: 'colour', type: 'choice', repeats: true, answerOption: [{ valueCoding: { system: COLOURS, code: 'red' } }, { valueCoding: { system: COLOURS, code: 'blue' }, initialSelected: true }] },
      { linkId: 'pet', type: 'open-choice', answerOption: [{ valueCoding: { system: 'http://example.org/pets', code: 'dog' } }] },
      { linkId: 'gender', type: 'choice', answerValueSet: GENDER },
      { linkId: 'photo', type: 'attachment' },
      { linkId: 'gp', type: 'reference' },
      { linkId: 'height', type: 'quantity' },
      { linkId: 'score', type: 'integer', readOnly: true },
      { linkId: 'alcohol', type: 'boolean', item: [{ linkId: 'drinks', type: 'integer', required: true }] },
      { linkId: 'family', type: 'group', required: true, repeats: true, item: [{ linkId: 'relative', type: 'string', required: true }] },
      ...extra,
    ],
  };
}

const a = (value: Json) => ({ answer: [value] });

/** A completed response that answers `intake` correctly. */
function goodResponse(questionnaire = URL, extra: Json = {}): Json {
  return {
    resourceType: 'QuestionnaireResponse', questionnaire, status: 'completed',
    item: [
      { linkId: 'intro', text: 'Please answer' },
      { linkId: 'name', text: 'Name', ...a({ valueString: 'Ada' }) },
      { linkId: 'smoker', ...a({ valueBoolean: true }) },
      { linkId: 'packs', ...a({ valueInteger: 2 }) },
      { linkId: 'weight', ...a({ valueDecimal: 70.5 }) },
      { linkId: 'dob', ...a({ valueDate: '1990-01-01' }) },
      { linkId: 'seen', ...a({ valueDateTime: '2024-01-01T10:00:00Z' }) },
      { linkId: 'wake', ...a({ valueTime: '07:00:00' }) },
      { linkId: 'notes', ...a({ valueString: 'none' }) },
      { linkId: 'site', ...a({ valueUri: 'http://example.org' }) },
      { linkId: 'colour', answer: [{ valueCoding: { system: COLOURS, code: 'red' } }, { valueCoding: { system: COLOURS, code: 'blue' } }] },
      { linkId: 'pet', ...a({ valueString: 'a hamster' }) },
      { linkId: 'gender', ...a({ valueCoding: { system: 'http://hl7.org/fhir/administrative-gender', code: 'female' } }) },
      { linkId: 'photo', ...a({ valueAttachment: { contentType: 'image/png', url: 'http://example.org/p.png' } }) },
      { linkId: 'gp', ...a({ valueReference: { reference: 'Practitioner/1' } }) },
      { linkId: 'height', ...a({ valueQuantity: { value: 170, unit: 'cm', system: 'http://unitsofmeasure.org', code: 'cm' } }) },
      { linkId: 'score', ...a({ valueInteger: 3 }) },
      { linkId: 'alcohol', answer: [{ valueBoolean: true, item: [{ linkId: 'drinks', ...a({ valueInteger: 1 }) }] }] },
      { linkId: 'family', item: [{ linkId: 'relative', ...a({ valueString: 'mother' }) }] },
      { linkId: 'family', item: [{ linkId: 'relative', ...a({ valueString: 'father' }) }] },
    ],
    ...extra,
  };
}

/** `goodResponse` with the items of `linkId` replaced by `items` (none: removed). */
function withItem(linkId: string, ...items: Json[]): Json {
  const r = goodResponse();
  const at = (r.item as Json[]).findIndex((i) => i.linkId === linkId);
  (r.item as Json[]).splice(at, (r.item as Json[]).filter((i) => i.linkId === linkId).length, ...items);
  return r;
}

/** An integer `age` and an item enabled by each enableWhen operator at 18. */
function operators(): Json {
  const on = (linkId: string, conditions: Json[], behavior?: string) => ({ linkId, type: 'string', enableWhen: conditions, ...(behavior ? { enableBehavior: behavior } : {}) });
  const age = (operator: string, answerInteger: number) => ({ question: 'age', operator, answerInteger });
  return {
    resourceType: 'Questionnaire', url: OPS, status: 'active',
    item: [
      { linkId: 'age', type: 'integer' },
      { linkId: 'born', type: 'date' },
      { linkId: 'colour', type: 'choice', answerOption: [{ valueCoding: { system: COLOURS, code: 'red' } }, { valueCoding: { system: COLOURS, code: 'blue' } }] },
      { linkId: 'height', type: 'quantity' },
      on('gt', [age('>', 17)]), on('lt', [age('<', 18)]), on('ge', [age('>=', 18)]), on('le', [age('<=', 17)]),
      on('eq', [age('=', 18)]), on('ne', [age('!=', 18)]), on('exists', [{ question: 'age', operator: 'exists', answerBoolean: true }]),
      on('missing', [{ question: 'none', operator: 'exists', answerBoolean: true }]),
      on('all', [age('>', 10), age('<', 18)], 'all'), on('any', [age('>', 10), age('<', 18)], 'any'),
      on('date', [{ question: 'born', operator: '<', answerDate: '2000-01-01' }]),
      on('red', [{ question: 'colour', operator: '=', answerCoding: { system: COLOURS, code: 'red' } }]),
      on('blue', [{ question: 'colour', operator: '=', answerCoding: { system: COLOURS, code: 'blue' } }]),
      on('tall', [{ question: 'height', operator: '>=', answerQuantity: { value: 1.8, system: 'http://unitsofmeasure.org', code: 'm' } }]),
      on('short', [{ question: 'height', operator: '<', answerQuantity: { value: 1.5, system: 'http://unitsofmeasure.org', code: 'm' } }]),
    ],
  };
}

function operatorResponse(): Json {
  const answered = ['gt', 'lt', 'ge', 'le', 'eq', 'ne', 'exists', 'missing', 'all', 'any', 'date', 'red', 'blue', 'tall', 'short'].map((linkId) => ({ linkId, ...a({ valueString: 'x' }) }));
  const given = [
    { linkId: 'age', ...a({ valueInteger: 18 }) }, { linkId: 'born', ...a({ valueDate: '1999-05-01' }) },
    { linkId: 'colour', ...a({ valueCoding: { system: COLOURS, code: 'red' } }) },
    { linkId: 'height', ...a({ valueQuantity: { value: 1.8, system: 'http://unitsofmeasure.org', code: 'm' } }) },
  ];
  return { resourceType: 'QuestionnaireResponse', questionnaire: OPS, status: 'completed', item: [...given, ...answered] };
}

const issues = (outcome: Json) => outcome.issue as Json[];
const errorsOf = (outcome: Json) => issues(outcome).filter((i) => i.severity === 'error');
const errorAt = (outcome: Json) => errorsOf(outcome).map((i) => i.expression[0]).sort();

await eachStore((kind, fresh) => {
  describe(`QuestionnaireResponse against its Questionnaire (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const validate = async (resource: Json) => (await (await api.post('QuestionnaireResponse/$validate', resource)).json()) as Json;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.create(intake());
      await api.create(operators());
    });
    afterAll(() => t.close());

    test('a response answering every item type as asked is valid in $validate and written at strict', async () => {
      const outcome = await validate(goodResponse());
      expect(issues(outcome)).toEqual([expect.objectContaining({ severity: 'information' })]);
      expect((await api.post('QuestionnaireResponse', goodResponse())).status).toBe(201);
      // The Questionnaire was used: one wrong answer makes it invalid.
      expect(errorAt(await validate(withItem('dob', { linkId: 'dob', ...a({ valueDateTime: '1990-01-01T00:00:00Z' }) })))).toEqual(['QuestionnaireResponse.item[5].answer[0]']);
    });

    const cases: [string, Json, string, string][] = [
      ['an item the Questionnaire does not have', withItem('notes', { linkId: 'notes', ...a({ valueString: 'x' }) }, { linkId: 'bogus', ...a({ valueString: 'x' }) }), 'QuestionnaireResponse.item[9]', "no item with linkId 'bogus'"],
      ['an item in the wrong place', withItem('notes', { linkId: 'notes', ...a({ valueString: 'x' }) }, { linkId: 'relative', ...a({ valueString: 'x' }) }), 'QuestionnaireResponse.item[9]', "'relative' is in the wrong place"],
      ['items out of order', withItem('dob', { linkId: 'dob', ...a({ valueDate: '1990-01-01' }) }, { linkId: 'weight', ...a({ valueDecimal: 1 }) }).item ? (() => { const r = goodResponse(); (r.item as Json[]).splice(4, 1); (r.item as Json[]).splice(5, 0, { linkId: 'weight', ...a({ valueDecimal: 1 }) }); return r; })() : {}, 'QuestionnaireResponse.item[5]', "'weight' is out of order"],
      ['an answer of the wrong type', withItem('weight', { linkId: 'weight', ...a({ valueString: 'heavy' }) }), 'QuestionnaireResponse.item[4].answer[0]', "'weight' (type decimal) must be a Decimal"],
      ['a string longer than maxLength', withItem('name', { linkId: 'name', ...a({ valueString: 'Bartholomew Jones' }) }), 'QuestionnaireResponse.item[1].answer[0]', "'name' is longer than its maxLength of 10"],
      ['a coding not among the answerOptions', withItem('colour', { linkId: 'colour', ...a({ valueCoding: { system: COLOURS, code: 'green' } }) }), 'QuestionnaireResponse.item[10].answer[0]', "not one of its answerOptions"],
      ['a coding not in the answerValueSet', withItem('gender', { linkId: 'gender', ...a({ valueCoding: { system: 'http://example.org/genders', code: 'female' } }) }), 'QuestionnaireResponse.item[12].answer[0]', `not in its answerValueSet ${GENDER}`],
      ['several answers to a question that does not repeat', withItem('dob', { linkId: 'dob', answer: [{ valueDate: '1990-01-01' }, { valueDate: '1991-01-01' }] }), 'QuestionnaireResponse.item[5].answer[1]', "'dob' does not repeat, but has 2 answers"],
      ['an item that does not repeat given twice', withItem('dob', { linkId: 'dob', ...a({ valueDate: '1990-01-01' }) }, { linkId: 'dob', ...a({ valueDate: '1990-01-01' }) }), 'QuestionnaireResponse.item[6]', "'dob' does not repeat, but appears 2 times"],
      ['a required item missing from a completed response', withItem('name'), 'QuestionnaireResponse', "required item 'name' is missing"],
      ['a display item with an answer', withItem('intro', { linkId: 'intro', ...a({ valueString: 'x' }) }), 'QuestionnaireResponse.item[0].answer[0]', "'intro' is a display item"],
      ['a group with an answer', withItem('family', { linkId: 'family', answer: [{ valueString: 'x' }], item: [{ linkId: 'relative', ...a({ valueString: 'x' }) }] }), 'QuestionnaireResponse.item[18].answer[0]', "'family' is a group item"],
      ['a disabled item with answers', withItem('smoker', { linkId: 'smoker', ...a({ valueBoolean: false }) }), 'QuestionnaireResponse.item[3]', "'packs' is not enabled"],
      ['a question\'s nested item beside its answers instead of under them', withItem('alcohol', { linkId: 'alcohol', ...a({ valueBoolean: true }), item: [{ linkId: 'drinks', ...a({ valueInteger: 1 }) }] }), 'QuestionnaireResponse.item[17].answer[0]', "required item 'drinks' is missing"],
      ['a required nested answer missing', withItem('family', { linkId: 'family', item: [{ linkId: 'relative' }] }), 'QuestionnaireResponse.item[18].item[0]', "required item 'relative' has no answer"],
    ];
    const baseInvalid = new Set(['a group with an answer', 'a question\'s nested item beside its answers instead of under them']);
    for (const [what, response, at, text] of cases) {
      test(`${what}: an error at ${at} naming the linkId, in $validate and as a 422 on write`, async () => {
        const outcome = await validate(response);
        const found = errorsOf(outcome).find((i) => i.expression[0] === at && i.details.text.includes(text));
        expect(found, JSON.stringify(issues(outcome))).toBeDefined();
        // Some are refused by base validation already (qrs-1: an item with both answers and items).
        const refused = await expectOutcome(await api.post('QuestionnaireResponse', response), 422);
        if (!baseInvalid.has(what)) expect(errorsOf(refused).some((i) => i.expression[0] === at)).toBe(true);
      });
    }

    test('a nested item beside the answers of its question is an error at the item', async () => {
      const outcome = await validate(withItem('alcohol', { linkId: 'alcohol', ...a({ valueBoolean: true }), item: [{ linkId: 'drinks', ...a({ valueInteger: 1 }) }] }));
      expect(errorsOf(outcome).some((i) => i.expression[0] === 'QuestionnaireResponse.item[17].item[0]' && i.details.text.includes('under its answers'))).toBe(true);
    });

    test('text differing from the Questionnaire\'s, an open-choice coding outside its options: warnings, and the write is accepted', async () => {
      const r = withItem('pet', { linkId: 'pet', ...a({ valueCoding: { system: 'http://example.org/pets', code: 'cat' } }) });
      (r.item as Json[])[1].text = 'Your name';
      const outcome = await validate(r);
      expect(errorsOf(outcome)).toEqual([]);
      expect(issues(outcome).filter((i) => i.severity === 'warning').map((i) => i.expression[0])).toEqual(['QuestionnaireResponse.item[1].text', 'QuestionnaireResponse.item[11].answer[0]']);
      expect((await api.post('QuestionnaireResponse', r)).status).toBe(201);
    });

    test('an in-progress response may lack required items: a warning in $validate, accepted on write', async () => {
      const r = { ...withItem('name'), status: 'in-progress' };
      const outcome = await validate(r);
      expect(errorsOf(outcome)).toEqual([]);
      expect(issues(outcome)).toEqual([expect.objectContaining({ severity: 'warning', code: 'required', expression: ['QuestionnaireResponse'] })]);
      expect((await api.post('QuestionnaireResponse', r)).status).toBe(201);
    });

    test('enableWhen: each operator, and enableBehavior all and any, decide which items may be answered', async () => {
      const outcome = await validate(operatorResponse());
      const disabled = errorsOf(outcome).map((i) => i.details.text.match(/'([^']+)'/)![1]).sort();
      expect(disabled).toEqual(['all', 'blue', 'le', 'lt', 'missing', 'ne', 'short']);
      expect((await api.post('QuestionnaireResponse', operatorResponse())).status).toBe(422);
    });

    test('enableWhen inside a repeating group reads the answers of the same repetition', async () => {
      const q = {
        resourceType: 'Questionnaire', url: 'http://example.org/Questionnaire/members', status: 'active',
        item: [{ linkId: 'member', type: 'group', repeats: true, item: [{ linkId: 'role', type: 'string' }, { linkId: 'maiden', type: 'string', enableWhen: [{ question: 'role', operator: '=', answerString: 'mother' }] }] }],
      };
      await api.create(q);
      const member = (role: string) => ({ linkId: 'member', item: [{ linkId: 'role', ...a({ valueString: role }) }, { linkId: 'maiden', ...a({ valueString: 'Smith' }) }] });
      const r = { resourceType: 'QuestionnaireResponse', questionnaire: q.url, status: 'completed', item: [member('mother'), member('father')] };
      expect(errorAt(await validate(r))).toEqual(['QuestionnaireResponse.item[1].item[1]']);
    });

    test('enableWhen evaluation is held to its budget: 3,000 conditions over 5,000 answers each is one too-costly error', async () => {
      const items = Array.from({ length: 3_000 }, (_, i) => ({ linkId: `x${i}`, type: 'string', enableWhen: [{ question: 'n', operator: '=', answerInteger: -1 }] }));
      const q = { resourceType: 'Questionnaire', url: 'http://example.org/Questionnaire/costly', status: 'active', item: [{ linkId: 'n', type: 'integer', repeats: true }, ...items] };
      await api.create(q);
      const r = { resourceType: 'QuestionnaireResponse', questionnaire: q.url, status: 'completed', item: [{ linkId: 'n', answer: Array.from({ length: 5_000 }, (_, i) => ({ valueInteger: i })) }] };
      const outcome = await validate(r);
      expect(errorsOf(outcome)).toEqual([expect.objectContaining({ code: 'too-costly', expression: ['QuestionnaireResponse.item'] })]);
      expect(errorsOf(outcome)[0].details.text).toContain('enableWhen');
    });

    test('an unknown Questionnaire: a warning in $validate, no error on write', async () => {
      const r = goodResponse('http://example.org/Questionnaire/unknown', { item: [{ linkId: 'anything', ...a({ valueString: 'x' }) }] });
      const outcome = await validate(r);
      expect(issues(outcome)).toEqual([expect.objectContaining({ severity: 'warning', expression: ['QuestionnaireResponse.questionnaire'] })]);
      expect(issues(outcome)[0].details.text).toContain('http://example.org/Questionnaire/unknown');
      expect((await api.post('QuestionnaireResponse', r)).status).toBe(201);
    });

    test('a versioned canonical names that version; a bare url the latest', async () => {
      await api.create(intake('2', [{ linkId: 'extra', type: 'string', required: true }]));
      const withExtra = goodResponse(URL);
      (withExtra.item as Json[]).push({ linkId: 'extra', ...a({ valueString: 'x' }) });
      expect(errorAt(await validate(goodResponse(`${URL}|1`)))).toEqual([]);
      expect(errorAt(await validate({ ...withExtra, questionnaire: `${URL}|1` }))).toEqual(['QuestionnaireResponse.item[20]']);
      expect(errorAt(await validate({ ...withExtra, questionnaire: `${URL}|2` }))).toEqual([]);
      expect(errorAt(await validate(withExtra))).toEqual([]);
      expect(errorAt(await validate(goodResponse(URL)))).toEqual(['QuestionnaireResponse']);
      expect((await api.post('QuestionnaireResponse', goodResponse(`${URL}|1`))).status).toBe(201);
    });

    test('a transaction entry is checked against its Questionnaire: 422 naming the entry, nothing written', async () => {
      const bad = { ...withItem('weight', { linkId: 'weight', ...a({ valueString: 'heavy' }) }), questionnaire: `${URL}|1` };
      const bundle = { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } }, { resource: bad, request: { method: 'POST', url: 'QuestionnaireResponse' } }] };
      const outcome = await expectOutcome(await api.post('', bundle), 422);
      expect(errorAt(outcome)).toEqual(['Bundle.entry[1].resource.item[4].answer[0]']);
      expect((((await (await api.get('Patient')).json()) as Json).entry ?? []).length).toBe(0);
    });

    test('a batch refuses the entry that breaks its Questionnaire alone; a PATCH that breaks it is a 422', async () => {
      const bad = { ...withItem('weight', { linkId: 'weight', ...a({ valueString: 'heavy' }) }), questionnaire: `${URL}|1` };
      const bundle = { resourceType: 'Bundle', type: 'batch', entry: [{ resource: goodResponse(`${URL}|1`), request: { method: 'POST', url: 'QuestionnaireResponse' } }, { resource: bad, request: { method: 'POST', url: 'QuestionnaireResponse' } }] };
      const res = (await (await api.post('', bundle)).json()) as Json;
      expect(res.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['201', '422']);
      expect(errorAt(res.entry[1].response.outcome)).toEqual(['Bundle.entry[1].resource.item[4].answer[0]']);
      const created = await api.create(goodResponse(`${URL}|1`));
      const patch = [{ op: 'replace', path: '/item/4/answer/0', value: { valueString: 'heavy' } }];
      const patched = await api.call('PATCH', `QuestionnaireResponse/${created.id}`, patch, { 'Content-Type': 'application/json-patch+json' });
      expect(errorAt(await expectOutcome(patched, 422))).toEqual(['QuestionnaireResponse.item[4].answer[0]']);
    });

    test("a response breaking both a profile it claims and its Questionnaire: one 422 listing both", async () => {
      const PROFILE = 'http://example.org/fhir/StructureDefinition/authored-response';
      const el = (path: string, min: number) => ({ id: path, path, short: path, definition: path, min, max: '*', base: { path, min: 0, max: '*' } });
      await api.create({
        resourceType: 'StructureDefinition', url: PROFILE, name: 'AuthoredResponse', status: 'active', kind: 'resource', abstract: false,
        type: 'QuestionnaireResponse', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/QuestionnaireResponse', derivation: 'constraint',
        snapshot: { element: [el('QuestionnaireResponse', 0), el('QuestionnaireResponse.author', 1)] },
      });
      const bad = { ...withItem('weight', { linkId: 'weight', ...a({ valueString: 'heavy' }) }), questionnaire: `${URL}|1`, meta: { profile: [PROFILE] } };
      expect(errorAt(await expectOutcome(await api.post('QuestionnaireResponse', bad), 422))).toEqual(['QuestionnaireResponse.author', 'QuestionnaireResponse.item[4].answer[0]']);
    });

    test('the responses inside a stored collection Bundle are checked, each at its entry', async () => {
      const bad = { ...withItem('weight', { linkId: 'weight', ...a({ valueString: 'heavy' }) }), questionnaire: `${URL}|1` };
      const collection = { resourceType: 'Bundle', type: 'collection', entry: [{ resource: goodResponse(`${URL}|1`) }, { resource: bad }] };
      expect(errorAt(await expectOutcome(await api.post('Bundle', collection), 422))).toEqual(['Bundle.entry[1].resource.item[4].answer[0]']);
      expect(errorAt((await (await api.post('Bundle/$validate', collection)).json()) as Json)).toEqual(['Bundle.entry[1].resource.item[4].answer[0]']);
      expect((await api.post('Bundle', { ...collection, entry: [collection.entry[0]] })).status).toBe(201);
    });

    test('a contained Questionnaire (#id) is used', async () => {
      const r = { ...goodResponse('#q'), contained: [{ ...intake(), id: 'q', url: undefined }] };
      expect(errorAt(await validate(r))).toEqual([]);
      const bad = { ...withItem('weight', { linkId: 'weight', ...a({ valueString: 'heavy' }) }), questionnaire: '#q', contained: r.contained };
      expect(errorAt(await validate(bad))).toEqual(['QuestionnaireResponse.item[4].answer[0]']);
    });

    test("a token that may not read Questionnaires: the response is still checked, but nothing of the Questionnaire is told", async () => {
      // Its own Questionnaire (the tests before may have versioned intake's).
      const PRIVATE = 'http://example.org/Questionnaire/private';
      await api.create({ ...intake(), url: PRIVATE });
      // A wrong answer to an item whose options, value set and maxLength the messages would otherwise quote.
      const bad: Json = { ...withItem('colour', { linkId: 'colour', ...a({ valueCoding: { system: COLOURS, code: 'green' } }) }), questionnaire: PRIVATE };
      (bad.item as Json[])[1] = { linkId: 'name', ...a({ valueString: 'Bartholomew Jones' }) };
      const blind = fhirClient(t, await craftToken(t, 'system/QuestionnaireResponse.cruds'));
      const told = (outcome: Json) => JSON.stringify(outcome);
      const validated = (await (await blind.post('QuestionnaireResponse/$validate', bad)).json()) as Json;
      expect(errorsOf(validated)).toEqual([expect.objectContaining({ code: 'value', expression: ['QuestionnaireResponse.questionnaire'] })]);
      expect(errorsOf(validated)[0].details.text).toContain('the access token may not read Questionnaires');
      for (const secret of ['red', 'blue', 'maxLength', "'colour'", "'name'", 'answerOption']) expect(told(validated)).not.toContain(secret);
      const before = await countVersions(t);
      const refused = await expectOutcome(await blind.post('QuestionnaireResponse', bad), 422);
      expect(issues(refused).map((i) => i.expression[0])).toEqual(['QuestionnaireResponse.questionnaire']);
      for (const secret of ['red', 'blue', 'maxLength', "'colour'", "'name'"]) expect(told(refused)).not.toContain(secret);
      const transaction = { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: bad, request: { method: 'POST', url: 'QuestionnaireResponse' } }] };
      const refusedEntry = await expectOutcome(await blind.post('', transaction), 422);
      expect(issues(refusedEntry).map((i) => i.expression[0])).toEqual(['Bundle.entry[0].resource.questionnaire']);
      expect(told(refusedEntry)).not.toContain("'colour'");
      expect(await countVersions(t)).toBe(before);
      // A required item left out is not named either; warnings (which quote the Questionnaire too) are not given.
      const missing = (await (await blind.post('QuestionnaireResponse/$validate', { ...withItem('name'), questionnaire: PRIVATE })).json()) as Json;
      expect(told(missing)).not.toContain("'name'");
      expect(issues(missing).filter((i) => i.severity === 'warning')).toEqual([]);
      // A valid response is written as for any token.
      expect((await blind.post('QuestionnaireResponse', goodResponse(PRIVATE))).status).toBe(201);
      // A token that reads them is told the problems; a contained Questionnaire is the response's own, and told.
      const reader = fhirClient(t, await craftToken(t, 'system/QuestionnaireResponse.cruds system/Questionnaire.rs'));
      const detailed = (await (await reader.post('QuestionnaireResponse/$validate', bad)).json()) as Json;
      expect(errorAt(detailed)).toEqual(['QuestionnaireResponse.item[10].answer[0]', 'QuestionnaireResponse.item[1].answer[0]']);
      const own = { ...bad, questionnaire: '#q', contained: [{ ...intake(), id: 'q', url: undefined }] };
      expect(errorAt((await (await blind.post('QuestionnaireResponse/$validate', own)).json()) as Json)).toEqual(['QuestionnaireResponse.item[10].answer[0]', 'QuestionnaireResponse.item[1].answer[0]']);
      // Read without search (the Questionnaire is found by its url), or under a scope filter: not told.
      const readOnly = fhirClient(t, await craftToken(t, 'system/QuestionnaireResponse.cruds system/Questionnaire.r'));
      expect(errorAt((await (await readOnly.post('QuestionnaireResponse/$validate', bad)).json()) as Json)).toEqual(['QuestionnaireResponse.questionnaire']);
      const filtered = fhirClient(t, await craftToken(t, 'system/QuestionnaireResponse.cruds system/Questionnaire.rs?status=active'));
      expect(errorAt((await (await filtered.post('QuestionnaireResponse/$validate', bad)).json()) as Json)).toEqual(['QuestionnaireResponse.questionnaire']);
    });

    test('a response of 100,000 items is refused with one clear error (more than 10,000), not checked item by item', async () => {
      const item = Array.from({ length: 100_000 }, () => ({ linkId: 'bogus', answer: [{ valueString: 'x' }] }));
      const outcome = await expectOutcome(await api.post('QuestionnaireResponse', { resourceType: 'QuestionnaireResponse', questionnaire: URL, status: 'in-progress', item }), 422);
      expect(issues(outcome)).toEqual([expect.objectContaining({ severity: 'error', code: 'too-costly', expression: ['QuestionnaireResponse.item'] })]);
    });
  });
});

describe('at CINDER_VALIDATION=structural', () => {
  test('a response is not checked against its Questionnaire on write, but is in $validate', async () => {
    const t = await createTestApp({ env: { CINDER_VALIDATION: 'structural' } });
    try {
      const api = fhirClient(t, await t.token());
      await api.create(intake());
      const bad = withItem('weight', { linkId: 'weight', ...a({ valueString: 'heavy' }) });
      expect((await api.post('QuestionnaireResponse', bad)).status).toBe(201);
      const outcome = (await (await api.post('QuestionnaireResponse/$validate', bad)).json()) as Json;
      expect(errorAt(outcome)).toEqual(['QuestionnaireResponse.item[4].answer[0]']);
    } finally {
      await t.close();
    }
  });
});

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`a Questionnaire seen by two servers on one ${target.kind} database`, () => {
    test('a Questionnaire changed through one server is used at once by the other, which had cached it', async () => {
      const db = await target.migrated();
      const t = await createTestApp({ store: db.open() });
      try {
        const token = await t.token();
        const second = await secondServer(t, () => db.open());
        const on = (server: (path: string, init: RequestInit) => Response | Promise<Response>) => async (method: string, path: string, body?: unknown) => server(`${t.fhir()}/${path}`, fhirInit(token, method, body));
        const [one, two] = [on(t.request), on(second)];
        const q = (await (await one('POST', 'Questionnaire', intake())).json()) as Json;
        const withExtra = goodResponse();
        (withExtra.item as Json[]).push({ linkId: 'extra', ...a({ valueString: 'x' }) });
        expect((await two('POST', 'QuestionnaireResponse', withExtra)).status).toBe(422);
        expect((await one('PUT', `Questionnaire/${q.id}`, { ...intake('1', [{ linkId: 'extra', type: 'string' }]), id: q.id })).status).toBe(200);
        expect((await two('POST', 'QuestionnaireResponse', withExtra)).status).toBe(201);
        expect((await one('DELETE', `Questionnaire/${q.id}`)).status).toBe(200);
        expect((await two('POST', 'QuestionnaireResponse', { ...withExtra, item: [{ linkId: 'nothing' }] })).status).toBe(201);
      } finally {
        await t.close();
      }
    });
  });
}
