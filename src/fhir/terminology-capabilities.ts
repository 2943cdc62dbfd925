/**
 * `GET [base]/metadata?mode=terminology` (FHIR R4 capabilities, `mode`): a TerminologyCapabilities
 * resource saying which code systems the terminology operations know, and what `$expand` and
 * `$validate-code` take. HL7's terminology-server requirements (fhir-test-cases tx/requirements.md) ask
 * for every code system and version supported in `codeSystem.uri` / `codeSystem.version.code`, from a
 * request without authentication, which "may include more information when returned to an
 * authenticated client": the FHIR R4 core code systems are listed to everyone, the tenant's own
 * CodeSystems only to a token of the tenant that may search them (they are the tenant's data).
 */
import { FhirError } from '../errors.ts';
import type { ResourceVersion, Store } from '../store/types.ts';
import type { CoreBundle } from '../terminology/core/core-bundle.ts';
import type { FhirRequest } from './crud.ts';
import { scopeFilter } from './search.ts';

/** The values of `mode` on `metadata` (FHIR R4 http.html, capabilities: full, normative, terminology). */
export type MetadataMode = 'full' | 'normative' | 'terminology';

/** `mode` of a `metadata` request: absent is `full`; another value is a 400 naming it. */
export function metadataMode(raw: string | undefined): MetadataMode {
  if (raw === undefined || raw === 'full' || raw === 'normative' || raw === 'terminology') return raw ?? 'full';
  throw new FhirError('invalid', `Invalid mode '${raw}': expected full, normative or terminology`, { expression: ['mode'] });
}

/** A code system the terminology operations can use: its canonical URL and the versions known. */
interface Listed {
  url: string;
  versions: Set<string>;
}

/**
 * The CodeSystem contents that define codes the operations answer from (R4 `codesystem-content-mode`):
 * `not-present` defines none, and a `supplement` adds designations and properties to another system.
 */
const DEFINES_CODES = new Set(['complete', 'fragment', 'example']);

/** One CodeSystem's listing, or undefined when it defines no codes (or is not a CodeSystem at all). */
function listing(json: unknown): { url: string; version?: string } | undefined {
  if (json === null || typeof json !== 'object') return undefined;
  const { url, version, content } = json as Record<string, unknown>;
  if (typeof url !== 'string' || typeof content !== 'string' || !DEFINES_CODES.has(content)) return undefined;
  return typeof version === 'string' ? { url, version } : { url };
}

function add(into: Map<string, Listed>, item: { url: string; version?: string } | undefined): void {
  if (item === undefined) return;
  let listed = into.get(item.url);
  if (listed === undefined) into.set(item.url, (listed = { url: item.url, versions: new Set() }));
  if (item.version !== undefined) listed.versions.add(item.version);
}

/** The core code systems, read once per bundle (the core never changes while the process runs). */
const coreListings = new WeakMap<CoreBundle, Promise<{ url: string; version?: string }[]>>();

function coreCodeSystems(core: CoreBundle): Promise<{ url: string; version?: string }[]> {
  const cached = coreListings.get(core);
  if (cached !== undefined) return cached;
  const listed = Promise.resolve(core.load()).then((content) => content.all('CodeSystem').flatMap((r) => listing(JSON.parse(r.content)) ?? []));
  coreListings.set(core, listed);
  listed.catch(() => coreListings.delete(core));
  return listed;
}

/** Rows read at a time from the tenant's CodeSystems. */
const PAGE = 200;

/** The tenant's current CodeSystems that `req` may search (its scope filters applied), by id. */
async function tenantCodeSystems(store: Store, req: FhirRequest): Promise<{ url: string; version?: string }[]> {
  if (!req.access.can('CodeSystem', 's')) return [];
  const filter = scopeFilter(req, 'CodeSystem', 's');
  const out: { url: string; version?: string }[] = [];
  for (let after: string | undefined; ;) {
    const rows: ResourceVersion[] = await store.resources.search(req.tenant, {
      type: 'CodeSystem', where: filter ? [filter] : [], sort: [], count: PAGE, ...(after === undefined ? {} : { after: { lastUpdated: 0, id: after } }),
    });
    for (const row of rows) {
      const item = listing(JSON.parse(row.content));
      if (item) out.push(item);
    }
    if (rows.length < PAGE) return out;
    after = rows[rows.length - 1]!.id;
  }
}

/**
 * Whether a code system's url can be listed as `codeSystem.uri`, a canonical, in which `|` starts a
 * version (R4 references.html#canonical): R4's own v2 tables `v2-0006|2.1`, `v2-0006|2.4`, `v2-0391|2.4`
 * and `v2-0391|2.6` hold one in the url itself, so that listed they would name `v2-0006` version `2.1`,
 * which no operation knows. The operations take them where a system is a uri, as written: `$lookup`'s
 * `system` and `coding`, CodeSystem/$validate-code's `coding`, a ValueSet's `compose.include.system`
 * (`$expand`, ValueSet/$validate-code); CodeSystem/$validate-code's `url` is a canonical and cannot.
 */
function canonical(url: string): boolean {
  return !url.includes('|');
}

/** The TerminologyCapabilities `description` saying which code systems are known but not listed, and how to use them. */
function unlistedNote(urls: string[]): string {
  return `Not listed in codeSystem, whose uri is a canonical (a '|' starts a version): the code systems whose url itself holds a '|' (${urls.map((u) => `\`${u}\``).join(', ')}). `
    + "They are used by their url as written where a system is a uri: $lookup's system or coding, CodeSystem/$validate-code's coding, a ValueSet's compose.include.system ($expand and ValueSet/$validate-code); not as CodeSystem/$validate-code's url, a canonical.";
}

export interface TerminologyCapabilitiesOptions {
  store: Store;
  core: CoreBundle;
  fhirBase: string;
  now: number;
  version: string;
  /** The most codes `$expand` returns without `count` (CINDER_MAX_EXPANSION_SIZE). */
  maxExpansionSize: number;
  /** The authenticated request, when the client sent a token of this tenant: its CodeSystems are listed too. */
  req?: FhirRequest;
}

/** The TerminologyCapabilities of this server for one tenant (FHIR R4 TerminologyCapabilities, kind `instance`). */
export async function terminologyCapabilitiesJson(o: TerminologyCapabilitiesOptions): Promise<Record<string, unknown>> {
  const systems = new Map<string, Listed>();
  for (const item of await coreCodeSystems(o.core)) add(systems, item);
  if (o.req) for (const item of await tenantCodeSystems(o.store, o.req)) add(systems, item);
  const sorted = [...systems.values()].sort((a, b) => (a.url < b.url ? -1 : a.url > b.url ? 1 : 0));
  const unlisted = sorted.filter((s) => !canonical(s.url)).map((s) => s.url);
  const codeSystem = sorted
    .filter((s) => canonical(s.url))
    .map(({ url, versions }) => (versions.size ? { uri: url, version: [...versions].sort().map((code) => ({ code })) } : { uri: url }));
  return {
    resourceType: 'TerminologyCapabilities',
    status: 'active',
    date: new Date(o.now).toISOString(),
    publisher: 'Cinder',
    kind: 'instance',
    software: { name: 'Cinder', version: o.version },
    implementation: { description: 'Cinder FHIR R4 terminology (ValueSet $expand and $validate-code, CodeSystem $lookup, $validate-code and $subsumes, ConceptMap $translate)', url: o.fhirBase },
    ...(unlisted.length ? { description: unlistedNote(unlisted) } : {}),
    lockedDate: false,
    ...(codeSystem.length ? { codeSystem } : {}),
    expansion: {
      hierarchical: true,
      paging: true,
      incomplete: false,
      parameter: ['url', 'valueSetVersion', 'valueSet', 'filter', 'count', 'offset', 'activeOnly', 'date', 'displayLanguage', 'includeDesignations', 'designation', 'excludeNested', 'excludeNotForUI', 'exclude-system', 'system-version', 'check-system-version', 'force-system-version']
        .map((name) => ({ name })),
      textFilter: `\`filter\`: a case-insensitive substring of a code or its display. An expansion of more than ${o.maxExpansionSize} codes needs \`count\` (and \`offset\` to page).`,
    },
    validateCode: { translations: false },
    // ConceptMap/$translate chooses among the tenant's and the core's maps by system when none is named.
    translation: { needsMap: false },
  };
}
