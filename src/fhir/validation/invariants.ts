/**
 * The R4 invariants of resources, data types and backbone elements (obs-6, per-1, que-1, ...), each
 * compiled once by the FHIRPath engine and run on the values the walk meets (the resource is parsed
 * whole before the walk, so `%resource` is complete).
 */
import { compileInvariant, EMPTY_RESULT_NOTE, FhirPathEvaluationError, UnsupportedFhirPath, type CompiledInvariant, type InvariantContext } from './fhirpath-engine.ts';
import { elementType, FHIRPATH_TYPES, type InvariantModel, type TypeModel } from './model.ts';

/** Where the walk collects problems. */
export interface IssueSink {
  add(code: 'invariant', expression: string, text: string, severity: 'error' | 'warning', invariant: string): void;
}

/** Each invariant compiled, or null when it is checked natively or the engine cannot evaluate it (ARCHITECTURE.md, Validation). */
const compiled = new Map<InvariantModel, CompiledInvariant | null>();
/** Invariants checked natively by the walk (Narrative's txt-1 and txt-2 on `div`). */
const NATIVE = new Set(['txt-1', 'txt-2']);
const TYPES = FHIRPATH_TYPES;

function compile(inv: InvariantModel): CompiledInvariant | null {
  let fn = compiled.get(inv);
  if (fn !== undefined) return fn;
  fn = null;
  if (!NATIVE.has(inv.key)) {
    try {
      fn = compileInvariant(inv.expression, TYPES, false, true);
    } catch (err) {
      // ctm-1 needs resolve(); the engine's own test keeps the list of such invariants.
      if (!(err instanceof UnsupportedFhirPath)) throw err;
    }
  }
  compiled.set(inv, fn);
  return fn;
}

/**
 * Runs the invariants of `model` on the value `focus` at `path` of `resource` (inside `root`); `memo` is
 * the walk's (InvariantContext.memo), shared by every call of one validation.
 */
export function checkInvariants(sink: IssueSink, model: TypeModel, focus: Record<string, unknown>, path: string, resource: unknown, root: unknown, memo?: Map<object, unknown>): void {
  const ctx = { resource, rootResource: root, memo };
  for (const inv of model.invariants) {
    const fn = compile(inv);
    if (fn === null) continue;
    if (inv.element === undefined) {
      evaluate(sink, inv, fn, focus, model.name, ctx, path);
      continue;
    }
    // An invariant on an element: once for each of its values, under its JSON name or, for a choice element, each typed
    // name (`probabilityRange`). The model tells them: ElementDefinition's `maxValueDate` and `maxLength` are no `max`.
    for (const key in focus) {
      if (key !== inv.element && model.slots.get(key)?.element.name !== inv.element) continue;
      const type = elementType(model.name, key);
      const v = focus[key];
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) evaluate(sink, inv, fn, v[i], type, ctx, `${path}.${inv.element}[${i}]`);
      } else evaluate(sink, inv, fn, v, type, ctx, `${path}.${inv.element}`);
    }
  }
}

/** What an invariant's text says before its key when its evaluation failed (evaluate). */
export const NOT_EVALUATED_NOTE = 'the invariant cannot be evaluated here';

/**
 * Runs `inv` on one value and reports it when it does not hold. An invariant whose evaluation fails (FHIRPath's
 * run-time error: `single()` on many, a value of a type it cannot take) does not hold either: reported at its
 * severity with the error before its key, as HL7's validator (InstanceValidator.checkInvariant) reports an
 * invariant that throws, never taken as holding (it was until the fifty-fifth session, so such a resource was accepted).
 */
function evaluate(sink: IssueSink, inv: InvariantModel, fn: CompiledInvariant, value: unknown, type: string | undefined, ctx: InvariantContext, path: string): void {
  let holds: boolean | undefined;
  try {
    holds = fn(value, type, ctx);
  } catch (err) {
    if (!(err instanceof FhirPathEvaluationError)) throw err;
    sink.add('invariant', path, `${inv.human} (${NOT_EVALUATED_NOTE}: ${err.message}) (${inv.key})`, inv.severity, inv.key);
    return;
  }
  if (holds !== true) report(sink, inv, path, holds);
}

/** `holds`: false, or undefined when the expression gave nothing (said so before the key, which ends the text). */
function report(sink: IssueSink, inv: InvariantModel, path: string, holds: false | undefined): void {
  sink.add('invariant', path, `${inv.human}${holds === undefined ? ` (${EMPTY_RESULT_NOTE})` : ''} (${inv.key})`, inv.severity, inv.key);
}
