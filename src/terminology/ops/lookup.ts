import type { CodeSystemIndex, ConceptEntry } from '../compile/code-system-index.ts';
import { systemLabel, unknownCodeMessage } from '../compile/membership.ts';
import type { TerminologyContext } from '../context.ts';
import { invalid, notFound } from '../errors.ts';
import type { lookupParams } from '../input/operations.ts';
import type { OperationInput } from '../input/parameters.ts';
import type { ConceptProperty } from '../model/code-system.ts';
import type { Parameters, ParametersParameter } from '../model/parameters.ts';

export interface LookupInput {
  readonly system: string;
  readonly version?: string;
  readonly code: string;
  /** Property codes to return; all when empty. */
  readonly properties: readonly string[];
}

type RawInput = OperationInput<(typeof lookupParams)['spec']>;

/** Applies the input rules of CodeSystem/$lookup: code with system, or a coding. */
export function lookupInput(raw: RawInput): LookupInput {
  if (raw.code !== undefined && raw.coding !== undefined) throw invalid("give either 'code' and 'system' or 'coding', not both", ['code', 'coding']);
  const code = raw.code ?? raw.coding?.code;
  const system = raw.code !== undefined ? raw.system : raw.coding?.system;
  if (code === undefined) throw invalid("'code' (with 'system') or 'coding' is required", ['code', 'coding']);
  if (system === undefined) throw invalid(`The system of the code '${code}' is required`, ['system']);
  return { system, code, version: raw.version ?? raw.coding?.version, properties: raw.property ?? [] };
}

/**
 * CodeSystem/$lookup (FHIR R4 CodeSystem-lookup): name, version, display, designations and
 * properties of a concept, with `parent` and `child` from the resolved hierarchy.
 * An unknown CodeSystem or code is a 404.
 */
export async function lookupCode(input: LookupInput, deps: { readonly terminology: TerminologyContext }): Promise<Parameters> {
  const cs = await deps.terminology.codeSystem(input.system, input.version);
  if (cs === null) throw notFound(`CodeSystem ${systemLabel(input.system, input.version)} is not known`);
  const entry = cs.find(input.code);
  if (entry === undefined) throw notFound(unknownCodeMessage(input.code, cs));
  const wanted = (name: string): boolean => input.properties.length === 0 || input.properties.includes(name);
  const parameter: ParametersParameter[] = [{ name: 'name', valueString: cs.name ?? cs.url }];
  if (cs.version !== undefined) parameter.push({ name: 'version', valueString: cs.version });
  if (entry.definition.display !== undefined) parameter.push({ name: 'display', valueString: entry.definition.display });
  if (entry.definition.definition !== undefined && wanted('definition')) {
    parameter.push({ name: 'definition', valueString: entry.definition.definition });
  }
  for (const d of entry.definition.designation ?? []) {
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
function conceptProperties(cs: CodeSystemIndex, entry: ConceptEntry): ConceptProperty[] {
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
