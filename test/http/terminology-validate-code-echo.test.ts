/**
 * ValueSet/$validate-code echoes what it validated as HL7's reference terminology servers do (R5's
 * outputs, compared by `bench/tx-tests.ts --strict`): `code` and `system` as given, `version` the version of
 * the CodeSystem the code was looked up in, `codeableConcept` as given with the coding found valid (or the
 * one whose display the answer gives), `inactive` for an inactive code, `status` for one whose use should be
 * reviewed (retired, deprecated, withdrawn). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { getOperation, type OperationResponse, type Param, postOperation, putResource } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/echo-shapes';
const VS = 'http://cinder.test/ValueSet/echo-';
const shapes = (version: string, circle: string) => ({
  resourceType: 'CodeSystem', id: `echo-shapes-${version.replaceAll('.', '-')}`, url: CS, version, name: 'EchoShapes', status: 'active', content: 'complete',
  caseSensitive: true,
  concept: [
    { code: 'circle', display: circle },
    { code: 'square', display: 'Square' },
    { code: 'oval', display: 'Oval', property: [{ code: 'status', valueCode: 'retired' }] },
  ],
  property: [{ code: 'status', uri: 'http://hl7.org/fhir/concept-properties#status', type: 'code' }],
});
const all = { resourceType: 'ValueSet', id: 'echo-all', url: `${VS}all`, status: 'active', compose: { include: [{ system: CS }] } };
const pinned = { resourceType: 'ValueSet', id: 'echo-pinned', url: `${VS}pinned`, status: 'active', compose: { include: [{ system: CS, version: '1.0.0' }] } };
const STATUSES = 'http://cinder.test/CodeSystem/echo-statuses';
const statuses = {
  resourceType: 'CodeSystem', id: 'echo-statuses', url: STATUSES, version: '1.0.0', name: 'EchoStatuses', status: 'active', content: 'complete', caseSensitive: true,
  property: [
    { code: 'state', uri: 'http://hl7.org/fhir/concept-properties#status', type: 'string' },
    { code: 'inactive', uri: 'http://hl7.org/fhir/concept-properties#inactive', type: 'boolean' },
  ],
  concept: [
    { code: 'current', display: 'Current', property: [{ code: 'state', valueString: 'active' }] },
    { code: 'local-a', display: 'Local A', property: [{ code: 'state', valueString: 'A' }] },
    { code: 'retired', display: 'Retired', property: [{ code: 'state', valueString: 'retired' }] },
    { code: 'discouraged', display: 'Discouraged', property: [{ code: 'state', valueString: 'deprecated' }] },
    { code: 'flagged', display: 'Flagged', property: [{ code: 'inactive', valueBoolean: true }] },
    { code: 'spaced', display: 'Spaced', property: [{ code: 'inactive', valueBoolean: true }, { code: 'state', valueString: 'no  longer  used' }] },
    { code: 'std-deprecated', display: 'Standards deprecated', extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status', valueCode: 'deprecated' }] },
    { code: 'std-withdrawn', display: 'Standards withdrawn', extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status', valueCode: 'withdrawn' }] },
    { code: 'std-trial', display: 'Standards trial use', extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status', valueCode: 'trial-use' }] },
    { code: 'said-inactive', display: 'Said inactive', property: [{ code: 'state', valueString: 'inactive' }] },
  ],
};
const allStatuses = { resourceType: 'ValueSet', id: 'echo-statuses', url: `${VS}statuses`, status: 'active', compose: { include: [{ system: STATUSES }] } };
const currentOnly = { resourceType: 'ValueSet', id: 'echo-current', url: `${VS}current`, status: 'active', compose: { include: [{ system: STATUSES, concept: [{ code: 'current' }] }] } };
/** A code system whose `inactive` property is a code (as R5 content may write it): `true` makes a concept inactive, as a boolean does. */
const CODED = 'http://cinder.test/CodeSystem/echo-coded-flags';
const codedFlags = {
  resourceType: 'CodeSystem', id: 'echo-coded-flags', url: CODED, version: '1.0.0', name: 'EchoCodedFlags', status: 'active', content: 'complete', caseSensitive: true,
  property: [{ code: 'inactive', type: 'code' }],
  concept: [{ code: 'coded-flag', display: 'Coded flag', property: [{ code: 'inactive', valueCode: 'true' }] }, { code: 'coded-active', display: 'Coded active', property: [{ code: 'inactive', valueCode: 'false' }] }],
};
const activeStatuses = { resourceType: 'ValueSet', id: 'echo-active', url: `${VS}active`, status: 'active', compose: { inactive: false, include: [{ system: STATUSES }] } };
const pinnedMissing = { resourceType: 'ValueSet', id: 'echo-pinned-missing', url: `${VS}pinned-missing`, status: 'active', compose: { include: [{ system: CS, version: '9.0.0' }] } };
const circles = { resourceType: 'ValueSet', id: 'echo-circles', url: `${VS}circles`, status: 'active', compose: { include: [{ system: CS, concept: [{ code: 'circle' }] }] } };

const value = (r: OperationResponse, name: string) => {
  const p = r.body.parameter?.find((x) => x.name === name);
  return p === undefined ? undefined : Object.entries(p).find(([k]) => k.startsWith('value'))?.[1];
};
/** The echo and the result: [result, code, system, version]. */
const echo = (r: OperationResponse) => [value(r, 'result'), value(r, 'code'), value(r, 'system'), value(r, 'version')];

await eachStore((kind, fresh) => {
  describe(`ValueSet/$validate-code echoes the coding it validated (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const validate = (parameter: Param[]) => postOperation(t, token, 'ValueSet/$validate-code', parameter);
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of [shapes('1.0.0', 'Circle (1.0)'), shapes('2.0.0', 'Circle (2.0)'), all, pinned, pinnedMissing, circles, statuses, allStatuses, currentOnly, activeStatuses, codedFlags]) await putResource(t, token, r);
    });
    afterAll(() => t.close());

    test('a code in the value set: code and system as given, version of the code system it was found in', async () => {
      const latest = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'code', valueCode: 'circle' }, { name: 'system', valueUri: CS }]);
      expect(latest.status).toBe(200);
      expect(echo(latest)).toEqual([true, 'circle', CS, '2.0.0']);
      expect(value(latest, 'display')).toBe('Circle (2.0)');
      // The value set pins 1.0.0: that is the version the code was checked in, though the coding names none.
      const old = await validate([{ name: 'url', valueUri: `${VS}pinned` }, { name: 'coding', valueCoding: { system: CS, code: 'circle' } }]);
      expect(echo(old)).toEqual([true, 'circle', CS, '1.0.0']);
      // Kept answers (the route's cache) carry the echo too.
      expect(echo(await validate([{ name: 'url', valueUri: `${VS}pinned` }, { name: 'coding', valueCoding: { system: CS, code: 'circle' } }]))).toEqual([true, 'circle', CS, '1.0.0']);
      const get = await getOperation(t, token, 'ValueSet/$validate-code', { url: `${VS}all`, system: CS, code: 'square', systemVersion: '1.0.0' });
      expect(echo(get)).toEqual([true, 'square', CS, '1.0.0']);
    });

    test('a code outside the value set, or unknown, or of an unknown system is echoed with what is known of it', async () => {
      const outside = await validate([{ name: 'url', valueUri: `${VS}circles` }, { name: 'coding', valueCoding: { system: CS, code: 'square' } }]);
      expect(echo(outside)).toEqual([false, 'square', CS, '2.0.0']);
      const unknown = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'coding', valueCoding: { system: CS, code: 'hexagon' } }]);
      expect(echo(unknown)).toEqual([false, 'hexagon', CS, '2.0.0']);
      // No such code system: nothing to take a version from.
      const system = 'http://cinder.test/CodeSystem/echo-nothing';
      expect(echo(await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'coding', valueCoding: { system, code: 'circle' } }]))).toEqual([false, 'circle', system, undefined]);
      // A coding without a system: its code alone.
      expect(echo(await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'coding', valueCoding: { code: 'circle' } }]))).toEqual([false, 'circle', undefined, undefined]);
      // A version the value set does not use: echoed with the value set's version, whose display the answer gives.
      const mismatch = await validate([{ name: 'url', valueUri: `${VS}pinned` }, { name: 'coding', valueCoding: { system: CS, version: '2.0.0', code: 'circle' } }]);
      expect(echo(mismatch)).toEqual([false, 'circle', CS, '1.0.0']);
      expect(value(mismatch, 'display')).toBe('Circle (1.0)');
    });

    test('a code as given (case) and a code that is not a FHIR code, which is not echoed', async () => {
      // A case-sensitive code system: 'Circle' is not 'circle', and is echoed as given.
      expect(echo(await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'code', valueCode: 'Circle' }, { name: 'system', valueUri: CS }]))).toEqual([false, 'Circle', CS, '2.0.0']);
      const spaced = await getOperation(t, token, 'ValueSet/$validate-code', { url: `${VS}all`, system: CS, code: ' circle' });
      expect(spaced.status).toBe(200);
      expect(echo(spaced)).toEqual([false, undefined, undefined, undefined]);
    });

    test('a CodeableConcept is echoed, with the coding found valid, or the one whose display the answer gives', async () => {
      const concept = { coding: [{ system: 'http://cinder.test/CodeSystem/echo-nothing', code: 'x' }, { system: CS, code: 'square', display: 'Square' }], text: 'a square' };
      const good = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'codeableConcept', valueCodeableConcept: concept }]);
      expect(value(good, 'codeableConcept')).toEqual(concept);
      expect(echo(good)).toEqual([true, 'square', CS, '2.0.0']);
      const wrongDisplay = { coding: [{ system: CS, code: 'circle', display: 'Round' }] };
      const bad = await validate([{ name: 'url', valueUri: `${VS}pinned` }, { name: 'codeableConcept', valueCodeableConcept: wrongDisplay }]);
      expect(value(bad, 'codeableConcept')).toEqual(wrongDisplay);
      expect(echo(bad)).toEqual([false, 'circle', CS, '1.0.0']);
      // No coding known: the concept alone.
      const none = { coding: [{ system: CS, code: 'hexagon' }] };
      const unknown = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'codeableConcept', valueCodeableConcept: none }]);
      expect(value(unknown, 'codeableConcept')).toEqual(none);
      expect(echo(unknown)).toEqual([false, undefined, undefined, undefined]);
    });

    test('a CodeableConcept none of whose codings is valid echoes only a coding the value set has (its version or display wrong)', async () => {
      const concept = (coding: Record<string, string>) => ({ name: 'codeableConcept', valueCodeableConcept: { coding: [coding] } });
      // Known to the code system but outside the value set: no coding echoed, nor its display (HL7's `bad-cc2-isa`).
      const outside = await validate([{ name: 'url', valueUri: `${VS}circles` }, concept({ system: CS, code: 'square' })]);
      expect(echo(outside)).toEqual([false, undefined, undefined, undefined]);
      expect(value(outside, 'display')).toBeUndefined();
      // The version the value set pins is one the server lacks: nothing is known of the code there (`codeableconcept-vnn-vs1wb`).
      const missing = await validate([{ name: 'url', valueUri: `${VS}pinned-missing` }, concept({ system: CS, code: 'circle' })]);
      expect(echo(missing)).toEqual([false, undefined, undefined, undefined]);
      expect(value(missing, 'display')).toBeUndefined();
      // In the value set but for the coding's version: echoed with the value set's version and its display (`codeableconcept-v10-vs20`).
      const mismatch = await validate([{ name: 'url', valueUri: `${VS}pinned` }, concept({ system: CS, version: '2.0.0', code: 'circle' })]);
      expect(echo(mismatch)).toEqual([false, 'circle', CS, '1.0.0']);
      expect(value(mismatch, 'display')).toBe('Circle (1.0)');
      // The coding's own version unknown, the code in the value set's: echoed too (`codeableconcept-vbb-vs10`).
      const own = await validate([{ name: 'url', valueUri: `${VS}pinned` }, concept({ system: CS, version: '7.7.7', code: 'circle' })]);
      expect(echo(own)).toEqual([false, 'circle', CS, '1.0.0']);
    });

    test('an inactive code says so in `inactive`, in the value set or not, as a coding or in a CodeableConcept', async () => {
      const member = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'coding', valueCoding: { system: CS, code: 'oval' } }]);
      expect([value(member, 'result'), value(member, 'inactive')]).toEqual([true, true]);
      const outside = await validate([{ name: 'url', valueUri: `${VS}circles` }, { name: 'coding', valueCoding: { system: CS, code: 'oval' } }]);
      expect([value(outside, 'result'), value(outside, 'inactive')]).toEqual([false, true]);
      const active = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'coding', valueCoding: { system: CS, code: 'square' } }]);
      expect(value(active, 'inactive')).toBeUndefined();
      // A CodeableConcept says it as a Coding does, whether its inactive coding is the one found valid or not.
      const concept = (coding: object[]) => validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'codeableConcept', valueCodeableConcept: { coding } }]);
      const conceptMember = await concept([{ system: CS, code: 'oval' }]);
      expect([value(conceptMember, 'result'), value(conceptMember, 'inactive')]).toEqual([true, true]);
      const conceptOutside = await validate([{ name: 'url', valueUri: `${VS}circles` }, { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: CS, code: 'oval' }] } }]);
      expect([value(conceptOutside, 'result'), value(conceptOutside, 'inactive')]).toEqual([false, true]);
      const beside = await validate([{ name: 'url', valueUri: `${VS}circles` }, { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: CS, code: 'circle' }, { system: CS, code: 'oval' }] } }]);
      expect([value(beside, 'result'), value(beside, 'inactive')]).toEqual([true, true]);
      expect(value(await concept([{ system: CS, code: 'square' }]), 'inactive')).toBeUndefined();
      // CodeSystem/$validate-code too.
      const cs = await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'url', valueUri: CS }, { name: 'code', valueCode: 'oval' }]);
      expect([value(cs, 'result'), value(cs, 'inactive')]).toEqual([true, true]);
    });

    test('a code whose use should be reviewed says its status in `status`, as a coding or in a CodeableConcept, on both $validate-codes', async () => {
      const coding = async (code: string, url = `${VS}statuses`) => {
        const r = await validate([{ name: 'url', valueUri: url }, { name: 'coding', valueCoding: { system: STATUSES, code } }]);
        expect(r.status).toBe(200);
        return [value(r, 'result'), value(r, 'inactive'), value(r, 'status')];
      };
      // The concept's status property (concept-properties#status) when it retires or deprecates the concept.
      expect(await coding('retired')).toEqual([true, true, 'retired']);
      expect(await coding('discouraged')).toEqual([true, undefined, 'deprecated']);
      // Else its standards-status extension, when that deprecates or withdraws it; a withdrawn concept is inactive.
      expect(await coding('std-deprecated')).toEqual([true, undefined, 'deprecated']);
      expect(await coding('std-withdrawn')).toEqual([true, true, 'withdrawn']);
      // Nothing for an active concept, whatever its status vocabulary, nor for an inactive one without a status.
      for (const code of ['current', 'local-a', 'std-trial']) expect(await coding(code)).toEqual([true, undefined, undefined]);
      expect(await coding('flagged')).toEqual([true, true, undefined]);
      // A status that is no FHIR code is not given: the answer stays valid FHIR.
      expect(await coding('spaced')).toEqual([true, true, undefined]);
      // Outside the value set too; and the route's kept answer says it again.
      expect(await coding('retired', `${VS}current`)).toEqual([false, true, 'retired']);
      expect(await coding('retired', `${VS}current`)).toEqual([false, true, 'retired']);
      const get = await getOperation(t, token, 'ValueSet/$validate-code', { url: `${VS}statuses`, system: STATUSES, code: 'discouraged' });
      expect(value(get, 'status')).toBe('deprecated');
      // A CodeableConcept: the status of the coding found valid, else of the first coding that has one.
      const concept = async (url: string, codes: string[]) => {
        const r = await validate([{ name: 'url', valueUri: url }, { name: 'codeableConcept', valueCodeableConcept: { coding: codes.map((code) => ({ system: STATUSES, code })) } }]);
        return [value(r, 'result'), value(r, 'status')];
      };
      expect(await concept(`${VS}statuses`, ['std-withdrawn'])).toEqual([true, 'withdrawn']);
      expect(await concept(`${VS}current`, ['current', 'retired'])).toEqual([true, 'retired']);
      expect(await concept(`${VS}current`, ['discouraged', 'retired'])).toEqual([false, 'deprecated']);
      expect(await concept(`${VS}statuses`, ['current'])).toEqual([true, undefined]);
      // CodeSystem/$validate-code too, of a code and of a coding.
      const cs = await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'url', valueUri: STATUSES }, { name: 'code', valueCode: 'retired' }]);
      expect([value(cs, 'result'), value(cs, 'inactive'), value(cs, 'status')]).toEqual([true, true, 'retired']);
      const csCoding = await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'url', valueUri: STATUSES }, { name: 'coding', valueCoding: { system: STATUSES, code: 'std-deprecated' } }]);
      expect([value(csCoding, 'result'), value(csCoding, 'status')]).toEqual([true, 'deprecated']);
      const csActive = await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'url', valueUri: STATUSES }, { name: 'code', valueCode: 'local-a' }]);
      expect(value(csActive, 'status')).toBeUndefined();
    });

    test('a code system version the server does not have is answered naming the versions it has, in HL7\'s words', async () => {
      const r = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'coding', valueCoding: { system: CS, version: '9', code: 'circle' } }]);
      expect(value(r, 'result')).toBe(false);
      const issues = (r.body.parameter?.find((p) => p.name === 'issues')?.resource as { issue: { severity: string; details: { coding: { code: string }[]; text: string }; expression: string[] }[] }).issue;
      expect(issues.map((i) => [i.severity, i.details.coding[0]!.code, i.details.text, i.expression[0]])).toEqual([
        ['error', 'not-found', `A definition for CodeSystem '${CS}' version '9' could not be found, so the code cannot be validated. Valid versions: 1.0.0 or 2.0.0`, 'Coding.system'],
        ['warning', 'vs-invalid', `The code system '${CS}' version '2.0.0' for the versionless include in the ValueSet include is different to the one in the value ('9')`, 'Coding.version'],
      ]);
      expect(value(r, 'x-caused-by-unknown-system')).toBe(`${CS}|9`);
      // A code system the server has no version of: HL7's UNKNOWN_CODESYSTEM_VERSION_NONE, saying none is known.
      const nothing = 'http://cinder.test/CodeSystem/echo-nothing';
      const none = await validate([{ name: 'url', valueUri: `${VS}all` }, { name: 'coding', valueCoding: { system: nothing, version: '9', code: 'circle' } }]);
      const noneIssues = (none.body.parameter?.find((p) => p.name === 'issues')?.resource as { issue: { extension?: { valueString: string }[]; details: { coding: { code: string }[]; text: string } }[] }).issue;
      expect(noneIssues.filter((i) => i.details.coding[0]!.code === 'not-found').map((i) => [i.extension?.[0]?.valueString, i.details.text])).toEqual([
        ['UNKNOWN_CODESYSTEM_VERSION_NONE', `A definition for CodeSystem '${nothing}' version '9' could not be found, so the code cannot be validated. No versions of this code system are known`],
      ]);
    });

    test("CodeSystem/$validate-code's false answer about a known code says whether it is inactive and its status, as ValueSet/$validate-code's does", async () => {
      const cs = (parameter: Param[]) => postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'url', valueUri: STATUSES }, ...parameter]);
      const wrong = await cs([{ name: 'code', valueCode: 'retired' }, { name: 'display', valueString: 'Not its name' }]);
      expect([value(wrong, 'result'), value(wrong, 'display'), value(wrong, 'inactive'), value(wrong, 'status')]).toEqual([false, 'Retired', true, 'retired']);
      const deprecated = await cs([{ name: 'coding', valueCoding: { system: STATUSES, code: 'discouraged', display: 'Not its name' } }]);
      expect([value(deprecated, 'result'), value(deprecated, 'inactive'), value(deprecated, 'status')]).toEqual([false, undefined, 'deprecated']);
      const concept = await cs([{ name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: STATUSES, code: 'std-withdrawn', display: 'Not its name' }] } }]);
      expect([value(concept, 'result'), value(concept, 'inactive'), value(concept, 'status')]).toEqual([false, true, 'withdrawn']);
      // The same answer from the value set's operation.
      const vs = await validate([{ name: 'url', valueUri: `${VS}statuses` }, { name: 'code', valueCode: 'retired' }, { name: 'system', valueUri: STATUSES }, { name: 'display', valueString: 'Not its name' }]);
      expect([value(vs, 'result'), value(vs, 'inactive'), value(vs, 'status')]).toEqual([false, true, 'retired']);
    });

    test('a concept is inactive as the reference servers read it: withdrawn, retired, an inactive property (boolean or code); deprecated stays active', async () => {
      const expand = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${VS}statuses` }, { name: 'activeOnly', valueBoolean: true }]);
      expect(expand.status).toBe(200);
      const listed = ((expand.body.expansion as { contains: { code: string }[] }).contains).map((c) => c.code).sort();
      expect(listed).toEqual(['current', 'discouraged', 'local-a', 'std-deprecated', 'std-trial']);
      const all = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${VS}statuses` }]);
      const inactive = ((all.body.expansion as { contains: { code: string; inactive?: boolean }[] }).contains).filter((c) => c.inactive).map((c) => c.code).sort();
      expect(inactive).toEqual(['flagged', 'retired', 'said-inactive', 'spaced', 'std-withdrawn']);
      const coded = await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'url', valueUri: CODED }, { name: 'code', valueCode: 'coded-flag' }]);
      expect([value(coded, 'result'), value(coded, 'inactive')]).toEqual([true, true]);
      const codedActive = await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'url', valueUri: CODED }, { name: 'code', valueCode: 'coded-active' }]);
      expect([value(codedActive, 'result'), value(codedActive, 'inactive')]).toEqual([true, undefined]);
      // A value set of active codes refuses them, saying why in HL7's words.
      const refused = await validate([{ name: 'url', valueUri: `${VS}active` }, { name: 'coding', valueCoding: { system: STATUSES, code: 'std-withdrawn' } }]);
      expect([value(refused, 'result'), value(refused, 'inactive'), value(refused, 'status')]).toEqual([false, true, 'withdrawn']);
      const issues = (refused.body.parameter?.find((p) => p.name === 'issues')?.resource as { issue: { severity: string; details: { coding: { code: string }[]; text: string }; expression: string[] }[] }).issue;
      expect(issues.map((i) => [i.severity, i.details.coding[0]!.code, i.details.text, i.expression[0]])).toEqual([
        ['error', 'not-in-vs', `The provided code '${STATUSES}#std-withdrawn' was not found in the value set '${VS}active'`, 'Coding.code'],
        ['error', 'code-rule', "The concept 'std-withdrawn' is valid but is not active", 'Coding.code'],
        ['warning', 'code-comment', "The concept 'std-withdrawn' has a status of withdrawn and inactive and its use should be reviewed", 'Coding'],
      ]);
      // `message` holds their texts in alphabetical order, as the reference servers write it.
      expect(value(refused, 'message')).toBe([
        "The concept 'std-withdrawn' has a status of withdrawn and inactive and its use should be reviewed",
        "The concept 'std-withdrawn' is valid but is not active",
        `The provided code '${STATUSES}#std-withdrawn' was not found in the value set '${VS}active'`,
      ].join('; '));
      // A status of `inactive` is not repeated in `status`: `inactive` says it.
      expect(await (async () => {
        const r = await validate([{ name: 'url', valueUri: `${VS}statuses` }, { name: 'code', valueCode: 'said-inactive' }, { name: 'system', valueUri: STATUSES }]);
        return [value(r, 'result'), value(r, 'inactive'), value(r, 'status'), value(r, 'message')];
      })()).toEqual([true, true, undefined, "The concept 'said-inactive' has a status of inactive and its use should be reviewed"]);
    });
  });
});
