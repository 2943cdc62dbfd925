import { z } from 'zod';
import { CanonicalFields } from './datatypes.ts';
import { parseWith } from './parse.ts';

/** R4 ConceptEquivalence (ConceptMap.group.element.target.equivalence). */
export const EQUIVALENCES = [
  'relatedto', 'equivalent', 'equal', 'wider', 'subsumes', 'narrower', 'specializes', 'inexact', 'unmatched', 'disjoint',
] as const;
export type Equivalence = (typeof EQUIVALENCES)[number];

/** ConceptMap.group.element.target.dependsOn and .product (R4 OtherElement). */
const OtherElementSchema = z.object({
  property: z.string().min(1),
  system: z.string().min(1).optional(),
  value: z.string(),
  display: z.string().optional(),
});
export type OtherElement = z.infer<typeof OtherElementSchema>;

const TargetSchema = z.object({
  code: z.string().min(1).optional(),
  display: z.string().optional(),
  /** 1..1 in R4; a map stored before validation may lack it, and reads as `equivalent` (R4's earlier default). */
  equivalence: z.enum(EQUIVALENCES).optional(),
  comment: z.string().optional(),
  dependsOn: z.array(OtherElementSchema).optional(),
  product: z.array(OtherElementSchema).optional(),
});
export type MapTarget = z.infer<typeof TargetSchema>;

const ElementSchema = z.object({
  code: z.string().min(1).optional(),
  display: z.string().optional(),
  target: z.array(TargetSchema).optional(),
});
export type MapElement = z.infer<typeof ElementSchema>;

const UnmappedSchema = z.object({
  mode: z.enum(['provided', 'fixed', 'other-map']),
  code: z.string().min(1).optional(),
  display: z.string().optional(),
  url: z.string().min(1).optional(),
});
export type Unmapped = z.infer<typeof UnmappedSchema>;

const GroupSchema = z.object({
  source: z.string().min(1).optional(),
  sourceVersion: z.string().min(1).optional(),
  target: z.string().min(1).optional(),
  targetVersion: z.string().min(1).optional(),
  element: z.array(ElementSchema).optional(),
  unmapped: UnmappedSchema.optional(),
});
export type MapGroup = z.infer<typeof GroupSchema>;

/** FHIR R4 ConceptMap (the fields $translate reads; others are dropped). */
export const ConceptMapSchema = z.object({
  resourceType: z.literal('ConceptMap'),
  ...CanonicalFields,
  sourceUri: z.string().min(1).optional(),
  sourceCanonical: z.string().min(1).optional(),
  targetUri: z.string().min(1).optional(),
  targetCanonical: z.string().min(1).optional(),
  group: z.array(GroupSchema).optional(),
});
export type ConceptMap = z.infer<typeof ConceptMapSchema>;

/** Validates a stored or submitted ConceptMap resource; throws a 400 FhirError. */
export function parseConceptMap(value: unknown, what = 'ConceptMap'): ConceptMap {
  return parseWith(ConceptMapSchema, value, what);
}
