import { invalid } from '../errors.ts';
import type { translateParams } from '../input/operations.ts';
import type { Dependency, OperationInput } from '../input/parameters.ts';
import type { ConceptMap } from '../model/concept-map.ts';
import { splitCanonical } from '../version.ts';

/** One coding to translate, with the input element that carried it (for messages). */
export interface SourceCoding {
  readonly system: string;
  readonly version?: string;
  readonly code: string;
  readonly path: string;
}

/** Which ConceptMaps to translate with. */
export type MapChoice =
  | { readonly kind: 'url'; readonly url: string; readonly version?: string }
  | { readonly kind: 'inline'; readonly map: ConceptMap }
  | { readonly kind: 'instance'; readonly id: string }
  /** Every map the tenant and the core hold, narrowed by the source and target value sets. */
  | { readonly kind: 'any'; readonly source?: string; readonly target?: string };

export interface TranslateInput {
  readonly codings: readonly SourceCoding[];
  readonly map: MapChoice;
  readonly targetsystem?: string;
  readonly dependencies: readonly Dependency[];
  readonly reverse: boolean;
}

type RawInput = OperationInput<(typeof translateParams)['spec']>;

const ONE_OF = "one of 'code' (with 'system'), 'coding' or 'codeableConcept'";

/**
 * Applies the input rules of ConceptMap/$translate (FHIR R4 ConceptMap-translate): exactly one of
 * `code` with `system` (and `version`), `coding` or `codeableConcept`; the map named by `url` (and
 * `conceptMapVersion`), sent as `conceptMap`, or at instance level `id`, else every map known, narrowed
 * by the `source` and `target` value sets.
 */
export function translateInput(raw: RawInput, id?: string): TranslateInput {
  const given = [raw.code, raw.coding, raw.codeableConcept].filter((v) => v !== undefined).length;
  if (given === 0) throw invalid(`${ONE_OF} is required`, ['code', 'coding', 'codeableConcept']);
  if (given > 1) throw invalid(`give only ${ONE_OF}, not several`, ['code', 'coding', 'codeableConcept']);
  for (const [i, d] of (raw.dependency ?? []).entries()) {
    if (d.element === undefined) throw invalid(`'dependency' ${i + 1} has no 'element'`, [`dependency[${i}].element`]);
  }
  return {
    codings: codingsOf(raw),
    map: mapChoice(raw, id),
    ...(raw.targetsystem !== undefined ? { targetsystem: raw.targetsystem } : {}),
    dependencies: raw.dependency ?? [],
    reverse: raw.reverse === true,
  };
}

function codingsOf(raw: RawInput): SourceCoding[] {
  if (raw.code !== undefined) {
    if (raw.system === undefined) throw invalid("the parameter 'system' is required with 'code'", ['system']);
    return [{ system: raw.system, code: raw.code, path: 'code', ...(raw.version !== undefined ? { version: raw.version } : {}) }];
  }
  if (raw.coding !== undefined) {
    const { system, code, version } = raw.coding;
    if (system === undefined) throw invalid("'coding' has no system: a code is translated from its code system", ['coding.system']);
    if (code === undefined) throw invalid("'coding' has no code", ['coding.code']);
    return [{ system, code, path: 'coding', ...(version !== undefined ? { version } : {}) }];
  }
  const codings = (raw.codeableConcept?.coding ?? []).flatMap((c, i) =>
    c.system === undefined || c.code === undefined ? [] : [{ system: c.system, code: c.code, path: `codeableConcept.coding[${i}]`, ...(c.version !== undefined ? { version: c.version } : {}) }]);
  if (codings.length === 0) throw invalid("'codeableConcept' has no coding with both a system and a code", ['codeableConcept']);
  return codings;
}

function mapChoice(raw: RawInput, id: string | undefined): MapChoice {
  if (id !== undefined) {
    const named = raw.url !== undefined ? 'url' : raw.conceptMap !== undefined ? 'conceptMap' : undefined;
    if (named !== undefined) throw invalid(`'${named}' cannot be given at instance level: the ConceptMap is ConceptMap/${id}`, [named]);
    return { kind: 'instance', id };
  }
  if (raw.conceptMap !== undefined) {
    if (raw.url !== undefined) throw invalid("give either 'url' or 'conceptMap', not both", ['url', 'conceptMap']);
    return { kind: 'inline', map: raw.conceptMap };
  }
  if (raw.url !== undefined) {
    const { url, version } = splitCanonical(raw.url);
    const pinned = raw.conceptMapVersion ?? version;
    return { kind: 'url', url, ...(pinned !== undefined ? { version: pinned } : {}) };
  }
  if (raw.conceptMapVersion !== undefined) throw invalid("'conceptMapVersion' needs 'url', the ConceptMap it is a version of", ['conceptMapVersion']);
  return { kind: 'any', ...(raw.source !== undefined ? { source: raw.source } : {}), ...(raw.target !== undefined ? { target: raw.target } : {}) };
}
