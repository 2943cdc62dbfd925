import { z } from 'zod';
import { CanonicalFields, CodingSchema, DesignationSchema, StatusExtensionsSchema } from './datatypes.ts';
import { parseWith } from './parse.ts';

/** CodeSystem.concept.property: one value of a concept property. */
export const ConceptPropertySchema = z.object({
  code: z.string().min(1),
  valueCode: z.string().optional(),
  valueCoding: CodingSchema.optional(),
  valueString: z.string().optional(),
  valueInteger: z.number().optional(),
  valueBoolean: z.boolean().optional(),
  valueDateTime: z.string().optional(),
  valueDecimal: z.number().optional(),
});
export type ConceptProperty = z.infer<typeof ConceptPropertySchema>;

/** CodeSystem.concept, recursive through nested `concept` (the is-a hierarchy). */
export const ConceptDefinitionSchema = z.object({
  code: z.string().min(1),
  display: z.string().optional(),
  definition: z.string().optional(),
  designation: z.array(DesignationSchema).optional(),
  property: z.array(ConceptPropertySchema).optional(),
  /** Only `structuredefinition-standards-status` is read (a deprecated concept). */
  extension: StatusExtensionsSchema,
  get concept() {
    return z.array(ConceptDefinitionSchema).optional();
  },
});
export type ConceptDefinition = z.infer<typeof ConceptDefinitionSchema>;

/** CodeSystem.property: a property definition. */
export const PropertyDefinitionSchema = z.object({
  code: z.string().min(1),
  uri: z.string().optional(),
  description: z.string().optional(),
  type: z.string().optional(),
});
export type PropertyDefinition = z.infer<typeof PropertyDefinitionSchema>;

export const CodeSystemContent = z.enum(['not-present', 'example', 'fragment', 'complete', 'supplement']);
export type CodeSystemContent = z.infer<typeof CodeSystemContent>;

/** FHIR R4 CodeSystem (the fields the terminology engine reads; others are dropped). */
export const CodeSystemSchema = z.object({
  resourceType: z.literal('CodeSystem'),
  /** A supplement's: the code system it adds designations and properties to. */
  supplements: z.string().optional(),
  ...CanonicalFields,
  caseSensitive: z.boolean().optional(),
  hierarchyMeaning: z.string().optional(),
  content: CodeSystemContent.default('complete'),
  property: z.array(PropertyDefinitionSchema).optional(),
  concept: z.array(ConceptDefinitionSchema).optional(),
});
export type CodeSystem = z.infer<typeof CodeSystemSchema>;

/** Validates a stored or submitted CodeSystem resource; throws a 400 FhirError. */
export function parseCodeSystem(value: unknown, what = 'CodeSystem'): CodeSystem {
  return parseWith(CodeSystemSchema, value, what);
}
