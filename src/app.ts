import { Hono, type Context } from 'hono';
import { createAuditTrail, type AuditTrail } from './audit/trail.ts';
import { expungeCapability } from './fhir/expunge.ts';
import type { Clock } from './clock.ts';
import type { Config } from './config.ts';
import type { Logger } from './log.ts';
import type { Store } from './store/types.ts';
import { createTerminology } from './terminology/create.ts';
import { ProfileRegistry } from './fhir/validation/profile/registry.ts';
import { storeProfiles } from './fhir/validation/profile/definitions.ts';
import { ProfileValidator } from './fhir/validation/profile/profile-check.ts';
import { valueSetMembership, valueSetSubset } from './validation-terminology.ts';
import { QuestionnaireValidator } from './fhir/validation/questionnaire/validator.ts';
import { storeQuestionnaires } from './fhir/validation/questionnaire/source.ts';
import { CoreBundle } from './terminology/core/core-bundle.ts';
import { CoreTerminology } from './terminology/core/core-source.ts';
import { CoreLayer } from './fhir/core-layer.ts';
import type { FhirDeps } from './fhir/crud.ts';
import { codesExpander } from './search-terminology.ts';
import { resolveConditions } from './fhir/search.ts';
import { withRegexAccounts } from './regex-guard.ts';
import { patientOperationsCapability } from './fhir/list-find.ts';
import type { PendingCondition } from './fhir/search-compile.ts';
import type { KeyRing } from './auth/keys.ts';
import { createAuthDeps } from './auth/deps.ts';
import { signedByPublishedKey, signWsBinding, verifyWsBinding } from './auth/ws-binding-token.ts';
import type { WsBindingTokens } from './fhir/subscriptions/operations.ts';
import { TopicSockets } from './fhir/subscriptions/topic-sockets.ts';
import { perMinute } from './auth/rate-limit.ts';
import { smartOAuthUris } from './auth/discovery.ts';
import { capabilityStatementParts, type CapabilityContribution } from './fhir/capability.ts';
import { instanceShape } from './fhir/subset.ts';
import { parsePrefer } from './http/prefer.ts';
import { metadataMode, terminologyCapabilitiesJson } from './fhir/terminology-capabilities.ts';
import { bearerAuthenticator } from './http/middleware/bearer.ts';
import { validateCapability } from './fhir/validate-operation.ts';
import { convertCapability } from './fhir/convert-operation.ts';
import { diffCapability } from './fhir/diff/diff-operation.ts';
import { snapshotCapability } from './fhir/snapshot-operation.ts';
import { metaCapability } from './fhir/meta-operations.ts';
import { lastnCapability } from './fhir/lastn.ts';
import { subscriptionStatusCapability } from './fhir/subscriptions/operations.ts';
import { topicCanonicals as topicCanonicalReads } from './fhir/subscriptions/topic-canonicals.ts';
import { supportedProfiles as supportedProfileReads } from './fhir/validation/profile/supported.ts';
import { matchCapability } from './fhir/match.ts';
import { documentCapability } from './fhir/document.ts';
import { statsCapability } from './fhir/stats.ts';
import { namingSystemCapability } from './fhir/naming-system.ts';
import { encounterEverythingCapability } from './fhir/encounter-everything.ts';
import { gatedStore, type Rebuilding } from './fhir/reindex.ts';
import { FhirError } from './errors.ts';
import { exportCapability } from './export/capability.ts';
import { openSink, type ExportSink } from './export/sink.ts';
import { SETTLE_MS } from './export/runner.ts';
import type { AppEnv } from './http/env.ts';
import { nulInUrl, renderError } from './http/errors.ts';
import { exportRoutes } from './http/export.ts';
import { importRoutes } from './http/import.ts';
import { importCapability } from './import/capability.ts';
import { createImportRunner, type ImportRunner } from './import/runner.ts';
import { systemResolve } from './fhir/subscriptions/endpoint.ts';
import { fhirRoutes } from './http/fhir.ts';
import { graphqlCapability, graphqlRoutes } from './http/graphql.ts';
import { fhirJson, fhirJsonParts } from './http/fhir-response.ts';
import { createMetrics, type Metrics } from './http/metrics.ts';
import { FHIR_BASE_ROUTE, fhirAdmission, fhirGate, GATE_ROUTE } from './http/middleware/fhir-gate.ts';
import { optionsRoute } from './http/options.ts';
import { hotRoutes, type HotRoutes } from './http/hot-routes.ts';
import { xmlAnswers } from './http/xml-format.ts';
import { createCors } from './http/cors.ts';
import { encode } from './http/content-coding.ts';
import { labelledAsAsked } from './http/fhir-response.ts';
import { headAnswers, asHead } from './http/middleware/head.ts';
import { requestContext, requestIdOf, requestRecorder, withRequestId } from './http/middleware/request-context.ts';
import { terminologyCapabilities, terminologyRoutes, valueSetValidateCode } from './http/terminology.ts';
import { AUTHORIZE_PATH, authorizeRoutes } from './http/authorize.ts';
import { launchRoutes } from './http/launch.ts';
import { oauthRoutes, smartConfigurationResponse, tokenRoute } from './http/oauth.ts';
import { opsRoutes } from './http/ops.ts';
import pkg from '../package.json' with { type: 'json' };
import { bodyLimits, fhirBaseOf } from './config.ts';
import { stillRegistered } from './auth/issue.ts';
import { accessFromScopes, readsNotImplied } from './auth/scopes.ts';
import { tokenPatientHeld } from './auth/patient-held.ts';
import { TENANT_ID } from './auth/admin.ts';
import { SubscriptionHub } from './fhir/subscriptions/hub.ts';
import { SubscriptionDelivery } from './fhir/subscriptions/delivery.ts';
import { requestIp } from './http/client-ip.ts';
import { SubscriptionSockets, type SocketData } from './fhir/subscriptions/sockets.ts';
import type { WebSocketHandler } from 'bun';
import type { RestoreAccess } from './fhir/subscriptions/owner.ts';
import type { ResolveHost } from './fhir/subscriptions/endpoint.ts';

/** Everything the app needs, built by the composition root (src/main.ts, or test helpers). */
export interface AppDeps {
  config: Config;
  store: Store;
  keys: KeyRing;
  clock: Clock;
  log: Logger;
  metrics?: Metrics;
  /** True once SIGTERM started draining: /readyz answers 503. */
  isDraining?: () => boolean;
  /** Bulk export storage; default: opened from `config.exportStorage` (S3 credentials need the composition root's env). */
  exportSink?: ExportSink;
  /** fetch for outgoing requests (clients' JWK Set URLs); the global fetch by default. */
  fetch?: typeof fetch;
  /**
   * The FHIR R4 core terminology bundles (read-only, loaded on first use); a fresh one by default. Tests
   * share one between apps.
   */
  core?: CoreBundle;
  /**
   * Defined while a reindex runs beside the server (`serve` at start): searches reading rows it has not
   * rebuilt answer 503 (src/fhir/reindex.ts gatedStore) and /readyz reports its progress.
   */
  rebuilding?: () => Rebuilding | undefined;
  /** Direct dispatch of the hot routes (src/http/hot-routes.ts); default on. Off only to compare both paths in tests. */
  hotRoutes?: boolean;
  /** How long an `$import` job waits for an export storage or spool that cannot be reached (STORAGE_WAIT_MS by default). */
  importStorageWaitMs?: number;
  /** How long an export kick-off waits before reading a Group's members (KickoffDeps.settleMs; SETTLE_MS by default). */
  exportSettleMs?: number;
  /** How the host names of Subscription endpoints, `$import` inputs and clients' JWK Set URLs resolve (their address check); the system resolver by default. */
  resolveHost?: ResolveHost;
}

/** The app as a server runs it: one `fetch` in front of the CORS rule, the hot routes and Hono. */
export interface App {
  /** Bun.serve's handler; `server` is what Bun passes beside the request (the client's address). */
  fetch(req: Request, server?: unknown): Response | Promise<Response>;
  /**
   * Upgrades a websocket handshake for `{fhir_base}/websocket` (the Subscription websocket channel) on
   * `server`, Bun's: true when it did, and Bun.serve's `fetch` then answers nothing (src/cli/serve.ts).
   */
  upgrade(req: Request, server: unknown): boolean;
  /** Hono's `app.request()` for tests: a URL (or a path, on http://localhost) and an init, through `fetch`. */
  request(input: string | URL | Request, init?: RequestInit): Response | Promise<Response>;
  /** The hot-route dispatcher (its `answered` counts), or undefined with `hotRoutes: false`. */
  readonly hotRoutes: HotRoutes | undefined;
  /** Delivery of Subscription notifications: `serve` runs its loop (`start`), tests drive rounds (`runOnce`). */
  readonly subscriptions: SubscriptionDelivery;
  /**
   * Compiles every tenant's active Subscriptions once and writes what that finds (SubscriptionHub.settle): `serve` runs it at
   * start, so that one its topic refuses (or its owner's authority no longer allows) reads `error` at once, not at its tenant's next write.
   */
  settleSubscriptions(): Promise<void>;
  /** `$import` jobs: `serve` runs their loop (`start`, `stop`), tests run them (`runOnce`). */
  readonly imports: ImportRunner;
  /** Bun.serve's `websocket` handlers: the Subscription websocket channel. */
  readonly websocket: WebSocketHandler<SocketData>;
  /** The audit trail with CINDER_AUDIT=on (its queue: `flush`, and `close` at shutdown), else undefined. */
  readonly audit: AuditTrail | undefined;
}

/** The Subscription websocket of a tenant (src/fhir/subscriptions/sockets.ts). */
const WEBSOCKET_PATH = /^\/tenants\/([^/]+)\/fhir\/R4\/websocket$/;

/** A Request from what `request()` takes, as Hono's `app.request()` builds it. */
function toRequest(input: string | URL | Request, init?: RequestInit): Request {
  if (input instanceof Request) return init ? new Request(input, init) : input;
  const url = input.toString();
  return new Request(/^https?:\/\//.test(url) ? url : new URL(url, 'http://localhost'), init);
}

/** Builds the app with no globals: two apps can live in one process. */
export function createApp(deps: AppDeps): App {
  const { config, clock, log } = deps;
  const store = deps.rebuilding ? gatedStore(deps.store, deps.rebuilding) : deps.store;
  const limits = bodyLimits(config);
  const exportSink = deps.exportSink ?? openSink(config.exportStorage, {}, store);
  if (config.exportSignedUrls === 'on' && !exportSink.presign) throw new Error('CINDER_EXPORT_SIGNED_URLS=on needs s3:// export storage');
  const metrics = deps.metrics ?? createMetrics();
  const authDeps = createAuthDeps({ store, keys: deps.keys, clock, config, log, fetch: deps.fetch, resolveHost: deps.resolveHost });
  // AuditEvents are written to the store as it is (deps.store), not behind a reindex's gate.
  const audit = config.audit === 'on'
    ? createAuditTrail({ store: deps.store, clock, log, metrics, verifyAccess: authDeps.verifyAccess, fhirBase: (t) => fhirBaseOf(config.baseUrl, t), trustProxy: config.trustProxy === 'on', flushMs: config.auditFlushMs, maxQueued: config.auditQueueMax })
    : undefined;
  if (audit) authDeps.audit = audit;
  // strict: false, so `[base]/Patient/` is `[base]/Patient` (clients differ on trailing slashes).
  const app = new Hono<AppEnv>({ strict: false });
  const failed = (c: Context<AppEnv>) => ({ method: c.req.method, path: c.req.path, requestId: c.get('requestId') });
  app.onError((err, c) => renderError(err, failed(c), log));
  app.notFound((c) => {
    if (c.req.path.startsWith('/tenants/')) return renderError(new FhirError('not-found', `No route for ${c.req.method} ${c.req.path}`), failed(c), log);
    return c.json({ error: 'not_found' }, 404);
  });
  const recorder = requestRecorder(log, metrics);
  app.use('*', requestContext(recorder));
  app.use('*', headAnswers());
  app.route('/', opsRoutes(store, exportSink, metrics, deps.isDraining ?? (() => false), deps.rebuilding));
  app.route('/', oauthRoutes(authDeps));
  app.route('/', authorizeRoutes(authDeps));

  metrics.gauge('cinder_db_pool', 'Database connections and queues by stat.', () =>
    Object.fromEntries(Object.entries(store.stats()).map(([stat, n]) => [`stat=${stat}`, n])),
  );
  metrics.gauge('cinder_export_jobs', 'Bulk export jobs by state.', async () =>
    Object.fromEntries(Object.entries(await store.exports.jobs.countByState()).map(([state, n]) => [`state=${state}`, n])),
  );
  metrics.gauge('cinder_import_jobs', 'Bulk import ($import) jobs by state.', async () =>
    Object.fromEntries(Object.entries(await store.imports.countByState()).map(([state, n]) => [`state=${state}`, n])),
  );
  const coreBundle = deps.core ?? new CoreBundle();
  const core = new CoreLayer(coreBundle);
  const terminology = createTerminology({ store, clock, core: new CoreTerminology(coreBundle) });
  const contributions: CapabilityContribution[] = [terminologyCapabilities, exportCapability, validateCapability, patientOperationsCapability, metaCapability, lastnCapability, matchCapability, encounterEverythingCapability, documentCapability, statsCapability, namingSystemCapability, snapshotCapability, graphqlCapability, importCapability, subscriptionStatusCapability, convertCapability, diffCapability, ...(config.expunge === 'on' ? [expungeCapability] : [])];
  const fhir = new Hono<AppEnv>();
  const expandCodes = codesExpander(terminology.service);
  // A SMART scope filter with `:in` (or a hierarchy) is completed once per token, as a search's conditions are; in its
  // tenant's regex accounts wherever that happens (a FHIR request, `POST /oauth2/launch`, a Subscription's owner's access rebuilt).
  const completeConditions = (tenant: string, pending: PendingCondition[]) =>
    withRegexAccounts(tenant, () => resolveConditions({ expandCodes, store, fhirBase: (t) => fhirBaseOf(config.baseUrl, t) }, tenant, pending));
  // User records as the FHIR gate and the Subscription hub read them: cached, a change seen within 5 s.
  const { users: user, patientChoices } = authDeps;
  const patientHeld = tokenPatientHeld(patientChoices);
  const admit = fhirAdmission({ store, verify: authDeps.verifyAccess, completeConditions, patientHeld });
  // The format layer outside the gate, so that its refusals are answered in the format asked for too.
  fhir.use(GATE_ROUTE, xmlAnswers());
  // The SubscriptionTopics and profiles `metadata` lists, read from the store as it is (a reindex's gate would refuse the read).
  const topicCanonicals = topicCanonicalReads({ store: deps.store, clock, log });
  const supportedProfiles = supportedProfileReads({ store: deps.store, clock, log });
  const onWrite = (tenant: string) => {
    terminology.markChanged(tenant);
    topicCanonicals.markChanged(tenant);
    supportedProfiles.markChanged(tenant);
  };
  fhir.use(GATE_ROUTE, fhirGate({ store, verify: authDeps.verifyAccess, onWrite }, admit));
  fhir.get('/.well-known/smart-configuration', () => smartConfigurationResponse(config.baseUrl));
  // A token on the public `metadata`, for `mode=terminology` (its tenant's CodeSystems are listed too).
  const metadataBearer = bearerAuthenticator(authDeps.verifyAccess, completeConditions, patientHeld);
  fhir.get('/metadata', async (c) => {
    const fhirBase = fhirBaseOf(config.baseUrl, c.get('tenant'));
    const params = new URL(c.req.url).searchParams;
    // `_summary` and `_elements` as on a read (http.html: `metadata` is read as any resource).
    const shape = instanceShape(params, parsePrefer(c.req.header('prefer')).get('handling') === 'strict');
    if (metadataMode(c.req.query('mode')) === 'terminology') {
      const authorization = c.req.header('authorization');
      const req = authorization === undefined ? undefined : { tenant: c.get('tenant'), access: (await metadataBearer(authorization, c.get('tenant'))).access };
      const statement = await terminologyCapabilitiesJson({
        store, core: coreBundle, fhirBase, now: clock.now(), version: pkg.version, maxExpansionSize: config.maxExpansionSize, ...(req ? { req } : {}),
      });
      return fhirJson(shape ? shape(JSON.stringify(statement)) : statement);
    }
    const subset = shape && { shape, key: JSON.stringify([params.getAll('_summary'), params.getAll('_elements')]) };
    const [subscriptionTopics, profiles] = await Promise.all([topicCanonicals.of(c.get('tenant')), supportedProfiles.of(c.get('tenant'))]);
    return fhirJsonParts(capabilityStatementParts({
      fhirBase, contributions, now: clock.now(), version: pkg.version,
      oauthUris: smartOAuthUris(config.baseUrl), cors: config.corsOrigins !== 'none', websocket: `${fhirBase.replace(/^http/, 'ws')}/websocket`, subscriptionTopics,
      supportedProfiles: profiles,
    }, subset));
  });
  fhir.route('/', exportRoutes({
    store, clock, sink: exportSink, baseUrl: config.baseUrl, maxBodyBytes: limits.resource,
    maxJobsPerClient: config.exportMaxJobsPerClient, signedUrls: config.exportSignedUrls === 'on', expandCodes, settleMs: deps.exportSettleMs ?? SETTLE_MS,
    limits: { kickoff: perMinute(config, clock, config.exportKickoffRateLimit), status: perMinute(config, clock, config.exportStatusRateLimit) },
  }));
  fhir.route('/', importRoutes({
    store, clock, sink: exportSink, baseUrl: config.baseUrl, maxBodyBytes: limits.resource, maxJobsPerClient: config.importMaxJobsPerClient,
    allowPrivate: config.importAllowPrivate === 'true', resolve: deps.resolveHost ?? systemResolve, statusLimit: perMinute(config, clock, config.exportStatusRateLimit),
    kickoffLimit: perMinute(config, clock, config.exportKickoffRateLimit),
  }));
  const terminologyDeps = { terminology, clock, maxBodyBytes: limits.resource, maxExpansionSize: config.maxExpansionSize };
  fhir.route('/', terminologyRoutes(terminologyDeps));
  const referentialIntegrity = config.referentialIntegrity === 'on' ? { fhirBase: (tenant: string) => fhirBaseOf(config.baseUrl, tenant) } : undefined;
  const fhirDeps: FhirDeps = {
    store, clock, expandCodes, validation: config.validation, core, fhirBase: (tenant) => fhirBaseOf(config.baseUrl, tenant),
    profiles: new ProfileValidator(new ProfileRegistry(storeProfiles(store), { valueSets: (tenant) => valueSetSubset(terminology.service, tenant) }), valueSetMembership(terminology.service), clock),
    questionnaires: new QuestionnaireValidator(storeQuestionnaires(store), valueSetMembership(terminology.service)),
    ...(referentialIntegrity ? { referentialIntegrity } : {}), cursors: authDeps.searchCursors,
  };
  // A subscription's owner's access, rebuilt from the scopes recorded at its activation, as a token's is, by today's
  // rules (accessFromScopes), held to what its client still has registered (a refresh is too: stillRegistered), or as recorded.
  const restoreAccess: RestoreAccess = async (tenant, owner, as = 'registered') => {
    const client = as === 'registered' ? await authDeps.clients.get(owner.clientId) : null;
    const access = accessFromScopes(client ? stillRegistered(client, owner.scopes) : owner.scopes, owner.clientId, owner.patient, owner.user);
    if (access.incomplete) await access.complete(tenant, completeConditions);
    return access;
  };
  const allowPrivate = config.subscriptionAllowPrivate === 'true';
  const resolve = deps.resolveHost ? { resolve: deps.resolveHost } : {};
  // Every write reads the tenant's active subscriptions: from the store as it is, not behind a reindex's
  // gate (gatedStore), which would refuse every write while the index is rebuilt.
  // Deletion is soft, so a deleted client is found, disabled; only tokens crafted in tests name no client at all.
  const client = (clientId: string) => authDeps.clients.get(clientId);
  const hub = new SubscriptionHub({ fhir: { ...fhirDeps, store: deps.store }, clock, log, restoreAccess, client, user, clients: (ids) => authDeps.clients.getMany(ids), users: user.many, patientHeld: patientChoices.all, patientKnown: patientChoices.known, allowPrivate, terminologyChanged: (tenant) => terminology.markChanged(tenant), ...resolve });
  fhirDeps.subscriptions = hub;
  // Binding tokens of topic-based websocket Subscriptions: signed with the server's keys, so any process verifies them.
  const wsTokens: WsBindingTokens = {
    sign: (tenant, subscription, owner) => signWsBinding(authDeps, { tenant, subscription, owner }),
    verify: (token) => verifyWsBinding(authDeps, token),
    keyPublished: (kid) => signedByPublishedKey(authDeps, kid),
  };
  const websocketUrl = (tenant: string) => `${fhirBaseOf(config.baseUrl, tenant).replace(/^http/, 'ws')}/websocket`;
  const sockets = new SubscriptionSockets({
    store: deps.store, clock, log, limits: { maxConnections: config.websocketMaxConnections, maxPerClient: config.websocketMaxPerClient },
    topics: new TopicSockets({ store: deps.store, clock, log, tokens: wsTokens, bundles: { fhir: fhirDeps, clock, restoreAccess }, authority: { client, user, patientHeld: patientChoices } }),
    grants: { fhir: fhirDeps, restoreAccess }, authority: { client, user, patientHeld: patientChoices },
  });
  metrics.gauge('cinder_subscription_websockets', 'Subscription websockets open on this process.', () => ({ '': sockets.size }));
  metrics.counter('cinder_subscription_websockets_refused_total', 'Subscription websockets closed at once since the process started, by the limit that refused them (process, client).', () => ({
    'limit=process': sockets.refused.process,
    'limit=client': sockets.refused.client,
  }));
  const subscriptions = new SubscriptionDelivery({
    fhir: fhirDeps, clock, log, allowPrivate, sockets, client, user, clients: (ids) => authDeps.clients.getMany(ids), users: user.many, patientHeld: patientChoices, patientsHeld: patientChoices.all, restoreAccess, maxPending: config.subscriptionMaxPending, ...resolve, ...(deps.fetch ? { fetch: deps.fetch } : {}),
  });
  metrics.counter('cinder_subscription_deliveries_total', 'Subscription notification deliveries of this process since it started, by result.', () =>
    Object.fromEntries(Object.entries(subscriptions.counts).map(([result, n]) => [`result=${result}`, n])),
  );
  // `$import` writes as `cinder import` does (no Subscription notifications, no referential integrity check).
  const imports = createImportRunner({ config, fhir: fhirDeps, store, clock, log, sink: exportSink, client, ...(deps.importStorageWaitMs === undefined ? {} : { storageWaitMs: deps.importStorageWaitMs }), ...(deps.fetch ? { fetch: deps.fetch } : {}), ...(deps.resolveHost ? { resolve: deps.resolveHost } : {}) });
  metrics.gauge('cinder_subscription_notifications_waiting', 'Subscription notifications recorded and not yet delivered.', async () => ({ '': await store.subscriptions.waiting() }));
  // `$graphql` before the resource routes, which would take `/$graphql` for a type.
  fhir.route('/', graphqlRoutes({ fhir: fhirDeps, maxBodyBytes: limits.resource }));
  // A batch entry's operation is answered as a request of its own (`fetch`, below: every route and check).
  fhir.route('/', fhirRoutes({
    ...fhirDeps, baseUrl: config.baseUrl, limits, expunge: config.expunge === 'on', dispatch: (req) => Promise.resolve(fetch(req)), wsBinding: { tokens: wsTokens, readsNotImplied, url: websocketUrl },
  }));
  // OPTIONS that is no CORS preflight: the methods the path's routes take (src/http/options.ts), behind the gate.
  fhir.options('*', optionsRoute(fhir));
  app.route(FHIR_BASE_ROUTE, fhir);
  // The EHR launch reads the Patient and Encounter as the FHIR API does, so it is mounted beside it.
  app.route('/', launchRoutes(authDeps, fhirDeps, completeConditions));

  const cors = createCors(config.corsOrigins);
  const hot = deps.hotRoutes === false
    ? undefined
    : hotRoutes({ admit, recorder, log, fhir: fhirDeps, validateCode: valueSetValidateCode(terminologyDeps), token: tokenRoute(authDeps), cors });
  // The Subscription websocket (`{fhir_base}/websocket`), before any route: its handshake carries no token.
  const upgrade = (req: Request, server: unknown): boolean => {
    if (req.headers.get('upgrade')?.toLowerCase() !== 'websocket') return false;
    const tenant = WEBSOCKET_PATH.exec(new URL(req.url).pathname)?.[1];
    // A tenant in the path that is no tenant id (`%`-escapes included) is left to the routes, which refuse it.
    return tenant !== undefined && TENANT_ID.test(tenant) && sockets.upgrade(req, server, tenant, requestIp(req, server, config.trustProxy === 'on'));
  };
  // CORS wraps Hono, so its routes and every error answer the same way; the hot routes (never a
  // preflight) add the same headers themselves.
  const answer = (req: Request, server?: unknown) => {
    // The authorize endpoint answers it itself, as its other malformed requests: a page or a redirect, not JSON, to a browser.
    if (req.url.includes('%00') && new URL(req.url).pathname !== AUTHORIZE_PATH) return cors.handle(req, () => refusedNul(req));
    return hot?.(req, server) ?? cors.handle(req, () => viaHono(req, server));
  };
  // Every FHIR interaction, a batch's entries included (they are dispatched through `fetch`), is audited.
  const fetch = audit ? audit.wrap(answer) : answer;
  /**
   * Hono's answer, labelled with the JSON media type the client asked for (labelledAsAsked) and compressed
   * as it accepts (src/http/content-coding.ts; HEAD answers describe it in headAnswers).
   */
  const viaHono = (req: Request, server?: unknown): Response | Promise<Response> => {
    const res = app.fetch(req, server);
    const answer = (r: Response) => (req.method === 'HEAD' ? labelledAsAsked(req, r) : encode(req, labelledAsAsked(req, r)));
    return res instanceof Promise ? res.then(answer) : answer(res);
  };
  /** A URL holding `%00` (nulInUrl), answered before any route, with a request id and recorded as every answer is. */
  const refusedNul = async (req: Request): Promise<Response> => {
    const started = performance.now();
    const requestId = requestIdOf(req.headers.get('x-request-id'));
    const url = new URL(req.url);
    let res = withRequestId(nulInUrl(req.method, url, log, requestId), requestId);
    if (req.method === 'HEAD') res = new Response(null, await asHead(res));
    recorder.record(req.method, url.pathname, 'unmatched', res.status, requestId, started);
    return res;
  };
  // Each tenant judged whatever another's judgement did (its failure logged): one tenant's fault leaves no other's
  // Subscriptions unjudged until its next write.
  const settleSubscriptions = async () => {
    for (const tenant of await deps.store.tenants.list()) {
      await hub.settle(tenant.id).catch((err: unknown) => log.warn('judging a tenant\'s active subscriptions at start failed', { tenant: tenant.id, err }));
    }
  };
  return { fetch, upgrade, request: (input, init) => fetch(toRequest(input, init)), hotRoutes: hot, subscriptions, imports, websocket: sockets.handler, audit, settleSubscriptions };
}
