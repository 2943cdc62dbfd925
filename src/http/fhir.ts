import { Hono, type Context } from 'hono';
import { createResource, deleteResource, readResource, updateResource, vreadResource, type Deletion, type FhirDeps, type FhirRequest, type WriteResult } from '../fhir/crud.ts';
import { parseIfMatch, updatePreconditions } from '../fhir/if-match.ts';
import { historyParts, searchLinks, searchsetJson } from '../fhir/bundle.ts';
import { subscriptionEvents, subscriptionStatus, subscriptionWsBindingToken, type WsBindingIssuer } from '../fhir/subscriptions/operations.ts';
import { conditionalCreate, conditionalDelete, conditionalUpdate } from '../fhir/conditional.ts';
import { history } from '../fhir/history.ts';
import { issue, matchedOutcome, operationOutcome, unchangedOutcome } from '../fhir/outcome.ts';
import { searchResources, type SearchResult } from '../fhir/search.ts';
import { everything } from '../fhir/everything.ts';
import { encounterEverything } from '../fhir/encounter-everything.ts';
import { lastn } from '../fhir/lastn.ts';
import { matchOperation, matchSearch } from '../fhir/match.ts';
import { findFunctionalList } from '../fhir/list-find.ts';
import { generateDocument } from '../fhir/document.ts';
import { observationStats } from '../fhir/stats.ts';
import { statsParams } from '../fhir/stats-input.ts';
import { preferredId, versions } from '../fhir/naming-system.ts';
import { changeMeta, instanceMeta, metaInUse, metaParameters } from '../fhir/meta-operations.ts';
import { metaInHead } from '../fhir/meta-head.ts';
import { searchTypes } from '../fhir/search-system.ts';
import { checkCompartmentPath, type Compartment } from '../fhir/compartments.ts';
import { pagedAt } from '../fhir/search-time.ts';
import { isResourceType } from '../fhir/resource-types.ts';
import { processBundle } from '../fhir/transaction.ts';
import type { OperationCall } from '../fhir/batch.ts';
import type { Json } from '../fhir/bundle-ops.ts';
import { parseExact, stringifyExact } from '../fhir/exact-json.ts';
import { conditionalPatch, parsePatch, patchResource } from '../fhir/patch.ts';
import { validateOperation } from '../fhir/validate-operation.ts';
import { convertOperation } from '../fhir/convert-operation.ts';
import { instanceDiff, serverDiff } from '../fhir/diff/diff-operation.ts';
import { snapshotOperation } from '../fhir/snapshot-operation.ts';
import { DEFAULT_HTTP_LIMIT, expunge, expungeOptions, expungeParameters, requireExpungeAccess } from '../fhir/expunge.ts';
import { checkTypeAndId } from '../fhir/resource.ts';
import { FhirError } from '../errors.ts';
import { readFhirBody, readFhirText, readFormText, readOptionalFhirBody, requireUtf8 } from './body.ts';
import type { AppEnv } from './env.ts';
import { parsePrefer } from './prefer.ts';
import { refusal } from './options.ts';
import { checkAccept, fhirJson, fhirJsonOfParts, notModified, readConditions, versionHeaders, versionResponse, type ReadConditions } from './fhir-response.ts';
import { instanceShape, type Shape } from '../fhir/subset.ts';
import { strictQuery } from '../fhir/query-encoding.ts';
import { fhirBaseOf, type BodyLimits } from '../config.ts';
import { binaryRoutes } from './binary.ts';
import { safeTimeNow } from '../store/write-times.ts';

export interface FhirRouteDeps extends FhirDeps {
  baseUrl: string;
  /** A Bundle posted to the base may be larger than a single resource; a Binary's native content too. */
  limits: Pick<BodyLimits, 'resource' | 'bundle' | 'binary'>;
  /** Answers a request as the server would (its every route and check): a batch entry's operation. */
  dispatch?: (req: Request) => Promise<Response>;
  /** `CINDER_EXPUNGE=on`: `$expunge` removes versions; otherwise it answers 403. */
  expunge?: boolean;
  /** `$get-ws-binding-token`'s tokens and owner check, and the tenant's websocket URL they are used on. */
  wsBinding?: WsBindingIssuer & { url: (tenant: string) => string };
}

/**
 * A batch entry's operation as a request of its own to the tenant's FHIR base, with the Bundle's
 * credentials and language: the operation's own route, checks and answer, whatever it is.
 */
function operationCall(c: Context<AppEnv>, dispatch: (req: Request) => Promise<Response>): OperationCall {
  const origin = new URL(c.req.url).origin;
  return async (method, url, body) => {
    const headers: Record<string, string> = { Accept: 'application/fhir+json' };
    for (const name of ['authorization', 'accept-language']) {
      const value = c.req.header(name);
      if (value !== undefined) headers[name] = value;
    }
    if (body !== undefined) headers['Content-Type'] = 'application/fhir+json';
    const res = await dispatch(new Request(`${origin}/tenants/${c.get('tenant')}/fhir/R4/${url}`, { method, headers, ...(body === undefined ? {} : { body: stringifyExact(body) }) }));
    const text = await res.text();
    return { status: res.status, body: text && (res.headers.get('content-type') ?? '').includes('json') ? (parseExact(text) as Json) : undefined, chars: text.length };
  };
}

function fhirBase(c: Context<AppEnv>, baseUrl: string): string {
  return fhirBaseOf(baseUrl, c.get('tenant'));
}

function request(c: Context<AppEnv>): FhirRequest {
  return { tenant: c.get('tenant'), access: c.get('access') };
}

/**
 * A write's response honouring `Prefer: return=minimal|representation|OperationOutcome`, with the
 * version's ETag and Last-Modified (the current version's, as a read gives them, when the update
 * changed nothing), its URL in `Content-Location` (RFC 9110 8.7: the resource the answer is of; the
 * resource a conditional write settled on, and its version, whatever the preference, as HAPI FHIR
 * answers and its client reads it), and in `Location` for a 201 (FHIR R4 http.html create).
 */
export function writeResponse(c: Context<AppEnv>, written: WriteResult, status: number, base: string): Response {
  const v = written.version;
  const headers = versionHeaders(v);
  const url = `${base}/${v.type}/${v.id}/_history/${v.versionId}`;
  headers['Content-Location'] = url;
  if (status === 201) headers.Location = url;
  const ret = parsePrefer(c.req.header('prefer')).get('return');
  if (ret === 'minimal') {
    return new Response(null, { status, headers });
  }
  if (ret === 'OperationOutcome') {
    const outcome = written.matched ? matchedOutcome(v.type, v.id, v.versionId, 'If-None-Exist')
      : written.unchanged ? unchangedOutcome(v.type, v.id, v.versionId, written.refused) : storedOutcome(v.type, v.id, v.versionId);
    return fhirJson(outcome, status, headers);
  }
  return fhirJson(v.content, status, headers);
}

/** What `Prefer: return=OperationOutcome` answers for a stored version. */
function storedOutcome(type: string, id: string, versionId: string | number): ReturnType<typeof operationOutcome> {
  return operationOutcome([issue('information', 'informational', `${type}/${id} version ${versionId} stored`)]);
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/**
 * A transaction or batch response as `Prefer: return=...` asks, entry by entry (FHIR R4 http.html#ops):
 * the written resources (representation, the default), none (minimal), or an informational
 * OperationOutcome in `response.outcome` instead (OperationOutcome). Read entries and operations (a batch's
 * `POST ValueSet/$validate-code`) keep their resources; failed batch entries keep their outcomes. Response
 * entries stand at their request entries' places.
 */
function withReturnPreference(request: unknown, response: Record<string, any>, ret: string | undefined): Record<string, any> {
  if ((ret !== 'minimal' && ret !== 'OperationOutcome') || response.entry === undefined) return response;
  const requested = (request as { entry: { request?: { method?: string; url?: unknown; ifNoneExist?: unknown } }[] }).entry;
  response.entry.forEach((e: Record<string, any>, i: number) => {
    const req = requested[i]?.request;
    const method = String(req?.method).toUpperCase();
    // An operation's result (`POST CodeSystem/$lookup`) is its answer, not a representation of something written.
    if (!WRITE_METHODS.has(method) || e.resource === undefined || namesOperation(req?.url)) return;
    const r = e.resource;
    delete e.resource;
    // An update that changed nothing keeps the outcome saying so (unchangedOutcome); a conditional create
    // answered 200 matched its ifNoneExist and wrote nothing.
    if (ret === 'OperationOutcome') {
      e.response.outcome ??= method === 'POST' && req?.ifNoneExist !== undefined && String(e.response.status).startsWith('200')
        ? matchedOutcome(r.resourceType, r.id, r.meta?.versionId, 'request.ifNoneExist')
        : storedOutcome(r.resourceType, r.id, r.meta?.versionId);
    }
  });
  return response;
}

/** Whether a Bundle entry's `request.url` names an operation (`$name`, `Type/$name`, `Type/id/$name`, with a query or not). */
function namesOperation(url: unknown): boolean {
  return typeof url === 'string' && (url.split('?', 1)[0]!.split('/').pop() ?? '').startsWith('$');
}

/**
 * The answer to a delete: an informational OperationOutcome with the deletion's ETag and Last-Modified, or 204
 * without a body for `Prefer: return=minimal`. A resource deleted before is answered so too, with that deletion's
 * (FHIR R4 http.html#delete: deleting a deleted resource succeeds, writing no version); an id never stored has none.
 */
function deleteResponse(c: Context<AppEnv>, type: string, id: string | undefined, deleted: Deletion | null): Response {
  const headers: Record<string, string> = deleted ? { ETag: `W/"${deleted.versionId}"`, 'Last-Modified': new Date(deleted.lastUpdated).toUTCString() } : {};
  if (parsePrefer(c.req.header('prefer')).get('return') === 'minimal') return new Response(null, { status: 204, headers });
  const text = deleted
    ? deleted.wrote ? `Deleted ${type}/${id}` : `${type}/${id} was already deleted (version ${deleted.versionId}); nothing more to delete`
    : id ? `${type}/${id} did not exist; nothing to delete` : `No ${type} matched; nothing to delete`;
  return fhirJson(operationOutcome([issue('information', 'informational', text)]), 200, headers);
}

/**
 * `GET [base]/{type}/{id}`: the current version with its ETag and Last-Modified, or 304 when the
 * request's conditions say the client has it (also a hot route); `shape`: `_summary` / `_elements`.
 */
export async function readResponse(deps: FhirDeps, req: FhirRequest, type: string, id: string, conditions?: ReadConditions, shape?: Shape): Promise<Response> {
  if (id.startsWith('$')) throw new FhirError('not-found', `Operation ${id} is not supported on ${type}`);
  const v = await readResource(deps, req, type, id);
  return notModified(v, conditions) ?? versionResponse(v, shape);
}

/** A resource instance below the FHIR base (read, update, patch, delete): its Hono route and the hot read's label. */
export const INSTANCE_ROUTE = '/:type/:id';

/** FHIR R4 RESTful interactions for one tenant (mounted at FHIR_BASE_ROUTE, behind the FHIR gate). */
export function fhirRoutes(deps: FhirRouteDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const strict = (c: Context<AppEnv>) => parsePrefer(c.req.header('prefer')).get('handling') === 'strict';
  /** `_summary` / `_elements` of a read, vread or history request. */
  const shapeOf = (c: Context<AppEnv>) => instanceShape(new URL(c.req.url).searchParams, strict(c));
  // A query's malformed percent-encoding is a 400 naming its parameter, before any route reads it leniently.
  app.use('*', async (c, next) => {
    const q = c.req.url.indexOf('?');
    if (q >= 0) strictQuery(c.req.url.slice(q + 1).split('#', 1)[0]!);
    await next();
  });

  /**
   * A Bundle's `meta.lastUpdated`: the safe time taken before its read (src/store/write-times.ts), so that a client
   * polling with `_since` (or `_lastUpdated=ge`) that instant misses no version committed after the read.
   */
  const readTime = () => safeTimeNow(deps.store, deps.clock);
  /** A search's page, read after `at` (readTime, or the first page's: pagedAt), as a searchset Bundle, its links below `path` (from the FHIR base). */
  const searchset = (c: Context<AppEnv>, path: string, r: SearchResult, at: number) => {
    const base = fhirBase(c, deps.baseUrl);
    const extra = { included: r.included, ...(r.shape ? { shape: r.shape } : {}), ...(r.includedShape ? { includedShape: r.includedShape } : {}) };
    return fhirJson(searchsetJson(base, r.rows, searchLinks(base, path, r.self, r.next, r.page), r.total, r.warnings, at, extra));
  };
  const search = async (c: Context<AppEnv>, type: string, params: URLSearchParams) => {
    const r = await pagedAt(params, readTime(), (p, asOf, pin) => searchResources(deps, request(c), type, p, strict(c), undefined, asOf, pin));
    return searchset(c, `/${type}`, r, r.at);
  };
  /** `GET [base]?...` and `{Compartment}/{id}/*` (src/fhir/search-system.ts). */
  const searchAll = async (c: Context<AppEnv>, params: URLSearchParams, compartment?: Compartment) => {
    const r = await pagedAt(params, readTime(), (p, asOf, pin) => searchTypes(deps, request(c), p, strict(c), compartment, asOf, pin));
    return searchset(c, compartment === undefined ? '' : `/${compartment.type}/${compartment.id}/*`, r, r.at);
  };
  /** A `_search` form (`POST .../_search`), with the URL's own parameters after it. */
  const formParams = async (c: Context<AppEnv>) => {
    const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/x-www-form-urlencoded') {
      throw new FhirError('unsupported-media', '_search by POST takes application/x-www-form-urlencoded');
    }
    const text = await readFormText(c.req.raw, deps.limits.resource);
    let params: URLSearchParams;
    try {
      params = strictQuery(text);
    } catch (err) {
      // A form declared in another charset (`charset=ISO-8859-1`, whose `%FC` is its ü) is the 415 naming it, not misencoded.
      requireUtf8(c.req.header('content-type'));
      throw err;
    }
    const url = new URL(c.req.url).searchParams;
    // The form's `_format` and `_pretty` ask for the answer's format as the URL's do (the first given is the
    // search's, as compileSearch keeps it): an unknown format is the 406 the gate gives the URL's.
    if (params.has('_format') || params.has('_pretty')) {
      const format = params.get('_format') ?? url.get('_format');
      if (format !== null) checkAccept(undefined, format);
      c.set('answerFormat', { format, pretty: (params.get('_pretty') ?? url.get('_pretty')) === 'true' });
    }
    for (const [k, v] of url) params.append(k, v);
    return params;
  };
  /** `Patient/$everything` and `Patient/{id}/$everything`: by GET, or by POST with a Parameters body (or none), the URL's parameters after it. */
  const everythingOf = async (c: Context<AppEnv>, id?: string, type = 'Patient') => {
    const base = fhirBase(c, deps.baseUrl);
    const params = c.req.method === 'POST' ? await operationParams(c) : new URL(c.req.url).searchParams;
    const r = await pagedAt(params, readTime(), (p) => (type === 'Encounter' ? encounterEverything(deps, request(c), p, strict(c), id!) : everything(deps, request(c), p, strict(c), id)));
    const path = id === undefined ? `/${type}/$everything` : `/${type}/${id}/$everything`;
    return fhirJson(searchsetJson(base, r.rows, searchLinks(base, path, r.self, r.next, r.page), r.total, r.warnings, r.at, { included: r.included }));
  };
  /** `Observation/$lastn` by GET, or by POST with a Parameters body (or none), the URL's parameters after it. */
  const lastnOf = async (c: Context<AppEnv>) => {
    const base = fhirBase(c, deps.baseUrl);
    const params = c.req.method === 'POST' ? await operationParams(c) : new URL(c.req.url).searchParams;
    const at = readTime();
    const r = await lastn(deps, request(c), params, strict(c));
    return fhirJson(searchsetJson(base, r.rows, searchLinks(base, '/Observation/$lastn', r.self), r.rows.length, r.warnings, at));
  };
  /** `Composition/{id}/$document` and `Composition/$document?id=` by GET, or by POST with a Parameters body (or none); 201 with its Location when stored (`persist`). */
  const documentOf = async (c: Context<AppEnv>, id?: string) => {
    const base = fhirBase(c, deps.baseUrl);
    const params = c.req.method === 'POST' ? await operationParams(c) : new URL(c.req.url).searchParams;
    const r = await generateDocument(deps, request(c), params, id, base, strict(c), c.req.method !== 'POST');
    if (r.stored === undefined) return fhirJson(r.text);
    const v = r.stored.version;
    return fhirJson(r.text, 201, { ...versionHeaders(v), Location: `${base}/Bundle/${v.id}/_history/${v.versionId}` });
  };
  /** `Observation/$stats` by GET, or by POST with a Parameters body (Codings and a Period too), the URL's parameters after it. */
  const statsOf = async (c: Context<AppEnv>) => {
    const query = new URL(c.req.url).searchParams;
    const body = c.req.method === 'POST' ? await readOptionalFhirBody(c.req.raw, deps.limits.resource) : undefined;
    return fhirJson(await observationStats(deps, request(c), statsParams(query, body), fhirBase(c, deps.baseUrl), strict(c)));
  };
  /** An operation's parameters from a POSTed Parameters resource of primitive values (none: an empty body), then the URL's. */
  const operationParams = async (c: Context<AppEnv>) => {
    const params = new URLSearchParams();
    const body = await readOptionalFhirBody(c.req.raw, deps.limits.resource);
    if (body !== undefined) for (const [name, value] of primitiveParameters(body)) params.append(name, value);
    for (const [k, v] of new URL(c.req.url).searchParams) params.append(k, v);
    return params;
  };
  const historyOf = async (c: Context<AppEnv>, type?: string, id?: string) => {
    const base = fhirBase(c, deps.baseUrl);
    const params = new URL(c.req.url).searchParams;
    const shape = instanceShape(params, strict(c));
    const at = readTime();
    const r = await history(deps, request(c), params, at, type, id, strict(c));
    const path = (type ? `/${type}` : '') + (id ? `/${id}` : '') + '/_history';
    const chars = r.rows.reduce((n, v) => n + v.content.length, 0);
    return fhirJsonOfParts(historyParts(base, r.rows, searchLinks(base, path, r.self, r.next, r.page), r.at, shape), chars);
  };

  // `$expunge` (system, type, instance, version: src/fhir/expunge.ts), before the routes that would take it for a type or an id.
  const expungeOf = async (c: Context<AppEnv>) => {
    const { type, id, vid } = c.req.param() as { type?: string; id?: string; vid?: string };
    if (!deps.expunge) throw new FhirError('forbidden', '$expunge is disabled on this server (the operator enables it with CINDER_EXPUNGE=on)');
    const options = expungeOptions(await operationParams(c));
    const types = type === undefined ? undefined : [type];
    requireExpungeAccess(c.get('access'), types);
    const count = await expunge(deps.store, c.get('tenant'), { ...(types && { types }), ...(id !== undefined && { id }), ...(vid !== undefined && { versionId: vid }) }, {
      ...options, limit: options.limit ?? DEFAULT_HTTP_LIMIT,
    });
    return fhirJson(expungeParameters(count));
  };
  for (const at of ['', '/:type', '/:type/:id', '/:type/:id/_history/:vid']) {
    app.post(`${at}/$expunge`, expungeOf);
    app.on(['GET', 'PUT', 'DELETE', 'PATCH'], `${at}/$expunge`, refuse('POST'));
  }
  // `Patient/$match` (src/fhir/match.ts): POST only, its input a Parameters resource holding a Patient.
  app.post('/Patient/$match', async (c) => {
    const base = fhirBase(c, deps.baseUrl);
    const body = await readFhirBody(c.req.raw, deps.limits.resource);
    const at = readTime();
    const r = await matchOperation(deps, request(c), body);
    const rows = r.rows.map((m) => m.version);
    return fhirJson(searchsetJson(base, rows, searchLinks(base, '/Patient/$match', new URLSearchParams()), rows.length, r.warnings, at, {
      matchSearch: (_, i) => matchSearch(r.rows[i]!.match),
    }));
  });
  app.on(['GET', 'PUT', 'DELETE', 'PATCH'], '/Patient/$match', refuse('POST'));
  // Native content in and out of Binary; FHIR JSON bodies fall through to the routes below.
  app.route('/', binaryRoutes({ fhir: deps, baseUrl: deps.baseUrl, maxBinaryBytes: deps.limits.binary, writeResponse }));
  notAllowedFirst(app);
  // `$meta` (system, type, instance, version) and `$meta-add` / `$meta-delete` (instance, version): src/fhir/meta-operations.ts.
  const metaOf = async (c: Context<AppEnv>) => {
    const { type, id, vid } = c.req.param() as { type?: string; id?: string; vid?: string };
    // No inputs: an empty body or an empty Parameters; any other parameter is ignored, or a 400 under strict handling.
    const params = c.req.method === 'POST' ? await operationParams(c) : new URL(c.req.url).searchParams;
    const extra = [...params.keys()].find((k) => k !== '_format' && k !== '_pretty');
    if (extra !== undefined && strict(c)) throw new FhirError('not-supported', `'${extra}' is not a parameter of $meta (it takes none)`, { expression: [extra] });
    const meta = id === undefined ? await metaInUse(deps, request(c), type) : await instanceMeta(deps, request(c), type!, id, vid);
    return fhirJson(metaParameters(meta));
  };
  const metaChange = (mode: 'add' | 'delete') => async (c: Context<AppEnv>) => {
    const { type, id, vid } = c.req.param() as { type: string; id: string; vid?: string };
    if (id.startsWith('$')) throw new FhirError('not-found', `Operation ${id} is not supported on ${type}`);
    const body = await readFhirBody(c.req.raw, deps.limits.resource);
    const written = await changeMeta(deps, request(c), type, id, body, mode, vid, parseIfMatch(c.req.header('if-match')));
    // The meta opening the version's text (meta-head.ts), not a parse of the whole of it (a large resource's).
    const text = written.version.content;
    const meta = metaInHead(text, type, id) ?? (JSON.parse(text) as { meta: Record<string, unknown> }).meta;
    return fhirJson(metaParameters(meta), 200, versionHeaders(written.version));
  };
  /** `StructureDefinition/$snapshot` and `StructureDefinition/{id}/$snapshot`, by GET (`url`) or by POST with a Parameters body. */
  const snapshotOf = async (c: Context<AppEnv>, id?: string) => {
    const body = c.req.method === 'POST' ? await readFhirBody(c.req.raw, deps.limits.resource) : undefined;
    return fhirJson(await snapshotOperation(deps, request(c), id, body, new URL(c.req.url).searchParams, strict(c)));
  };
  /** `Subscription/$status` and `Subscription/{id}/$status` (R5 Backport IG), by GET or by POST with a Parameters body. */
  const statusOf = async (c: Context<AppEnv>, id?: string) => {
    const params = c.req.method === 'POST' ? await operationParams(c) : new URL(c.req.url).searchParams;
    return fhirJson(await subscriptionStatus(deps, request(c), fhirBase(c, deps.baseUrl), id, params));
  };
  /** `Subscription/{id}/$events` (R5 Backport IG), by GET or by POST with a Parameters body. */
  const eventsOf = async (c: Context<AppEnv>, id: string) => {
    const params = c.req.method === 'POST' ? await operationParams(c) : new URL(c.req.url).searchParams;
    return fhirJson(await subscriptionEvents(deps, request(c), fhirBase(c, deps.baseUrl), id, params));
  };
  /** `Subscription/{id}/$get-ws-binding-token` (R5 Backport IG), by GET or by POST with a Parameters body. */
  const bindingTokenOf = async (c: Context<AppEnv>, id: string) => {
    if (!deps.wsBinding) throw new FhirError('not-found', 'Operation $get-ws-binding-token is not supported on Subscription');
    const params = c.req.method === 'POST' ? await operationParams(c) : new URL(c.req.url).searchParams;
    return fhirJson(await subscriptionWsBindingToken(deps, request(c), id, params, deps.wsBinding, deps.wsBinding.url(c.get('tenant'))));
  };
  app.on(['GET', 'POST'], '/StructureDefinition/$snapshot', (c) => snapshotOf(c));
  app.on(['GET', 'POST'], '/StructureDefinition/:id/$snapshot', (c) => snapshotOf(c, c.req.param('id')));
  app.on(['GET', 'POST'], '/$meta', metaOf);
  app.on(['GET', 'POST'], '/:type/$meta', metaOf);
  app.on(['GET', 'POST'], '/:type/:id/$meta', metaOf);
  app.on(['GET', 'POST'], '/:type/:id/_history/:vid/$meta', metaOf);
  for (const at of ['/:type/:id', '/:type/:id/_history/:vid']) {
    app.post(`${at}/$meta-add`, metaChange('add'));
    app.post(`${at}/$meta-delete`, metaChange('delete'));
    app.on(['GET', 'PUT', 'DELETE', 'PATCH'], [`${at}/$meta-add`, `${at}/$meta-delete`], refuse('POST'));
  }
  app.post('/', async (c) => {
    const body = await readFhirBody(c.req.raw, deps.limits.bundle);
    const operation = deps.dispatch === undefined ? undefined : operationCall(c, deps.dispatch);
    const response = await processBundle(deps, request(c), body, fhirBase(c, deps.baseUrl), undefined, operation);
    return fhirJson(withReturnPreference(body, response, parsePrefer(c.req.header('prefer')).get('return')));
  });
  // `$convert` (src/fhir/convert-operation.ts) and `$diff` (src/fhir/diff/), before the type routes that would take them for a type.
  app.post('/$convert', async (c) => fhirJson(await convertOperation(await readFhirBody(c.req.raw, deps.limits.resource))));
  app.on(['GET', 'PUT', 'DELETE', 'PATCH'], '/$convert', refuse('POST'));
  const diffParams = async (c: Context<AppEnv>) => (c.req.method === 'POST' ? await operationParams(c) : new URL(c.req.url).searchParams);
  app.on(['GET', 'POST'], '/$diff', async (c) => fhirJson(await serverDiff(deps, request(c), await diffParams(c), strict(c))));
  app.on(['GET', 'POST'], '/:type/:id/$diff', async (c) => {
    const { type, id } = c.req.param();
    return fhirJson(await instanceDiff(deps, request(c), type, id, await diffParams(c), strict(c)));
  });
  // `$versions` (system level, no inputs), before the type routes that would take it for a type.
  app.on(['GET', 'POST'], '/$versions', async (c) => fhirJson(versions(c.req.method === 'POST' ? await operationParams(c) : new URL(c.req.url).searchParams, strict(c))));
  app.get('/_history', (c) => historyOf(c));
  app.get('/', (c) => searchAll(c, new URL(c.req.url).searchParams));
  app.post('/_search', async (c) => searchAll(c, await formParams(c)));
  app.get('/:type', (c) => search(c, c.req.param('type'), new URL(c.req.url).searchParams));
  app.post('/:type/_search', async (c) => search(c, c.req.param('type'), await formParams(c)));
  app.post('/:type', async (c) => {
    const body = await readFhirBody(c.req.raw, deps.limits.resource);
    const ifNoneExist = c.req.header('if-none-exist');
    const type = c.req.param('type');
    const written = ifNoneExist === undefined
      ? await createResource(deps, request(c), type, body)
      : await conditionalCreate(deps, request(c), type, body, ifNoneExist);
    return writeResponse(c, written, written.created ? 201 : 200, fhirBase(c, deps.baseUrl));
  });
  app.get('/:type/_history', (c) => historyOf(c, c.req.param('type')));
  app.get(INSTANCE_ROUTE, async (c) => {
    const { type, id } = c.req.param();
    if (type === 'Patient' && id === '$everything') return everythingOf(c);
    if (type === 'Observation' && id === '$lastn') return lastnOf(c);
    if (type === 'Subscription' && id === '$status') return statusOf(c);
    if (type === 'Composition' && id === '$document') return documentOf(c);
    if (type === 'Observation' && id === '$stats') return statsOf(c);
    if (type === 'NamingSystem' && id === '$preferred-id') return fhirJson(await preferredId(deps, request(c), new URL(c.req.url).searchParams, strict(c)));
    if (type === 'List' && id === '$find') {
      const v = await findFunctionalList(deps, request(c), new URL(c.req.url).searchParams);
      return fhirJson(v.content, 200, versionHeaders(v));
    }
    return readResponse(deps, request(c), type, id, readConditions(c.req.raw.headers), shapeOf(c));
  });
  app.put(INSTANCE_ROUTE, async (c) => {
    const pre = updatePreconditions((name) => c.req.header(name));
    const body = await readFhirBody(c.req.raw, deps.limits.resource);
    const { type, id } = c.req.param();
    const written = await updateResource(deps, request(c), type, id, body, pre);
    return writeResponse(c, written, written.created ? 201 : 200, fhirBase(c, deps.baseUrl));
  });
  app.put('/:type', async (c) => {
    const pre = updatePreconditions((name) => c.req.header(name));
    const body = await readFhirBody(c.req.raw, deps.limits.resource);
    const query = new URL(c.req.url).searchParams;
    const written = await conditionalUpdate(deps, request(c), c.req.param('type'), query, body, pre);
    return writeResponse(c, written, written.created ? 201 : 200, fhirBase(c, deps.baseUrl));
  });
  const patchBody = async (c: Context<AppEnv>) => {
    const type = c.req.header('content-type') ?? '';
    requireUtf8(type);
    const text = await readFhirText(c.req.raw, deps.limits.resource);
    requireUtf8(type, text);
    return parsePatch(type, text);
  };
  app.patch(INSTANCE_ROUTE, async (c) => {
    const { ifMatch, ifNoneMatch } = updatePreconditions((name) => c.req.header(name));
    const { type, id } = c.req.param();
    return writeResponse(c, await patchResource(deps, request(c), type, id, await patchBody(c), ifMatch, ifNoneMatch), 200, fhirBase(c, deps.baseUrl));
  });
  app.patch('/:type', async (c) => {
    const { ifMatch, ifNoneMatch } = updatePreconditions((name) => c.req.header(name));
    const query = new URL(c.req.url).searchParams;
    return writeResponse(c, await conditionalPatch(deps, request(c), c.req.param('type'), query, await patchBody(c), ifMatch, ifNoneMatch), 200, fhirBase(c, deps.baseUrl));
  });
  app.delete(INSTANCE_ROUTE, async (c) => {
    const { type, id } = c.req.param();
    const { ifMatch, ifNoneMatch } = updatePreconditions((name) => c.req.header(name));
    return deleteResponse(c, type, id, await deleteResource(deps, request(c), type, id, ifMatch, ifNoneMatch));
  });
  app.delete('/:type', async (c) => {
    const type = c.req.param('type');
    const { ifMatch, ifNoneMatch } = updatePreconditions((name) => c.req.header(name));
    const r = await conditionalDelete(deps, request(c), type, new URL(c.req.url).searchParams, ifMatch, ifNoneMatch);
    return r ? deleteResponse(c, type, r.id, r.version) : deleteResponse(c, type, undefined, null);
  });
  app.get('/:type/:id/_history', (c) => historyOf(c, c.req.param('type'), c.req.param('id')));
  app.get('/:type/:id/_history/:vid', async (c) => {
    const { type, id, vid } = c.req.param();
    const shape = shapeOf(c);
    const v = await vreadResource(deps, request(c), type, id, vid);
    return notModified(v, readConditions(c.req.raw.headers)) ?? versionResponse(v, shape);
  });
  const validate = async (c: Context<AppEnv>, id?: string) => {
    const body = c.req.method === 'POST' ? await readFhirBody(c.req.raw, deps.limits.resource) : undefined;
    return fhirJson(await validateOperation(deps, request(c), c.req.param('type')!, id, body, new URL(c.req.url).searchParams));
  };
  app.post('/:type/$validate', (c) => validate(c));
  app.on(['GET', 'POST'], '/:type/:id/$validate', (c) => validate(c, c.req.param('id')));
  /** Compartment search: `{Compartment}/{id}/{type}` or `{Compartment}/{id}/*`, in the five R4 compartments (src/fhir/compartments.ts). */
  const compartmentSearch = async (c: Context<AppEnv>, params: URLSearchParams) => {
    const { type, id, what } = c.req.param() as { type: string; id: string; what: string };
    checkCompartmentPath(type, id, what);
    checkTypeAndId(type, id);
    if (what === '*') return searchAll(c, params, { type, id });
    const r = await pagedAt(params, readTime(), (p, asOf, pin) => searchResources(deps, request(c), what, p, strict(c), { type, id }, asOf, pin));
    return searchset(c, `/${type}/${id}/${what}`, r, r.at);
  };
  app.post('/Patient/$everything', (c) => everythingOf(c));
  app.post('/Patient/:id/$everything', (c) => everythingOf(c, c.req.param('id')));
  app.post('/Encounter/:id/$everything', (c) => everythingOf(c, c.req.param('id'), 'Encounter'));
  app.post('/Observation/$lastn', lastnOf);
  app.post('/Composition/$document', (c) => documentOf(c));
  app.post('/Observation/$stats', statsOf);
  app.post('/NamingSystem/$preferred-id', async (c) => fhirJson(await preferredId(deps, request(c), await operationParams(c), strict(c))));
  app.post('/Composition/:id/$document', (c) => documentOf(c, c.req.param('id')));
  app.post('/Subscription/$status', (c) => statusOf(c));
  app.post('/Subscription/:id/$status', (c) => statusOf(c, c.req.param('id')));
  app.post('/Subscription/:id/$events', (c) => eventsOf(c, c.req.param('id')));
  app.post('/Subscription/:id/$get-ws-binding-token', (c) => bindingTokenOf(c, c.req.param('id')));
  notAllowed(app);
  app.post('/:type/:id/:what/_search', async (c) => compartmentSearch(c, await formParams(c)));
  // Compartment search (`{Compartment}/{id}/{type}?...`, `{Compartment}/{id}/*?...`), `Patient/{id}/$everything` and `Encounter/{id}/$everything`; after `_history`, which this also matches.
  app.get('/:type/:id/:what', async (c) => {
    const { type, id, what } = c.req.param();
    if ((type === 'Patient' || type === 'Encounter') && what === '$everything') return everythingOf(c, id, type);
    if (type === 'Composition' && what === '$document') return documentOf(c, id);
    if (type === 'Subscription' && what === '$status') return statusOf(c, id);
    if (type === 'Subscription' && what === '$events') return eventsOf(c, id);
    if (type === 'Subscription' && what === '$get-ws-binding-token') return bindingTokenOf(c, id);
    return compartmentSearch(c, new URL(c.req.url).searchParams);
  });
  return app;
}

/** 405 with `Allow` for a known path (under a known type, if any); an `$operation` in place of an id stays 404. */
const refuse = (allow: string) => refusal((c: Context<AppEnv>) => {
  const { type, id } = c.req.param() as { type?: string; id?: string };
  if (id?.startsWith('$')) throw new FhirError('not-found', `Operation ${id} is not supported on ${type}`);
  if (type !== undefined) checkTypeAndId(type);
  throw new FhirError('method-not-allowed', `${c.req.method} is not supported on ${new URL(c.req.url).pathname.replace(/^.*\/fhir\/R4/, '') || '/'}`, {
    headers: { Allow: allow },
  });
});

/**
 * 405 for the methods the FHIR base and the history paths do not support, registered before the
 * instance routes (which would take `Patient/_history` for an id).
 */
function notAllowedFirst(app: Hono<AppEnv>): void {
  app.on(['PUT', 'DELETE', 'PATCH'], '/', refuse('GET, POST'));
  app.on(['POST', 'PUT', 'DELETE', 'PATCH'], '/_history', refuse('GET'));
  app.on(['POST', 'PUT', 'DELETE', 'PATCH'], '/:type/_history', refuse('GET'));
  app.on(['POST', 'PUT', 'DELETE', 'PATCH'], '/:type/:id/_history', refuse('GET'));
}

/**
 * 405 with `Allow` for methods a known path does not support (POST to an instance, writes to a version);
 * unknown types and `$operations` stay 404.
 */
function notAllowed(app: Hono<AppEnv>): void {
  app.on('POST', INSTANCE_ROUTE, refuse('GET, PUT, PATCH, DELETE'));
  app.on(['POST', 'PUT', 'DELETE', 'PATCH'], '/:type/:id/_history/:vid', refuse('GET'));
}

/**
 * The parameters of a Parameters resource whose values are primitives (`valueInstant`, `valueString`,
 * `valueInteger`...), as name and text; any other body, or a parameter holding a resource or parts, is a 400.
 */
function primitiveParameters(body: unknown): [string, string][] {
  const p = body as { resourceType?: unknown; parameter?: unknown };
  if (p === null || typeof p !== 'object' || p.resourceType !== 'Parameters') throw new FhirError('invalid', 'The body of an operation is a Parameters resource');
  const out: [string, string][] = [];
  for (const [i, item] of (Array.isArray(p.parameter) ? p.parameter : []).entries()) {
    const where = { expression: [`Parameters.parameter[${i}]`] };
    const name = (item as { name?: unknown })?.name;
    const values = Object.entries((item ?? {}) as Record<string, unknown>).filter(([k]) => k.startsWith('value'));
    if (typeof name !== 'string' || values.length !== 1 || !['string', 'number', 'boolean'].includes(typeof values[0]![1])) {
      throw new FhirError('invalid', `Parameters.parameter[${i}] must have a name and one primitive value`, where);
    }
    out.push([name, String(values[0]![1])]);
  }
  return out;
}
