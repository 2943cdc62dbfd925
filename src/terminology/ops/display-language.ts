import type { ConceptDefinition } from '../model/code-system.ts';
import type { Designation } from '../model/datatypes.ts';

const DESIGNATION_USAGE = 'http://terminology.hl7.org/CodeSystem/designation-usage';

/**
 * The display of a concept in `language` (R4 `displayLanguage` of $lookup, $validate-code and
 * $expand). Candidates are the concept's display, in the CodeSystem's `language`, and its
 * designations: a candidate whose language tag equals `language` beats one that only shares its
 * primary language (`de` for `de-CH`), and a display-use designation (no `use`, or
 * designation-usage#display) beats another use such as a synonym. Without a candidate in that
 * language, or without `language`, it is the concept's display.
 */
export function displayIn(definition: ConceptDefinition, systemLanguage: string | undefined, language: string | undefined): string | undefined {
  if (language === undefined) return definition.display;
  const own: Designation[] = definition.display === undefined ? [] : [{ language: systemLanguage, value: definition.display }];
  let best: Designation | undefined;
  let bestRank = Number.POSITIVE_INFINITY;
  for (const d of [...own, ...(definition.designation ?? [])]) {
    const match = d.language === undefined ? undefined : languageMatch(d.language, language);
    if (match === undefined) continue;
    const rank = match * 2 + (isDisplayUse(d) ? 0 : 1);
    if (rank < bestRank) {
      best = d;
      bestRank = rank;
    }
  }
  return best?.value ?? definition.display;
}

/** 0 when the tags are equal, 1 when they share the primary language, else undefined (RFC 5646, case-insensitive). */
function languageMatch(tag: string, wanted: string): number | undefined {
  const a = tag.toLowerCase();
  const b = wanted.toLowerCase();
  if (a === b) return 0;
  return a.split('-')[0] === b.split('-')[0] ? 1 : undefined;
}

function isDisplayUse(d: Designation): boolean {
  return d.use === undefined || (d.use.system === DESIGNATION_USAGE && d.use.code === 'display');
}
