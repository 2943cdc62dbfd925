/**
 * The problems of a transaction or batch Bundle itself (FHIR R4 Bundle: its elements, fullUrls,
 * requests and invariants), apart from its entries' resources, which are validated as they are written.
 */
import type { Resource } from './resource.ts';
import { capped, validateResource, type ValidationIssue, type ValidationLevel } from './validation/validate.ts';
import { NOT_EVALUATED_NOTE } from './validation/invariants.ts';

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
  return located(validateResource(shell, level, undefined, { entryResources: false }), shell);
}

/** The errors of `issues`, each invariant over all entries at the entries that break it. */
function located(issues: ValidationIssue[], shell: Resource): ValidationIssue[] {
  const entries = Array.isArray(shell.entry) ? (shell.entry as Json[]) : [];
  return issues.filter((i) => i.severity === 'error').flatMap((issue) => {
    const culprits = issue.expression === 'Bundle' && issue.invariant !== undefined ? OVER_ENTRIES[issue.invariant]?.(shell.type, entries) : undefined;
    // Should the rule and the validator ever disagree, the issue stays the Bundle's.
    if (culprits === undefined || culprits.length === 0) return [issue];
    return culprits.map(([index, element]) => ({ ...issue, expression: `Bundle.entry[${index}].${element}` }));
  });
}

/** How many entries are validated between two looks at the clock (about 2 ms of strict validation). */
export const SHELL_CHUNK = 1000;

/**
 * shellErrors with turns of the event loop every WORK_SLICE_MS (`pace`): the same issues in the same order.
 * A Bundle of more than SHELL_CHUNK entries is validated a chunk of entries at a time (90,000 entries held
 * the loop about 0.5 s, most of it in the invariants over all entries). Each chunk stands in the Bundle for
 * all its entries; the Bundle's own issues, and where its entries' and its invariants' issues fall among
 * them, come from one more validation of it with two entries that break each invariant over entries
 * (bdl-2, -3, -4, -7): each of those is kept if a chunk breaks it, bdl-7 also if two chunks share a fullUrl.
 * Element ids are unique across a resource: the chunks share one Map of those met (ValidateOptions.elementIds),
 * their entries' paths counted from the chunk's first (entryOffset), so that an id an earlier chunk gave is
 * found where the whole validation finds it, with the same words. Should the Bundle's own elements hold any
 * too, which the whole validation meets before or after the entries by their order in the model, entries that
 * hold any are validated whole, at once, as shellErrors does.
 */
export async function pacedShellErrors(bundle: Resource, level: ValidationLevel, pace: () => Promise<void> | undefined): Promise<ValidationIssue[]> {
  const entries = bundle.entry;
  if (level === 'off' || !Array.isArray(entries) || entries.length <= SHELL_CHUNK || (bundle.type !== 'transaction' && bundle.type !== 'batch')) {
    return shellErrors(bundle, level);
  }
  const options = { entryResources: false, uncapped: true };
  const fromEntries: ValidationIssue[] = [];
  const broken = new Set<string>();
  // An invariant over entries that a chunk could not evaluate (a fullUrl that is no string, for bdl-7): the whole could
  // not either, whatever the other chunks hold, and says so as the first chunk's evaluation did.
  const unevaluated = new Map<string, string>();
  const fullUrls = new Set<string>();
  const elementIds = new Map<string, string>();
  // The Bundle's own `id` is its resource id, no element id (the validator checks those below a resource only).
  const { id: _id, ...ownElements } = withoutEntry(bundle);
  const ownIds = holdsElementIds(ownElements, false);
  for (let at = 0; at < entries.length; at += SHELL_CHUNK) {
    const chunk = entries.slice(at, at + SHELL_CHUNK) as unknown[];
    if (ownIds && chunk.some((e) => holdsElementIds(e))) return shellErrors(bundle, level);
    for (const issue of validateResource({ ...bundle, entry: chunk }, level, undefined, { ...options, entryOffset: at, elementIds })) {
      if (ENTRY.test(issue.expression)) fromEntries.push(issue);
      else if (issue.expression === 'Bundle' && issue.invariant !== undefined && issue.invariant in OVER_ENTRIES) {
        broken.add(issue.invariant);
        if (issue.text.includes(NOT_EVALUATED_NOTE) && !unevaluated.has(issue.invariant)) unevaluated.set(issue.invariant, issue.text);
      }
    }
    if (level === 'strict' && repeatsFullUrl(chunk, fullUrls)) broken.add('bdl-7');
    await pace();
  }
  // The Bundle's own issues, with the sample entries' block where the entries' issues go and every invariant over entries broken.
  const frame = validateResource({ ...bundle, entry: SAMPLE }, level, undefined, options);
  const block = frame.findIndex((i) => ENTRY.test(i.expression));
  if (block < 0) return shellErrors(bundle, level);
  const own = (list: ValidationIssue[]) => list
    .filter((i) => !ENTRY.test(i.expression) && !(i.expression === 'Bundle' && i.invariant !== undefined && i.invariant in OVER_ENTRIES && !broken.has(i.invariant)))
    .map((i) => (i.expression === 'Bundle' && i.invariant !== undefined && unevaluated.has(i.invariant) ? { ...i, text: unevaluated.get(i.invariant)! } : i));
  const all = [...own(frame.slice(0, block)), ...fromEntries, ...own(frame.slice(block))];
  return located(capped(all), bundle);
}

/** `Bundle.entry[i]` at the start of an expression: an issue of an entry. */
const ENTRY = /^Bundle\.entry\[(\d+)\]/;

/**
 * Two entries that break bdl-2 (a search), bdl-3 (no request), bdl-4 (a response) and bdl-7 (one fullUrl) in
 * a transaction or batch, each with an element unknown at every level (where the entries' issues go).
 */
const SAMPLE = [0, 1].map(() => ({ fullUrl: 'urn:uuid:00000000-0000-4000-8000-000000000000', search: { mode: 'match' }, response: { status: '200' }, sample: true }));

/**
 * Whether an entry shares `fullUrl & resource.meta.versionId` (bdl-7's FHIRPath: a missing version
 * concatenates as empty) with another of `entries` or one `seen` before (to which they are added).
 */
function repeatsFullUrl(entries: unknown[], seen: Set<string>): boolean {
  for (const e of entries) {
    if (e === null || typeof e !== 'object' || Array.isArray(e)) continue;
    const { fullUrl, resource } = e as Json;
    // A fullUrl that is not a JSON string is no uri to bdl-7's FHIRPath (it is refused for its type alone).
    if (typeof fullUrl !== 'string') continue;
    const version = ((resource as Json | undefined)?.meta as Json | undefined)?.versionId;
    const key = fullUrl + (typeof version === 'string' ? version : '');
    if (seen.has(key)) return true;
    seen.add(key);
  }
  return false;
}

/** Whether an entry, its resource left out, has an element id anywhere (`id`, a string, in an object). */
function holdsElementIds(value: unknown, top = true): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some((v) => holdsElementIds(v, false));
  for (const key in value) {
    if (top && key === 'resource') continue;
    const v = (value as Json)[key];
    if ((key === 'id' && typeof v === 'string') || holdsElementIds(v, false)) return true;
  }
  return false;
}

function withoutEntry(bundle: Resource): Resource {
  const { entry: _, ...rest } = bundle;
  return rest as Resource;
}
