/**
 * Validation against the profiles a resource claims (`meta.profile`) or `$validate` names: each known
 * profile's compiled rules (run.ts), its extension definitions, and its bindings decided by the base
 * table's codes or else the tenant's terminology (membership as `$validate-code` decides it).
 */
import { invalidResource } from '../check.ts';
import { tableValueSet } from '../model.ts';
import type { ValidationIssue } from '../validate.ts';
import type { CompiledProfile } from './compiled.ts';
import { isBaseDefinition, ProfileRegistry } from './registry.ts';
import { checkProfile, type PendingBinding } from './run.ts';

type Json = Record<string, unknown>;

/** Whether a coding is in a value set: decided either way, or not (why: the value set or a code system it needs is not known). */
export type Membership = { kind: 'member' } | { kind: 'not-member' } | { kind: 'unknown'; why: string };

/** A coding's membership in the value set `url` in a tenant's terminology (validation-terminology.ts); a bare code has no system. */
export type CheckMembership = (tenant: string, url: string, coding: { system?: string; code: string }) => Promise<Membership>;

export interface ProfileCheckOptions {
  /** `$validate`: warnings too (extensible bindings, unknown profiles, what was not checked); a write wants errors alone. */
  warnings: boolean;
  /** The FHIRPath of the resource (`Bundle.entry[2].resource`); its type by default. */
  at?: string;
  /** Where each profile was named, for an issue about the profile itself (default `<at>.meta.profile[i]`). */
  namedAt?: (index: number) => string;
}

export class ProfileValidator {
  constructor(readonly registry: ProfileRegistry, private readonly membership?: CheckMembership) {}

  /** The problems of `resource` against each of `canonicals` (the base definition of its type is skipped: base validation checks it). */
  async issues(tenant: string, resource: Json, canonicals: readonly string[], opts: ProfileCheckOptions): Promise<ValidationIssue[]> {
    const type = String(resource.resourceType);
    const at = opts.at ?? type;
    const out: ValidationIssue[] = [];
    const cache = await this.registry.cache(tenant);
    for (const [i, canonical] of canonicals.entries()) {
      if (isBaseDefinition(canonical, type) || canonicals.indexOf(canonical) !== i) continue;
      const named = opts.namedAt?.(i) ?? `${at}.meta.profile[${i}]`;
      const found = await this.registry.resolve(cache, tenant, canonical);
      if (found.kind === 'unknown') {
        if (opts.warnings) out.push({ severity: 'warning', code: 'not-supported', expression: named, text: `The profile ${canonical} is not known to Cinder: the resource was not checked against it` });
        continue;
      }
      if (found.kind === 'unusable') {
        out.push({ severity: 'error', code: 'not-supported', expression: named, text: found.reason });
        continue;
      }
      const profile = found.profile;
      if (profile.type !== type) {
        out.push({ severity: 'error', code: 'structure', expression: named, text: `The profile ${profile.label} constrains ${profile.type}, not ${type}` });
        continue;
      }
      const extensions = new Map<string, CompiledProfile>();
      await this.loadExtensions(cache, tenant, profile, extensions);
      const result = checkProfile(resource, profile, (url) => extensions.get(url), at);
      out.push(...result.issues.filter((x) => opts.warnings || x.severity === 'error'));
      if (opts.warnings) for (const u of profile.unsupported) out.push({ severity: 'warning', code: 'not-supported', expression: named, text: `${profile.label}: ${u}` });
      for (const b of result.bindings) {
        if (b.strength === 'extensible' && !opts.warnings) continue;
        const issue = await this.bindingIssue(tenant, b, opts.warnings);
        if (issue) out.push(issue);
      }
    }
    return out;
  }

  /**
   * Throws a 422 (`what` is not valid) when `resource` (at FHIRPath `at`) breaks a profile of its
   * `meta.profile`; undefined at once when it claims none (a write's usual case).
   */
  requireValid(tenant: string, resource: Json, at?: string, what = at ?? String(resource.resourceType)): Promise<void> | undefined {
    const claimed = (resource.meta as Json | undefined)?.profile;
    if (!Array.isArray(claimed) || claimed.length === 0) return undefined;
    return this.issues(tenant, resource, claimed.filter((c): c is string => typeof c === 'string'), at === undefined ? { warnings: false } : { warnings: false, at }).then((errors) => {
      if (errors.length > 0) throw invalidResource(errors, what);
    });
  }

  private async loadExtensions(cache: Awaited<ReturnType<ProfileRegistry['cache']>>, tenant: string, profile: CompiledProfile, into: Map<string, CompiledProfile>): Promise<void> {
    for (const url of profile.extensions) {
      if (into.has(url)) continue;
      const found = await this.registry.resolve(cache, tenant, url);
      if (found.kind !== 'profile') continue;
      into.set(url, found.profile);
      await this.loadExtensions(cache, tenant, found.profile, into);
    }
  }

  /**
   * A binding's verdict: the base table's codes when it holds the value set (no await), else the
   * terminology's membership of each coding; one member suffices. A value set that cannot be decided is
   * a warning in `$validate` and no error on a write.
   */
  private async bindingIssue(tenant: string, b: PendingBinding, warnings: boolean): Promise<ValidationIssue | undefined> {
    const verdict = await this.decide(tenant, b);
    if (verdict.kind === 'member') return undefined;
    if (verdict.kind === 'unknown') {
      return warnings ? { severity: 'warning', code: 'not-supported', expression: b.expression, text: `${b.where}: the ${b.strength} binding to the value set ${b.valueSet} was not checked: ${verdict.why}` } : undefined;
    }
    const given = b.codings.length === 0 ? 'no coding' : b.codings.map((c) => (c.system === undefined ? c.code : `${c.system}|${c.code}`)).join(', ');
    const text = `${b.where}: ${given} is not in the value set ${b.valueSet} (${b.strength} binding)`;
    if (b.strength === 'required') return { severity: 'error', code: 'code-invalid', expression: b.expression, text };
    return b.codings.length === 0 ? undefined : { severity: 'warning', code: 'code-invalid', expression: b.expression, text };
  }

  private async decide(tenant: string, b: PendingBinding): Promise<Membership> {
    const table = tableValueSet(b.valueSet);
    if (table !== undefined && table.kind === 'codes') {
      const { codes, systemCodes } = table;
      return b.codings.some((c) => (c.system === undefined ? codes.has(c.code) : systemCodes.has(`${c.system}|${c.code}`))) ? { kind: 'member' } : { kind: 'not-member' };
    }
    if (b.codings.length === 0) return { kind: 'not-member' };
    if (this.membership === undefined) return { kind: 'unknown', why: 'no terminology service is wired' };
    let unknown: Membership | undefined;
    for (const c of b.codings) {
      const m = await this.membership(tenant, b.valueSet, c);
      if (m.kind === 'member') return m;
      if (m.kind === 'unknown') unknown ??= m;
    }
    return unknown ?? { kind: 'not-member' };
  }
}
