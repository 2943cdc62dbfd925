/**
 * What a `$graphql` request's resolvers read through (schema.ts GraphqlContext): reads as crud.ts
 * answers them, searches by the search engine (searchResources), with the request's access, so scopes,
 * SMART v2 filters, patient compartments and Binary securityContexts apply exactly as on REST. The
 * references a level of the query resolves are read together, one store query per type
 * (DataLoader-like); each read is charged to the request's budget (limits.ts).
 */
import { FhirError } from '../../errors.ts';
import type { ResourceVersion } from '../../store/types.ts';
import { parseExact } from '../exact-json.ts';
import { requireAccess } from '../access.ts';
import { readResource, vreadResource, type FhirDeps, type FhirRequest } from '../crud.ts';
import { parseReference } from '../references.ts';
import { checkTypeAndId } from '../resource.ts';
import { readableVersions } from '../read-many.ts';
import { compileLinked, countInReach, encodeCursor, searchResources, storeQuery } from '../search.ts';
import { parseSort } from '../search-compile.ts';
import { keysetSort } from '../../store/search-sql.ts';
import type { ConnectionPage, GraphqlContext, Json } from './schema.ts';
import { type GraphqlBudget } from './limits.ts';

/** The resource a nested element belongs to (its `contained` resolve `#id` references). */
const ROOT = Symbol('root');
/** Marks a stored resource as read (not one it contains, nor a Bundle's entry or a Parameters' part). */
const STORED = Symbol('stored');

/**
 * Parses a stored version's JSON and marks every object in it with its resource (ROOT), charging the
 * budget. A resource within it (a Bundle's entry, a Parameters' part), but for a contained one, is the
 * resource of what it holds: its `#id` references name its own contained resources.
 */
function resourceOf(v: ResourceVersion, budget: GraphqlBudget): Json {
  budget.charge(v.content.length);
  // Its decimals' literals recorded: a decimal answers as it was stored (schema.ts FLOAT).
  const top = parseExact(v.content) as Json;
  const mark = (node: unknown, root: Json, key: string): void => {
    if (Array.isArray(node)) node.forEach((item) => mark(item, root, key));
    else if (node !== null && typeof node === 'object') {
      if (key !== 'contained' && typeof (node as Json).resourceType === 'string') root = node as Json;
      Object.defineProperty(node, ROOT, { value: root, enumerable: false });
      for (const [k, value] of Object.entries(node)) mark(value, root, k);
    }
  };
  mark(top, top, '');
  Object.defineProperty(top, STORED, { value: true, enumerable: false });
  return top;
}

interface Pending {
  resolve(v: Json): void;
  reject(err: unknown): void;
}

/** The GraphqlContext of one request. */
export function graphqlContext(deps: FhirDeps, req: FhirRequest, budget: GraphqlBudget): GraphqlContext {
  const waiting = new Map<string, Map<string, Pending[]>>();
  const loaded = new Map<string, Promise<Json>>();
  let scheduled = false;

  /** Reads the references waiting, one store query per type; an id the query did not find is read alone, for the read's own answer (404, 410, 403). */
  const flush = async () => {
    scheduled = false;
    const batch = [...waiting];
    waiting.clear();
    await Promise.all(batch.map(async ([type, byId]) => {
      const settle = (id: string, outcome: { v: Json } | { err: unknown }) => {
        for (const p of byId.get(id)!) 'v' in outcome ? p.resolve(outcome.v) : p.reject(outcome.err);
      };
      try {
        const found = await readMany(type, [...byId.keys()]);
        await Promise.all([...byId.keys()].map(async (id) => {
          const v = found.get(id);
          if (v) return settle(id, { v: resourceOf(v, budget) });
          try {
            settle(id, { v: resourceOf(await readResource(deps, req, type, id), budget) });
          } catch (err) {
            settle(id, { err });
          }
        }));
      } catch (err) {
        for (const id of byId.keys()) settle(id, { err });
      }
    }));
  };

  /** The versions of `type` among `ids` the request may read, as a search of them would find them. */
  const readMany = async (type: string, ids: string[]): Promise<Map<string, ResourceVersion>> => {
    requireAccess(req.access, type, 'r');
    budget.read(ids.length);
    return readableVersions(deps, req, type, ids);
  };

  const read = (type: string, id: string): Promise<Json> => {
    const key = `${type}/${id}`;
    const known = loaded.get(key);
    if (known) return known;
    const p = new Promise<Json>((resolve, reject) => {
      checkTypeAndId(type, id);
      const byId = waiting.get(type) ?? waiting.set(type, new Map()).get(type)!;
      (byId.get(id) ?? byId.set(id, []).get(id)!).push({ resolve, reject });
      if (!scheduled) {
        scheduled = true;
        // After the resolvers of this level have all asked (graphql-js calls a list's items' resolvers in one turn).
        queueMicrotask(() => void flush());
      }
    });
    loaded.set(key, p);
    return p;
  };

  const page = async (type: string, params: URLSearchParams) => {
    budget.search();
    const r = await searchResources(deps, req, type, params, true);
    budget.read(r.rows.length);
    return r;
  };

  return {
    read,
    async search(type, params) {
      return (await page(type, params)).rows.map((v) => resourceOf(v, budget));
    },
    async connection(type, params): Promise<ConnectionPage> {
      const r = await page(type, params);
      // A page asked by `_cursor` is at a position, not at a known offset.
      const offset = params.has('_cursor') ? undefined : Number(params.get('_offset') ?? 0);
      // The previous page's cursor. REST links the first page without a cursor, and a page before one asked
      // by `_offset` with `_offset`: a Connection has only cursors, so these are cursors of their offsets
      // (0 for the first page), passed as `_cursor` without `_offset` as `next` is. A search in id or
      // `_lastUpdated` order pages by the last row's keys, not by offset: only its first page is known.
      const byOffset = r.page?.offset?.previous;
      const keyset = keysetSort(parseSort(type, params.get('_sort'))) !== undefined;
      const before = byOffset === undefined ? r.page?.previous : byOffset === null ? null : keyset ? undefined : encodeCursor({ offset: byOffset });
      const previous = before === null ? encodeCursor({ offset: 0 }) : before;
      // Counted once, whatever the aliases of `count` (each a count of every match, on the search budget).
      let counted: Promise<number | undefined> | undefined;
      const count = async (): Promise<number | undefined> => {
        if (r.total !== undefined) return r.total;
        budget.search();
        const counting = new URLSearchParams([...params].filter(([k]) => !['_count', '_offset', '_cursor', '_sort'].includes(k)));
        requireAccess(req.access, type, 's');
        const query = await storeQuery(deps, req, type, await compileLinked(deps, req, type, counting, true));
        return query === undefined ? 0 : countInReach(deps, req, query);
      };
      return {
        type, rows: r.rows.map((v) => resourceOf(v, budget)), pageSize: r.rows.length, ...(offset === undefined ? {} : { offset }),
        ...(r.next ? { next: r.next } : {}), ...(previous === undefined ? {} : { previous }),
        count: () => (counted ??= count()),
      };
    },
    answer: (key, value) => budget.answer(key, value),
    referable(resource) {
      // resourceOf marks the stored resource it read; a contained one, a Bundle's entry or a Parameters' part is a copy
      // or a local name, whose `Type/id` is another resource (a Bundle's entry may be another server's).
      return typeof resource.id === 'string' && (resource as { [STORED]?: boolean })[STORED] === true;
    },
    async resolve(ref, { optional, type }) {
      const reference = ref.reference;
      if (typeof reference !== 'string') return null;
      try {
        if (reference.startsWith('#')) {
          const root = (ref as { [ROOT]?: Json })[ROOT];
          const contained = (root?.contained as Json[] | undefined)?.find((c) => `#${String(c.id)}` === reference);
          if (!contained) throw new FhirError('not-found', `The contained resource ${reference} is not in this resource`);
          return type === undefined || contained.resourceType === type ? contained : null;
        }
        const target = parseReference(reference, deps.fhirBase?.(req.tenant));
        if (!target) throw new FhirError('not-found', `The reference '${reference}' names no resource of this server`);
        if (type !== undefined && target.type !== type) return null;
        if (target.version !== undefined) {
          budget.read(1);
          return resourceOf(await vreadResource(deps, req, target.type, target.id, target.version), budget);
        }
        return await read(target.type, target.id);
      } catch (err) {
        if (optional && err instanceof FhirError && err.status < 500) return null;
        throw err;
      }
    },
  };
}
