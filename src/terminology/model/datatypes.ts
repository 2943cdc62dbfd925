import { z } from 'zod';

/** FHIR R4 Coding (the fields the terminology engine reads). */
export const CodingSchema = z.object({
  system: z.string().min(1).optional(),
  version: z.string().min(1).optional(),
  code: z.string().min(1).optional(),
  display: z.string().optional(),
  userSelected: z.boolean().optional(),
});
export type Coding = z.infer<typeof CodingSchema>;

/** FHIR R4 CodeableConcept. */
export const CodeableConceptSchema = z.object({
  coding: z.array(CodingSchema).optional(),
  text: z.string().optional(),
});
export type CodeableConcept = z.infer<typeof CodeableConceptSchema>;

/**
 * The extensions the engine reads on concepts and designations: `structuredefinition-standards-status`
 * (valueCode) and `valueset-deprecated` (valueBoolean, or the code `true` as R5 content writes it).
 */
export const StatusExtensionsSchema = z
  // Loose: an extension keeps its other members (`valueId`, nested `extension`), so that one repeated in an
  // output (a designation's in an expansion) is the whole extension, never a url without its value.
  .array(z.looseObject({ url: z.string(), valueCode: z.string().optional().catch(undefined), valueBoolean: z.boolean().optional().catch(undefined) }))
  .optional()
  .catch(undefined);
export type StatusExtensions = z.infer<typeof StatusExtensionsSchema>;

export const STANDARDS_STATUS = 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status';

/** The `structuredefinition-standards-status` code of an element (`deprecated`, `withdrawn`, ...), if any. */
export function standardsStatus(extension: StatusExtensions): string | undefined {
  return extension?.find((e) => e.url === STANDARDS_STATUS)?.valueCode;
}

/** FHIR R4 concept designation (CodeSystem.concept.designation, ValueSet...concept.designation). */
export const DesignationSchema = z.object({
  language: z.string().optional(),
  use: CodingSchema.optional(),
  value: z.string(),
  extension: StatusExtensionsSchema,
});
export type Designation = z.infer<typeof DesignationSchema>;

/**
 * The identifying fields of a canonical resource (CodeSystem, ValueSet) the engine reads.
 * `date` and `meta.lastUpdated` choose versions for the `date` input, `language` is the language
 * of the displays; a malformed value of these is treated as absent rather than failing the resource.
 */
export const CanonicalFields = {
  id: z.string().optional(),
  url: z.string().min(1).optional(),
  version: z.string().optional(),
  name: z.string().optional(),
  title: z.string().optional(),
  status: z.string().optional(),
  experimental: z.boolean().optional().catch(undefined),
  /** Only what the terminology operations read of extensions: each url, code (structuredefinition-standards-status) and canonical (valueset-supplement). */
  extension: z.array(z.object({ url: z.string(), valueCode: z.string().optional().catch(undefined), valueCanonical: z.string().optional().catch(undefined) })).optional().catch(undefined),
  date: z.string().optional().catch(undefined),
  language: z.string().optional().catch(undefined),
  meta: z.object({ lastUpdated: z.string().optional().catch(undefined) }).optional().catch(undefined),
};
