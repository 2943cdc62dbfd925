import type { CodeSystemIndex } from '../compile/code-system-index.ts';
import type { CompiledValueSet } from '../compile/compiled-value-set.ts';
import { type DrawnThrough, drawnValueSets } from '../compile/membership.ts';
import type { TerminologyContext } from '../context.ts';
import { invalid, missingDependency } from '../errors.ts';
import type { Designation, StatusExtensions } from '../model/datatypes.ts';
import { all, then, type SyncOrAsync } from '../../sync-or-async.ts';
import { matchesVersion, splitCanonical } from '../version.ts';
import { requestedVersion, type SystemVersions } from './system-versions.ts';

const VALUESET_SUPPLEMENT = 'http://hl7.org/fhir/StructureDefinition/valueset-supplement';
const NONE: readonly CodeSystemIndex[] = [];

/**
 * The supplements a ValueSet names (`valueset-supplement` extensions) as url and version, with those the
 * ValueSets it imports name, at any depth: the reference servers expand an imported ValueSet with its
 * own supplements applied, so its codes keep their designations in the importing expansion.
 */
function namedSupplements(vs: CompiledValueSet): readonly NamedSupplement[] {
  let named = NAMED.get(vs);
  if (named === undefined) NAMED.set(vs, (named = collectSupplements(vs, [], new Set())));
  return named;
}

interface NamedSupplement {
  readonly url: string;
  readonly version?: string;
  /** The ValueSet that names it first, for messages. */
  readonly label: string;
  /** Every ValueSet (the one asked for, or one it imports) that names it: it applies to the codes drawn through them. */
  readonly by: CompiledValueSet[];
  /** The extension naming it in the value set the request supplies, when that one names it first: the client's input at fault. */
  readonly path?: string;
}

/** Per compiled ValueSet (dropped with it): ValueSet/$validate-code is a hot route. */
const NAMED = new WeakMap<CompiledValueSet, readonly NamedSupplement[]>();

function collectSupplements(vs: CompiledValueSet, out: NamedSupplement[], seen: Set<CompiledValueSet>): NamedSupplement[] {
  if (seen.has(vs)) return out;
  seen.add(vs);
  for (const [k, e] of (vs.resource.extension ?? []).entries()) {
    if (e.url !== VALUESET_SUPPLEMENT || e.valueCanonical === undefined) continue;
    const named = splitCanonical(e.valueCanonical);
    const known = out.find((o) => o.url === named.url && o.version === named.version);
    if (known === undefined) out.push({ ...named, label: vs.label, by: [vs], ...(vs.supplied ? { path: `ValueSet.extension[${k}]` } : {}) });
    else if (!known.by.includes(vs)) known.by.push(vs);
  }
  for (const set of vs.includes) for (const i of set.imports) if (i.compiled !== null) collectSupplements(i.compiled, out, seen);
  return out;
}

/**
 * The supplements a ValueSet names (and the ValueSets it includes by import), loaded: at once when they are loaded, else as a promise. A ValueSet
 * that names a supplement the server does not have cannot be used (a 400 `not-found`, as the reference
 * servers answer), nor can a code system that is not a supplement be named as one (a 400 `invalid`).
 */
export function requireSupplements(vs: CompiledValueSet, ctx: TerminologyContext): SyncOrAsync<readonly CodeSystemIndex[]> {
  const named = namedSupplements(vs);
  if (named.length === 0) return NONE;
  return then(all(named.map(({ url, version }) => ctx.codeSystem(url, version))), (found) =>
    found.map((cs, i) => {
      const { url, version, label: by, path } = named[i]!;
      const name = version === undefined ? url : `${url}|${version}`;
      // HL7's VALUESET_SUPPLEMENT_MISSING, shaped as the reference servers give it (no `expression`, but at the extension
      // of a value set the request supplies, the client's input at fault).
      if (cs === null) throw missingDependency(`The supplement '${name}' that ${by} names could not be found`, path === undefined ? [] : [path], 'VALUESET_SUPPLEMENT_MISSING');
      if (cs.content !== 'supplement') throw invalid(`'${name}', named as a supplement by ${by}, is not a supplement (its content is '${cs.content}')`, [path ?? 'url'], 'vs-invalid');
      return cs;
    }),
  );
}

/**
 * Of the supplements `requireSupplements(vs)` loaded (in its order), those that apply to a code drawn through
 * the imported ValueSets `via` (none: drawn by `vs` itself): the ones `vs` names, and the ones a ValueSet of
 * `via` names. A supplement an imported ValueSet names applies where that ValueSet is pulled in, not to the
 * importer's other codes, as the reference servers expand the imported ValueSet with its own supplements.
 */
export function applicableSupplements(vs: CompiledValueSet, via: DrawnThrough | undefined, loaded: readonly CodeSystemIndex[]): readonly CodeSystemIndex[] {
  if (loaded.length === 0) return loaded;
  const named = namedSupplements(vs);
  // The value sets drawn through, walked only when a supplement is not the value set's own.
  let drawn: Set<CompiledValueSet> | undefined;
  const out: CodeSystemIndex[] = [];
  for (let i = 0; i < named.length && i < loaded.length; i++) {
    const by = named[i]!.by;
    if (by.includes(vs)) out.push(loaded[i]!);
    else if (via !== undefined && by.some((b) => (drawn ??= drawnValueSets(via)).has(b))) out.push(loaded[i]!);
  }
  return out.length === loaded.length ? loaded : out;
}

/**
 * The designations the given supplements add to a concept of `system` (their display too, in the
 * supplement's language), for display checks and displays in a language. A supplement of one version
 * of a code system (`supplements: url|version`) applies to the codes of that version only, as the
 * reference servers apply it; `version` is the code's code system version (undefined: not known).
 */
export function supplementDesignations(supplements: readonly CodeSystemIndex[] | undefined, system: string, version: string | undefined, code: string): Designation[] {
  const out: Designation[] = [];
  for (const s of supplements ?? []) {
    if (!supplementsVersion(s, system, version)) continue;
    const d = s.find(code)?.definition;
    if (d === undefined) continue;
    if (d.display !== undefined) out.push({ language: s.language, value: d.display });
    out.push(...(d.designation ?? []));
  }
  return out;
}

/** The extensions the given supplements put on a concept of `system` (in `version`), in their order. */
export function supplementExtensions(supplements: readonly CodeSystemIndex[], system: string, version: string | undefined, code: string): NonNullable<StatusExtensions> {
  const out: NonNullable<StatusExtensions> = [];
  for (const s of supplements) {
    if (!supplementsVersion(s, system, version)) continue;
    out.push(...(s.find(code)?.definition.extension ?? []));
  }
  return out;
}

/**
 * The supplements of `supplements` that apply to none of the code systems an expansion used (`url` or
 * `url|version`, as `used-codesystem` names them): a ValueSet that needs a supplement of a code system
 * version it does not draw on cannot be expanded as its author meant, which the reference servers answer
 * with a 400 `not-found` (VALUESET_SUPPLEMENT_MISSING).
 */
export function unusedSupplements(supplements: readonly CodeSystemIndex[], used: Iterable<string>): CodeSystemIndex[] {
  const systems = [...used].map((u) => splitCanonical(u));
  return supplements.filter((s) => !systems.some(({ url, version }) => supplementsVersion(s, url, version)));
}

/**
 * Refuses, as the reference servers do on $validate-code (VALUESET_SUPPLEMENT_MISSING, a 400 `not-found`), a
 * ValueSet that names a supplement of a code system none of its includes or excludes (nor those of the
 * ValueSets it imports) draws on: its author meant the supplement to apply, and it would apply to nothing.
 * Read from the compose, with the request's `force-system-version`, `system-version` and `check-system-version`
 * applied as they are to membership (a forced version replaces the pinned one, the others stand for none pinned):
 * an include that still pins no version may use the version the supplement supplements, as HL7's validator reads
 * it. $expand checks the versions the expansion actually used instead.
 */
export function requireUsedSupplements(vs: CompiledValueSet, supplements: readonly CodeSystemIndex[], rules?: SystemVersions): void {
  if (supplements.length === 0) return;
  const drawn = drawnSystems(vs);
  const version = (system: string, pinned: string | undefined) => (rules === undefined ? pinned : requestedVersion(rules, system, pinned));
  const unused = supplements.filter((s) => !drawn.some(({ system, version: pinned }) => supplementsVersion(s, system, version(system, pinned), true)));
  if (unused.length === 0) return;
  const names = unused.map((cs) => `'${cs.version === undefined ? cs.url : `${cs.url}|${cs.version}`}' (of '${cs.resource.supplements}')`).join(', ');
  throw missingDependency(`${vs.label} includes no code system that the supplement${unused.length > 1 ? 's' : ''} ${names} it names supplement${unused.length > 1 ? '' : 's'}`, ['url']);
}

/**
 * The code systems (and pinned versions) a ValueSet's includes and excludes name, or its expansion's codes when it has
 * no compose, with those of the ValueSets it imports, at any depth.
 */
function drawnSystems(vs: CompiledValueSet): readonly { system: string; version: string | undefined }[] {
  let drawn = DRAWN.get(vs);
  if (drawn === undefined) DRAWN.set(vs, (drawn = collectSystems(vs, [], new Set())));
  return drawn;
}

/** Per compiled ValueSet (dropped with it): ValueSet/$validate-code is a hot route. */
const DRAWN = new WeakMap<CompiledValueSet, readonly { system: string; version: string | undefined }[]>();

function collectSystems(vs: CompiledValueSet, out: { system: string; version: string | undefined }[], seen: Set<CompiledValueSet>) {
  if (seen.has(vs)) return out;
  seen.add(vs);
  // A value set defined by its expansion (no compose) draws on the code systems its codes name, as $expand reads it.
  if (vs.expansion !== undefined) {
    const listed = new Set<string>();
    for (const { system, version } of vs.expansion.items) {
      const key = `${system}|${version ?? ''}`;
      if (listed.has(key)) continue;
      listed.add(key);
      out.push({ system, version });
    }
  }
  for (const set of [...vs.includes, ...vs.excludes]) {
    if (set.system !== undefined) out.push({ system: set.system, version: set.version });
    for (const i of set.imports) if (i.compiled !== null) collectSystems(i.compiled, out, seen);
  }
  return out;
}

/**
 * Whether supplement `s` supplements `system` in `version` (any version, when its `supplements` names none).
 * `anyUnknown`: an unknown version (an include that pins none) may be the one supplemented.
 */
function supplementsVersion(s: CodeSystemIndex, system: string, version: string | undefined, anyUnknown = false): boolean {
  if (s.resource.supplements === undefined) return false;
  const target = splitCanonical(s.resource.supplements);
  if (target.url !== system) return false;
  if (version === undefined) return target.version === undefined || anyUnknown;
  return target.version === undefined || matchesVersion(target.version, version) || matchesVersion(version, target.version);
}
