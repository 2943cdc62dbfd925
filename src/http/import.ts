import { Hono, type Context } from 'hono';
import type { Limiter } from '../auth/rate-limit.ts';
import { fhirBaseOf } from '../config.ts';
import { FhirError } from '../errors.ts';
import { issue, operationOutcome } from '../fhir/outcome.ts';
import { kickOffImport, type ImportKickoffDeps } from '../import/kickoff.ts';
import { cancelImport, importStatus, openImportErrors, type ImportStatusDeps } from '../import/status.ts';
import { fileResponse } from './export-file.ts';
import { readFhirBody } from './body.ts';
import { textResponse } from './content-coding.ts';
import type { AppEnv } from './env.ts';
import { fhirJson } from './fhir-response.ts';
import { kickoffOwner, throttle } from './export.ts';

export type ImportRouteDeps = ImportKickoffDeps & ImportStatusDeps & {
  maxBodyBytes: number;
  /** Status requests per job per minute (CINDER_EXPORT_STATUS_RATE_LIMIT, as for exports). */
  statusLimit: Limiter;
  /** Kick-offs per client and signed-in user per minute (CINDER_EXPORT_KICKOFF_RATE_LIMIT, as for exports; counted apart from them). */
  kickoffLimit: Limiter;
};

const POLL_SECONDS = '2';

/**
 * `$import` for one tenant: kick-off (POST, a Parameters body), the status URL (GET polls, DELETE cancels).
 * Mounted behind bearer authentication, before the generic FHIR routes.
 */
export function importRoutes(deps: ImportRouteDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const who = (c: Context<AppEnv>) => ({ tenant: c.get('tenant'), access: c.get('access') });
  const statusUrl = (tenant: string, id: string) => `${fhirBaseOf(deps.baseUrl, tenant)}/$import-status/${id}`;

  app.post('/$import', async (c) => {
    const { tenant, access } = who(c);
    // Before the body is read: each job is kept, with its inputs, until its error files expire; refused and cancelled ones count.
    const owner = kickoffOwner(c);
    throttle(deps.kickoffLimit, owner.key, `${owner.who} started too many imports in the last minute`);
    const body = await readFhirBody(c.req.raw, deps.maxBodyBytes);
    const id = await kickOffImport(deps, { tenant, access, requestUrl: `${deps.baseUrl}${c.req.path}`, body });
    return fhirJson(operationOutcome([issue('information', 'informational', `Import job ${id} accepted`)]), 202, { 'Content-Location': statusUrl(tenant, id) });
  });
  app.get('/$import-status/:job', async (c) => {
    const req = who(c);
    const hit = deps.statusLimit.hit(`${req.tenant}\u0000${req.access.clientId}\u0000${c.req.param('job')}`);
    if (!hit.ok) throw new FhirError('too-many', `Too many status requests for this import in the last minute; retry after ${hit.retryAfter} s`, { headers: { 'Retry-After': String(hit.retryAfter) } });
    const r = await importStatus(deps, req, c.req.param('job'));
    if (r.kind === 'running') return new Response(null, { status: 202, headers: { 'X-Progress': r.progress, 'Retry-After': POLL_SECONDS } });
    if (r.kind === 'failed') throw new FhirError('exception', r.reason, { issueCode: 'processing' });
    return textResponse(JSON.stringify(r.body), { status: 200, headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' } });
  });
  // An input's error file (the `url` of its `error` entry), served as an export file is: ranges, ETag, gzip.
  app.get('/$import-status/:job/:file{error-[0-9]+\\.ndjson}', async (c) => {
    const index = Number(/^error-(\d+)/.exec(c.req.param('file'))![1]);
    return fileResponse(c.req.raw, await openImportErrors(deps, who(c), c.req.param('job'), index));
  });
  app.delete('/$import-status/:job', async (c) => {
    const id = c.req.param('job');
    await cancelImport(deps, who(c), id);
    return fhirJson(operationOutcome([issue('information', 'informational', `Import job ${id} cancelled; what it imported so far stays`)]), 202);
  });
  return app;
}
