/**
 * Profile validation of an import, as a REST write at `strict` checks it (crud.ts requireProfiles): each
 * resource claiming a profile Cinder knows is checked against it, and its extensions against their
 * definitions. The tenant's StructureDefinitions are read once, when the import starts: a profile
 * imported by the run applies to the next import, not to this one. The preparation thread, which has no
 * store, gets them raw and compiles what is claimed; a binding the base table cannot decide is asked of
 * the importing thread's terminology (the tenant's as it stands when the value set and coding are first
 * met), each answer kept for the run. QuestionnaireResponses are checked against the tenant's
 * Questionnaires as stored when the import starts, read and handed over the same way.
 */
import { validationLevel, type FhirDeps } from '../crud.ts';
import { ProfileValidator, profilesToCheck, readsProfiles, type CheckMembership, type Membership } from '../validation/profile/profile-check.ts';
import { ProfileRegistry } from '../validation/profile/registry.ts';
import { readDefinitions, snapshotProfiles } from '../validation/profile/definitions.ts';
import { QuestionnaireValidator, readsQuestionnaires } from '../validation/questionnaire/validator.ts';
import { operatorAccess, type Access } from '../access.ts';
import { readQuestionnaires, snapshotQuestionnaires } from '../validation/questionnaire/source.ts';

type Json = Record<string, unknown>;

/** What the preparation thread needs to check profiles. */
export interface WorkerProfiles {
  tenant: string;
  /** The tenant's StructureDefinitions at the start of the import. */
  definitions: Json[];
  /** Whether bindings may be asked of the importing thread (a terminology is wired). */
  terminology: boolean;
  /** The tenant's Questionnaires at the start of the import; absent: responses are not checked against them. */
  questionnaires?: Json[];
  /**
   * Whether the import's client may read Questionnaires (readsQuestionnaires): a response's problems are told in
   * full only then, as to a REST write (ResponseCheckOptions.reads).
   */
  readsQuestionnaires: boolean;
  /** Whether the import's client may read StructureDefinitions (readsProfiles), as `readsQuestionnaires` for profiles. */
  readsProfiles: boolean;
}

export interface ImportProfiles {
  /** For the importing thread: JSON documents and lines it prepares itself. */
  validator: ProfileValidator;
  /** For the importing thread: responses against the Questionnaires read at the start. */
  questionnaires?: QuestionnaireValidator;
  worker: WorkerProfiles;
  membership?: CheckMembership;
}

/** The profiles an import into `tenant` checks; undefined when none are (no validator wired, or below `strict`). */
export async function importProfiles(deps: FhirDeps, tenant: string, access: Access = operatorAccess): Promise<ImportProfiles | undefined> {
  if (deps.profiles === undefined || validationLevel(deps) !== 'strict') return undefined;
  const definitions = await readDefinitions(deps.store, tenant, deps.clock.now());
  const membership = deps.profiles.membership;
  const questionnaires = deps.questionnaires === undefined ? undefined : await readQuestionnaires(deps.store, tenant, deps.clock.now());
  return {
    validator: new ProfileValidator(new ProfileRegistry(snapshotProfiles(definitions)), membership),
    ...(questionnaires ? { questionnaires: new QuestionnaireValidator(snapshotQuestionnaires(questionnaires), membership) } : {}),
    worker: { tenant, definitions, terminology: membership !== undefined, ...(questionnaires ? { questionnaires } : {}), readsQuestionnaires: readsQuestionnaires(access), readsProfiles: readsProfiles(access) },
    ...(membership ? { membership } : {}),
  };
}

/** A line's check on the preparation thread: undefined at once when there is nothing to check. */
export type LineCheck = (resource: Json, extensions: boolean) => Promise<void> | undefined;

/**
 * The preparation thread's check: the definitions it was handed, bindings asked through `ask` (once per
 * value set and coding). The definitions never change during the run, so a canonical once found to name
 * no profile stays so: a line that claims only such canonicals (US Core's, say, on every line of Synthea's
 * output), holds no extension (`extensions` false) and no resource inside it is passed at once, as it
 * would pass the whole check.
 */
export function workerCheck(p: WorkerProfiles, ask: (url: string, coding: { system?: string; code: string }) => Promise<Membership>): LineCheck {
  const answers = new Map<string, Promise<Membership>>();
  const membership: CheckMembership = (_tenant, url, coding) => {
    const key = `${url}\0${coding.system ?? ''}\0${coding.code}`;
    let a = answers.get(key);
    if (a === undefined) answers.set(key, (a = ask(url, coding)));
    return a;
  };
  const registry = new ProfileRegistry(snapshotProfiles(p.definitions));
  const validator = new ProfileValidator(registry, p.terminology ? membership : undefined);
  const responses = p.questionnaires === undefined ? undefined : new QuestionnaireValidator(snapshotQuestionnaires(p.questionnaires), p.terminology ? membership : undefined);
  const unknown = new Set<string>();
  const learnt = new Set<string>();
  const learn = async (claimed: string[]) => {
    const cache = await registry.cache(p.tenant);
    for (const c of claimed) {
      if (learnt.has(c)) continue;
      learnt.add(c);
      if ((await registry.resolve(cache, p.tenant, c)).kind === 'unknown') unknown.add(c);
    }
  };
  return (resource, extensions) => {
    const answered = responses?.requireValid(p.tenant, resource, undefined, undefined, { reads: p.readsQuestionnaires });
    const profiled = profileCheck(resource, extensions);
    if (answered === undefined) return profiled;
    return Promise.all([profiled, answered]).then(() => undefined);
  };

  function profileCheck(resource: Json, extensions: boolean): Promise<void> | undefined {
    const canonicals = profilesToCheck(resource);
    if (!extensions && canonicals.length > 0 && resource.contained === undefined && resource.resourceType !== 'Bundle' && canonicals.every((c) => unknown.has(c))) return undefined;
    const checked = validator.requireValid(p.tenant, resource, undefined, undefined, extensions, p.readsProfiles);
    if (canonicals.every((c) => learnt.has(c))) return checked;
    return Promise.all([checked, learn(canonicals)]).then(() => undefined);
  }
}
