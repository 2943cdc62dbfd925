/**
 * Where a tenant's Questionnaires come from: the store as it stands at each check (by `url` or
 * `url|version`, through the canonical search), or a set read once (an import checks every response
 * against the Questionnaires stored when it started). A `url` alone names the latest version. A relative
 * reference `Questionnaire/{id}`, which names no canonical url but is what R4's own examples (and many
 * clients) put in `QuestionnaireResponse.questionnaire`, names the tenant's Questionnaire of that id when
 * none has it as its url, as HAPI FHIR reads it.
 */
import type { Store } from '../../../store/types.ts';
import { canonicalCondition } from '../../search-canonical.ts';

type Json = Record<string, unknown>;

/** The types whose change drops a tenant's cached Questionnaires. */
export const QUESTIONNAIRE_TYPES = ['Questionnaire'];

export interface QuestionnaireSource {
  /** Changes when the tenant's Questionnaires may have. */
  changeToken(tenant: string): Promise<string>;
  /** The live Questionnaire `canonical` (`url` or `url|version`) names; the latest version when several do. */
  find(tenant: string, canonical: string): Promise<Json | undefined>;
}

/** A relative reference to a Questionnaire by id (`Questionnaire/gcs`): its id, else undefined. */
export function localId(canonical: string): string | undefined {
  return /^Questionnaire\/([A-Za-z0-9\-.]{1,64})$/.exec(canonical)?.[1];
}

/** The most versions of one url a lookup reads. */
const VERSIONS = 200;

/** Compares version strings segment by segment, numerically where both segments are numbers (`1.10` after `1.9`). */
export function compareVersions(a: string, b: string): number {
  const x = a.split(/[.-]/);
  const y = b.split(/[.-]/);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const p = x[i];
    const q = y[i];
    if (p === undefined) return -1;
    if (q === undefined) return 1;
    const np = /^\d+$/.test(p) ? Number(p) : NaN;
    const nq = /^\d+$/.test(q) ? Number(q) : NaN;
    const c = !Number.isNaN(np) && !Number.isNaN(nq) ? np - nq : p < q ? -1 : p > q ? 1 : 0;
    if (c !== 0) return c;
  }
  return 0;
}

/** Of several Questionnaires of one url, the latest: the highest `version`, then the last written. */
function latest(candidates: { json: Json; updated: number | string }[]): Json | undefined {
  const version = (j: Json) => (typeof j.version === 'string' ? j.version : '');
  const sorted = [...candidates].sort((a, b) => compareVersions(version(b.json), version(a.json)) || (a.updated < b.updated ? 1 : a.updated > b.updated ? -1 : 0));
  return sorted[0]?.json;
}

/** The tenant's Questionnaires as stored now. */
export function storeQuestionnaires(store: Store): QuestionnaireSource {
  return {
    changeToken: (tenant) => store.resources.changeToken(tenant, QUESTIONNAIRE_TYPES),
    async find(tenant, canonical) {
      const rows = await store.resources.search(tenant, { type: 'Questionnaire', where: [canonicalCondition([canonical])], sort: [], count: VERSIONS });
      const found = latest(rows.filter((r) => !r.deleted).map((r) => ({ json: JSON.parse(r.content) as Json, updated: r.lastUpdated })));
      const id = found === undefined ? localId(canonical) : undefined;
      if (id === undefined) return found;
      const row = await store.resources.read(tenant, 'Questionnaire', id);
      return row === null || row.deleted ? undefined : (JSON.parse(row.content) as Json);
    },
  };
}

/** Questionnaires read once, whatever tenant asks (they never change, so the token does not either). */
export function snapshotQuestionnaires(questionnaires: readonly Json[]): QuestionnaireSource {
  const byUrl = new Map<string, Json[]>();
  const byId = new Map<string, Json>();
  for (const q of questionnaires) {
    if (typeof q.id === 'string') byId.set(q.id, q);
    if (typeof q.url !== 'string') continue;
    byUrl.set(q.url, [...(byUrl.get(q.url) ?? []), q]);
  }
  const updated = (q: Json) => String((q.meta as Json | undefined)?.lastUpdated ?? '');
  return {
    changeToken: async () => 'snapshot',
    async find(_tenant, canonical) {
      const bar = canonical.indexOf('|');
      const found = byUrl.get(bar < 0 ? canonical : canonical.slice(0, bar)) ?? [];
      const candidates = bar < 0 ? found : found.filter((q) => q.version === canonical.slice(bar + 1));
      const id = candidates.length === 0 ? localId(canonical) : undefined;
      return id === undefined ? latest(candidates.map((json) => ({ json, updated: updated(json) }))) : byId.get(id);
    },
  };
}

const PAGE = 1000;

/** Every current Questionnaire of the tenant as of `at` (epoch ms), raw, to be handed to another thread. */
export async function readQuestionnaires(store: Store, tenant: string, at: number): Promise<Json[]> {
  const out: Json[] = [];
  const decoder = new TextDecoder();
  let after: number | undefined;
  for (;;) {
    const page = await store.resources.snapshot(tenant, { type: 'Questionnaire', at, limit: PAGE, ...(after === undefined ? {} : { after }) });
    for (const line of decoder.decode(page.lines).split('\n')) if (line !== '') out.push(JSON.parse(line) as Json);
    for (const row of page.recheck) if (!row.deleted) out.push(JSON.parse(row.content) as Json);
    if (page.next === null) return out;
    after = page.next;
  }
}
