/**
 * Validation of a QuestionnaireResponse against the Questionnaire its `questionnaire` canonical names
 * (check.ts): a contained one (`#id`), else the tenant's (QuestionnaireSource), each prepared once and
 * kept until a Questionnaire of the tenant changes (the source's change token, as profiles are kept,
 * registry.ts). An unknown Questionnaire is a warning in `$validate` and nothing on a write, as in HL7's
 * validator and HAPI; a coded answer's membership in the item's answerValueSet is decided by the
 * terminology (the profile validator's CheckMembership), undecidable membership being a warning.
 */
import { BoundedCache } from '../../../terminology/compile/bounded-cache.ts';
import type { Access } from '../../access.ts';
import { invalidResource } from '../check.ts';
import type { CheckMembership, Membership } from '../profile/profile-check.ts';
import type { ValidationIssue } from '../validate.ts';
import type { PendingMembership } from './answers.ts';
import { checkResponse } from './check.ts';
import { prepareQuestionnaire, type PreparedQuestionnaire } from './prepared.ts';
import type { QuestionnaireSource } from './source.ts';

type Json = Record<string, unknown>;

/** Canonicals remembered per tenant, found or not. */
export const QUESTIONNAIRES_PER_TENANT = 500;

interface TenantCache {
  token: string;
  found: BoundedCache<string, Promise<PreparedQuestionnaire | undefined>>;
}

export interface ResponseCheckOptions {
  /** `$validate`: warnings too; a write wants errors alone. */
  warnings: boolean;
  /** The FHIRPath of the response (`Bundle.entry[2].resource`); its type by default. */
  at?: string;
  /**
   * The access of the request the check is for (absent: the operator's, which reads everything). A
   * response is checked against its Questionnaire whatever the token may read, but what the problems
   * would tell of a Questionnaire the token may not read (its items, their types, options, value sets,
   * patterns, limits) is not told: see `withheld`.
   */
  access?: Access;
  /**
   * Whether the request may read the tenant's Questionnaires, for a check that has no Access to ask (an import's
   * preparation thread, given readsQuestionnaires of the job's client): wins over `access`.
   */
  reads?: boolean;
}

/**
 * Whether `access` may read the tenant's Questionnaires as the check finds them: by canonical url, a
 * search (`s`) as well as a read (`r`), neither narrowed by a SMART v2 scope filter (a filtered scope is
 * taken as not reading: which Questionnaires a filter admits is not judged here). A patient-context scope
 * reads a Questionnaire as a system scope does: it is in no patient's compartment.
 */
export function readsQuestionnaires(access: Access): boolean {
  return access.can('Questionnaire', 'r') && access.can('Questionnaire', 's') && access.filters?.('Questionnaire', 'r') === undefined && access.filters?.('Questionnaire', 's') === undefined;
}

/**
 * The problems of a response against a Questionnaire the request may not read, told without its content:
 * one error when there is any (a write is still refused, as it would be for a token that reads it), not
 * saying how many or where, and nothing for warnings alone (they would quote it too). That the response
 * is not valid against the Questionnaire is all a client learns, as much as a write of it would tell.
 */
function withheld(issues: ValidationIssue[], canonical: string, at: string): ValidationIssue[] {
  if (!issues.some((i) => i.severity === 'error')) return [];
  return [{ severity: 'error', code: 'value', expression: `${at}.questionnaire`, text: `The response does not conform to its Questionnaire ${canonical}; the access token may not read Questionnaires, so the problems (how many, and where) are not listed` }];
}

export class QuestionnaireValidator {
  private readonly tenants = new Map<string, TenantCache>();
  constructor(readonly source: QuestionnaireSource, readonly membership?: CheckMembership, private readonly capacity = QUESTIONNAIRES_PER_TENANT) {}

  /**
   * The problems of `resource` against its Questionnaire, and of the responses inside it (its contained
   * resources, the entries of a stored document or collection Bundle) against theirs; undefined at once
   * when it holds no QuestionnaireResponse naming one (nothing to check, nothing to await).
   */
  issues(tenant: string, resource: Json, opts: ResponseCheckOptions): Promise<ValidationIssue[]> | undefined {
    const responses = responsesIn(resource, opts.at ?? String(resource.resourceType), resource);
    if (responses.length === 0) return undefined;
    return this.checkAll(tenant, responses, opts.warnings, opts.reads ?? (opts.access === undefined || readsQuestionnaires(opts.access)));
  }

  private async checkAll(tenant: string, responses: Response[], warnings: boolean, reads: boolean): Promise<ValidationIssue[]> {
    const cache = await this.cache(tenant);
    const out: ValidationIssue[] = [];
    for (const r of responses) out.push(...(await this.check(tenant, cache, r, warnings, reads)));
    return out;
  }

  /** Throws a 422 (`what` is not valid) when the response has an error against its Questionnaire; undefined at once when there is nothing to check. */
  requireValid(tenant: string, resource: Json, at?: string, what = at ?? String(resource.resourceType), reach: Pick<ResponseCheckOptions, 'access' | 'reads'> = {}): Promise<void> | undefined {
    return this.issues(tenant, resource, { ...reach, warnings: false, ...(at !== undefined && { at }) })?.then((errors) => {
      if (errors.length > 0) throw invalidResource(errors, what);
    });
  }

  /** `reads`: whether the request may read the tenant's Questionnaires (a contained one it holds itself). */
  private async check(tenant: string, cache: TenantCache, response: Response, warnings: boolean, reads: boolean): Promise<ValidationIssue[]> {
    const { resource: qr, at, root } = response;
    const canonical = qr.questionnaire as string;
    // `#id`: contained in the response, or (a contained response) beside it in the resource holding it.
    const local = canonical.startsWith('#');
    const q = local ? (contained(qr, canonical.slice(1)) ?? contained(root, canonical.slice(1))) : await this.resolve(tenant, cache, canonical);
    if (q === undefined) {
      return warnings ? [{ severity: 'warning', code: 'not-supported', expression: `${at}.questionnaire`, text: `The Questionnaire ${canonical} is not known here: the response was not checked against it` }] : [];
    }
    const result = checkResponse(qr, q, at);
    const out = result.issues.filter((i) => warnings || i.severity === 'error');
    // Each value set and coding asked once per response (a repeating item may give the same answer often).
    const verdicts = new Map<string, Promise<Membership>>();
    for (const p of result.pending) {
      const key = `${p.valueSet}\0${p.coding.system ?? ''}\0${p.coding.code}`;
      let verdict = verdicts.get(key);
      if (verdict === undefined) verdicts.set(key, (verdict = this.membershipOf(tenant, p)));
      // The errors alone are needed when they are withheld.
      const issue = this.issueOf(p, await verdict, warnings && (local || reads));
      if (issue) out.push(issue);
    }
    return local || reads ? out : withheld(out, canonical, at);
  }

  /** The tenant's cache, dropped when its Questionnaires changed (one read of the change token). */
  private async cache(tenant: string): Promise<TenantCache> {
    const token = await this.source.changeToken(tenant);
    let cache = this.tenants.get(tenant);
    if (cache === undefined || cache.token !== token) {
      cache = { token, found: new BoundedCache(this.capacity) };
      this.tenants.set(tenant, cache);
    }
    return cache;
  }

  /** The tenant's Questionnaire `canonical` names, prepared, from the cache while the tenant's Questionnaires are unchanged. */
  private resolve(tenant: string, cache: TenantCache, canonical: string): Promise<PreparedQuestionnaire | undefined> {
    let p = cache.found.get(canonical);
    if (p === undefined) {
      p = this.source.find(tenant, canonical).then((q) => (q === undefined ? undefined : prepareQuestionnaire(q)));
      cache.found.set(canonical, p);
      const loading = p;
      p.catch(() => cache.found.deleteIf(canonical, loading));
    }
    return p;
  }

  private async membershipOf(tenant: string, p: PendingMembership): Promise<Membership> {
    return this.membership === undefined ? { kind: 'unknown', why: 'no terminology service is wired' } : this.membership(tenant, p.valueSet, p.coding);
  }

  private issueOf(p: PendingMembership, verdict: Membership, warnings: boolean): ValidationIssue | undefined {
    const given = p.coding.system === undefined ? p.coding.code : `${p.coding.system}|${p.coding.code}`;
    if (verdict.kind === 'member') return undefined;
    if (verdict.kind === 'unknown') {
      return warnings ? { severity: 'warning', code: 'not-supported', expression: p.expression, text: `The answer '${given}' to the item '${p.linkId}' was not checked against its answerValueSet ${p.valueSet}: ${verdict.why}` } : undefined;
    }
    const issue: ValidationIssue = { severity: p.open ? 'warning' : 'error', code: 'code-invalid', expression: p.expression, text: `The answer '${given}' to the item '${p.linkId}' is not in its answerValueSet ${p.valueSet}` };
    return issue.severity === 'error' || warnings ? issue : undefined;
  }
}

/** A response to check: where it is, and the resource it is in (itself, unless contained). */
interface Response {
  resource: Json;
  at: string;
  root: Json;
}

function isResponse(r: Json): boolean {
  return r.resourceType === 'QuestionnaireResponse' && typeof r.questionnaire === 'string' && r.questionnaire !== '';
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The QuestionnaireResponses naming a Questionnaire in `resource` (at `at`): itself, its contained ones,
 * and the entries of a document or collection Bundle (a stored Bundle, whose entries are not written one
 * by one) with theirs. A transaction's or batch's entries are written, and checked, each on its own.
 */
function responsesIn(resource: Json, at: string, root: Json): Response[] {
  const out: Response[] = isResponse(resource) ? [{ resource, at, root }] : [];
  if (Array.isArray(resource.contained)) {
    for (const [i, c] of resource.contained.entries()) if (isObject(c) && isResponse(c)) out.push({ resource: c, at: `${at}.contained[${i}]`, root });
  }
  if (resource.resourceType === 'Bundle' && (resource.type === 'document' || resource.type === 'collection') && Array.isArray(resource.entry)) {
    for (const [i, e] of resource.entry.entries()) {
      const r = isObject(e) ? e.resource : undefined;
      if (isObject(r)) out.push(...responsesIn(r, `${at}.entry[${i}].resource`, r));
    }
  }
  return out;
}

/** The contained Questionnaire of id `id`, prepared (not cached: it lives in the response). */
function contained(qr: Json, id: string): PreparedQuestionnaire | undefined {
  const found = Array.isArray(qr.contained) ? qr.contained.find((c: unknown) => typeof c === 'object' && c !== null && (c as Json).resourceType === 'Questionnaire' && (c as Json).id === id) : undefined;
  return found === undefined ? undefined : prepareQuestionnaire(found as Json);
}
