/**
 * A value set that cannot be expanded or checked is refused with an OperationOutcome as HL7's reference
 * terminology servers give it (the ecosystem tests, `bench/tx-tests.ts --strict`): HL7's tx-issue-type in
 * `details.coding` (`vs-invalid` for a definition that cannot be evaluated, `not-found` for what it needs
 * and the server lacks, `version-error` for a version the server has that `check-system-version` refuses), and the element of the
 * value set at fault as a FHIRPath `expression` (`ValueSet.compose.include[0].filter[0]`), not a label. A
 * cycle of imports is `processing`. Where HL7's catalogue has the message, the issue is shaped as the reference
 * servers write it (HL7's harness compares it whole): its key in the `operationoutcome-message-id` extension, no
 * `diagnostics`, and an `expression` only where they give one. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { type OperationResponse, type Param, postOperation, putResource } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/errs-tools';
const VS = 'http://cinder.test/ValueSet/errs-';
const TX = 'http://hl7.org/fhir/tools/CodeSystem/tx-issue-type';
const tools = {
  resourceType: 'CodeSystem', id: 'errs-tools', url: CS, version: '1.0.0', status: 'active', content: 'complete',
  concept: [{ code: 'hammer', display: 'Hammer' }, { code: 'saw', display: 'Saw' }],
};
const valueSet = (id: string, compose: unknown, extra: Record<string, unknown> = {}) =>
  ({ resourceType: 'ValueSet', id: `errs-${id}`, url: `${VS}${id}`, status: 'active', compose, ...extra });
const FIXTURES = [
  tools,
  // R4 requires a filter's value: its absence stated by data-absent-reason, as HL7's ecosystem tests write it.
  valueSet('no-value', { include: [{ system: CS, filter: [{ property: 'concept', op: 'is-a', _value: { extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/data-absent-reason', valueCode: 'not-applicable' }] } }] }] }),
  valueSet('no-property', { include: [{ system: CS, filter: [{ property: 'weight', op: '=', value: 'heavy' }] }] }),
  valueSet('bad-regex', { include: [{ system: CS }, { system: CS, filter: [{ property: 'code', op: 'regex', value: '(unclosed' }] }] }),
  valueSet('missing-version', { include: [{ system: CS, version: '9.9.9' }] }),
  valueSet('pinned', { include: [{ system: CS, version: '1.0.0' }] }),
  valueSet('unpinned', { include: [{ system: CS }] }),
  valueSet('missing-import', { include: [{ system: CS }], exclude: [{ valueSet: ['http://cinder.test/ValueSet/errs-nowhere'] }] }),
  valueSet('cycle-a', { include: [{ valueSet: [`${VS}cycle-b`] }] }),
  valueSet('cycle-b', { include: [{ valueSet: [`${VS}cycle-a`] }] }),
  // Not in the cycle, but leads into it through its second include's second import.
  valueSet('into-cycle', { include: [{ system: CS }, { valueSet: [`${VS}pinned`, `${VS}cycle-a`] }] }),
  valueSet('not-supplement', { include: [{ system: CS }] }, {
    extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/valueset-supplement', valueCanonical: CS }],
  }),
  valueSet('missing-supplement', { include: [{ system: CS }] }, {
    extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/valueset-supplement', valueCanonical: 'http://cinder.test/CodeSystem/errs-nowhere' }],
  }),
];

type Issue = {
  extension?: { url: string; valueString: string }[]; severity: string; code: string; details?: { coding?: { system: string; code: string }[]; text: string };
  diagnostics?: string; expression?: string[];
};
const MESSAGE_ID = 'http://hl7.org/fhir/StructureDefinition/operationoutcome-message-id';
/** The catalogue key of a refusal's one issue, and whether it repeats its text in `diagnostics`: `KEY diagnostics|-`. */
function shape(r: OperationResponse): string {
  const [i] = r.body.issue as [Issue];
  const ids = (i.extension ?? []).filter((e) => e.url === MESSAGE_ID).map((e) => e.valueString);
  return `${ids.join(',') || '-'} ${i.diagnostics === undefined ? '-' : 'diagnostics'}`;
}
/** `code tx-issue-type expression` of the one issue of a 4xx answer. */
function refusal(r: OperationResponse): string {
  expect(r.status).toBe(400);
  expect(r.body.resourceType).toBe('OperationOutcome');
  const issues = r.body.issue as Issue[];
  expect(issues).toHaveLength(1);
  const [i] = issues as [Issue];
  expect(i.severity).toBe('error');
  const coding = i.details?.coding ?? [];
  expect(coding.every((c) => c.system === TX)).toBe(true);
  return `${i.code} ${coding.map((c) => c.code).join(',') || '-'} ${(i.expression ?? ['-']).join(',')}`;
}

await eachStore((kind, fresh) => {
  describe(`terminology refusals with HL7's tx-issue-type and the element at fault (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const expand = (parameter: Param[]) => postOperation(t, token, 'ValueSet/$expand', parameter);
    const expandUrl = (id: string) => expand([{ name: 'url', valueUri: `${VS}${id}` }]);
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of FIXTURES) await putResource(t, token, r);
    });
    afterAll(() => t.close());

    test('a filter that cannot be evaluated is vs-invalid, at the filter (or its element) in the compose', async () => {
      const noValue = await expandUrl('no-value');
      expect(refusal(noValue)).toBe('invalid vs-invalid ValueSet.compose.include[0].filter[0]');
      expect(shape(noValue)).toBe('UNABLE_TO_HANDLE_SYSTEM_FILTER_WITH_NO_VALUE -');
      expect((noValue.body.issue as Issue[])[0]!.details?.text).toBe(`The system ${CS} filter with property = concept, op = is-a has no value`);
      expect(refusal(await expandUrl('no-property'))).toBe('invalid vs-invalid ValueSet.compose.include[0].filter[0].property');
      expect(refusal(await expandUrl('bad-regex'))).toBe('invalid vs-invalid ValueSet.compose.include[1].filter[0].value');
      // An inline value set: the same paths.
      const inline = await expand([{ name: 'valueSet', resource: { resourceType: 'ValueSet', status: 'active', compose: { include: [{ system: CS, filter: [{ property: 'concept', op: 'sounds-like', value: 'x' }] }, { concept: [{ code: 'saw' }] }] } } }]);
      expect(refusal(inline)).toBe('invalid vs-invalid ValueSet.compose.include[0].filter[0].op');
      const noSystem = await expand([{ name: 'valueSet', resource: { resourceType: 'ValueSet', status: 'active', compose: { include: [{ system: CS }, { concept: [{ code: 'saw' }] }] } } }]);
      expect(refusal(noSystem)).toBe('invalid vs-invalid ValueSet.compose.include[1]');
    });

    test('what the value set needs and the server lacks is not-found, at the include or exclude that needs it', async () => {
      // A version the server lacks: HL7's UNKNOWN_CODESYSTEM_VERSION_EXP, with the versions it has and no `expression`, as the reference servers give it.
      const version = await expandUrl('missing-version');
      expect(refusal(version)).toBe('not-found not-found -');
      expect(shape(version)).toBe('UNKNOWN_CODESYSTEM_VERSION_EXP -');
      expect((version.body.issue as Issue[])[0]!.details?.text).toBe(`A definition for CodeSystem '${CS}' version '9.9.9' could not be found, so the value set cannot be expanded. Valid versions: 1.0.0`);
      expect(refusal(await expandUrl('missing-import'))).toBe('not-found not-found ValueSet.compose.exclude[0]');
      // A supplement it names that the server lacks: HL7's VALUESET_SUPPLEMENT_MISSING, on $expand and $validate-code alike.
      const supplement = await expandUrl('missing-supplement');
      expect(refusal(supplement)).toBe('not-found not-found -');
      expect(shape(supplement)).toBe('VALUESET_SUPPLEMENT_MISSING -');
      const checkedSupplement = await postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: `${VS}missing-supplement` }, { name: 'coding', valueCoding: { system: CS, code: 'saw' } }]);
      expect(refusal(checkedSupplement)).toBe('not-found not-found -');
      expect(shape(checkedSupplement)).toBe('VALUESET_SUPPLEMENT_MISSING -');
      // A ValueSet named by URL that does not exist: still the contract's 400 `invalid` at `url`, with the kind and HL7's key beside it.
      const nowhere = await expandUrl('nowhere');
      expect(refusal(nowhere)).toBe('invalid not-found url');
      expect(shape(nowhere)).toBe('Unable_to_resolve_value_Set_ -');
      const validate = await postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: `${VS}nowhere` }, { name: 'code', valueCode: 'saw' }, { name: 'system', valueUri: CS }]);
      expect(refusal(validate)).toBe('invalid not-found url');
      expect(shape(validate)).toBe('Unable_to_resolve_value_Set_ -');
    });

    test("a value set the request supplies is the client's input: its refusals keep the element at fault, HL7's key beside it", async () => {
      const supplied = (vs: Record<string, unknown>) => ({ name: 'valueSet', resource: { resourceType: 'ValueSet', status: 'active', ...vs } });
      // A code system version the server lacks, at the include that pins it.
      const version = await expand([supplied({ compose: { include: [{ system: CS }, { system: CS, version: '9.9.9' }] } })]);
      expect(refusal(version)).toBe('not-found not-found ValueSet.compose.include[1]');
      expect(shape(version)).toBe('UNKNOWN_CODESYSTEM_VERSION_EXP -');
      // A supplement it names that the server lacks, at the extension naming it ($expand and $validate-code alike).
      const extension = [
        { url: 'http://hl7.org/fhir/StructureDefinition/valueset-expansionSource', valueUri: 'http://cinder.test/elsewhere' },
        { url: 'http://hl7.org/fhir/StructureDefinition/valueset-supplement', valueCanonical: 'http://cinder.test/CodeSystem/errs-nowhere' },
      ];
      const supplement = await expand([supplied({ extension, compose: { include: [{ system: CS }] } })]);
      expect(refusal(supplement)).toBe('not-found not-found ValueSet.extension[1]');
      expect(shape(supplement)).toBe('VALUESET_SUPPLEMENT_MISSING -');
      const checked = await postOperation(t, token, 'ValueSet/$validate-code', [supplied({ extension, compose: { include: [{ system: CS }] } }), { name: 'coding', valueCoding: { system: CS, code: 'saw' } }]);
      expect(refusal(checked)).toBe('not-found not-found ValueSet.extension[1]');
      // One that is no supplement: at that extension too, not at a `url` the request does not give.
      const notSupplement = [{ url: 'http://hl7.org/fhir/StructureDefinition/valueset-supplement', valueCanonical: CS }];
      expect(refusal(await expand([supplied({ extension: notSupplement, compose: { include: [{ system: CS }] } })]))).toBe('invalid vs-invalid ValueSet.extension[0]');
      // A stored value set it imports that names a missing supplement: about that value set, no element of the request.
      expect(refusal(await expand([supplied({ compose: { include: [{ valueSet: [`${VS}missing-supplement`] }] } })]))).toBe('not-found not-found -');
      // An import of a stored value set in a cycle: at the supplied value set's import that leads into it.
      const cycle = await expand([supplied({ compose: { include: [{ system: CS }, { valueSet: [`${VS}pinned`, `${VS}cycle-a`] }] } })]);
      expect(refusal(cycle)).toBe('processing vs-invalid ValueSet.compose.include[1].valueSet[1]');
      expect(shape(cycle)).toBe('VALUESET_CIRCULAR_REFERENCE -');
    });

    test('a cycle of imports is processing vs-invalid; a supplement that is none is vs-invalid', async () => {
      // HL7's VALUESET_CIRCULAR_REFERENCE, the chain in the text and no `expression`, as the reference servers give it.
      const cycle = await expandUrl('cycle-a');
      expect(refusal(cycle)).toBe('processing vs-invalid -');
      expect(shape(cycle)).toBe('VALUESET_CIRCULAR_REFERENCE -');
      expect((cycle.body.issue as Issue[])[0]!.details?.text).toBe(`circular ValueSet import: ${VS}cycle-a -> ${VS}cycle-b -> ${VS}cycle-a`);
      expect(refusal(await expandUrl('cycle-b'))).toBe('processing vs-invalid -');
      const into = await expandUrl('into-cycle');
      expect(refusal(into)).toBe('processing vs-invalid -');
      expect((into.body.issue as Issue[])[0]!.details?.text).toBe(`circular ValueSet import: ${VS}cycle-a -> ${VS}cycle-b -> ${VS}cycle-a`);
      const checked = await postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: `${VS}into-cycle` }, { name: 'system', valueUri: CS }, { name: 'code', valueCode: 'saw' }]);
      expect(refusal(checked)).toBe('processing vs-invalid -');
      expect(shape(checked)).toBe('VALUESET_CIRCULAR_REFERENCE -');
      // A cycle among the contained value sets of one given inline.
      const inline = {
        resourceType: 'ValueSet', status: 'active',
        contained: [
          { resourceType: 'ValueSet', id: 'x', status: 'active', compose: { include: [{ valueSet: ['#y'] }] } },
          { resourceType: 'ValueSet', id: 'y', status: 'active', compose: { include: [{ valueSet: ['#x'] }] } },
        ],
        compose: { include: [{ system: CS }, { valueSet: ['#x'] }] },
      };
      const contained = await expand([{ name: 'valueSet', resource: inline }]);
      // The client's own value set: at its import that leads into the cycle.
      expect(refusal(contained)).toBe('processing vs-invalid ValueSet.compose.include[1].valueSet[0]');
      expect((contained.body.issue as Issue[])[0]!.details?.text).toBe('circular ValueSet import: #x -> #y -> #x');
      expect(refusal(await expandUrl('not-supplement'))).toBe('invalid vs-invalid url');
    });

    test('a code system version check-system-version refuses is a version-error, one the server lacks not-found', async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}pinned` }, { name: 'check-system-version', valueCanonical: `${CS}|2.0.0` }]);
      // HL7's VALUESET_VERSION_CHECK and no `diagnostics`, as the reference servers give it, at the parameter that refuses it.
      expect(refusal(r)).toBe('exception version-error check-system-version');
      expect(shape(r)).toBe('VALUESET_VERSION_CHECK -');
      // A pinned version the server does not have is not found, whatever the check (ecosystem test vs-expand-v-wb-check).
      const missing = await expand([{ name: 'url', valueUri: `${VS}missing-version` }, { name: 'check-system-version', valueCanonical: `${CS}|1.0.x` }]);
      expect(refusal(missing)).toBe('not-found not-found -');
      expect((missing.body.issue as Issue[])[0]!.details?.text).toContain("'9.9.9'");
    });

    test("a version the request's system-version or force-system-version asks for that the server lacks: that version, at that parameter", async () => {
      const text = (r: OperationResponse) => (r.body.issue as Issue[])[0]!.details?.text;
      const missing = `A definition for CodeSystem '${CS}' version '7.0.0' could not be found, so the value set cannot be expanded. Valid versions: 1.0.0`;
      // Forced in place of the value set's pin (which the server has): not "version '1.0.0' could not be found. Valid versions: 1.0.0".
      const forced = await expand([{ name: 'url', valueUri: `${VS}pinned` }, { name: 'force-system-version', valueUri: `${CS}|7.0.0` }]);
      expect(refusal(forced)).toBe('not-found not-found force-system-version');
      expect(shape(forced)).toBe('UNKNOWN_CODESYSTEM_VERSION_EXP -');
      expect(text(forced)).toBe(missing);
      // The version of an include that pins none: not "CodeSystem is not available", which the server has.
      const chosen = await expand([{ name: 'url', valueUri: `${VS}unpinned` }, { name: 'system-version', valueUri: `${CS}|7.0.0` }]);
      expect(refusal(chosen)).toBe('not-found not-found system-version');
      expect(text(chosen)).toBe(missing);
      const checked = await expand([{ name: 'url', valueUri: `${VS}unpinned` }, { name: 'check-system-version', valueUri: `${CS}|7.0.0` }]);
      expect(refusal(checked)).toBe('not-found not-found check-system-version');
      // A version it has: expanded as asked.
      expect((await expand([{ name: 'url', valueUri: `${VS}pinned` }, { name: 'force-system-version', valueUri: `${CS}|1.0.0` }])).status).toBe(200);
    });

    test('errors of the request itself carry no tx-issue-type', async () => {
      const count = await expand([{ name: 'url', valueUri: `${VS}missing-version` }, { name: 'count', valueInteger: -1 }]);
      expect(refusal(count)).toBe('invalid - count');
      // Cinder's own words, repeated in `diagnostics`, with no catalogue key.
      expect(shape(count)).toBe('- diagnostics');
    });
  });
});
