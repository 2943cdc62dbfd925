/**
 * `_summary` and `_elements` (FHIR R4 search.html 3.1.1.5, "Summary" and "Elements"): the parameters
 * parsed once, then a rewrite of each resource's JSON text, tagged SUBSETTED.
 */
import { FhirError, type FhirIssue } from '../errors.ts';
import { isChoiceMember } from './fhirpath.ts';
import { issue } from './outcome.ts';
import { isResourceType } from './resource-types.ts';
import summaryElements from './summary-elements.json' with { type: 'json' };

export type SummaryMode = 'true' | 'text' | 'data' | 'count' | 'false';

/** `_elements`' names: those for every type (`name`) and those for one (`Patient.name`). */
export interface ElementNames {
  any: string[];
  byType: Record<string, string[]>;
}

export interface Subset {
  summary: SummaryMode | null;
  elements?: ElementNames;
}

/** Rewrites a resource's JSON text. */
export type Shape = (content: string) => string;

const TABLE = summaryElements as Record<string, { summary: string[]; mandatory: string[] }>;
const NO_TYPE = { summary: [], mandatory: [] };
const SUMMARY_MODES = new Set(['true', 'text', 'data', 'count', 'false']);
/** Members every subset keeps: what makes the text a resource at all. */
const ALWAYS = new Set(['resourceType', 'id', 'meta']);
const SUBSETTED = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED', display: 'subsetted' };

/**
 * `_summary` and `_elements` of `params`. An unknown `_summary` and an `_elements` naming nothing are a
 * 400; an `_elements` name that is a path (`name.family`: R4 selects top-level elements) or names no
 * resource type (`Foo.name`) is ignored with a warning in `warnings`, or a 400 when `strict`.
 */
export function parseSubset(params: URLSearchParams, strict: boolean, warnings: FhirIssue[]): Subset {
  const summary = params.get('_summary');
  if (summary !== null && !SUMMARY_MODES.has(summary)) {
    throw new FhirError('invalid', `Invalid _summary '${summary}': expected true, text, data, count or false`, { expression: ['_summary'] });
  }
  const subset: Subset = { summary: summary as SummaryMode | null };
  const raws = params.getAll('_elements');
  if (raws.length === 0) return subset;
  const written = raws.flatMap((raw) => raw.split(',')).map((n) => n.trim()).filter(Boolean);
  if (written.length === 0) throw new FhirError('invalid', '_elements names no element', { expression: ['_elements'] });
  const names: ElementNames = { any: [], byType: {} };
  for (const name of written) {
    const dot = name.indexOf('.');
    const type = dot < 0 ? undefined : name.slice(0, dot);
    const element = dot < 0 ? name : name.slice(dot + 1);
    const problem = elementProblem(type, element);
    if (problem !== undefined) {
      const text = `_elements '${name}': ${problem}`;
      if (strict) throw new FhirError('not-supported', text, { expression: ['_elements'] });
      warnings.push(issue('warning', 'not-supported', `${text}; it was ignored`, ['_elements']));
    } else if (type === undefined) names.any.push(element);
    else (names.byType[type] ??= []).push(element);
  }
  if (names.any.length || Object.keys(names.byType).length) subset.elements = names;
  return subset;
}

/** Why an `_elements` name (`element`, of `type` if prefixed) selects nothing, if it does not. */
function elementProblem(type: string | undefined, element: string): string | undefined {
  if (type !== undefined && !isResourceType(type)) return /^[A-Z]/.test(type) ? `'${type}' is not a resource type` : 'only top-level elements can be selected';
  if (element.includes('.')) return 'only top-level elements can be selected';
  if (element === '') return 'it names no element';
  return undefined;
}

interface View {
  shown(key: string): boolean;
}

/** A view deciding each member name once (a page's resources share a few dozen names). */
function view(decide: (key: string) => boolean): View {
  const decided = new Map<string, boolean>();
  return {
    shown(key) {
      let s = decided.get(key);
      if (s === undefined) decided.set(key, (s = decide(key)));
      return s;
    },
  };
}

/** Member `key` is element `name`, or a typed member of it when it is a choice element (`deceased`: `deceasedDateTime`). */
function isOrChoiceOf(key: string, name: string): boolean {
  return key === name || isChoiceMember(key, name);
}

/** The element a member is (a primitive's `_name`, holding its id and extensions, is `name`). */
const elementOf = (key: string) => (key.charCodeAt(0) === 95 /* _ */ ? key.slice(1) : key);

/** The top-level view keeping the members `names` name (and those every subset keeps). */
function namesView(names: string[]): View {
  return view((key) => ALWAYS.has(key) || names.some((n) => isOrChoiceOf(elementOf(key), n)));
}

/** The members of `value` a view shows. */
function pick(value: Record<string, unknown>, v: View): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key in value) if (v.shown(key)) out[key] = value[key];
  return out;
}

/** The view of a resource type that `subset` asks for; undefined: the type's resources are returned whole. */
function viewOf(subset: Subset, type: string): View | undefined {
  const { summary, elements } = subset;
  if (elements !== undefined) {
    const own = elements.byType[type];
    // A type named by no name (`_elements=Observation.code` on a Patient) is left whole.
    if (!elements.any.length && own === undefined) return undefined;
    return namesView([...elements.any, ...(own ?? []), ...(TABLE[type] ?? NO_TYPE).mandatory]);
  }
  if (summary === 'true') return namesView((TABLE[type] ?? NO_TYPE).summary);
  if (summary === 'text') return namesView(['text', ...(TABLE[type] ?? NO_TYPE).mandatory]);
  if (summary === 'data') return view((key) => key !== 'text');
  return undefined;
}

/**
 * `_summary` / `_elements` as a rewrite of each resource (`_elements` over `_summary` when both are
 * given), tagged SUBSETTED; undefined when nothing is rewritten. Each type's view is made once for
 * the shape's life (a page), and decides each member name once.
 */
export function shaper(subset: Subset): Shape | undefined {
  if (subset.elements === undefined && subset.summary !== 'true' && subset.summary !== 'text' && subset.summary !== 'data') return undefined;
  const views = new Map<string, View | null>();
  return (content) => {
    const r = JSON.parse(content) as Record<string, unknown>;
    const type = r.resourceType as string;
    let v = views.get(type);
    if (v === undefined) views.set(type, (v = viewOf(subset, type) ?? null));
    if (v === null) return content;
    const out = pick(r, v);
    const meta = { ...((out.meta as Record<string, unknown> | undefined) ?? {}) };
    meta.tag = [...(Array.isArray(meta.tag) ? meta.tag : []), SUBSETTED];
    out.meta = meta;
    return JSON.stringify(out);
  };
}
