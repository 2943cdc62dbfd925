/**
 * ValueSet/$validate-code with `system-version`, `check-system-version` and `force-system-version`
 * (R4 defines them on $expand; the HL7 reference servers take them on $validate-code too, and HL7's
 * validator sends them): a default version for includes that pin none, a check of the version an
 * include pins (`version-error`), and a version that replaces the pin; and $expand's `exclude-system`.
 * On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { errorIssue, getOperation, outcome, type OperationResponse, type Param, postOperation, putResource } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/versions-review';
const VS = 'http://cinder.test/ValueSet/versions-review-';

const codeSystem = (version: string, codes: string[]) => ({
  resourceType: 'CodeSystem', id: `versions-review-${version.replaceAll('.', '-')}`, url: CS, version, status: 'active', content: 'complete',
  concept: codes.map((code) => ({ code, display: `${code} (${version})` })),
});
const valueSet = (id: string, version?: string) => ({
  resourceType: 'ValueSet', id: `versions-review-${id}`, url: VS + id, status: 'active', compose: { include: [{ system: CS, ...(version === undefined ? {} : { version }) }] },
});
const issueTypes = (r: OperationResponse): string[] =>
  ((r.body.parameter?.find((p) => p.name === 'issues')?.resource as { issue?: { details: { coding: { code: string }[] } }[] } | undefined)?.issue ?? []).map((i) => i.details.coding[0]!.code);

await eachStore((kind, fresh) => {
  describe(`ValueSet/$validate-code with code system versions (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of [codeSystem('1.0.0', ['one']), codeSystem('1.2.0', ['one', 'two']), valueSet('any'), valueSet('pinned', '1.2.0'), valueSet('wildcard', '1.x'), valueSet('pinned-missing', '1.9.0')]) await putResource(t, token, r);
    });
    afterAll(() => t.close());

    const validate = (vs: string, code: string, extra: Param[] = [], version?: string) =>
      postOperation(t, token, 'ValueSet/$validate-code', [
        { name: 'url', valueUri: VS + vs }, { name: 'coding', valueCoding: { system: CS, code, ...(version === undefined ? {} : { version }) } }, ...extra,
      ]);

    test('system-version: the version of an include that pins none', async () => {
      const asked = [{ name: 'system-version', valueCanonical: `${CS}|1.0.0` }];
      expect(outcome(await validate('any', 'one', asked))).toEqual({ result: true, display: 'one (1.0.0)' });
      expect(outcome(await validate('any', 'two', asked)).result).toBe(false);
      // Not kept for requests without it (nor the other way round).
      expect(outcome(await validate('any', 'two'))).toEqual({ result: true, display: 'two (1.2.0)' });
      expect(outcome(await validate('any', 'two', asked)).result).toBe(false);
      // A pinned include keeps its version.
      expect(outcome(await validate('pinned', 'two', asked))).toEqual({ result: true, display: 'two (1.2.0)' });
      // By GET as well.
      const get = await getOperation(t, token, 'ValueSet/$validate-code', { url: `${VS}any`, system: CS, code: 'two', 'system-version': `${CS}|1.0.0` });
      expect(outcome(get).result).toBe(false);
    });

    test('force-system-version: replaces the version an include pins', async () => {
      const forced = [{ name: 'force-system-version', valueCanonical: `${CS}|1.0.0` }];
      expect(outcome(await validate('pinned', 'one', forced, '1.0.0'))).toEqual({ result: true, display: 'one (1.0.0)' });
      expect(outcome(await validate('pinned', 'two', forced)).result).toBe(false);
      expect(outcome(await validate('pinned', 'one', [], '1.0.0')).result).toBe(false);
    });

    test('check-system-version: a pinned version that does not match makes the code invalid; an unpinned include takes it', async () => {
      const checked = [{ name: 'check-system-version', valueCanonical: `${CS}|1.0.x` }];
      const refused = await validate('pinned', 'one', checked);
      expect(outcome(refused).result).toBe(false);
      expect(outcome(refused).message).toBe(`The version '1.2.0' is not allowed for system '${CS}': required to be '1.0.x' by a version-check parameter`);
      expect(issueTypes(refused)).toEqual(['version-error']);
      // Located at the coding's version, as the reference servers locate it (the `code` input's: `version`).
      const where = (r: OperationResponse) => (r.body.parameter?.find((p) => p.name === 'issues')?.resource as { issue: { expression?: string[] }[] }).issue.map((i) => i.expression?.[0]);
      expect(where(refused)).toEqual(['Coding.version']);
      const asCode = await postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: `${VS}pinned` }, { name: 'code', valueCode: 'one' }, { name: 'system', valueUri: CS }, ...checked]);
      expect(where(asCode)).toEqual(['version']);
      expect(outcome(await validate('wildcard', 'one', checked, '1.0.0'))).toEqual({ result: true, display: 'one (1.0.0)' });
      expect(issueTypes(await validate('wildcard', 'one', checked))).toEqual(['version-error']);
      expect(outcome(await validate('any', 'one', checked))).toEqual({ result: true, display: 'one (1.0.0)' });
    });

    test("a versionless coding the value set could not decide is echoed in the version the request's parameters ask for", async () => {
      const versionOf = (r: OperationResponse) => r.body.parameter?.find((p) => p.name === 'version')?.valueString;
      // The value set pins a version the server lacks: without parameters, the latest version's display and version.
      const plain = await validate('pinned-missing', 'one');
      expect(outcome(plain)).toMatchObject({ result: false, display: 'one (1.2.0)' });
      expect(versionOf(plain)).toBe('1.2.0');
      // With `system-version` or `check-system-version`, that version's, as the reference servers answer (HL7's `coding-vnn-vs1wb-default`, `-check`).
      for (const asked of [{ name: 'system-version', valueCanonical: `${CS}|1.0.0` }, { name: 'check-system-version', valueCanonical: `${CS}|1.0.x` }]) {
        const r = await validate('pinned-missing', 'one', [asked]);
        expect(outcome(r)).toMatchObject({ result: false, display: 'one (1.0.0)' });
        expect(versionOf(r)).toBe('1.0.0');
      }
      // A check that refuses the version the value set pins: the answer is about that version (HL7's `coding-vnn-vs1w-check`).
      const refused = await validate('pinned', 'one', [{ name: 'check-system-version', valueCanonical: `${CS}|1.0.x` }]);
      expect(issueTypes(refused)).toEqual(['version-error']);
      expect(versionOf(refused)).toBe('1.2.0');
    });

    test('$expand exclude-system leaves out a code system, or one version of it, and is echoed', async () => {
      const both = { resourceType: 'ValueSet', status: 'active', compose: { include: [{ system: CS, version: '1.0.0' }, { system: CS, version: '1.2.0' }] } };
      const expand = async (excluded: string[]) => {
        const r = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'valueSet', resource: both }, ...excluded.map((valueUri) => ({ name: 'exclude-system', valueUri }))]);
        expect(r.status).toBe(200);
        const e = r.body.expansion as { contains?: { code: string; version: string }[]; parameter?: Param[] };
        return { codes: (e.contains ?? []).map((c) => `${c.code}@${c.version}`), parameter: e.parameter ?? [] };
      };
      expect((await expand([])).codes).toEqual(['one@1.0.0', 'one@1.2.0', 'two@1.2.0']);
      const version = await expand([`${CS}|1.0.0`]);
      expect(version.codes).toEqual(['one@1.2.0', 'two@1.2.0']);
      expect(version.parameter).toContainEqual({ name: 'exclude-system', valueUri: `${CS}|1.0.0` });
      expect((await expand([`${CS}|1.x`])).codes).toEqual([]);
      expect((await expand([CS])).codes).toEqual([]);
      expect((await expand(['http://cinder.test/CodeSystem/other'])).codes).toHaveLength(3);
    });

    test('a canonical without a version is a 400 naming the parameter', async () => {
      const r = await validate('any', 'one', [{ name: 'force-system-version', valueCanonical: CS }]);
      expect(errorIssue(r, 400).text).toBe(`The parameter 'force-system-version' must be a canonical with a version (system|version), not '${CS}'`);
      expect((r.body.issue as unknown as { expression: string[] }[])[0]!.expression).toEqual(['force-system-version']);
    });
  });
});
