/**
 * An extension checked against its definition where it is used (R4 extensibility.html, "Extension
 * context"; defining-extensions.html): in `extension` or `modifierExtension` as its definition's
 * `isModifier` says, on an element its `context` names (types `element` and `extension`, and
 * `fhirpath`: the expression, evaluated on the resource the extension is in, selects the element
 * holding it), where each of its `contextInvariant`s holds on that element, and its content against
 * the definition's compiled rules (run.ts): its url, value[x] types, nested extensions and their
 * cardinality, bindings.
 */
import { FhirPathTooCostly, type InvariantContext } from '../fhirpath-engine.ts';
import type { ValidationIssue } from '../validate.ts';
import type { CompiledProfile, ContextExpression } from './compiled.ts';
import type { ExtensionSite } from './extension-sites.ts';
import { checkProfile, profileCost, type ProfileCost, type ProfileLookup, type ProfileResult } from './run.ts';

/**
 * The problems of the extension at `site` against `definition` (an extension definition: `definition.extension`
 * is set); its context and context invariants when `context`. `memo` is shared by the evaluations of one
 * resource's extensions (InvariantContext.memo).
 */
export function checkExtensionSite(site: ExtensionSite, definition: CompiledProfile, lookup: ProfileLookup, context: boolean, cost: ProfileCost = profileCost(), memo?: Map<object, unknown>): ProfileResult {
  const issues: ValidationIssue[] = [];
  const use = definition.extension!;
  const label = definition.label;
  if (site.modifier !== use.modifier) {
    const text = use.modifier
      ? `The extension ${label} is a modifier extension (its definition says isModifier), so it must be used as a modifierExtension, not as an extension`
      : `The extension ${label} is no modifier extension (its definition does not say isModifier), so it must be used as an extension, not as a modifierExtension`;
    issues.push({ severity: 'error', code: 'structure', expression: site.path, text });
  }
  if (context) issues.push(...contextIssues(site, definition, cost, memo));
  // Its definition's invariants name by `%resource` the resource the extension is in, as its context invariants do.
  const content = checkProfile(site.extension, definition, lookup, site.path, cost, undefined, { resource: site.resource, root: site.root });
  return { issues: [...issues, ...content.issues], bindings: content.bindings };
}

/** What a context's evaluation found: whether it holds, or that it is past the budget (the issue that says so). */
type Verdict = boolean | ValidationIssue;

function contextIssues(site: ExtensionSite, definition: CompiledProfile, cost: ProfileCost, memo: Map<object, unknown> | undefined): ValidationIssue[] {
  const use = definition.extension!;
  const label = definition.label;
  const ctx: InvariantContext = { resource: site.resource, rootResource: site.root, memo, budget: cost.budget, clock: cost.clock };
  if (use.contexts.length > 0) {
    let fits = use.contexts.some((c) => (c.type === 'element' ? site.names.has(c.expression) : c.type === 'extension' && site.inExtension !== undefined && site.inExtension === c.expression.split('#')[0]));
    const unevaluated: string[] = [];
    for (const c of use.contexts) {
      if (fits) break;
      if (c.type !== 'fhirpath') continue;
      if (c.fn === undefined || cost.refused !== undefined) {
        unevaluated.push(`${c.expression}: ${c.unsupported ?? 'the profile checks of this request were stopped as too costly'}`);
        continue;
      }
      const fn = c.fn;
      const v = evaluate(site, label, cost, c, () => fn.selects(site.resource, String(site.resource.resourceType), site.holder.node, ctx));
      if (typeof v !== 'boolean') return [v];
      fits = v;
    }
    if (!fits) {
      const allowed = use.contexts.map((c) => `${c.type} ${c.expression}`).join(', ');
      if (unevaluated.length > 0) {
        return [{ severity: 'warning', code: 'not-supported', expression: site.path, text: `The context of the extension ${label} (${allowed}) was not evaluated at this point (${site.host}): ${unevaluated.join('; ')}` }];
      }
      return [{ severity: 'error', code: 'structure', expression: site.path, text: `The extension ${label} is not allowed to be used at this point (allowed = ${allowed}; this element is ${site.host})` }];
    }
  }
  // Each context invariant must hold on the element holding the extension; the first that does not is reported, as HL7's validator does.
  const out: ValidationIssue[] = [];
  for (const inv of use.invariants) {
    if (inv.fn === undefined || cost.refused !== undefined) {
      out.push({ severity: 'warning', code: 'not-supported', expression: site.path, text: `The context invariant '${inv.expression}' of the extension ${label} was not evaluated: ${inv.unsupported ?? 'the profile checks of this request were stopped as too costly'}` });
      continue;
    }
    const fn = inv.fn;
    const v = evaluate(site, label, cost, inv, () => fn.holds(site.holder.value, site.holder.type, site.holder.node, site.extension, ctx));
    if (typeof v !== 'boolean') return [...out, v];
    if (!v) {
      out.push({ severity: 'error', code: 'structure', expression: site.path, text: `The extension ${label} must not be used at this point (${site.host}): its context invariant '${inv.expression}' does not hold` });
      break;
    }
  }
  return out;
}

/** An evaluation, or the `too-costly` error that stops the request's further profile checks (run.ts). */
function evaluate(site: ExtensionSite, label: string, cost: ProfileCost, c: ContextExpression, run: () => boolean): Verdict {
  try {
    return run();
  } catch (err) {
    if (!(err instanceof FhirPathTooCostly)) throw err;
    const text = `The context '${c.expression}' of the extension ${label} cannot be evaluated at ${site.host}: ${err.message}`;
    cost.refused = text;
    return { severity: 'error', code: 'too-costly', expression: site.path, text };
  }
}
