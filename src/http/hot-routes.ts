import type { Access } from '../fhir/access.ts';
import type { FhirDeps } from '../fhir/crud.ts';
import type { Logger } from '../log.ts';
import type { SyncOrAsync } from '../sync-or-async.ts';
import type { Cors } from './cors.ts';
import { encode } from './content-coding.ts';
import { renderError } from './errors.ts';
import { INSTANCE_ROUTE, readResponse } from './fhir.ts';
import { labelledAsAsked, readConditions, REFUSES_A_TYPE } from './fhir-response.ts';
import { FHIR_BASE_ROUTE, GATE_ROUTE, type Admitted, type FhirAdmission, type GateRequest } from './middleware/fhir-gate.ts';
import { requestIdOf, withRequestId, type RequestRecorder } from './middleware/request-context.ts';
import { TOKEN_ROUTE, type TokenRoute } from './oauth.ts';
import { VALUE_SET_VALIDATE_CODE_ROUTE, type ValueSetValidateCode } from './terminology.ts';
import { pathStart } from './url-path.ts';
import { withRegexAccounts } from '../regex-guard.ts';

export interface HotRouteDeps {
  readonly admit: FhirAdmission;
  readonly recorder: RequestRecorder;
  readonly log: Logger;
  readonly fhir: FhirDeps;
  /** The handlers the Hono routes of `$validate-code` and the token endpoint run (with their options). */
  readonly validateCode: ValueSetValidateCode;
  readonly token: TokenRoute;
  /** Every path the dispatcher takes is one CORS covers; its answers get the headers here (see Cors.decorate). */
  readonly cors: Cors;
}

/** The routes the dispatcher answers, by the label Hono's router gives them in the metrics. */
const ROUTES = {
  read: FHIR_BASE_ROUTE + INSTANCE_ROUTE,
  validate: FHIR_BASE_ROUTE + VALUE_SET_VALIDATE_CODE_ROUTE,
  token: TOKEN_ROUTE,
} as const;

export type HotRoute = keyof typeof ROUTES;

/** Under Hono, a request the FHIR gate refuses is counted under the gate middleware's own route. */
const GATE_LABEL = FHIR_BASE_ROUTE + GATE_ROUTE;

/** Answers a request it recognises, or null to leave it to the Hono app. */
export interface HotRoutes {
  (req: Request, server: unknown): Promise<Response> | null;
  /**
   * How many requests each route answered here rather than through Hono, so that a test can prove the
   * dispatcher took a request it should (a guard that stops matching would otherwise go unnoticed).
   */
  readonly answered: Readonly<Record<HotRoute, number>>;
}

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

/** An Accept or Content-Type that may name an XML type. */
const MENTIONS_XML = /xml/i;

/**
 * Direct dispatch of the three requests that carry a deployment's load: a FHIR read, a type-level
 * `POST ValueSet/$validate-code`, and `POST /oauth2/token`. Each runs the very functions its Hono
 * route runs (the FHIR admission, readResponse, valueSetValidateCode, tokenRoute) and leaves
 * the same traces (request id, metrics, error rendering); what it skips is the router and the
 * middleware chain, which cost more than a cached-token read itself.
 *
 * Only the plain form of each is taken: no query string, no percent-encoding, no trailing slash, GET
 * (not HEAD) for reads. Every other request, and every variant, goes to Hono unchanged.
 */
export function hotRoutes(d: HotRouteDeps): HotRoutes {
  const answered: Record<HotRoute, number> = { read: 0, validate: 0, token: 0 };

  async function answer(req: Request, path: string, route: HotRoute, handle: (trace: Trace) => Promise<Response>): Promise<Response> {
    const started = performance.now();
    answered[route]++;
    const requestId = requestIdOf(req.headers.get('x-request-id'));
    const trace = { route: ROUTES[route] as string };
    let res: Response;
    try {
      res = await handle(trace);
    } catch (err) {
      res = renderError(err, { method: req.method, path, requestId }, d.log);
    }
    const coded = encode(req, labelledAsAsked(req, res));
    res = coded instanceof Promise ? await coded : coded;
    res = d.cors.decorate(req, withRequestId(res, requestId));
    d.recorder.record(req.method, path, trace.route, res.status, requestId, started);
    return res;
  }

  /** The FHIR admission of a request: at once in the steady state (see FhirAdmission). */
  function admitted(req: Request, trace: Trace, tenant: string, type: string, id: string): Granted | Promise<Granted> {
    const r: GateRequest = {
      tenant, rest: `/${type}/${id}`, format: null, accept: req.headers.get('accept'), authorization: req.headers.get('authorization'),
    };
    const refused = (err: unknown): never => {
      trace.route = GATE_LABEL;
      throw err;
    };
    let admission: SyncOrAsync<Admitted>;
    try {
      admission = d.admit(r);
    } catch (err) {
      return refused(err);
    }
    return admission instanceof Promise ? admission.then(granted, refused) : granted(admission);
  }

  const dispatch = (req: Request, server: unknown): Promise<Response> | null => {
    const url = req.url;
    const start = pathStart(url);
    if (start < 0 || url.includes('?', start) || url.includes('%', start)) return null;
    // XML in or out goes through the format layer (src/http/xml-format.ts), in Hono; so does an Accept refusing a type
    // (q=0), which may refuse every JSON type and take XML through a wildcard.
    const accept = req.headers.get('accept') ?? '';
    if (MENTIONS_XML.test(accept) || REFUSES_A_TYPE.test(accept) || MENTIONS_XML.test(req.headers.get('content-type') ?? '')) return null;
    const path = url.slice(start);
    const method = req.method;
    if (path === TOKEN_ROUTE) {
      if (method !== 'POST') return null;
      return answer(req, path, 'token', () => d.token(req, server));
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
      // With the tenant's regex accounts from the admission on (src/regex-guard.ts), as the gate runs a request: completing
      // a token's scope filters may expand a ValueSet's `regex` filter on the tenant's codes.
      return answer(req, path, 'read', (trace) => withRegexAccounts(tenant, async () => {
        const { tenant: t, access } = await admitted(req, trace, tenant, type, id);
        return readResponse(d.fhir, { tenant: t, access }, type, id, readConditions(req.headers));
      }));
    }
    if (method === 'POST' && `/${type}/${id}` === VALUE_SET_VALIDATE_CODE_ROUTE) {
      return answer(req, path, 'validate', (trace) => withRegexAccounts(tenant, async () => {
        const { tenant: t, access } = await admitted(req, trace, tenant, type, id);
        return d.validateCode(req, t, access);
      }));
    }
    return null;
  };
  return Object.assign(dispatch, { answered });
}
