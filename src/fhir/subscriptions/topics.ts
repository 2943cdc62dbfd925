/**
 * Topic-based Subscriptions on R4 (HL7 Subscriptions R5 Backport IG 1.1.0): SubscriptionTopics stored as
 * `Basic` resources coded `http://hl7.org/fhir/fhir-types|SubscriptionTopic`, their elements carried by the
 * cross-version extensions `http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.{element}`
 * (the IG's R4 examples also use the `4.3` ones: both are read), and Subscriptions whose `criteria` is a
 * topic's canonical URL (profile `backport-subscription`), narrowed by `backport-filter-criteria`
 * (`Type?param=value`) and delivered with `backport-payload-content` (empty, id-only, full-resource).
 *
 * This module reads and checks topics: one written through the API is parsed (a 422 naming the element that
 * cannot be honoured). A topic Subscription is read and checked against its topic by topic-subscription.ts;
 * matching is hub.ts's, delivery delivery.ts's, the notification Bundle notification.ts's.
 */
import { FhirError } from '../../errors.ts';
import type { Condition, ResourceWriter } from '../../store/types.ts';
import { requireAccess, type Access } from '../access.ts';
import type { FhirDeps } from '../crud.ts';
import { paramOf } from '../definitions.ts';
import { isResourceType } from '../resource-types.ts';
import { compileFilter, parseInclude, resolveConditions } from '../search.ts';
import type { CompiledTopicCriteria } from '../validation/fhirpath-engine.ts';
import { compileFhirPathCriteria, readsPrevious } from './fhirpath-criteria.ts';

type Json = Record<string, unknown>;

/** The prefixes of the SubscriptionTopic cross-version extensions (R5's, and R4B's that the IG's R4 examples mix in). */
export const TOPIC_EXTENSIONS = [
  'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.',
  'http://hl7.org/fhir/4.3/StructureDefinition/extension-SubscriptionTopic.',
];
/** The system of Basic.code naming a SubscriptionTopic. */
export const FHIR_TYPES = 'http://hl7.org/fhir/fhir-types';
export const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
export const FILTER_CRITERIA = `${BACKPORT}backport-filter-criteria`;
export const PAYLOAD_CONTENT = `${BACKPORT}backport-payload-content`;
export const HEARTBEAT_PERIOD = `${BACKPORT}backport-heartbeat-period`;
export const TIMEOUT = `${BACKPORT}backport-timeout`;
export const MAX_COUNT = `${BACKPORT}backport-max-count`;
export const CHANNEL_TYPE = `${BACKPORT}backport-channel-type`;
/** The profile of the SubscriptionStatus Parameters (notification.ts). */
export const STATUS_PROFILE = `${BACKPORT}backport-subscription-status-r4`;

export type Interaction = 'create' | 'update' | 'delete';
const INTERACTIONS: Interaction[] = ['create', 'update', 'delete'];

/** One resourceTrigger: the type it watches, the interactions, and its queryCriteria. */
export interface TopicTrigger {
  type: string;
  interactions: Interaction[];
  /** queryCriteria.previous / current: a query string of `type` (`status:not=finished`). */
  previous?: string;
  current?: string;
  /** queryCriteria.resultForCreate / resultForDelete: whether the previous (current) test passes for a create (delete). */
  passesOnCreate: boolean;
  passesOnDelete: boolean;
  requireBoth: boolean;
  /** fhirPathCriteria, compiled once (fhirpath-criteria.ts): it must hold too when queryCriteria is given. */
  fhirPath?: { expression: string; test: CompiledTopicCriteria; readsPrevious: boolean };
}

/** One canFilterBy: a search parameter (with the modifiers and comparators listed) of a type (or of every trigger type). */
export interface TopicFilter {
  type?: string;
  param: string;
  modifiers: string[];
  /** The comparators (search prefixes) listed; none listed: the parameter's value may carry any. */
  comparators: string[];
}

/** One notificationShape: what a full-resource notification about `type` includes (as `_include`/`_revinclude` values). */
export interface TopicShape {
  type: string;
  include: [string, string][];
}

export interface Topic {
  /** The Basic's id. */
  id: string;
  url: string;
  version?: string;
  status?: string;
  triggers: TopicTrigger[];
  filters: TopicFilter[];
  shapes: TopicShape[];
}

const refuse = (text: string, at: string) => new FhirError('unprocessable', text, { expression: [at] });

/** Whether `resource` is a Basic coded as a SubscriptionTopic. */
export function isTopicResource(resource: unknown): boolean {
  const r = resource as { resourceType?: unknown; code?: { coding?: unknown } } | undefined;
  if (r?.resourceType !== 'Basic' || !Array.isArray(r.code?.coding)) return false;
  return (r.code.coding as { system?: unknown; code?: unknown }[]).some((c) => c?.code === 'SubscriptionTopic' && (c.system === undefined || c.system === FHIR_TYPES));
}

/** The element a SubscriptionTopic extension carries (`url`, `resourceTrigger`...), or undefined for another extension. */
function topicElement(url: unknown): string | undefined {
  if (typeof url !== 'string') return undefined;
  const prefix = TOPIC_EXTENSIONS.find((p) => url.startsWith(p));
  return prefix === undefined ? undefined : url.slice(prefix.length);
}

/** A sub-extension list as [name, value element, path]. */
function parts(ext: Json, at: string): { name: string; ext: Json; at: string }[] {
  const list = Array.isArray(ext.extension) ? (ext.extension as Json[]) : [];
  return list.map((e, i) => ({ name: String(e?.url), ext: e ?? {}, at: `${at}.extension[${i}]` }));
}

function stringValue(e: Json, key: string, at: string, what: string): string {
  const v = e[key];
  if (typeof v !== 'string' || v.trim() === '') throw refuse(`${what} needs a non-empty ${key}`, at);
  return v;
}

/** A type named by a `valueUri` (`Encounter`, or `http://hl7.org/fhir/StructureDefinition/Encounter`). */
function typeOf(e: Json, at: string, what: string): string {
  const raw = stringValue(e, 'valueUri', at, what);
  const type = raw.replace(/^http:\/\/hl7\.org\/fhir\/StructureDefinition\//, '');
  if (!isResourceType(type)) throw refuse(`${what} '${raw}' is not a resource type Cinder knows`, at);
  return type;
}

/** A queryCriteria test compiled as a search of `type`, or a 422 naming it. */
function checkQuery(type: string, query: string, at: string, what: string): void {
  try {
    compileFilter(type, new URLSearchParams(query));
  } catch (err) {
    if (err instanceof FhirError && err.status < 500) throw refuse(`${what} '${query}' is not a search of ${type} Cinder can run: ${err.message}`, at);
    throw err;
  }
}

/** The parameters Cinder searches on every type that a canFilterBy may name. */
const COMMON_FILTERS = new Set(['_id', '_lastUpdated', '_tag', '_profile', '_security', '_source', '_text', '_content', '_has']);

/**
 * The SubscriptionTopic `resource` (a Basic coded SubscriptionTopic) says, checked: a 422 naming the
 * element (`Basic.extension[2].extension[1]`) Cinder cannot honour.
 */
export function parseTopic(resource: Json): Topic {
  const exts = Array.isArray(resource.extension) ? (resource.extension as Json[]) : [];
  const modifiers = Array.isArray(resource.modifierExtension) ? (resource.modifierExtension as Json[]) : [];
  const topic: Topic = { id: String(resource.id ?? ''), url: '', triggers: [], filters: [], shapes: [] };
  let statusAt = 'Basic.extension';
  modifiers.forEach((e, i) => {
    if (topicElement(e?.url) !== 'status') return;
    statusAt = `Basic.modifierExtension[${i}]`;
    topic.status = stringValue(e, 'valueCode', statusAt, 'SubscriptionTopic.status');
  });
  exts.forEach((e, i) => {
    const at = `Basic.extension[${i}]`;
    switch (topicElement(e?.url)) {
      case 'url': {
        const url = stringValue(e, 'valueUri', at, 'SubscriptionTopic.url');
        if (!/^(https?:\/\/[^\s|]+|urn:[^\s|]+)$/.test(url)) throw refuse(`SubscriptionTopic.url '${url}' is not an absolute URL (http, https or urn) without '|'`, at);
        topic.url = url;
        break;
      }
      case 'version':
        topic.version = stringValue(e, 'valueString', at, 'SubscriptionTopic.version');
        break;
      case 'status':
        statusAt = at;
        topic.status = stringValue(e, 'valueCode', at, 'SubscriptionTopic.status');
        break;
      case 'resourceTrigger':
        topic.triggers.push(parseTrigger(e, at));
        break;
      case 'eventTrigger':
        throw refuse('SubscriptionTopic.eventTrigger is not supported by Cinder: it notifies resourceTrigger events (create, update, delete)', at);
      case 'canFilterBy':
        topic.filters.push(parseFilter(e, at));
        break;
      case 'notificationShape':
        topic.shapes.push(parseShape(e, at));
        break;
      default:
    }
  });
  if (topic.url === '') throw refuse(`a SubscriptionTopic needs its url (extension ${TOPIC_EXTENSIONS[0]}url, valueUri)`, 'Basic.extension');
  if (topic.status !== undefined && !['draft', 'active', 'retired', 'unknown'].includes(topic.status)) {
    throw refuse(`SubscriptionTopic.status '${topic.status}' is not draft, active, retired or unknown`, statusAt);
  }
  if (!topic.triggers.length) throw refuse(`a SubscriptionTopic needs at least one resourceTrigger (extension ${TOPIC_EXTENSIONS[0]}resourceTrigger)`, 'Basic.extension');
  const triggerTypes = topic.triggers.map((t) => t.type);
  topic.filters.forEach((f, i) => {
    for (const type of f.type === undefined ? triggerTypes : [f.type]) {
      if (!COMMON_FILTERS.has(f.param) && !paramOf(type, f.param)) {
        throw refuse(`SubscriptionTopic.canFilterBy.filterParameter '${f.param}' is not a search parameter of ${type}`, filterAt(exts, i));
      }
    }
  });
  return topic;
}

/** Where the `i`th canFilterBy extension stands (for a message about it found after the loop). */
function filterAt(exts: Json[], i: number): string {
  let n = -1;
  for (let k = 0; k < exts.length; k++) if (topicElement(exts[k]?.url) === 'canFilterBy' && ++n === i) return `Basic.extension[${k}]`;
  return 'Basic.extension';
}

function parseTrigger(ext: Json, at: string): TopicTrigger {
  let type: string | undefined;
  const interactions: Interaction[] = [];
  const trigger: Omit<TopicTrigger, 'type' | 'interactions'> = { passesOnCreate: false, passesOnDelete: false, requireBoth: false };
  let fhirPath: { expression: string; at: string } | undefined;
  let query: { at: string; previous?: [string, string]; current?: [string, string] } | undefined;
  for (const p of parts(ext, at)) {
    switch (p.name) {
      case 'resource':
        type = typeOf(p.ext, p.at, 'SubscriptionTopic.resourceTrigger.resource');
        break;
      case 'supportedInteraction': {
        const code = stringValue(p.ext, 'valueCode', p.at, 'SubscriptionTopic.resourceTrigger.supportedInteraction');
        if (!INTERACTIONS.includes(code as Interaction)) throw refuse(`SubscriptionTopic.resourceTrigger.supportedInteraction '${code}' is not create, update or delete`, p.at);
        interactions.push(code as Interaction);
        break;
      }
      case 'queryCriteria':
        query = { at: p.at };
        for (const q of parts(p.ext, p.at)) {
          switch (q.name) {
            case 'previous':
            case 'current':
              query[q.name] = [stringValue(q.ext, 'valueString', q.at, `SubscriptionTopic.resourceTrigger.queryCriteria.${q.name}`), q.at];
              break;
            case 'resultForCreate':
            case 'resultForDelete': {
              const code = stringValue(q.ext, 'valueCode', q.at, `SubscriptionTopic.resourceTrigger.queryCriteria.${q.name}`);
              if (code !== 'test-passes' && code !== 'test-fails') throw refuse(`SubscriptionTopic.resourceTrigger.queryCriteria.${q.name} '${code}' is not test-passes or test-fails`, q.at);
              if (q.name === 'resultForCreate') trigger.passesOnCreate = code === 'test-passes';
              else trigger.passesOnDelete = code === 'test-passes';
              break;
            }
            case 'requireBoth':
              if (typeof q.ext.valueBoolean !== 'boolean') throw refuse('SubscriptionTopic.resourceTrigger.queryCriteria.requireBoth needs a valueBoolean', q.at);
              trigger.requireBoth = q.ext.valueBoolean;
              break;
            default:
          }
        }
        break;
      case 'fhirPathCriteria':
        fhirPath = { expression: stringValue(p.ext, 'valueString', p.at, 'SubscriptionTopic.resourceTrigger.fhirPathCriteria'), at: p.at };
        break;
      default:
    }
  }
  if (type === undefined) throw refuse('SubscriptionTopic.resourceTrigger needs its resource (a resource type)', at);
  if (query?.previous) checkQuery(type, query.previous[0], query.previous[1], 'SubscriptionTopic.resourceTrigger.queryCriteria.previous');
  if (query?.current) checkQuery(type, query.current[0], query.current[1], 'SubscriptionTopic.resourceTrigger.queryCriteria.current');
  return {
    type, interactions: interactions.length ? [...new Set(interactions)] : [...INTERACTIONS], ...trigger,
    ...(fhirPath && { fhirPath: { expression: fhirPath.expression, test: compileFhirPathCriteria(fhirPath.expression, fhirPath.at), readsPrevious: readsPrevious(fhirPath.expression) } }),
    ...(query?.previous && { previous: query.previous[0] }), ...(query?.current && { current: query.current[0] }),
  };
}

function parseFilter(ext: Json, at: string): TopicFilter {
  let type: string | undefined;
  let param: string | undefined;
  const modifiers: string[] = [];
  const comparators: string[] = [];
  for (const p of parts(ext, at)) {
    if (p.name === 'resource') type = typeOf(p.ext, p.at, 'SubscriptionTopic.canFilterBy.resource');
    else if (p.name === 'filterParameter') param = stringValue(p.ext, 'valueString', p.at, 'SubscriptionTopic.canFilterBy.filterParameter');
    else if (p.name === 'modifier') modifiers.push(stringValue(p.ext, 'valueCode', p.at, 'SubscriptionTopic.canFilterBy.modifier'));
    else if (p.name === 'comparator') comparators.push(stringValue(p.ext, 'valueCode', p.at, 'SubscriptionTopic.canFilterBy.comparator'));
  }
  if (param === undefined) throw refuse('SubscriptionTopic.canFilterBy needs its filterParameter', at);
  return { ...(type !== undefined && { type }), param, modifiers, comparators };
}

function parseShape(ext: Json, at: string): TopicShape {
  let type: string | undefined;
  const include: [string, string, string][] = [];
  for (const p of parts(ext, at)) {
    if (p.name === 'resource') type = typeOf(p.ext, p.at, 'SubscriptionTopic.notificationShape.resource');
    else if (p.name === 'include' || p.name === 'revInclude') include.push([p.name, stringValue(p.ext, 'valueString', p.at, `SubscriptionTopic.notificationShape.${p.name}`), p.at]);
  }
  if (type === undefined) throw refuse('SubscriptionTopic.notificationShape needs its resource (a resource type)', at);
  const shape: TopicShape = { type, include: [] };
  for (const [name, value, where] of include) {
    // R5's form: `Encounter:patient&iterate=Patient.link`, an include and the iterated ones after it.
    const [first, ...rest] = value.split('&');
    const key = name === 'include' ? '_include' : '_revinclude';
    const items: [string, string][] = [[key, first!]];
    for (const r of rest) {
      const m = /^iterate=(.+)$/.exec(r);
      if (!m) throw refuse(`SubscriptionTopic.notificationShape.${name} '${value}': '${r}' is not iterate=Type:parameter`, where);
      items.push([`${key}:iterate`, m[1]!]);
    }
    for (const [k, v] of items) {
      try {
        parseInclude(type, k, v, name === 'revInclude');
      } catch (err) {
        if (err instanceof FhirError && err.status < 500) throw refuse(`SubscriptionTopic.notificationShape.${name} '${value}' is not one Cinder can follow: ${err.message}`, where);
        throw err;
      }
      shape.include.push([k, v]);
    }
  }
  return shape;
}

/** The tenant's SubscriptionTopics (Basic coded SubscriptionTopic): the most read, and those read. */
export const MAX_TOPICS = 1_000;

/**
 * The Basics an open transaction wrote, by id, as topics (null: deleted, or no longer a topic), so that a
 * Subscription written later in the same transaction finds its topic (FHIR R4 http 3.1.0.11.2: a
 * transaction's entries see the earlier ones' writes). Keyed by the transaction's writer, it goes with it.
 */
const writtenTopics = new WeakMap<ResourceWriter, Map<string, Topic | null>>();

/** Notes that the transaction of `w` wrote Basic/`id`: the topic it now holds, or null (deleted, or not a topic). */
export function noteTopicWritten(w: ResourceWriter, id: string, topic: Topic | null): void {
  let written = writtenTopics.get(w);
  if (!written) writtenTopics.set(w, (written = new Map()));
  written.set(id, topic && { ...topic, id });
}

/**
 * The tenant's committed topics that parse (one stored by `cinder import` may not: it is left out), read on
 * the store's connections: before a write's transaction begins (activation.ts prepareActivation), never in it.
 */
export async function committedTopics(deps: Pick<FhirDeps, 'store'>, tenant: string, now: number): Promise<Topic[]> {
  // The code in any system, then held to isTopicResource's (fhir-types, or none), as topics are checked when written.
  const where = compileFilter('Basic', new URLSearchParams('code=SubscriptionTopic'), now) as Condition[];
  const rows = await deps.store.resources.search(tenant, { type: 'Basic', where, sort: [], count: MAX_TOPICS });
  return rows.flatMap((row) => {
    try {
      const resource = JSON.parse(row.content) as Json;
      return isTopicResource(resource) ? [parseTopic(resource)] : [];
    } catch {
      return [];
    }
  });
}

/**
 * Every topic of the tenant that parses: the committed ones (`committed`, read before the write's transaction;
 * without it, read now), and with `w`, as its transaction has written them so far (noteTopicWritten).
 */
export async function tenantTopics(deps: Pick<FhirDeps, 'store'>, tenant: string, now: number, w?: ResourceWriter, committed?: Promise<Topic[]>): Promise<Topic[]> {
  const stored = await (committed ?? committedTopics(deps, tenant, now));
  const written = w && writtenTopics.get(w);
  if (!written) return stored;
  return [...stored.filter((t) => !written.has(t.id)), ...[...written.values()].filter((t): t is Topic => t !== null)];
}

