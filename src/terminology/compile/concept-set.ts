import { standardsStatus } from '../model/datatypes.ts';
import type { ConceptReference } from '../model/value-set.ts';
import type { SyncOrAsync } from '../../sync-or-async.ts';

const VALUESET_DEPRECATED = 'http://hl7.org/fhir/StructureDefinition/valueset-deprecated';
import { isVersionPattern, matchesVersion } from '../version.ts';

import type { CodeSystemIndex } from './code-system-index.ts';
import type { CompiledValueSet } from './compiled-value-set.ts';
import { type CheckedFilter, type ConceptPredicate, compileFilter } from './filters.ts';
import {
  type Checked,
  checkLoading,
  importedOnce,
  type CodeSystemLookup,
  type CodingToCheck,
  type DrawnThrough,
  type LoadedCodeSystems,
  type Member,
  type Membership,
  memberOf,
  nonMember,
  NotLoaded,
  systemLabel,
  type TxIssue,
  txIssue,
  unknownCode,
  unknownVersionText,
  withWarnings,
} from './membership.ts';

/** A ValueSet referenced by `include.valueSet` / `exclude.valueSet`; null when it was not found. */
export interface ImportedValueSet {
  readonly canonical: string;
  readonly compiled: CompiledValueSet | null;
}

export interface ConceptSetParts {
  readonly system?: string;
  readonly version?: string;
  readonly concepts?: readonly ConceptReference[];
  readonly filters?: readonly CheckedFilter[];
  readonly imports?: readonly ImportedValueSet[];
  /** Location for messages, e.g. `ValueSet 'x' compose.include[0]`. */
  readonly where: string;
  /** Its FHIRPath in its value set (`ValueSet.compose.include[0]`), for issues' `expression`. */
  readonly path?: string | undefined;
  /** Its value set as HL7's messages name it (`url|version`); undefined: one without a URL. */
  readonly valueSet?: string | undefined;
  /** Of the value set the request supplies (not one it imports): a refusal about it is the client's input, `path` named. */
  readonly supplied?: boolean;
}

/**
 * One compiled `compose.include` or `compose.exclude` element (R4 ValueSet 4.9.5):
 * the system selection (whole system, concept list, filters, all intersected) intersected
 * with membership in every imported ValueSet.
 */
export class CompiledConceptSet {
  readonly system: string | undefined;
  readonly version: string | undefined;
  readonly filters: readonly CheckedFilter[];
  readonly imports: readonly ImportedValueSet[];
  readonly where: string;
  readonly path: string | undefined;
  readonly valueSet: string | undefined;
  readonly supplied: boolean;
  private readonly concepts: Map<string, ConceptReference> | undefined;
  private readonly lowerConcepts: Map<string, ConceptReference> | undefined;
  private readonly predicates = new WeakMap<CodeSystemIndex, readonly ConceptPredicate[]>();

  constructor(parts: ConceptSetParts) {
    this.system = parts.system;
    this.version = parts.version;
    this.filters = parts.filters ?? [];
    this.imports = parts.imports ?? [];
    this.where = parts.where;
    this.path = parts.path;
    this.valueSet = parts.valueSet;
    this.supplied = parts.supplied === true;
    if (parts.concepts !== undefined) {
      this.concepts = new Map(parts.concepts.map((c) => [c.code, c]));
      this.lowerConcepts = new Map(parts.concepts.map((c) => [c.code.toLowerCase(), c]));
    }
  }

  /** The enumerated concepts, in ValueSet order (undefined: whole system or filters). */
  conceptList(): readonly ConceptReference[] | undefined {
    return this.concepts === undefined ? undefined : [...this.concepts.values()];
  }

  /** Canonical references of imports that could not be found. */
  missingImports(): string[] {
    return this.imports.filter((i) => i.compiled === null).map((i) => i.canonical);
  }

  /** Membership of a coding in this element (system selection, then every import), at once when it can (checkLoading). */
  check(coding: CodingToCheck, lookup: CodeSystemLookup): SyncOrAsync<Membership> {
    return checkLoading((loaded) => this.checkLoaded(coding, loaded), lookup);
  }

  /** Membership of a coding in this element, or the CodeSystem that must be loaded to decide it. */
  checkLoaded(coding: CodingToCheck, loaded: LoadedCodeSystems): Checked {
    let found: Member | undefined;
    if (this.system !== undefined) {
      if (coding.system !== this.system) return nonMember();
      const local = this.checkSystem(coding, loaded);
      if (local instanceof NotLoaded || !local.member) return local;
      found = local;
    }
    let via: DrawnThrough | undefined;
    for (const imported of this.imports) {
      if (imported.compiled === null) return nonMember(txIssue('error', 'not-found', 'not-found', `A definition for the value Set '${imported.canonical}' could not be found`, 'Unable_to_resolve_value_Set_'));
      const vs = imported.compiled;
      const m = importedOnce(loaded, vs, coding, () => vs.checkLoaded(coding, loaded));
      if (m instanceof NotLoaded || !m.member) return m;
      found = found === undefined ? m : withWarnings(found, m.warnings);
      // Without a system, the code is drawn through the imports (ExpansionEntry.via).
      if (this.system === undefined) via = { vs, inner: m.via, next: via };
    }
    if (found === undefined) return nonMember();
    return via === undefined ? found : { ...found, via };
  }

  /**
   * The system selection, against the CodeSystem version pinned here, else the coding's, else the latest.
   * The request's code system versions apply as the reference servers apply them: `force-system-version`
   * replaces the pin, `system-version` (and `check-system-version`) pins an include that does not pin
   * one, and a pinned version that does not match `check-system-version` makes the code invalid
   * (`version-error`), whatever else is said of it.
   */
  private checkSystem(coding: CodingToCheck, loaded: LoadedCodeSystems): Checked {
    const system = coding.system;
    const rules = loaded.versions;
    const pinned = rules === undefined ? this.version : (rules.forces.get(system) ?? this.version ?? rules.defaults.get(system) ?? rules.checks.get(system));
    const check = rules === undefined || rules.forces.has(system) || this.version === undefined ? undefined : rules.checks.get(system);
    let refused: TxIssue | undefined;
    if (check !== undefined) {
      // The version the pin resolves to (a pattern takes the coding's version when it matches); one the server does not have is not checked.
      const version = this.versionFor(coding, pinned);
      const used = loaded.get(system, version);
      if (used === undefined) return new NotLoaded(system, version);
      const resolved = used?.version;
      if (resolved !== undefined && !matchesVersion(check, resolved)) {
        refused = txIssue('error', 'exception', 'version-error', `The version '${resolved}' is not allowed for system '${system}': required to be '${check}' by a version-check parameter`, 'VALUESET_VERSION_CHECK');
      }
    }
    if (pinned !== undefined && coding.version !== undefined && !matchesVersion(pinned, coding.version)) {
      // HL7's VALUESET_VALUE_MISMATCH; _CHANGED where the request's parameters (force-system-version, system-version,
      // check-system-version) made the version other than the include's own (none: '').
      const changed = pinned !== this.version;
      const where = changed ? `resulting from the version '${this.version ?? ''}' in the ValueSet include` : 'in the ValueSet include';
      const text = `The code system '${system}' version '${pinned}' ${where} is different to the one in the value ('${coding.version}')`;
      const mismatch = txIssue('error', 'invalid', 'vs-invalid', text, changed ? 'VALUESET_VALUE_MISMATCH_CHANGED' : 'VALUESET_VALUE_MISMATCH');
      return refused === undefined ? nonMember({ ...mismatch, usesVersion: pinned }) : nonMember({ ...mismatch, usesVersion: pinned }, refused);
    }
    const found = this.checkPinned(coding, loaded, pinned);
    if (refused === undefined || found instanceof NotLoaded) return found;
    return found.member ? nonMember(refused) : nonMember(...found.reasons, refused);
  }

  /** The version to look a coding up in: a pinned pattern (`1.x`) takes the coding's version when it matches, else the latest matching one. */
  private versionFor(coding: CodingToCheck, pinned: string | undefined): string | undefined {
    return pinned !== undefined && coding.version !== undefined && isVersionPattern(pinned) && matchesVersion(pinned, coding.version) ? coding.version : (pinned ?? coding.version);
  }

  private checkPinned(coding: CodingToCheck, loaded: LoadedCodeSystems, pinned: string | undefined): Checked {
    const system = coding.system;
    const version = this.versionFor(coding, pinned);
    const cs = loaded.get(system, version);
    if (cs === undefined) return new NotLoaded(system, version);
    if (cs === null || cs.content === 'not-present') return this.checkUnverifiable(coding, cs, systemLabel(system, version, loaded.asOf), version);
    // A supplement's concepts are another code system's: no coding is of its system (as CodeSystem/$validate-code answers).
    if (cs.content === 'supplement') return nonMember(txIssue('error', 'invalid', 'invalid-data', `CodeSystem ${cs.version === undefined ? cs.url : `${cs.url}|${cs.version}`} is a supplement, so can't be used as a value in Coding.system`, 'CODESYSTEM_CS_NO_SUPPLEMENT'));
    const entry = cs.find(coding.code);
    if (entry === undefined) return this.checkUnknownCode(coding, cs);
    const listed = this.listed(entry.code, cs);
    if (this.concepts !== undefined && listed === undefined) return nonMember();
    if (!this.predicatesFor(cs).every((p) => p(entry))) return nonMember();
    return memberOf(system, entry.code, { entry, cs, listed, warnings: this.deprecation(listed, entry.code, system) });
  }

  /**
   * A concept whose presence in the value set is marked deprecated (`valueset-deprecated` true, or a
   * `structuredefinition-standards-status` of deprecated): a warning.
   */
  private deprecation(listed: ConceptReference | undefined, code: string, system: string): TxIssue[] {
    const ext = listed?.extension;
    if (ext === undefined) return [];
    const marked = ext.some((e) => e.url === VALUESET_DEPRECATED && (e.valueBoolean === true || e.valueCode === 'true')) || standardsStatus(ext) === 'deprecated';
    if (!marked) return [];
    // HL7's CONCEPT_DEPRECATED_IN_VALUESET in its words (the value set unquoted, as `url|version`).
    const vs = this.valueSet ?? "'(unidentified)'";
    return [txIssue('warning', 'business-rule', 'code-comment', `The presence of the concept '${code}' in the system '${system}' in the value set ${vs} is marked with a status of deprecated and its use should be reviewed`, 'CONCEPT_DEPRECATED_IN_VALUESET')];
  }

  /** No concepts to check against: only an enumerated concept list can still decide. */
  private checkUnverifiable(coding: CodingToCheck, cs: CodeSystemIndex | null, label: string, version: string | undefined): Membership {
    const why = cs === null ? `CodeSystem ${label} is unknown` : `CodeSystem ${label} has content 'not-present'`;
    if (this.concepts === undefined) {
      // HL7's UNKNOWN_CODESYSTEM(_VERSION) for one the server does not have.
      const text = cs === null ? (version === undefined ? `A definition for CodeSystem ${label} could not be found, so the code cannot be validated` : unknownVersionText(coding.system, version, undefined)) : `${why}, so the code '${coding.code}' cannot be validated`;
      const id = cs === null ? (version === undefined ? 'UNKNOWN_CODESYSTEM' : 'UNKNOWN_CODESYSTEM_VERSION') : undefined;
      const issue = txIssue('error', 'not-found', 'not-found', text, id);
      // The answer is caused by a code system the server does not have (x-caused-by-unknown-system).
      return nonMember(cs === null ? { ...issue, unknownSystem: version === undefined ? coding.system : `${coding.system}|${version}` } : issue);
    }
    const listed = this.concepts.get(coding.code);
    if (listed === undefined) return nonMember();
    const note = txIssue('warning', 'not-found', 'not-found', `${why}; the code '${coding.code}' is listed by the value set but could not be verified`);
    return memberOf(coding.system, listed.code, { listed, warnings: [note] });
  }

  /** The code is not in the CodeSystem: proof of absence only when its content is complete. */
  private checkUnknownCode(coding: CodingToCheck, cs: CodeSystemIndex): Membership {
    const label = systemLabel(cs.url, cs.version);
    if (cs.content === 'complete' || cs.content === 'supplement') return nonMember(unknownCode(coding.code, cs));
    if (this.concepts !== undefined && this.listed(coding.code, cs) === undefined) return nonMember();
    if (this.filters.length > 0) {
      return nonMember(txIssue('warning', 'code-invalid', 'invalid-code', `The code '${coding.code}' is not in CodeSystem ${label} (content '${cs.content}'), so the filters cannot be evaluated`));
    }
    // HL7's UNKNOWN_CODE_IN_FRAGMENT for a fragment; an example or a content of another kind in Cinder's words.
    const note = cs.content === 'fragment'
      ? txIssue('warning', 'code-invalid', 'invalid-code', `Unknown Code '${coding.code}' in the CodeSystem ${label} - note that the code system is labeled as a fragment, so the code may be valid in some other fragment`, 'UNKNOWN_CODE_IN_FRAGMENT')
      : txIssue('warning', 'code-invalid', 'invalid-code', `The code '${coding.code}' was not found in CodeSystem ${label}, whose content is '${cs.content}', so it may still be valid`);
    return memberOf(coding.system, coding.code, { cs, warnings: [note] });
  }

  private listed(code: string, cs: CodeSystemIndex): ConceptReference | undefined {
    const exact = this.concepts?.get(code);
    return exact !== undefined || cs.caseSensitive ? exact : this.lowerConcepts?.get(code.toLowerCase());
  }

  /** The filters compiled against one CodeSystem version, cached per index. */
  predicatesFor(cs: CodeSystemIndex): readonly ConceptPredicate[] {
    let compiled = this.predicates.get(cs);
    if (compiled === undefined) {
      compiled = this.filters.map((f, i) => compileFilter(f, cs, `${this.where}.filter[${i}]`));
      this.predicates.set(cs, compiled);
    }
    return compiled;
  }
}
