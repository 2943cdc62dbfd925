/** Search: the index rows a version is stored with, and the compiled query every adapter renders to SQL. */

/**
 * The key fields of index entries (search_keys, src/store/search-keys.ts) as one object that the
 * entries of a batch with the same ones share: the table, the resource type, the param, and the
 * system and code ('' where the table has none). A writer resolves a shared key once per batch,
 * finding it by identity; entries without one are resolved by their own fields. The import makes them
 * as it unpacks its prepared chunks (src/fhir/import/packing.ts).
 */
export interface SharedKey {
  table: IndexTable;
  type: string;
  param: string;
  system: string;
  code: string;
}

/**
 * A token, reference or uri value (`search_index`). Tokens: system + code; references: system = target
 * type, value = id; uris: system ''. `display`: a coded value's texts (its CodeableConcept's text, its
 * Codings' displays, an Identifier's type text, of every element holding the value: one entry per value),
 * normalised, apart (DISPLAY_SEPARATOR in src/fhir/indexer.ts), which `:text` searches. PostgreSQL does
 * not index it, so it has no bounded form (src/store/index-limits.ts).
 */
export interface IndexEntry {
  param: string;
  /** The entry's key fields, shared with other entries (see SharedKey); equal to its own. */
  key?: SharedKey;
  system: string;
  value: string;
  display?: string;
}

/** A string value (`search_string`): `value` normalised for matching (lower case, accents removed), `exact` as written. */
export interface StringEntry {
  param: string;
  /** The entry's key fields, shared with other entries (see SharedKey); equal to its own. */
  key?: SharedKey;
  value: string;
  exact: string;
}

/**
 * A date, number or quantity value (`search_range`): dates as [low, high) in epoch ms at their precision
 * (open ends infinite); numbers and quantities as low = high = the value (a Range: its bounds);
 * quantities with their unit's system and code.
 */
export interface RangeEntry {
  param: string;
  /** The entry's key fields, shared with other entries (see SharedKey); equal to its own. */
  key?: SharedKey;
  system: string;
  code: string;
  low: number;
  high: number;
}

/**
 * A composite value (`search_composite`): the first component a token (system1|value1); the second as
 * a token or reference (system2|value2), a string (value2 normalised), a quantity (low/high with the
 * unit in system2|value2), a date or a number (low/high). Three-component composites (MolecularSequence
 * coordinates) keep their number components in low and high.
 */
export interface CompositeEntry {
  param: string;
  /** The entry's key fields, shared with other entries (see SharedKey); equal to its own. */
  key?: SharedKey;
  system1: string;
  value1: string;
  system2: string;
  value2: string;
  low: number;
  high: number;
}

/**
 * The words of a version for full-text search (`search_text`), each side its words joined by
 * spaces (src/fhir/text-index.ts): `narrative` of its narrative (`_text`), `content` of all its text
 * (`_content`).
 */
export interface TextEntry {
  narrative: string;
  content: string;
}

/** A version's search index rows, by table; `text` its words for `_text` and `_content` (none: no row). */
export interface IndexRows {
  tokens: IndexEntry[];
  strings: StringEntry[];
  ranges: RangeEntry[];
  composites: CompositeEntry[];
  text?: TextEntry;
}

/**
 * The parameter whose token row (system '') holds a canonical resource's `url|version` as one value, where it has
 * both (src/fhir/indexer.ts): a chain or `_has` through a canonical reference compares a `url|version` reference
 * with it, in the same bounded form as the reference's row on PostgreSQL (src/store/index-limits.ts), which its
 * `url` and `version` rows joined could not give for a long url. No search parameter is named so.
 */
export const VERSIONED_URL_PARAM = 'url:version';

export const NO_INDEX_ROWS: IndexRows = Object.freeze({ tokens: [], strings: [], ranges: [], composites: [] }) as IndexRows;

/** FHIR R4 search prefixes (search.html, 3.1.1.4.1). */
export type Comparator = 'eq' | 'ne' | 'gt' | 'ge' | 'lt' | 'le' | 'sa' | 'eb' | 'ap';

/**
 * A date test: the search value's [low, high) in epoch ms (from its precision) against stored [low, high).
 * `co` (`_filter`'s, search_filter.html: "An item in the set's implicit period includes the stated value"):
 * the stored range holds the value's whole range.
 */
export interface DateTest {
  op: Comparator | 'co';
  low: number;
  high: number;
}

/**
 * A number or quantity test: `value` as given, [low, high) the range its precision implies (`eq`,
 * `ne`; `ap` widens it by 10%). A quantity test may name the unit: `system` and/or `code` (`value||unit`:
 * code only, which matches the unit's code).
 */
export interface NumberTest {
  op: Comparator;
  value: number;
  low: number;
  high: number;
  system?: string;
  code?: string;
  /** The value and unit are canonical UCUM (src/fhir/ucum.ts), tested on the canonical rows of the parameter. */
  canonical?: boolean;
}

/** The second (and third) components of a composite test. */
export type CompositePart =
  | { kind: 'token'; system?: string; value?: string }
  | { kind: 'string'; value: string }
  | { kind: 'date'; test: DateTest }
  /** `column`: which stored number the test reads (three-component composites keep two). */
  | { kind: 'number'; test: NumberTest; column: 'low' | 'high' | 'both' };

export interface CompositeTest {
  system1?: string;
  value1?: string;
  parts: CompositePart[];
}

/** The index tables a `missing` condition can look in. */
export type IndexTable = 'search_index' | 'search_string' | 'search_range' | 'search_composite';

/** The tables a reindex can rewrite alone (ResourceWriter.replaceIndex): the index tables and the full-text words (`search_text`). */
export type ReindexTable = IndexTable | 'search_text';

/** A word of a `_text` or `_content` value (normalised as the index stores words); `prefix`: any word starting so. */
export interface TextTerm {
  word: string;
  prefix: boolean;
}

/**
 * A `_text` or `_content` value as written (`(bone OR liver) metastases`): its words ANDed (`all`) or
 * ORed (`any`). The database reads each word once from its full-text index; the same value as an OR of
 * ANDs (a condition's `values`) reads a word once per alternative it is in.
 */
export type TextQuery = TextTerm | { all: TextQuery[] } | { any: TextQuery[] };

/**
 * A string search value (normalised as the index stores strings, except for `exact`) and how it matches
 * a stored value: `unequal`, `gt`, `ge`, `lt` and `le` (`_filter`'s `ne` and orderings) compare the
 * whole normalised value, by code points.
 */
export interface StringValue {
  value: string;
  match: 'prefix' | 'exact' | 'contains' | 'equal' | 'suffix' | 'unequal' | 'gt' | 'ge' | 'lt' | 'le';
}

/** A token or reference value: `system` undefined matches any system, `value` undefined any value (`system|`). */
export interface TokenValue {
  system?: string;
  value?: string;
}

/** A point of `near` (Location.position, WGS84 degrees) and the distance in km within which positions match. */
export interface NearPoint {
  latitude: number;
  longitude: number;
  km: number;
}

/**
 * One condition of a compiled search; a query's conditions are ANDed, the values inside one condition
 * ORed (FHIR's `,`). Every adapter renders these to SQL and `matchConditions` (src/fhir/search/match.ts)
 * evaluates them in memory, with the same meaning.
 */
export type Condition =
  | { kind: 'id'; ids: string[]; not?: boolean }
  | { kind: 'lastUpdated'; tests: DateTest[] }
  /**
   * Tokens, references and uris (`search_index`): a row of the parameter matches one of the values;
   * `not`: none does (`:not`). `reference`: the values name resources (`patient=123`), which few rows
   * usually do, so a search plan counts such a condition first (SearchPlan). `_filter` (search_filter.html)
   * adds two: `fold`, systems and codes compared with their ASCII letters in lower case, in which the
   * values are written ("Token is the same, including namespace if specified (case insensitive)"); and
   * `unequal`, for `ne` ("An item in the set has an unequal value"): a row of the parameter, of
   * `systems` when given (`patient` is the `subject` rows of Patients), matches none of the values (the
   * forms of one value: a code and its implied system-less row); a reference's canonical URL without a
   * version then also matches its versions (`url|1.0`), as `url` finds them. `canonical` (of values of
   * system '', never with `not` or `unequal`): the values are canonicals (`url`, `url|version`), and a `url`
   * row beside a `url|...` row of the parameter is that reference's and matches no value (namedCanonicals
   * in src/fhir/search-canonical.ts), as a canonical chain's rows are read.
   */
  | { kind: 'token'; param: string; values: TokenValue[]; not?: boolean; reference?: boolean; fold?: boolean; unequal?: boolean; systems?: string[]; canonical?: true }
  /**
   * `match`: starts-with on the normalised value, `exact` on the value as written, `contains` anywhere
   * in the normalised value; `equal` and `suffix` (`_filter`'s `eq` and `ew`): the whole normalised
   * value, its end; `unequal`, `gt`, `ge`, `lt`, `le` (`_filter`'s `ne` and orderings) likewise on the
   * whole normalised value. A row matching one of the values is enough, whatever the others hold.
   */
  | { kind: 'string'; param: string; values: StringValue[] }
  | { kind: 'uri-prefix'; param: string; values: string[] }
  /** `:text` on tokens: the normalised text of a coded value contains one of the values. */
  | { kind: 'token-text'; param: string; values: string[] }
  | { kind: 'date'; param: string; tests: DateTest[] }
  | { kind: 'number'; param: string; tests: NumberTest[] }
  | { kind: 'composite'; param: string; tests: CompositeTest[] }
  /**
   * The resource has no row (`missing`), or has one, of `params` in `table`; with `systems`, counting only
   * rows whose key names one of them (`patient:missing` on Observation: no `subject` row that is a
   * Patient), and rows of system '' whose value matches one of `urls`, regular expressions (another
   * server's URL naming a Patient, which `patient=<url>` finds).
   */
  | { kind: 'missing'; table: IndexTable; params: string[]; missing: boolean; systems?: string[]; urls?: string[] }
  /**
   * `near` (src/fhir/near.ts): a position (a `search_range` row of latitude and longitude) within the
   * distance of one of the points.
   */
  | { kind: 'near'; param: string; points: NearPoint[] }
  /**
   * `_text` (`field` narrative) or `_content` (content): one of the values (ORed) has all its terms
   * among the resource's words (`search_text`); `query`, when given, is the same test as written, which
   * the full-text indexes are asked (each word read once).
   */
  | { kind: 'text'; field: 'narrative' | 'content'; values: TextTerm[][]; query?: TextQuery }
  /**
   * The resource is in the compartment of `patient`: a patient-context token's bound on what a chain or
   * `_has` reaches (src/fhir/search.ts guardLinked).
   */
  | { kind: 'compartment'; patient: string }
  /**
   * A reference parameter whose target (of `targetType`) meets `where` (chaining). `canonical`: through
   * its canonical references (rows of system ''), which name the targets by their `url` and `version`
   * (src/fhir/search-canonical.ts), not its literal ones.
   */
  | { kind: 'chain'; param: string; targetType: string; where: Condition[]; canonical?: true }
  /** Resources of `type` meeting `where` refer to this one through `param` (`_has`); `canonical`: by its `url` and `version`, as a chain's. */
  | { kind: 'has'; type: string; param: string; where: Condition[]; canonical?: true }
  /**
   * Any of the alternatives holds (a parameter folded from several, such as `combo-code`). `implied`:
   * added by the planner's withImpliedDrivers, implied by another condition, so tested only when it
   * drives. `contained`: a chain (the first alternative) or the same conditions on the rows of a
   * resource the searched one contains (src/fhir/search-compile.ts insideContained), each of which has
   * a row of this parameter: where no resource of the type ever had one, its key does not exist and
   * the second alternative can hold for none (withoutAbsentKeys drops it).
   */
  | { kind: 'or'; any: Condition[]; implied?: true; contained?: string }
  /** The condition does not hold (`:not` on a folded parameter). */
  | { kind: 'not'; condition: Condition }
  /** Every condition holds (one alternative of SMART scope filters). */
  | { kind: 'and'; all: Condition[] };

/** A sort key: `_id`, `_lastUpdated`, or a parameter's values in one index table (lowest first, highest for descending). */
export type SortKey =
  | { by: 'id'; descending: boolean }
  | { by: 'lastUpdated'; descending: boolean }
  /**
   * `target`: the rows of that system alone, a reference's target type: `patient` is the `subject` rows
   * of Patients (ParamDefinition.storedAs), so a Group subject is no key of it (as `patient:missing`).
   * `oneRow`: a resource has at most one row of the parameter (a date parameter of one value by the
   * R4 model), so a row of it is the resource's key.
   */
  | { by: 'param'; table: IndexTable; param: string; descending: boolean; target?: string; oneRow?: boolean };

export interface SearchCursor {
  lastUpdated: number;
  id: string;
}

export interface SearchQuery {
  type: string;
  /** ANDed (none: every resource of the type). */
  where?: Condition[];
  /** Restrict to one patient's compartment. */
  compartment?: string;
  /** Empty: by id. Ties are broken by id. */
  sort: SortKey[];
  count: number;
  /** Keyset position for a sort on `_id` or `_lastUpdated` alone: rows strictly after this one. */
  after?: SearchCursor;
  /**
   * Keyset position for a sort on parameters: rows strictly after the one whose sort keys were `keys`
   * (one per SortKey of `sort`, as SqlBuilder.sortKey computes them: null for none) and whose id was
   * `id` (ties by id ascending), so that a resource written or deleted between pages shifts no other.
   */
  afterKeys?: SortPosition;
  /** Rows to skip, for other sorts. */
  offset?: number;
  /**
   * With `after` (a later page in `_id` or `_lastUpdated` order): only resources whose current version was last
   * updated at or before this time, those unchanged since a search's first page (src/fhir/search-pin.ts adds back
   * the versions of the others as they were then). Counts ignore it.
   */
  asOf?: number;
}

/** A row's place in a sort on parameters (SearchQuery.afterKeys). */
export interface SortPosition {
  keys: (string | number | null)[];
  id: string;
}
