import { z } from 'zod';
import { CanonicalFields, DesignationSchema, StatusExtensionsSchema } from './datatypes.ts';
import { parseWith } from './parse.ts';

/** ValueSet.compose.include.filter. `op` and `value` are checked by the compiler for precise errors. */
export const ConceptSetFilterSchema = z.object({
  property: z.string().min(1),
  op: z.string().optional(),
  value: z.string().optional(),
});
export type ConceptSetFilter = z.infer<typeof ConceptSetFilterSchema>;

/** ValueSet.compose.include.concept. */
export const ConceptReferenceSchema = z.object({
  code: z.string().min(1),
  display: z.string().optional(),
  designation: z.array(DesignationSchema).optional(),
  /** Only `valueset-deprecated` and `structuredefinition-standards-status` are read: the concept's presence in the value set is deprecated. */
  extension: StatusExtensionsSchema,
});
export type ConceptReference = z.infer<typeof ConceptReferenceSchema>;

/** ValueSet.compose.include / exclude. */
export const ConceptSetSchema = z.object({
  system: z.string().min(1).optional(),
  version: z.string().min(1).optional(),
  concept: z.array(ConceptReferenceSchema).optional(),
  filter: z.array(ConceptSetFilterSchema).optional(),
  valueSet: z.array(z.string().min(1)).optional(),
});
export type ConceptSet = z.infer<typeof ConceptSetSchema>;

/** ValueSet.expansion.contains, recursive. */
export const ExpansionContainsSchema = z.object({
  system: z.string().optional(),
  version: z.string().optional(),
  code: z.string().optional(),
  display: z.string().optional(),
  abstract: z.boolean().optional(),
  inactive: z.boolean().optional(),
  designation: z.array(DesignationSchema).optional(),
  get contains() {
    return z.array(ExpansionContainsSchema).optional();
  },
});
export type ExpansionContains = z.infer<typeof ExpansionContainsSchema>;

/** FHIR R4 ValueSet (the fields the terminology engine reads; others are dropped). */
export const ValueSetSchema = z.object({
  resourceType: z.literal('ValueSet'),
  ...CanonicalFields,
  /** Contained resources: a contained ValueSet may be imported as `#id`. */
  contained: z.array(z.record(z.string(), z.unknown())).optional(),
  compose: z
    .object({
      /** Read for `valueset-expansion-parameter` alone (expansionParameter). */
      extension: z.array(z.record(z.string(), z.unknown())).optional(),
      inactive: z.boolean().optional(),
      /** The date that chooses the versions of the code systems and value sets it does not pin (compileValueSet). */
      lockedDate: z.string().optional(),
      include: z.array(ConceptSetSchema).min(1),
      exclude: z.array(ConceptSetSchema).optional(),
    })
    .optional(),
  expansion: z
    .object({
      /**
       * The parameters the stored expansion was computed with (R4 ValueSet.expansion.parameter): each a `name` and
       * one `value[x]`, kept whole (loose) so that an expansion can repeat them as stored.
       */
      parameter: z.array(z.looseObject({ name: z.string() })).optional().catch(undefined),
      contains: z.array(ExpansionContainsSchema).optional(),
    })
    .optional(),
});
export type ValueSet = z.infer<typeof ValueSetSchema>;

/** A stored expansion's parameter: its name and its one `value[x]`. */
export type StoredExpansionParameter = NonNullable<NonNullable<ValueSet['expansion']>['parameter']>[number];

/** The extension's URL in R4 core, and in HL7's tooling IG (where R5-era content writes it). */
const EXPANSION_PARAMETER = new Set([
  'http://hl7.org/fhir/StructureDefinition/valueset-expansion-parameter',
  'http://hl7.org/fhir/tools/StructureDefinition/valueset-expansion-parameter',
]);

/**
 * The parameters a ValueSet sets for its own expansions, each value as a string: the `valueset-expansion-parameter`
 * extensions on `compose` (a `name` and a `value`; HL7's terminology tests give a value set `displayLanguage` this
 * way), in their order. A request's own parameter comes first (HL7's expander reads them before the request's).
 */
export function expansionParameters(vs: ValueSet): readonly { readonly name: string; readonly value: string }[] {
  const out: { name: string; value: string }[] = [];
  for (const ext of vs.compose?.extension ?? []) {
    if (typeof ext.url !== 'string' || !EXPANSION_PARAMETER.has(ext.url) || !Array.isArray(ext.extension)) continue;
    const parts = ext.extension as Record<string, unknown>[];
    const named = parts.find((p) => p?.url === 'name');
    const name = named?.valueCode ?? named?.valueString;
    const value = parts.find((p) => p?.url === 'value');
    const v = value && Object.entries(value).find(([k]) => k.startsWith('value'))?.[1];
    if (typeof name === 'string' && (typeof v === 'string' || typeof v === 'boolean' || typeof v === 'number')) out.push({ name, value: String(v) });
  }
  return out;
}

/** The value the ValueSet sets for its expansions' parameter `name` (expansionParameters); the first one counts. */
export function expansionParameter(vs: ValueSet, name: string): string | undefined {
  return expansionParameters(vs).find((p) => p.name === name)?.value;
}

/** A parameter of the ValueSet's stored expansion, as a string (`displayLanguage`: the language its displays are in). */
export function storedExpansionParameter(vs: ValueSet, name: string): string | undefined {
  const p = vs.expansion?.parameter?.find((x) => x.name === name);
  const v = p === undefined ? undefined : Object.entries(p).find(([k]) => k.startsWith('value'))?.[1];
  return typeof v === 'string' || typeof v === 'boolean' || typeof v === 'number' ? String(v) : undefined;
}

/** Validates a stored or submitted ValueSet resource; throws a 400 FhirError. */
export function parseValueSet(value: unknown, what = 'ValueSet'): ValueSet {
  return parseWith(ValueSetSchema, value, what);
}
