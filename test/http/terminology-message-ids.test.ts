/**
 * $validate-code's issues name the entry of HL7's message catalogue they are (the `operationoutcome-message-id`
 * extension, as the reference servers give it), a version mismatch of the `code` input is located at `version`, and
 * a version the request's parameters put in place of an include's is named as HL7's VALUESET_VALUE_MISMATCH_CHANGED
 * names it; $expand's refusal of a version `check-system-version` does not allow is HL7's VALUESET_VERSION_CHECK. On both
 * databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { type OperationResponse, type Param, postOperation, putResource } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/message-ids';
const VS = 'http://cinder.test/ValueSet/message-ids-';
const MESSAGE_ID = 'http://hl7.org/fhir/StructureDefinition/operationoutcome-message-id';
const codeSystem = (version: string) => ({
  resourceType: 'CodeSystem', id: `message-ids-${version.replaceAll('.', '-')}`, url: CS, version, name: 'MessageIds', status: 'active', content: 'complete',
  caseSensitive: true,
  property: [{ code: 'status', uri: 'http://hl7.org/fhir/concept-properties#status', type: 'code' }],
  concept: [
    { code: 'one', display: 'One' },
    { code: 'two', display: 'Two' },
    { code: 'old', display: 'Old', property: [{ code: 'status', valueCode: 'retired' }] },
  ],
});
const all = { resourceType: 'ValueSet', id: 'message-ids-all', url: `${VS}all`, status: 'active', compose: { include: [{ system: CS }] } };
const pinned = { resourceType: 'ValueSet', id: 'message-ids-pinned', url: `${VS}pinned`, status: 'active', compose: { include: [{ system: CS, version: '1.0.0' }] } };
const onlyOne = { resourceType: 'ValueSet', id: 'message-ids-one', url: `${VS}one`, status: 'active', compose: { include: [{ system: CS, concept: [{ code: 'one' }] }] } };
const FRAGMENT = 'http://cinder.test/CodeSystem/message-ids-fragment';
const fragment = { resourceType: 'CodeSystem', id: 'message-ids-fragment', url: FRAGMENT, version: '0.1.0', name: 'Fragment', status: 'active', content: 'fragment', concept: [{ code: 'a', display: 'A' }] };
const fragmentAll = { resourceType: 'ValueSet', id: 'message-ids-fragment', url: `${VS}fragment`, status: 'active', compose: { include: [{ system: FRAGMENT }] } };
const CASELESS = 'http://cinder.test/CodeSystem/message-ids-caseless';
const caseless = { resourceType: 'CodeSystem', id: 'message-ids-caseless', url: CASELESS, version: '3.0.0', name: 'Caseless', status: 'active', content: 'complete', caseSensitive: false, concept: [{ code: 'abc', display: 'ABC' }] };
const caselessAll = { resourceType: 'ValueSet', id: 'message-ids-caseless', url: `${VS}caseless`, status: 'active', compose: { include: [{ system: CASELESS }] } };
const importsMissing = {
  resourceType: 'ValueSet', id: 'message-ids-imports-missing', url: `${VS}imports-missing`, status: 'active',
  compose: { include: [{ system: CS, valueSet: [`${VS}nowhere`] }] },
};
const deprecating = {
  resourceType: 'ValueSet', id: 'message-ids-deprecating', url: `${VS}deprecating`, version: '2.0.0', status: 'active',
  compose: { include: [{ system: CS, version: '1.0.0', concept: [{ code: 'one', extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/valueset-deprecated', valueBoolean: true }] }] }] },
};
/** Imports the draft value set through another that imports it: its status is noted too, once. */
const importsDraft = { resourceType: 'ValueSet', id: 'message-ids-imports-draft', url: `${VS}imports-draft`, status: 'active', compose: { include: [{ valueSet: [`${VS}draft`, `${VS}via-draft`] }] } };
const viaDraft = { resourceType: 'ValueSet', id: 'message-ids-via-draft', url: `${VS}via-draft`, status: 'active', compose: { include: [{ valueSet: [`${VS}draft`] }] } };
const bothVersions = {
  resourceType: 'ValueSet', id: 'message-ids-both', url: `${VS}both`, status: 'active',
  compose: { include: [{ system: CS, version: '1.0.0' }, { system: CS, version: '2.0.0' }] },
};
const allButTwo = { resourceType: 'ValueSet', id: 'message-ids-but-two', url: `${VS}but-two`, status: 'active', compose: { include: [{ system: CS }], exclude: [{ system: CS, concept: [{ code: 'two' }] }] } };
const GROUPED = 'http://cinder.test/CodeSystem/message-ids-grouped';
const grouped = {
  resourceType: 'CodeSystem', id: 'message-ids-grouped', url: GROUPED, version: '1.0.0', name: 'Grouped', status: 'active', content: 'complete',
  property: [{ code: 'notSelectable', uri: 'http://hl7.org/fhir/concept-properties#notSelectable', type: 'boolean' }],
  concept: [{ code: 'group', display: 'Group', property: [{ code: 'notSelectable', valueBoolean: true }], concept: [{ code: 'member', display: 'Member' }] }],
};
const groupedAll = { resourceType: 'ValueSet', id: 'message-ids-grouped', url: `${VS}grouped`, version: '3.0.0', status: 'active', compose: { include: [{ system: GROUPED }] } };
const draft = { resourceType: 'ValueSet', id: 'message-ids-draft', url: `${VS}draft`, version: '1', status: 'draft', compose: { include: [{ system: CS }] } };

/** Each issue of the `issues` output as `message id|tx-issue-type|expression` (the id `-` when there is none). */
function ids(r: OperationResponse): string[] {
  expect(r.status).toBe(200);
  const outcome = r.body.parameter?.find((p) => p.name === 'issues')?.resource as { issue: Record<string, any>[] } | undefined;
  return (outcome?.issue ?? []).map((i) => {
    const ext = (i.extension ?? []) as { url: string; valueString: string }[];
    expect(ext.every((e) => e.url === MESSAGE_ID)).toBe(true);
    return `${ext[0]?.valueString ?? '-'}|${i.details.coding[0].code}|${i.expression?.[0] ?? '-'}`;
  });
}
function text(r: OperationResponse, type: string): string | undefined {
  const outcome = r.body.parameter?.find((p) => p.name === 'issues')?.resource as { issue: Record<string, any>[] } | undefined;
  return outcome?.issue.find((i) => i.details.coding[0].code === type)?.details.text;
}

await eachStore((kind, fresh) => {
  describe(`$validate-code's issues carry HL7's message ids (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const validate = (parameter: Param[]) => postOperation(t, token, 'ValueSet/$validate-code', parameter);
    const coding = (url: string, code: string, extra: Record<string, string> = {}) =>
      validate([{ name: 'url', valueUri: url }, { name: 'coding', valueCoding: { system: CS, code, ...extra } }]);
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of [codeSystem('1.0.0'), codeSystem('2.0.0'), all, pinned, onlyOne, importsMissing, deprecating, grouped, groupedAll, importsDraft, viaDraft, bothVersions, allButTwo, draft, fragment, fragmentAll, caseless, caselessAll]) await putResource(t, token, r);
    });
    afterAll(() => t.close());

    test('a code outside the value set, an unknown code, a wrong display, a retired concept, a draft value set', async () => {
      expect(ids(await coding(`${VS}one`, 'two'))).toEqual(['None_of_the_provided_codes_are_in_the_value_set_one|not-in-vs|Coding.code']);
      expect(ids(await coding(`${VS}all`, 'three'))).toEqual([
        'None_of_the_provided_codes_are_in_the_value_set_one|not-in-vs|Coding.code',
        'Unknown_Code_in_Version|invalid-code|Coding.code',
      ]);
      expect(ids(await coding(`${VS}all`, 'one', { display: 'Uno' }))).toEqual(['Display_Name_for__should_be_one_of__instead_of|invalid-display|Coding.display']);
      // Wrong only in its whitespace: the catalogue's whitespace variant.
      expect(ids(await coding(`${VS}all`, 'one', { display: ' One ' }))).toEqual(['Display_Name_WS_for__should_be_one_of__instead_of|invalid-display|Coding.display']);
      expect(ids(await coding(`${VS}all`, 'old'))).toEqual(['INACTIVE_CONCEPT_FOUND|code-comment|Coding']);
      expect(ids(await coding(`${VS}draft`, 'one'))).toEqual(['MSG_DRAFT|status-check|-']);
      // A draft value set it imports (at any depth) is noted as the reference servers note it (HL7's `not-withdrawn-validate`).
      const imported = await coding(`${VS}imports-draft`, 'one');
      expect(ids(imported)).toEqual(['MSG_DRAFT|status-check|-']);
      expect(text(imported, 'status-check')).toBe(`Reference to draft ValueSet ${VS}draft|1`);
      // A valid code has no issues at all.
      expect(ids(await coding(`${VS}all`, 'one'))).toEqual([]);
    });

    test('code systems and versions: unknown, another version than the value set pins, a versionless include', async () => {
      const unknownSystem = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'coding', valueCoding: { system: `${CS}-none`, code: 'one' } }]);
      expect(ids(unknownSystem)).toContain('UNKNOWN_CODESYSTEM|not-found|Coding.system');
      expect(ids(await coding(`${VS}all`, 'one', { version: '9' }))).toEqual([
        'UNKNOWN_CODESYSTEM_VERSION|not-found|Coding.system',
        'VALUESET_VALUE_MISMATCH_DEFAULT|vs-invalid|Coding.version',
      ]);
      expect(ids(await coding(`${VS}pinned`, 'one', { version: '2.0.0' }))).toEqual(['VALUESET_VALUE_MISMATCH|vs-invalid|Coding.version']);
      // A code outside the value set, given with its version, is named with it.
      const versioned = await coding(`${VS}one`, 'two', { version: '2.0.0' });
      expect(text(versioned, 'not-in-vs')).toBe(`The provided code '${CS}|2.0.0#two' was not found in the value set '${VS}one'`);
      expect(text(await coding(`${VS}one`, 'two'), 'not-in-vs')).toBe(`The provided code '${CS}#two' was not found in the value set '${VS}one'`);
      // The code input: its systemVersion is the coding's version, located at `version` as the reference servers locate it.
      const asCode = await validate([
        { name: 'url', valueUri: `${VS}pinned` }, { name: 'code', valueCode: 'one' }, { name: 'system', valueUri: CS }, { name: 'systemVersion', valueString: '2.0.0' },
      ]);
      expect(ids(asCode)).toEqual(['VALUESET_VALUE_MISMATCH|vs-invalid|version']);
    });

    test("a version the request's parameters put in place of the include's is named with the include's own", async () => {
      const forced = await validate([
        { name: 'url', valueUri: `${VS}pinned` }, { name: 'coding', valueCoding: { system: CS, code: 'one', version: '1.0.0' } },
        { name: 'force-system-version', valueUri: `${CS}|2.0.0` },
      ]);
      expect(ids(forced)).toEqual(['VALUESET_VALUE_MISMATCH_CHANGED|vs-invalid|Coding.version']);
      expect(text(forced, 'vs-invalid')).toBe(`The code system '${CS}' version '2.0.0' resulting from the version '1.0.0' in the ValueSet include is different to the one in the value ('1.0.0')`);
      const byDefault = await validate([
        { name: 'url', valueUri: `${VS}all` }, { name: 'coding', valueCoding: { system: CS, code: 'one', version: '1.0.0' } },
        { name: 'system-version', valueUri: `${CS}|2.0.0` },
      ]);
      expect(text(byDefault, 'vs-invalid')).toBe(`The code system '${CS}' version '2.0.0' resulting from the version '' in the ValueSet include is different to the one in the value ('1.0.0')`);
    });

    test("$expand refuses a pinned version check-system-version does not allow, naming the version the pin resolves to", async () => {
      const refused = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${VS}pinned` }, { name: 'check-system-version', valueUri: `${CS}|2.x` }]);
      expect(refused.status).toBe(400);
      // The whole issue as the reference servers give it (the catalogue key, no `diagnostics`), but at the parameter that
      // refuses it, as every refusal of a client's input names it (the reference servers name none).
      expect(refused.body.issue as unknown[]).toEqual([{
        extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/operationoutcome-message-id', valueString: 'VALUESET_VERSION_CHECK' }],
        severity: 'error', code: 'exception', expression: ['check-system-version'],
        details: { coding: [{ system: 'http://hl7.org/fhir/tools/CodeSystem/tx-issue-type', code: 'version-error' }], text: `The version '1.0.0' is not allowed for system '${CS}': required to be '2.x' by a version-check parameter` },
      }]);
      const allowed = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${VS}pinned` }, { name: 'check-system-version', valueUri: `${CS}|1.x` }]);
      expect(allowed.status).toBe(200);
    });

    test("a code a fragment lacks: valid, with HL7's UNKNOWN_CODE_IN_FRAGMENT", async () => {
      const r = await validate([{ name: 'url', valueUri: `${VS}fragment` }, { name: 'coding', valueCoding: { system: FRAGMENT, code: 'b' } }]);
      expect(r.body.parameter?.find((p) => p.name === 'result')?.valueBoolean).toBe(true);
      expect(ids(r)).toEqual(['UNKNOWN_CODE_IN_FRAGMENT|invalid-code|Coding.code']);
      expect(text(r, 'invalid-code')).toBe(`Unknown Code 'b' in the CodeSystem '${FRAGMENT}' version '0.1.0' - note that the code system is labeled as a fragment, so the code may be valid in some other fragment`);
    });

    test('a code of another case in a case-insensitive code system, named with its version', async () => {
      const r = await validate([{ name: 'url', valueUri: `${VS}caseless` }, { name: 'coding', valueCoding: { system: CASELESS, code: 'ABC' } }]);
      expect(ids(r)).toEqual(['CODE_CASE_DIFFERENCE|code-rule|Coding.code']);
      expect(text(r, 'code-rule')).toBe(`The code 'ABC' differs from the correct code 'abc' by case. Although the code system '${CASELESS}|3.0.0' is case insensitive, implementers are strongly encouraged to use the correct case anyway`);
      // The code as the code system has it in `normalized-code`, beside the code as given, as the reference servers answer.
      const param = (res: OperationResponse, name: string) => res.body.parameter?.find((p) => p.name === name);
      expect(param(r, 'normalized-code')).toEqual({ name: 'normalized-code', valueCode: 'abc' });
      expect(param(r, 'code')).toEqual({ name: 'code', valueCode: 'ABC' });
      const exact = await validate([{ name: 'url', valueUri: `${VS}caseless` }, { name: 'coding', valueCoding: { system: CASELESS, code: 'abc' } }]);
      expect(param(exact, 'result')?.valueBoolean).toBe(true);
      expect(param(exact, 'normalized-code')).toBeUndefined();
    });

    test('an import the server lacks is about no element of the request, and a CodeableConcept so undecided echoes no coding', async () => {
      // As the reference servers give it: no `expression` (was at the code), as the code input, a Coding or in a CodeableConcept.
      const missing = 'Unable_to_resolve_value_Set_|not-found|-';
      expect(ids(await validate([{ name: 'url', valueUri: `${VS}imports-missing` }, { name: 'code', valueCode: 'one' }, { name: 'system', valueUri: CS }]))).toEqual([missing]);
      expect(ids(await coding(`${VS}imports-missing`, 'one'))).toEqual([missing]);
      const concept = await validate([{ name: 'url', valueUri: `${VS}imports-missing` }, { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: CS, code: 'one' }] } }]);
      expect(ids(concept)).toEqual([missing]);
      expect(concept.body.parameter?.map((p) => p.name).sort()).toEqual(['codeableConcept', 'issues', 'message', 'result']);
    });

    test("a concept whose presence the value set marks deprecated: HL7's words, in `issues` alone", async () => {
      const r = await coding(`${VS}deprecating`, 'one');
      expect(r.body.parameter?.find((p) => p.name === 'result')?.valueBoolean).toBe(true);
      expect(ids(r)).toEqual(['CONCEPT_DEPRECATED_IN_VALUESET|code-comment|Coding.code']);
      expect(text(r, 'code-comment')).toBe(`The presence of the concept 'one' in the system '${CS}' in the value set ${VS}deprecating|2.0.0 is marked with a status of deprecated and its use should be reviewed`);
      // Not repeated in `message`, as the reference servers answer (a concept's own status is).
      expect(r.body.parameter?.find((p) => p.name === 'message')).toBeUndefined();
    });

    test("an abstract code where `abstract` is false: HL7's ABSTRACT_CODE_NOT_ALLOWED, and not in the value set in its words", async () => {
      const r = await validate([{ name: 'url', valueUri: `${VS}grouped` }, { name: 'coding', valueCoding: { system: GROUPED, code: 'group' } }, { name: 'abstract', valueBoolean: false }]);
      expect(r.body.parameter?.find((p) => p.name === 'result')?.valueBoolean).toBe(false);
      expect(ids(r)).toEqual(['ABSTRACT_CODE_NOT_ALLOWED|code-rule|Coding.code', 'None_of_the_provided_codes_are_in_the_value_set_one|not-in-vs|Coding.code']);
      expect(text(r, 'not-in-vs')).toBe(`The provided code '${GROUPED}#group' was not found in the value set '${VS}grouped|3.0.0'`);
    });

    test('a coding without a system, an excluded code, a code no version has, a concept with a coding in the value set', async () => {
      // No system: not in the value set (named `#code`) and HL7's Coding_has_no_system__cannot_validate about the coding, both in `message`.
      const noSystem = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'coding', valueCoding: { code: 'one' } }]);
      expect(ids(noSystem)).toEqual(['None_of_the_provided_codes_are_in_the_value_set_one|not-in-vs|Coding.code', 'Coding_has_no_system__cannot_validate|invalid-data|Coding']);
      expect(noSystem.body.parameter?.find((p) => p.name === 'message')?.valueString).toBe(
        `Coding has no system. A code with no system has no defined meaning, and it cannot be validated. A system should be provided; The provided code '#one' was not found in the value set '${VS}all'`,
      );
      // A coding with a display alone (no system, no code) names no code: not the code '#' outside the value set.
      const displayOnly = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'coding', valueCoding: { display: 'One' } }]);
      expect(displayOnly.body.parameter?.find((p) => p.name === 'result')?.valueBoolean).toBe(false);
      expect(ids(displayOnly)).toEqual(['-|invalid-code|Coding.system', '-|invalid-data|Coding.system']);
      expect(displayOnly.body.parameter?.find((p) => p.name === 'message')?.valueString).not.toContain("'#'");
      // Excluded: not in the value set, with no note of the exclude.
      expect(ids(await coding(`${VS}but-two`, 'two'))).toEqual(['None_of_the_provided_codes_are_in_the_value_set_one|not-in-vs|Coding.code']);
      // A code neither version of an overloaded include has: unknown once, in the latest version.
      const unknown = await coding(`${VS}both`, 'nine');
      expect(ids(unknown)).toEqual(['None_of_the_provided_codes_are_in_the_value_set_one|not-in-vs|Coding.code', 'Unknown_Code_in_Version|invalid-code|Coding.code']);
      expect(text(unknown, 'invalid-code')).toBe(`Unknown code 'nine' in the CodeSystem '${CS}' version '2.0.0'`);
      // A concept one of whose codings is in the value set but for its display: no "No valid coding" (TX_GENERAL_CC_ERROR_MESSAGE).
      const concept = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: CS, code: 'one', display: 'Uno' }, { system: CS, code: 'nine' }] } }]);
      expect(ids(concept)).toEqual([
        'Display_Name_for__should_be_one_of__instead_of|invalid-display|CodeableConcept.coding[0].display',
        'Unknown_Code_in_Version|invalid-code|CodeableConcept.coding[1].code',
        'None_of_the_provided_codes_are_in_the_value_set_one|this-code-not-in-vs|CodeableConcept.coding[1].code',
      ]);
      // A coding without a system (or code) is in no value set: beside one outside it, the concept still has no valid coding.
      const systemless = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'codeableConcept', valueCodeableConcept: { coding: [{ code: 'one' }, { system: CS, code: 'nine' }] } }]);
      expect(systemless.body.parameter?.find((p) => p.name === 'result')?.valueBoolean).toBe(false);
      expect(ids(systemless)[0]).toBe('TX_GENERAL_CC_ERROR_MESSAGE|not-in-vs|-');
      expect(systemless.body.parameter?.find((p) => p.name === 'message')?.valueString).toContain(`No valid coding was found for the value set '${VS}all'`);
    });

    test('$expand of a fragment is not closed: used-fragment and valueset-unclosed, as tx.fhir.org says it', async () => {
      const r = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${VS}fragment` }]);
      expect(r.status).toBe(200);
      const expansion = r.body.expansion as { extension?: unknown[]; parameter: { name: string; valueUri?: string }[] };
      expect(expansion.parameter.filter((p) => p.name === 'used-fragment')).toEqual([{ name: 'used-fragment', valueUri: `${FRAGMENT}|0.1.0` }]);
      expect(expansion.extension).toEqual([
        { url: 'http://hl7.org/fhir/StructureDefinition/valueset-unclosed', valueBoolean: true },
        { url: 'http://hl7.org/fhir/StructureDefinition/valueset-unclosed-reason', valueString: `This extension is based on a fragment of the code system ${FRAGMENT}` },
      ]);
      // A complete code system's expansion is closed.
      const closed = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${VS}all` }]);
      expect((closed.body.expansion as { extension?: unknown }).extension).toBeUndefined();
    });

    test('a finding that is no message of the catalogue carries no id', async () => {
      const noCode = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: CS }] } }]);
      expect(ids(noCode)).toContain('-|invalid-data|CodeableConcept.coding[0]');
    });
  });
});
