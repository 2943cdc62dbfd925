/**
 * An extension checked against its definition where it is used (R4 extensibility.html, "Extension
 * context"; defining-extensions.html): in `extension` or `modifierExtension` as its definition's
 * `isModifier` says, on an element its `context` names (types `element` and `extension`; a `fhirpath`
 * context is not evaluated), and its content against the definition's compiled rules (run.ts): its url,
 * value[x] types, nested extensions and their cardinality, bindings.
 */
import type { ValidationIssue } from '../validate.ts';
import type { CompiledProfile } from './compiled.ts';
import type { ExtensionSite } from './extension-sites.ts';
import { checkProfile, type ProfileCost, type ProfileLookup, type ProfileResult } from './run.ts';

/** The problems of the extension at `site` against `definition` (an extension definition: `definition.extension` is set); its context when `context`. */
export function checkExtensionSite(site: ExtensionSite, definition: CompiledProfile, lookup: ProfileLookup, context: boolean, cost?: ProfileCost): ProfileResult {
  const issues: ValidationIssue[] = [];
  const use = definition.extension!;
  const label = definition.label;
  if (site.modifier !== use.modifier) {
    const text = use.modifier
      ? `The extension ${label} is a modifier extension (its definition says isModifier), so it must be used as a modifierExtension, not as an extension`
      : `The extension ${label} is no modifier extension (its definition does not say isModifier), so it must be used as an extension, not as a modifierExtension`;
    issues.push({ severity: 'error', code: 'structure', expression: site.path, text });
  }
  const decidable = use.contexts.filter((c) => c.type !== 'fhirpath');
  const fits = decidable.some((c) => (c.type === 'element' ? site.names.has(c.expression) : site.inExtension !== undefined && site.inExtension === c.expression.split('#')[0]));
  if (context && !fits && use.contexts.length > 0) {
    const allowed = use.contexts.map((c) => `${c.type} ${c.expression}`).join(', ');
    if (decidable.length < use.contexts.length) {
      issues.push({ severity: 'warning', code: 'not-supported', expression: site.path, text: `The context of the extension ${label} (${allowed}) was not evaluated here (${site.host}): Cinder does not evaluate contexts of type fhirpath` });
    } else {
      issues.push({ severity: 'error', code: 'structure', expression: site.path, text: `The extension ${label} is not allowed on ${site.host}: its definition allows it only on ${allowed}` });
    }
  }
  const content = checkProfile(site.extension, definition, lookup, site.path, cost);
  return { issues: [...issues, ...content.issues], bindings: content.bindings };
}
