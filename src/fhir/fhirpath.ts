/**
 * The small subset of FHIRPath that R4 search parameter expressions for Cinder's indexed parameters use:
 * `Type.a.b`, `Type.a.where(resolve() is Patient)`, `(Type.a.ofType(CodeableConcept))` and `|` unions.
 * Compiled once per expression into plain path walkers.
 */
export interface CompiledPath {
  /** Path below the resource root. */
  segments: string[];
  /** `ofType(X)` on the last segment: choice element `<last><X>`. */
  ofType?: string;
  /** `where(resolve() is X)`: only references to resource type X. */
  targetType?: string;
}

const PART = /^\(?([A-Za-z]+)((?:\.[A-Za-z]+)*?)(?:\.ofType\(([A-Za-z]+)\))?(?:\.where\(resolve\(\) is ([A-Za-z]+)\))?\)?$/;

/** Compiles the parts of `expression` that apply to `resourceType`; unsupported parts throw. */
export function compileExpression(expression: string, resourceType: string): CompiledPath[] {
  const paths: CompiledPath[] = [];
  for (const raw of expression.split('|')) {
    const part = raw.trim();
    const m = PART.exec(part);
    if (!m) throw new Error(`unsupported FHIRPath expression: ${part}`);
    if (m[1] !== resourceType) continue;
    const segments = m[2]!.split('.').filter(Boolean);
    const path: CompiledPath = { segments };
    if (m[3]) path.ofType = m[3];
    if (m[4]) path.targetType = m[4];
    paths.push(path);
  }
  return paths;
}

/** Every value reached by `path` from `resource`, arrays flattened. */
export function evaluatePath(resource: Record<string, unknown>, path: CompiledPath): unknown[] {
  let current: unknown[] = [resource];
  const last = path.segments.length - 1;
  path.segments.forEach((seg, i) => {
    const next: unknown[] = [];
    const key = i === last && path.ofType ? seg + path.ofType[0]!.toUpperCase() + path.ofType.slice(1) : seg;
    for (const node of current) {
      if (node === null || typeof node !== 'object') continue;
      const value = (node as Record<string, unknown>)[key];
      if (value === undefined || value === null) continue;
      if (Array.isArray(value)) next.push(...value);
      else next.push(value);
    }
    current = next;
  });
  return current;
}
