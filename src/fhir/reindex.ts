import { FhirError } from '../errors.ts';
import type { Condition, NumberTest, SearchQuery, SortKey } from '../store/interface/search.ts';
import type { ReindexTable, Store } from '../store/types.ts';
import { paramsOf } from './definitions.ts';
import { canonicalParam, compartmentsOf, sortParam, storedIndex } from './indexer.ts';
import { R4_RESOURCE_TYPES } from './resource-types.ts';
import { isCanonicalType } from './search-canonical.ts';
import { UCUM_SYSTEM } from './ucum.ts';
import { reachesContactPoints } from './contact-points.ts';

/**
 * The index model this release writes: which search parameters get rows and in what form. A database
 * whose `index_state.model` is lower holds rows of an older model and is reindexed before serving
 * (`cinder serve` runs it at start; `cinder reindex` on demand). Raise it with any change to the rows
 * the indexer writes for stored content, and say in MODEL_CHANGES which resources the change touches.
 * Model 2 added the words of `_text` and `_content` (`search_text`); model 3 an Identifier's type text,
 * which token `:text` searches; model 4 a Location's position, which `near` searches; model 5 a UCUM
 * quantity's value in its canonical unit (src/fhir/ucum.ts), which quantity searches with a UCUM unit read;
 * model 6 the rows of contained resources a resource refers to, which chains read (indexer.ts containedRows);
 * model 7 those of the contained resources that a reference parameter restricted to a type
 * (`where(resolve() is Patient)`) names, which model 6 did not resolve; model 8 a reference to another
 * server's resource as its URL, where it was taken for this tenant's resource of the same type and id
 * (and its patient's compartment); model 9 a Timing as one range over its outer limits, where each event
 * and its bounds were ranges of their own, and a fraction of a second of one or two digits as the range
 * its precision implies (`.1` 100 ms wide), where every fraction was 1 ms wide (dates.ts dateRange);
 * model 10 a string's full case folding (`ß` as `ss`, `ﬁ` as `fi`, `ı` as `i`; indexer.ts normalizeString),
 * where it was only lower-cased; model 11 one token row per value carrying every text of it (a
 * CodeableConcept's text, each Coding's display, an Identifier's type text) apart, where a row per
 * Coding joined its CodeableConcept's text and display with a space, and two rows of one value kept
 * one of their texts (indexer.ts mergeTokens); model 12 a Range's human `unit` as a Quantity's, a second
 * row that `value||unit` finds (indexer.ts quantityValues); model 13 a leap second (`23:59:60`) as the
 * last millisecond of its minute, where it had no row (dates.ts dateRange); model 14 a Quantity with a
 * comparator as the range it bounds (`<5` below 5, `>5` above), where it was the value alone (indexer.ts
 * quantityValues); model 15 a string's `exact` form composed (NFC), where it was the text as written, so
 * that `:exact` finds canonically equivalent text however it is encoded (indexer.ts exactString); model 16
 * a row a quantity under its parameter's sort key, its value in its canonical UCUM unit where it has one,
 * which `_sort` on a quantity parameter reads (indexer.ts sortParam), where the sort read the values as
 * written whatever their unit; model 17 a ContactPoint's value lower-cased in its token rows
 * (contact-points.ts contactKey), which token searches on a ContactPoint parameter compare lower-cased;
 * model 18 a Coding's display without a code as a string row of the parameter's `:text`, which token
 * `:text` finds (indexer.ts simpleRows), where it had no row at all; model 19 a Coding, Identifier or
 * ContactPoint with a system but no code or value as a token row of its system with an empty value, which
 * `[system]|` finds (indexer.ts tokenValues), where it had none; model 20 a UCUM quantity's canonical rows and
 * sort key for the units of every atom of UCUM's essence (src/fhir/ucum.ts: `[psi]`, `Torr`, `[HPF]`, `[CFU]/mL`,
 * the US survey, troy and apothecaries' units...), where a unit outside a table of about 130 atoms had none
 * and sorted as written; model 21 the same rows of a UCUM unit whose leading `/` divides its first component
 * alone (`/s.m` is m/s, `/kg/d` 1/(kg.d)), where it divided the whole unit, and of one holding an annotated
 * number (`/100{WBCs}`) or parenthesis, where it had none (src/fhir/ucum.ts); model 22 a string's Latin
 * letters whose mark does not decompose and its ligatures folded to their letters (`ø` as `o`, `ł` as `l`, `æ`
 * as `ae`, `þ` as `th`; indexer.ts normalizeString), where they were kept, and read so by a name's Soundex
 * (`phonetic`; indexer.ts soundex), which dropped them; model 23 the words of `_text` and `_content` case folded
 * as string search folds them (case-fold.ts foldCase: `ß` as `ss`, a final `ς` as `σ`, `ø` as `o`, `æ` as `ae`;
 * text-index.ts textWords), where they were only lower-cased; model 24 a canonical resource's `url|version` as one
 * token row (VERSIONED_URL_PARAM), which chains and `_has` through a canonical reference compare with a versioned
 * reference, where they joined its `url` and `version` rows (unequal to the reference's bounded row on PostgreSQL
 * for a url of more than about 1,900 bytes), and on PostgreSQL a marker row beside such a long versioned
 * reference (index-limits.ts versionedMarkers), without which its `url` row was taken for one naming every version.
 */
export const INDEX_MODEL = 24;

/**
 * What each model changed. `touches`: a test of a stored resource's JSON, true for every resource whose
 * rows may differ from the model before (it may name more); none: every resource. `tables`: the index
 * tables whose rows it changes, when not all of them (nor the words or the compartments). `reads`: the
 * search conditions that read the rows it changed, which give incomplete answers until a reindex from an
 * older model is done (`serve` answers every other search meanwhile: gatedStore); none: every condition.
 * (`search_text` among `tables` names the words of `_text` and `_content`; the compartments are never named.)
 * A reindex from an older model rebuilds the resources that a test of a model after it names, every
 * resource when one of those models has none (model 1 changed rows of every resource), and of those only
 * the tables the models name, when each names some; a forced one rebuilds every resource, every row.
 */
interface ModelChange {
  touches?: (content: string) => boolean;
  tables?: ReindexTable[];
  reads?: (c: Condition) => boolean;
  /** Whether it changes compartments: a compartment search (or a patient-context token's) reads them. */
  compartments?: true;
  /** The sort keys that read the rows it changed (a sort is no condition: `reads` names none of them). */
  sorts?: (k: SortKey) => boolean;
}

const MODEL_CHANGES: Record<number, ModelChange | undefined> = {
  // The words of `_text` and `_content` (search_text), of every resource.
  2: { reads: (c) => c.kind === 'text' },
  // An Identifier with a type that has a text: `"type":{...,"text":...}`; its token rows' display.
  3: { touches: (content) => TYPE_OBJECT.test(content) && TEXT_FIELD.test(content), tables: ['search_index'], reads: (c) => c.kind === 'token-text' },
  // A Location's position: `"position":{...}`; a range row of `near`.
  4: {
    touches: (content) => POSITION.test(content), tables: ['search_range'],
    reads: (c) => c.kind === 'near' || (c.kind === 'missing' && c.params.includes('near')),
  },
  // A UCUM quantity names its system (`"system":"http://unitsofmeasure.org"`); canonical range and composite rows.
  5: {
    touches: (content) => content.includes(UCUM_SYSTEM), tables: ['search_range', 'search_composite'],
    reads: (c) => (c.kind === 'number' || c.kind === 'composite') && c.param.endsWith(CANONICAL_SUFFIX),
  },
  // A resource that contains resources (`"contained":[...]`), or a Bundle, whose first entry's resource
  // `composition` and `message` hold inline; rows of every table under a prefixed parameter, and
  // reference rows of `#id`, which `:missing` on a reference parameter reads.
  6: {
    touches: (content) => CONTAINED.test(content) || BUNDLE.test(content), tables: ['search_index', 'search_string', 'search_range', 'search_composite'],
    reads: readsContainedRows,
  },
  // A resource of a type with a reference parameter restricted to a type and stored under its own name
  // (AuditEvent.patient, EpisodeOfCare.care-manager) that contains resources: its rows as model 6's.
  7: {
    touches: (content) => CONTAINED.test(content) && restrictedTypes().some((t) => content.includes(`"${t}"`)),
    tables: ['search_index', 'search_string', 'search_range', 'search_composite'],
    reads: readsContainedRows,
  },
  // A resource with an absolute reference (`"reference":"http..."`), which names this tenant's resource
  // only under its FHIR base: reference rows and the compartments. Every condition on references reads them.
  8: {
    touches: (content) => ABSOLUTE_REFERENCE.test(content),
    reads: readsReferenceRows,
    compartments: true,
  },
  // A Timing with events (`"event":["..."`; with a bounds Period too), now one range over its outer limits,
  // or a dateTime or instant with a fraction of one or two digits, now 100 or 10 ms wide: range rows (the
  // one composite with a date component, code-value-date, keeps no rows: it is searched as code and
  // value-date). Date conditions read them.
  9: {
    touches: (content) => TIMING_EVENTS.test(content) || SHORT_FRACTION.test(content),
    tables: ['search_range'],
    reads: readsDateRows,
    sorts: sortsOnRanges,
  },
  // Text holding a character that full case folding changes (`ß`, `ﬁ`, `ı`, `ſ`, `µ`, a Greek sigma...),
  // now folded: the normalised values of string rows, of a token's `:text` display and of a composite's
  // string component. Conditions comparing those read them; `:exact` compares the text as written.
  10: {
    touches: (content) => FOLDED.test(content) || FOLDED_ESCAPE.test(content),
    tables: ['search_index', 'search_string', 'search_composite'],
    reads: readsFoldedRows,
    // A string sort orders by the normalised values.
    sorts: (k) => k.by === 'param' && k.table === 'search_string',
  },
  // A token row's `display`, which `:text` searches, now every text of its value apart: a CodeableConcept's
  // text with a Coding's display, or two texts of one value (a repeated Coding, two CodeableConcepts or
  // Identifiers of one code). Only a resource with a `"display":"..."` or a `"text":"..."` (a
  // CodeableConcept's, an Identifier type's; an Annotation's too, which names more) can have one. Token
  // `:text` reads them. (PostgreSQL kept two rows of one value with two texts, now one: until such a
  // resource is rebuilt, a count of that one code, which counts rows, counts it twice, as it did before.)
  11: {
    touches: (content) => DISPLAY_FIELD.test(content) || TEXT_STRING.test(content),
    tables: ['search_index'],
    reads: (c) => c.kind === 'token-text',
  },
  // A Range (`"low":{...}` or `"high":{...}`) whose end states a `unit` (`"unit":"..."`), now a second
  // row under that unit (system '') where it differs from the code: range rows, and composite rows of
  // `context-type-quantity` (a UsageContext's valueRange). A quantity test naming a code without a
  // system (`gt20||years`) reads them.
  12: {
    touches: (content) => RANGE_END.test(content) && UNIT_FIELD.test(content),
    tables: ['search_range', 'search_composite'],
    reads: readsUnitRows,
  },
  // A dateTime or instant at a leap second (`"...T23:59:60Z"`), which had no date row, now the last
  // millisecond of its minute: range rows (no composite with rows has a date component). Date conditions
  // read them.
  13: {
    touches: (content) => LEAP_SECOND.test(content),
    tables: ['search_range'],
    reads: readsDateRows,
    sorts: sortsOnRanges,
  },
  // A Quantity with a comparator (`"comparator":"<"`), now the range it bounds, open at one end: range
  // rows (and their canonical UCUM rows), and composite rows of a quantity component. Number and
  // quantity conditions read them.
  14: {
    touches: (content) => COMPARATOR.test(content),
    tables: ['search_range', 'search_composite'],
    reads: readsNumberRows,
  },
  // Text not in Unicode's composed form (NFC: `e` and a combining acute, where `é` is one code point), as
  // itself or as JSON escapes, now composed in the `exact` column of string rows; the normalised `value`
  // was decomposed already (NFD), so only `:exact` reads them.
  15: {
    touches: notComposed,
    tables: ['search_string'],
    reads: (c) => c.kind === 'string' && c.values.some((v) => v.match === 'exact'),
  },
  // A quantity (a number `"value":`, a Quantity's or a Range end's), now with a row a value under its
  // parameter's sort key (indexer.ts sortParam: its value in its canonical UCUM unit, else as written):
  // range rows. `_sort` on a quantity parameter reads them; no condition does.
  16: {
    touches: (content) => NUMBER_VALUE.test(content),
    tables: ['search_range'],
    reads: () => false,
    sorts: (k) => k.by === 'param' && k.param.endsWith(SORT_SUFFIX),
  },
  // A ContactPoint (every parameter over ContactPoints reads them from a `"telecom":` or `"contact":`
  // element), now lower-cased in its token rows (contact-points.ts contactKey). Token conditions on a
  // ContactPoint parameter (`email`, `phone`, `telecom`, in a chain too) read them, and so does `_sort`
  // on one, which orders by them (rows as written and lower-cased mixed: `Bob@` before `alice@`).
  17: {
    touches: (content) => CONTACT_POINT.test(content),
    tables: ['search_index'],
    reads: (c) => c.kind === 'token' && contactPointParams().has(c.param.slice(c.param.lastIndexOf('.') + 1)),
    sorts: (k) => k.by === 'param' && k.table === 'search_index' && contactPointParams().has(k.param),
  },
  // A Coding's display without a code (only a resource with a `"display":"..."` can have one), now a
  // string row of its parameter's `:text`: string rows. Token `:text` and `:missing` read them.
  18: {
    touches: (content) => DISPLAY_FIELD.test(content),
    tables: ['search_string'],
    reads: (c) => (c.kind === 'string' && c.param.endsWith(':text')) || (c.kind === 'missing' && c.params.some((p) => p.endsWith(':text'))),
  },
  // A Coding, Identifier or ContactPoint with a system but no code or value, now a token row of its system
  // (a composite's first component too), which carries its display (model 18's string row of `:text` is written
  // still for the displays of a concept without a coded coding: `$lastn` groups such a code by it). Token conditions on a system alone (`[system]|`, `:not` of one, in a chain
  // too) or `_filter`'s `ne`, `:text`, composites on a system alone and `:missing` read them, and so does
  // `_sort` on a token parameter (an empty code, first ascending).
  19: {
    touches: (content) => SYSTEM_FIELD.test(content) && holdsSystemAlone(JSON.parse(content)),
    tables: ['search_index', 'search_string', 'search_composite'],
    reads: (c) => (c.kind === 'token' && (c.unequal === true || c.values.some((v) => v.value === undefined)))
      || c.kind === 'token-text' || (c.kind === 'string' && c.param.endsWith(':text'))
      || (c.kind === 'composite' && c.tests.some((t) => t.value1 === undefined))
      || (c.kind === 'missing' && (c.table === 'search_index' || c.table === 'search_composite' || c.params.some((p) => p.endsWith(':text')))),
    sorts: (k) => k.by === 'param' && (k.table === 'search_index' || k.table === 'search_composite'),
  },
  // A UCUM quantity whose unit has an atom the essence defines and the table before it did not (or a binary
  // prefix): canonical range and composite rows, and the sort key (in its canonical unit, not as written). A new
  // atom shadows no unit the table read before (`ph`, phot, was no `p` and `h`: hours take no prefix). Conditions
  // on canonical rows read them, and so does `_sort` on a quantity.
  20: {
    touches: (content) => content.includes(UCUM_SYSTEM) && holdsUcumCode(JSON.parse(content), namesModel20Atom),
    tables: ['search_range', 'search_composite'],
    reads: (c) => (c.kind === 'number' || c.kind === 'composite') && c.param.endsWith(CANONICAL_SUFFIX),
    sorts: (k) => k.by === 'param' && k.param.endsWith(SORT_SUFFIX),
  },
  // A UCUM quantity whose unit begins with `/` and goes on after its first component (`/kg/d`, `/s.m`), which
  // model 20 read as the whole unit divided, or holds an annotated number or parenthesis (`/100{WBCs}`, `(2){x}`),
  // which it did not read: the same rows as model 20's, read by the same conditions and sorts.
  21: {
    touches: (content) => content.includes(UCUM_SYSTEM) && MODEL_21_HINT.test(content) && holdsUcumCode(JSON.parse(content), readDifferentlyByModel21),
    tables: ['search_range', 'search_composite'],
    reads: (c) => (c.kind === 'number' || c.kind === 'composite') && c.param.endsWith(CANONICAL_SUFFIX),
    sorts: (k) => k.by === 'param' && k.param.endsWith(SORT_SUFFIX),
  },
  // Text holding a Latin letter whose mark does not decompose or a ligature (`ø`, `ł`, `đ`, `æ`, `œ`, `þ`...,
  // indexer.ts UNDECOMPOSED, in either case, or a letter that decomposes to one: `ǿ`, `ǽ`), as itself or as
  // a JSON escape, now folded to its letters: the same rows as model 10's, read by the same conditions and sorts.
  22: {
    touches: (content) => UNDECOMPOSED.test(content) || UNDECOMPOSED_ESCAPE.test(content),
    tables: ['search_index', 'search_string', 'search_composite'],
    reads: readsFoldedRows,
    sorts: (k) => k.by === 'param' && k.table === 'search_string',
  },
  // Text holding a character that full case folding changes or a letter model 22 folded (model 10's and model 22's
  // characters, the same set: text-index.ts textWords folds as normalizeString does), as itself, as a JSON escape or
  // as a narrative's numeric character reference (`&#248;`), now folded in the words of `_text` and `_content`: the
  // words alone. Full-text conditions read them.
  23: {
    touches: (content) => FOLDED.test(content) || FOLDED_ESCAPE.test(content) || UNDECOMPOSED.test(content) || UNDECOMPOSED_ESCAPE.test(content) || referencesFolded(content),
    tables: ['search_text'],
    reads: (c) => c.kind === 'text',
  },
  // A canonical resource with a url and a version (its own, not an extension's url beside a Coding's version:
  // versionedCanonical), now a row of its `url|version`; a resource with a versioned canonical reference of a long
  // url (a string of 600 characters or more before a `|`, either written as JSON escapes: holdsLongVersioned), now a
  // marker row on PostgreSQL: reference rows. Canonical chains, `_has` and `_revinclude` read them, and so does
  // `_filter`'s `ne` on a reference (SqlBuilder.tokens: a long url's versions beside its marker).
  24: {
    touches: (content) => versionedCanonical(content) || holdsLongVersioned(content),
    tables: ['search_index'],
    reads: (c) => ((c.kind === 'token' || c.kind === 'chain' || c.kind === 'has') && c.canonical === true) || (c.kind === 'token' && c.unequal === true && c.reference === true),
  },
};

/**
 * Whether `content` is a canonical resource with a url and a version of its own (indexer.ts versionedUrlRow), read
 * only when both names are in its text (JSON that another writer spaced, `"url" :`, too): an extension's `url`
 * beside a Coding's `version` in another resource is no such resource.
 */
function versionedCanonical(content: string): boolean {
  if (!URL_FIELD.test(content) || !VERSION_FIELD.test(content)) return false;
  // Its type read off the head, where Cinder writes it (resource.ts stampHead): most such resources are no canonical one.
  const head = LEADING_TYPE.exec(content);
  if (head !== null && !isCanonicalType(head[1]!)) return false;
  const r = JSON.parse(content) as { resourceType?: unknown; url?: unknown; version?: unknown };
  return typeof r.url === 'string' && r.url !== '' && typeof r.version === 'string' && r.version !== '' && typeof r.resourceType === 'string' && isCanonicalType(r.resourceType);
}
const URL_FIELD = /"url"\s*:/;
const VERSION_FIELD = /"version"\s*:/;
const LEADING_TYPE = /^\{"resourceType":"([A-Za-z]+)"/;

/**
 * Whether `content` holds a JSON string with 600 characters or more before its first `|`: a versioned canonical whose
 * url may be past the index bound (index-limits.ts versionedMarkers; it marks one of 634 or more). Text as
 * JSON.stringify writes it is matched by LONG_VERSIONED_CANONICAL; text holding an escaped quote (`\"`, a url may hold
 * a `"`) or an escaped `|` (`\u007c`, as another writer may put it) is read string by string (longVersionedString).
 */
function holdsLongVersioned(content: string): boolean {
  if (content.length <= VERSIONED_URL_CHARS) return false;
  if (LONG_VERSIONED_CANONICAL.test(content)) return true;
  // Read string by string only where it could differ: an escaped `|`, or a `|` beside an escaped quote (a narrative's
  // `xmlns=\"...\"` in a resource with no `|` is no versioned canonical).
  if (!BAR_ESCAPE.test(content) && !(content.includes('|') && content.includes('\\"'))) return false;
  return longVersionedString(content);
}
const VERSIONED_URL_CHARS = 600;
const LONG_VERSIONED_CANONICAL = /"[^"|]{600,}\|/;
const BAR_ESCAPE = /\\u007c/i;

/**
 * Whether a string of the JSON text `content` has VERSIONED_URL_CHARS characters or more (UTF-16 units, as the
 * indexer measures them) before its first `|`, each escape read as the character it stands for (`\u007c` is a `|`).
 * One pass over the text.
 */
function longVersionedString(content: string): boolean {
  let inString = false;
  let count = 0;
  let barred = false;
  for (let i = 0; i < content.length; i++) {
    const c = content.charCodeAt(i);
    if (!inString) {
      if (c === QUOTE) {
        inString = true;
        count = 0;
        barred = false;
      }
      continue;
    }
    if (c === QUOTE) {
      inString = false;
      continue;
    }
    let bar = c === BAR;
    if (c === BACKSLASH) {
      const next = content.charCodeAt(++i);
      if (next === U) {
        bar = parseInt(content.slice(i + 1, i + 5), 16) === BAR;
        i += 4;
      }
    }
    if (barred) continue;
    if (bar) {
      if (count >= VERSIONED_URL_CHARS) return true;
      barred = true;
    } else count++;
  }
  return false;
}
const QUOTE = 0x22;
const BAR = 0x7c;
const BACKSLASH = 0x5c;
const U = 0x75;

/**
 * Whether a narrative's numeric character reference (`&#248;`, `&#xD8;`; text-index.ts narrativeText decodes them
 * into the words) names a character model 23 folds. An `&` written as a JSON escape (`\u0026`) is read back first.
 */
function referencesFolded(content: string): boolean {
  const text = AMPERSAND_ESCAPE.test(content) ? JSON.stringify(JSON.parse(content)) : content;
  if (!text.includes('&#')) return false;
  for (const m of text.matchAll(CHARACTER_REFERENCE)) {
    const ref = m[1]!;
    const code = ref[0] === 'x' ? parseInt(ref.slice(1), 16) : parseInt(ref, 10);
    if (code <= 0x7f || code > 0x10ffff) continue;
    const c = String.fromCodePoint(code);
    if (FOLDED.test(c) || UNDECOMPOSED.test(c)) return true;
  }
  return false;
}
const CHARACTER_REFERENCE = /&#(x[0-9a-fA-F]+|[0-9]+);/g;
const AMPERSAND_ESCAPE = /\\u0026/i;

/**
 * Whether src/fhir/ucum.ts reads `code` otherwise since model 21: a leading `/` with an operator after it
 * (it may be one inside a parenthesis or brackets, `/(L.h)`: such a code is rebuilt all the same), a number
 * (a component of digits alone) or a closing parenthesis before an annotation.
 */
function readDifferentlyByModel21(code: string): boolean {
  return (code.startsWith('/') && /[./]/.test(code.slice(1))) || ANNOTATED_NUMBER.test(code) || code.includes('){');
}
const ANNOTATED_NUMBER = /(?:^|[./(])\d+\{/;
/** Text that such a code puts in stored JSON (a `"code"` beginning with `/`; a digit or `)` before `{`, in a string alone): the JSON read only then. */
const MODEL_21_HINT = /"code"\s*:\s*"\/|[\d)]\{/;

/**
 * The atoms src/fhir/ucum.ts first read in model 20 (UCUM's essence less the table before it), the binary
 * prefixes, and `[g]`, which the essence lets take a prefix (`k[g]`) and the table did not: a unit code holding
 * none of them, nor a prefixed barn (PREFIXED_BARN), reduces as it did (a code holding one as text, `[psi]` in
 * an annotation, is rebuilt all the same). Fixed: it says what model 20 changed, whatever later tables add.
 */
const MODEL_20_ATOMS = (
  "' '' AU pc [c] [h] [k] [eps_0] [mu_0] [e] [m_e] [m_p] [G] Torr [ly] Ky Gal Bi Mx Oe Gb sb Lmb ph [fth_i] " +
  "[kn_i] [bf_i] [cr_i] [cml_i] [hd_i] [ft_us] [yd_us] [in_us] [rd_us] [ch_us] [lk_us] [rch_us] [rlk_us] " +
  "[fth_us] [fur_us] [mi_us] [acr_us] [srd_us] [smi_us] [sct] [twp] [mil_us] [in_br] [ft_br] [rd_br] [ch_br] " +
  "[lk_br] [fth_br] [pc_br] [yd_br] [mi_br] [nmi_br] [kn_br] [acr_br] [crd_us] [bu_us] [gal_wi] [pk_us] " +
  "[dqt_us] [dpt_us] [pk_br] [bu_br] [fdr_br] [min_br] [lbf_av] [pwt_tr] [oz_tr] [lb_tr] [sc_ap] [dr_ap] " +
  "[oz_ap] [lb_ap] [oz_m] [lne] [pnt] [pca] [pnt_pr] [pca_pr] [pied] [pouce] [ligne] [didot] [cicero] cal_[15] " +
  "cal_[20] cal_m [Btu_39] [Btu_59] [Btu_60] [Btu_m] [Btu_IT] [Btu_th] [Btu] [HP] tex [den] [PRU] [wood'U] [Ch] " +
  "[hnsf'U] [MET] [S] [HPF] [LPF] st att mho [psi] circ sph [car_m] [car_Au] [smoot] bit By [hp_X] [hp_C] " +
  "[hp_M] [hp_Q] [kp_X] [kp_C] [kp_M] [kp_Q] [USP'U] [GPL'U] [MPL'U] [APL'U] [beth'U] [anti'Xa'U] [todd'U] " +
  "[dye'U] [smgy'U] [bdsk'U] [ka'U] [knk'U] [mclg'U] [tb'U] [CCID_50] [TCID_50] [EID_50] [PFU] [FFU] [CFU] [IR] " +
  "[BAU] [AU] [Amb'a'1'U] [PNU] [Lf] [D'ag'U] [FEU] [ELU] [EU] [degRe]"
).split(' ').concat(['Ki', 'Mi', 'Gi', 'Ti', '[g]']);
/** A barn with a prefix (`mb`), which the table read and the essence, whose barn takes none, does not. */
const PREFIXED_BARN = /(?:^|[./(])(?:da|[YZEPTGMkhdcmunpfazy])b(?:[+-]?\d+)?(?=$|[./(){])/;

function namesModel20Atom(code: string): boolean {
  let named = model20Named.get(code);
  if (named === undefined) {
    named = (MODEL_20_ATOM ??= new RegExp(MODEL_20_ATOMS.map((a) => a.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'))).test(code) || PREFIXED_BARN.test(code);
    // Codes repeat (a few hundred units in most data): each is tested once, up to a bound.
    if (model20Named.size < MODEL_20_NAMED_KEPT) model20Named.set(code, named);
  }
  return named;
}
/** Any of MODEL_20_ATOMS, as one expression (a test per atom took ten times a resource's JSON.parse). */
let MODEL_20_ATOM: RegExp | undefined;
const model20Named = new Map<string, boolean>();
const MODEL_20_NAMED_KEPT = 10_000;

/** Whether `node` holds an object of the UCUM system whose `code` (a unit) passes `test`, at any depth. */
function holdsUcumCode(node: unknown, test: (code: string) => boolean): boolean {
  if (node === null || typeof node !== 'object') return false;
  if (Array.isArray(node)) return node.some((n) => holdsUcumCode(n, test));
  const o = node as Record<string, unknown>;
  if (o.system === UCUM_SYSTEM && typeof o.code === 'string' && test(o.code)) return true;
  return Object.values(o).some((v) => holdsUcumCode(v, test));
}

/** Whether `node` holds an object with a `system` but neither a `code` nor a `value` string (indexer.ts tokenValues), at any depth. */
function holdsSystemAlone(node: unknown): boolean {
  if (node === null || typeof node !== 'object') return false;
  if (Array.isArray(node)) return node.some(holdsSystemAlone);
  const o = node as Record<string, unknown>;
  if (typeof o.system === 'string' && o.system !== '' && typeof o.code !== 'string' && typeof o.value !== 'string') return true;
  return Object.values(o).some(holdsSystemAlone);
}

/**
 * A sort on range rows: a date sort orders by the rows models 9 and 13 rebuild. The key does not say
 * whether its parameter is a date or a number, so number sorts wait too (only during such a reindex).
 */
function sortsOnRanges(k: SortKey): boolean {
  return k.by === 'param' && k.table === 'search_range';
}

/**
 * Whether stored JSON holds text that is not in Unicode's composed form (NFC), written as itself or as
 * `\u` escapes (read back as the characters they stand for). Most stored JSON is ASCII throughout,
 * which is composed: it needs a test of its escapes alone, where it has any.
 */
function notComposed(content: string): boolean {
  if (NOT_ASCII.test(content) && content.normalize('NFC') !== content) return true;
  if (!ESCAPE.test(content)) return false;
  const text = JSON.stringify(JSON.parse(content));
  return text.normalize('NFC') !== text;
}

/** A quantity test naming a unit code and no system, which a row of a stated human unit answers. */
function readsUnitRows(c: Condition): boolean {
  const byUnit = (t: NumberTest) => t.code !== undefined && t.system === undefined;
  switch (c.kind) {
    case 'number': return c.tests.some(byUnit);
    case 'composite': return c.tests.some((t) => t.parts.some((p) => p.kind === 'number' && byUnit(p.test)));
    default: return false;
  }
}

/**
 * The conditions that read normalised strings: string values other than `:exact`, token `:text`, a
 * composite's string component.
 */
function readsFoldedRows(c: Condition): boolean {
  switch (c.kind) {
    case 'string': return c.values.some((v) => v.match !== 'exact');
    case 'token-text': return true;
    case 'composite': return c.tests.some((t) => t.parts.some((p) => p.kind === 'string'));
    default: return false;
  }
}

/** The conditions that read number and quantity rows: number and quantity parameters, and a composite's quantity part. */
function readsNumberRows(c: Condition): boolean {
  return c.kind === 'number' || (c.kind === 'composite' && c.tests.some((t) => t.parts.some((p) => p.kind === 'number')));
}

/** The conditions that read date rows: date parameters (and a composite's date part, should one keep rows). */
function readsDateRows(c: Condition): boolean {
  return c.kind === 'date' || (c.kind === 'composite' && c.tests.some((t) => t.parts.some((p) => p.kind === 'date')));
}

/** The conditions that read reference rows or compartments: references, chains, `_has`, compartments, `:missing` on tokens and references. */
function readsReferenceRows(c: Condition): boolean {
  switch (c.kind) {
    case 'token': return c.reference === true;
    case 'chain': case 'has': case 'compartment': return true;
    case 'missing': return c.table === 'search_index';
    default: return false;
  }
}

/** The conditions that read rows of contained resources (a prefixed parameter), or reference rows (`:missing`). */
function readsContainedRows(c: Condition): boolean {
  return 'param' in c ? c.param.includes('.') : c.kind === 'missing' && (c.table === 'search_index' || c.params.some((p) => p.includes('.')));
}

let restricted: string[] | undefined;
/** The types with a stored reference parameter whose paths are restricted to a type (model 7). */
function restrictedTypes(): string[] {
  return (restricted ??= R4_RESOURCE_TYPES.filter((t) => paramsOf(t).some((d) =>
    d.type === 'reference' && !d.storedAs && !d.unionOf && !d.andOf && d.paths.some((p) => p.targetType !== undefined))));
}
let contactPoints: Set<string> | undefined;
/** The codes of the token parameters over ContactPoints, of every type (`email`, `phone`, `telecom`; model 17). */
function contactPointParams(): Set<string> {
  return (contactPoints ??= new Set(R4_RESOURCE_TYPES.flatMap((t) => paramsOf(t).filter(reachesContactPoints).map((d) => d.code))));
}
const CONTACT_POINT = /"(?:telecom|contact)"\s*:/;
const CONTAINED = /"contained"\s*:\s*\[/;
const ABSOLUTE_REFERENCE = /"reference"\s*:\s*"[A-Za-z][A-Za-z0-9+.-]*:(?!uuid:|oid:)/;
const BUNDLE = /"resourceType"\s*:\s*"Bundle"/;
// (A primitive array with extensions holds `null` where an item has no value: `"event":[null,"2020-..."]`.)
const TIMING_EVENTS = /"event"\s*:\s*\[\s*(?:null\s*,\s*)*"/;
const SHORT_FRACTION = /"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{1,2}(?:Z|[+-]\d{2}:\d{2})?"/;
// The characters whose normalised form model 10 changed, each alone (µ ß ı ŉ ſ ς ϐ ϑ ϕ ϖ ϰ ϱ ϵ և, Cyrillic
// ᲀ-ᲈ, ẚ ẛ ẞ, the ligatures ﬀ-ﬆ and ﬓ-ﬗ), and a capital sigma, which lower-casing made `ς` at a word's
// end; stored JSON writes them as themselves (JSON.stringify), or, written otherwise, as escapes.
const FOLDED = /[\u00b5\u00df\u0131\u0149\u017f\u03a3\u03c2\u03d0\u03d1\u03d5\u03d6\u03f0\u03f1\u03f5\u0587\u1c80-\u1c88\u1e9a\u1e9b\u1e9e\ufb00-\ufb06\ufb13-\ufb17]/;
const FOLDED_ESCAPE = /\\u(?:00b5|00df|0131|0149|017f|03a3|03c2|03d[0156]|03f[015]|0587|1c8[0-8]|1e9[abe]|fb0[0-6]|fb1[3-7])/i;
// The letters model 22 folded (indexer.ts UNDECOMPOSED), in upper and lower case, and those that decompose to
// one of them (`ǿ` to `ø` and an acute; `ǣ`, `ǽ` to `æ` and a mark), as themselves or as escapes.
const UNDECOMPOSED = /[\u00c6\u00d0\u00d8\u00de\u00e6\u00f0\u00f8\u00fe\u0110\u0111\u0126\u0127\u0132\u0133\u013f-\u0142\u014a\u014b\u0152\u0153\u0166\u0167\u0180\u0197\u01b5\u01b6\u01e2\u01e3\u01fc-\u01ff\u0243\u0268]/;
const UNDECOMPOSED_ESCAPE = /\\u(?:00c6|00d0|00d8|00de|00e6|00f0|00f8|00fe|011[01]|012[67]|013[23f]|014[0-2ab]|015[23]|016[67]|0180|0197|01b[56]|01e[23]|01f[c-f]|0243|0268)/i;
const CANONICAL_SUFFIX = canonicalParam('');
const SORT_SUFFIX = sortParam('');
// A number value: a Quantity's (Age, Duration, Money, SimpleQuantity), a Range end's.
const NUMBER_VALUE = /"value"\s*:\s*-?\d/;
const POSITION = /"position"\s*:\s*\{/;
const TYPE_OBJECT = /"type"\s*:\s*\{/;
const TEXT_FIELD = /"text"\s*:/;
const DISPLAY_FIELD = /"display"\s*:\s*"/;
const SYSTEM_FIELD = /"system"\s*:\s*"/;
const TEXT_STRING = /"text"\s*:\s*"/;
const RANGE_END = /"(?:low|high)"\s*:\s*\{/;
const UNIT_FIELD = /"unit"\s*:\s*"/;
const COMPARATOR = /"comparator"\s*:\s*"/;
const NOT_ASCII = /[^\x00-\x7f]/;
// A `\u` escape of a character beyond ASCII (an escaped quote or control character, `\u0022`, needs no test).
const ESCAPE = /\\u(?!00[0-7])[0-9a-fA-F]{4}/;
const LEAP_SECOND = /"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:60(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?"/;

/** The index tables a reindex from `model` rewrites (see MODEL_CHANGES); undefined for every row. */
export function tablesSince(model: number): ReindexTable[] | undefined {
  const tables = new Set<ReindexTable>();
  for (let m = model + 1; m <= INDEX_MODEL; m++) {
    const changed = MODEL_CHANGES[m]?.tables;
    if (!changed) return undefined;
    for (const t of changed) tables.add(t);
  }
  return [...tables];
}

/** The resources a reindex from `model` must rebuild (see MODEL_CHANGES). */
export function touchedSince(model: number): (content: string) => boolean {
  const tests: ((content: string) => boolean)[] = [];
  for (let m = model + 1; m <= INDEX_MODEL; m++) {
    const test = MODEL_CHANGES[m]?.touches;
    if (!test) return () => true;
    tests.push(test);
  }
  return (content) => tests.some((t) => t(content));
}

/**
 * Resources per reindex transaction: on SQLite 2,000 took 0.80 of the time of 500 (FTS5 writes a segment per
 * transaction), 5,000 0.75 but holding the write lock twice as long against a server beside it.
 */
const BATCH = 2000;

export interface ReindexProgress {
  /** Resources examined so far in this run. */
  done: number;
  /** Of those, the resources whose rows were rebuilt. */
  rebuilt: number;
  /** The last resource row done (the run resumes after it). */
  after: number;
}

export interface ReindexOptions {
  /** Every resource from the first row, every row (else: from the recorded position, as MODEL_CHANGES says). */
  force?: boolean;
  /** Resources per transaction. */
  batch?: number;
  onProgress?: (p: ReindexProgress) => void;
  /** Stops the run before its next batch (its position stands). */
  signal?: AbortSignal;
  /**
   * Beside a server, whose requests share the thread: after each `everyMs` of indexing work (parsing and
   * indexing a batch's resources), `wait()` lets them run.
   */
  pause?: { everyMs: number; wait: () => Promise<void> };
  /** Each tenant's FHIR base (FhirDeps.fhirBase): absolute references under it are the tenant's. */
  fhirBase?: (tenant: string) => string;
}

/**
 * Rebuilds the search index rows of the current resources that the models after the database's touch
 * (touchedSince), in resource-row order, one transaction per batch, recording its position after each:
 * an interrupted run resumes where it stopped. Does nothing when the database already follows
 * INDEX_MODEL, unless `force` (which starts from the first row and rebuilds every resource).
 */
export async function reindex(store: Store, opts: ReindexOptions = {}): Promise<{ ran: boolean; done: number; rebuilt: number; stopped?: true }> {
  const indexing = store.resources.indexing;
  const state = await indexing.state();
  if (!opts.force && state.model >= INDEX_MODEL) return { ran: false, done: 0, rebuilt: 0 };
  const touched = opts.force ? () => true : touchedSince(state.model);
  const tables = opts.force ? undefined : tablesSince(state.model);
  let after = opts.force ? 0 : state.after;
  let done = 0;
  let rebuilt = 0;
  for (;;) {
    // Stopped (serve draining): the position of the last batch stands, and the next run resumes there.
    if (opts.signal?.aborted) return { ran: true, done, rebuilt, stopped: true };
    const page = await indexing.page(after, opts.batch ?? BATCH);
    if (page.length === 0) break;
    const byTenant = new Map<string, { type: string; id: string; versionId: number; index: ReturnType<typeof storedIndex>; compartments: string[] }[]>();
    let slice = performance.now();
    for (const row of page) {
      if (opts.pause && performance.now() - slice >= opts.pause.everyMs) {
        await opts.pause.wait();
        slice = performance.now();
      }
      if (!touched(row.content)) continue;
      const resource = JSON.parse(row.content) as Record<string, unknown>;
      const base = opts.fhirBase?.(row.tenant);
      const item = { type: row.type, id: row.id, versionId: row.versionId, index: storedIndex(resource, base), compartments: compartmentsOf(resource, base) };
      (byTenant.get(row.tenant) ?? byTenant.set(row.tenant, []).get(row.tenant)!).push(item);
      rebuilt++;
    }
    for (const [tenant, items] of byTenant) await store.resources.write(tenant, (w) => w.replaceIndex(items, tables));
    after = page[page.length - 1]!.pk;
    done += page.length;
    await indexing.setState({ model: state.model, after });
    opts.onProgress?.({ done, rebuilt, after });
  }
  await indexing.setState({ model: INDEX_MODEL, after: 0 });
  // Index rows were replaced: the planner's statistics of them are stale.
  if (rebuilt > 0) await indexing.analyze();
  return { ran: true, done, rebuilt };
}

/** A reindex running beside the server: the model the rows followed when it started, and its progress. */
export interface Rebuilding {
  from: number;
  examined: number;
}

/** Whether any condition of `conditions`, or one they nest, satisfies `test`. */
function anyCondition(conditions: readonly Condition[], test: (c: Condition) => boolean): boolean {
  return conditions.some((c) => {
    switch (c.kind) {
      case 'or': return anyCondition(c.any, test);
      case 'and': return anyCondition(c.all, test);
      case 'not': return anyCondition([c.condition], test);
      case 'chain': return test(c) || anyCondition(c.where, test);
      case 'has': return test(c) || anyCondition(c.where, test);
      default: return test(c);
    }
  });
}

/**
 * Whether a search reads index rows that a reindex from `model` has not rebuilt yet: a condition that a
 * later model's `reads` names, or any search when a later model names none.
 */
export function readsRowsBeingRebuilt(model: number, query: SearchQuery): boolean {
  const reads: ((c: Condition) => boolean)[] = [];
  const sorts: ((k: SortKey) => boolean)[] = [];
  for (let m = model + 1; m <= INDEX_MODEL; m++) {
    const test = MODEL_CHANGES[m]?.reads;
    if (!test || (MODEL_CHANGES[m]!.compartments && query.compartment !== undefined)) return true;
    reads.push(test);
    const sort = MODEL_CHANGES[m]!.sorts;
    if (sort) sorts.push(sort);
  }
  return anyCondition(query.where ?? [], (c) => reads.some((r) => r(c))) || query.sort.some((k) => sorts.some((s) => s(k)));
}

/** A search of compartment rows alone, as CompartmentReads reads them (readsRowsBeingRebuilt). */
const COMPARTMENT_READ: SearchQuery = { type: 'Patient', compartment: '', sort: [], count: 0 };

/** Seconds a client is asked to wait (Retry-After) for a search that reads rows being rebuilt. */
const RETRY_AFTER_S = 30;

/**
 * The store a server answers with while a reindex runs beside it (`rebuilding()` defined): reads,
 * writes, history and every search the older rows answer completely go on as usual (the writes index in
 * the new model, and the reindex keeps a row a later write gave: replaceIndex compares versions), and a
 * search or count reading rows the reindex has not rebuilt yet answers 503 with Retry-After, never an
 * incomplete result (so neither does a conditional create, `_include`, nor `$everything` that runs one).
 */
export function gatedStore(store: Store, rebuilding: () => Rebuilding | undefined): Store {
  const resources = store.resources;
  const check = (query: SearchQuery) => {
    const r = rebuilding();
    if (!r || !readsRowsBeingRebuilt(r.from, query)) return;
    throw new FhirError(
      'unavailable',
      `The search index is being rebuilt for this version of Cinder (${r.examined} resources examined so far), and this search reads rows not yet rebuilt; try again later`,
      { headers: { 'Retry-After': String(RETRY_AFTER_S) } },
    );
  };
  const gated: Store['resources'] = {
    ...resources,
    async search(tenant, query) {
      check(query);
      return resources.search(tenant, query);
    },
    async count(tenant, query) {
      check(query);
      return resources.count(tenant, query);
    },
    // `$everything`'s reads of many patients' compartments, held to the rule of a compartment search.
    async compartmentSizes(tenant, query) {
      check(COMPARTMENT_READ);
      return resources.compartmentSizes(tenant, query);
    },
    async compartmentRows(tenant, query) {
      check(COMPARTMENT_READ);
      return resources.compartmentRows(tenant, query);
    },
    async compartmentPatients(tenant, type, ids) {
      check(COMPARTMENT_READ);
      return resources.compartmentPatients(tenant, type, ids);
    },
  };
  return Object.create(store, { resources: { value: gated, enumerable: true } }) as Store;
}
