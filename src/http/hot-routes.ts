import type { AuthDeps } from '../auth/deps.ts';
import type { Access } from '../fhir/access.ts';
import type { FhirDeps } from '../fhir/crud.ts';
import type { Logger } from '../log.ts';
import { valueSetValidateCodeParams } from '../terminology/input/operations.ts';
import type { Terminology } from '../terminology/create.ts';
import { readFhirBody } from './body.ts';
import { requestIp } from './client-ip.ts';
import { renderError } from './errors.ts';
import { readResponse } from './fhir.ts';
import { readConditions } from './fhir-response.ts';
import type { Admitted, FhirAdmission, GateRequest } from './middleware/fhir-gate.ts';
import { requestIdOf, withRequestId, type RequestRecorder } from './middleware/request-context.ts';
import { tokenResponse } from './oauth.ts';
import { validateValueSetResponse } from './terminology.ts';

export interface HotRouteDeps {
  readonly admit: FhirAdmission;
  readonly recorder: RequestRecorder;
  readonly log: Logger;
  readonly fhir: FhirDeps;
  readonly terminology: Terminology;
  readonly auth: AuthDeps;
  readonly maxBodyBytes: number;
}

/** Answers a request it recognises, or null to leave it to the Hono app. */
export type HotRoutes = (req: Request, server: unknown) => Promise<Response> | null;

/** Route labels, as Hono's router names the same routes in the metrics. */
const READ_ROUTE = '/tenants/:tenant/fhir/R4/:type/:id';
const VALIDATE_ROUTE = '/tenants/:tenant/fhir/R4/ValueSet/$validate-code';
const TOKEN_ROUTE = '/oauth2/token';
/** Under Hono, a request the FHIR gate refuses is counted under the gate middleware's own route. */
const GATE_ROUTE = '/tenants/:tenant/fhir/R4/*';

/** What a request was admitted with. */
interface Granted {
  tenant: string;
  access: Access;
}

// Never null here: only /metadata and the discovery document are public, and neither is routed here.
const granted = ({ tenant, bearer }: Admitted): Granted => ({ tenant, access: bearer!.access });

/** The route label of a request in flight: the route's, or the gate's once the gate refused it. */
interface Trace {
  route: string;
}

/** A path segment the read route's `:type` takes here; anything else goes through Hono. */
const TYPE_SEGMENT = /^[A-Z][A-Za-z]*$/;

/**
 * Direct dispatch of the three requests that carry a deployment's load: a FHIR read, a type-level
 * `POST ValueSet/$validate-code`, and `POST /oauth2/token`. Each runs the very functions its Hono
 * route runs (the FHIR admission, readResponse, validateValueSetResponse, tokenResponse) and leaves
 * the same traces (request id, metrics, error rendering); what it skips is the router and the
 * middleware chain, which cost more than a cached-token read itself.
 *
 * Only the plain form of each is taken: no query string, no percent-encoding, no trailing slash, GET
 * (not HEAD) for reads. Every other request, and every variant, goes to Hono unchanged.
 */
export function hotRoutes(d: HotRouteDeps): HotRoutes {
  const trustProxy = d.auth.config.trustProxy === 'on';

  async function answer(req: Request, path: string, route: string, handle: (trace: Trace) => Promise<Response>): Promise<Response> {
    const started = performance.now();
    const requestId = requestIdOf(req.headers.get('x-request-id'));
    const trace = { route };
    let res: Response;
    try {
      res = await handle(trace);
    } catch (err) {
      res = renderError(err, { method: req.method, path, requestId }, d.log);
    }
    res = withRequestId(res, requestId);
    d.recorder.record(req.method, path, trace.route, res.status, requestId, started);
    return res;
  }

  /** The FHIR admission of a request: without waiting in the steady state (FhirAdmission.now). */
  function admitted(req: Request, trace: Trace, tenant: string, type: string, id: string): Granted | Promise<Granted> {
    const r: GateRequest = {
      tenant, rest: `/${type}/${id}`, format: null, accept: req.headers.get('accept'), authorization: req.headers.get('authorization'),
    };
    try {
      const now = d.admit.now(r);
      if (now !== undefined) return granted(now);
    } catch (err) {
      trace.route = GATE_ROUTE;
      throw err;
    }
    return d.admit(r).then(granted, (err: unknown) => {
      trace.route = GATE_ROUTE;
      throw err;
    });
  }

  return (req, server) => {
    const url = req.url;
    const start = url.indexOf('/', url.indexOf('//') + 2);
    if (start < 0 || url.includes('?', start) || url.includes('%', start)) return null;
    const path = url.slice(start);
    const method = req.method;
    if (path === TOKEN_ROUTE) {
      if (method !== 'POST') return null;
      return answer(req, path, TOKEN_ROUTE, () => tokenResponse(d.auth, req, requestIp(req, server, trustProxy)));
    }
    if (!path.startsWith('/tenants/')) return null;
    const parts = path.split('/'); // ['', 'tenants', tenant, 'fhir', 'R4', type, id]
    if (parts.length !== 7 || parts[3] !== 'fhir' || parts[4] !== 'R4') return null;
    const tenant = parts[2]!;
    const type = parts[5]!;
    const id = parts[6]!;
    if (tenant === '' || id === '') return null;
    // Binary reads negotiate native content (src/http/binary.ts): they go through Hono.
    if (method === 'GET' && TYPE_SEGMENT.test(type) && type !== 'Binary' && id[0] !== '$' && id !== '_history') {
      return answer(req, path, READ_ROUTE, async (trace) => {
        const { tenant: t, access } = await admitted(req, trace, tenant, type, id);
        return readResponse(d.fhir, { tenant: t, access }, type, id, readConditions(req.headers));
      });
    }
    if (method === 'POST' && type === 'ValueSet' && id === '$validate-code') {
      return answer(req, path, VALIDATE_ROUTE, async (trace) => {
        const { tenant: t, access } = await admitted(req, trace, tenant, type, id);
        const inputs = valueSetValidateCodeParams.fromBody(await readFhirBody(req, d.maxBodyBytes));
        return validateValueSetResponse(d.terminology, t, access, inputs, undefined, req.headers.get('accept-language'));
      });
    }
    return null;
  };
}
