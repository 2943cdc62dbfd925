import { FhirError } from './errors.ts';
import type { CompiledValueSet } from './terminology/compile/compiled-value-set.ts';
import { validateValueSetCode } from './terminology/ops/validate-value-set-code.ts';
import type { TerminologyService } from './terminology/service.ts';
import type { CheckMembership, Membership } from './fhir/validation/profile/profile-check.ts';

/**
 * Profile validation's `membership` (ProfileValidator) over a terminology service: whether a coding is in
 * a value set, decided as ValueSet/$validate-code decides it (validate-value-set-code.ts) in the tenant's
 * terminology, without expanding the value set (a LOINC or SNOMED filter, an is-a over a large code system).
 * A bare code (an element of type `code`) is tried in each code system the value set includes. Undecided:
 * the value set is not known, or a code system it needs is not present, so membership cannot be known.
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
      const r = await validateValueSetCode({ target: { kind: 'url', url }, subject }, { terminology });
      if (r.result) return { kind: 'member' };
      if (!r.issues.some((i) => i.type === 'not-in-vs')) undecided ??= { kind: 'unknown', why: r.issues.map((i) => i.text).join('; ') || `the membership of '${coding.code}' could not be decided` };
    }
    return undecided ?? { kind: 'not-member' };
  };
}
