/**
 * A transaction's condition searches read ahead together (FHIR R4 http 3.1.0.11.2: its conditional creates, updates,
 * patches and deletes are resolved before it writes). Planned one by one, each entry's condition was a statement of its
 * own: 1,000 conditional creates were 1,000 round trips to PostgreSQL, most of their planning. Conditions of one shape
 * (`identifier=urn:mrn|N` for every entry) are searched as one superset (valuesMerged, as their commit searches them again:
 * bundle-held-searches.ts), whose rows are given to each condition by matching in memory only the conditions in which
 * they differ (token conditions and string prefixes, each row narrowed first by its values: WrittenResources); those they share
 * the statement itself judged. A condition gets an answer only where it is exactly the search's: its matches all in
 * the superset (which is not cut short), fewer than its count (so that which of them a page holds never depends on
 * order), and its search a plain page (plainPageQuery). Any other is searched alone when its entry is planned.
 */
import type { Condition, ResourceVersion, SearchQuery } from '../store/types.ts';
import type { ConditionAnswers, ConditionFound } from './conditional.ts';
import { WrittenResources, type TransactionWrite } from './bundle-conditional.ts';
import { mergeShape, valuesMerged } from './bundle-held-searches.ts';
import { lookups } from './core-search.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import type { Resource } from './resource.ts';
import { plainPageQuery } from './search.ts';
import { matchConditions } from './search-match.ts';
import { pacedTurns } from './turns.ts';

/** One condition search to read ahead: conditionSearch's `type` and parameters (conditionParams). */
export interface AheadSearch {
  type: string;
  params: URLSearchParams;
}

/** A search prepared for its group: its answer's key, and the store query conditionSearch would run. */
interface Prepared {
  key: string;
  query: SearchQuery;
}

export class GroupedConditionAnswers implements ConditionAnswers {
  private readonly answers = new Map<string, ConditionFound>();

  constructor(
    private readonly deps: FhirDeps,
    private readonly req: FhirRequest,
  ) {}

  take(type: string, params: URLSearchParams): ConditionFound | undefined {
    const key = keyOf(type, params);
    const found = this.answers.get(key);
    if (found !== undefined) this.answers.delete(key);
    return found;
  }

  /**
   * Reads ahead the answers of `searches`: each compiled as its search would be (a search that fails, or is not a plain
   * page, is left to be searched alone, where it fails as before), those of one shape searched together.
   */
  async ahead(searches: AheadSearch[]): Promise<void> {
    const pace = pacedTurns();
    const groups = new Map<string, Prepared[]>();
    for (const { type, params } of searches) {
      await pace();
      const key = keyOf(type, params);
      if (this.answers.has(key)) continue;
      const plain = await plainPageQuery(this.deps, this.req, type, params).catch(() => undefined);
      if (plain === undefined) continue;
      if (plain.query === undefined) {
        this.answers.set(key, { rows: [], query: undefined });
        continue;
      }
      const shape = shapeOf(plain.query);
      if (shape === undefined) continue;
      (groups.get(shape) ?? groups.set(shape, []).get(shape)!).push({ key, query: plain.query });
    }
    for (const group of groups.values()) {
      // Alone, a search is no cheaper as a superset: it runs now, as searchResources would run it, compiled once.
      if (group.length < 2) await this.alone(group[0]!);
      else for (let i = 0; i < group.length; i += AT_ONCE) await this.together(group.slice(i, i + AT_ONCE));
    }
  }

  /** Answers a search by its own statement: its page's rows (searchResources reads one more, for its next link). */
  private async alone(p: Prepared): Promise<void> {
    const rows = await this.deps.store.resources.search(this.req.tenant, { ...p.query, count: p.query.count + 1 });
    this.answers.set(p.key, { rows: rows.slice(0, p.query.count), query: p.query });
  }

  /** Answers `group`'s searches (one shape) from one superset statement, where each answer is exactly its search's. */
  private async together(group: Prepared[]): Promise<void> {
    const first = group[0]!.query;
    const wheres = group.map((p) => p.query.where ?? []);
    const merged = valuesMerged(wheres);
    if (merged === undefined) return;
    // The places where the searches differ: judged in memory for each row. The others the statement judged.
    const differ = first.where!.flatMap((c, i) => (wheres.every((w) => JSON.stringify(w[i]) === JSON.stringify(c)) ? [] : [i]));
    const limit = group.reduce((n, p) => n + p.query.count, 0) + SUPERSET_OTHERS;
    const { offset: _offset, ...rest } = first;
    const rows = await this.deps.store.resources.search(this.req.tenant, { ...rest, where: merged, count: limit + 1 });
    if (rows.length > limit) {
      // Others crossed with the searches' values (each given name under other families): halves hold fewer.
      if (group.length < SPLIT_FROM) return;
      const half = Math.ceil(group.length / 2);
      await this.together(group.slice(0, half));
      await this.together(group.slice(half));
      return;
    }
    const versions = new Map<string, ResourceVersion>();
    const writes: TransactionWrite[] = rows.map((v) => {
      versions.set(v.id, v);
      return { type: first.type, id: v.id, resource: JSON.parse(v.content) as Resource, stored: false };
    });
    const written = new WrittenResources(writes, lookups(this.deps, this.req.tenant));
    const pace = pacedTurns();
    for (const p of group) {
      await pace();
      const own = differ.map((i) => p.query.where![i]!);
      const found: ResourceVersion[] = [];
      for (const w of await written.candidates(first.type, own)) {
        const v = versions.get(w.id)!;
        if (await matchConditions({ ...w.resource!, id: w.id }, v.lastUpdated, own, written.ctx, written.rows(w))) found.push(v);
      }
      // As many as its count: which of them its page holds depends on the order, which the search alone tells.
      if (found.length >= p.query.count) continue;
      this.answers.set(p.key, { rows: found, query: p.query });
    }
  }
}

/** An answer's key: the condition search's type and parameters. */
const keyOf = (type: string, params: URLSearchParams) => `${type}?${params}`;

/**
 * The shape of a store query whose searches may be merged (valuesMerged): all but the values of its token conditions,
 * which the merged statement looks up by its index, a value at a time, and of its string conditions of prefixes, an
 * index range each (Dialect.rangeList: a join on the list of ranges, on PostgreSQL too since the fifty-fifth session,
 * where the `or` of them was weighed for every row of the parameter: 250 searches by family and given among 5,000
 * Patients took 400 ms merged against 193 ms each searched alone; joined, 48 ms; docs/PERFORMANCE.md). Other string
 * conditions must be the same. Undefined without conditions.
 */
function shapeOf(query: SearchQuery): string | undefined {
  const where = query.where ?? [];
  if (where.length === 0) return undefined;
  const merges = (c: Condition) => c.kind === 'token' || (c.kind === 'string' && c.values.every((v) => v.match === 'prefix'));
  return JSON.stringify({ ...query, where: where.map((c: Condition) => (merges(c) ? mergeShape(c) : undefined) ?? JSON.stringify(c)) });
}

/** The most searches merged into one statement (their token values one `IN` list). */
const AT_ONCE = 250;

/** The most rows a superset may hold beyond its searches' counts: more, and its halves are searched (or, fewer than SPLIT_FROM, each search alone). */
const SUPERSET_OTHERS = 100;
const SPLIT_FROM = 16;
