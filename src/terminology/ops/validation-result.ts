import type { Member } from '../compile/membership.ts';
import type { CheckedCoding } from '../input/subject.ts';
import type { Parameters, ParametersParameter } from '../model/parameters.ts';
import { displayIn } from './display-language.ts';

/** The outcome of $validate-code: R4 output parameters `result`, `message` and `display`. */
export interface ValidationResult {
  readonly result: boolean;
  readonly display?: string;
  /** Why the result is false, and warnings; rendered as one `message`. */
  readonly messages: readonly string[];
}

/** Renders a validation result as the R4 $validate-code output Parameters. */
export function validationParameters(r: ValidationResult): Parameters {
  const parameter: ParametersParameter[] = [{ name: 'result', valueBoolean: r.result }];
  const messages = r.messages.length > 1 ? [...new Set(r.messages)] : r.messages;
  if (messages.length > 0) parameter.push({ name: 'message', valueString: messages.join('; ') });
  if (r.display !== undefined) parameter.push({ name: 'display', valueString: r.display });
  return { resourceType: 'Parameters', parameter };
}

/** The inputs that decide how a member is finished (R4 $validate-code `abstract`, `displayLanguage`). */
export interface Finish {
  readonly abstract?: boolean | undefined;
  readonly displayLanguage?: string | undefined;
}

/**
 * Finishes validation of a member: abstract codes are invalid when `abstract` is false,
 * inactive codes are valid with a warning, and a given display must equal the concept's display
 * or one of its designations exactly (R4 $validate-code `display`, `abstract`). The output
 * display is the CodeSystem's, in `displayLanguage` when a designation in it exists.
 */
export function finishMember(m: Member, coding: CheckedCoding, finish: Finish): ValidationResult {
  const { abstract, displayLanguage } = finish;
  const errors: string[] = [];
  const warnings = [...m.warnings];
  const label = `'${m.code}' (${m.system})`;
  if (m.entry !== undefined && m.entry.code !== coding.code) {
    warnings.push(`The code '${coding.code}' differs in case from the code ${label}; the CodeSystem is not case sensitive`);
  }
  if (abstract === false && m.abstract) {
    errors.push(`The code ${label} is abstract (not selectable) and abstract codes are not allowed here`);
  }
  if (m.inactive) {
    const status = m.entry?.status;
    warnings.push(`The code ${label} is inactive${status === undefined ? '' : ` (status '${status}')`}`);
  }
  const definition = m.entry?.definition;
  if (coding.display !== undefined) {
    const known = [definition?.display, ...(definition?.designation ?? []).map((d) => d.value), ...m.displays].filter(
      (d): d is string => d !== undefined,
    );
    if (known.length === 0) {
      warnings.push(`No display is known for the code ${label}, so the display '${coding.display}' was not checked`);
    } else if (!known.includes(coding.display)) {
      const expected = [...new Set(known)].map((d) => `'${d}'`).join(', ');
      errors.push(`Wrong display '${coding.display}' for the code ${label}: expected ${expected}`);
    }
  }
  const display = definition === undefined ? undefined : displayIn(definition, m.cs?.language, displayLanguage);
  return { result: errors.length === 0, display: display ?? m.displays[0], messages: [...errors, ...warnings] };
}
