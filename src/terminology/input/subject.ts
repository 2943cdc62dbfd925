import { invalid } from '../errors.ts';
import type { CodeableConcept, Coding } from '../model/datatypes.ts';

/** A coding with the parts validation needs. */
export interface CheckedCoding {
  readonly system: string;
  readonly version?: string;
  readonly code: string;
  readonly display?: string;
}

/** What to validate: one coding, or the codings of a CodeableConcept (true if one is valid). */
export type ValidationSubject =
  /** `path`: the input element that carries the code, for the issues' expressions (`code`, `Coding.code`). */
  | { readonly kind: 'coding'; readonly coding: CheckedCoding; readonly path: string }
  /** `concept`: the CodeableConcept as given, which the answer echoes. */
  | { readonly kind: 'codeableConcept'; readonly codings: readonly Coding[]; readonly concept: CodeableConcept }
  /** A coding that cannot be checked (no system, or no code): the answer is false, with why (and the code, when it has one). */
  | { readonly kind: 'unusable'; readonly why: string; readonly path: string; readonly code?: string };

export interface SubjectInputs {
  readonly code?: string;
  /** The system of `code` (the `system` input, or `url` for CodeSystem/$validate-code). */
  readonly system?: string;
  /** The name of the input that carries the system, for messages. */
  readonly systemParam: string;
  readonly version?: string;
  readonly display?: string;
  readonly coding?: Coding;
  readonly codeableConcept?: CodeableConcept;
}

const ONE_OF = "one of 'code' (with its system), 'coding' or 'codeableConcept'";

/**
 * Applies the input rules of $validate-code (interface rule 2, R4 ValueSet/$validate-code):
 * exactly one of code+system, coding, codeableConcept with at least one coding; a code needs
 * its system; a display belongs to a code or coding.
 */
export function validationSubject(i: SubjectInputs): ValidationSubject {
  const given = [i.code !== undefined, i.coding !== undefined, i.codeableConcept !== undefined].filter(Boolean).length;
  if (given === 0) throw invalid(`${ONE_OF} is required`, ['code', 'coding', 'codeableConcept']);
  if (given > 1) throw invalid(`give only ${ONE_OF}, not several`, ['code', 'coding', 'codeableConcept']);
  if (i.code !== undefined) {
    if (i.system === undefined) throw invalid(`the parameter '${i.systemParam}' is required with 'code'`, [i.systemParam]);
    return { kind: 'coding', coding: { system: i.system, version: i.version, code: i.code, display: i.display }, path: 'code' };
  }
  if (i.coding !== undefined) {
    const { system, code } = i.coding;
    // As the reference servers answer: a coding that cannot be checked is not valid (200, result false), not a bad request.
    if (system === undefined) {
      const why = `The coding has no system, so the code '${code ?? ''}' cannot be validated`;
      return { kind: 'unusable', why, path: 'Coding.system', ...(code === undefined ? {} : { code }) };
    }
    if (code === undefined) return { kind: 'unusable', why: 'The coding has no code', path: 'Coding.code' };
    const display = i.display ?? i.coding.display;
    return { kind: 'coding', coding: { system, code, display, version: i.coding.version ?? i.version }, path: 'Coding.code' };
  }
  const codings = i.codeableConcept?.coding ?? [];
  if (codings.length === 0) throw invalid("'codeableConcept' must contain at least one coding", ['codeableConcept']);
  if (i.display !== undefined) throw invalid("'display' applies to 'code' or 'coding', not to 'codeableConcept'", ['display']);
  return { kind: 'codeableConcept', codings, concept: i.codeableConcept! };
}
