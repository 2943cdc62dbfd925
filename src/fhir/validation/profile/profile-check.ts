/**
 * Validation against the profiles a resource claims (`meta.profile`) or `$validate` names: each known
 * profile's compiled rules (run.ts), its extension definitions, and its bindings decided by the base
 * table's codes or else the tenant's terminology (membership as `$validate-code` decides it).
 */
import type { Clock } from '../../../clock.ts';
import { invalidResource } from '../check.ts';
import { tableValueSet } from '../model.ts';
import type { ValidationIssue } from '../validate.ts';
import type { CompiledProfile } from './compiled.ts';
import { baseDefinitionOf, isBaseDefinition, ProfileRegistry, type Resolved } from './registry.ts';
import { checkExtensionSite } from './extension-check.ts';
import { extensionSites } from './extension-sites.ts';
import { checkProfile, profileCost, type PendingBinding, type ProfileCost, type ProfileResult } from './run.ts';
import { targetScope, type TargetScope } from './targets.ts';
import { impliedProfile } from './implied.ts';
import type { Access } from '../../access.ts';

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
  /** The invariants' budget, shared by every check of one write or `$validate` (run.ts); a fresh one by default. */
  cost?: ProfileCost;
  /** The tenant's profiles as read once for the whole resource (its inner resources share it); read anew by default. */
  cache?: TenantProfiles;
  /** Where its references resolve (the resource validated as a whole, targets.ts); the resource's own by default. */
  scope?: TargetScope;
  /**
   * Whether the request may read the tenant's StructureDefinitions (readsProfiles; true by default: the operator).
   * When not, the problems against a profile or extension definition the tenant stores itself are withheld (withheld).
   */
  reads?: boolean;
}

/**
 * Whether `access` may read the tenant's StructureDefinitions as validation finds them: by canonical url, a search
 * (`s`) as well as a read (`r`), neither narrowed by a SMART v2 scope filter (as readsQuestionnaires judges
 * Questionnaires). A patient-context scope reads a StructureDefinition as a system scope does: it is in no
 * patient's compartment.
 */
export function readsProfiles(access: Access): boolean {
  return access.can('StructureDefinition', 'r') && access.can('StructureDefinition', 's')
    && access.filters?.('StructureDefinition', 'r') === undefined && access.filters?.('StructureDefinition', 's') === undefined;
}

/**
 * The problems against a profile (or extension definition) of the tenant's that the request may not read, told
 * without its content: one error when there is any (a write is still refused, as it would be for a token that reads
 * it), at `where` (the `meta.profile` that claims it, the extension), not saying how many or where within, and
 * nothing for warnings alone. Its invariants' text, fixed and pattern values, cardinalities, slices and value sets
 * were quoted to a token that may not read the StructureDefinition.
 */
function withheld(issues: readonly ValidationIssue[], what: string, where: string): ValidationIssue[] {
  if (!issues.some((i) => i.severity === 'error')) return [];
  return [{ severity: 'error', code: 'structure', expression: where, text: `The resource does not conform to ${what}; the access token may not read StructureDefinitions, so the problems (how many, and where) are not listed` }];
}

type TenantProfiles = Awaited<ReturnType<ProfileRegistry['cache']>>;

export class ProfileValidator {
  /** `clock`: the time profile invariants' `now()` and `today()` read (the system's when absent). */
  constructor(readonly registry: ProfileRegistry, readonly membership?: CheckMembership, readonly clock?: Clock) {}

  /** `cost`, reading this validator's clock unless its caller gave it one. */
  private timed(cost: ProfileCost): ProfileCost {
    if (this.clock !== undefined) cost.clock ??= this.clock;
    return cost;
  }

  /**
   * The problems of `resource` against each of `canonicals` (the base definition of its type, and of
   * Resource and DomainResource, is skipped: base validation checks it; another type's is an error).
   */
  async issues(tenant: string, resource: Json, canonicals: readonly string[], opts: ProfileCheckOptions): Promise<ValidationIssue[]> {
    const type = String(resource.resourceType);
    const at = opts.at ?? type;
    const out: ValidationIssue[] = [];
    const cost = this.timed(opts.cost ?? profileCost());
    const cache = opts.cache ?? (await this.registry.cache(tenant));
    const scope = opts.scope ?? targetScope(resource);
    const claimed = claimedProfiles(resource);
    const implied = impliedProfile(resource);
    for (const [i, canonical] of canonicals.entries()) {
      if (isBaseDefinition(canonical, type) || canonicals.indexOf(canonical) !== i) continue;
      const base = baseDefinitionOf(canonical, type);
      if (base === 'met') continue;
      // A profile R4 requires though the resource does not claim it is named by the resource itself.
      const unclaimed = implied?.url === canonical && !claimed.includes(canonical);
      const named = unclaimed ? at : (opts.namedAt?.(i) ?? `${at}.meta.profile[${i}]`);
      if (unclaimed && opts.warnings) out.push({ severity: 'information', code: 'informational', expression: at, text: implied.why });
      // Another type's base definition: known without a lookup, and never met by this type (HL7's validator: the wrong type).
      if (base !== undefined) {
        out.push({ severity: 'error', code: 'structure', expression: named, text: `The profile ${canonical} is the base definition of ${base}, not of ${type}` });
        continue;
      }
      const found = await this.registry.resolve(cache, tenant, canonical);
      if (found.kind === 'unknown') {
        if (opts.warnings) out.push({ severity: 'warning', code: 'not-supported', expression: named, text: `The profile ${canonical} is not known to Cinder: the resource was not checked against it` });
        continue;
      }
      if (found.kind === 'unusable') {
        // Why a tenant's profile is unusable names its elements (its differential's problems).
        const reason = opts.reads === false && found.own === true ? `The profile ${canonical} cannot be used; the access token may not read StructureDefinitions, so why is not told` : found.reason;
        out.push({ severity: 'error', code: 'not-supported', expression: named, text: reason });
        continue;
      }
      const hidden = opts.reads === false && found.own === true;
      const into: ValidationIssue[] = hidden ? [] : out;
      await this.checkAgainst(into, tenant, resource, found.profile, named, { ...opts, warnings: opts.warnings && !hidden }, cache, cost, scope);
      if (hidden) out.push(...withheld(into, `the profile ${canonical}`, named));
    }
    return out;
  }

  /** The problems of `resource` against one found profile, into `out`. */
  private async checkAgainst(
    out: ValidationIssue[], tenant: string, resource: Json, profile: CompiledProfile, named: string, opts: ProfileCheckOptions,
    cache: TenantProfiles, cost: ProfileCost, scope: TargetScope,
  ): Promise<void> {
    const type = String(resource.resourceType);
    if (profile.type !== type) {
      out.push({ severity: 'error', code: 'structure', expression: named, text: `The profile ${profile.label} constrains ${profile.type}, not ${type}` });
      return;
    }
    const extensions = new Map<string, CompiledProfile>();
    await this.loadExtensions(cache, tenant, profile, extensions);
    const result = checkProfile(resource, profile, (url) => extensions.get(url), opts.at ?? type, cost, scope);
    await this.collect(out, tenant, result, opts.warnings);
    if (opts.warnings) for (const u of profile.unsupported) out.push({ severity: 'warning', code: 'not-supported', expression: named, text: `${profile.label}: ${u}` });
  }

  /**
   * The problems of every extension and modifierExtension of `resource` (contained resources and a
   * Bundle's entries included) whose url names an extension definition Cinder knows: the tenant's, else
   * R4 core's. With `warnings` (`$validate`), an extension whose url names no definition is reported as
   * information ("Unknown extension", as HAPI's validator reports it by default), never as an error:
   * R4 lets a server accept extensions it does not know. `context: false` leaves out where each is used
   * and its context invariants (a write's choice, see writeIssues).
   */
  async extensionIssues(tenant: string, resource: Json, opts: { warnings: boolean; at?: string; context?: boolean; cost?: ProfileCost; reads?: boolean }): Promise<ValidationIssue[]> {
    const sites = extensionSites(resource, opts.at);
    if (sites.length === 0) return [];
    const out: ValidationIssue[] = [];
    const cost = this.timed(opts.cost ?? profileCost());
    const cache = await this.registry.cache(tenant);
    const extensions = new Map<string, CompiledProfile>();
    // A nested extension's relative url (`text` in a complex extension) names no definition.
    const named = (url: unknown): url is string => typeof url === 'string' && /^[A-Za-z][A-Za-z0-9+.-]*:/.test(url);
    // Every url at once, a batch a search, rather than a search each.
    const definitions = await this.registry.resolveMany(cache, tenant, sites.map((s) => s.extension.url).filter(named));
    // What the context expressions of this resource's extensions share (InvariantContext.memo).
    const memo = new Map<object, unknown>();
    for (const site of sites) {
      const url = site.extension.url;
      if (!named(url)) {
        // A relative url names a part of the extension holding it; anywhere else it names nothing.
        if (opts.warnings && typeof url === 'string' && site.inExtension === undefined) out.push(unknownExtension(site.path, url));
        continue;
      }
      const found = await (definitions.get(url) ?? this.registry.resolve(cache, tenant, url));
      if (found.kind !== 'profile' || found.profile.extension === undefined) {
        if (opts.warnings && !(opts.reads === false && found.kind === 'unusable' && found.own === true)) out.push(unresolvedExtension(site.path, url, found));
        continue;
      }
      await this.loadExtensions(cache, tenant, found.profile, extensions);
      const hidden = opts.reads === false && found.own === true;
      const into: ValidationIssue[] = hidden ? [] : out;
      await this.collect(into, tenant, checkExtensionSite(site, found.profile, (u) => extensions.get(u), opts.context !== false, cost, memo), opts.warnings && !hidden);
      if (hidden) out.push(...withheld(into, `the definition of the extension ${url}`, site.path));
    }
    return out;
  }

  /**
   * What a write at `strict` must satisfy beyond base validation when `resource` or a resource inside it
   * (innerResources) claims a profile, or is a vital sign (implied.ts: R4 requires its profile unclaimed):
   * the profiles each claims or is held to, and the definitions of all its extensions (value types, nested extensions,
   * bindings, `extension` or `modifierExtension`), but not their contexts, which `$validate` reports
   * (ARCHITECTURE.md, Profiles: R4's own conformance resources break them). Undefined at once when it
   * claims no profile, is no vital sign, and none inside it does either: such a write costs nothing more. `extensions` false: the
   * caller knows the resource holds no extension (an imported line whose text names none), so the walk
   * that looks for them is skipped. `held`: where its references resolve (a transaction's entries,
   * targets.ts writtenScope); the resource's own contained resources and entries by default.
   */
  writeIssues(tenant: string, resource: Json, at?: string, extensions = true, cost = profileCost(), held?: TargetScope, reads = true): Promise<ValidationIssue[]> | undefined {
    const claimed = profilesToCheck(resource);
    const inner = innerResources(resource, at ?? String(resource.resourceType)).filter((r) => profilesToCheck(r.resource).length > 0);
    if (claimed.length === 0 && inner.length === 0) return undefined;
    const scope = held ?? targetScope(resource);
    const opts = at === undefined ? { warnings: false, cost, reads } : { warnings: false, at, cost, reads };
    return Promise.all([
      claimed.length === 0 ? [] : this.issues(tenant, resource, claimed, { ...opts, scope }),
      this.innerIssues(tenant, inner, false, cost, scope, reads),
      extensions ? this.extensionIssues(tenant, resource, { ...opts, context: false }) : [],
    ]).then(([a, b, c]) => distinctIssues([...a, ...b, ...c]));
  }

  /**
   * The problems of the resources inside `resource` (contained ones, and the entries of a document or
   * collection Bundle, and for `$validate` those a transaction or batch would write, as its write checks
   * each) against the profiles each claims in its own `meta.profile` or is held to (a vital sign's);
   * `at` is the FHIRPath of `resource`.
   */
  nestedIssues(tenant: string, resource: Json, opts: { warnings: boolean; at?: string; cost?: ProfileCost; reads?: boolean }): Promise<ValidationIssue[]> {
    const inner = innerResources(resource, opts.at ?? String(resource.resourceType), true).filter((r) => profilesToCheck(r.resource).length > 0);
    return this.innerIssues(tenant, inner, opts.warnings, opts.cost ?? profileCost(), targetScope(resource), opts.reads ?? true);
  }

  private async innerIssues(tenant: string, inner: InnerResource[], warnings: boolean, cost: ProfileCost, scope: TargetScope, reads: boolean): Promise<ValidationIssue[]> {
    const out: ValidationIssue[] = [];
    if (inner.length === 0) return out;
    // One read of the change token for all of them (10,000 entries of a collection: 10,000 reads).
    const cache = await this.registry.cache(tenant);
    for (const r of inner) out.push(...(await this.issues(tenant, r.resource, profilesToCheck(r.resource), { warnings, at: r.at, cost, cache, scope, reads })));
    return out;
  }

  /** Throws a 422 (`what` is not valid) when writeIssues finds an error; undefined at once when there is nothing to check. */
  requireValid(tenant: string, resource: Json, at?: string, what = at ?? String(resource.resourceType), extensions = true, reads = true): Promise<void> | undefined {
    return this.writeIssues(tenant, resource, at, extensions, undefined, undefined, reads)?.then((errors) => {
      if (errors.length > 0) throw invalidResource(errors, what);
    });
  }

  /** A result's issues (errors alone without `warnings`) and its bindings' verdicts, into `out`. */
  private async collect(out: ValidationIssue[], tenant: string, result: ProfileResult, warnings: boolean): Promise<void> {
    out.push(...result.issues.filter((x) => warnings || x.severity === 'error'));
    for (const b of result.bindings) {
      if (b.strength === 'extensible' && !warnings) continue;
      // The base table decides most bindings at once: no promise for each (a vital sign has six).
      const issue = verdictIssue(b, tableVerdict(b) ?? (await this.decide(tenant, b)), warnings);
      if (issue) out.push(issue);
    }
  }

  private async loadExtensions(cache: Awaited<ReturnType<ProfileRegistry['cache']>>, tenant: string, profile: CompiledProfile, into: Map<string, CompiledProfile>): Promise<void> {
    for (const url of profile.extensions) {
      if (into.has(url)) continue;
      const found = await this.registry.resolve(cache, tenant, url);
      if (found.kind !== 'profile') continue;
      into.set(url, found.profile);
      await this.loadExtensions(cache, tenant, found.profile, into);
    }
    // A `profile` discriminator through `resolve()` and on: the profiles its target profiles name at that path.
    for (const { targets, path } of profile.through) {
      for (const target of targets) {
        for (const url of into.get(target)?.typesAt.get(path)?.profiles ?? []) {
          if (into.has(url)) continue;
          const found = await this.registry.resolve(cache, tenant, url);
          if (found.kind !== 'profile') continue;
          into.set(url, found.profile);
          await this.loadExtensions(cache, tenant, found.profile, into);
        }
      }
    }
  }

  /** A binding's membership when the base table does not decide it: the terminology's membership of each coding; one member suffices. */
  private async decide(tenant: string, b: PendingBinding): Promise<Membership> {
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

/** An extension whose url names no definition the tenant or R4 core has: information (HAPI's default; HL7's validator with any extension allowed). */
function unknownExtension(expression: string, url: string): ValidationIssue {
  return { severity: 'information', code: 'informational', expression, text: `Unknown extension ${url}: Cinder has no definition of it (neither the tenant's StructureDefinitions nor R4's), so it was not checked` };
}

/** The issue for an extension url that does not name a usable extension definition. */
function unresolvedExtension(expression: string, url: string, found: Resolved): ValidationIssue {
  if (found.kind === 'unknown') return unknownExtension(expression, url);
  if (found.kind === 'unusable') return { severity: 'warning', code: 'not-supported', expression, text: `The extension ${url} was not checked: ${found.reason}` };
  return { severity: 'warning', code: 'structure', expression, text: `The extension url ${url} names a profile of ${found.profile.type}, not an extension definition, so the extension was not checked` };
}

const MEMBER: Membership = { kind: 'member' };
const NOT_MEMBER: Membership = { kind: 'not-member' };

/** A binding's membership by the base table's codes, when the table holds the value set (else undefined: the terminology decides). */
function tableVerdict(b: PendingBinding): Membership | undefined {
  const table = tableValueSet(b.valueSet);
  if (table === undefined || table.kind !== 'codes') return undefined;
  const { codes, systemCodes } = table;
  return b.codings.some((c) => (c.system === undefined ? codes.has(c.code) : systemCodes.has(`${c.system}|${c.code}`))) ? MEMBER : NOT_MEMBER;
}

/** A binding's issue from its verdict: a value set that cannot be decided is a warning in `$validate` and no error on a write. */
function verdictIssue(b: PendingBinding, verdict: Membership, warnings: boolean): ValidationIssue | undefined {
  if (verdict.kind === 'member') return undefined;
  if (verdict.kind === 'unknown') {
    return warnings ? { severity: 'warning', code: 'not-supported', expression: b.expression, text: `${b.where}: the ${b.strength} binding to the value set ${b.valueSet} was not checked: ${verdict.why}` } : undefined;
  }
  const given = b.codings.length === 0 ? 'no coding' : b.codings.map((c) => (c.system === undefined ? c.code : `${c.system}|${c.code}`)).join(', ');
  const text = `${b.where}: ${given} is not in the value set ${b.valueSet} (${b.strength} binding)`;
  if (b.strength === 'required') return { severity: 'error', code: 'code-invalid', expression: b.expression, text };
  return b.codings.length === 0 ? undefined : { severity: 'warning', code: 'code-invalid', expression: b.expression, text };
}

/** Each issue once: an extension a profile's slice names is checked by the profile and again where it is used. */
export function distinctIssues(issues: ValidationIssue[]): ValidationIssue[] {
  const seen = new Set<string>();
  return issues.filter((i) => {
    const key = `${i.severity}\0${i.expression}\0${i.text}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

interface InnerResource {
  resource: Json;
  /** Its FHIRPath (`Bundle.entry[1].resource`, `Patient.contained[0]`). */
  at: string;
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The profiles `resource` claims in `meta.profile`. */
function claimedProfiles(resource: Json): string[] {
  const claimed = (resource.meta as Json | undefined)?.profile;
  return Array.isArray(claimed) ? claimed.filter((c): c is string => typeof c === 'string') : [];
}

/**
 * The profiles `resource` is checked against: those it claims, and the one R4 requires of it though it may
 * not claim it (a vital sign's, implied.ts), last.
 */
export function profilesToCheck(resource: Json): string[] {
  const claimed = claimedProfiles(resource);
  const implied = impliedProfile(resource);
  return implied === undefined || claimed.includes(implied.url) ? claimed : [...claimed, implied.url];
}

/**
 * The resources inside `resource` (at FHIRPath `at`) that stand as resources of their own: its contained
 * ones, and the entries of a document or collection Bundle (a stored Bundle, whose entries are not written
 * one by one) with theirs. A transaction's or batch's entries are written, and checked, each on its own,
 * so they are listed only when `written`: `$validate` of such a Bundle checks what its write would.
 */
function innerResources(resource: Json, at: string, written = false): InnerResource[] {
  const out: InnerResource[] = [];
  if (Array.isArray(resource.contained)) {
    for (const [i, c] of resource.contained.entries()) if (isObject(c) && typeof c.resourceType === 'string') out.push({ resource: c, at: `${at}.contained[${i}]` });
  }
  const entries = resource.type === 'document' || resource.type === 'collection' || (written && (resource.type === 'transaction' || resource.type === 'batch'));
  if (resource.resourceType === 'Bundle' && entries && Array.isArray(resource.entry)) {
    for (const [i, e] of resource.entry.entries()) {
      const r = isObject(e) ? e.resource : undefined;
      if (!isObject(r) || typeof r.resourceType !== 'string') continue;
      const path = `${at}.entry[${i}].resource`;
      out.push({ resource: r, at: path }, ...innerResources(r, path));
    }
  }
  return out;
}
