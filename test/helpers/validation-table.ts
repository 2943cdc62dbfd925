/**
 * Derives the validator's table (src/fhir/validation/r4-table.json) from the official R4 4.0.1
 * StructureDefinitions (npm hl7.fhir.r4.examples), expanding every ValueSet an element binds `required`
 * through Cinder's own terminology engine over the ValueSets and CodeSystems of the same package.
 */
import type { TableElement, TableInvariant, TableType, TableValueSet, ValidationTable } from '../../src/fhir/validation/table.ts';
import { TerminologyService } from '../../src/terminology/service.ts';
import { valueSetCodes } from '../../src/terminology/ops/value-set-codes.ts';
import { MemoryTerminologySource } from './memory-terminology.ts';
import { type ElementDefinition, r4CodeSystems, r4StructureDefinitions, r4TerminologySource, TYPE_PROFILES } from './r4-definitions.ts';

export const SD_BASE = 'http://hl7.org/fhir/StructureDefinition/';
/** The invariants every element or resource inherits, which the validator checks natively. */
export const NATIVE_INVARIANTS = new Set(['ele-1', 'ext-1', 'dom-2', 'dom-3', 'dom-4', 'dom-5', 'dom-6']);
const ALL_LANGUAGES = 'http://hl7.org/fhir/ValueSet/all-languages';

/** The maxValueSet extension of a binding (R4 elementdefinition-maxValueSet): the value set its codes may not go beyond. */
function maxValueSet(binding: ElementDefinition['binding']): string | undefined {
  const ext = (binding as { extension?: { url: string; valueCanonical?: string }[] } | undefined)?.extension;
  return ext?.find((e) => e.url === 'http://hl7.org/fhir/StructureDefinition/elementdefinition-maxValueSet')?.valueCanonical?.split('|')[0];
}

/** Required bindings whose codes no list holds: checked by their syntax. */
const SYNTAX_VALUE_SETS: Record<string, TableValueSet> = {
  'http://hl7.org/fhir/ValueSet/mimetypes': { syntax: 'mime-type' },
  'http://hl7.org/fhir/ValueSet/ucum-units': { syntax: 'ucum' },
  'http://hl7.org/fhir/ValueSet/all-languages': { syntax: 'language' },
  'http://hl7.org/fhir/ValueSet/languages': { syntax: 'language' },
  // ISO 4217 is not among the R4 core code systems.
  'http://hl7.org/fhir/ValueSet/currencies': { syntax: 'currency' },
  // A LOINC answer list, which the R4 core terminology does not hold: the codes are checked as codes only.
  'http://loinc.org/vs/LL379-9': { unchecked: 'a LOINC answer list; LOINC is not in the R4 core terminology' },
};

/** An element type's name as the table gives it: FHIRPath System types by their FHIR type, Quantity profiles by name. */
export function typeCode(t: NonNullable<ElementDefinition['type']>[number]): string {
  if (t.code.startsWith('http://hl7.org/fhirpath/System.')) {
    return t.extension?.find((x) => x.url.endsWith('structuredefinition-fhir-type'))?.valueUrl ?? 'string';
  }
  const profile = t.profile?.[0]?.slice(SD_BASE.length);
  return profile !== undefined && TYPE_PROFILES.has(profile) ? profile : t.code;
}

/**
 * Invariants whose R4 4.0.1 expression contradicts the specification itself, each with the official
 * text and the one the table holds instead (README and ARCHITECTURE.md, Validation):
 * - app-4 names the status `no-show`, but the R4 AppointmentStatus code is `noshow` (R5 corrects it);
 * - que-12 counts `> 2` where its human text says "more than one" enableWhen (R4B corrects it to `> 1`);
 * - eld-19 and eld-20 give their patterns no anchors, and FHIRPath's `matches()` matches anywhere, so any
 *   path with one allowed character passed (R4B anchors them with `^...$`);
 * - con-3 compares each category, a CodeableConcept, with the string 'problem-list-item', which it never
 *   equals, so it asked every Condition without clinicalStatus for one (R4B tests the category's coding).
 *
 * The validator takes an invariant's result as HL7's validator does: it holds when it is `true`, so one
 * that evaluates to nothing fails (`per-1` on a date start and a dateTime end, which FHIRPath cannot
 * compare). Some R4 expressions give nothing where their element is absent and their text asks nothing
 * of it; HL7's validator evaluates them rewritten (FHIRPathExpressionFixer), and so does the table:
 * - ref-1 (a local reference names a contained resource) asks nothing of a Reference without
 *   `reference` (an identifier or a display alone), and `#` names the container;
 * - bdl-8 (no `_history` in a fullUrl) asks nothing of an entry without a fullUrl;
 * - ras-2 (a probability of at most 100) asks nothing of a prediction without a probability;
 * - tim-9 compares the whole of `when`, which repeats, with `in`: several codes gave nothing;
 * - the canonical resources' name pattern (adf-0, lib-0, ...: a warning) asks nothing of a resource
 *   without a name, and is anchored, as eld-19's is.
 */
const INVARIANT_CORRECTIONS: Record<string, [official: string, corrected: string]> = {
  'app-4': [
    "Appointment.cancelationReason.exists() implies (Appointment.status='no-show' or Appointment.status='cancelled')",
    "Appointment.cancelationReason.exists() implies (Appointment.status='noshow' or Appointment.status='cancelled')",
  ],
  'que-12': ['enableWhen.count() > 2 implies enableBehavior.exists()', 'enableWhen.count() > 1 implies enableBehavior.exists()'],
  'eld-19': [
    String.raw`path.matches('[^\\s\\.,:;\\\'"\\/|?!@#$%&*()\\[\\]{}]{1,64}(\\.[^\\s\\.,:;\\\'"\\/|?!@#$%&*()\\[\\]{}]{1,64}(\\[x\\])?(\\:[^\\s\\.]+)?)*')`,
    String.raw`path.matches('^[^\\s\\.,:;\\\'"\\/|?!@#$%&*()\\[\\]{}]{1,64}(\\.[^\\s\\.,:;\\\'"\\/|?!@#$%&*()\\[\\]{}]{1,64}(\\[x\\])?(\\:[^\\s\\.]+)?)*$')`,
  ],
  'eld-20': [
    String.raw`path.matches('[A-Za-z][A-Za-z0-9]*(\\.[a-z][A-Za-z0-9]*(\\[x])?)*')`,
    String.raw`path.matches('^[A-Za-z][A-Za-z0-9]*(\\.[a-z][A-Za-z0-9]*(\\[x])?)*$')`,
  ],
  'con-3': [
    "clinicalStatus.exists() or verificationStatus.coding.where(system='http://terminology.hl7.org/CodeSystem/condition-ver-status' and code = 'entered-in-error').exists() or category.select($this='problem-list-item').empty()",
    "verificationStatus.empty().not() and verificationStatus.coding.where(system='http://terminology.hl7.org/CodeSystem/condition-ver-status' and code='entered-in-error').exists().not() and category.coding.where(system='http://terminology.hl7.org/CodeSystem/condition-category' and code='problem-list-item').exists() implies clinicalStatus.empty().not()",
  ],
  'ref-1': [
    "reference.startsWith('#').not() or (reference.substring(1).trace('url') in %rootResource.contained.id.trace('ids'))",
    "reference.exists() implies (reference = '#' or reference.startsWith('#').not() or (reference.substring(1).trace('url') in %rootResource.contained.id.trace('ids')))",
  ],
  'bdl-8': ["fullUrl.contains('/_history/').not()", "fullUrl.exists() implies fullUrl.contains('/_history/').not()"],
  'ras-2': ['probability is decimal implies (probability as decimal) <= 100', '(probability.exists() and (probability is decimal)) implies ((probability as decimal) <= 100)'],
  'tim-9': [
    "offset.empty() or (when.exists() and ((when in ('C' | 'CM' | 'CD' | 'CV')).not()))",
    "offset.empty() or (when.exists() and when.select($this in ('C' | 'CM' | 'CD' | 'CV')).allFalse())",
  ],
};

/** Corrections of an expression that several invariants share, whatever their keys (see INVARIANT_CORRECTIONS). */
const EXPRESSION_CORRECTIONS: Record<string, string> = {
  "name.matches('[A-Z]([A-Za-z0-9_]){0,254}')": "name.exists() implies name.matches('^[A-Z]([A-Za-z0-9_]){0,254}$')",
};

function corrected(key: string, expression: string): string {
  const correction = INVARIANT_CORRECTIONS[key];
  if (correction === undefined) return EXPRESSION_CORRECTIONS[expression] ?? expression;
  // A change of the definitions must be looked at again, not corrected blindly.
  if (expression !== correction[0]) throw new Error(`${key} is no longer ${correction[0]}`);
  return correction[1];
}

/** The type a StructureDefinition URL of the specification names. */
function typeName(url: string): string {
  if (!url.startsWith(SD_BASE)) throw new Error(`not a type of the specification: ${url}`);
  return url.slice(SD_BASE.length);
}

/** A BackboneElement (or Element) with children, named by its path. */
export function isBackbone(el: ElementDefinition): boolean {
  return el.path.includes('.') && el.type?.length === 1 && (el.type[0]!.code === 'BackboneElement' || el.type[0]!.code === 'Element');
}

/**
 * Whether a value of this type has no id and no extensions, so no `_name` in JSON: a FHIRPath System
 * type (R4 types Resource.id, Element.id and Extension.url so), or a primitive type whose definition
 * forbids extensions (xhtml: `extension` max 0).
 */
function isBare(t: NonNullable<ElementDefinition['type']>[number], unextensible: ReadonlySet<string>): boolean {
  return t.code.startsWith('http://hl7.org/fhirpath/System.') || unextensible.has(t.code);
}

export async function validationTableFromDefinitions(): Promise<ValidationTable> {
  const all = await r4StructureDefinitions();
  const unextensible = new Set(
    all.filter((sd) => sd.kind === 'primitive-type' && sd.snapshot.element.some((el) => el.path === `${sd.type}.extension` && el.max === '0')).map((sd) => sd.type),
  );
  const sds = all.filter((sd) => (sd.kind === 'resource' || sd.kind === 'complex-type') && !sd.abstract);
  const types: Record<string, TableType> = {};
  const bound = new Set<string>();
  for (const sd of sds) {
    const root = sd.snapshot.element[0]!.path;
    const rename = (path: string) => (sd.derivation === 'constraint' ? sd.id + path.slice(root.length) : path);
    const kind = sd.kind === 'resource' ? 'resource' : sd.derivation === 'constraint' ? 'profile' : 'complex';
    types[sd.id] = { kind, e: {} };
    // Backbone types first, so that children find their owner.
    for (const el of sd.snapshot.element) if (isBackbone(el)) types[rename(el.path)] = { kind: 'backbone', e: {} };
    for (const el of sd.snapshot.element) {
      const path = rename(el.path);
      const invariants = (el.constraint ?? [])
        // A type's snapshot repeats the invariants of the type it specialises (Age holds Quantity's qty-3).
        .filter((c) => !NATIVE_INVARIANTS.has(c.key) && c.expression !== undefined)
        .map((c): TableInvariant => [c.key, c.severity, c.human, corrected(c.key, c.expression!)]);
      if (path === sd.id || isBackbone(el)) {
        if (invariants.length) types[path]!.inv = invariants;
        if (path === sd.id) continue;
      }
      const dot = path.lastIndexOf('.');
      const owner = types[path.slice(0, dot)];
      if (!owner) throw new Error(`no owner type for ${path}`);
      let name = path.slice(dot + 1);
      if (!isBackbone(el) && invariants.length) (owner.inv ??= []).push(...invariants.map(([key, severity, human, expression]): TableInvariant => [key, severity, human, expression, name.replace('[x]', '')]));
      const element: TableElement = { t: '' };
      if (el.contentReference) element.t = el.contentReference.slice(1);
      else if (isBackbone(el)) element.t = path;
      else {
        const codes = (el.type ?? []).map(typeCode);
        // R4 gives Resource.id the FHIRPath type System.String; its FHIR type is id.
        element.t = name.endsWith('[x]') ? codes : name === 'id' && kind === 'resource' && dot === sd.id.length ? 'id' : codes[0]!;
        if ((el.type ?? []).some((t) => isBare(t, unextensible))) element.bare = true;
        const targets = [...new Set((el.type ?? []).flatMap((t) => (t.code === 'Reference' ? (t.targetProfile ?? []) : [])).map(typeName))];
        if (targets.length && !targets.includes('Resource')) element.to = targets;
      }
      if (name.endsWith('[x]')) name = name.slice(0, -3);
      if ((el.min ?? 0) > 0) element.min = el.min!;
      if (el.max !== undefined && el.max !== '1') element.max = el.max === '*' ? '*' : Number(el.max);
      // R4 defines canonical URLs (`ValueSet.url`), a ValueSet's include system and a few more as "An absolute URI ...".
      if (/^(An|The) absolute (URI|URL)\b/.test(el.definition ?? '')) element.abs = true;
      if (el.binding?.strength === 'required' && el.binding.valueSet) {
        element.vs = el.binding.valueSet.split('|')[0]!;
        bound.add(element.vs);
      } else if (element.t === 'code' && maxValueSet(el.binding) === ALL_LANGUAGES) {
        // A language's binding is preferred, but its maxValueSet (all-languages) is the limit of what it may
        // hold (R4 terminologies.html): a code is a BCP 47 tag, checked as a required binding's syntax.
        element.vs = ALL_LANGUAGES;
        bound.add(element.vs);
      }
      owner.e[name] = element;
    }
  }
  const valueSets: Record<string, TableValueSet> = {};
  const service = new TerminologyService({ core: await r4TerminologySource(), sourceFor: () => new MemoryTerminologySource() });
  const context = await service.context('table');
  for (const url of [...bound].sort()) {
    const syntax = SYNTAX_VALUE_SETS[url];
    if (syntax) {
      valueSets[url] = syntax;
      continue;
    }
    const codes = await valueSetCodes(context, { kind: 'url', url }, 100_000);
    valueSets[url] = { codes: codes.map((c) => `${c.system}|${c.code}`).sort() };
  }
  const sorted = Object.fromEntries(Object.entries(types).sort(([a], [b]) => a.localeCompare(b)));
  return { types: sorted, valueSets, codeSystems: await coreCodeSystems() };
}

/**
 * The codes of R4's own code systems: `http://hl7.org/fhir/...` ones whose content is complete (not
 * terminology.hl7.org's, which grow after R4). Each must be of version 4.0.1 and case-sensitive, as
 * the validator compares codes exactly (codings.ts).
 */
async function coreCodeSystems(): Promise<Record<string, string[]>> {
  type Concept = { code: string; concept?: Concept[] };
  const out: Record<string, string[]> = {};
  for (const cs of await r4CodeSystems()) {
    if (!cs.url.startsWith('http://hl7.org/fhir/') || cs.content !== 'complete') continue;
    if (cs.version !== '4.0.1' || cs.caseSensitive !== true) throw new Error(`${cs.url}: version ${cs.version}, caseSensitive ${cs.caseSensitive}`);
    const codes: string[] = [];
    const walk = (concepts: Concept[] | undefined) => {
      for (const c of concepts ?? []) {
        codes.push(c.code);
        walk(c.concept);
      }
    };
    walk(cs.concept as Concept[] | undefined);
    out[cs.url] = [...new Set(codes)].sort();
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}
