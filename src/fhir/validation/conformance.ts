/**
 * Rules of single resource types that R4 states in its element definitions rather than as invariants,
 * checked at `strict` as HL7's validator checks them:
 * - CodeSystem: a code system that `supplements` another has `content` `supplement`, and one whose content
 *   is `supplement` names what it supplements (R4 CodeSystemContentMode `supplement`: "This code system is a
 *   supplement"); its properties have distinct codes (`concept.property.code` refers to one by it) and
 *   distinct URIs (a warning), a URI of R4's concept-properties has that property's type, and each
 *   concept's property value is of the type its property declares (R4 CodeSystem.property.type: "The type of the property
 *   value"); a property no `CodeSystem.property` declares is a warning;
 * - ValueSet: a concept listed in an include or exclude of SNOMED CT, and the value of a filter on its
 *   `concept` (`is-a`, `descendent-of`, `=`, `in`...), is an SCTID (or an expression);
 * - Bundle: an entry's `fullUrl` is absolute (R4 Bundle.entry.fullUrl: "The Absolute URL for the resource"),
 *   but in a transaction or batch, where Cinder resolves one relative to its FHIR base; the paging links
 *   (`self`, `first`, `previous`, `next`, `last`) each at most once (each names one page of a search's
 *   results, R4 http.html); in a `searchset`, an entry whose search mode is
 *   `outcome` holds an OperationOutcome (R4 SearchEntryMode `outcome`), and one whose mode is `match` or
 *   `include` a resource with an id (R4 Resource.id: only a resource being created has none); a document's or
 *   message's references name one entry each (bundle-references.ts);
 * - SearchParameter: one `derivedFrom` an R4 core parameter has its type and only bases it has (R4
 *   SearchParameter.derivedFrom: "the details in the search parameter must be consistent with the
 *   definition from which it is defined");
 * - StructureDefinition: a profile (`derivation` `constraint`) of an R4 resource or datatype names in its
 *   differential only paths its type has (`Observation.valueQuantity` or `Observation.value[x]`, not
 *   `Observation.valueBla`), as R4 profiling.html requires and snapshot generation needs: a path is checked
 *   as far as R4's model of the type reaches (into datatypes and backbone elements; not past `value[x]` or
 *   into a contained resource); a path eld-20 finds no simple path is left to eld-19 and eld-20;
 * - CapabilityStatement: a `searchParam` whose `definition` is an R4 core parameter says its type, if any (a
 *   warning: R4's own base, terminology-server, knowledge-repository and measure-processor CapabilityStatements
 *   say `token` for `_source`, a `uri`, and `string` for the `version` tokens).
 */
import { coreSearchParameter, isDomainResource } from '../definitions.ts';
import { SNOMED_CT, sctidProblem } from './codings.ts';
import { checkBundleReferences } from './bundle-references.ts';
import { typeModel, type Slot, type TypeModel } from './model.ts';

type Json = Record<string, unknown>;

/** The walk's state these checks need. */
export interface ConformanceScope {
  add(code: 'value' | 'code-invalid', expression: string, text: string, severity?: 'error' | 'warning'): void;
}

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const items = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Runs the rules of `r`'s type, if it has any, on `r` at `path`. */
export function checkConformance(scope: ConformanceScope, r: Json, path: string): void {
  switch (r.resourceType) {
    case 'CodeSystem': return checkCodeSystem(scope, r, path);
    case 'ValueSet': return checkValueSet(scope, r, path);
    case 'Bundle': return checkBundle(scope, r, path);
    case 'SearchParameter': return checkSearchParameter(scope, r, path);
    case 'CapabilityStatement': return checkCapabilityStatement(scope, r, path);
    case 'StructureDefinition': return checkDifferentialPaths(scope, r, path);
  }
}

/** R4's concept-properties (http://hl7.org/fhir/concept-properties, 4.0.1), each with its type. */
const CONCEPT_PROPERTIES: ReadonlyMap<string, string> = new Map([
  ['inactive', 'boolean'], ['deprecated', 'dateTime'], ['notSelectable', 'boolean'], ['parent', 'code'], ['child', 'code'],
]);
const CONCEPT_PROPERTIES_BASE = 'http://hl7.org/fhir/concept-properties#';
/** CodeSystem.concept.property.value[x]'s types, each as the property type code names it. */
const VALUE_TYPES = ['code', 'Coding', 'string', 'integer', 'boolean', 'dateTime', 'decimal'];

function checkCodeSystem(scope: ConformanceScope, cs: Json, path: string): void {
  if (cs.supplements !== undefined && cs.content !== undefined && cs.content !== 'supplement') {
    scope.add('value', `${path}.content`, `A CodeSystem that supplements another (${JSON.stringify(cs.supplements)}) must have content 'supplement', not ${JSON.stringify(cs.content)}`);
  } else if (cs.content === 'supplement' && cs.supplements === undefined) {
    scope.add('value', `${path}.supplements`, "A CodeSystem whose content is 'supplement' must say which code system it supplements (CodeSystem.supplements)");
  }
  const types = new Map<string, string | undefined>();
  const uris = new Set<string>();
  items(cs.property).forEach((p, i) => {
    if (!isObject(p)) return;
    const at = `${path}.property[${i}]`;
    const { code, uri, type } = p;
    if (typeof code === 'string') {
      if (types.has(code)) scope.add('value', `${at}.code`, `A property is already defined with the code '${code}': a concept's property names its definition by code`);
      else types.set(code, typeof type === 'string' ? type : undefined);
    }
    if (typeof uri !== 'string') return;
    // A warning: R4's own SNOMED CT CodeSystem repeats a placeholder URI (`http://.........?`) on several properties.
    if (uris.has(uri)) scope.add('value', `${at}.uri`, `A property is already defined with the URI '${uri}'`, 'warning');
    uris.add(uri);
    const known = uri.startsWith(CONCEPT_PROPERTIES_BASE) ? CONCEPT_PROPERTIES.get(uri.slice(CONCEPT_PROPERTIES_BASE.length)) : undefined;
    if (known !== undefined && typeof type === 'string' && type !== known) {
      scope.add('value', `${at}.type`, `The URI '${uri}' identifies a property of type '${known}', not '${type}'`);
    }
  });
  checkConcepts(scope, cs.concept, `${path}.concept`, types);
}

/** Each concept's (and nested concept's) properties hold values of their declared types. */
function checkConcepts(scope: ConformanceScope, concepts: unknown, path: string, types: ReadonlyMap<string, string | undefined>): void {
  items(concepts).forEach((c, i) => {
    if (!isObject(c)) return;
    items(c.property).forEach((p, j) => {
      if (!isObject(p) || typeof p.code !== 'string') return;
      const at = `${path}[${i}].property[${j}]`;
      if (!types.has(p.code)) {
        scope.add('value', `${at}.code`, `The property '${p.code}' has no definition in CodeSystem.property`, 'warning');
        return;
      }
      const declared = types.get(p.code);
      const given = VALUE_TYPES.find((t) => `value${t[0]!.toUpperCase()}${t.slice(1)}` in p);
      if (declared !== undefined && given !== undefined && given !== declared) {
        scope.add('value', `${at}.value.ofType(${given})`, `The property '${p.code}' is defined to have the type '${declared}', not '${given}'`);
      }
    });
    checkConcepts(scope, c.concept, `${path}[${i}].concept`, types);
  });
}

/** The filter operators whose value names a concept (or, `in`/`not-in`, a list of them). */
const CONCEPT_OPS = new Set(['=', 'is-a', 'descendent-of', 'is-not-a', 'generalizes', 'in', 'not-in']);

function checkValueSet(scope: ConformanceScope, vs: Json, path: string): void {
  const compose = vs.compose;
  if (!isObject(compose)) return;
  for (const part of ['include', 'exclude'] as const) {
    items(compose[part]).forEach((inc, i) => {
      if (!isObject(inc) || inc.system !== SNOMED_CT) return;
      items(inc.concept).forEach((c, j) => {
        if (!isObject(c) || typeof c.code !== 'string') return;
        const problem = sctidProblem(c.code);
        if (problem !== undefined) scope.add('code-invalid', `${path}.compose.${part}[${i}].concept[${j}].code`, `Unknown code ${JSON.stringify(c.code)} in the code system ${SNOMED_CT}: ${problem}`);
      });
      // A filter on the concept itself names concepts (SNOMED CT's implicit `concept` property; `in` and `not-in` a list).
      items(inc.filter).forEach((f, j) => {
        if (!isObject(f) || f.property !== 'concept' || typeof f.value !== 'string' || typeof f.op !== 'string' || !CONCEPT_OPS.has(f.op)) return;
        for (const code of f.op === 'in' || f.op === 'not-in' ? f.value.split(',').map((c) => c.trim()) : [f.value]) {
          const problem = sctidProblem(code);
          if (problem !== undefined) {
            scope.add('code-invalid', `${path}.compose.${part}[${i}].filter[${j}].value`, `The value of a filter on SNOMED CT's concept must name concepts, and ${JSON.stringify(code)} cannot: ${problem}`);
            break;
          }
        }
      });
    });
  }
}

/** RFC 3986's scheme, which an absolute URI starts with. */
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;

/** The paging links of a Bundle: each names one page. */
const PAGING = new Set(['self', 'first', 'previous', 'prev', 'next', 'last']);

function checkBundle(scope: ConformanceScope, b: Json, path: string): void {
  checkBundleReferences(scope, b, path);
  const seen = new Set<string>();
  items(b.link).forEach((l, i) => {
    if (!isObject(l) || typeof l.relation !== 'string' || !PAGING.has(l.relation)) return;
    if (seen.has(l.relation)) scope.add('value', `${path}.link[${i}].relation`, `The link relation '${l.relation}' can only occur once in a Bundle`);
    seen.add(l.relation);
  });
  // R4 Bundle.entry.fullUrl: "The Absolute URL for the resource". A transaction's or batch's may be relative
  // to this server's FHIR base: http.html's rules resolve them so, as Cinder's transactions do.
  if (b.type !== 'transaction' && b.type !== 'batch') {
    items(b.entry).forEach((e, i) => {
      if (isObject(e) && typeof e.fullUrl === 'string' && !SCHEME.test(e.fullUrl)) {
        scope.add('value', `${path}.entry[${i}].fullUrl`, `The fullUrl ${JSON.stringify(e.fullUrl)} is not an absolute URL: an entry's fullUrl is the resource's absolute URL, or a urn:uuid: or urn:oid:, outside a transaction or batch`);
      }
    });
  }
  if (b.type !== 'searchset') return;
  items(b.entry).forEach((e, i) => {
    if (!isObject(e) || !isObject(e.resource) || !isObject(e.search)) return;
    const { resource, search } = e;
    const at = `${path}.entry[${i}].resource`;
    if (search.mode === 'outcome' && resource.resourceType !== 'OperationOutcome') {
      scope.add('value', at, `An entry whose search mode is 'outcome' holds an OperationOutcome, not a ${String(resource.resourceType)}`);
    } else if ((search.mode === 'match' || search.mode === 'include') && resource.id === undefined) {
      scope.add('value', at, `A search result (search mode '${search.mode}') must have an id`);
    }
  });
}

/** The R4 core SearchParameter a canonical names (`url` or `url|version`). */
function coreParameter(canonical: unknown) {
  return typeof canonical === 'string' ? coreSearchParameter(canonical.split('|')[0]!) : undefined;
}

function checkSearchParameter(scope: ConformanceScope, sp: Json, path: string): void {
  const from = coreParameter(sp.derivedFrom);
  if (from === undefined) return;
  if (typeof sp.type === 'string' && sp.type !== from.type) {
    scope.add('value', `${path}.type`, `The type ${sp.type} differs from the type ${from.type} of ${String(sp.derivedFrom)}, which this SearchParameter is derived from`);
  }
  const allows = (base: string) =>
    from.base.includes(base) || from.base.includes('Resource') || (from.base.includes('DomainResource') && isDomainResource(base));
  items(sp.base).forEach((base, i) => {
    if (typeof base === 'string' && !allows(base)) {
      scope.add('value', `${path}.base[${i}]`, `The resource type ${base} is not a base of ${String(sp.derivedFrom)}, which this SearchParameter is derived from (its bases: ${from.base.join(', ')})`);
    }
  });
}

function checkCapabilityStatement(scope: ConformanceScope, cs: Json, path: string): void {
  const check = (params: unknown, at: string) =>
    items(params).forEach((p, k) => {
      if (!isObject(p) || typeof p.type !== 'string') return;
      const def = coreParameter(p.definition);
      if (def !== undefined && def.type !== p.type) {
        scope.add('value', `${at}.searchParam[${k}].type`, `The type ${p.type} differs from the type ${def.type} of the SearchParameter ${String(p.definition)} it names as its definition`, 'warning');
      }
    });
  items(cs.rest).forEach((rest, i) => {
    if (!isObject(rest)) return;
    check(rest.searchParam, `${path}.rest[${i}]`);
    items(rest.resource).forEach((res, j) => {
      if (isObject(res)) check(res.searchParam, `${path}.rest[${i}].resource[${j}]`);
    });
  });
}

/** eld-20's pattern of a path of simple names, anchored as Cinder anchors it (README, Validation). */
const ELD_20 = /^[A-Za-z][A-Za-z0-9]*(\.[a-z][A-Za-z0-9]*(\[x])?)*$/;

/** A profile's differential names paths of its type (the elements a snapshot is made of). */
function checkDifferentialPaths(scope: ConformanceScope, sd: Json, path: string): void {
  if (sd.derivation !== 'constraint' || (sd.kind !== 'resource' && sd.kind !== 'complex-type') || typeof sd.type !== 'string') return;
  const root = typeModel(sd.type);
  const differential = sd.differential;
  if (root === null || !isObject(differential)) return;
  items(differential.element).forEach((e, i) => {
    if (!isObject(e) || typeof e.path !== 'string') return;
    const problem = pathProblem(sd.type as string, root, e.path);
    if (problem !== undefined) scope.add('value', `${path}.differential.element[${i}].path`, problem);
  });
}

/** Why `elementPath` is no path of `type` (whose model is `root`), or undefined when it is one, as far as the model reaches. */
function pathProblem(type: string, root: TypeModel, elementPath: string): string | undefined {
  // A path of another type is sdf-8a's to refuse, and one that is not of simple names eld-19's and eld-20's.
  if (!ELD_20.test(elementPath)) return undefined;
  const steps = elementPath.split('.');
  if (steps[0] !== type) return undefined;
  let model: TypeModel | null = root;
  for (let i = 1; i < steps.length && model !== null; i++) {
    const name = steps[i]!;
    const choice = name.endsWith('[x]');
    const slot: Slot | undefined = choice ? [...model.slots.values()].find((s) => s.element.choice && s.element.name === name.slice(0, -3)) : model.slots.get(name);
    if (slot === undefined) {
      const at = steps.slice(0, i).join('.');
      const choiceOf = [...model.slots.values()].find((s) => s.element.choice && name.startsWith(s.element.name));
      return choiceOf !== undefined
        ? `The path '${elementPath}' names no element of ${at}: its choice element is '${at}.${choiceOf.element.name}[x]', or one of its types' (${listed(choiceOf.element.names)})`
        : `The path '${elementPath}' names no element of ${at} ('${name}' is not one of its elements)`;
    }
    model = choice || slot.type === 'Resource' ? null : typeModel(slot.type);
  }
  return undefined;
}

/** A list of names, the first dozen of a long one. */
function listed(names: readonly string[]): string {
  return names.length > 12 ? `${names.slice(0, 12).join(', ')}, ...` : names.join(', ');
}
