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
      inactive: z.boolean().optional(),
      include: z.array(ConceptSetSchema).min(1),
      exclude: z.array(ConceptSetSchema).optional(),
    })
    .optional(),
  expansion: z
    .object({
      contains: z.array(ExpansionContainsSchema).optional(),
    })
    .optional(),
});
export type ValueSet = z.infer<typeof ValueSetSchema>;

/** Validates a stored or submitted ValueSet resource; throws a 400 FhirError. */
export function parseValueSet(value: unknown, what = 'ValueSet'): ValueSet {
  return parseWith(ValueSetSchema, value, what);
}
