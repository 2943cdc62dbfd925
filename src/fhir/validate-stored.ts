/**
 * Validation of stored resources (`cinder validate`): data written before validation existed, or with
 * CINDER_VALIDATION=structural|off, may not be valid R4 nor conform to the profiles it claims. Reads a
 * tenant's current resources type by type in keyset pages of one consistent snapshot and validates each
 * as a write at `strict` would: base definitions, then (with `profiles`) its claimed profiles.
 */
import type { Store } from '../store/types.ts';
import { parseExact } from './exact-json.ts';
import { R4_RESOURCE_TYPES } from './resource-types.ts';
import { validateResource, type ValidationIssue } from './validation/validate.ts';
import type { ProfileValidator } from './validation/profile/profile-check.ts';
import type { QuestionnaireValidator } from './validation/questionnaire/validator.ts';

const PAGE = 1000;

/** A stored resource that is not valid, with its problems (errors and warnings). */
export interface InvalidStored {
  type: string;
  id: string;
  versionId: number;
  issues: ValidationIssue[];
}

export interface ValidateStoredOptions {
  /** Types to check (default: every R4 type). */
  types?: readonly string[];
  /** The snapshot time (epoch ms). */
  at: number;
  /** The check of the profiles each resource claims (the tenant's as stored now, R4 core's); absent: none. */
  profiles?: ProfileValidator;
  /** The check of each QuestionnaireResponse against its Questionnaire; absent: none. */
  questionnaires?: QuestionnaireValidator;
  onInvalid(r: InvalidStored): void;
  /** After each page: resources checked and found invalid so far. */
  onProgress?(checked: number, invalid: number): void;
}

/** How many current resources of `types` the tenant holds (for a progress bar). */
export async function countStored(store: Store, tenant: string, types: readonly string[] = R4_RESOURCE_TYPES): Promise<number> {
  let total = 0;
  for (const type of types) total += await store.resources.count(tenant, { type, sort: [], count: 0 });
  return total;
}

/** Validates every current resource of the tenant (of `types`) as it was at `at`. */
export async function validateStored(store: Store, tenant: string, o: ValidateStoredOptions): Promise<{ checked: number; invalid: number }> {
  let checked = 0;
  let invalid = 0;
  const decoder = new TextDecoder();
  const report = (type: string, r: { id: string; meta: { versionId: string } }, issues: ValidationIssue[]) => {
    if (!issues.some((i) => i.severity === 'error')) return;
    invalid++;
    o.onInvalid({ type, id: r.id, versionId: Number(r.meta.versionId), issues });
  };
  /** Undefined at once unless the resource claims a profile (only then is there something to await). */
  const check = (type: string, text: string): Promise<void> | undefined => {
    const r = parseExact(text) as Record<string, unknown> & { id: string; meta: { versionId: string } };
    checked++;
    const issues = validateResource(r, 'strict');
    // As a write: profiles only for a resource valid against the base definitions. Text naming no
    // `extension` key (none spelt with a \u escape) holds none: their walk is skipped, as on import.
    const baseValid = !issues.some((i) => i.severity === 'error');
    const profiled = baseValid ? o.profiles?.writeIssues(tenant, r, undefined, text.includes('xtension"') || text.includes('\\u')) : undefined;
    const answered = baseValid ? o.questionnaires?.issues(tenant, r, { warnings: false }) : undefined;
    if (profiled || answered) return Promise.all([profiled, answered]).then(([more, answers]) => report(type, r, [...issues, ...(more ?? []), ...(answers ?? [])]));
    report(type, r, issues);
    return undefined;
  };
  for (const type of o.types ?? R4_RESOURCE_TYPES) {
    let after: number | undefined;
    for (;;) {
      const page = await store.resources.snapshot(tenant, { type, at: o.at, limit: PAGE, ...(after === undefined ? {} : { after }) });
      for (const line of decoder.decode(page.lines).split('\n')) {
        const p = line === '' ? undefined : check(type, line);
        if (p) await p;
      }
      for (const row of page.recheck) {
        const p = row.deleted ? undefined : check(type, row.content);
        if (p) await p;
      }
      o.onProgress?.(checked, invalid);
      if (page.next === null) break;
      after = page.next;
    }
  }
  return { checked, invalid };
}
