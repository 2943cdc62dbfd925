/**
 * The audit trail (CINDER_AUDIT=on): every FHIR REST interaction of a tenant, and the OAuth sign-in and
 * token events, become AuditEvents in that tenant (src/audit/event.ts, IHE BALP).
 *
 * Cost: the request path only notes what it needs (method, path, status, a few response headers, the
 * token as already verified) in a bounded in-memory queue; everything else (the requestor, the version
 * and patient compartment of what was touched, the AuditEvent itself) is worked out when the queue is
 * flushed, every FLUSH_MS or every BATCH events, and written per tenant in one transaction through the
 * store's bulk insert (ResourceWriter.insertNew), as the importer writes. A full queue drops the new
 * event (counted in /metrics, logged at most every ten seconds) rather than slow or fail the request;
 * a failed write is logged and counted, never the client's error. `close()` flushes what is queued
 * (`serve`'s drain on SIGTERM). AuditEvents are written by the store, not through the API, so writing
 * them is not audited; reading them through the API is.
 */
import type { Clock } from '../clock.ts';
import { parseFhirXmlPaced } from '../fhir/xml/from-xml-paced.ts';
import { parseJsonPaced } from '../fhir/json-paced.ts';
import { pacedTurns } from '../fhir/turns.ts';
import { background, type Logger } from '../log.ts';
import type { Metrics } from '../http/metrics.ts';
import { VREAD_MANY_MAX, type ResourceVersion, type Store } from '../store/types.ts';
import type { TokenVerifier, VerifiedToken } from '../auth/tokens.ts';
import type { Json } from '../fhir/fhirpath.ts';
import type { Resource } from '../fhir/resource.ts';
import { newId } from '../fhir/resource.ts';
import { prepareVersion, versionToWrite, type PreparedVersion } from '../fhir/prepared.ts';
import { compartmentsOf } from '../fhir/indexer.ts';
import { pathStart } from '../http/url-path.ts';
import { readBytesLimited } from '../http/body.ts';
import { decodeUtf8 } from '../fhir/utf8.ts';
import { requestIp } from '../http/client-ip.ts';
import { classify, type Classified } from './classify.ts';
import { authAuditEvent, restAuditEvent, type AuthEvent, type Requestor, type Touched } from './event.ts';
import { atWriteTime } from '../store/write-times.ts';

/** Flush at least this often (ms; CINDER_AUDIT_FLUSH_MS), or as soon as BATCH events wait. */
export const FLUSH_MS = 1000;
export const BATCH = 500;
/** The queue's bound (CINDER_AUDIT_QUEUE_MAX): beyond it new events are dropped (and counted). */
export const MAX_QUEUED = 20_000;
/**
 * A transaction or batch Bundle up to this size (Content-Length) is kept until the flush, so that each of
 * its entries is audited as its own interaction; a larger one is audited as one event naming what it wrote.
 */
export const ENTRY_BUNDLE_CHARS = 4 << 20;
/**
 * Bundle text the queue may hold at once: requests (by Content-Length; a chunked one counted as
 * ENTRY_BUNDLE_CHARS) and responses (by their text, once read). Beyond, a request Bundle is audited as one
 * event without its entries, and a response is reduced at once to what its events need (ResponseDigest,
 * counted too) and the queue flushed without waiting for the timer.
 */
export const MAX_BUNDLE_CHARS_QUEUED = 32 << 20;
/** What a kept digest's entry is counted as beyond its strings (the objects holding them). */
const DIGEST_ENTRY_CHARS = 64;

export interface AuditTrailDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  verifyAccess: TokenVerifier;
  fhirBase(tenant: string): string;
  trustProxy: boolean;
  /** The queue's figures (CINDER_AUDIT_FLUSH_MS, CINDER_AUDIT_QUEUE_MAX); FLUSH_MS and MAX_QUEUED by default. */
  flushMs?: number;
  maxQueued?: number;
}

type Handler = (req: Request, server?: unknown) => Response | Promise<Response>;

interface PendingRest {
  kind: 'rest';
  c: Classified;
  method: string;
  path: string;
  recorded: number;
  status: number;
  token: VerifiedToken | string | undefined;
  address: string;
  requestId: string | undefined;
  location: string | null;
  etag: string | null;
  /** A POST `_search`'s form, its bytes as sent (decoded from any Content-Encoding). */
  body: Promise<Uint8Array> | undefined;
  /** A successful transaction/batch's response, kept as text or as its digest (counted against MAX_BUNDLE_CHARS_QUEUED as it is kept). */
  response?: Promise<KeptResponse | undefined>;
  /** A transaction/batch request's Bundle text (when small enough to audit its entries). */
  requestBundle?: Promise<string>;
  /** What its request Bundle counts against MAX_BUNDLE_CHARS_QUEUED until written. */
  held?: Held;
}

/**
 * A request Bundle's share of MAX_BUNDLE_CHARS_QUEUED: what it was counted as when kept (its Content-Length, or
 * ENTRY_BUNDLE_CHARS when it has none or is coded), then what it was read as; nothing once released.
 */
interface Held {
  chars: number;
  released: boolean;
}

/** An entry of a transaction/batch response, as far as the audit reads it. */
interface DigestEntry {
  status?: unknown;
  location?: unknown;
  etag?: unknown;
  /** The resource the entry answered with (a read's or vread's), not a Bundle: its type, id and version. */
  resource?: Touched;
}

/** A transaction/batch response reduced to what its AuditEvents need: its type and each entry's response. */
interface ResponseDigest {
  type: unknown;
  entries: (DigestEntry | undefined)[];
}

/** A response as the queue keeps it, and what it counts against MAX_BUNDLE_CHARS_QUEUED. */
type KeptResponse = { chars: number; text: string } | { chars: number; digest: ResponseDigest };

interface PendingAuth {
  kind: 'auth';
  tenant: string;
  event: AuthEvent;
}

type Pending = PendingRest | PendingAuth;

/** The auth server's side of the trail (AuthDeps.audit). */
export interface AuthAudit {
  record(tenant: string, event: Omit<AuthEvent, 'recorded' | 'server'>): void;
}

export interface AuditTrail extends AuthAudit {
  /** `handler` with every FHIR interaction it answers audited. */
  wrap(handler: Handler): Handler;
  /** Writes every queued event (and waits for a flush under way). */
  flush(): Promise<void>;
  /** Stops the timer and flushes. */
  close(): Promise<void>;
  readonly counts: Readonly<Record<'written' | 'dropped' | 'failed', number>>;
}

const BEARER = /^Bearer +(\S+)$/i;
const VERSIONED = /\/([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})\/_history\/(\d+)/;
const ETAG = /^W\/"(\d+)"$/;

export function createAuditTrail(d: AuditTrailDeps): AuditTrail {
  const flushMs = d.flushMs ?? FLUSH_MS;
  const maxQueued = d.maxQueued ?? MAX_QUEUED;
  let queue: Pending[] = [];
  let flushing: Promise<void> | undefined;
  let lastDropLog = -Infinity;
  let bundleChars = 0;
  const counts = { written: 0, dropped: 0, failed: 0 };
  const knownTenants = new Set<string>();
  d.metrics.counter('cinder_audit_events_total', 'AuditEvents of this process since it started, by result (written, dropped: the queue was full, failed: the write failed).', () =>
    Object.fromEntries(Object.entries(counts).map(([result, n]) => [`result=${result}`, n])),
  );
  d.metrics.gauge('cinder_audit_queue', 'AuditEvents waiting to be written.', () => ({ '': queue.length }));
  const timer = setInterval(() => background(d.log, 'audit: flushing AuditEvents failed', flush()), flushMs);
  timer.unref?.();

  function push(p: Pending): void {
    if (queue.length >= maxQueued) {
      if (p.kind === 'rest') unhold(p.held);
      if (p.kind === 'rest') p.response?.then((kept) => release(kept), () => undefined);
      counts.dropped++;
      const now = performance.now();
      if (now - lastDropLog > 10_000) {
        lastDropLog = now;
        d.log.warn('audit queue full: AuditEvents dropped', { queued: queue.length, dropped: counts.dropped });
      }
      return;
    }
    queue.push(p);
    if (queue.length >= BATCH && !flushing) background(d.log, 'audit: flushing AuditEvents failed', flush());
  }

  function release(kept: KeptResponse | undefined): void {
    if (kept) bundleChars -= kept.chars;
  }

  /** Counts `chars` of a request Bundle kept against MAX_BUNDLE_CHARS_QUEUED. */
  function hold(chars: number): Held {
    bundleChars += chars;
    return { chars, released: false };
  }

  /**
   * Counts a kept request Bundle as what it was read as (its text's length; 0 when it could not be read), no
   * longer as what it was counted as before: a chunked one counted as ENTRY_BUNDLE_CHARS until the flush held
   * that much of the bound whatever its size, so that eight small ones kept the next Bundles' entries unaudited.
   */
  function settle(h: Held, chars: number): void {
    if (h.released) return;
    bundleChars += chars - h.chars;
    h.chars = chars;
  }

  function unhold(h: Held | undefined): void {
    if (!h || h.released) return;
    h.released = true;
    bundleChars -= h.chars;
  }

  /** Flushes now, without waiting for the timer (the Bundles kept are at their bound). */
  function flushSoon(): void {
    if (!flushing) background(d.log, 'audit: flushing AuditEvents failed', flush());
  }

  /**
   * A transaction's or batch's response as the queue keeps it: its text while the Bundles kept stay within
   * MAX_BUNDLE_CHARS_QUEUED, else at once its digest (the text dropped: a response of 90,000 entries is tens of
   * megabytes, and concurrent ones would each be held until the flush) and the queue flushed early.
   */
  async function keepResponse(text: Promise<string> | undefined): Promise<KeptResponse | undefined> {
    const body = await text?.catch(() => undefined);
    if (body === undefined) return undefined;
    if (bundleChars + body.length <= MAX_BUNDLE_CHARS_QUEUED) {
      bundleChars += body.length;
      return { chars: body.length, text: body };
    }
    flushSoon();
    const bundle = await bundleOf(body);
    if (!bundle) return undefined;
    const digest = digestOf(bundle);
    const chars = digestChars(digest);
    bundleChars += chars;
    if (bundleChars > MAX_BUNDLE_CHARS_QUEUED) flushSoon();
    return { chars, digest };
  }

  /** The token as the FHIR gate verified it (a cached token at once), or its text to verify when flushing. */
  function tokenNow(authorization: string | null): VerifiedToken | string | undefined {
    const raw = authorization ? BEARER.exec(authorization)?.[1] : undefined;
    if (raw === undefined) return undefined;
    try {
      const v = d.verifyAccess(raw);
      if (!(v instanceof Promise)) return v;
      v.catch(() => undefined);
    } catch {
      return undefined;
    }
    return raw;
  }

  function wrap(handler: Handler): Handler {
    return (req, server) => {
      const url = req.url;
      const start = pathStart(url);
      if (start < 0) return handler(req, server);
      const q = url.indexOf('?', start);
      const path = q < 0 ? url.slice(start) : url.slice(start, q);
      const c = classify(req.method, path, q < 0 ? '' : url.slice(q + 1));
      if (!c) return handler(req, server);
      const recorded = d.clock.now();
      // A POST `_search`'s form, or a transaction/batch Bundle up to ENTRY_BUNDLE_CHARS (its entries are audited each);
      // never a POSTed operation's body, the resources it was sent (`$convert`, `$validate`), whatever its query string.
      // A body without a Content-Length (chunked), or sent in a Content-Encoding (whose Content-Length is the coded size), is
      // counted as ENTRY_BUNDLE_CHARS and read, decoded as the request's handler reads it, up to that much: whole, a chunked
      // one held more than it was counted as, and a coded one's bytes were no Bundle (its entries went unaudited). Its bytes
      // are kept, and its text decoded from them as strictly as the handler decodes it: a form that is not UTF-8 (refused)
      // is recorded as the bytes sent, never as text with U+FFFD in their place (a sized one was) nor left out (a chunked one was).
      const declared = req.headers.get('content-length');
      const unsized = declared === null || req.headers.has('content-encoding');
      const length = unsized ? ENTRY_BUNDLE_CHARS : Number(declared);
      const bundle = c.interaction === 'transaction' && length <= ENTRY_BUNDLE_CHARS && bundleChars + length <= MAX_BUNDLE_CHARS_QUEUED;
      const held = bundle ? hold(length) : undefined;
      const kept = (c.isQuery && req.method === 'POST' && c.interaction !== 'operation') || bundle;
      const sent = !kept ? undefined : unsized ? readBytesLimited(req.clone(), ENTRY_BUNDLE_CHARS) : req.clone().bytes();
      sent?.catch(() => undefined);
      const form = held ? sent!.then(decodeUtf8) : undefined;
      if (held) form!.then((text) => settle(held, text.length), () => settle(held, 0));
      const token = tokenNow(req.headers.get('authorization'));
      const address = requestIp(req, server, d.trustProxy);
      const note = (res: Response): Response => {
        const transaction = c.interaction === 'transaction' && res.status < 400;
        const body = transaction ? undefined : sent;
        const response = transaction ? keepResponse(responseText(res)) : undefined;
        push({
          kind: 'rest', c, method: req.method, path, recorded, status: res.status, token, address, ...(held && form ? { requestBundle: form, held } : {}),
          requestId: res.headers.get('x-request-id') ?? undefined,
          location: res.headers.get('location') ?? res.headers.get('content-location'), etag: res.headers.get('etag'), body, ...(response ? { response } : {}),
        });
        return res;
      };
      const failed = (err: unknown): never => {
        unhold(held);
        throw err;
      };
      let res: Response | Promise<Response>;
      try {
        res = handler(req, server);
      } catch (err) {
        return failed(err);
      }
      return res instanceof Promise ? res.then(note, failed) : note(res);
    };
  }

  async function flush(): Promise<void> {
    while (flushing) await flushing;
    if (!queue.length) return;
    flushing = (async () => {
      while (queue.length) await writeBatch(queue.splice(0, BATCH));
    })();
    try {
      await flushing;
    } finally {
      flushing = undefined;
    }
  }

  async function writeBatch(batch: Pending[]): Promise<void> {
    const byTenant = new Map<string, Resource[]>();
    // A transaction of 20,000 entries makes as many AuditEvents, and the awaits between them are microtasks that let no
    // other request run: its events are made and prepared with turns of the event loop (they held it 4.8 s).
    const pace = pacedTurns();
    for (const p of batch) {
      if (p.kind === 'rest') unhold(p.held);
      let made: Resource[];
      try {
        made = p.kind === 'auth' ? [authResource(p)] : await restEvents(p, pace);
      } catch (err) {
        counts.failed++;
        d.log.error('audit: building an AuditEvent failed', { err });
        continue;
      }
      const tenant = p.kind === 'auth' ? p.tenant : p.c.tenant;
      const list = byTenant.get(tenant) ?? [];
      list.push(...made);
      byTenant.set(tenant, list);
    }
    for (const [tenant, resources] of byTenant) {
      try {
        if (!knownTenants.has(tenant)) {
          if (!(await d.store.tenants.get(tenant))) continue; // a request to no tenant: nowhere to record it
          knownTenants.add(tenant);
        }
        // Prepared (indexed, stringified) before a write time is taken, which holds the safe time until the commit.
        const prepared: PreparedVersion[] = [];
        for (const r of resources) {
          prepared.push(prepareVersion(r, newId(), d.fhirBase(tenant)));
          await pace();
        }
        const written = await atWriteTime(d.store, d.clock, (now) => {
          const versions = prepared.map((v) => versionToWrite(v, 1, now, 'POST'));
          return d.store.resources.write(tenant, (w) => w.insertNew(versions)).then(() => versions.length);
        });
        counts.written += written;
      } catch (err) {
        counts.failed += resources.length;
        d.log.error('audit: writing AuditEvents failed', { tenant, events: resources.length, err });
      }
    }
  }

  function authResource(p: PendingAuth): Resource {
    return authAuditEvent(p.event) as Resource;
  }

  /**
   * Who made a request of `tenant`: the token's client, user and patient in context; a token of another tenant
   * (refused with 403) is treated as one that does not verify, so that nothing of that tenant's (its client, its
   * user, its patient, whose id would name this tenant's Patient of that id) is written into this one's trail.
   */
  async function requestorOf(tenant: string, token: VerifiedToken | string | undefined, address: string): Promise<{ requestor: Requestor; patient?: string }> {
    let v: VerifiedToken | undefined;
    if (typeof token === 'string') {
      try {
        v = await d.verifyAccess(token);
      } catch {
        v = undefined;
      }
    } else v = token;
    if (!v || v.tenant !== tenant) return { requestor: { address } };
    const requestor: Requestor = { clientId: v.client_id, address };
    if (v.fhirUser) requestor.fhirUser = v.fhirUser;
    if (v.sub !== v.client_id) requestor.user = v.sub;
    return { requestor, ...(v.patient ? { patient: v.patient } : {}) };
  }

  /**
   * The AuditEvent of a request; for a transaction or batch, also one per entry (an operation entry was a request of its
   * own), `pace` letting the event loop turn between them. Its response Bundle is read once, for both.
   */
  async function restEvents(p: PendingRest, pace: () => Promise<void> | undefined): Promise<Resource[]> {
    const transaction = p.c.interaction === 'transaction';
    const kept = transaction && p.response ? await p.response.catch(() => undefined) : undefined;
    let response: ResponseDigest | undefined;
    try {
      // Read once, for the transaction's event and its entries'; the text is dropped once read.
      response = !kept ? undefined : 'digest' in kept ? kept.digest : await bundleOf(kept.text).then((b) => (b ? digestOf(b) : undefined));
    } finally {
      release(kept);
    }
    const request = transaction && response && p.requestBundle ? await p.requestBundle.then(bundleOf, () => undefined) : undefined;
    const out = [await restResource(p, response, request !== undefined, pace)];
    if (!transaction || p.status >= 400 || !p.requestBundle || !response) return out;
    const requests = (request?.entry as Json[] | undefined) ?? [];
    const responses = response.entries;
    for (const [i, entry] of requests.entries()) {
      const r = entry?.request as Json | undefined;
      const answer = responses[i];
      if (typeof r?.method !== 'string' || typeof r.url !== 'string' || !answer) continue;
      const [path = '', search = ''] = r.url.replace(/^\//, '').split('?', 2) as [string?, string?];
      const c = classify(r.method, `/tenants/${p.c.tenant}/fhir/R4/${path}`, search);
      if (!c || c.interaction === 'operation' || c.interaction === 'transaction') continue;
      const status = Number.parseInt(String(answer.status ?? ''), 10) || 200;
      out.push(await restResource({
        ...p, c, method: r.method, path: `/tenants/${p.c.tenant}/fhir/R4/${path}`, status,
        location: typeof answer.location === 'string' ? `/${answer.location}` : null, etag: typeof answer.etag === 'string' ? answer.etag : null, body: undefined, requestBundle: undefined, response: undefined,
      }));
      await pace();
    }
    return out;
  }

  /**
   * The AuditEvent of one request; `response`, a transaction's or batch's, its response Bundle as restEvents read it, and
   * `entriesAudited`, whether its request Bundle was kept and read, so that each entry is audited as its own request.
   */
  async function restResource(p: PendingRest, response?: ResponseDigest, entriesAudited = false, pace?: () => Promise<void> | undefined): Promise<Resource> {
    const { c } = p;
    const tenant = c.tenant;
    const base = d.fhirBase(tenant);
    const { requestor, patient } = await requestorOf(tenant, p.token, p.address);
    const patients = new Set<string>();
    if (c.pathPatient) patients.add(c.pathPatient);
    if (patient) patients.add(patient);
    let interaction = c.interaction;
    let touched: Touched[] = [];
    const ok = p.status < 400;
    if (c.interaction === 'transaction') {
      const bundle = ok ? response : undefined;
      if (bundle?.type === 'batch-response') {
        interaction = 'batch'; // its entries are audited each as its own request
        // Unless its request Bundle was not kept (over ENTRY_BUNDLE_CHARS, or the queue's Bundles at their bound) or not read:
        // then its own event names what its entries read and wrote, which no other event would (a batch padded past the bound read unaudited).
        if (!entriesAudited) touched = bundleTouched(bundle, true);
      } else if (bundle) touched = bundleTouched(bundle);
    } else {
      const fromHeaders = ok ? headerVersion(p) : undefined;
      if (c.target) touched = [{ ...c.target, ...(fromHeaders && fromHeaders.type === c.target.type && fromHeaders.id === c.target.id ? { versionId: fromHeaders.versionId } : {}) }];
      else if (fromHeaders && (c.interaction === 'create' || c.interaction === 'update' || c.interaction === 'patch' || c.interaction === 'delete')) touched = [fromHeaders];
    }
    if (ok) for (const id of await touchedPatients(tenant, base, touched, c.interaction, pace)) patients.add(id);
    const sent = c.isQuery && p.method === 'POST' && p.body ? await p.body.catch(() => undefined) : undefined;
    const form = formOf(sent);
    // A POST `_search` names its parameters in the form as a GET does in its query: the patients it names are found in both
    // (in a form that is not UTF-8, its bad bytes read as U+FFFD, which no id holds).
    if (c.isQuery) for (const id of queryPatients(c, base, typeof form === 'string' ? form : lenientUtf8.decode(form))) patients.add(id);
    const head = c.isQuery ? `${p.method} ${p.path}${c.search ? `?${c.search}` : ''}` : undefined;
    const query = head === undefined ? undefined : typeof form !== 'string' ? new Uint8Array(Buffer.concat([Buffer.from(`${head}\n\n`), form])) : form ? `${head}\n\n${form}` : head;
    const resource = restAuditEvent({
      interaction, ...(c.operation ? { operation: c.operation } : {}), status: p.status, recorded: new Date(p.recorded).toISOString(),
      requestor, server: base, touched, patients: [...patients], ...(query !== undefined ? { query } : {}), ...(p.requestId ? { requestId: p.requestId } : {}),
    });
    return resource as Resource;
  }

  /**
   * The patients whose compartment holds what was touched: the version read or written, or a deleted resource's last
   * one, for every instance touched (a batch of 90,000 reads names each one's patient), in the order touched. Versions
   * are read VREAD_MANY_MAX at a time per type (ResourceRepo.vreadMany, one statement each), `pace` letting the event
   * loop turn between them.
   */
  async function touchedPatients(tenant: string, base: string, touched: Touched[], interaction: string, pace?: () => Promise<void> | undefined): Promise<string[]> {
    const key = (type: string, id: string, versionId: number) => `${type}/${id}/${versionId}`;
    // Each version read, as its patients alone (its content dropped at once: a large batch's would be held together).
    type Seen = { deleted: boolean; versionId: number; patients: string[] };
    const seen = (v: ResourceVersion): Seen => ({
      deleted: v.deleted, versionId: v.versionId, patients: !v.deleted && v.content ? compartmentsOf(JSON.parse(v.content) as Json, base) : [],
    });
    const found = new Map<string, Seen | null>();
    /** Reads each of `wanted` (versions of their type) not read yet, in chunks. */
    const readAll = async (wanted: { type: string; id: string; versionId: number }[]) => {
      const byType = new Map<string, { id: string; versionId: number }[]>();
      for (const w of wanted) {
        const k = key(w.type, w.id, w.versionId);
        if (found.has(k)) continue;
        found.set(k, null);
        const list = byType.get(w.type) ?? [];
        list.push({ id: w.id, versionId: w.versionId });
        byType.set(w.type, list);
      }
      for (const [type, list] of byType) {
        for (let i = 0; i < list.length; i += VREAD_MANY_MAX) {
          for (const v of await d.store.resources.vreadMany(tenant, type, list.slice(i, i + VREAD_MANY_MAX))) found.set(key(type, v.id, v.versionId), seen(v));
          await pace?.();
        }
      }
    };
    /** A live current version's patients from its compartment rows, its text unread; undefined when it changed meanwhile. */
    const indexed = async (t: Touched, versionId: number): Promise<Seen | undefined> => {
      const holders = (await d.store.resources.compartmentPatients(tenant, t.type, [t.id])).map((r) => r.patient);
      const again = await d.store.resources.measured(tenant, t.type, t.id);
      return again && !again.deleted && again.versionId === versionId ? { deleted: false, versionId, patients: holders } : undefined;
    };
    // The current version of what names none (a read's target), and of a request's one resource the version it names when
    // that is current, measured: a large one (MEASURED_TEXT_BYTES) judged by its compartment rows (the index holds the
    // current version's), not read and parsed again. The versions named of the rest, read by the lot.
    const versionOf = new Map<Touched, number>();
    for (const t of touched) {
      if (t.type === 'Patient' || (t.versionId && touched.length > 1)) continue;
      const m = await d.store.resources.measured(tenant, t.type, t.id);
      if (!m) continue;
      if (!t.versionId) versionOf.set(t, m.versionId);
      if (t.versionId && t.versionId !== m.versionId) continue;
      const v = m.content !== undefined ? seen({ ...m, type: t.type, id: t.id, content: m.content }) : m.deleted ? undefined : await indexed(t, m.versionId);
      if (v) found.set(key(t.type, t.id, m.versionId), v);
    }
    const wanted = (t: Touched) => t.type !== 'Patient' && (t.versionId ?? versionOf.get(t)) !== undefined;
    const at = (t: Touched) => (t.versionId ?? versionOf.get(t))!;
    await readAll(touched.filter(wanted).map((t) => ({ type: t.type, id: t.id, versionId: at(t) })));
    // A deletion (but by a read, which saw it gone): the version before it.
    const before = (t: Touched) => {
      const v = found.get(key(t.type, t.id, at(t)));
      return v?.deleted && interaction !== 'read' && v.versionId > 1 ? v.versionId - 1 : undefined;
    };
    await readAll(touched.filter(wanted).flatMap((t) => {
      const b = before(t);
      return b === undefined ? [] : [{ type: t.type, id: t.id, versionId: b }];
    }));
    const out: string[] = [];
    for (const t of touched) {
      if (t.type === 'Patient') {
        out.push(t.id);
        continue;
      }
      if (!wanted(t)) continue;
      const b = before(t);
      const v = found.get(key(t.type, t.id, b ?? at(t)));
      if (v) out.push(...v.patients);
    }
    return out;
  }

  return {
    wrap, flush, counts,
    record(tenant, event) {
      push({ kind: 'auth', tenant, event: { ...event, recorded: new Date(d.clock.now()).toISOString(), server: d.fhirBase(tenant) } });
    },
    async close() {
      clearInterval(timer);
      await flush();
    },
  };
}

/** `Type/id` and version from a write's Location (or Content-Location), else the instance's ETag. */
function headerVersion(p: PendingRest): Touched | undefined {
  const m = p.location ? VERSIONED.exec(p.location) : null;
  if (m) return { type: m[1]!, id: m[2]!, versionId: Number(m[3]) };
  const e = p.etag ? ETAG.exec(p.etag) : null;
  if (e && p.c.target) return { ...p.c.target, versionId: Number(e[1]) };
  return undefined;
}

/** What a transaction's entries wrote or read: their `response.location` (with version). */
function bundleTouched(bundle: ResponseDigest, reads = false): Touched[] {
  const out: Touched[] = [];
  for (const entry of bundle.entries) {
    const location = entry?.location;
    const m = typeof location === 'string' ? VERSIONED.exec(`/${location}`) : null;
    if (m) out.push({ type: m[1]!, id: m[2]!, versionId: Number(m[3]) });
    // `reads`: also the version an entry answered with (a read or vread), as a read's ETag names it; not a search's Bundle,
    // nor what an operation answered without naming a version of its own (`$convert` echoes the resource it was sent, whose
    // meta may name any stored version, and so any patient, as read).
    else if (reads && entry?.resource && entry.etag === `W/"${entry.resource.versionId}"`) out.push(entry.resource);
  }
  return out;
}

/** What the audit reads of a response Bundle: its type, and each entry's status, location, ETag and the resource it answered with. */
function digestOf(bundle: Json): ResponseDigest {
  const entries = Array.isArray(bundle.entry) ? (bundle.entry as (Json | undefined)[]) : [];
  return {
    type: bundle.type,
    entries: entries.map((entry) => {
      const answer = entry?.response as Json | undefined;
      if (!answer || typeof answer !== 'object') return undefined;
      const out: DigestEntry = { status: answer.status, location: answer.location, etag: answer.etag };
      const r = entry?.resource as Json | undefined;
      const version = Number((r?.meta as Json | undefined)?.versionId);
      if (typeof r?.resourceType === 'string' && r.resourceType !== 'Bundle' && typeof r.id === 'string' && Number.isInteger(version) && version > 0) {
        out.resource = { type: r.resourceType, id: r.id, versionId: version };
      }
      return out;
    }),
  };
}

/** What a digest counts against MAX_BUNDLE_CHARS_QUEUED: its strings, and each entry's objects. */
function digestChars(digest: ResponseDigest): number {
  const len = (v: unknown) => (typeof v === 'string' ? v.length : 0);
  let n = 0;
  for (const e of digest.entries) {
    n += DIGEST_ENTRY_CHARS;
    if (e) n += len(e.status) + len(e.location) + len(e.etag) + (e.resource ? DIGEST_ENTRY_CHARS + e.resource.type.length + e.resource.id.length : 0);
  }
  return n;
}

/** Text with U+FFFD for what is not UTF-8: only to find the patients a refused form names. */
const lenientUtf8 = new TextDecoder();

/**
 * A POST `_search`'s form as its AuditEvent records it: its text (UTF-8, as its handler read it), or, when its bytes are
 * not UTF-8 (the search was refused for them), those bytes as sent.
 */
function formOf(bytes: Uint8Array | undefined): string | Uint8Array {
  if (bytes === undefined) return '';
  try {
    return decodeUtf8(bytes);
  } catch {
    return bytes;
  }
}

/** Patients a search names (in its query, or the form of a POST `_search`): `patient`, `subject` (to a Patient), and `_id` of a Patient search. */
function queryPatients(c: Classified, base: string, form = ''): string[] {
  const out: string[] = [];
  const params = [...new URLSearchParams(c.search), ...new URLSearchParams(form)];
  for (const [name, value] of params) {
    const [param, modifier] = name.split(':');
    const bare = param === 'patient' || (param === 'subject' && modifier === 'Patient') || (param === '_id' && c.type === 'Patient');
    if (!bare && param !== 'subject') continue;
    for (const raw of value.split(',')) {
      const v = raw.startsWith(`${base}/`) ? raw.slice(base.length + 1) : raw;
      const m = /^Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(v);
      if (m) out.push(m[1]!);
      else if (bare && /^[A-Za-z0-9\-.]{1,64}$/.test(v)) out.push(v);
    }
  }
  return out;
}

/**
 * A transaction's request or response Bundle from its text, FHIR JSON or FHIR XML (src/http/xml-format.ts),
 * read in slices that let the event loop turn, as the request's body was (a response of 90,000 entries is
 * tens of megabytes); undefined when it is neither.
 */
async function bundleOf(text: string): Promise<Json | undefined> {
  try {
    // Not bounded as a request body is (plain): a batch-response holding a resource read back nests deeper than a request body may.
    return (await (text.trimStart().startsWith('<') ? parseFhirXmlPaced(text, { plain: true }) : parseJsonPaced(text, { plain: true }))) as Json;
  } catch {
    return undefined;
  }
}

/** The content codings a response is read in (RFC 9110 8.4.1), as DecompressionStream names them. */
const RESPONSE_DECODERS: Readonly<Record<string, string>> = { gzip: 'gzip', 'x-gzip': 'gzip', deflate: 'deflate', br: 'brotli' };

/**
 * The text of a response, read from a clone off the request path, decoded from its content codings (gzip,
 * deflate, Brotli; a list of them undone last first, RFC 9110 8.4); undefined for another coding.
 */
function responseText(res: Response): Promise<string> | undefined {
  if (!res.body) return undefined;
  const header = res.headers.get('content-encoding') ?? '';
  const codings = header.split(',').map((c) => c.trim().toLowerCase()).filter((c) => c !== '' && c !== 'identity');
  if (codings.length > 2 || codings.some((c) => RESPONSE_DECODERS[c] === undefined)) return undefined;
  let body = res.clone().body!;
  for (const coding of codings.reverse()) body = body.pipeThrough(new DecompressionStream(RESPONSE_DECODERS[coding] as CompressionFormat));
  const text = new Response(body).text();
  text.catch(() => undefined);
  return text;
}
