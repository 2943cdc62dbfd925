import { z } from 'zod';
import { parseReference } from '../fhir/references.ts';
import { isResourceType } from '../fhir/resource-types.ts';
import type { FhirContextItem } from '../store/types.ts';

/**
 * Most characters the `fhirContext` of a launch may have as JSON: it travels inside the `launch` value (a
 * URL parameter) and in every access token of the grant (an Authorization header), so it stays small.
 */
export const MAX_FHIR_CONTEXT_CHARS = 2048;

/** An absolute URI (RFC 3986: a scheme, then no white space). */
const ABSOLUTE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:\S+$/;
/** A canonical URL, optionally with its `|version` (R4 datatypes.html, canonical). */
const CANONICAL = /^[A-Za-z][A-Za-z0-9+.-]*:[^\s|]+(\|[^\s|]+)?$/;

const uri = z.string().regex(ABSOLUTE_URI, 'must be an absolute URI');
const text = z.string().min(1, 'must not be empty');

const Coding = z.strictObject({ system: uri.optional(), version: text.optional(), code: text.optional(), display: text.optional() });

/** The elements of a FHIR Identifier Cinder takes in a `fhirContext` item: what identifies, and how. */
const Identifier = z.strictObject({
  use: z.enum(['usual', 'official', 'temp', 'secondary', 'old']).optional(),
  type: z.strictObject({ coding: z.array(Coding).min(1).optional(), text: text.optional() }).optional(),
  system: uri.optional(),
  value: text,
});

/** What a relative literal reference `Type/id` names (a known type, a FHIR id; no version, no base), or null. */
function relativeReference(reference: string | undefined): { type: string; id: string } | null {
  const ref = reference === undefined ? null : parseReference(reference);
  return ref !== null && reference === `${ref.type}/${ref.id}` ? { type: ref.type, id: ref.id } : null;
}

/** The top-level launch context parameter SMART 2.2 keeps a type in, instead of `fhirContext`. */
const TOP_LEVEL = new Map([['Patient', 'patient'], ['Encounter', 'encounter']]);

/**
 * One item of a launch's `fhirContext` (SMART App Launch 2.2, Scopes and Launch Context, fhirContext): at
 * least one of `reference` (a relative `Type/id`), `canonical` (with an optional `|version`) and
 * `identifier`; `type`, a FHIR resource type, the reference's when both are given; `role`, an absolute URI
 * or `launch` (the only relative role 2.2 defines, which an absent role means). A Patient or Encounter
 * item needs a role other than `launch`: the launch's own patient and encounter are the top-level
 * `patient` and `encounter`, which "will not be permitted within the fhirContext array" otherwise.
 */
export const FhirContextItemInput = z
  .strictObject({
    reference: z.string().refine((r) => relativeReference(r) !== null, 'must be a relative reference Type/id to a FHIR resource type').optional(),
    canonical: z.string().regex(CANONICAL, 'must be a canonical URL (an absolute URI, optionally with |version)').optional(),
    identifier: Identifier.optional(),
    type: z.string().refine(isResourceType, 'must be a FHIR resource type').optional(),
    role: z.string().refine((r) => r === 'launch' || ABSOLUTE_URI.test(r), "must be an absolute URI (or 'launch')").optional(),
  })
  .superRefine((item, ctx) => {
    if (item.reference === undefined && item.canonical === undefined && item.identifier === undefined) {
      ctx.addIssue({ code: 'custom', message: 'needs a reference, a canonical or an identifier' });
    }
    const fromReference = relativeReference(item.reference)?.type;
    if (fromReference !== undefined && item.type !== undefined && item.type !== fromReference) {
      ctx.addIssue({ code: 'custom', path: ['type'], message: `is not the type of the reference (${fromReference})` });
    }
    const type = fromReference ?? item.type;
    const field = type === undefined ? undefined : TOP_LEVEL.get(type);
    if (field !== undefined && (item.role === undefined || item.role === 'launch')) {
      ctx.addIssue({
        code: 'custom', path: [fromReference !== undefined ? 'reference' : 'type'],
        message: `the launch's ${type} goes in '${field}', not in fhirContext (SMART App Launch 2.2); another ${type} needs a role other than 'launch'`,
      });
    }
  });

/** A launch's `fhirContext`: FhirContextItemInput items, at most MAX_FHIR_CONTEXT_CHARS as JSON. */
export const FhirContextInput = z
  .array(FhirContextItemInput)
  .refine((items) => JSON.stringify(items).length <= MAX_FHIR_CONTEXT_CHARS, `must be at most ${MAX_FHIR_CONTEXT_CHARS} characters as JSON`);

/** The `Type/id` of an item's reference, to be read as the FHIR API reads it; null for an item without one. */
export function contextReference(item: FhirContextItem): { type: string; id: string } | null {
  return relativeReference(item.reference);
}

/**
 * Whether a launch context value read back from a signed launch is a list of items (the server signed it
 * after FhirContextInput; anything else is a launch of an older Cinder, or not one of this server's).
 */
export function isFhirContext(v: unknown): v is FhirContextItem[] {
  return Array.isArray(v) && v.every((i) => typeof i === 'object' && i !== null && !Array.isArray(i));
}
