import type { ConceptDefinition } from '../model/code-system.ts';
import type { Designation } from '../model/datatypes.ts';
import { BoundedCache } from '../compile/bounded-cache.ts';

const DESIGNATION_USAGE = 'http://terminology.hl7.org/CodeSystem/designation-usage';

/** The tags of a `displayLanguage` value with their q-values, in the order given. */
function weighted(value: string): { tag: string; q: number; i: number }[] {
  return value.split(',').map((part, i) => {
    const [tag, ...params] = part.split(';').map((x) => x.trim());
    const q = params.find((p) => p.startsWith('q='));
    return { tag: tag!, q: q === undefined ? 1 : Number(q.slice(2)), i };
  });
}

/**
 * The most languages of a `displayLanguage` value (or the Accept-Language header standing for it) that are read,
 * the most wanted first. Each code of an expansion is shown in the first of them it has a display in: 2,000 tags
 * in an 8 KB header held one `$expand` of 20,000 codes 60 s, where a browser sends a handful.
 */
export const MAX_DISPLAY_LANGUAGES = 16;

/** A `displayLanguage` value read once, not for each code an expansion shows. */
interface ReadLanguages {
  readonly languages: readonly string[];
  readonly othersRefused: boolean;
}
const READ = new BoundedCache<string, ReadLanguages>(256);

function readLanguages(value: string): ReadLanguages {
  let read = READ.get(value);
  if (read === undefined) {
    const tags = weighted(value);
    const languages = tags.filter((x) => x.tag !== '' && x.q > 0).sort((a, b) => b.q - a.q || a.i - b.i).slice(0, MAX_DISPLAY_LANGUAGES).map((x) => x.tag);
    READ.set(value, (read = { languages, othersRefused: tags.some((x) => x.tag === '*' && x.q === 0) }));
  }
  return read;
}

/**
 * The languages of a `displayLanguage` value, most wanted first: one tag (`de`), or a list as
 * Accept-Language writes it (`en, en-AU`, `de-CH,de;q=0.9`; q-values order it; `*` is any language),
 * at most MAX_DISPLAY_LANGUAGES of them.
 */
export function languagesOf(value: string | undefined): readonly string[] {
  return value === undefined ? [] : readLanguages(value).languages;
}

/** Whether the value refuses every language it does not name (`de, *;q=0`). */
function othersRefused(value: string): boolean {
  return readLanguages(value).othersRefused;
}

/** Whether a display of language `tag` (undefined: not known) is in one of `languages`. */
export function inLanguages(tag: string | undefined, languages: readonly string[]): boolean {
  return tag !== undefined && languages.some((l) => languageMatch(tag, l) !== undefined);
}

/**
 * The display of a concept in `language` (R4 `displayLanguage` of $lookup, $validate-code and
 * $expand; a list takes the first language that has one). Candidates are the concept's display, in the CodeSystem's `language`, and its
 * designations: a candidate whose language tag equals `language` beats one that only shares its
 * primary language (`de` for `de-CH`), and a display-use designation (no `use`, or
 * designation-usage#display) beats another use such as a synonym. Without a candidate in that
 * language, or without `language`, it is the concept's display.
 */
export function displayIn(definition: ConceptDefinition, systemLanguage: string | undefined, language: string | undefined): string | undefined {
  return chosenDisplay(definition, systemLanguage, language).value;
}

/** displayIn()'s display and the designation of `definition` it is taken from (`from`; undefined for the concept's own display, or none). */
export function chosenDisplay(definition: ConceptDefinition, systemLanguage: string | undefined, language: string | undefined): { value: string | undefined; from?: Designation } {
  const own = { value: definition.display };
  if (language === undefined) return own;
  const languages = languagesOf(language);
  if (languages.length !== 1 || languages[0] !== language) {
    for (const l of languages) {
      const d = chosenDisplay(definition, systemLanguage, l);
      if (d.value !== definition.display || inLanguages(systemLanguage, [l])) return d;
    }
    // `*;q=0`: no display rather than one in a language not asked for (unless the system's is unknown).
    return othersRefused(language) && systemLanguage !== undefined ? { value: undefined } : own;
  }
  if (language === '*') return own;
  const display: Designation[] = definition.display === undefined ? [] : [{ language: systemLanguage, value: definition.display }];
  let best: Designation | undefined;
  let bestRank = Number.POSITIVE_INFINITY;
  for (const d of [...display, ...(definition.designation ?? [])]) {
    const match = d.language === undefined ? undefined : languageMatch(d.language, language);
    if (match === undefined) continue;
    const rank = match * 2 + (isDisplayUse(d) ? 0 : 1);
    if (rank < bestRank) {
      best = d;
      bestRank = rank;
    }
  }
  return best === undefined || best === display[0] ? own : { value: best.value, from: best };
}

/**
 * The concept's designations, led by its display in the CodeSystem's language when it states one (as
 * the reference servers list it; not repeated when a designation already says the same).
 */
export function designationsWithDisplay(definition: ConceptDefinition, language: string | undefined): readonly Designation[] {
  const own = definition.designation ?? [];
  const { display } = definition;
  if (display === undefined || language === undefined || own.some((d) => d.language === language && d.value === display)) return own;
  return [{ language, use: PREFERRED_FOR_LANGUAGE, value: display }, ...own];
}
const PREFERRED_FOR_LANGUAGE = { system: 'http://terminology.hl7.org/CodeSystem/hl7TermMaintInfra', code: 'preferredForLanguage', display: 'Preferred For Language' };

/**
 * Whether a designation is one a `designation` input of $expand asks for (R4: "a token that specifies
 * a system+code that is either a use or a language"): `urn:ietf:bcp:47|de` a language (that tag
 * exactly, as the reference servers match it: not `de-CH`), any other `system|code` a use, a bare code
 * a use of any system.
 */
export function designationWanted(d: Designation, tokens: readonly string[]): boolean {
  return tokens.some((token) => {
    const bar = token.lastIndexOf('|');
    const system = bar === -1 ? undefined : token.slice(0, bar);
    const code = token.slice(bar + 1);
    if (system === BCP_47) return d.language !== undefined && d.language.toLowerCase() === code.toLowerCase();
    return d.use !== undefined && d.use.code === code && (system === undefined || d.use.system === system);
  });
}
const BCP_47 = 'urn:ietf:bcp:47';

/** 0 when the tags are equal, 1 when they share the primary language or `wanted` is `*`, else undefined (RFC 5646, case-insensitive). */
function languageMatch(tag: string, wanted: string): number | undefined {
  if (wanted === '*') return 1;
  const a = tag.toLowerCase();
  const b = wanted.toLowerCase();
  if (a === b) return 0;
  return a.split('-')[0] === b.split('-')[0] ? 1 : undefined;
}

function isDisplayUse(d: Designation): boolean {
  return d.use === undefined || (d.use.system === DESIGNATION_USAGE && d.use.code === 'display');
}
