/**
 * The problems of a transaction or batch Bundle itself (FHIR R4 Bundle: its elements, fullUrls,
 * requests and invariants), apart from its entries' resources, which are validated as they are written.
 */
import type { Resource } from './resource.ts';
import { validateResource, type ValidationIssue, type ValidationLevel } from './validation/validate.ts';

type Json = Record<string, unknown>;

/** One entry breaking an invariant, and the element of the entry at fault. */
type Culprit = [index: number, element: string];

/**
 * The Bundle invariants stated over all the entries (bdl-2, bdl-3, bdl-4, bdl-7): which entries break
 * each. R4 puts them on the Bundle, so the validator reports them at `Bundle`; an entry at fault is
 * named instead, so that a batch refuses it alone (FHIR R4 http 3.1.0.11.1) and a transaction says which.
 */
const OVER_ENTRIES: Record<string, (type: unknown, entries: Json[]) => Culprit[]> = {
  // entry.search only when a search.
  'bdl-2': (type, entries) => (type === 'searchset' ? [] : at(entries, (e) => e.search !== undefined, 'search')),
  // entry.request mandatory for batch/transaction/history, otherwise prohibited.
  'bdl-3': (type, entries) => {
    const required = type === 'batch' || type === 'transaction' || type === 'history';
    return at(entries, (e) => (e.request !== undefined) !== required, 'request');
  },
  // entry.response mandatory for batch-response/transaction-response/history, otherwise prohibited.
  'bdl-4': (type, entries) => {
    const required = type === 'batch-response' || type === 'transaction-response' || type === 'history';
    return at(entries, (e) => (e.response !== undefined) !== required, 'response');
  },
  // A fullUrl used twice (with the same meta.versionId): the second entry, and any later one, is at fault.
  'bdl-7': (type, entries) => {
    if (type === 'history') return [];
    const seen = new Set<string>();
    return at(entries, (e) => {
      if (e.fullUrl === undefined) return false;
      const meta = (e.resource as Json | undefined)?.meta as Json | undefined;
      const key = JSON.stringify([e.fullUrl, meta?.versionId ?? null]);
      if (seen.has(key)) return true;
      seen.add(key);
      return false;
    }, 'fullUrl');
  },
};

function at(entries: Json[], faulty: (e: Json) => boolean, element: string): Culprit[] {
  const out: Culprit[] = [];
  entries.forEach((e, i) => {
    if (e !== null && typeof e === 'object' && !Array.isArray(e) && faulty(e)) out.push([i, element]);
  });
  return out;
}

/**
 * The problems of a transaction or batch Bundle itself at `level`: the Bundle validated with its
 * entries' resources in place but not walked (so that an entry holding only a resource is not taken
 * for an empty one), and the invariants over all entries located at the entries that break them.
 */
export function shellErrors(bundle: Resource, level: ValidationLevel): ValidationIssue[] {
  if (level === 'off') return [];
  // No entries, as an empty array (which R4 JSON forbids), is taken as none.
  const shell = Array.isArray(bundle.entry) && bundle.entry.length === 0 ? withoutEntry(bundle) : bundle;
  const issues = validateResource(shell, level, undefined, { entryResources: false }).filter((i) => i.severity === 'error');
  const entries = Array.isArray(shell.entry) ? (shell.entry as Json[]) : [];
  return issues.flatMap((issue) => {
    const culprits = issue.expression === 'Bundle' && issue.invariant !== undefined ? OVER_ENTRIES[issue.invariant]?.(shell.type, entries) : undefined;
    // Should the rule and the validator ever disagree, the issue stays the Bundle's.
    if (culprits === undefined || culprits.length === 0) return [issue];
    return culprits.map(([index, element]) => ({ ...issue, expression: `Bundle.entry[${index}].${element}` }));
  });
}

function withoutEntry(bundle: Resource): Resource {
  const { entry: _, ...rest } = bundle;
  return rest as Resource;
}
