import { r4StructureDefinitions, type ElementDefinition } from './r4-definitions.ts';

/**
 * What `_summary=true` keeps of an element (a resource, or a backbone element of one): its members
 * marked isSummary (choice elements by their name before `[x]`); of those, the backbone elements with
 * the node of their own members (or, for one defined by a contentReference to an element it is part of,
 * that element's path from the type: `part` of `Parameters.parameter` is `parameter`), and the
 * Attachments as their JSON members (`content`, `valueAttachment`), kept without `data` (R4
 * ElementDefinition.isSummary: "Other than Attachment.data, all data type properties are included").
 */
export interface SummaryNode {
  summary: string[];
  within?: Record<string, SummaryNode | string>;
  attachments?: string[];
}

/** A resource type's node, with its top-level mandatory elements (min >= 1), which `_summary=text` and `_elements` keep. */
export interface SummaryType extends SummaryNode {
  mandatory: string[];
}

/** The node of the element at `path` of `type`, from `children` (element definitions by their parent's path); `open`: the paths being built (a reference to one is a cycle). */
function nodeOf(type: string, path: string, children: Map<string, ElementDefinition[]>, open: string[]): SummaryNode {
  const node: SummaryNode = { summary: [] };
  const within: Record<string, SummaryNode | string> = {};
  const attachments: string[] = [];
  for (const e of children.get(path) ?? []) {
    if (!e.isSummary) continue;
    const name = e.path.slice(path.length + 1).replace('[x]', '');
    node.summary.push(name);
    const target = e.contentReference ? e.contentReference.slice(1) : children.has(e.path) ? e.path : undefined;
    if (target !== undefined) {
      within[name] = open.includes(target) ? target.slice(type.length + 1) : nodeOf(type, target, children, [...open, target]);
    }
    const codes = (e.type ?? []).map((t) => t.code);
    if (codes.includes('Attachment')) attachments.push(e.path.endsWith('[x]') ? `${name}Attachment` : name);
  }
  if (Object.keys(within).length) node.within = within;
  if (attachments.length) node.attachments = attachments;
  return node;
}

/**
 * Derives src/fhir/summary-elements.json from the official R4 StructureDefinitions: per resource type
 * (Resource and DomainResource included), the summary node of the resource (SummaryNode: its summary
 * members, its backbone elements' own, its Attachments) and its top-level mandatory elements.
 */
export async function summaryElementsFromDefinitions(): Promise<Record<string, SummaryType>> {
  const out: Record<string, SummaryType> = {};
  for (const sd of await r4StructureDefinitions()) {
    if (sd.kind !== 'resource' || sd.derivation === 'constraint') continue;
    const children = new Map<string, ElementDefinition[]>();
    for (const e of sd.snapshot.element) {
      const dot = e.path.lastIndexOf('.');
      if (dot < 0) continue;
      const parent = e.path.slice(0, dot);
      (children.get(parent) ?? children.set(parent, []).get(parent)!).push(e);
    }
    const mandatory = (children.get(sd.type) ?? []).filter((e) => (e.min ?? 0) >= 1).map((e) => e.path.slice(sd.type.length + 1).replace('[x]', ''));
    out[sd.type] = { ...nodeOf(sd.type, sd.type, children, [sd.type]), mandatory };
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

/**
 * Derives src/fhir/choice-elements.json: the names of every choice element of R4's data types and
 * resources (`value` of `value[x]`), which the FHIRPath evaluator looks up under their typed names.
 */
export async function choiceElementsFromDefinitions(): Promise<string[]> {
  const choices = new Set<string>();
  for (const sd of await r4StructureDefinitions()) {
    for (const e of sd.snapshot.element) if (e.path.endsWith('[x]')) choices.add(e.path.split('.').pop()!.replace('[x]', ''));
  }
  return [...choices].sort();
}
