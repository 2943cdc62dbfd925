/**
 * Published invariant expressions that give nothing where the element they test is absent, or of another
 * type, though their text asks nothing of it (and one of R4's that names elements where it is not evaluated). A profile's invariant holds only when its expression is
 * `true` (an empty result fails, as HL7's validator takes it: `evaluateToBoolean`), so such an expression
 * would refuse data its text allows. HL7's validator evaluates them rewritten (its
 * `FHIRPathExpressionFixer`, matched on the expression's text whatever its key); these are the rewrites of
 * the ones R4 profiles carry, written again here. R4's base invariants carry the same rewrites in the
 * validation table (test/helpers/validation-table.ts); a profile's own invariant that repeats a base key is
 * not evaluated again (compile.ts), so these matter to the invariants a profile adds.
 */

/** The published expression and what it is evaluated as. */
const FIXES = new Map<string, string>([
  // vs-1 of R4's vitalsigns, and US Core's us-core-1 and vital signs profiles that copy it, on `effective[x]`:
  // "if it is a dateTime, precise to the day"; as published a Period gives nothing. US Core 9.0.0
  // republishes vs-1 in this form (HL7's validator and Firely's correct it the same way).
  ["($this as dateTime).toString().length() >= 8", '$this is dateTime implies $this.toString().length() >= 8'],
  // inv-1 of R4's allergyintolerance-substanceExposureRisk extension, on the extension itself: "If the
  // substanceExposureRisk extension element is present, the AllergyIntolerance.code element SHALL be omitted".
  // As published it names AllergyIntolerance's elements from the extension, where they give nothing, so it
  // failed every use of the extension; evaluated as its text says, on the resource holding it.
  ['substanceExposureRisk.exists() and code.empty()', '%resource.code.empty()'],
  // The older obs-6/vs-2 form, a value[x] taken as a boolean.
  ['(component.empty() and hasMember.empty()) implies (dataAbsentReason or value)', '(component.empty() and hasMember.empty()) implies (dataAbsentReason.exists() or value.exists())'],
  // ras-2: a prediction without a probability.
  ['probability is decimal implies (probability as decimal) <= 100', '(probability.exists() and (probability is decimal)) implies ((probability as decimal) <= 100)'],
  // ref-1: a Reference by identifier or display alone; `#` names the container.
  [
    "reference.startsWith('#').not() or (reference.substring(1).trace('url') in %rootResource.contained.id.trace('ids'))",
    "reference.exists() implies (reference = '#' or reference.startsWith('#').not() or (reference.substring(1).trace('url') in %rootResource.contained.id.trace('ids')))",
  ],
  // bdl-8: an entry without a fullUrl.
  ["fullUrl.contains('/_history/').not()", "fullUrl.exists() implies fullUrl.contains('/_history/').not()"],
  // The canonical resources' name pattern: a resource without a name; anchored, as HL7 anchors it.
  ["name.matches('[A-Z]([A-Za-z0-9_]){0,254}')", "name.exists() implies name.matches('^[A-Z]([A-Za-z0-9_]){0,254}$')"],
  // eld-14 and the like on ElementDefinitions: isModifier absent.
  ['isModifier implies isModifierReason.exists()', '(isModifier.exists() and isModifier) implies isModifierReason.exists()'],
]);

/** The expression a profile's invariant is evaluated as: its published text, or HL7's rewrite of it. */
export function fixedExpression(expression: string): string {
  return FIXES.get(expression.trim()) ?? expression;
}
