import { primed } from './large-strings.ts';
import type { ValidationIssue } from './validate.ts';

/**
 * Characters no FHIR value holds (datatypes.html#string: none below U+0020 but tab, CR and LF) and
 * XML 1.0 cannot carry at all, not even as a character reference (section 2.2): with U+FFFE and U+FFFF.
 */
export const NOT_CARRIED = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/;
const NOT_CARRIED_ALL = new RegExp(NOT_CARRIED.source, 'g');

/** `s` with each character of NOT_CARRIED as a `\uXXXX` escape, so that a path naming it can be answered in XML. */
export function visible(s: string): string {
  return s.replace(NOT_CARRIED_ALL, (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`);
}

function issue(expression: string, c: string): ValidationIssue {
  const code = `U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
  const what = c >= '\uFFFE' ? `${code}, which is no Unicode character` : `${code}, a control character (below U+0020 other than tab, CR, LF)`;
  return { severity: 'error', code: 'value', expression, text: `holds ${what}: no FHIR value holds it, and FHIR XML cannot carry it` };
}

/**
 * The strings of a resource (member names too) holding a character of NOT_CARRIED, with their FHIRPath
 * locations under `at`: refused on every write even at `CINDER_VALIDATION=off`, which checks nothing else,
 * since such a resource could not be answered in FHIR XML, a format every FHIR server serves (R4 http.html).
 */
export function characterIssues(resource: Record<string, unknown>, at?: string): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  const walk = (v: unknown, path: string): void => {
    if (typeof v === 'string') {
      // A large string read in slices before this check (primeStrings): its first such character, not a pass over it here.
      const profile = primed(v);
      const c = profile ? profile.notCarried : NOT_CARRIED.exec(v)?.[0];
      if (c !== undefined) out.push(issue(path, c));
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => walk(item, `${path}[${i}]`));
    } else if (v !== null && typeof v === 'object') {
      for (const [key, value] of Object.entries(v)) {
        const m = NOT_CARRIED.exec(key);
        if (m) out.push(issue(`${path}.${visible(key)}`, m[0]));
        else walk(value, `${path}.${key}`);
      }
    }
  };
  const { resourceType, ...rest } = resource;
  walk(rest, at ?? (typeof resourceType === 'string' ? visible(resourceType) : 'Resource'));
  return out;
}
