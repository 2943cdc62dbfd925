/**
 * A differential check of the profile engine (run.ts): the R4 examples that claim a core profile, each
 * vital sign against every vital-sign profile, and mutated copies of each (a slice's code changed, a
 * value of another type, components dropped or doubled, ...), checked with checkProfile, whose issues
 * and pending bindings must be exactly those whose digests are stored in the fixture, which the engine wrote before its
 * hot paths were reworked (docs/PERFORMANCE.md, "Profile checks made cheaper"), and wrote again when the vital signs
 * profiles' binding of `Observation.component.value[x]` became extensible (638 cases, that binding's strength alone), and
 * when a primitive type's choice was located as FHIRPath names it, `ofType(string)` (273 cases, the casing alone).
 *   CINDER_WRITE_FIXTURE=1 bun test test/unit/validation/profiles-differential.test.ts   (rewrites it)
 */
import { expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { ProfileRegistry } from '../../../src/fhir/validation/profile/registry.ts';
import { snapshotProfiles } from '../../../src/fhir/validation/profile/definitions.ts';
import type { CompiledProfile } from '../../../src/fhir/validation/profile/compiled.ts';
import { checkProfile } from '../../../src/fhir/validation/profile/run.ts';
import { R4_PACKAGE } from '../../helpers/r4-definitions.ts';

type Json = Record<string, unknown>;
const CORE = 'http://hl7.org/fhir/StructureDefinition/';
const FIXTURE = new URL('../../fixtures/validation/profile-digests/differential.json', import.meta.url);
const VITALS = ['vitalsigns', 'bp', 'bmi', 'bodyheight', 'bodytemp', 'headcircum', 'heartrate', 'resprate', 'oxygensat', 'vitalspanel', 'bodyweight'];

const clone = (r: Json): Json => structuredClone(r);
const obs = (r: Json) => r as Record<string, any>;

/** Each mutation changes a copy; one that does not apply to a resource leaves it as it is. */
const MUTATIONS: Record<string, (r: Record<string, any>) => void> = {
  none: () => {},
  'no category': (r) => delete r.category,
  'category laboratory': (r) => r.category?.[0]?.coding?.[0] && (r.category[0].coding[0].code = 'laboratory'),
  'category twice': (r) => r.category && r.category.push(structuredClone(r.category[0])),
  'category extra coding': (r) => r.category?.[0]?.coding?.push({ system: 'http://example.org', code: 'x' }),
  'code unknown': (r) => r.code?.coding?.[0] && (r.code.coding[0].code = '0000-0'),
  'code no system': (r) => r.code?.coding?.[0] && delete r.code.coding[0].system,
  'code extra coding': (r) => r.code?.coding?.push({ system: 'http://loinc.org', code: '8867-4' }),
  'no code': (r) => delete r.code,
  'value string': (r) => { for (const k of Object.keys(r)) if (k.startsWith('value')) delete r[k]; r.valueString = 'x'; },
  'value unit changed': (r) => r.valueQuantity && ((r.valueQuantity.code = 'zz'), (r.valueQuantity.system = 'http://example.org')),
  'value no system': (r) => r.valueQuantity && delete r.valueQuantity.system,
  'value no value': (r) => r.valueQuantity && delete r.valueQuantity.value,
  'no value': (r) => { for (const k of Object.keys(r)) if (k.startsWith('value')) delete r[k]; },
  'absent and value': (r) => (r.dataAbsentReason = { text: 'x' }),
  'no subject': (r) => delete r.subject,
  'subject group': (r) => (r.subject = { reference: 'Group/1' }),
  'subject device': (r) => (r.subject = { reference: 'Device/1' }),
  'no effective': (r) => { for (const k of Object.keys(r)) if (k.startsWith('effective')) delete r[k]; },
  'effective period': (r) => { for (const k of Object.keys(r)) if (k.startsWith('effective')) delete r[k]; r.effectivePeriod = { start: '2020' }; },
  'effective partial date': (r) => { for (const k of Object.keys(r)) if (k.startsWith('effective')) delete r[k]; r.effectiveDateTime = '2020-01'; },
  'no components': (r) => delete r.component,
  'components doubled': (r) => r.component && r.component.push(...structuredClone(r.component)),
  'components reversed': (r) => r.component?.reverse(),
  'component code changed': (r) => r.component?.[0]?.code?.coding?.[0] && (r.component[0].code.coding[0].code = '1111-1'),
  'component value string': (r) => r.component?.[0] && (delete r.component[0].valueQuantity, (r.component[0].valueString = 'x')),
  'component no value': (r) => r.component?.[0] && delete r.component[0].valueQuantity,
  'component unit changed': (r) => r.component?.[0]?.valueQuantity && (r.component[0].valueQuantity.code = 'zz'),
  'has member patient': (r) => (r.hasMember = [{ reference: 'Patient/1' }, { reference: '#c1' }]),
  'derived from': (r) => (r.derivedFrom = [{ reference: 'Observation/1' }, { reference: 'Binary/1' }]),
  'status unknown': (r) => (r.status = 'bogus'),
  'primitive extension only': (r) => { r._status = { extension: [{ url: 'http://example.org/x', valueString: 'y' }] }; delete r.status; },
  'no url': (r) => delete r.url,
  'no name': (r) => delete r.name,
  'no status': (r) => delete r.status,
  'experimental string': (r) => (r.experimental = 'yes'),
};

function examples(): Json[] {
  const dir = R4_PACKAGE.pathname;
  const out: Json[] = [];
  for (const f of readdirSync(dir).sort()) {
    if (!f.endsWith('.json') || f === 'package.json') continue;
    const text = readFileSync(dir + f, 'utf8');
    if (!text.includes('"profile"')) continue;
    const r = JSON.parse(text) as Json;
    const claimed = (r.meta as Json | undefined)?.profile;
    if (Array.isArray(claimed) && claimed.some((p) => typeof p === 'string' && p.startsWith(CORE))) out.push(r);
  }
  return out;
}

async function results(): Promise<Record<string, string>> {
  const registry = new ProfileRegistry(snapshotProfiles([]));
  const cache = await registry.cache('t');
  const compiled = new Map<string, CompiledProfile | undefined>();
  const profile = async (url: string) => {
    if (!compiled.has(url)) {
      const found = await registry.resolve(cache, 't', url);
      compiled.set(url, found.kind === 'profile' ? found.profile : undefined);
      if (found.kind === 'profile') for (const e of found.profile.extensions) await profile(e);
    }
    return compiled.get(url);
  };
  const out: Record<string, string> = {};
  let n = 0;
  for (const r of examples()) {
    const claimed = ((r.meta as Json).profile as string[]).filter((p) => p.startsWith(CORE));
    const vital = claimed.includes(`${CORE}vitalsigns`);
    // Of the 1,930 CodeSystems and ValueSets, every tenth; every vital sign and the rest.
    if (!vital && r.resourceType !== 'Observation' && n++ % 10 !== 0) continue;
    const against = vital ? VITALS.map((v) => CORE + v) : claimed;
    for (const [name, mutate] of Object.entries(MUTATIONS)) {
      const copy = clone(r);
      mutate(obs(copy));
      if (name !== 'none' && JSON.stringify(copy) === JSON.stringify(r)) continue;
      for (const url of against) {
        const p = await profile(url);
        if (p === undefined || p.type !== r.resourceType) continue;
        const got = checkProfile(copy, p, (u) => compiled.get(u));
        out[`${r.resourceType}/${r.id} ${name} against ${url.slice(CORE.length)}`] = JSON.stringify(got);
      }
    }
  }
  return out;
}

const digest = (s: string) => createHash('sha256').update(s).digest('base64').slice(0, 12);

test('checkProfile gives exactly the stored issues and bindings for the R4 examples and their mutations', async () => {
  const got = Object.entries(await results());
  // The fixture holds each case's digest, in order (the results themselves are 5 MB); `errors` counts the cases with an error.
  if (process.env.CINDER_WRITE_FIXTURE === '1') {
    const errors = got.filter(([, v]) => (JSON.parse(v) as { issues: { severity: string }[] }).issues.some((i) => i.severity === 'error')).length;
    writeFileSync(FIXTURE, `${JSON.stringify({ errors, digests: got.map(([, v]) => digest(v)).join(' ') })}\n`);
  }
  const fixture = JSON.parse(readFileSync(FIXTURE, 'utf8')) as { errors: number; digests: string };
  const digests = fixture.digests.split(' ');
  expect(got.length).toBe(digests.length);
  const differ = got.filter(([, v], i) => digest(v) !== digests[i]).map(([k, v]) => `${k}: now ${v}`);
  expect(differ.slice(0, 5)).toEqual([]);
  // Not a vacuous comparison: thousands of the cases have errors.
  expect(fixture.errors).toBeGreaterThan(1000);
}, 120_000);
