/**
 * FHIR JSON's lists of primitives beside their companions (R4 json.html: `_given` holds the ids and extensions
 * of `given`'s items by position, `null` where an item has none; `_given` may be written without `given`),
 * kept aligned through the operations of one patch, and what an operation leaves empty removed (`prune`).
 */
import { literalOf, spliceExact } from '../exact-json.ts';
import type { Json } from './patch-path.ts';

/**
 * What one application of a patch carries from operation to operation: the lists of `null`s `valuesOf` made
 * beside a companion written alone, which `prune` drops again while they hold no value, so that JSON written
 * so stays so. A list the resource had is kept (`"given": [null]` beside `"_given"`, as FHIR JSON writes a
 * list of primitives and HL7's examples do).
 */
export interface ListState {
  made: Set<unknown[]>;
}

export function createListState(): ListState {
  return { made: new Set() };
}

function isObject(v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * The values of primitive list `key` of `holder`, made a list of `null`s beside its companion when JSON gives
 * only the companion (`_given` without `given`), so that both are changed together.
 */
export function valuesOf(state: ListState, holder: Json, key: string): unknown[] | undefined {
  const ext = holder['_' + key];
  if (holder[key] === undefined && Array.isArray(ext)) {
    const list: unknown[] = [];
    for (let i = 0; i < ext.length; i++) list.push(null);
    state.made.add(list);
    holder[key] = list;
  }
  const values = holder[key];
  return Array.isArray(values) ? values : undefined;
}

/**
 * Keeps a primitive list's `_name` companion (its extensions) aligned with a change of the list;
 * `literal`: the text of an inserted number, when it is not String(value) (exact-json.ts).
 */
export function spliceBoth(holder: Json, key: string, start: number, remove: number, insert: unknown[] = [], literal?: string): void {
  spliceExact(holder[key] as unknown[], start, remove, insert, [literal]);
  const ext = holder['_' + key];
  if (Array.isArray(ext)) {
    ext.splice(start, remove, ...insert.map(() => null));
    // A companion left holding no id or extension says nothing: FHIR JSON has none.
    if (ext.every((e) => e === null)) delete holder['_' + key];
  }
}

/** Moves item `source` of list `key` of `holder` to `destination`, its companion's item with it (numbers keep their literals). */
export function moveBoth(holder: Json, key: string, source: number, destination: number): void {
  const items = holder[key] as unknown[];
  const literal = literalOf(items, source);
  const [moved] = spliceExact(items, source, 1);
  spliceExact(items, destination, 0, [moved], [literal]);
  const ext = holder['_' + key];
  if (Array.isArray(ext)) ext.splice(destination, 0, ...ext.splice(source, 1));
}

/**
 * Removes the empty objects and lists a deletion leaves (FHIR JSON has none): `contact[0].name` once its only
 * `text` is gone; true when `node` is left empty. A primitive's companion (`_name`) is pruned beside its
 * values: an item of a list's companion left empty is `null`, an item left with neither value nor companion is
 * gone from both lists (a primitive whose last extension was deleted), and a companion of `null`s alone is
 * dropped. `state`: the application's (valuesOf); none for JSON no patch changed.
 */
export function prune(node: unknown, state: ListState = createListState()): boolean {
  if (Array.isArray(node)) {
    for (let i = node.length - 1; i >= 0; i--) if (isObject(node[i]) && prune(node[i], state)) node.splice(i, 1);
    return node.length === 0;
  }
  if (!isObject(node)) return false;
  for (const key of Object.keys(node)) {
    const v = node[key];
    if (key.startsWith('_') || !(Array.isArray(v) || isObject(v))) continue;
    if (prune(v, state)) delete node[key];
  }
  for (const key of Object.keys(node)) if (key.startsWith('_')) pruneCompanion(state, node, key.slice(1));
  return Object.keys(node).length === 0;
}

function pruneCompanion(state: ListState, node: Json, key: string): void {
  const ext = node['_' + key];
  if (!Array.isArray(ext)) {
    if (isObject(ext) && prune(ext, state)) delete node['_' + key];
    return;
  }
  ext.forEach((e, i) => {
    if (isObject(e) && prune(e, state)) ext[i] = null;
  });
  const values = node[key];
  if (Array.isArray(values)) {
    for (let i = Math.max(values.length, ext.length) - 1; i >= 0; i--) {
      if ((values[i] ?? null) === null && (ext[i] ?? null) === null) spliceBoth(node, key, i, 1);
    }
    if (values.length === 0 || (state.made.has(values) && values.every((v) => v === null))) delete node[key];
  }
  if (node[key] === undefined) {
    // Only the companion is written (`_given` without `given`): its empty items stand for nothing.
    for (let i = ext.length - 1; i >= 0; i--) if (ext[i] === null) ext.splice(i, 1);
  }
  if (node['_' + key] === ext && ext.every((e) => e === null)) delete node['_' + key];
}
