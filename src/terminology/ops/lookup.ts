import type { CodeSystemIndex, ConceptEntry } from '../compile/code-system-index.ts';
import { systemLabel, unknownCode } from '../compile/membership.ts';
import type { TerminologyContext } from '../context.ts';
import { invalid, notFound } from '../errors.ts';
import type { lookupParams } from '../input/operations.ts';
import { displayLanguageOf, type OperationInput } from '../input/parameters.ts';
import type { ConceptDefinition, ConceptProperty } from '../model/code-system.ts';
import type { Designation } from '../model/datatypes.ts';
import type { DatePeriod } from '../model/date-time.ts';
import type { Parameters, ParametersParameter } from '../model/parameters.ts';
import { designationsWithDisplay, displayIn } from './display-language.ts';
import { checkSameCodeSystem, type CodeSystemTarget, targetCodeSystem } from './resolve-code-system.ts';

export interface LookupInput {
  /** The CodeSystem named by system (and version), or the stored one at instance level. */
  readonly target: CodeSystemTarget;
  readonly code: string;
  /** Property codes to return; all when empty. */
  readonly properties: readonly string[];
  /** Without an explicit version, the CodeSystem version in effect at this date (R4 `date`). */
  readonly date?: DatePeriod;
  /** The language of the `display` output (R4 `displayLanguage`). */
  readonly displayLanguage?: string;
}

type RawInput = OperationInput<(typeof lookupParams)['spec']>;

/**
 * Applies the input rules of CodeSystem/$lookup: code with system, or a coding; at instance
 * level (`CodeSystem/{id}/$lookup`) the system is the stored CodeSystem's and may be left out.
 * `acceptLanguage`, the request's header, stands for `displayLanguage` when that is not given.
 */
export function lookupInput(raw: RawInput, instance?: CodeSystemIndex, acceptLanguage?: string): LookupInput {
  if (raw.code !== undefined && raw.coding !== undefined) throw invalid("give either 'code' and 'system' or 'coding', not both", ['code', 'coding']);
  if (raw.coding !== undefined && raw.system !== undefined) throw invalid("'system' goes with 'code'; a 'coding' carries its own system", ['system']);
  const code = raw.code ?? raw.coding?.code;
  const system = raw.code !== undefined ? raw.system : raw.coding?.system;
  const version = raw.version ?? raw.coding?.version;
  if (code === undefined) throw invalid("'code' (with 'system') or 'coding' is required", ['code', 'coding']);
  const { date } = raw;
  const displayLanguage = displayLanguageOf(raw.displayLanguage, acceptLanguage);
  const properties = raw.property ?? [];
  if (instance !== undefined) {
    checkSameCodeSystem(instance, system, version, { system: raw.code !== undefined ? 'system' : 'coding.system', version: 'version' });
    return { target: { instance }, code, properties, date, displayLanguage };
  }
  if (system === undefined) throw invalid(`The system of the code '${code}' is required`, ['system']);
  return { target: { system, version }, code, properties, date, displayLanguage };
}

/**
 * CodeSystem/$lookup (FHIR R4 CodeSystem-lookup): name, version, display (in `displayLanguage`
 * when the concept has a designation in it), designations and properties of a concept, with
 * `parent` and `child` from the resolved hierarchy; and, as HL7's reference servers add,
 * the `system`, the `code` and whether it is `abstract`. An unknown CodeSystem or code is a 404.
 */
export async function lookupCode(input: LookupInput, deps: { readonly terminology: TerminologyContext }): Promise<Parameters> {
  const cs = await targetCodeSystem(input.target, deps.terminology.at(input.date));
  if (cs.content === 'supplement') {
    throw invalid(`CodeSystem ${systemLabel(cs.url, cs.version)} is a supplement; look its codes up in the code system it supplements ('${cs.resource.supplements}')`, ['system']);
  }
  const entry = cs.find(input.code);
  if (entry === undefined) throw notFound(unknownCode(input.code, cs).text);
  // No `property` input: the defaults; `*`: every property (as the reference servers read it).
  const wanted = (name: string): boolean => input.properties.length === 0 || input.properties.includes('*') || input.properties.includes(name);
  const parameter: ParametersParameter[] = [{ name: 'name', valueString: cs.name ?? cs.url }, { name: 'system', valueUri: cs.url }];
  if (cs.version !== undefined) parameter.push({ name: 'version', valueString: cs.version });
  // The concept's code as the CodeSystem has it (a case-insensitive one may be asked in another case), and whether it is abstract.
  parameter.push({ name: 'code', valueCode: entry.code }, { name: 'abstract', valueBoolean: entry.abstract });
  const display = displayIn(entry.definition, cs.language, input.displayLanguage);
  if (display !== undefined) parameter.push({ name: 'display', valueString: display });
  if (entry.definition.definition !== undefined && wanted('definition')) {
    parameter.push({ name: 'definition', valueString: entry.definition.definition });
  }
  for (const d of designationsWithDisplay(entry.definition, cs.language)) {
    const part: ParametersParameter[] = [];
    if (d.language !== undefined) part.push({ name: 'language', valueCode: d.language });
    if (d.use !== undefined) part.push({ name: 'use', valueCoding: d.use });
    part.push({ name: 'value', valueString: d.value });
    parameter.push({ name: 'designation', part });
  }
  parameter.push(...conceptProperties(cs, entry).filter((p) => wanted(p.code)).map(propertyParameter));
  return { resourceType: 'Parameters', parameter };
}

/** The concept's own properties, with parent/child links and `inactive` taken from the index. */
export function conceptProperties(cs: CodeSystemIndex, entry: ConceptEntry): ConceptProperty[] {
  const own = (entry.definition.property ?? []).filter((p) => {
    const role = cs.roles.get(p.code);
    return role !== 'parent' && role !== 'child' && role !== 'inactive';
  });
  return [
    ...own,
    { code: 'inactive', valueBoolean: entry.inactive },
    ...entry.parents.map((code) => ({ code: 'parent', valueCode: code })),
    ...entry.children.map((code) => ({ code: 'child', valueCode: code })),
  ];
}

function propertyParameter(p: ConceptProperty): ParametersParameter {
  const { code, ...value } = p;
  return { name: 'property', part: [{ name: 'code', valueCode: code }, { name: 'value', ...value }] };
}
