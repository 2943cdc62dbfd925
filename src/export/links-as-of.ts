/**
 * A `_typeFilter`'s chains and `_has` as of an export's transactionTime T (Bulk Data 2.0: every line is the
 * resource as of T). The database judges a chain or `_has` on the other side's current index; a resource there
 * changed after T (during the export) would count as it is now. Each such condition becomes, for the page:
 * the same condition on the other side's resources unchanged since T (their index is as of T), ORed with the
 * ones changed since whose version as of T meets its conditions, judged in code and named by id (through
 * canonical references, by the url and version of that version).
 */
import { unchangedSince } from '../fhir/hierarchy-as-of.ts';
import { followedByStored } from '../fhir/history-at.ts';
import { indexEntries } from '../fhir/indexer.ts';
import { canonicalCondition, namedCanonicals, namingCanonicals } from '../fhir/search-canonical.ts';
import { matchConditions, type MatchContext } from '../fhir/search-match.ts';
import { issue } from '../fhir/outcome.ts';
import type { Condition } from '../store/types.ts';
import type { SelectContext } from './select.ts';
import { expungedIssue, noteIssue } from './spec.ts';

/**
 * Versions of a type changed after T read at most, per page: beyond, that condition is judged on the current
 * index (a write burst of that size during one export), and the manifest's error file says so (`approximated`).
 * Reading them all would hold every changed id, and name them in the page's statement, whatever their number.
 */
export const LINKS_CHANGED_MAX = 10_000;

type Json = Record<string, unknown>;
type Chain = Extract<Condition, { kind: 'chain' }>;
type Has = Extract<Condition, { kind: 'has' }>;

/**
 * What a page's rewrite reads: the ids of each type changed after T, and what each of them names as of T under a
 * condition (`judged`, kept for the job's later pages: a version as of T, and the conditions it is judged by as of
 * T, do not change), so that a page judges only the resources changed since the previous one. Small values
 * (ids), at most LINKS_CHANGED_MAX resources per condition.
 */
interface Links {
  ctx: SelectContext;
  match: MatchContext;
  changed: Map<string, Promise<string[] | undefined>>;
  judged: Map<string, Promise<string[]>>;
}

const judgedByJob = new WeakMap<SelectContext, Map<string, Promise<string[]>>>();

/**
 * The ids of `type` with a version after T (deletions included); undefined past LINKS_CHANGED_MAX versions. Their ids
 * and version numbers only (ResourceRepo.versionsSince), in one statement: history pages of 1,000 versions were read
 * with their texts for their ids alone.
 */
async function changedIds(ctx: SelectContext, type: string): Promise<string[] | undefined> {
  const versions = await ctx.store.resources.versionsSince(ctx.tenant, type, ctx.transactionTime + 1, LINKS_CHANGED_MAX + 1);
  if (versions.length > LINKS_CHANGED_MAX) return undefined;
  return [...new Set(versions.map((v) => v.id))];
}

/**
 * The live version of `type/id` as of T, parsed; null when it did not exist then, or when the version after the
 * last one stored at or before T was expunged (it may have been the one current at T: the one before is not judged
 * in its place, and the error file says so).
 */
async function versionAsOf(ctx: SelectContext, type: string, id: string): Promise<Json | null> {
  const [v] = await ctx.store.resources.history(ctx.tenant, { type, id, at: ctx.transactionTime, count: 1 });
  if (!v) return null;
  if (!(await followedByStored(ctx.store.resources, ctx.tenant, v))) {
    if (ctx.progress) noteIssue(ctx.progress, expungedIssue(type, id, v.versionId));
    return null;
  }
  return v.deleted ? null : (JSON.parse(v.content) as Json);
}

/**
 * What the resources of `type` changed after T name (`names` of their version as of T) when that version meets
 * `where` (already as of T); `key` identifies the condition for `judged`. Undefined past LINKS_CHANGED_MAX versions.
 */
async function namedAsOf(l: Links, key: string, type: string, where: Condition[], names: (r: Json) => string[]): Promise<string[] | undefined> {
  const changed = l.changed.get(type) ?? l.changed.set(type, changedIds(l.ctx, type)).get(type)!;
  const ids = await changed;
  if (ids === undefined) return undefined;
  const judge = async (id: string): Promise<string[]> => {
    const r = await versionAsOf(l.ctx, type, id);
    const meta = r?.meta as { lastUpdated?: string } | undefined;
    return r && (await matchConditions(r, Date.parse(meta?.lastUpdated ?? ''), where, l.match)) ? names(r) : [];
  };
  const out = new Set<string>();
  for (const id of ids) {
    const k = `${key} ${type}/${id}`;
    for (const name of await (l.judged.get(k) ?? l.judged.set(k, judge(id)).get(k)!)) out.add(name);
  }
  return [...out];
}

/**
 * A condition past LINKS_CHANGED_MAX, judged on the other side as it is now: a warning in the manifest's error
 * file naming `_typeFilter` (Bulk Data 2.0.0 lets `error` carry warnings), never a silent approximation.
 */
function approximated(l: Links, type: string, what: string, other: string): void {
  if (!l.ctx.progress) return;
  const text = `_typeFilter on ${type}: ${what} was judged on the ${other} resources as they are now, not as of transactionTime: ` +
    `more than ${LINKS_CHANGED_MAX} versions of ${other} were written since transactionTime, so ${type} resources may be exported or left out by ${other} data newer than the export`;
  noteIssue(l.ctx.progress, issue('warning', 'too-costly', text, ['_typeFilter']));
}

/** The canonical a canonical resource's version is named by: `url|version`, or `url` where it has no version; none without a url. */
function canonicalOf(r: Json): string[] {
  if (typeof r.url !== 'string') return [];
  return [typeof r.version === 'string' ? `${r.url}|${r.version}` : r.url];
}

/** The condition on a resource naming (through `param`) one of `canonicals` (`url|version` or `url`) of matched targets. */
function namingAny(param: string, canonicals: string[]): Condition {
  const named = new Map<string, string[]>();
  for (const canonical of canonicals) {
    const bar = canonical.indexOf('|');
    const url = bar < 0 ? canonical : canonical.slice(0, bar);
    const versions = named.get(url) ?? named.set(url, []).get(url)!;
    if (bar >= 0) versions.push(canonical.slice(bar + 1));
  }
  return namingCanonicals(param, named);
}

async function chainAsOf(l: Links, c: Chain, type: string): Promise<Condition> {
  const where = await allAsOf(l, c.where, c.targetType);
  // Through canonical references a target is named by its url (and version) as of T, which may have changed since.
  const matched = await namedAsOf(l, JSON.stringify(c), c.targetType, where, c.canonical ? canonicalOf : (r) => [r.id as string]);
  if (matched === undefined) {
    approximated(l, type, `the chain ${c.param}:${c.targetType}`, c.targetType);
    return { ...c, where };
  }
  const stable: Condition = { ...c, where: [...where, unchangedSince(l.ctx.transactionTime)] };
  if (matched.length === 0) return stable;
  const named: Condition = c.canonical
    ? namingAny(c.param, matched)
    : { kind: 'token', param: c.param, values: matched.map((id) => ({ system: c.targetType, value: id })), reference: true };
  return { kind: 'or', any: [stable, named] };
}

async function hasAsOf(l: Links, c: Has, type: string): Promise<Condition> {
  const where = await allAsOf(l, c.where, c.type);
  // The resources of `type` each referring version names through `param`, as the index reads its references:
  // literal ones by id, canonical ones by `url` or `url|version` (namedCanonicals: the rows of system '').
  const refers = c.canonical
    ? (r: Json) => namedCanonicals(indexEntries(r, l.ctx.spec.fhirBase).tokens.filter((e) => e.param === c.param && e.system === '').map((e) => e.value))
    : (r: Json) => indexEntries(r, l.ctx.spec.fhirBase).tokens.filter((e) => e.param === c.param && e.system === type).map((e) => e.value);
  const named = await namedAsOf(l, `${type} ${JSON.stringify(c)}`, c.type, where, refers);
  if (named === undefined) {
    approximated(l, type, `_has:${c.type}:${c.param}`, c.type);
    return { ...c, where };
  }
  const stable: Condition = { ...c, where: [...where, unchangedSince(l.ctx.transactionTime)] };
  if (named.length === 0) return stable;
  // A canonical names this resource by its own url and version, as of T: the page's rows judged by the database
  // are unchanged since T (their index is as of T), the others are judged in code on their version as of T.
  return { kind: 'or', any: [stable, c.canonical ? canonicalCondition(named) : { kind: 'id', ids: named }] };
}

/** `c`, a condition on a resource of `type`, as of T. */
async function oneAsOf(l: Links, c: Condition, type: string): Promise<Condition> {
  switch (c.kind) {
    case 'chain': return chainAsOf(l, c, type);
    case 'has': return hasAsOf(l, c, type);
    case 'or': return { ...c, any: await allAsOf(l, c.any, type) };
    case 'and': return { ...c, all: await allAsOf(l, c.all, type) };
    case 'not': return { ...c, condition: await oneAsOf(l, c.condition, type) };
    default: return c;
  }
}

async function allAsOf(l: Links, conditions: Condition[], type: string): Promise<Condition[]> {
  const out: Condition[] = [];
  for (const c of conditions) out.push(await oneAsOf(l, c, type));
  return out;
}

/** Whether a condition reaches another resource (a chain or `_has`, at any depth). */
function links(c: Condition): boolean {
  switch (c.kind) {
    case 'chain': case 'has': return true;
    case 'or': return c.any.some(links);
    case 'and': return c.all.some(links);
    case 'not': return links(c.condition);
    default: return false;
  }
}

/**
 * The ORed filters of a page of `type` with their chains and `_has` as of T; the same array when none has one.
 * Read again for each page: a resource on the other side may change at any time during the export.
 */
export async function filtersAsOf(ctx: SelectContext, type: string, filters: Condition[][]): Promise<Condition[][]> {
  if (!filters.some((f) => f.some(links))) return filters;
  const match: MatchContext = { exists: async (query) => (await ctx.store.resources.search(ctx.tenant, query)).length > 0, ...(ctx.spec.fhirBase !== undefined && { base: ctx.spec.fhirBase }) };
  const judged = judgedByJob.get(ctx) ?? judgedByJob.set(ctx, new Map()).get(ctx)!;
  const l: Links = { ctx, match, changed: new Map(), judged };
  const out: Condition[][] = [];
  for (const f of filters) out.push(await allAsOf(l, f, type));
  return out;
}
