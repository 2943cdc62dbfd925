import { FhirError, type FhirIssue } from '../errors.ts';
import type { ParamCriterion, ResourceVersion, SearchCursor, SearchQuery } from '../store/types.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { requireAccess } from './crud.ts';
import { patientCompartment, paramsOf, type ParamDefinition } from './definitions.ts';
import { parseTimeCriterion } from './dates.ts';
import { issue } from './outcome.ts';
import { alternatives, MAX_SEARCH_VALUES, tokenValue, unescapeValue } from './search-values.ts';
import { parseReference } from './references.ts';
import { ID_PATTERN, isResourceType } from './resource-types.ts';

export const DEFAULT_COUNT = 50;
export const MAX_COUNT = 1000;

/** Result parameters Cinder honours; other `_` parameters are reported as unsupported. */
const CONTROL = new Set(['_count', '_sort', '_cursor', '_total', '_format', '_pretty', '_summary']);

export interface SearchResult {
  rows: ResourceVersion[];
  /** Cursor for the next page, when there may be one. */
  next?: string;
  total?: number;
  /** Issues about ignored parameters (lenient handling). */
  warnings: FhirIssue[];
  /** The query string that reproduces this page (for the `self` link). */
  self: URLSearchParams;
}

/** Encodes a keyset position as an opaque `_cursor` value. */
export function encodeCursor(c: SearchCursor): string {
  return Buffer.from(JSON.stringify([c.lastUpdated, c.id])).toString('base64url');
}

function decodeCursor(raw: string): SearchCursor {
  try {
    const [lastUpdated, id] = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (typeof lastUpdated === 'number' && typeof id === 'string') return { lastUpdated, id };
  } catch {
    // fall through to the error below
  }
  throw new FhirError('invalid', `Invalid _cursor '${raw}'`, { expression: ['_cursor'] });
}

function parseCount(raw: string | null): number {
  if (raw === null) return DEFAULT_COUNT;
  if (!/^\d{1,6}$/.test(raw)) throw new FhirError('invalid', `Invalid _count '${raw}': expected a non-negative integer`, { expression: ['_count'] });
  return Math.min(Number(raw), MAX_COUNT);
}

function parseSort(raw: string | null): SearchQuery['sort'] {
  if (raw === null || raw === '_id') return 'id';
  if (raw === '_lastUpdated') return 'lastUpdated';
  if (raw === '-_lastUpdated') return '-lastUpdated';
  throw new FhirError('not-supported', `Unsupported _sort '${raw}': Cinder sorts by _id, _lastUpdated or -_lastUpdated`, { expression: ['_sort'] });
}

function referenceValue(def: ParamDefinition, raw: string, modifierType?: string): { system?: string; value: string } {
  const parsed = parseReference(raw);
  if (parsed) return { system: parsed.type, value: parsed.id };
  if (!ID_PATTERN.test(raw)) throw new FhirError('invalid', `Invalid reference value '${raw}' for ${def.code}`, { expression: [def.code] });
  const target = modifierType ?? (def.targets.length === 1 ? def.targets[0] : undefined);
  return target ? { system: target, value: raw } : { value: raw };
}

/**
 * A criterion on a parameter kept in another's index rows (ParamDefinition.storedAs): references of
 * other types than its target cannot match, and an untyped value names the target type.
 */
function storedCriterion(stored: NonNullable<ParamDefinition['storedAs']>, values: ParamCriterion['values']): ParamCriterion {
  const { param, target } = stored;
  if (target === undefined) return { param, values };
  return { param, values: values.filter((v) => v.system === undefined || v.system === target).map((v) => ({ ...v, system: target })) };
}

function criterion(def: ParamDefinition, modifier: string | undefined, raw: string): ParamCriterion {
  const parts = alternatives(raw, def.code);
  if (def.type === 'reference') {
    if (modifier !== undefined && !isResourceType(modifier)) {
      throw new FhirError('not-supported', `Unsupported modifier ':${modifier}' on '${def.code}'`, { expression: [def.code] });
    }
    const values = parts.map((p) => referenceValue(def, unescapeValue(p), modifier));
    return def.storedAs ? storedCriterion(def.storedAs, values) : { param: def.code, values };
  }
  if (modifier !== undefined) {
    throw new FhirError('not-supported', `Unsupported modifier ':${modifier}' on '${def.code}'`, { expression: [def.code] });
  }
  return { param: def.code, values: def.type === 'token' ? parts.map(tokenValue) : parts.map((p) => ({ system: '', value: unescapeValue(p) })) };
}

/**
 * Turns a FHIR search query string into a store query (FHIR R4 search 3.1.1). Unknown parameters
 * become warnings, or a 400 when `strict` (`Prefer: handling=strict`).
 */
export function parseSearch(type: string, params: URLSearchParams, strict: boolean) {
  const defs = new Map(paramsOf(type).map((d) => [d.code, d]));
  const query: SearchQuery = { type, sort: parseSort(params.get('_sort')), count: parseCount(params.get('_count')) };
  const warnings: FhirIssue[] = [];
  const self = new URLSearchParams();
  for (const [key, raw] of params) {
    const [name, modifier] = key.split(':', 2) as [string, string | undefined];
    if (CONTROL.has(name)) {
      if (name !== '_cursor') self.append(key, raw);
      continue;
    }
    if (name === '_id') {
      if (modifier !== undefined) throw new FhirError('not-supported', `Unsupported modifier ':${modifier}' on '_id'`, { expression: [key] });
      const ids = alternatives(raw, '_id');
      for (const id of ids) if (!ID_PATTERN.test(id)) throw new FhirError('invalid', `Invalid _id value '${id}'`, { expression: ['_id'] });
      query.ids = query.ids ? query.ids.filter((i) => ids.includes(i)) : ids;
    } else if (name === '_lastUpdated' && modifier === undefined) {
      (query.lastUpdated ??= []).push(parseTimeCriterion(raw));
    } else if (defs.has(name)) {
      (query.params ??= []).push(criterion(defs.get(name)!, modifier, raw));
    } else {
      const text = `Search parameter '${key}' is not supported for ${type}`;
      if (strict) throw new FhirError('not-supported', text, { expression: [key] });
      warnings.push(issue('warning', 'not-supported', `${text} and was ignored`, [key]));
      continue;
    }
    self.append(key, raw);
  }
  const values = (query.ids?.length ?? 0) + (query.params ?? []).reduce((n, p) => n + p.values.length, 0) + (query.lastUpdated?.length ?? 0);
  if (values > MAX_SEARCH_VALUES) {
    throw new FhirError('invalid', `The search has ${values} values; at most ${MAX_SEARCH_VALUES} are supported`, { issueCode: 'too-costly' });
  }
  const cursor = params.get('_cursor');
  if (cursor !== null) query.after = decodeCursor(cursor);
  const total = params.get('_total');
  if (total !== null && !['none', 'estimate', 'accurate'].includes(total)) {
    throw new FhirError('invalid', `Invalid _total '${total}'`, { expression: ['_total'] });
  }
  const summary = params.get('_summary');
  if (summary !== null && summary !== 'count' && summary !== 'false') {
    throw new FhirError('not-supported', `Unsupported _summary '${summary}': Cinder supports count and false`, { expression: ['_summary'] });
  }
  return { query, warnings, self, total, summaryCount: summary === 'count' };
}

/** Runs a type-level search with keyset paging; patient-context tokens see only their compartment. */
export async function searchResources(
  deps: FhirDeps, req: FhirRequest, type: string, params: URLSearchParams, strict: boolean,
): Promise<SearchResult> {
  if (!isResourceType(type)) throw new FhirError('not-found', `Unknown resource type '${type}'`);
  requireAccess(req.access, type, 's');
  const { query, warnings, self, total, summaryCount } = parseSearch(type, params, strict);
  const patient = req.access.patientLimit(type);
  // Types outside the Patient compartment (Medication, Practitioner...) are not patient-bound.
  if (patient !== undefined && patientCompartment().has(type)) query.compartment = patient;
  const repo = deps.store.resources;
  if (summaryCount || query.count === 0) {
    return { rows: [], total: await repo.count(req.tenant, query), warnings, self };
  }
  const rows = await repo.search(req.tenant, { ...query, count: query.count + 1 });
  const result: SearchResult = { rows: rows.slice(0, query.count), warnings, self };
  if (rows.length > query.count) {
    const last = result.rows[result.rows.length - 1]!;
    result.next = encodeCursor({ lastUpdated: last.lastUpdated, id: last.id });
  }
  if (total === 'accurate' || total === 'estimate') result.total = await repo.count(req.tenant, query);
  else if (total !== 'none' && !query.after && !result.next) result.total = result.rows.length;
  return result;
}
