import type { CodeSystemIndex } from '../compile/code-system-index.ts';
import type { CompiledValueSet } from '../compile/compiled-value-set.ts';
import { carriedExtensions, type ExpansionEntry } from '../compile/enumerate.ts';
import type { CodeSystemLookup } from '../compile/membership.ts';
import type { Designation } from '../model/datatypes.ts';
import type { StoredExpansionParameter } from '../model/value-set.ts';
import type { ParametersParameter } from '../model/parameters.ts';
import { noteworthyStatus, type StatusFields } from './validation-result.ts';
import { designationsWithDisplay, designationWanted } from './display-language.ts';
import { supplementDesignations, supplementExtensions } from './supplements.ts';

/*
 * What an $expand answer says beside its codes, as HL7's reference servers say it: the code systems,
 * value sets and supplements it used (`used-codesystem`, `used-valueset`, `used-supplement`) and each
 * code's designations.
 */

/**
 * The value sets `vs` imports by URL, at any depth, each once (contained ones, `#id`, are part of their container);
 * each value set is walked once, so imports along many paths cost their number.
 */
export function importedValueSets(vs: CompiledValueSet, out = new Set<CompiledValueSet>(), seen = new Set<CompiledValueSet>([vs])): Set<CompiledValueSet> {
  for (const set of [...vs.includes, ...vs.excludes]) {
    for (const { canonical, compiled } of set.imports) {
      if (compiled === null || seen.has(compiled)) continue;
      seen.add(compiled);
      if (!canonical.startsWith('#')) out.add(compiled);
      importedValueSets(compiled, out, seen);
    }
  }
  return out;
}

/** A lookup that adds each code system it finds (`url`, or `url|version`) to `used`, and its index to `systems` when given. */
export function recording(lookup: CodeSystemLookup, used: Set<string>, systems?: Map<string, CodeSystemIndex>): CodeSystemLookup {
  const note = (cs: CodeSystemIndex | null): CodeSystemIndex | null => {
    if (cs === null) return cs;
    const key = cs.version === undefined ? cs.url : `${cs.url}|${cs.version}`;
    used.add(key);
    systems?.set(key, cs);
    return cs;
  };
  return {
    codeSystem: (url, version) => {
      const found = lookup.codeSystem(url, version);
      return found instanceof Promise ? found.then(note) : note(found);
    },
    asOf: lookup.asOf,
    versions: lookup.versions,
    ...(lookup.codeSystemVersions === undefined ? {} : { codeSystemVersions: (url: string) => lookup.codeSystemVersions!(url) }),
    ...(lookup.requestedVersion === undefined ? {} : { requestedVersion: lookup.requestedVersion }),
  };
}

/**
 * The value sets the expansion imported (`url|version`), at any depth, in includes and excludes:
 * `used-valueset`. Contained ones (`#id`) are part of the value set itself and not listed, as the
 * reference servers answer.
 */
export function usedValueSets(vs: CompiledValueSet, out = new Set<string>()): Set<string> {
  for (const set of [...vs.includes, ...vs.excludes]) {
    for (const imported of set.imports) {
      const { compiled } = imported;
      const url = compiled?.resource.url;
      if (compiled === null || url === undefined || imported.canonical.startsWith('#')) continue;
      const canonical = compiled.resource.version === undefined ? url : `${url}|${compiled.resource.version}`;
      if (out.has(canonical)) continue;
      out.add(canonical);
      usedValueSets(compiled, out);
    }
  }
  return out;
}

/**
 * The parameters of the stored expansions the expansion repeats, as the reference servers repeat them: a value set
 * defined by its expansion alone answers its stored expansion with the parameters it was computed with (tx.fhir.org),
 * and the stored expansion of a value set an include imports, at any depth, adds its own (HL7's expander); each
 * once, in their order (a parameter already there, by name and value, is not repeated; `has` says so).
 */
export function storedParameters(vs: CompiledValueSet, has: (p: StoredExpansionParameter) => boolean): StoredExpansionParameter[] {
  const out: StoredExpansionParameter[] = [];
  const seen = new Set<CompiledValueSet>();
  const visit = (v: CompiledValueSet): void => {
    if (seen.has(v)) return;
    seen.add(v);
    if (v.expansion !== undefined) {
      for (const p of v.resource.expansion?.parameter ?? []) if (!has(p) && !out.some((q) => sameParameter(q, p))) out.push(p);
      return;
    }
    for (const set of v.includes) for (const { compiled } of set.imports) if (compiled !== null) visit(compiled);
  };
  visit(vs);
  return out;
}

/** Whether two expansion parameters have the same name and value. */
export function sameParameter(a: { readonly name: string }, b: { readonly name: string }): boolean {
  if (a.name !== b.name) return false;
  const value = (p: object) => JSON.stringify(Object.entries(p).filter(([k]) => k.startsWith('value')));
  return value(a) === value(b);
}

/**
 * The entry with the designations the value set's supplements (`valueset-supplement`) add to its
 * concept, as its own: listed with `includeDesignations`, and displays in a language (as on `$validate-code`).
 */
export function supplemented(e: ExpansionEntry, supplements: readonly CodeSystemIndex[]): ExpansionEntry {
  if (supplements.length === 0 || e.concept === undefined) return e;
  const extra = supplementDesignations(supplements, e.system, e.version, e.code);
  // The rendering a supplement gives the concept is repeated too, after the value set's and the code system's.
  const rendering = supplementExtensions(supplements, e.system, e.version, e.code);
  const extension = rendering.length === 0 ? e.extension : carriedExtensions(undefined, rendering, e.extension);
  if (extra.length === 0) return extension === e.extension ? e : { ...e, ...(extension === undefined ? {} : { extension }) };
  const { definition } = e.concept;
  return { ...e, concept: { ...e.concept, definition: { ...definition, designation: [...(definition.designation ?? []), ...extra] } }, ...(extension === undefined ? {} : { extension }) };
}

/**
 * An entry's designations, as the reference servers list them: the concept's own; when the display is
 * another language's (`displayLanguage`), not the designation it was taken from (`from`; others of the
 * same text, in other languages or uses, stay), and the concept's own display in the code system's
 * language instead. Only those `designation` asks for when it is given.
 */
export function designationsOf(e: ExpansionEntry, wanted: readonly string[] | undefined, from?: Designation): readonly Designation[] | undefined {
  if (e.concept === undefined) return undefined;
  const { definition, language } = e.concept;
  const own = definition.designation ?? [];
  const all = e.display === definition.display ? own : designationsWithDisplay({ ...definition, designation: own.filter((d) => d !== from) }, language);
  return wanted === undefined ? all : all.filter((d) => designationWanted(d, wanted));
}

/** The statuses of a value set that an expansion warns of (its standards status). */
const STANDARDS_STATUSES: ReadonlySet<string> = new Set(['deprecated', 'withdrawn']);

/**
 * tx.fhir.org's `warning-<status>` expansion parameters, named `url|version`: each code system version the expansion
 * used (of `used`, found in `systems`) whose status is noteworthy (draft, experimental, retired, deprecated, withdrawn:
 * noteworthyStatus, as $validate-code notes them, MSG_DRAFT...), and the value set and each it imports by URL whose
 * standards status is deprecated or withdrawn (not a draft or experimental value set, which the reference servers do
 * not warn of in an expansion: HL7's ecosystem tests `exclude-1`, `search-all-no` against `withdrawn`, `not-withdrawn`).
 */
export function statusWarnings(vs: CompiledValueSet, used: ReadonlySet<string>, systems: ReadonlyMap<string, CodeSystemIndex>): ParametersParameter[] {
  const out: ParametersParameter[] = [];
  const note = (key: string, resource: StatusFields, only?: ReadonlySet<string>) => {
    const status = noteworthyStatus(resource);
    if (status !== undefined && (only === undefined || only.has(status))) out.push({ name: `warning-${status}`, valueUri: key });
  };
  for (const key of used) {
    const cs = systems.get(key);
    if (cs !== undefined) note(key, cs.resource);
  }
  for (const v of [vs, ...importedValueSets(vs)]) {
    const { url, version } = v.resource;
    if (url !== undefined) note(version === undefined ? url : `${url}|${version}`, v.resource, STANDARDS_STATUSES);
  }
  return out;
}
