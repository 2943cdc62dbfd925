import { FhirError } from './errors.ts';
import type { CompiledValueSet } from './terminology/compile/compiled-value-set.ts';
import { validateValueSetCode } from './terminology/ops/validate-value-set-code.ts';
import { valueSetByCanonical, valueSetCodes } from './terminology/ops/value-set-codes.ts';
import type { ValueSetSubset } from './fhir/validation/profile/snapshot.ts';
import type { TerminologyService } from './terminology/service.ts';
import { ProfileValidator, type CheckMembership, type Membership } from './fhir/validation/profile/profile-check.ts';
import { ProfileRegistry } from './fhir/validation/profile/registry.ts';
import { storeProfiles } from './fhir/validation/profile/definitions.ts';
import type { Clock } from './clock.ts';
import type { Store } from './store/types.ts';
import { createTerminology } from './terminology/create.ts';
import { CoreBundle } from './terminology/core/core-bundle.ts';
import { CoreTerminology } from './terminology/core/core-source.ts';

/**
 * Profile validation's `membership` (ProfileValidator) over a terminology service: whether a coding is in
 * a value set, decided as ValueSet/$validate-code decides it (validate-value-set-code.ts) in the tenant's
 * terminology, without expanding the value set (a LOINC or SNOMED filter, an is-a over a large code system).
 * A bare code (an element of type `code`) is tried in each code system the value set includes. Undecided:
 * the value set is not known, cannot be evaluated (a supplement it names is missing or supplements none of its
 * code systems, a filter names a property its code system lacks), or a code system it needs is not present, so
 * membership cannot be known.
 */
export function valueSetMembership(service: TerminologyService): CheckMembership {
  return async (tenant, url, coding) => {
    const terminology = await service.context(tenant);
    let vs: CompiledValueSet | null;
    try {
      vs = await terminology.valueSet(url);
    } catch (err) {
      if (err instanceof FhirError) return { kind: 'unknown', why: err.message };
      throw err;
    }
    if (vs === null) return { kind: 'unknown', why: `the value set ${url} is not known here` };
    const systems = coding.system !== undefined ? [coding.system] : [...new Set(vs.includes.flatMap((s) => (s.system === undefined ? [] : [s.system])))];
    if (systems.length === 0) return { kind: 'unknown', why: `the code '${coding.code}' has no system, and the value set ${url} names no code system to look it up in` };
    let undecided: Membership | undefined;
    for (const system of systems) {
      const subject = { kind: 'coding' as const, coding: { system, code: coding.code }, path: 'code' };
      let r: Awaited<ReturnType<typeof validateValueSetCode>>;
      try {
        r = await validateValueSetCode({ target: { kind: 'url', url }, subject }, { terminology });
      } catch (err) {
        // A value set that cannot be evaluated (a supplement it names missing or unused, a filter on a property its
        // code system lacks) is the operation's 400, and no verdict on the resource: its membership is unknown.
        if (err instanceof FhirError) return { kind: 'unknown', why: err.message };
        throw err;
      }
      if (r.result) return { kind: 'member' };
      if (!r.issues.some((i) => i.type === 'not-in-vs')) undecided ??= { kind: 'unknown', why: r.issues.map((i) => i.text).join('; ') || `the membership of '${coding.code}' could not be decided` };
    }
    return undecided ?? { kind: 'not-member' };
  };
}

/** The most codes a value set replacing a required binding's may have for snapshot generation to check it code by code. */
export const SUBSET_CODES = 10_000;

/**
 * Snapshot generation's test of a required binding's value set replaced by another (snapshot.ts): the
 * codes of the new value set (enumerated as search's `:in` enumerates them, at most SUBSET_CODES), each
 * of which must be in the base's value set, as `ValueSet/$validate-code` decides membership (`membership`).
 */
export function valueSetSubset(service: TerminologyService, tenant: string, membership: CheckMembership = valueSetMembership(service)): ValueSetSubset {
  return async (narrower, wider) => {
    const terminology = await service.context(tenant);
    let codes: { system: string; code: string }[];
    try {
      codes = await valueSetCodes(terminology, valueSetByCanonical(narrower), SUBSET_CODES);
    } catch (err) {
      if (err instanceof FhirError) return { kind: 'unknown', why: err.message };
      throw err;
    }
    if (codes.length > SUBSET_CODES) return { kind: 'unknown', why: `${narrower} has more than ${SUBSET_CODES} codes` };
    for (const c of codes) {
      const m = await membership(tenant, wider, c);
      if (m.kind === 'not-member') return { kind: 'not-subset', code: `${c.system}|${c.code}` };
      if (m.kind === 'unknown') return { kind: 'unknown', why: m.why };
    }
    return { kind: 'subset' };
  };
}

/**
 * Profile validation of a tenant's writes outside the server (`cinder import`, `cinder validate`): the
 * StructureDefinitions as stored, bindings decided by a terminology of its own over the same store.
 */
export function storeProfileValidator(store: Store, clock: Clock, coreBundle: CoreBundle = new CoreBundle()): ProfileValidator {
  const terminology = createTerminology({ store, clock, core: new CoreTerminology(coreBundle) });
  return new ProfileValidator(new ProfileRegistry(storeProfiles(store), { valueSets: (tenant) => valueSetSubset(terminology.service, tenant) }), valueSetMembership(terminology.service), clock);
}
