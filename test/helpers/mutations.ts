/**
 * Seeded mutations of FHIR resources (the R4 examples) for differential tests of `$diff`: changed
 * primitives, list items added, removed, duplicated, inserted and moved, elements removed, extensions added to
 * elements and to primitives, primitives left with extensions and no value (single ones, and items of lists
 * of primitives: JSON's `null` beside an object of `_given`), such items inserted, and choice elements changed
 * to another type.
 */
import { typeModel } from '../../src/fhir/validation/model.ts';
import { prune } from '../../src/fhir/patch/primitive-lists.ts';
export { prng } from './prng.ts';

type Json = Record<string, unknown>;

interface Spot {
  holder: Json;
  key: string;
  /** In a list. */
  index?: number;
}

function isObject(v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Every element value of `r` (not resourceType, id or the narrative's div), where it sits. */
function spots(r: Json, out: Spot[] = [], root = true): Spot[] {
  for (const [key, v] of Object.entries(r)) {
    if (key === 'resourceType' || key.startsWith('_') || (root && (key === 'id' || key === 'meta')) || key === 'div') continue;
    if (Array.isArray(v)) {
      v.forEach((item, index) => {
        out.push({ holder: r, key, index });
        if (isObject(item)) spots(item, out, typeof item.resourceType === 'string');
      });
    } else {
      out.push({ holder: r, key });
      if (isObject(v)) spots(v, out, typeof v.resourceType === 'string');
    }
  }
  return out;
}

function valueAt(s: Spot): unknown {
  const v = s.holder[s.key];
  return s.index === undefined ? v : (v as unknown[])[s.index];
}

function setAt(s: Spot, value: unknown): void {
  if (s.index === undefined) s.holder[s.key] = value;
  else (s.holder[s.key] as unknown[])[s.index] = value;
}

const EXT = 'http://example.org/fhir/StructureDefinition/diff-test';

export type MutationKind =
  | 'primitive' | 'remove-item' | 'duplicate-item' | 'insert-item' | 'move-item' | 'remove-element' | 'add-extension' | 'primitive-extension' | 'bare-primitive'
  | 'bare-item' | 'insert-bare-item' | 'choice';
export const MUTATIONS: readonly MutationKind[] = [
  'primitive', 'remove-item', 'duplicate-item', 'insert-item', 'move-item', 'remove-element', 'add-extension', 'primitive-extension', 'bare-primitive',
  'bare-item', 'insert-bare-item', 'choice',
];
/** The mutations that insert, delete or move one list item, each of which a diff writes as one operation. */
export const LIST_MUTATIONS: readonly MutationKind[] = ['remove-item', 'duplicate-item', 'insert-item', 'move-item', 'insert-bare-item'];

/**
 * Applies mutation `kind` at a random spot of `r` (changed in place, left without empty elements);
 * false when `r` has no spot for it.
 */
export function mutate(r: Json, kind: MutationKind, random: () => number): boolean {
  const done = mutateAt(r, kind, random);
  prune(r);
  return done;
}

function mutateAt(r: Json, kind: MutationKind, random: () => number): boolean {
  const all = spots(r);
  const pick = <T>(xs: T[]): T | undefined => xs[Math.floor(random() * xs.length)];
  switch (kind) {
    case 'primitive': {
      const s = pick(all.filter((x) => typeof valueAt(x) === 'string' || typeof valueAt(x) === 'boolean'));
      if (!s) return false;
      const v = valueAt(s);
      setAt(s, typeof v === 'boolean' ? !v : `${v as string} changed`);
      return true;
    }
    case 'remove-item': {
      const s = pick(all.filter((x) => x.index !== undefined));
      if (!s) return false;
      const list = s.holder[s.key] as unknown[];
      list.splice(s.index!, 1);
      const ext = s.holder['_' + s.key];
      if (Array.isArray(ext)) ext.splice(s.index!, 1);
      if (list.length === 0) {
        delete s.holder[s.key];
        delete s.holder['_' + s.key];
      }
      return true;
    }
    case 'duplicate-item': {
      const s = pick(all.filter((x) => x.index !== undefined && valueAt(x) !== null));
      if (!s) return false;
      const list = s.holder[s.key] as unknown[];
      const at = Math.floor(random() * (list.length + 1));
      list.splice(at, 0, structuredClone(valueAt(s)));
      const ext = s.holder['_' + s.key];
      if (Array.isArray(ext)) ext.splice(at, 0, null);
      return true;
    }
    case 'insert-item': {
      // A new item, a changed copy of one of the list, at a random place of it.
      const s = pick(all.filter((x) => x.index !== undefined && (typeof valueAt(x) === 'string' || isObject(valueAt(x)))));
      if (!s) return false;
      const v = structuredClone(valueAt(s));
      const item = isObject(v) ? { ...v, extension: [...(Array.isArray(v.extension) ? v.extension : []), { url: EXT, valueString: 'inserted' }] } : `${v as string} inserted`;
      const list = s.holder[s.key] as unknown[];
      const at = Math.floor(random() * (list.length + 1));
      list.splice(at, 0, item);
      const ext = s.holder['_' + s.key];
      if (Array.isArray(ext)) ext.splice(at, 0, null);
      return true;
    }
    case 'move-item': {
      // An item of a list of two or more taken to another place in it.
      const s = pick(all.filter((x) => x.index !== undefined && (x.holder[x.key] as unknown[]).length > 1));
      if (!s) return false;
      const list = s.holder[s.key] as unknown[];
      const to = (s.index! + 1 + Math.floor(random() * (list.length - 1))) % list.length;
      list.splice(to, 0, ...list.splice(s.index!, 1));
      const ext = s.holder['_' + s.key];
      if (Array.isArray(ext)) ext.splice(to, 0, ...ext.splice(s.index!, 1));
      return true;
    }
    case 'remove-element': {
      const s = pick(all.filter((x) => x.index === undefined));
      if (!s) return false;
      delete s.holder[s.key];
      delete s.holder['_' + s.key];
      return true;
    }
    case 'add-extension': {
      const s = pick([{ holder: r, key: '' }, ...all.filter((x) => isObject(valueAt(x)) && typeof (valueAt(x) as Json).resourceType !== 'string')]);
      const o = s!.key === '' ? r : (valueAt(s!) as Json);
      const list = (o.extension ??= []) as unknown[];
      list.splice(Math.floor(random() * (list.length + 1)), 0, { url: EXT, valueString: `added ${Math.floor(random() * 1000)}` });
      return true;
    }
    case 'primitive-extension': {
      const s = pick(all.filter((x) => typeof valueAt(x) === 'string' && x.key !== 'url'));
      if (!s) return false;
      const ext = { extension: [{ url: EXT, valueCode: 'x' }] };
      if (s.index === undefined) s.holder['_' + s.key] = ext;
      else {
        const list = (s.holder['_' + s.key] ??= (s.holder[s.key] as unknown[]).map(() => null)) as unknown[];
        list[s.index] = ext;
      }
      return true;
    }
    case 'bare-primitive': {
      // A single primitive loses its value and keeps (or is given) extensions alone: `_birthDate` without `birthDate`.
      const s = pick(all.filter((x) => x.index === undefined && (typeof valueAt(x) === 'string' || typeof valueAt(x) === 'boolean') && x.key !== 'url' && x.key !== 'id'));
      if (!s) return false;
      delete s.holder[s.key];
      s.holder['_' + s.key] ??= { extension: [{ url: EXT, valueCode: 'bare' }] };
      return true;
    }
    case 'bare-item': {
      // An item of a list of primitives loses its value and keeps (or is given) extensions alone: `null` in `given`, an object in `_given`.
      const s = pick(all.filter((x) => x.index !== undefined && (typeof valueAt(x) === 'string' || typeof valueAt(x) === 'boolean')));
      if (!s) return false;
      const list = s.holder[s.key] as unknown[];
      const ext = (s.holder['_' + s.key] ??= list.map(() => null)) as unknown[];
      list[s.index!] = null;
      ext[s.index!] ??= { extension: [{ url: EXT, valueCode: 'bare item' }] };
      return true;
    }
    case 'insert-bare-item': {
      // An item with extensions and no value inserted at a random place of a list of primitives.
      const s = pick(all.filter((x) => x.index !== undefined && (typeof valueAt(x) === 'string' || typeof valueAt(x) === 'boolean')));
      if (!s) return false;
      const list = s.holder[s.key] as unknown[];
      const ext = (s.holder['_' + s.key] ??= list.map(() => null)) as unknown[];
      const at = Math.floor(random() * (list.length + 1));
      list.splice(at, 0, null);
      ext.splice(at, 0, { extension: [{ url: EXT, valueCode: `inserted ${Math.floor(random() * 1000)}` }] });
      return true;
    }
    case 'choice': {
      // A choice element of the resource itself takes another of its types: a string, boolean or dateTime.
      const model = typeModel(String(r.resourceType));
      const options = (key: string) => {
        const element = model?.slots.get(key)?.element;
        if (!element?.choice) return [];
        return element.names.filter((n) => n !== key && /(String|Boolean|DateTime)$/.test(n));
      };
      const s = pick(all.filter((x) => x.holder === r && options(x.key).length > 0));
      if (!s) return false;
      const next = pick(options(s.key))!;
      delete r[s.key];
      delete r['_' + s.key];
      r[next] = next.endsWith('String') ? 'now a string' : next.endsWith('Boolean') ? true : '2020-01-02';
      return true;
    }
  }
}
