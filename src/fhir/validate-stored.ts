/**
 * Validation of stored resources (`cinder validate`): data written before validation existed, or with
 * CINDER_VALIDATION=structural|off, may not be valid R4. Reads a tenant's current resources type by
 * type in keyset pages of one consistent snapshot and validates each strictly.
 */
import type { Store } from '../store/types.ts';
import { parseExact } from './exact-json.ts';
import { R4_RESOURCE_TYPES } from './resource-types.ts';
import { validateResource, type ValidationIssue } from './validation/validate.ts';

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
  const check = (type: string, text: string) => {
    const r = parseExact(text) as Record<string, unknown> & { id: string; meta: { versionId: string } };
    checked++;
    const issues = validateResource(r, 'strict');
    if (issues.some((i) => i.severity === 'error')) {
      invalid++;
      o.onInvalid({ type, id: r.id, versionId: Number(r.meta.versionId), issues });
    }
  };
  for (const type of o.types ?? R4_RESOURCE_TYPES) {
    let after: number | undefined;
    for (;;) {
      const page = await store.resources.snapshot(tenant, { type, at: o.at, limit: PAGE, ...(after === undefined ? {} : { after }) });
      for (const line of decoder.decode(page.lines).split('\n')) if (line !== '') check(type, line);
      for (const row of page.recheck) if (!row.deleted) check(type, row.content);
      o.onProgress?.(checked, invalid);
      if (page.next === null) break;
      after = page.next;
    }
  }
  return { checked, invalid };
}
