import type { SyncOrAsync } from '../../sync-or-async.ts';
import { type Designation, standardsStatus } from '../model/datatypes.ts';
import type { DatePeriod } from '../model/date-time.ts';
import type { SystemVersions } from '../ops/system-versions.ts';
import type { CodeSystemIndex, ConceptEntry } from './code-system-index.ts';
import type { CompiledValueSet } from './compiled-value-set.ts';

/**
 * A finding of $validate-code, as the reference terminology servers report it in the `issues`
 * output: an OperationOutcome issue's severity and type, and the kind from HL7's tx-issue-type code
 * system (`not-in-vs`, `invalid-code`, `invalid-display`, ...).
 */
export interface TxIssue {
  readonly severity: 'error' | 'warning' | 'information';
  readonly code: 'code-invalid' | 'invalid' | 'not-found' | 'business-rule' | 'processing' | 'too-costly' | 'exception';
  readonly type: TxIssueType;
  readonly text: string;
  /** For a version mismatch (`vs-invalid`): the code system version the value set uses. */
  readonly usesVersion?: string;
  /** For a code system the server does not have (`not-found`): its canonical, `url` or `url|version`. */
  readonly unknownSystem?: string;
  /** About the coding as a whole (its concept's status), located at the coding rather than at its code, as the reference servers locate it. */
  readonly atCoding?: true;
  /**
   * The key of HL7's message catalogue (the FHIR validator's `Messages.properties`) whose finding this is, where it is one
   * (`None_of_the_provided_codes_are_in_the_value_set_one`, `UNKNOWN_CODESYSTEM_VERSION`, ...): the issue's
   * `operationoutcome-message-id` extension, by which a client (HL7's validator) tells the findings apart whatever their wording.
   */
  readonly messageId?: string;
}

export type TxIssueType =
  | 'not-in-vs' | 'this-code-not-in-vs' | 'invalid-code' | 'invalid-display' | 'display-comment' | 'not-found' | 'vs-invalid'
  | 'code-comment' | 'status-check' | 'code-rule' | 'invalid-data' | 'version-error';

export function txIssue(severity: TxIssue['severity'], code: TxIssue['code'], type: TxIssueType, text: string, messageId?: string): TxIssue {
  return messageId === undefined ? { severity, code, type, text } : { severity, code, type, text, messageId };
}

/** HL7's key for a code system version the server lacks: UNKNOWN_CODESYSTEM_VERSION, `_NONE` when it has no version of it. */
export function unknownVersionId(versions: readonly string[] | undefined): string {
  return versions !== undefined && versions.length === 0 ? 'UNKNOWN_CODESYSTEM_VERSION_NONE' : 'UNKNOWN_CODESYSTEM_VERSION';
}

/** Anything of a ValueSet that carries displays for a code. */
export interface DisplaySource {
  readonly display?: string | undefined;
  readonly designation?: readonly Designation[] | undefined;
}

/** The coding whose membership is checked (system and code are always known here). */
export interface CodingToCheck {
  readonly system: string;
  readonly version?: string;
  readonly code: string;
  /** The display sent with the code: with several versions of a system, it may say which one is meant. */
  readonly display?: string | undefined;
}

/** The coding is a member; carries what the operation needs to finish (display, flags). */
export interface Member {
  readonly member: true;
  readonly system: string;
  /** The code as the CodeSystem spells it (differs from the input for case-insensitive systems). */
  readonly code: string;
  readonly entry: ConceptEntry | undefined;
  readonly cs: CodeSystemIndex | undefined;
  /** Further acceptable displays supplied by the ValueSet itself (concept list, expansion). */
  readonly displays: readonly string[];
  /**
   * The displays of the code in older versions of its code system that the value set also includes: acceptable, but
   * not listed among the valid ones when a display is wrong (the reference servers list the latest version's).
   */
  readonly olderDisplays?: readonly string[];
  readonly abstract: boolean;
  readonly inactive: boolean;
  readonly warnings: readonly TxIssue[];
  /** The imported ValueSets the code is a member through (an include with no system): their supplements apply to it. */
  readonly via?: DrawnThrough;
}

/**
 * The imported ValueSets a code was drawn through (includes with no system), as a persistent structure: each level
 * puts its imports in front of what the code was drawn through inside them without copying that, so a code drawn
 * down a chain of n imports costs n nodes, not n²/2 copies (a chain of 1,000 value sets over 2,000 codes held an
 * $expand's event loop 26-32 s, against 3 s without the record).
 */
export interface DrawnThrough {
  readonly vs: CompiledValueSet;
  /** What the code was drawn through inside `vs`. */
  readonly inner: DrawnThrough | undefined;
  /** Another import of the same level (an include's further imports, which the code is in too). */
  readonly next: DrawnThrough | undefined;
}

/** Every ValueSet of `via`, each once: a node reached along several paths (importedOnce shares answers) is walked once. */
export function drawnValueSets(via: DrawnThrough | undefined): Set<CompiledValueSet> {
  const out = new Set<CompiledValueSet>();
  const seen = new Set<DrawnThrough>();
  const stack: DrawnThrough[] = via === undefined ? [] : [via];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (seen.has(node)) continue;
    seen.add(node);
    out.add(node.vs);
    if (node.inner !== undefined) stack.push(node.inner);
    if (node.next !== undefined) stack.push(node.next);
  }
  return out;
}

/** The coding is not a member; `reasons` explain why when there is more to say than "not in". */
export interface NonMember {
  readonly member: false;
  readonly reasons: readonly TxIssue[];
}

export type Membership = Member | NonMember;

/** Resolves CodeSystems (cached) while membership is checked. */
export interface CodeSystemLookup {
  /**
   * The CodeSystem of this URL (null: there is none): the given version, else the latest (in effect at
   * `asOf`); at once when it is loaded, else as a promise.
   */
  codeSystem(url: string, version?: string): SyncOrAsync<CodeSystemIndex | null>;
  /** The date versions are chosen at (R4 `date` input), for messages; undefined: now. */
  readonly asOf?: DatePeriod | undefined;
  /**
   * The code system versions the request asks for (`system-version`, `check-system-version`,
   * `force-system-version`), which membership applies to each include (CompiledConceptSet); undefined:
   * none, or the lookup applies them itself (withSystemVersions, for $expand).
   */
  readonly versions?: SystemVersions | undefined;
  /** The versions of a code system the tenant holds, for a refusal naming them (read only on the way to one). */
  codeSystemVersions?(url: string): Promise<readonly string[] | undefined>;
  /**
   * The version of `url` a request's parameter puts in place of a value set's `version` (undefined: not pinned), and
   * that parameter's name, where one does (withSystemVersions): a refusal of a version the server lacks names them.
   */
  requestedVersion?(url: string, version: string | undefined): { readonly version: string; readonly parameter: string } | undefined;
}

/** CodeSystems as a synchronous check sees them. */
export interface LoadedCodeSystems {
  /** The CodeSystem (null: there is none), or undefined when it is not loaded yet. */
  get(url: string, version: string | undefined): CodeSystemIndex | null | undefined;
  /** As CodeSystemLookup.asOf. */
  readonly asOf: DatePeriod | undefined;
  /** As CodeSystemLookup.versions. */
  readonly versions?: SystemVersions | undefined;
}

/** A synchronous check could not decide: it needs this CodeSystem, which is not loaded yet. */
export class NotLoaded {
  constructor(
    readonly url: string,
    readonly version: string | undefined,
  ) {}
}

export type Checked = Membership | NotLoaded;

/**
 * Runs a synchronous membership check, loading each CodeSystem it reports missing and running it
 * again. Membership is decided at once, without a promise, when every CodeSystem it needs is loaded,
 * which is the steady state. A CodeSystem loaded here is kept for the following runs of this call, so
 * each is loaded at most once and the loop ends even if the shared cache drops it meanwhile.
 */
export function checkLoading(check: (loaded: LoadedCodeSystems) => Checked, lookup: CodeSystemLookup): SyncOrAsync<Membership> {
  const loaded = new Loading(lookup);
  const first = check(loaded);
  return first instanceof NotLoaded ? loadAndCheck(check, loaded, first) : first;
}

const codeSystemKey = (url: string, version: string | undefined) => `${url}|${version ?? ''}`;

/** The CodeSystems one checkLoading call sees: the lookup's loaded ones, and those it had to wait for. */
class Loading implements LoadedCodeSystems {
  /** What this call asked the lookup for and had to wait for (none in the steady state). */
  fetched: Map<string, SyncOrAsync<CodeSystemIndex | null>> | undefined;
  readonly asOf: DatePeriod | undefined;
  readonly versions: SystemVersions | undefined;

  constructor(readonly lookup: CodeSystemLookup) {
    this.asOf = lookup.asOf;
    this.versions = lookup.versions;
  }

  get(url: string, version: string | undefined): CodeSystemIndex | null | undefined {
    const k = this.fetched === undefined ? undefined : codeSystemKey(url, version);
    const cs = k !== undefined && this.fetched!.has(k) ? this.fetched!.get(k)! : this.lookup.codeSystem(url, version);
    if (!(cs instanceof Promise)) return cs;
    (this.fetched ??= new Map()).set(k ?? codeSystemKey(url, version), cs);
    return undefined;
  }
}

async function loadAndCheck(check: (loaded: LoadedCodeSystems) => Checked, loaded: Loading, first: NotLoaded): Promise<Membership> {
  for (let missing = first; ; ) {
    const k = codeSystemKey(missing.url, missing.version);
    const fetched = (loaded.fetched ??= new Map());
    fetched.set(k, await (fetched.get(k) ?? loaded.lookup.codeSystem(missing.url, missing.version)));
    const next = check(loaded);
    if (!(next instanceof NotLoaded)) return next;
    missing = next;
  }
}

/** The imported value sets one membership check has decided, by the CodeSystems it sees (one Loading per check). */
const decidedImports = new WeakMap<LoadedCodeSystems, Map<object, { readonly coding: CodingToCheck; readonly found: Membership }>>();

/**
 * The membership of `coding` in an imported value set (`key`), decided once per check: value sets that
 * import one another along many paths (A's two includes import B, B's two import C, ...) are each
 * tested once, not once per path, which would double the work with every level of imports.
 */
export function importedOnce(loaded: LoadedCodeSystems, key: object, coding: CodingToCheck, check: () => Checked): Checked {
  let decided = decidedImports.get(loaded);
  const known = decided?.get(key);
  if (known !== undefined && known.coding === coding) return known.found;
  const found = check();
  if (!(found instanceof NotLoaded)) {
    if (decided === undefined) decidedImports.set(loaded, (decided = new Map()));
    decided.set(key, { coding, found });
  }
  return found;
}

/**
 * HL7's INACTIVE_CONCEPT_FOUND: the coding's concept is inactive, its `status` (a status property, or its
 * standards-status) said beside it when that is not merely `inactive`. A warning about the coding, not its code.
 */
export function inactiveConceptFound(code: string, status: string | undefined): TxIssue {
  const stated = status === undefined || status === 'inactive' ? 'inactive' : `${status} and inactive`;
  return { ...txIssue('warning', 'business-rule', 'code-comment', `The concept '${code}' has a status of ${stated} and its use should be reviewed`, 'INACTIVE_CONCEPT_FOUND'), atCoding: true };
}

/** HL7's DEPRECATED_CONCEPT_FOUND: the coding's concept is deprecated (still active). A warning about the coding. */
export function deprecatedConceptFound(code: string): TxIssue {
  return { ...txIssue('warning', 'business-rule', 'code-comment', `The concept '${code}' is deprecated and its use should be reviewed`, 'DEPRECATED_CONCEPT_FOUND'), atCoding: true };
}

/** The status a concept's inactivity or deprecation is reported with: its status property, else its standards-status. */
export function conceptStatus(entry: Pick<ConceptEntry, 'status' | 'definition'> | undefined): string | undefined {
  return entry === undefined ? undefined : entry.status ?? standardsStatus(entry.definition.extension);
}

/**
 * HL7's UNKNOWN_CODESYSTEM_VERSION(_NONE): a version of a code system the server does not have, naming the versions it
 * has (`1.0.0 or 1.2.0`), when they are known.
 */
export function unknownVersionText(url: string, version: string, versions: readonly string[] | undefined, consequence = 'the code cannot be validated'): string {
  const head = `A definition for CodeSystem '${url}' version '${version}' could not be found, so ${consequence}`;
  if (versions === undefined) return head;
  if (versions.length === 0) return `${head}. No versions of this code system are known`;
  const list = versions.length === 1 ? versions[0] : `${versions.slice(0, -1).join(', ')} or ${versions[versions.length - 1]}`;
  return `${head}. Valid versions: ${list}`;
}

export function nonMember(...reasons: TxIssue[]): NonMember {
  return { member: false, reasons };
}

export function withWarnings(m: Member, warnings: readonly TxIssue[]): Member {
  return warnings.length === 0 ? m : { ...m, warnings: [...m.warnings, ...warnings] };
}

/** The finding for a code that a CodeSystem does not define. */
export function unknownCode(code: string, cs: CodeSystemIndex, severity: TxIssue['severity'] = 'error'): TxIssue {
  // HL7's Unknown_Code_in(_Version).
  const version = cs.version === undefined ? '' : ` version '${cs.version}'`;
  return txIssue(severity, 'code-invalid', 'invalid-code', `Unknown code '${code}' in the CodeSystem '${cs.url}'${version}`, cs.version === undefined ? 'Unknown_Code_in' : 'Unknown_Code_in_Version');
}

/** Human label of a code system and version (or the date it was chosen at) for messages. */
export function systemLabel(url: string, version?: string, asOf?: DatePeriod): string {
  if (version !== undefined) return `'${url}' version '${version}'`;
  return asOf === undefined ? `'${url}'` : `'${url}' as of ${asOf.text}`;
}

export interface MemberParts {
  readonly entry?: ConceptEntry;
  readonly cs?: CodeSystemIndex;
  /** The ValueSet's own entry for the code (concept list or expansion), for its displays. */
  readonly listed?: DisplaySource | undefined;
  readonly abstract?: boolean;
  readonly inactive?: boolean;
  readonly warnings?: readonly TxIssue[];
}

export function memberOf(system: string, code: string, parts: MemberParts): Member {
  const { entry, cs, listed } = parts;
  return {
    member: true,
    system,
    code,
    entry,
    cs,
    displays: listed === undefined ? [] : displaysOf(listed),
    abstract: parts.abstract ?? entry?.abstract ?? false,
    inactive: parts.inactive ?? entry?.inactive ?? false,
    warnings: parts.warnings ?? [],
  };
}

function displaysOf(c: DisplaySource): string[] {
  const out = c.display === undefined ? [] : [c.display];
  for (const d of c.designation ?? []) out.push(d.value);
  return out;
}
