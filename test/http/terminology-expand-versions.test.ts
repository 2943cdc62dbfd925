/**
 * `contains.version` where it tells something `used-codesystem` does not, as HL7's reference terminology
 * servers give it: on the codes of a code system the value set includes in several versions, or of which
 * the expansion drew on several versions (through an import); not when one version of the system is used,
 * which `used-codesystem` names. The `system-version`, `check-system-version` and `force-system-version` inputs echoed
 * only where they decided a version, as the reference servers echo them. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { type OperationResponse, type Param, postOperation, putResource } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/ver-trees';
const OTHER = 'http://cinder.test/CodeSystem/ver-rocks';
const VS = 'http://cinder.test/ValueSet/ver-';
const trees = (version: string) => ({
  resourceType: 'CodeSystem', id: `ver-trees-${version}`, url: CS, version, status: 'active', content: 'complete',
  concept: [{ code: 'oak', display: `Oak ${version}` }, ...(version === '2' ? [{ code: 'ash', display: 'Ash' }] : [])],
});
const rocks = { resourceType: 'CodeSystem', id: 'ver-rocks', url: OTHER, version: '7', status: 'active', content: 'complete', concept: [{ code: 'flint', display: 'Flint' }] };
const valueSet = (id: string, compose: unknown) => ({ resourceType: 'ValueSet', id: `ver-${id}`, url: `${VS}${id}`, status: 'active', compose });
const FIXTURES = [
  trees('1'), trees('2'), rocks,
  valueSet('one', { include: [{ system: CS }, { system: OTHER }] }),
  valueSet('both', { include: [{ system: CS, version: '1' }, { system: CS, version: '2' }, { system: OTHER }] }),
  valueSet('v1', { include: [{ system: CS, version: '1' }] }),
  valueSet('imports', { include: [{ valueSet: [`${VS}v1`] }, { system: CS, version: '2', concept: [{ code: 'ash' }] }] }),
];

/** `code@version` as the expansion gives it (`-`: no version on the code), and the used-codesystem parameters. */
function shape(r: OperationResponse): { codes: string[]; used: unknown[] } {
  expect(r.status).toBe(200);
  const e = r.body.expansion as { contains?: { code: string; system: string; version?: string }[]; parameter?: Param[] };
  return {
    codes: (e.contains ?? []).map((c) => `${c.code}@${c.version ?? '-'}`),
    used: (e.parameter ?? []).filter((p) => p.name === 'used-codesystem').map((p) => p.valueUri),
  };
}

await eachStore((kind, fresh) => {
  describe(`contains.version (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const expand = (id: string, extra: Param[] = []) => postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${VS}${id}` }, ...extra]);
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of FIXTURES) await putResource(t, token, r);
    });
    afterAll(() => t.close());

    test('one version of each code system: no version on the codes, used-codesystem names it', async () => {
      expect(shape(await expand('one'))).toEqual({ codes: ['oak@-', 'ash@-', 'flint@-'], used: [`${CS}|2`, `${OTHER}|7`] });
    });

    test('a code system included in two versions: its codes carry theirs, the others none', async () => {
      expect(shape(await expand('both'))).toEqual({ codes: ['oak@1', 'oak@2', 'ash@2', 'flint@-'], used: [`${CS}|1`, `${CS}|2`, `${OTHER}|7`] });
      // Forced to one version, the value set still names two: the versions stay, as the reference servers give them.
      expect(shape(await expand('both', [{ name: 'force-system-version', valueUri: `${CS}|1` }])).codes).toEqual(['oak@1', 'flint@-']);
    });

    test('two versions drawn on through an import: both carry theirs', async () => {
      expect(shape(await expand('imports'))).toEqual({ codes: ['oak@1', 'ash@2'], used: [`${CS}|1`, `${CS}|2`] });
    });

    test('the version parameters echoed are those that decided a version: not a default or check for a pinned include', async () => {
      const echoed = async (id: string, extra: Param[]) => {
        const r = await expand(id, extra);
        expect(r.status).toBe(200);
        const e = r.body.expansion as { parameter?: Param[] };
        return (e.parameter ?? []).filter((p) => p.name.endsWith('system-version')).map((p) => `${p.name} ${p.valueUri}`);
      };
      // An include without a version takes the default (or the check's version): echoed.
      expect(await echoed('one', [{ name: 'system-version', valueUri: `${CS}|1` }])).toEqual([`system-version ${CS}|1`]);
      expect(await echoed('one', [{ name: 'check-system-version', valueUri: `${CS}|1` }])).toEqual([`check-system-version ${CS}|1`]);
      // Includes that pin their versions keep them: the default did nothing, nor did a check they pass.
      expect(await echoed('v1', [{ name: 'system-version', valueUri: `${CS}|2` }])).toEqual([]);
      expect(await echoed('v1', [{ name: 'check-system-version', valueUri: `${CS}|1` }])).toEqual([]);
      // A default for a code system the value set does not use: not echoed; a forced version: echoed.
      expect(await echoed('v1', [{ name: 'system-version', valueUri: `${OTHER}|7` }])).toEqual([]);
      expect(await echoed('v1', [{ name: 'force-system-version', valueUri: `${CS}|2` }])).toEqual([`force-system-version ${CS}|2`]);
      // One request, two systems: only the one that shaped the expansion.
      expect(await echoed('imports', [{ name: 'system-version', valueUri: `${CS}|1` }, { name: 'system-version', valueUri: `${OTHER}|7` }])).toEqual([]);
      expect(await echoed('one', [{ name: 'system-version', valueUri: `${CS}|1` }, { name: 'system-version', valueUri: `${OTHER}|7` }]))
        .toEqual([`system-version ${CS}|1`, `system-version ${OTHER}|7`]);
    });
  });
});
