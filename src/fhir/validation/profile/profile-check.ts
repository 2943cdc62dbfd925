/**
 * Validation against the profiles a resource claims (`meta.profile`) or `$validate` names: each known
 * profile's compiled rules (run.ts), its extension definitions, and its bindings decided by the base
 * table's codes or else the tenant's terminology (the codes of the value set's expansion).
 */
import { FhirError } from '../../../errors.ts';
import type { CodeSet } from '../../search-compile.ts';
import { MAX_SEARCH_VALUES } from '../../search-values.ts';
import { invalidResource } from '../check.ts';
import { tableValueSet } from '../model.ts';
import type { ValidationIssue } from '../validate.ts';
import type { CompiledProfile } from './compiled.ts';
import { isBaseDefinition, ProfileRegistry, type ValueSetCodes } from './registry.ts';
import { checkProfile, type PendingBinding } from './run.ts';

type Json = Record<string, unknown>;

/** The codes of a value set in a tenant's terminology (search's `expandCodes`). */
export type ExpandCodes = (tenant: string, codes: CodeSet) => Promise<{ system: string; code: string }[]>;

export interface ProfileCheckOptions {
  /** `$validate`: warnings too (extensible bindings, unknown profiles, what was not checked); a write wants errors alone. */
  warnings: boolean;
  /** The FHIRPath of the resource (`Bundle.entry[2].resource`); its type by default. */
  at?: string;
  /** Where each profile was named, for an issue about the profile itself (default `<at>.meta.profile[i]`). */
  namedAt?: (index: number) => string;
}

export class ProfileValidator {
  constructor(readonly registry: ProfileRegistry, private readonly expand?: ExpandCodes) {}

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
        const issue = await this.bindingIssue(cache, tenant, b, opts.warnings);
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

  private async bindingIssue(cache: Awaited<ReturnType<ProfileRegistry['cache']>>, tenant: string, b: PendingBinding, warnings: boolean): Promise<ValidationIssue | undefined> {
    let codes = cache.valueSets.get(b.valueSet);
    if (codes === undefined) {
      codes = this.valueSetCodes(tenant, b.valueSet);
      cache.valueSets.set(b.valueSet, codes);
    }
    const vs = await codes;
    if (vs === null) {
      return warnings ? { severity: 'warning', code: 'not-supported', expression: b.expression, text: `${b.where}: the value set ${b.valueSet} cannot be expanded here, so its ${b.strength} binding was not checked` } : undefined;
    }
    if (b.codings.some((c) => (c.system === undefined ? vs.codes.has(c.code) : vs.systemCodes.has(`${c.system}|${c.code}`)))) return undefined;
    const given = b.codings.length === 0 ? 'no coding' : b.codings.map((c) => (c.system === undefined ? c.code : `${c.system}|${c.code}`)).join(', ');
    const text = `${b.where}: ${given} is not in the value set ${b.valueSet} (${b.strength} binding)`;
    if (b.strength === 'required') return { severity: 'error', code: 'code-invalid', expression: b.expression, text };
    return b.codings.length === 0 ? undefined : { severity: 'warning', code: 'code-invalid', expression: b.expression, text };
  }

  private async valueSetCodes(tenant: string, url: string): Promise<ValueSetCodes | null> {
    const table = tableValueSet(url);
    if (table !== undefined) return table.kind === 'codes' ? { systemCodes: table.systemCodes, codes: table.codes } : null;
    if (this.expand === undefined) return null;
    try {
      const list = await this.expand(tenant, { kind: 'value-set', canonical: url });
      if (list.length > MAX_SEARCH_VALUES) return null;
      return { systemCodes: new Set(list.map((c) => `${c.system}|${c.code}`)), codes: new Set(list.map((c) => c.code)) };
    } catch (err) {
      if (err instanceof FhirError) return null;
      throw err;
    }
  }
}
