import { prebuiltCapability } from './capability-prebuilt.ts';
import { isDomainResource, paramOf, paramsOf, referrersOf } from './definitions.ts';
import { paramDocumentation } from './param-documentation.ts';
import { PATCH_FORMATS } from './patch.ts';
import { REST_RESOURCE_TYPES } from './resource-types.ts';
import { namedTargets } from './search-compile.ts';
import type { Shape } from './subset.ts';
import type { SupportedProfiles } from './validation/profile/supported.ts';
import { COMPARTMENT_TYPES } from './compartments.ts';

/** An operation a feature adds to the CapabilityStatement. */
export interface OperationDecl {
  name: string;
  definition: string;
  /** Where it is invoked: system level, or on these resource types. */
  types?: string[];
}

/** What features contribute to the CapabilityStatement. */
export interface CapabilityContribution {
  operations?: OperationDecl[];
  instantiates?: string[];
}

export interface CapabilityOptions {
  fhirBase: string;
  /** OAuth endpoints for the SMART security extension (`oauth-uris`). */
  oauthUris: Record<string, string>;
  contributions: CapabilityContribution[];
  now: number;
  version: string;
  /** Whether browser apps on other origins may call the API (CINDER_CORS_ORIGINS is not `none`). */
  cors: boolean;
  /** The Subscription websocket's URL (extension capabilitystatement-websocket), when it is served. */
  websocket?: string;
  /**
   * The canonical URLs of the tenant's SubscriptionTopics a Subscription may name, each advertised on
   * Subscription's entry (R5 Backport IG capabilitystatement-subscriptiontopic-canonical).
   */
  subscriptionTopics?: string[];
  /**
   * The canonical URLs of the tenant's profiles by the resource type each constrains, each list sorted:
   * that type's `supportedProfile` (validation/profile/supported.ts).
   */
  supportedProfiles?: SupportedProfiles;
}

/** The IG's Subscription profile, which topic-based Subscriptions follow (R5 Backport IG 1.1.0). */
export const BACKPORT_SUBSCRIPTION_PROFILE = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-subscription';

/** The IG's extension naming one SubscriptionTopic canonical a server offers, on `rest.resource` (context of its definition). */
export const TOPIC_CANONICAL_EXTENSION = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/capabilitystatement-subscriptiontopic-canonical';

const INTERACTIONS = ['read', 'vread', 'update', 'patch', 'delete', 'history-instance', 'history-type', 'create', 'search-type'];
const COMMON_PARAMS = [
  // `_id:not` (which _filter's `ne` is made of) is the one modifier `_id` takes: documented as every other parameter's are (paramDocumentation).
  { name: '_id', definition: 'http://hl7.org/fhir/SearchParameter/Resource-id', type: 'token', documentation: 'Modifiers: :not' },
  { name: '_lastUpdated', definition: 'http://hl7.org/fhir/SearchParameter/Resource-lastUpdated', type: 'date' },
  { name: '_list', type: 'special', documentation: 'The resources a List (by id) has as entry items, as _has:List:item:_id; or a functional list ($current-problems, $current-medications, $current-allergies, $current-drug-allergies): the items of the current Lists coded as that kind.' },
  {
    name: '_filter', type: 'special',
    documentation: "FHIR's filter expressions (search_filter.html): and, or, not, parentheses, chains (a.b) with target filters (a[filter].b); each test means the search parameter it names. String and token eq/ne are case-insensitive; ne is 'an item in the set has an unequal value'. Not supported: element filters (related[...]), co on numbers and quantities, ne with a versioned canonical URL.",
  },
];

const TEXT_DOC = 'Full-text: a boolean expression of words (accent- and case-insensitive, whole words; `word*` for a prefix): AND (also implied), OR, parentheses, AND before OR; a quoted group is its words ANDed; `,` for OR between values; no NOT, phrase or proximity search, no modifiers.';

/** `_content` on every type, `_text` on those with a narrative (R4 defines both as string parameters). */
function textParams(type: string) {
  const content = { name: '_content', definition: 'http://hl7.org/fhir/SearchParameter/Resource-content', type: 'string', documentation: TEXT_DOC };
  if (!isDomainResource(type)) return [content];
  return [{ name: '_text', definition: 'http://hl7.org/fhir/SearchParameter/DomainResource-text', type: 'string', documentation: `${TEXT_DOC} Searches the narrative.` }, content];
}

/** `_has` on a type some reference parameter may refer to (each of R4's), and across types. */
const HAS_PARAM = {
  name: '_has', type: 'special',
  documentation: 'Reverse chaining (search.html): _has:Type:param:name=value matches the resources that a resource of Type refers to through its reference parameter param and that meets name=value (a parameter of Type with its modifier, a chain, or another _has; at most 4 levels). Type:param is one that may refer to the type searched, as the searchRevInclude values name them; across types, to each type searched.',
};

/**
 * The resource's `documentation` on `_include` / `_revinclude` values: R4's `Type:param:Target` form is
 * not listed (a value per target type of every reference parameter would be some 12,000 more, and HAPI
 * FHIR lists `Type:param` alone too), but taken for every `Type:param` listed.
 */
const INCLUDE_DOC = '_include and _revinclude also take Type:param:Target for each Type:param value listed (search.html: only references to a Target are followed), and :iterate.';

/** What a type's entry holds of the tenant: Subscription's topic extensions, and each type's `supportedProfile`. */
interface TenantParts {
  topics: () => unknown;
  profiles: (type: string) => unknown;
}

/** A type's `supportedProfile`: the tenant's profiles of it, with the IG's on Subscription, sorted; undefined for none. */
function supportedProfile(type: string, profiles: SupportedProfiles | undefined): string[] | undefined {
  const own = profiles?.get(type) ?? [];
  const listed = type === 'Subscription' ? [...new Set([BACKPORT_SUBSCRIPTION_PROFILE, ...own])].sort() : own;
  return listed.length ? [...listed] : undefined;
}

/** The tenant's parts as values (capabilityStatement's objects). */
const tenantValues = (topics: string[] | undefined, profiles: SupportedProfiles | undefined): TenantParts => ({
  topics: () => topicExtensions(topics),
  profiles: (type) => supportedProfile(type, profiles),
});

/**
 * A type's entry. Subscription's topics (the extensions, or the placeholder capabilityStatementJson
 * replaces per request) come first, as R4 JSON puts extensions; each type's `supportedProfile` (its
 * profiles, or a placeholder) after its type. Without `tenant`, an entry holds neither.
 */
function resourceEntry(type: string, ops: OperationDecl[], tenant?: TenantParts) {
  // AuditEvents are append-only (crud.ts refuseAuditChange): created, also by PUT, never updated, patched or deleted.
  const appendOnly = type === 'AuditEvent';
  const topics = type === 'Subscription' ? tenant?.topics() : undefined;
  const profiles = tenant?.profiles(type);
  const entry: Record<string, unknown> = {
    ...(topics !== undefined && { extension: topics }),
    type,
    ...(profiles !== undefined && { supportedProfile: profiles }),
    interaction: INTERACTIONS.filter((code) => !appendOnly || !APPEND_ONLY_REFUSED.includes(code)).map((code) => ({ code })),
    versioning: 'versioned-update',
    readHistory: true,
    updateCreate: true,
    conditionalCreate: true,
    conditionalUpdate: true,
    conditionalRead: 'full-support',
    conditionalDelete: appendOnly ? 'not-supported' : 'single',
    searchParam: [...COMMON_PARAMS, ...(referrersTo(type).length ? [HAS_PARAM] : []), ...textParams(type), ...paramsOf(type).filter((p) => p.type !== 'special' || p.code === 'near').map((p) => ({
      name: p.code, definition: p.url, type: p.type, documentation: paramDocumentation(p),
    }))],
    searchInclude: ['*', ...(paramsOf(type).some((p) => p.type === 'reference') ? [`${type}:*`] : []), ...paramsOf(type).filter((p) => p.type === 'reference').map((p) => `${type}:${p.code}`)],
  };
  // A type no reference parameter points at has no `_revinclude` values: the element is left out, as
  // R4 JSON has no empty arrays (json.html).
  const revinclude = revIncludes(type);
  if (revinclude.length) entry.searchRevInclude = revinclude;
  const special = paramsOf(type).filter((p) => p.type === 'special' && p.code !== 'near').map((p) => p.code);
  entry.documentation = [...(special.length ? [`Not searchable (special parameters): ${special.join(', ')}.`] : []), INCLUDE_DOC, ...(type === 'Subscription' ? [SUBSCRIPTION_DOC] : []), ...(appendOnly ? [AUDIT_DOC] : [])].join(' ');
  const typeOps = typeOperations(type, ops);
  if (typeOps) entry.operation = typeOps;
  return entry;
}

/** A type's `operation`: the operations invoked on it, or undefined for none (the member is left out). */
function typeOperations(type: string, ops: OperationDecl[]): { name: string; definition: string }[] | undefined {
  const typeOps = ops.filter((o) => o.types?.includes(type));
  return typeOps.length ? typeOps.map((o) => ({ name: o.name, definition: o.definition })) : undefined;
}

/** The interactions an append-only type refuses (405). */
const APPEND_ONLY_REFUSED = ['update', 'patch', 'delete'];

/** What AuditEvent's entry tells of its writes. */
const AUDIT_DOC = 'AuditEvents are append-only: created (POST, or PUT of a new id), never updated, patched or deleted through the API (405).';

/** What Subscription's entry tells of delivery (src/fhir/subscriptions/). */
const SUBSCRIPTION_DOC = 'Subscriptions (R4 subscription.html): channel.type rest-hook is delivered (a POST without a body, or with payload application/fhir+json or application/json a PUT of the resource to {endpoint}/{type}/{id}, with channel.header), and websocket (bind {id} on the websocket that the capabilitystatement-websocket extension of rest names, then ping {id} per notification); email, sms and message are not (422). A Subscription written requested or active is checked and stored active; its criteria is a search of one type, matched against each created or updated version (deletions do not notify) within the reach of the token that activated it. Topic-based Subscriptions (R5 Backport IG): criteria is the canonical URL of a SubscriptionTopic stored as a Basic (Basic?code=SubscriptionTopic), with backport-filter-criteria filters, payload content empty, id-only or full-resource; create, update and delete events (resourceTrigger queryCriteria and fhirPathCriteria) are POSTed (rest-hook) as history Bundles led by the SubscriptionStatus, or sent over the websocket (websocket: bind-with-token with a token of $get-ws-binding-token, a handshake Bundle, then each event and heartbeat as its Bundle in JSON); $status, $events (the last 1,000 events of each) and $get-ws-binding-token are supported. The capabilitystatement-subscriptiontopic-canonical extensions list the canonical of each active topic (url, or url|version where another topic that is not retired has the url).';

/**
 * The per-type entries as JSON text cut where the tenant's parts go: `parts` has one more member than
 * `slots`, each slot going between two parts (none where a subset left the members out).
 */
interface EntriesText {
  /** The whole text, placeholders in. */
  text: string;
  parts: string[];
  slots: Slot[];
  /** The text for a tenant with no topic and no profile of its own (most), once made. */
  bare?: string;
}

/** Subscription's topics, or a type's `supportedProfile`. */
type Slot = { kind: 'topics' } | { kind: 'profiles'; type: string };

/** The per-type entries, by the contributions they were made of: the same for every request of a process. */
const RESOURCE_ENTRIES = new WeakMap<CapabilityContribution[], EntriesText>();

/**
 * The per-type entries by their operations (as JSON), which alone they are made of: every app of a process
 * with the same features (each test app, a second app on the same configuration) shares them, as making them
 * (every search parameter's documentation, 145 types) was most of a process's first `metadata`. A few at most.
 */
const ENTRIES_BY_OPERATIONS = new Map<string, EntriesText>();

/** The per-type entries of `contributions`, made once per process for each set of operations. */
function resourceEntriesText(contributions: CapabilityContribution[]): EntriesText {
  let entries = RESOURCE_ENTRIES.get(contributions);
  if (entries !== undefined) return entries;
  const ops = contributions.flatMap((c) => c.operations ?? []);
  const key = JSON.stringify(ops);
  entries = ENTRIES_BY_OPERATIONS.get(key);
  if (entries === undefined) {
    entries = entriesText(entriesJson(ops));
    if (ENTRIES_BY_OPERATIONS.size >= 8) ENTRIES_BY_OPERATIONS.clear();
    ENTRIES_BY_OPERATIONS.set(key, entries);
  }
  RESOURCE_ENTRIES.set(contributions, entries);
  return entries;
}

/** Where capabilityStatementJson splices the per-type entries into the statement's text. */
const ENTRIES_HERE = '\u0000';

/** What Subscription's `extension` holds in the entries' text: replaced per request by the tenant's topics (or removed). */
const TOPICS_HERE = '\u0001';
/** What a type's `supportedProfile` holds in the entries' text, after the type's name: replaced per request by its profiles (or removed). */
const PROFILES_HERE = '\u0002';

/** The placeholders as parts (capabilityStatementJson's `tenant`). */
const PLACEHOLDERS: TenantParts = { topics: () => TOPICS_HERE, profiles: (type) => `${PROFILES_HERE}${type}` };

/**
 * The placeholder members in the text: Subscription's `extension`, its first member, with the comma after it;
 * `supportedProfile`, after `type` (which every subset keeping it keeps), with the comma before it.
 */
const SLOT_MEMBER = new RegExp(`"extension":${literal(JSON.stringify(TOPICS_HERE))},|,"supportedProfile":"${literal(JSON.stringify(PROFILES_HERE).slice(1, -1))}([A-Za-z]+)"`, 'g');

/** `text` as a regular expression matching it. */
function literal(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&');
}

/** The entries' text cut at its placeholder members. */
function entriesText(text: string): EntriesText {
  const parts: string[] = [];
  const slots: Slot[] = [];
  let from = 0;
  for (const m of text.matchAll(SLOT_MEMBER)) {
    parts.push(text.slice(from, m.index));
    slots.push(m[1] === undefined ? { kind: 'topics' } : { kind: 'profiles', type: m[1] });
    from = m.index + m[0].length;
  }
  parts.push(text.slice(from));
  return { text, parts, slots };
}

/** Subscription's extensions: one per topic canonical, or none (R4 JSON has no empty arrays). */
const topicExtensions = (topics: string[] = []) => (topics.length ? topics.map((valueCanonical) => ({ url: TOPIC_CANONICAL_EXTENSION, valueCanonical })) : undefined);

/** The entries' text with the tenant's topic canonicals on Subscription's entry and its profiles on each type's. */
function withTenant(entries: EntriesText, topics: string[] | undefined, profiles: SupportedProfiles | undefined): string {
  const bare = !topics?.length && !profiles?.size;
  if (bare && entries.bare !== undefined) return entries.bare;
  // The same string while the tenant's lists are the same objects (TenantReads keeps them until they change): the
  // answer's compressed form of it is kept by that string (src/http/content-coding.ts partedResponse).
  const byTopics = bare ? undefined : (TENANT_TEXTS.get(entries) ?? TENANT_TEXTS.set(entries, new WeakMap()).get(entries)!);
  const byProfiles = byTopics && (byTopics.get(topics ?? NONE) ?? byTopics.set(topics ?? NONE, new WeakMap()).get(topics ?? NONE)!);
  const known = byProfiles?.get(profiles ?? NONE);
  if (known !== undefined) return known;
  let text = entries.parts[0]!;
  entries.slots.forEach((slot, i) => {
    if (slot.kind === 'topics') {
      const extensions = topicExtensions(topics);
      if (extensions) text += `"extension":${JSON.stringify(extensions)},`;
    } else {
      const listed = supportedProfile(slot.type, profiles);
      if (listed) text += `,"supportedProfile":${JSON.stringify(listed)}`;
    }
    text += entries.parts[i + 1]!;
  });
  if (bare) entries.bare = text;
  else byProfiles!.set(profiles ?? NONE, text);
  return text;
}

/** The entries' text with a tenant's lists (withTenant), by the entries, the topics and the profiles, each object as read. */
const TENANT_TEXTS = new WeakMap<EntriesText, WeakMap<object, WeakMap<object, string>>>();
/** Stands for a list the tenant does not have. */
const NONE = {};

/**
 * capabilityStatement as JSON text, its per-type entries (1.4 MB of the statement's text, every search
 * parameter of 145 types) serialised once per process: the request's date, base and the tenant's
 * SubscriptionTopics are all that vary (6.5 against 0.9 ms a request in process).
 */
export function capabilityStatementJson(o: CapabilityOptions, subset?: StatementSubset): string {
  const parts = capabilityStatementParts(o, subset);
  return typeof parts === 'string' ? parts : parts.join('');
}

/**
 * capabilityStatementJson as its three parts: what precedes the per-type entries, the entries (with the tenant's
 * topics and profiles: the same string across requests while they are unchanged, withTenant), and what follows;
 * or the whole text when a subset left no entries.
 */
export function capabilityStatementParts(o: CapabilityOptions, subset?: StatementSubset): string | [string, string, string] {
  let entries = resourceEntriesText(o.contributions);
  let text = JSON.stringify(capabilityStatement(o, ENTRIES_HERE));
  if (subset !== undefined) {
    // The statement without its entries is small: it is shaped whole, and the entries (the same for
    // every request) are shaped once per subset, as they stand in the statement (rest[0].resource).
    text = subset.shape(text);
    entries = shapedEntries(entries, subset);
  }
  const placeholder = `"resource":${JSON.stringify(ENTRIES_HERE)}`;
  const at = text.indexOf(placeholder);
  // A subset without `rest.resource` (`_elements=format`) has no placeholder left.
  if (at < 0) return text;
  return [`${text.slice(0, at)}"resource":`, withTenant(entries, o.subscriptionTopics, o.supportedProfiles), text.slice(at + placeholder.length)];
}

/** `_summary` / `_elements` of a `metadata` request: the rewrite, and a key naming it for the cache of shaped entries. */
export interface StatementSubset {
  key: string;
  shape: Shape;
}

/** Shaped per-type entries, by the entries shaped, then by subset key (a few dozen at most: then it starts afresh). */
const SHAPED_ENTRIES = new WeakMap<EntriesText, Map<string, EntriesText>>();

function shapedEntries(whole: EntriesText, subset: StatementSubset): EntriesText {
  const entries = whole.text;
  let byKey = SHAPED_ENTRIES.get(whole);
  if (byKey === undefined) SHAPED_ENTRIES.set(whole, (byKey = new Map()));
  let shaped = byKey.get(subset.key);
  if (shaped === undefined) {
    // The shape decides each member by its path from the resource, so the entries are shaped inside a
    // statement of the same path; the SUBSETTED tag it adds to that statement is the real one's too.
    // Subscription's topics placeholder goes as its extensions would (`_summary=true` drops them), and
    // the profiles placeholders as `supportedProfile` would.
    const holder = JSON.parse(subset.shape(`{"resourceType":"CapabilityStatement","rest":[{"mode":"server","resource":${entries}}]}`)) as {
      rest?: { resource?: unknown[] }[];
    };
    shaped = entriesText(JSON.stringify(holder.rest?.[0]?.resource ?? []));
    if (byKey.size >= 32) byKey.clear();
    byKey.set(subset.key, shaped);
  }
  return shaped;
}

/**
 * The per-type entries as JSON text with the tenant's placeholders: from what `bun run build` computed
 * (prebuiltCapability, in the executable), else made now.
 */
function entriesJson(ops: OperationDecl[]): string {
  const prebuilt = embeddedCapability();
  return prebuilt === undefined ? computedEntriesJson(ops) : prebuiltEntriesJson(prebuilt, ops);
}

let EMBEDDED: PrebuiltCapability | undefined;

/** The executable's prebuilt parts, read once; undefined from source. */
function embeddedCapability(): PrebuiltCapability | undefined {
  return prebuiltCapability === undefined ? undefined : (EMBEDDED ??= prebuiltCapability());
}

/** The per-type entries' text (placeholders in) as computed now: every REST type's search parameters and their documentation. */
export function computedEntriesJson(ops: OperationDecl[]): string {
  return JSON.stringify(resourceEntries(ops, PLACEHOLDERS));
}

/**
 * What is static in the CapabilityStatement, computed once when the executable is built (scripts/build.ts)
 * so that a server's first `metadata` does not compile 145 types' search parameters and their documentation:
 * each REST type's entry as JSON text, placeholders in and without its `operation` (the one member the
 * app's features change; it is the entry's last), and the parameters searched across types.
 */
export interface PrebuiltCapability {
  entries: string[];
  systemParams: unknown[];
}

/** The static parts as the code computes them (what the build embeds; test/unit/capability-prebuilt.test.ts compares). */
export function prebuildCapability(): PrebuiltCapability {
  return {
    entries: REST_RESOURCE_TYPES.map((t) => JSON.stringify(resourceEntry(t, [], PLACEHOLDERS))),
    systemParams: computedSystemParams(),
  };
}

/** The per-type entries' text from the static parts, each type's operations spliced in as its entry's last member. */
export function prebuiltEntriesJson(prebuilt: PrebuiltCapability, ops: OperationDecl[]): string {
  if (prebuilt.entries.length !== REST_RESOURCE_TYPES.length) throw new Error('the prebuilt CapabilityStatement entries do not match the resource types');
  const entries = prebuilt.entries.map((text, i) => {
    const typeOps = typeOperations(REST_RESOURCE_TYPES[i]!, ops);
    return typeOps ? `${text.slice(0, -1)},"operation":${JSON.stringify(typeOps)}}` : text;
  });
  return `[${entries.join(',')}]`;
}

/**
 * Searched across types (`GET [base]?...`): the parameters every type has (those of Binary, a Resource
 * with no parameter of its own beyond them), with `_type`.
 */
function systemSearchParams(): unknown[] {
  return embeddedCapability()?.systemParams ?? (SYSTEM_PARAMS ??= computedSystemParams());
}

let SYSTEM_PARAMS: unknown[] | undefined;

/** systemSearchParams as computed now. */
export function computedSystemParams(): unknown[] {
  return [
    ...(resourceEntry('Binary', []).searchParam as { name: string }[]).filter((p) => p.name.startsWith('_')),
    { name: '_type', type: 'token', documentation: 'The types searched (comma-separated); without it, every type the token may search. Other parameters must be defined for each type searched; _sort takes _lastUpdated or -_lastUpdated.' },
  ];
}

/**
 * Every R4 type but Parameters, which has no RESTful endpoint (parameters.html); `tenant` gives what
 * Subscription's `extension` and each type's `supportedProfile` hold (each left out when undefined).
 */
const resourceEntries = (ops: OperationDecl[], tenant: TenantParts) => REST_RESOURCE_TYPES.map((t) => resourceEntry(t, ops, tenant));

/** The server's truthful CapabilityStatement (FHIR R4 CapabilityStatement, SMART security extension). */
export function capabilityStatement(o: CapabilityOptions, entries?: string): Record<string, unknown> {
  const ops = o.contributions.flatMap((c) => c.operations ?? []);
  const instantiates = o.contributions.flatMap((c) => c.instantiates ?? []);
  const systemOps = ops.filter((op) => !op.types).map((op) => ({ name: op.name, definition: op.definition }));
  const statement: Record<string, unknown> = {
    resourceType: 'CapabilityStatement',
    status: 'active',
    date: new Date(o.now).toISOString(),
    publisher: 'Cinder',
    kind: 'instance',
    software: { name: 'Cinder', version: o.version },
    implementation: { description: 'Cinder FHIR R4 server', url: o.fhirBase },
    fhirVersion: '4.0.1',
    // What Accept, `_format` and Content-Type take (src/http/fhir-response.ts, body.ts): R4's types, the generic
    // ones, DSTU2's names and the `json` and `xml` shorthands; answers are FHIR JSON or XML, in the generic type when asked for.
    format: ['application/fhir+json', 'application/json', 'application/json+fhir', 'json', 'application/fhir+xml', 'application/xml', 'application/xml+fhir', 'xml'],
    patchFormat: [...PATCH_FORMATS],
    rest: [
      {
        mode: 'server',
        security: {
          cors: o.cors,
          service: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/restful-security-service', code: 'SMART-on-FHIR' }] }],
          extension: [
            {
              url: 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris',
              extension: Object.entries(o.oauthUris).map(([url, valueUri]) => ({ url, valueUri })),
            },
          ],
        },
        // Where Subscriptions of channel type websocket are bound (R4 subscription.html).
        ...(o.websocket !== undefined && { extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/capabilitystatement-websocket', valueUri: o.websocket }] }),
        resource: entries ?? resourceEntries(ops, tenantValues(o.subscriptionTopics, o.supportedProfiles)),
        interaction: [{ code: 'transaction' }, { code: 'batch' }, { code: 'search-system' }, { code: 'history-system' }],
        // Compartment search (`Patient/{id}/Observation`, `Encounter/{id}/*`) in the five R4 compartments (src/fhir/compartments.ts).
        compartment: COMPARTMENT_TYPES.map((t) => `http://hl7.org/fhir/CompartmentDefinition/${t[0]!.toLowerCase()}${t.slice(1)}`),
        searchParam: systemSearchParams(),
        ...(systemOps.length ? { operation: systemOps } : {}),
      },
    ],
  };
  if (instantiates.length) statement.instantiates = instantiates;
  return statement;
}

/**
 * The reference parameters (`Source:param`) whose references may name a resource of `type`: those
 * whose targets hold it, but a canonical reference's names canonical resources alone (namedTargets:
 * `ActivityDefinition:composed-of` names no Patient), as `_has` and `_revinclude` take them.
 */
function referrersTo(type: string): { source: string; param: string }[] {
  let out = REFERRERS_TO.get(type);
  if (out === undefined) {
    out = referrersOf(type).filter(({ source, param }) => namedTargets(paramOf(source, param)!, [type]).length > 0);
    REFERRERS_TO.set(type, out);
  }
  return out;
}

/** referrersTo by type (R4's types alone: the entries' and `_has`'s), as the definitions never change. */
const REFERRERS_TO = new Map<string, { source: string; param: string }[]>();

/** `_revinclude` values on `type`: `*`, each referring type's `Type:*` and each of its parameters. */
function revIncludes(type: string): string[] {
  const referrers = referrersTo(type);
  const sources = [...new Set(referrers.map((r) => r.source))];
  return [...(referrers.length ? ['*'] : []), ...sources.map((s) => `${s}:*`), ...referrers.map((r) => `${r.source}:${r.param}`)];
}
