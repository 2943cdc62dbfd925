import { FhirError, type FhirIssue } from '../errors.ts';
import { carryLiterals, parseExact, stringifyExact } from '../fhir/exact-json.ts';
import { issue } from '../fhir/outcome.ts';
import { isResourceType } from '../fhir/resource-types.ts';
import table from './element-table.json' with { type: 'json' };

const ELEMENTS = table as Record<string, { all: string[]; required: string[] }>;

/** Always kept: what makes a line a resource at all. */
const ALWAYS = ['resourceType', 'id', 'meta'];

export const SUBSETTED = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED', display: 'subsetted' };

/** The element of `type` an `_elements` name denotes (`value` or `valueQuantity` -> `value[x]`), if any. */
function elementOf(type: string, name: string): string | undefined {
  const all = ELEMENTS[type]?.all ?? [];
  if (all.includes(name)) return name;
  if (all.includes(`${name}[x]`)) return `${name}[x]`;
  return all.find((e) => e.endsWith('[x]') && name.startsWith(e.slice(0, -3)) && /^[A-Z]/.test(name.slice(e.length - 3)));
}

/**
 * `_elements` (Bulk Data 2.0): `Type.element` or `element` (for every exported type that has it), root
 * elements only. Types named nowhere (when every name is type-qualified) stay whole. Returns, per
 * subsetted type, the elements to keep: the requested ones plus the mandatory ones.
 */
export function parseElements(names: string[], exported: string[], lenient: boolean) {
  const keep: Record<string, Set<string>> = {};
  const issues: FhirIssue[] = [];
  const problem = (text: string) => {
    if (!lenient) throw new FhirError('invalid', text, { expression: ['_elements'] });
    issues.push(issue('warning', 'not-supported', `${text}; it was ignored`, ['_elements']));
  };
  for (const name of names) {
    const dot = name.indexOf('.');
    const type = dot < 0 ? undefined : name.slice(0, dot);
    const element = dot < 0 ? name : name.slice(dot + 1);
    if (type !== undefined && !isResourceType(type)) { problem(`_elements '${name}': '${type}' is not a resource type`); continue; }
    if (element.includes('.')) { problem(`_elements '${name}': only root elements can be selected`); continue; }
    const targets = type !== undefined ? [type] : exported;
    const found = targets.filter((t) => ALWAYS.includes(element) || elementOf(t, element) !== undefined);
    if (found.length === 0) { problem(`_elements '${name}': no exported resource type has an element '${element}'`); continue; }
    if (type === undefined) for (const t of exported) keep[t] ??= new Set();
    for (const t of found) (keep[t] ??= new Set()).add(ALWAYS.includes(element) ? element : elementOf(t, element)!);
  }
  const elements: Record<string, string[]> = {};
  for (const [t, set] of Object.entries(keep)) {
    if (!exported.includes(t)) continue;
    elements[t] = [...new Set([...ALWAYS, ...(ELEMENTS[t]?.required ?? []), ...set])];
  }
  return { elements, issues };
}

function keeps(kept: string[], key: string): boolean {
  const name = key.startsWith('_') ? key.slice(1) : key;
  return kept.some((e) => (e.endsWith('[x]') ? name.startsWith(e.slice(0, -3)) && /^[A-Z]/.test(name.slice(e.length - 3)) : e === name));
}

/** The resource JSON text with only `kept` root elements (and their `_element` extensions), tagged SUBSETTED; numbers as written (exact-json.ts). */
export function subsetResource(content: string, kept: string[]): string {
  const resource = parseExact(content) as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  carryLiterals(resource, out);
  for (const [k, v] of Object.entries(resource)) if (keeps(kept, k)) out[k] = v;
  const meta = { ...((out.meta as Record<string, unknown> | undefined) ?? {}) };
  const tags = Array.isArray(meta.tag) ? [...(meta.tag as unknown[])] : [];
  tags.push(SUBSETTED);
  meta.tag = tags;
  out.meta = meta;
  if (!('resourceType' in out)) return stringifyExact({ resourceType: resource.resourceType, ...out });
  return stringifyExact(out);
}
