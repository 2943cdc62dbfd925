/**
 * The validation of a large resource in parts, with turns of the event loop between them: a CodeSystem of
 * 100,000 concepts, a Questionnaire of thousands of items, a document Bundle of thousands of entries (one
 * synchronous walk of a 16 MB CodeSystem held the loop about 0.2-1 s). The same issues in the same order as
 * one validateResource (test/unit/validation-parts.test.ts).
 */
import { typeModel } from './model.ts';
import { withPrimed, type Primed } from './large-strings.ts';
import { capped, validateResource as validate, type ValidateOptions, type ValidationIssue } from './validate.ts';

type Json = Record<string, unknown>;

/** Items of the resource's largest array validated in one part (about 0.5-2 ms of strict validation of a concept). */
export const PART_ITEMS = 1000;

/**
 * The array member of `resource` to validate in parts, when it has one of more than `partItems` items that the
 * parts can stand for exactly; undefined otherwise (the resource is validated at once). Such a member holds
 * elements (objects: not primitives, whose `_name` array pairs with it, nor resources), repeats without bound
 * and needs at most one value, so that one item in its place leaves the rest of the walk as it was; and the
 * resource outside it holds no element ids, which the whole walk meets before or after the member's.
 */
export function partedMember(resource: Json, partItems = PART_ITEMS): string | undefined {
  let member: string | undefined;
  let longest = partItems;
  for (const key in resource) {
    const value = resource[key];
    if (!Array.isArray(value) || value.length <= longest) continue;
    const slot = typeof resource.resourceType === 'string' ? typeModel(resource.resourceType)?.slots.get(key) : undefined;
    if (slot === undefined || slot.primitive || slot.type === 'Resource' || slot.element.max !== Infinity || slot.element.min > 1) continue;
    member = key;
    longest = value.length;
  }
  if (member === undefined) return undefined;
  for (const key in resource) {
    // The resource's id is no element id; a contained resource is a scope of element ids of its own.
    if (key === member || key === 'id' || key === 'contained') continue;
    if (holdsElementIds(resource[key])) return undefined;
  }
  return member;
}

/**
 * validateResource of a resource that has a partedMember, every PART_ITEMS items (`run.partItems`) of that member validated apart
 * with turns of the event loop between (`pace`), and then the resource's own invariants and rules, each a part
 * too: every issue, capped as one validation caps them (`options.uncapped` aside). Each part of the member is
 * walked as the resource holding only those items, their paths counted from the part's first and `%resource`
 * the whole (ValidateOptions.part); the element ids met are shared from part to part. The rest of the resource
 * is walked once with one item standing in the member, which marks where the member's issues go among its own.
 */
export async function validateInParts(resource: Json, member: string, level: 'strict' | 'structural', run: PartsRun): Promise<ValidationIssue[]> {
  const { at, options = {}, primed = [], pace, partItems = PART_ITEMS } = run;
  const check = (r: Json, l: typeof level, where: string | undefined, o: ValidateOptions) => withPrimed(primed, () => validate(r, l, where, o));
  const items = resource[member] as unknown[];
  const path = at ?? String(resource.resourceType);
  const prefix = `${path}.${member}[`;
  const within = (i: ValidationIssue) => i.expression.startsWith(prefix);
  const common: ValidateOptions = { ...options, uncapped: true };
  const frame = check({ ...resource, [member]: [SAMPLE] }, level, at, { ...common, checks: 'walk', part: { member, offset: 0, of: resource } });
  const block = frame.findIndex(within);
  if (block < 0) return check(resource, level, at, options);
  const fromItems: ValidationIssue[] = [];
  const elementIds = new Map<string, string>();
  for (let from = 0; from < items.length; from += partItems) {
    await pace();
    const part = { resourceType: resource.resourceType, [member]: items.slice(from, from + partItems) };
    for (const issue of check(part, level, at, { ...common, checks: 'walk', elementIds, part: { member, offset: from, of: resource } })) {
      if (within(issue)) fromItems.push(issue);
    }
  }
  const walked = [...frame.slice(0, block).filter((i) => !within(i)), ...fromItems, ...frame.slice(block).filter((i) => !within(i))];
  const own: ValidationIssue[] = [];
  for (const checks of ['invariants', 'rules'] as const) {
    await pace();
    own.push(...check(resource, level, at, { ...common, checks }));
  }
  const all = [...walked, ...own];
  return options.uncapped ? all : capped(all);
}

/** How validateInParts runs: where the resource is (its path, as validateResource's `at`), its options, its large strings read (withPrimed), and its turns. */
export interface PartsRun {
  at?: string;
  options?: ValidateOptions;
  primed?: readonly Primed[];
  pace: () => Promise<void> | undefined;
  /** Items of a part (default PART_ITEMS). */
  partItems?: number;
}

/** An item with an element no type has: its issue marks where the member's items' issues go. */
const SAMPLE = { '\u0000': 0 };

/** Whether `value` has an element id (`id`, a string, in an object) anywhere. */
function holdsElementIds(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some(holdsElementIds);
  for (const key in value) {
    const v = (value as Json)[key];
    if ((key === 'id' && typeof v === 'string') || holdsElementIds(v)) return true;
  }
  return false;
}
