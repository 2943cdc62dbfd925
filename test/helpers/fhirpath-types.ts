/**
 * The R4 model the FHIRPath engine's tests and benchmark use, read from the official R4
 * StructureDefinitions (r4-definitions.ts): a `FhirPathTypes` (the production one reads the validator's
 * table and answers the same way), the invariants R4 declares, and a walk that finds which invariants apply to which
 * values of a resource.
 */
import type { FhirPathTypes } from '../../src/fhir/validation/fhirpath-engine.ts';
import { r4StructureDefinitions, TYPE_PROFILES } from './r4-definitions.ts';
import { isBackbone, typeCode } from './validation-table.ts';

export interface R4Invariant {
  key: string;
  severity: string;
  expression: string;
}

/** An invariant R4 declares on an element (its own, not one a snapshot repeats from a base). */
export interface DeclaredInvariant extends R4Invariant {
  path: string;
}

/** One evaluation: an invariant on a value of a resource. */
export interface Application {
  invariant: R4Invariant;
  focus: unknown;
  /** The value's type: a type name, or a backbone element's path. */
  focusType: string;
  resource: Record<string, unknown>;
  rootResource: Record<string, unknown>;
}

export interface R4Model {
  types: FhirPathTypes;
  declared: DeclaredInvariant[];
  /** The invariants that apply to the values of `resource` (and of the resources inside it). */
  applications(resource: Record<string, unknown>): Application[];
  /** Every object in `resource` (itself included) with its type, parents before children. */
  objects(resource: Record<string, unknown>): { value: Record<string, unknown>; type: string }[];
}

let loaded: Promise<R4Model> | undefined;

/** The R4 model (read once per process). */
export function loadR4Model(): Promise<R4Model> {
  return (loaded ??= load());
}

async function load(): Promise<R4Model> {
  const sds = await r4StructureDefinitions();
  /** owner -> JSON key -> [type, element path] */
  const elements = new Map<string, Map<string, [type: string, path: string]>>();
  /** element path or type name -> the invariants its snapshot lists */
  const constraints = new Map<string, R4Invariant[]>();
  const declared: DeclaredInvariant[] = [];
  for (const sd of sds) {
    const profile = sd.derivation === 'constraint';
    if (profile && !TYPE_PROFILES.has(sd.id)) continue;
    const root = sd.snapshot.element[0]!.path;
    const rename = (path: string) => (profile ? sd.id + path.slice(root.length) : path);
    for (const el of sd.snapshot.element) {
      const path = rename(el.path).replace('[x]', '');
      const own = (el.constraint ?? []).filter((c) => c.expression !== undefined);
      if (own.length) constraints.set(path, own.map((c) => ({ key: c.key, severity: c.severity, expression: c.expression! })));
      if (!profile) {
        for (const c of own) if (c.source === undefined || c.source === sd.url) declared.push({ key: c.key, severity: c.severity, expression: c.expression!, path });
      }
      const dot = path.lastIndexOf('.');
      if (dot < 0) continue;
      const owner = path.slice(0, dot);
      const name = path.slice(dot + 1);
      let byKey = elements.get(owner);
      if (byKey === undefined) elements.set(owner, (byKey = new Map()));
      if (el.contentReference) byKey.set(name, [el.contentReference.slice(1), path]);
      else if (isBackbone(el)) byKey.set(name, [path, path]);
      else if (el.path.endsWith('[x]')) {
        for (const t of el.type ?? []) byKey.set(name + t.code[0]!.toUpperCase() + t.code.slice(1), [typeCode(t), path]);
      } else if (el.type?.length) {
        // R4 gives Resource.id the FHIRPath type System.String; its FHIR type is id.
        byKey.set(name, [name === 'id' && owner === sd.type && sd.kind === 'resource' ? 'id' : typeCode(el.type[0]!), path]);
      }
    }
  }
  const types: FhirPathTypes = { elementType: (owner, name) => elements.get(owner)?.get(name)?.[0] };

  function applications(resource: Record<string, unknown>): Application[] {
    const out: Application[] = [];
    const visit = (focus: unknown, focusType: string, paths: string[], res: Record<string, unknown>, root: Record<string, unknown>) => {
      const seen = new Set<string>();
      for (const path of paths) {
        for (const invariant of constraints.get(path) ?? []) {
          if (seen.has(invariant.key)) continue;
          seen.add(invariant.key);
          out.push({ invariant, focus, focusType, resource: res, rootResource: root });
        }
      }
    };
    const walkResource = (res: Record<string, unknown>, root: Record<string, unknown>) => {
      const type = res.resourceType as string;
      visit(res, type, [type], res, root);
      walkObject(res, type, res, root);
    };
    const walkObject = (obj: Record<string, unknown>, owner: string, res: Record<string, unknown>, root: Record<string, unknown>) => {
      for (const [key, value] of Object.entries(obj)) {
        const known = elements.get(owner)?.get(key);
        if (known === undefined || value === null) continue;
        const [type, path] = known;
        for (const v of Array.isArray(value) ? value : [value]) {
          if (v === null) continue;
          if (type === 'Resource') {
            walkResource(v as Record<string, unknown>, key === 'contained' ? root : (v as Record<string, unknown>));
            continue;
          }
          visit(v, type, [path, type], res, root);
          if (typeof v === 'object') walkObject(v as Record<string, unknown>, type, res, root);
        }
      }
    };
    walkResource(resource, resource);
    return out;
  }

  function objects(resource: Record<string, unknown>): { value: Record<string, unknown>; type: string }[] {
    const out: { value: Record<string, unknown>; type: string }[] = [];
    const walk = (obj: Record<string, unknown>, type: string) => {
      out.push({ value: obj, type });
      for (const [key, value] of Object.entries(obj)) {
        const known = type === 'Resource' ? undefined : elements.get(type)?.get(key);
        if (known === undefined) continue;
        for (const v of Array.isArray(value) ? value : [value]) {
          if (v === null || typeof v !== 'object') continue;
          const t = known[0] === 'Resource' ? ((v as Record<string, unknown>).resourceType as string) : known[0];
          walk(v as Record<string, unknown>, t);
        }
      }
    };
    walk(resource, resource.resourceType as string);
    return out;
  }

  return { types, declared, applications, objects };
}
