/**
 * The searches a transaction's planning took its answers from (FHIR R4 http 3.1.0.11.2: its conditional
 * creates, updates, patches and deletes, and its conditional references), searched again in its store
 * transaction before it writes. A large Bundle's steps let other requests run between its planning and its
 * commit (and on PostgreSQL every step awaits the database): a reference's target deleted meanwhile, or a
 * second resource of its condition created meanwhile, would otherwise be committed as if the condition still
 * matched what it matched. A search that now finds other resources makes the Bundle run again from its
 * planning (ConditionRaced: exclusively), which gives the answer the new state implies (412 for several, the
 * new target, a create).
 */
import type { Condition, ResourceVersion, ResourceWriter, SearchQuery } from '../store/types.ts';
import { withImpliedDrivers } from '../store/search-sql.ts';
import { ConditionRaced } from './conditional.ts';
import { findResources, lookups, searchesCore } from './core-search.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { walksHierarchy, type CodeSet } from './search-compile.ts';
import { indexEntries } from './indexer.ts';
import { matchConditions, type MatchContext } from './search-match.ts';
import { compileLinked, compileSearch, keptInReach, resolveConditions, rowsFilled, storeQuery, TooManyTests, type CompiledSearch } from './search.ts';

/** One search as the planning ran it (conditionSearch), and what it found. */
interface Held {
  type: string;
  condition: URLSearchParams;
  where: string;
  count: number;
  /**
   * The store query the planning's search ran (its pending conditions resolved on the pool then); undefined when the
   * token sees none of the type.
   */
  query: SearchQuery | undefined;
  /**
   * Its matches are kept in reach by reads outside the store's index (keptInReach): searched again as the planning
   * searched them (the first `count` in reach, rowsFilled), those reads made through the writer too.
   */
  reached: boolean;
  /**
   * It walks a reference hierarchy (`location:below=Location/ward`: walksHierarchy), which `query` holds as the ids the
   * planning's walk reached: walked again through the writer, since a resource moved into or out of the hierarchy meanwhile
   * changes what it matches while no resource the search found changed.
   */
  walks: boolean;
  /**
   * Where it walks: its condition compiled, and the codes its `:in` and the like expand to, read before the store
   * transaction (HeldSearches.prepare), so that the walk at the commit reads the writer alone.
   */
  walk?: { compiled: CompiledSearch; codes: Map<string, Promise<Codes>> };
  /** The resources found: id → versionId. */
  found: Map<string, number>;
}

/** The searches of one attempt of a transaction (its planning and reference rewriting add them; its commit checks them). */
export class HeldSearches {
  private readonly held: Held[] = [];

  constructor(
    private readonly deps: FhirDeps,
    private readonly req: FhirRequest,
  ) {}

  /**
   * Records that conditionSearch(`type`, `condition`, `where`, `count`) found `rows` by the store query `query`. `asRan`:
   * `query` is not `condition` compiled (a condition read in the state a transaction leaves: bundle-left-state.ts), and is
   * searched again as it ran, a hierarchy it walked as the planning walked it.
   */
  add(type: string, condition: URLSearchParams, where: string, count: number, { rows, query }: { rows: readonly ResourceVersion[]; query: SearchQuery | undefined }, asRan = false): void {
    const reached = keptInReach(this.deps, this.req, type) !== undefined;
    const walks = !asRan && query !== undefined && walking(type, condition, this.deps.clock.now());
    this.held.push({ type, condition, where, count, query, reached, walks, found: new Map(rows.map((v) => [v.id, v.versionId])) });
  }

  /**
   * Before the store transaction: what a search walking a hierarchy reads off the pool (its chains' links, the codes of
   * its `:in`, `:not-in`, `:below` and `:above` on codes) is read now, so that at the commit only its walk is searched,
   * through the writer. Read there, a pool that the transactions at their commits held whole waited for ever (on
   * PostgreSQL, 30 such transactions at once on a pool of 10).
   */
  async prepare(): Promise<void> {
    for (const h of this.held) {
      if (!h.walks || h.walk) continue;
      const params = new URLSearchParams(h.condition);
      params.delete('_offset');
      const compiled = await compileLinked(this.deps, this.req, h.type, params, true);
      const codes = new Map<string, Promise<Codes>>();
      const expand = this.deps.expandCodes;
      const recorded: ExpandCodes | undefined = expand && ((tenant, set, written) => remember(codes, tenant, set, () => expand(tenant, set, written)));
      // Resolved once without walking (a walk that finds nothing below or above): only to read the codes.
      const search = async () => [];
      await resolveConditions({ expandCodes: recorded, fhirBase: this.deps.fhirBase, store: this.deps.store, access: this.req.access, search }, this.req.tenant, structuredClone(compiled.pending));
      h.walk = { compiled, codes };
    }
  }

  /** The resources the searches found, locked with the ones the entries change, so that none goes before the commit unseen. */
  targets(): { type: string; id: string }[] {
    return this.held.flatMap((h) => [...h.found.keys()].map((id) => ({ type: h.type, id })));
  }

  /**
   * In the store transaction, once targets() are locked and before the entries write: every search finds the
   * resources it found, or ConditionRaced. Searched through the writer (a search on another connection of the
   * pool while the transaction holds one could wait for ever on a pool that concurrent writes fill).
   */
  async requireUnchanged(w: ResourceWriter): Promise<void> {
    const together = new Map<string, Held[]>();
    // The steps of the hierarchies walked, each read once: nothing writes between these searches, and a Bundle's
    // conditions often walk one hierarchy (20 conditional references below one ward, 300 levels deep, held SQLite's
    // writer 1.9 s walking it 20 times).
    const steps = new Map<string, Promise<ResourceVersion[]>>();
    const walk = (q: SearchQuery) => {
      const key = JSON.stringify(q);
      let rows = steps.get(key);
      if (rows === undefined) steps.set(key, (rows = w.search(q)));
      return rows;
    };
    for (const h of this.held) {
      const key = this.together(h);
      if (key === undefined) {
        if (!sameRows(await this.again(w, h, walk), h.found, false)) throw new ConditionRaced();
      } else {
        (together.get(key) ?? together.set(key, []).get(key)!).push(h);
      }
    }
    const ctx = lookups(this.deps, this.req.tenant, { search: (q) => w.search(q), present: (type, ids) => w.present(type, ids) });
    for (const group of together.values()) await requireGroupUnchanged(w, group, ctx, this.deps.store.kind);
  }

  /**
   * The key of the searches `h` is searched again with (one statement for all of them: a transaction of 100
   * conditional references took 1.4-1.7 × its time searching each), or undefined when it is searched alone: its matches
   * all found (fewer than its count), of stored resources whose own content alone decides whether they match (no
   * chain or `_has`, whose other side may change while they do not).
   */
  private together(h: Held): string | undefined {
    const q = h.query;
    if (h.reached || h.walks || q === undefined || h.found.size >= h.count || searchesCore(this.deps, q) || (q.where ?? []).some(linked)) return undefined;
    return `${q.type}\u0000${q.compartment ?? ''}`;
  }

  private async again(w: ResourceWriter, h: Held, walk: (q: SearchQuery) => Promise<ResourceVersion[]>): Promise<ResourceVersion[]> {
    if (h.query === undefined) return [];
    const reads = { search: (q: SearchQuery) => w.search(q), present: (type: string, ids: string[]) => w.present(type, ids) };
    const query = h.walks ? await this.walked(h, walk) : h.query;
    if (query === undefined) return [];
    // Matches kept in reach by reads of their own (a Binary's securityContext, a Provenance's targets): the first
    // `count` within reach, as the planning kept them, those reads through the writer as well. Searched again on the
    // pool (conditionMatches), many such transactions at once held the pool whole, each waiting for one more
    // connection (on PostgreSQL, 16 at once on a pool of 10 waited for ever).
    const keep = h.reached ? keptInReach(this.deps, this.req, h.type, query.compartment, w) : undefined;
    if (keep !== undefined) return (await rowsFilled(this.deps, this.req, { ...query, count: h.count }, keep, reads.search)).map((k) => k.row);
    return findResources(this.deps, this.req.tenant, { ...query, count: h.count }, reads);
  }

  /**
   * `h`'s store query completed again as the planning completed it, its hierarchies walked by `search` (the writer's),
   * its codes those prepare() read (a code set it did not read is expanded now).
   */
  private async walked(h: Held, search: (q: SearchQuery) => Promise<ResourceVersion[]>): Promise<SearchQuery | undefined> {
    // Prepared before the transaction (prepare); a search held after it is compiled here, as the planning compiled it.
    if (!h.walk) {
      const params = new URLSearchParams(h.condition);
      params.delete('_offset');
      h.walk = { compiled: await compileLinked(this.deps, this.req, h.type, params, true), codes: new Map() };
    }
    const { compiled, codes } = h.walk;
    const expand = this.deps.expandCodes;
    const expandCodes: ExpandCodes | undefined = expand && ((tenant, set, written) => remember(codes, tenant, set, () => expand(tenant, set, written)));
    const copy: CompiledSearch = { ...compiled, query: structuredClone(compiled.query), pending: structuredClone(compiled.pending) };
    return storeQuery({ ...this.deps, expandCodes }, this.req, h.type, copy, undefined, search);
  }
}

type ExpandCodes = NonNullable<FhirDeps['expandCodes']>;
type Codes = Awaited<ReturnType<ExpandCodes>>;

/** The codes of `set` in `tenant`, expanded once by `expand` and kept in `codes`. */
function remember(codes: Map<string, Promise<Codes>>, tenant: string, set: CodeSet, expand: () => Promise<Codes>): Promise<Codes> {
  const key = JSON.stringify([tenant, set]);
  let found = codes.get(key);
  if (found === undefined) codes.set(key, (found = expand()));
  return found;
}

/**
 * Whether `condition` walks a reference hierarchy (walksHierarchy): compiled again only when a parameter may (a
 * `:below` or `:above` modifier, `_filter`'s `ss` and `sb`), which a condition by identifier never has.
 */
function walking(type: string, condition: URLSearchParams, now: number): boolean {
  if (![...condition.keys()].some((k) => k.endsWith(':below') || k.endsWith(':above') || k === '_filter')) return false;
  try {
    return compileSearch(type, condition, true, now).pending.some(walksHierarchy);
  } catch (err) {
    // Compiled at first with every chain alternative, which the planning's search then narrowed (compileLinked).
    if (err instanceof TooManyTests) return err.pending.some(walksHierarchy);
    throw err;
  }
}

/** Whether `rows` are the resources `found` (id → versionId), by id, and by version too where `versions`. */
function sameRows(rows: readonly ResourceVersion[], found: ReadonlyMap<string, number>, versions: boolean): boolean {
  if (rows.length !== found.size) return false;
  return rows.every((v) => found.has(v.id) && (!versions || found.get(v.id) === v.versionId));
}

/**
 * Searches of one type (and compartment), all of whose matches were found, searched again in one statement (but a merged
 * superset on SQLite, and an `or`, of at most MERGED_AT_MOST of them: a larger group is checked so many at a time): the
 * resources matching any of them now must be those they found, at the versions they found. A resource's version
 * unchanged, its matching each search is (together() leaves out the searches that look at other resources); a
 * resource written since (whether or not it still matches) runs the Bundle again, as one created or deleted does.
 * Searches of one shape whose values differ in more than one condition (`family=X&given=Y`) are searched as one
 * condition per place with all their values (valuesMerged), a superset whose resources the searches did not find
 * are matched in memory against each of them: as an `or` of each search's conditions, the database probed every
 * condition of every search for each resource it read (1,000 conditional creates by family and given: 20-45 s).
 */
async function requireGroupUnchanged(w: ResourceWriter, group: Held[], ctx: MatchContext, kind: 'sqlite' | 'postgres'): Promise<void> {
  const found = requireOneVersionEach(group);
  const first = group[0]!.query!;
  const wheres = group.map((h) => h.query!.where ?? []);
  const scope = { type: first.type, sort: [], ...(first.compartment === undefined ? {} : { compartment: first.compartment }) };
  const exact = wheres.length === 1 ? wheres[0]! : tokensMerged(wheres);
  const merged = exact === undefined ? valuesMerged(wheres) : undefined;
  // A few searches at a time (the found resources of each few theirs, so that the union is still theirs: a resource
  // found by one and matching another of another few runs the Bundle again, as a race between their searches), where
  // one statement of them all grows faster than they do: on SQLite, the ranges of a merged string condition, weighed
  // for every row it read (5,000 conditional creates by family and given: 1.8 s for the one statement), and anywhere,
  // the `or` of each search's conditions, probed in full for each resource read.
  const inFew = async () => {
    for (let i = 0; i < group.length; i += MERGED_AT_MOST) await requireGroupUnchanged(w, group.slice(i, i + MERGED_AT_MOST), ctx, kind);
  };
  if (merged !== undefined) {
    if (kind === 'sqlite' && group.length > MERGED_AT_MOST) return inFew();
    const rows = await w.search({ ...scope, where: merged, count: found.size + MERGED_OTHERS + 1 });
    if (rows.length <= found.size + MERGED_OTHERS) {
      if (!(await sameMatches(rows, found, wheres, ctx))) throw new ConditionRaced();
      return;
    }
  }
  if (exact === undefined && group.length > MERGED_AT_MOST) return inFew();
  const where = exact ?? withImpliedDrivers([{ kind: 'or', any: wheres.map((all) => ({ kind: 'and', all })) }]);
  if (!sameRows(await w.search({ ...scope, where, count: found.size + 1 }), found, true)) throw new ConditionRaced();
}

/**
 * The resources `group`'s searches found (id → versionId), each at one version: one found at two (written between two of
 * the planning's searches) is ConditionRaced, since the earlier search's answer may no longer hold, which the union,
 * finding the later version, cannot tell.
 */
function requireOneVersionEach(group: Held[]): Map<string, number> {
  const found = new Map<string, number>();
  for (const h of group) {
    for (const [id, version] of h.found) {
      if ((found.get(id) ?? version) !== version) throw new ConditionRaced();
      found.set(id, version);
    }
  }
  return found;
}

/**
 * The most searches of a group searched again in one statement where one of them all costs more than they do
 * (requireGroupUnchanged). 50 was faster without others in the superset (a transaction of 1,000 creates by family and
 * given on SQLite: 0.81 of the time) and 3-4.5 times slower with each name crossed with 3 other families, whose supersets
 * then pass MERGED_OTHERS and fall back to the `or` (docs/PERFORMANCE.md, fifty-fifth session).
 */
const MERGED_AT_MOST = 25;

/** The most resources a merged search (valuesMerged) may find beyond the searches' own, each matched in memory against every search. */
const MERGED_OTHERS = 100;

/**
 * Whether the resources of a superset of the searches `wheres` (`rows`) that match any of them are those `found`
 * (id → versionId), at those versions: a found resource at its version matches as it did; another is matched in
 * memory against each search (matchConditions, as the store would).
 */
async function sameMatches(rows: readonly ResourceVersion[], found: ReadonlyMap<string, number>, wheres: Condition[][], ctx: MatchContext): Promise<boolean> {
  let seen = 0;
  for (const v of rows) {
    const version = found.get(v.id);
    if (version !== undefined) {
      if (version !== v.versionId) return false;
      seen++;
      continue;
    }
    const resource = JSON.parse(v.content) as Record<string, unknown>;
    const index = indexEntries(resource, ctx.base);
    for (const where of wheres) if (await matchConditions(resource, v.lastUpdated, where, ctx, index)) return false;
  }
  return seen === found.size;
}

/**
 * Conditions met by a resource that meets any of `wheres`, exactly, where they differ by one token condition alone
 * (the usual `identifier=system|value`, beside the token's scope filter): one condition with all their values, an
 * index lookup. Else undefined.
 */
function tokensMerged(wheres: Condition[][]): Condition[] | undefined {
  const keyed = wheres.map((where) => where.map((c) => JSON.stringify(c)));
  const common = new Set(keyed[0]!.filter((k) => keyed.every((keys) => keys.includes(k))));
  const rest = wheres.map((where, i) => where.filter((_, j) => !common.has(keyed[i]![j]!)));
  const tokens = rest.map((r) => (r.length === 1 && r[0]!.kind === 'token' && !r[0]!.not && !r[0]!.unequal && !r[0]!.canonical ? r[0]! : undefined));
  const shape = (c: Condition | undefined) => (c?.kind === 'token' ? JSON.stringify({ ...c, values: [] }) : undefined);
  if (!tokens.every((t) => t !== undefined && shape(t) === shape(tokens[0]))) return undefined;
  const values = tokens.flatMap((t) => (t as Extract<Condition, { kind: 'token' }>).values);
  return [...wheres[0]!.filter((_, j) => common.has(keyed[0]![j]!)), { ...(tokens[0] as Extract<Condition, { kind: 'token' }>), values }];
}

/**
 * A superset of the searches `wheres` when they have one shape: as many conditions, each place's of one kind and
 * parameter and differing only in values that any one row may match (a token without `:not` or `ne`, a string), which
 * become one condition with all of them (`family=A&given=B`, `family=C&given=D`: family A or C and given B or D).
 * Undefined when they differ otherwise.
 */
export function valuesMerged(wheres: Condition[][]): Condition[] | undefined {
  const first = wheres[0]!;
  if (first.length === 0 || !wheres.every((where) => where.length === first.length)) return undefined;
  const out: Condition[] = [];
  for (let i = 0; i < first.length; i++) {
    const c = first[i]!;
    const shape = mergeShape(c);
    if (shape === undefined) {
      const same = JSON.stringify(c);
      if (!wheres.every((where) => JSON.stringify(where[i]) === same)) return undefined;
      out.push(c);
      continue;
    }
    if (!wheres.every((where) => mergeShape(where[i]!) === shape)) return undefined;
    const values = new Map<string, unknown>();
    for (const where of wheres) for (const v of (where[i] as { values: unknown[] }).values) values.set(JSON.stringify(v), v);
    out.push({ ...c, values: [...values.values()] } as Condition);
  }
  return out;
}

/** A condition's shape but for its values, where any one of its values matching is enough (valuesMerged); else undefined. */
export function mergeShape(c: Condition): string | undefined {
  if (c.kind === 'token' && !c.not && !c.unequal && !c.canonical) return JSON.stringify({ ...c, values: [] });
  if (c.kind === 'string') return JSON.stringify({ ...c, values: [] });
  return undefined;
}

/** Whether a condition looks at other resources than the one it tests (a chain, `_has`). */
function linked(c: Condition): boolean {
  switch (c.kind) {
    case 'chain':
    case 'has':
      return true;
    case 'or':
      return c.any.some(linked);
    case 'and':
      return c.all.some(linked);
    case 'not':
      return linked(c.condition);
    default:
      return false;
  }
}
