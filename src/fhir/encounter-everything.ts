/**
 * `Encounter/{id}/$everything` (R4 OperationDefinition Encounter-everything): the Encounter, every
 * resource in its compartment (R4 Encounter CompartmentDefinition: the Observations, Conditions,
 * Procedures... whose `encounter` or `context` names it), and the resources those refer to, as
 * Patient/$everything answers (src/fhir/everything.ts, whose parameters, cursor and includes this
 * shares): `_since`, `_type`, `_count`, paged by `_cursor`. Matches come type after type, the Encounter
 * first and then the compartment's types in the CompartmentDefinition's order, each type's by id; a
 * page's `_cursor` is its last match's type index and id.
 *
 * The compartment is not indexed as the Patient one is: each type's members are found by the search
 * engine as `{type}?{param}=Encounter/{id}` (the reference index), read by id from the cursor on, at
 * most a page's count at a time, so a page costs one indexed search per type it reaches. Access: the
 * Encounter must be readable (404 / 410 / 403); each other type is listed, so it must be readable and
 * searchable (enumerationAccess), and a type's SMART v2 filters and patient context bound its rows as
 * they bound a search of it.
 */
import { countedEverything, countParams, countsOnly } from './everything-count.ts';
import { FhirError } from '../errors.ts';
import type { Condition, ResourceVersion, SearchQuery } from '../store/types.ts';
import { enumerationAccess, requireAccess } from './access.ts';
import type { CapabilityContribution } from './capability.ts';
import { readResource, type FhirDeps, type FhirRequest } from './crud.ts';
import { encounterCompartment } from './definitions.ts';
import { encodePosition, everythingInput, type EverythingPage, type Position } from './everything.ts';
import { pageRows } from './everything-fill.ts';
import { guardOf } from './everything-rows.ts';
import { ID_PATTERN } from './resource-types.ts';
import { parameterCondition } from './search-compile.ts';

/** `Encounter/{id}/$everything` in the CapabilityStatement. */
export const encounterEverythingCapability: CapabilityContribution = {
  operations: [{ name: 'everything', definition: 'http://hl7.org/fhir/OperationDefinition/Encounter-everything', types: ['Encounter'] }],
};

/** The compartment's types, the Encounter first, then the others in the CompartmentDefinition's order. */
const TYPES = ['Encounter', ...[...encounterCompartment().keys()].filter((t) => t !== 'Encounter')];

export async function encounterEverything(deps: FhirDeps, req: FhirRequest, given: URLSearchParams, strict: boolean, encounterId: string): Promise<EverythingPage> {
  const counting = countsOnly(given);
  const params = counting ? countParams(given) : given;
  requireAccess(req.access, 'Encounter', 'r');
  // The compartment's rows are listed, as a search lists them: each type needs read and search (its bound and
  // filter the narrower of the two); the Encounter itself is read by its id, with read alone.
  const listed: FhirRequest = { ...req, access: enumerationAccess(req.access, 'Encounter') };
  const input = everythingInput(deps, listed, params, strict, TYPES, (t) => req.access.can(t, 'r'));
  if (!ID_PATTERN.test(encounterId)) throw new FhirError('invalid', `Invalid id '${encounterId}'`);
  await readResource(deps, req, 'Encounter', encounterId); // 404 / 410 / 403 as a read would
  const { walk, pos } = input;
  /** The first `count` rows of the compartment's `walk` after `after` (undefined: from `start`), type after type, each by id. */
  const rowsOf = (walk: string[], start: Position) => async (after: ResourceVersion | undefined, count: number) => {
    const rows: ResourceVersion[] = [];
    const from = after === undefined ? start : { t: walk.indexOf(after.type), a: after.id };
    for (let t = from.t, id = from.a; t < walk.length && rows.length < count; t++, id = undefined) {
      const type = walk[t]!;
      const where: Condition[] = type === 'Encounter'
        ? [{ kind: 'id', ids: [encounterId] }]
        : encounterCompartment().get(type)!.map((param) => parameterCondition(type, param, `Encounter/${encounterId}`, deps.clock.now()) as Condition);
      if (where.length > 1) where.splice(0, where.length, { kind: 'or', any: [...where] });
      if (input.since) where.push({ kind: 'lastUpdated', tests: [{ op: 'ge', ...input.since }] });
      where.push(...(guardOf(listed, type, undefined) ?? []));
      const q: SearchQuery = { type, where, sort: [], count: count - rows.length };
      if (id !== undefined) q.after = { lastUpdated: 0, id };
      rows.push(...(await deps.store.resources.search(req.tenant, q)));
    }
    return rows;
  };
  // A count reads the matches alone: the types returned, from the start.
  if (counting) return countedEverything(input, rowsOf(input.types, { t: 0 }));
  const readRows = rowsOf(walk, pos);
  // What the rows read refer to (the patient, practitioners, locations, another Encounter of `partOf`...), every type.
  const ignored = [...input.warnings];
  const { matches, included, last } = await pageRows(deps, req, params, input, readRows, () => false, input.warnings);
  const result: EverythingPage = { rows: matches, included, self: input.self, warnings: input.warnings, ignored, ...input.page };
  if (last !== undefined) result.next = encodePosition({ type: last.type, a: last.id });
  return result;
}
