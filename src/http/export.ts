import { Hono, type Context } from 'hono';
import { refusesHead } from './options.ts';
import { FhirError } from '../errors.ts';
import { openDownload } from '../export/download.ts';
import { kickOff, type KickoffDeps } from '../export/kickoff.ts';
import { inputFromPost, inputFromQuery } from '../export/kickoff-input.ts';
import type { ExportLevel } from '../export/spec.ts';
import { cancelExport, exportStatus, type StatusDeps, type StatusRequest } from '../export/status.ts';
import { issue, operationOutcome } from '../fhir/outcome.ts';
import { readOptionalFhirBody } from './body.ts';
import type { AppEnv } from './env.ts';
import { fhirJson } from './fhir-response.ts';
import { textResponse } from './content-coding.ts';
import { parsePrefer } from './prefer.ts';
import { fileResponse } from './export-file.ts';
import { fhirBaseOf } from '../config.ts';
import type { Limiter } from '../auth/rate-limit.ts';

export type ExportRouteDeps = KickoffDeps & StatusDeps & {
  baseUrl: string;
  maxBodyBytes: number;
  /** Kick-offs per client and status requests per job (CINDER_EXPORT_KICKOFF_RATE_LIMIT, CINDER_EXPORT_STATUS_RATE_LIMIT). */
  limits: { kickoff: Limiter; status: Limiter };
};

/** Seconds a client should wait before polling a running export again. */
const POLL_SECONDS = '2';

/** A 429 (`throttled`, with `Retry-After`) when `key` is past its limit (Bulk Data 2.0: too many kick-offs, a client "polling too frequently"). */
export function throttle(limiter: Limiter, key: string, what: string): void {
  const hit = limiter.hit(key);
  if (!hit.ok) throw new FhirError('too-many', `${what}; retry after ${hit.retryAfter} s`, { headers: { 'Retry-After': String(hit.retryAfter) } });
}

/**
 * Whom a kick-off is counted for (CINDER_EXPORT_KICKOFF_RATE_LIMIT, for exports and imports alike): the owner its job
 * would have, as the limit of jobs in progress counts them (ExportJobRepo.create): the client with the signed-in user of
 * the token, or the client's own authority (a token of no user). Counted per client, one user of an app spent the
 * kick-offs of all its users.
 */
export function kickoffOwner(c: Context<AppEnv>): { key: string; who: string } {
  const access = c.get('access');
  const user = access.user?.id;
  const key = [c.get('tenant'), access.clientId, user === undefined ? '' : `user:${user}`].join('\u0000');
  return { key, who: user === undefined ? 'This client' : 'This user of this client' };
}

function statusRequest(c: Context<AppEnv>, baseUrl: string): StatusRequest {
  return { tenant: c.get('tenant'), access: c.get('access'), fhirBase: fhirBaseOf(baseUrl, c.get('tenant')) };
}

/**
 * Bulk Data 2.0 export endpoints for one tenant: kick-off at `/$export`, `/Patient/$export` and
 * `/Group/{id}/$export` (GET, or POST with Parameters), the status URL (GET polls, DELETE cancels) and
 * the file downloads. Mounted behind bearer authentication, before the generic FHIR routes.
 */
export function exportRoutes(deps: ExportRouteDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  const kick = (level: ExportLevel) => async (c: Context<AppEnv>) => {
    // HEAD is safe (RFC 9110 9.2.1) and must not start an export, which is what a GET here does.
    if (c.req.method === 'HEAD') throw new FhirError('method-not-allowed', 'HEAD would start an export: use GET or POST', { headers: { Allow: 'GET, POST' } });
    // Before anything is read: each job is kept, with its parameters and patients, until its files expire.
    const owner = kickoffOwner(c);
    throttle(deps.limits.kickoff, owner.key, `${owner.who} started too many exports in the last minute`);
    const url = new URL(c.req.url);
    const input = c.req.method === 'POST' ? inputFromPost(await readOptionalFhirBody(c.req.raw, deps.maxBodyBytes), url.search) : inputFromQuery(url.search);
    // The manifest's `request` is the kick-off as sent: with its query when the parameters were there.
    const requestUrl = `${deps.baseUrl}${c.req.path}${input.method === 'GET' ? url.search : ''}`;
    const sreq = statusRequest(c, deps.baseUrl);
    const id = await kickOff(deps, {
      tenant: sreq.tenant, access: sreq.access, level, input, requestUrl, fhirBase: sreq.fhirBase,
      lenient: parsePrefer(c.req.header('prefer')).get('handling') === 'lenient', signal: c.req.raw.signal,
      ...(level === 'group' ? { groupId: c.req.param('id') } : {}),
    });
    const outcome = operationOutcome([issue('information', 'informational', `Export job ${id} accepted`)]);
    return fhirJson(outcome, 202, { 'Content-Location': `${sreq.fhirBase}/$export-status/${id}` });
  };
  for (const [path, level] of [['/$export', 'system'], ['/Patient/$export', 'patient'], ['/Group/:id/$export', 'group']] as const) {
    app.get(path, refusesHead(kick(level)));
    app.post(path, kick(level));
  }

  app.get('/$export-status/:job', async (c) => {
    const req = statusRequest(c, deps.baseUrl);
    // Counted for the job's client before the job is read: a client polling far more often than Retry-After says.
    throttle(deps.limits.status, `${req.tenant}\u0000${req.access.clientId}\u0000${c.req.param('job')}`, `Too many status requests for this export in the last minute (a running export's Retry-After says when to ask again)`);
    const r = await exportStatus(deps, req, c.req.param('job'));
    if (r.kind === 'running') return new Response(null, { status: 202, headers: { 'X-Progress': r.progress, 'Retry-After': POLL_SECONDS } });
    if (r.kind === 'failed') throw new FhirError('exception', r.reason, { issueCode: 'processing' });
    return textResponse(JSON.stringify(r.manifest), {
      status: 200,
      headers: { 'Content-Type': 'application/json', Expires: new Date(r.expiresAt).toUTCString(), 'Cache-Control': 'no-store' },
    });
  });
  app.delete('/$export-status/:job', async (c) => {
    const id = c.req.param('job');
    await cancelExport(deps, statusRequest(c, deps.baseUrl), id);
    return fhirJson(operationOutcome([issue('information', 'informational', `Export job ${id} cancelled; its files are removed`)]), 202);
  });
  app.get('/$export-file/:job/:name', async (c) => {
    const download = await openDownload(deps, statusRequest(c, deps.baseUrl), c.req.param('job'), c.req.param('name'));
    return fileResponse(c.req.raw, download);
  });
  return app;
}
