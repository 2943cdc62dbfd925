import { VERSIONED_URL_PARAM, type CompositeEntry, type IndexEntry, type IndexRows, type RangeEntry, type StringEntry } from '../store/types.ts';
import { contactKey, reachesContactPoints } from './contact-points.ts';
import { dateRange } from './dates.ts';
import { compartmentPaths, paramsOf, type ParamDefinition, type ParamType } from './definitions.ts';
import { foldCase, foldUndecomposed } from './case-fold.ts';
import { evaluatePath, type CompiledPath } from './fhirpath.ts';
import { absoluteType, isAbsoluteReference, parseReference } from './references.ts';
import { isCanonicalType } from './search-canonical.ts';
import { textIndexOf } from './text-index.ts';
import { drivePaced } from './turns.ts';
import { canonicalUnit, UCUM_SYSTEM } from './ucum.ts';

type Json = Record<string, unknown>;

/**
 * Normalised string values are cut to this many UTF-16 units (index keys stay small; longer prefixes compare on the
 * cut). A cut through a surrogate pair leaves U+FFFD in its half's place, as the databases stored it (a lone surrogate
 * bound as UTF-8 is U+FFFD), so that the value compares alike in memory, as a bound value and in a JSON list of them
 * (SQLite's json_each read `\ud83d` as the bytes ED A0 BD, which no stored value holds: a search of eight names or
 * more missed a 256-character name whose 256th unit began an emoji).
 */
export const STRING_INDEX_CHARS = 256;

const NOT_ASCII = /[^\x00-\x7f]/;
const MARKS = /[\u0300-\u036f]/g;

/**
 * A string's `exact` form, which `:exact` compares ("the whole string, including casing and accents"):
 * the text as written in Unicode's composed form (NFC), so that canonically equivalent texts, the same
 * characters encoded apart (`Zoé` as one code point or as `e` and a combining acute), are the same
 * value; the search value is composed alike (index model 15). ASCII text is its own NFC.
 */
export function exactString(s: string): string {
  return NOT_ASCII.test(s) ? s.normalize('NFC') : s;
}

/**
 * FHIR string matching form (search.html 3.1.1.5.12: case- and accent-insensitive): accents removed
 * (NFD, combining marks dropped), then full case folding, as HAPI's upper-casing does: upper case then
 * lower case, so a character whose upper case is longer folds to it (`ß` to `ss`, `ﬁ` to `fi`), a
 * dotless `ı` and a long `ſ` to their ASCII letter, a final `ς` to `σ`, a capital `ẞ` to `ss` too
 * (index model 10); then the letters whose mark does not decompose and the ligatures to their letters
 * (`ø` to `o`, `ł` to `l`, `æ` to `ae`, `þ` to `th`: case-fold.ts UNDECOMPOSED, index model 22), so that `soren`
 * finds Søren as `muller` finds Müller. ASCII text is only lower-cased: the fold changes no ASCII character.
 */
export function normalizeString(s: string): string {
  const folded = NOT_ASCII.test(s) ? foldCase(s.normalize('NFD').replace(MARKS, '')) : s.toLowerCase();
  return folded.length > STRING_INDEX_CHARS ? folded.slice(0, STRING_INDEX_CHARS).toWellFormed() : folded;
}

/**
 * American Soundex of a name (the `phonetic` parameter): letter + three digits, '' for no letters. Its
 * letters are the name's accents removed and the letters whose mark does not decompose, and ligatures,
 * read as their letters (case-fold.ts UNDECOMPOSED: `Łukasz` is `Lukasz`, `Þór` `Thor`; index model 22).
 */
export function soundex(name: string): string {
  const bare = name.normalize('NFD').replace(MARKS, '');
  const read = NOT_ASCII.test(bare) ? foldUndecomposed(bare.toLowerCase()) : bare;
  const letters = read.replace(/[^A-Za-z]/g, '').toUpperCase();
  if (!letters) return '';
  const codes: Record<string, string> = { B: '1', F: '1', P: '1', V: '1', C: '2', G: '2', J: '2', K: '2', Q: '2', S: '2', X: '2', Z: '2', D: '3', T: '3', L: '4', M: '5', N: '5', R: '6' };
  let out = letters[0]!;
  let last = codes[out] ?? '';
  for (const ch of letters.slice(1)) {
    const code = codes[ch] ?? '';
    if (code && code !== last) out += code;
    if (ch !== 'H' && ch !== 'W') last = code;
    if (out.length === 4) break;
  }
  return out.padEnd(4, '0');
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * Separates the texts of a token row's `display` (DISPLAY_SEPARATOR): a control character, which no
 * search value holds (the search layer refuses control characters, src/fhir/search.ts), so that a
 * `:text` value found in the display lies within one of the texts, never across two.
 */
export const DISPLAY_SEPARATOR = '\u001f';

/**
 * A token row's `display`: the distinct non-empty texts among `texts` (a CodeableConcept's text, a
 * Coding's display, an Identifier's type text), normalised, each apart (DISPLAY_SEPARATOR); '' for none.
 */
function joinDisplays(texts: (string | undefined)[]): string {
  return distinctTexts(texts.filter((t) => t !== undefined).map(normalizeString));
}

/** The distinct non-empty `texts`, in order, apart (DISPLAY_SEPARATOR). */
function distinctTexts(texts: string[]): string {
  const out: string[] = [];
  for (const t of texts) if (t && !out.includes(t)) out.push(t);
  return out.join(DISPLAY_SEPARATOR);
}

/** The token values of one element (FHIR R4 search 3.1.1.5.11): Coding, CodeableConcept, Identifier, ContactPoint, code, boolean, uri. */
export function tokenValues(value: unknown, out: { system: string; value: string }[]): void {
  if (typeof value === 'string' || typeof value === 'boolean' || typeof value === 'number') {
    out.push({ system: '', value: String(value) });
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const v = value as Json;
  if (Array.isArray(v.coding)) {
    for (const c of v.coding) tokenValues(c, out);
    return;
  }
  const code = str(v.code) ?? str(v.value);
  const system = str(v.system);
  if (code !== undefined) out.push({ system: system ?? '', value: code });
  // A system without a code or value (a Coding naming its system alone, an Identifier without its value):
  // a row of the system with an empty value, which `[system]|` ("any code in the system") finds, as HAPI
  // FHIR and Medplum index it; `:missing` and `:not` read it as any row.
  else if (system) out.push({ system, value: '' });
}

/** Parts of a HumanName or Address searched by a string parameter; a plain string is itself. */
function stringParts(value: unknown, out: string[]): void {
  if (typeof value === 'string') return void out.push(value);
  if (value === null || typeof value !== 'object') return;
  const v = value as Json;
  for (const key of ['text', 'family', 'given', 'prefix', 'suffix', 'line', 'city', 'district', 'state', 'postalCode', 'country']) {
    const part = v[key];
    if (typeof part === 'string') out.push(part);
    else if (Array.isArray(part)) for (const p of part) if (typeof p === 'string') out.push(p);
  }
}

/**
 * [low, high) of a date element: date/dateTime/instant at its precision, Period (open ends infinite), and
 * Timing as one range over its outer limits (R4 search.html, date: "only the outer limits matter"), from
 * its earliest event or `repeat.boundsPeriod` start to its latest event or bounds end (an open bound
 * infinite); its schedule and a boundsDuration or boundsRange, which hold no dates, are left out.
 */
export function dateRanges(value: unknown, out: { low: number; high: number }[]): void {
  if (typeof value === 'string') {
    const r = dateRange(value);
    if (r) out.push(r);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const v = value as Json;
  const r = 'start' in v || 'end' in v ? periodRange(v) : timingRange(v);
  if (r) out.push(r);
}

type DateSpan = { low: number; high: number };

/** A Period's [start's low, end's high), an absent end infinite (an absent start too); null when it has neither. */
function periodRange(v: Json): DateSpan | null {
  const start = typeof v.start === 'string' ? dateRange(v.start) : null;
  const end = typeof v.end === 'string' ? dateRange(v.end) : null;
  return start || end ? { low: start?.low ?? -Infinity, high: end?.high ?? Infinity } : null;
}

/** A Timing's outer limits over its events and bounds Period (dateRanges); null when it has neither. */
function timingRange(v: Json): DateSpan | null {
  const parts = Array.isArray(v.event) ? v.event.map((e) => (typeof e === 'string' ? dateRange(e) : null)) : [];
  const bounds = (v.repeat as Json | undefined)?.boundsPeriod;
  if (bounds !== null && typeof bounds === 'object') parts.push(periodRange(bounds as Json));
  let span: DateSpan | null = null;
  for (const r of parts) if (r) span = span ? { low: Math.min(span.low, r.low), high: Math.max(span.high, r.high) } : r;
  return span;
}

/**
 * Number ranges of a number or quantity element, with the unit (Quantity, Money, Range; a plain number):
 * a Quantity (one with a comparator as the range it bounds: `<5` below 5, `>=5` from 5 up, as a Range
 * with one end), or a Range by its low end's unit (else its high end's), also under its human `unit`
 * (system '') where that differs from its code, which `value||unit` finds (search.html: "either the code
 * (code) or the stated human unit (unit)").
 */
export function quantityValues(value: unknown, out: { system: string; code: string; low: number; high: number }[]): void {
  if (typeof value === 'number') return void out.push({ system: '', code: '', low: value, high: value });
  if (value === null || typeof value !== 'object') return;
  const v = value as Json;
  if (typeof v.value === 'number') {
    const system = str(v.system) ?? (typeof v.currency === 'string' ? 'urn:iso:std:iso:4217' : '');
    const code = str(v.code) ?? str(v.currency) ?? '';
    // A comparator makes the value a bound: `<5` is any value below 5, a range open below, as a Range without a low end.
    const { comparator } = v;
    const low = comparator === '<' || comparator === '<=' ? -Infinity : v.value;
    const high = comparator === '>' || comparator === '>=' ? Infinity : v.value;
    out.push({ system, code, low, high });
    const unit = str(v.unit);
    if (unit !== undefined && unit !== code) out.push({ system: '', code: unit, low, high });
    return;
  }
  const lo = v.low as Json | undefined;
  const hi = v.high as Json | undefined;
  if (typeof lo?.value === 'number' || typeof hi?.value === 'number') {
    const unitOf = lo ?? hi!;
    const code = str(unitOf.code) ?? str(unitOf.unit) ?? '';
    const low = typeof lo?.value === 'number' ? lo.value : -Infinity;
    const high = typeof hi?.value === 'number' ? hi.value : Infinity;
    out.push({ system: str(unitOf.system) ?? '', code, low, high });
    // Its human unit too, as a Quantity's (`value||unit`: the code or the stated unit, search.html).
    const unit = str(unitOf.unit);
    if (unit !== undefined && unit !== code) out.push({ system: '', code: unit, low, high });
  }
}

/**
 * The parameter whose rows hold `param`'s UCUM quantities in their canonical units (src/fhir/ucum.ts):
 * apart from `param`'s own, so that a search without a unit, or `:missing` and `_sort`, never sees them.
 */
export function canonicalParam(param: string): string {
  return `${param}:canonical`;
}

/**
 * The parameter whose rows order `_sort` on quantity parameter `param`: one row a value (not its human
 * unit's too), its range in its canonical UCUM unit where it has one (src/fhir/ucum.ts: 500 mg as 0.5 g,
 * before 1 g), else as written (a unit without a canonical form, none, or another system). Apart from
 * `param`'s own, as canonicalParam's, so that no search condition sees them.
 */
export function sortParam(param: string): string {
  return `${param}:sort`;
}

/** Whether `param` is one whose rows order `_sort` (sortParam). */
function isSortParam(param: string): boolean {
  return param.endsWith(':sort');
}

/** A UCUM quantity's unit code and range in its canonical unit; undefined for other units. */
export function canonicalQuantity(system: string, code: string, low: number, high: number): { code: string; low: number; high: number } | undefined {
  const unit = system === UCUM_SYSTEM ? canonicalUnit(code) : undefined;
  return unit && { code: unit.code, low: unit.convert(low), high: unit.convert(high) };
}

/**
 * The (type, id) or canonical a reference element points at; `targetType` restricts it. A literal
 * reference names a resource of this tenant when relative or absolute under `base`, the tenant's FHIR
 * base (parseReference); another server's URL is kept as written, as a canonical is.
 */
export function referenceValues(value: unknown, targetType: string | undefined, out: { system: string; value: string }[], base?: string): void {
  if (typeof value === 'string') {
    // canonical: the URL as written, and without its `|version`
    out.push({ system: '', value });
    const bar = value.indexOf('|');
    if (bar > 0) out.push({ system: '', value: value.slice(0, bar) });
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const v = value as Json;
  if (typeof v.resourceType === 'string' && typeof v.id === 'string') {
    // an inline resource (Bundle.entry[0].resource)
    if (!targetType || v.resourceType === targetType) out.push({ system: v.resourceType, value: v.id });
    return;
  }
  const ref = str(v.reference);
  if (ref === undefined) return;
  const parsed = parseReference(ref, base);
  if (parsed) {
    if (!targetType || parsed.type === targetType) out.push({ system: parsed.type, value: parsed.id });
  } else if (isAbsoluteReference(ref) && !ref.startsWith('urn:') && (!targetType || absoluteType(ref) === targetType)) {
    out.push({ system: '', value: ref });
  }
}

function emptyRows(): IndexRows {
  return { tokens: [], strings: [], ranges: [], composites: [] };
}

function values(node: unknown, root: unknown, paths: CompiledPath[]): unknown[] {
  const out: unknown[] = [];
  for (const path of paths) for (const v of path.evaluate(node, root)) out.push(v);
  return out;
}

/** Index rows of one (non-composite) parameter's value. */
function simpleRows(def: ParamDefinition, value: unknown, targetType: string | undefined, rows: IndexRows, base: string | undefined): void {
  const param = def.code;
  switch (def.type) {
    case 'token': {
      const v = value as Json | null;
      if (v !== null && typeof v === 'object' && (Array.isArray(v.coding) || typeof v.display === 'string')) {
        // A CodeableConcept's codings, or a Coding: each row carries the text `:text` searches.
        const text = typeof v.text === 'string' ? v.text : undefined;
        const codings = Array.isArray(v.coding) ? (v.coding as Json[]) : [v];
        const coded = codings.some((c) => typeof c?.code === 'string');
        for (const c of codings) {
          const t: { system: string; value: string }[] = [];
          tokenValues(c, t);
          const display = joinDisplays([text, str(c?.display)]);
          for (const x of t) rows.tokens.push(display ? { param, system: x.system, value: x.value, display } : { param, system: x.system, value: x.value });
          // The display of a concept without a coded coding: `:text` searches Coding.display (search.html), and
          // `$lastn` groups such a code by its text (codeTexts reads the string rows, which only codes of text alone
          // have: a coded concept's displays are its token rows', a system alone's included).
          const own = str(c?.display);
          if (!coded && own !== undefined) rows.strings.push({ param: `${param}:text`, value: normalizeString(own), exact: exactString(own) });
        }
        // Text without a coding to carry it.
        if (text !== undefined && !coded) rows.strings.push({ param: `${param}:text`, value: normalizeString(text), exact: exactString(text) });
      } else {
        const tokens: { system: string; value: string }[] = [];
        tokenValues(value, tokens);
        // A ContactPoint's value, lower-cased as searches compare it (contact-points.ts contactKey).
        if (reachesContactPoints(def)) for (const t of tokens) t.value = contactKey(t.value);
        // An Identifier's `:text` is its type's text (search.html, token `:text`), carried by its rows.
        const typeText = v !== null && typeof v === 'object' ? str((v.type as Json | undefined)?.text) : undefined;
        const display = joinDisplays([typeText]);
        for (const t of tokens) rows.tokens.push(display ? { param, system: t.system, value: t.value, display } : { param, system: t.system, value: t.value });
        // Text without a row to carry it: a CodeableConcept of text alone, an Identifier without a value.
        const text = typeof v?.text === 'string' ? v.text : !tokens.length && display ? typeText : undefined;
        if (text !== undefined) rows.strings.push({ param: `${param}:text`, value: normalizeString(text), exact: exactString(text) });
      }
      const type = (value as Json | null)?.type as Json | undefined;
      if (type && typeof (value as Json).value === 'string' && Array.isArray(type.coding)) {
        // Identifier `:of-type`: type's system|code and the value
        for (const c of type.coding as Json[]) {
          if (typeof c?.code === 'string') rows.tokens.push({ param: `${param}:of-type`, system: str(c.system) ?? '', value: `${c.code}|${(value as Json).value}` });
        }
      }
      return;
    }
    case 'string': {
      const parts: string[] = [];
      stringParts(value, parts);
      for (const p of parts) {
        if (def.code === 'phonetic') {
          const key = soundex(p);
          if (key) rows.strings.push({ param, value: key.toLowerCase(), exact: exactString(p) });
        } else rows.strings.push({ param, value: normalizeString(p), exact: exactString(p) });
      }
      return;
    }
    case 'uri':
      if (typeof value === 'string') rows.tokens.push({ param, system: '', value });
      return;
    case 'reference': {
      const refs: { system: string; value: string }[] = [];
      referenceValues(value, targetType, refs, base);
      for (const r of refs) rows.tokens.push({ param, system: r.system, value: r.value });
      const identifier = (value as Json | null)?.identifier;
      if (identifier) {
        const ids: { system: string; value: string }[] = [];
        tokenValues(identifier, ids);
        for (const t of ids) rows.tokens.push({ param: `${param}:identifier`, system: t.system, value: t.value });
      }
      return;
    }
    case 'date': {
      const ranges: { low: number; high: number }[] = [];
      dateRanges(value, ranges);
      for (const r of ranges) rows.ranges.push({ param, system: '', code: '', low: r.low, high: r.high });
      return;
    }
    case 'number':
    case 'quantity': {
      const qs: { system: string; code: string; low: number; high: number }[] = [];
      quantityValues(value, qs);
      for (const q of qs) {
        rows.ranges.push({ param, ...q });
        const c = canonicalQuantity(q.system, q.code, q.low, q.high);
        if (c) rows.ranges.push({ param: canonicalParam(param), system: UCUM_SYSTEM, ...c });
      }
      // The value's own row comes first (a second, under its human unit, follows it).
      const own = qs[0];
      if (def.type === 'quantity' && own !== undefined) {
        const { low, high } = canonicalQuantity(own.system, own.code, own.low, own.high) ?? own;
        rows.ranges.push({ param: sortParam(param), system: '', code: '', low, high });
      }
      return;
    }
    default:
      return;
  }
}

type Part = { system2: string; value2: string; low: number; high: number };

/** The stored forms of one composite component value. */
function partValues(type: ParamType, value: unknown, base: string | undefined): Part[] {
  const out: Part[] = [];
  const none = { system2: '', value2: '', low: 0, high: 0 };
  if (type === 'token') {
    const t: { system: string; value: string }[] = [];
    tokenValues(value, t);
    for (const x of t) out.push({ ...none, system2: x.system, value2: x.value });
  } else if (type === 'reference') {
    const t: { system: string; value: string }[] = [];
    referenceValues(value, undefined, t, base);
    for (const x of t) out.push({ ...none, system2: x.system, value2: x.value });
  } else if (type === 'string') {
    const s: string[] = [];
    stringParts(value, s);
    for (const x of s) out.push({ ...none, value2: normalizeString(x) });
  } else if (type === 'date') {
    const r: { low: number; high: number }[] = [];
    dateRanges(value, r);
    for (const x of r) out.push({ ...none, low: x.low, high: x.high });
  } else if (type === 'quantity' || type === 'number') {
    const q: { system: string; code: string; low: number; high: number }[] = [];
    quantityValues(value, q);
    for (const x of q) out.push({ system2: x.system, value2: x.code, low: x.low, high: x.high });
  }
  return out;
}

/** Composite rows: per element the composite reaches, its first component's tokens times the other components' values. */
function compositeRows(def: ParamDefinition, resource: Json, out: CompositeEntry[], base: string | undefined): void {
  for (const path of def.paths) {
    for (const element of path.evaluate(resource, resource)) {
      const firsts: { system: string; value: string }[] = [];
      for (const v of values(element, resource, def.first!)) tokenValues(v, firsts);
      if (firsts.length === 0) continue;
      const [second, third] = def.components!;
      let parts = values(element, resource, second!.paths).flatMap((v) => partValues(second!.type, v, base));
      if (third) {
        // MolecularSequence coordinates: chromosome $ start $ end, the start in low and the end in high
        const ends = values(element, resource, third.paths).flatMap((v) => partValues(third.type, v, base));
        parts = parts.flatMap((s) => ends.map((e) => ({ ...s, high: e.low })));
      }
      for (const f of firsts) {
        for (const p of parts) {
          out.push({ param: def.code, system1: f.system, value1: f.value, ...p });
          const c = canonicalQuantity(p.system2, p.value2, p.low, p.high);
          if (c) out.push({ param: canonicalParam(def.code), system1: f.system, value1: f.value, system2: UCUM_SYSTEM, value2: c.code, low: c.low, high: c.high });
        }
      }
    }
  }
}

/**
 * `near` (src/fhir/near.ts): each position with a latitude and a longitude in range is a range row whose
 * low end is the latitude and high end the longitude.
 */
function positionRows(def: ParamDefinition, resource: Json, out: RangeEntry[]): void {
  for (const path of def.paths) {
    for (const value of evaluatePath(resource, path)) {
      const { latitude, longitude } = (value ?? {}) as Json;
      if (typeof latitude !== 'number' || typeof longitude !== 'number') continue;
      if (!(Math.abs(latitude) <= 90 && Math.abs(longitude) <= 180)) continue;
      out.push({ param: def.code, system: '', code: '', low: latitude, high: longitude });
    }
  }
}

/**
 * The prefix of the parameters under which a resource's rows hold those of a resource it contains and
 * refers to through reference parameter `param` as a `type`: `subject:Patient.` (`subject:Patient.name`
 * holds the contained Patient's names). A `.` marks such a parameter: no other has one.
 */
export function containedPrefix(param: string, type: string): string {
  return `${param}:${type}.`;
}

/**
 * The parameter whose rows name the contained resources a resource refers to under `prefix` (their
 * local ids): every one has a row of it, so that a test of absence (`:missing=true`, `:not`) on a
 * contained resource can require one.
 */
export function containedIdParam(prefix: string): string {
  return `${prefix}_id`;
}

/** Contained resources referring to contained resources are followed this many levels (chains nest at most four). */
const CONTAINED_LEVELS = 4;

/**
 * Rows of the resources `resource` contains, for chains into them (R4 search: "a chained condition will
 * be evaluated inside contained resources"). For each reference (`#id`) of a stored reference parameter
 * to a contained resource (of the type its path names, if any): a row of the reference as written (type and
 * `#id`, which no chain, `_include` nor `_revinclude` takes for a resource id, while `:missing` counts
 * it); that resource's own rows, each under its parameter prefixed (containedPrefix); and a row of its
 * local id (containedIdParam); not its sort rows (sortParam), which only `_sort` reads. Its own references to other contained resources are followed the same
 * way, under the longer prefix. A resource a parameter holds inline (a Bundle's `composition` and
 * `message`: its first entry's resource) is searched the same way, its `#id` references resolved
 * among its own contained resources.
 */
function containedRows(resource: Json, rows: IndexRows, base: string | undefined): void {
  const local = containedByRef(resource);
  if (local.size === 0 && resource.resourceType !== 'Bundle') return;
  const visit = (holder: Json, byRef: ReadonlyMap<string, Json>, prefix: string, level: number, seen: ReadonlySet<string>) => {
    for (const def of paramsOf(holder.resourceType as string)) {
      if (def.type !== 'reference' || def.storedAs || def.unionOf || def.andOf) continue;
      for (const path of def.paths) {
        for (const value of evaluatePath(holder, path)) {
          if (value === null || typeof value !== 'object') continue;
          const v = value as Json;
          const inline = typeof v.resourceType === 'string';
          const ref = inline ? undefined : v.reference;
          const target = inline ? v : typeof ref === 'string' && !seen.has(ref) ? byRef.get(ref) : undefined;
          if (!target) continue;
          const type = target.resourceType as string;
          // As the parameter's own rows: of any type its path allows (a parameter stored for another, such
          // as a Bundle's `message` in `composition`'s rows, names other targets than the one it is stored in).
          if (path.targetType && path.targetType !== type) continue;
          // The reference itself, as `#id` (no resource has such an id): `:missing` sees it.
          if (typeof ref === 'string') rows.tokens.push({ param: prefix + def.code, system: type, value: ref });
          const inner = containedPrefix(`${prefix}${def.code}`, type);
          rows.tokens.push({ param: containedIdParam(inner), system: '', value: typeof target.id === 'string' ? target.id : '' });
          const own = ownEntries(target, base);
          for (const e of own.tokens) rows.tokens.push({ ...e, param: inner + e.param });
          for (const e of own.strings) rows.strings.push({ ...e, param: inner + e.param });
          // Not the rows `_sort` reads (sortParam): no search sorts by a contained resource's values (`_contained` refuses `_sort`).
          for (const e of own.ranges) if (!isSortParam(e.param)) rows.ranges.push({ ...e, param: inner + e.param });
          for (const e of own.composites) rows.composites.push({ ...e, param: inner + e.param });
          if (level + 1 < CONTAINED_LEVELS) {
            if (inline) visit(target, containedByRef(target), inner, level + 1, new Set());
            else visit(target, byRef, inner, level + 1, new Set([...seen, ref as string]));
          }
        }
      }
    }
  };
  visit(resource, local, '', 0, new Set());
}

/** A resource's contained resources by the reference that names them (`#id`). */
function containedByRef(resource: Json): Map<string, Json> {
  const byRef = new Map<string, Json>();
  if (!Array.isArray(resource.contained)) return byRef;
  for (const c of resource.contained as Json[]) {
    if (c !== null && typeof c === 'object' && typeof c.resourceType === 'string' && typeof c.id === 'string') byRef.set(`#${c.id}`, c);
  }
  return byRef;
}

/**
 * Search index rows of `resource` for every parameter of its type, and those of the resources it
 * contains (containedRows); `base` is the tenant's FHIR base (referenceValues).
 */
export function indexEntries(resource: Json, base?: string): IndexRows {
  const rows = ownEntries(resource, base);
  containedRows(resource, rows, base);
  return dedupe(rows);
}

/** Rows of `resource` for every parameter of its type (R4 SearchParameter expressions), not deduplicated. */
function ownEntries(resource: Json, base: string | undefined): IndexRows {
  const rows = emptyRows();
  for (const def of paramsOf(resource.resourceType as string)) paramRows(def, resource, rows, base);
  versionedUrlRow(resource, rows);
  return rows;
}

/**
 * A canonical resource's `url|version` as one token row (VERSIONED_URL_PARAM), where it has both: what a
 * versioned canonical reference to it says, compared by chains and `_has` (search-sql.ts canonicalChain).
 */
function versionedUrlRow(resource: Json, rows: IndexRows): void {
  const { url, version } = resource;
  if (typeof url !== 'string' || !url || typeof version !== 'string' || !version || !isCanonicalType(resource.resourceType as string)) return;
  rows.tokens.push({ param: VERSIONED_URL_PARAM, system: '', value: `${url}|${version}` });
}

/**
 * The index rows of `resource` for the parameters named (a parameter's code, or its sort rows' name, sortParam)
 * alone, as indexEntries gives them (not deduplicated): what a sort on
 * those parameters reads of it (src/fhir/search-pin.ts sortPlace), without the cost of every other parameter.
 */
export function paramEntries(resource: Json, params: readonly string[], base?: string): IndexRows {
  const codes = new Set(params.map((p) => (isSortParam(p) ? p.slice(0, -':sort'.length) : p)));
  const defs = paramsOf(resource.resourceType as string).filter((def) => codes.has(def.code));
  // A reference to a contained resource is a row of its parameter too (containedRows): read whole where there may be one.
  if (defs.some((def) => def.type === 'reference') && (Array.isArray(resource.contained) || resource.resourceType === 'Bundle')) return indexEntries(resource, base);
  const rows = emptyRows();
  for (const def of defs) paramRows(def, resource, rows, base);
  return rows;
}

/** The rows of `resource` for the parameter `def`, added to `rows` (not deduplicated). */
function paramRows(def: ParamDefinition, resource: Json, rows: IndexRows, base: string | undefined): void {
  for (const [path, values] of paramValues(def, resource, rows, base)) valueRows(def, path, values, 0, values.length, rows, base);
}

/**
 * The values of `resource` each path of the parameter `def` reaches, for valueRows; a composite or `near`
 * parameter's rows are added to `rows` at once (one value of each at most, in practice), and it reaches none.
 */
function paramValues(def: ParamDefinition, resource: Json, rows: IndexRows, base: string | undefined): [CompiledPath, unknown[]][] {
  if (def.storedAs || def.unionOf || def.andOf) return [];
  if (def.type === 'composite') {
    compositeRows(def, resource, rows.composites, base);
    return [];
  }
  if (def.type === 'special') {
    if (def.code === 'near') positionRows(def, resource, rows.ranges);
    return [];
  }
  return def.paths.map((path) => [path, evaluatePath(resource, path)]);
}

/** The rows of `values[from]` to `values[to - 1]`, reached by `path` of the parameter `def`, added to `rows`. */
function valueRows(def: ParamDefinition, path: CompiledPath, values: unknown[], from: number, to: number, rows: IndexRows, base: string | undefined): void {
  for (let i = from; i < to; i++) simpleRows(def, values[i], path.targetType, rows, base);
}

/**
 * The rows a version is stored with: its search index entries and its words for `_text` and `_content`;
 * `base` is the tenant's FHIR base (referenceValues).
 */
export function storedIndex(resource: Json, base?: string): IndexRows {
  const rows = indexEntries(resource, base);
  const text = textIndexOf(resource);
  if (text) rows.text = text;
  return rows;
}

/**
 * storedIndex in pieces, the event loop let turn between two as `pace` says (pacedTurns): each parameter's values,
 * their rows PACED_VALUES at a time, the contained resources' rows, their deduplication PACED_VALUES tokens at a
 * time, the words; the same rows (test/unit/indexer-paced.test.ts). The index of a 16 MB CodeSystem held the loop
 * about 0.25-0.5 s in one call; a resource indexed within one slice costs no promise.
 */
export function storedIndexPaced(resource: Json, base: string | undefined, pace: () => Promise<void> | undefined): IndexRows | Promise<IndexRows> {
  return drivePaced(indexPieces(resource, base), pace);
}

/** Values (or tokens) between two yields of indexPieces: about 1-5 ms of work. */
export const PACED_VALUES = 2000;

function* indexPieces(resource: Json, base: string | undefined): Generator<void, IndexRows> {
  const rows = emptyRows();
  for (const def of paramsOf(resource.resourceType as string)) {
    for (const [path, values] of paramValues(def, resource, rows, base)) {
      for (let from = 0; from < values.length; from += PACED_VALUES) {
        valueRows(def, path, values, from, Math.min(from + PACED_VALUES, values.length), rows, base);
        if (from + PACED_VALUES < values.length) yield;
      }
    }
    yield;
  }
  versionedUrlRow(resource, rows);
  containedRows(resource, rows, base);
  yield;
  const merging = tokenMerger(rows.tokens.length);
  for (let from = 0; from < rows.tokens.length; from += PACED_VALUES) {
    merging.add(rows.tokens, from, Math.min(from + PACED_VALUES, rows.tokens.length));
    yield;
  }
  const out = dedupe(rows, merging.merged);
  yield;
  const text = textIndexOf(resource);
  if (text) out.text = text;
  return out;
}

/** Up to this many entries, duplicates are found by comparing pairs (no key strings to build). */
const PAIRWISE_DEDUPE = 16;

function dedupeBy<T extends object>(entries: T[], key: (e: T) => string): T[] {
  if (entries.length < 2) return entries;
  if (entries.length <= PAIRWISE_DEDUPE) {
    const out: T[] = [];
    for (const e of entries) if (!out.some((o) => sameEntry(o, e))) out.push(e);
    return out;
  }
  const seen = new Set<string>();
  return entries.filter((e) => {
    const k = key(e);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

function sameEntry(a: object, b: object): boolean {
  for (const k in a) if ((a as Record<string, unknown>)[k] !== (b as Record<string, unknown>)[k]) return false;
  return true;
}

/**
 * Token rows one to a (param, system, value), as both databases key them (SQLite's primary key `(res, k,
 * value)` keeps the first row written), each carrying the texts of every row of that value, apart
 * (joinDisplays): `:text` then finds a coded value by any of its displays, whichever came first.
 */
function mergeTokens(entries: IndexEntry[]): IndexEntry[] {
  if (entries.length < 2) return entries;
  const merging = tokenMerger(entries.length);
  merging.add(entries, 0, entries.length);
  return merging.merged;
}

/** mergeTokens of `count` entries, added a range at a time (`add`), the rows so far in `merged`. */
function tokenMerger(count: number): { add(entries: IndexEntry[], from: number, to: number): void; merged: IndexEntry[] } {
  const out: IndexEntry[] = [];
  const byValue = count <= PAIRWISE_DEDUPE ? undefined : new Map<string, number>();
  const add = (entries: IndexEntry[], from: number, to: number) => {
    for (let i = from; i < to; i++) {
      const e = entries[i]!;
      const k = byValue && `${e.param}\u0000${e.system}\u0000${e.value}`;
      const at = byValue ? byValue.get(k!) : out.findIndex((o) => o.param === e.param && o.system === e.system && o.value === e.value);
      if (at === undefined || at < 0) {
        byValue?.set(k!, out.length);
        out.push(e);
        continue;
      }
      const kept = out[at]!;
      if (!e.display || kept.display === e.display) continue;
      const display = kept.display ? distinctTexts([...kept.display.split(DISPLAY_SEPARATOR), ...e.display.split(DISPLAY_SEPARATOR)]) : e.display;
      out[at] = { ...kept, display };
    }
  };
  return { add, merged: out };
}

/** `rows` without duplicates; `tokens` their tokens merged already (mergeTokens). */
function dedupe(rows: IndexRows, tokens = mergeTokens(rows.tokens)): IndexRows {
  return {
    tokens,
    strings: dedupeBy<StringEntry>(rows.strings, (e) => `${e.param}\u0000${e.exact}`),
    ranges: dedupeBy<RangeEntry>(rows.ranges, (e) => `${e.param}\u0000${e.system}\u0000${e.code}\u0000${e.low}\u0000${e.high}`),
    composites: dedupeBy<CompositeEntry>(
      rows.composites,
      (e) => `${e.param}\u0000${e.system1}\u0000${e.value1}\u0000${e.system2}\u0000${e.value2}\u0000${e.low}\u0000${e.high}`,
    ),
  };
}

/**
 * Ids of the patients whose compartment holds `resource`, per the R4 Patient CompartmentDefinition.
 * A Patient is in its own compartment; a reference to another server's Patient (not under `base`, the
 * tenant's FHIR base) puts it in none.
 */
export function compartmentsOf(resource: Json, base?: string): string[] {
  const type = resource.resourceType as string;
  const paths = compartmentPaths(type);
  if (!paths) return [];
  const patients = new Set<string>();
  if (type === 'Patient' && typeof resource.id === 'string') patients.add(resource.id);
  for (const path of paths) {
    for (const value of evaluatePath(resource, path)) {
      const ref = (value as Json | null)?.reference;
      if (typeof ref !== 'string') continue;
      const parsed = parseReference(ref, base);
      if (parsed?.type === 'Patient') patients.add(parsed.id);
    }
  }
  return [...patients];
}
