import type { MiddlewareHandler } from 'hono';
import { parseExact } from '../fhir/exact-json.ts';
import { toFhirXml } from '../fhir/xml/to-xml.ts';
import { textResponse } from './content-coding.ts';
import type { AppEnv } from './env.ts';
import { answerXmlType, asksForPlainJson } from './fhir-response.ts';

/**
 * The kick-off (system, Patient, Group) and status routes of bulk export: Bulk Data 2.0 defines their answers in
 * JSON alone (kick-off `Accept`: "Currently, only application/fhir+json is supported"; a status error "in JSON
 * format"), so they stay JSON whatever the request asks.
 */
const BULK_EXPORT = /\/\$export(?:-status\/[^/]+)?$/;

/**
 * The format layer of the FHIR API (FHIR R4 http 3.1.0.1.10, xml.html): every FHIR JSON answer of the
 * routes inside it (resources, Bundles, history, operations, the CapabilityStatement, and errors'
 * OperationOutcomes) is sent in FHIR XML when the request asks for XML (answerXmlType), written from
 * the JSON by the R4 definitions (src/fhir/xml/to-xml.ts), indented under `_pretty=true`. Answers that
 * are not FHIR JSON (native Binary content, export manifests and files, `$graphql`) pass unchanged, and so
 * do bulk export's kick-off and status answers (BULK_EXPORT); the answer carries `Vary: Accept` as the JSON
 * one does. XML request bodies are read where bodies are
 * read (src/http/body.ts).
 */
export function xmlAnswers(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    const res = c.res;
    if (!(res.headers.get('content-type') ?? '').startsWith('application/fhir+json')) return;
    const url = c.req.url;
    // A `_search` form's `_format` and `_pretty` are the request's where it gives them (AppEnv's answerFormat).
    const asked = c.get('answerFormat');
    const format = asked ? asked.format : url.includes('_format=') ? (new URL(url).searchParams.get('_format') ?? null) : null;
    const path = new URL(url).pathname;
    // `$convert` answers the format asked for, JSON by default: an XML body is what it converts, not a request for XML.
    const bodyType = path.endsWith('/$convert') ? undefined : c.req.header('content-type');
    const type = answerXmlType(c.req.header('accept'), format, bodyType);
    if (type === undefined && asked?.format) {
      // labelledAsAsked, at the edge, reads the URL's `_format`: the form's generic JSON type is labelled here.
      const plain = asksForPlainJson(c.req.header('accept'), asked.format);
      if (plain !== undefined) c.res.headers.set('Content-Type', `${plain}; charset=utf-8`);
    }
    if (type === undefined || path.endsWith('/$graphql') || BULK_EXPORT.test(path)) return;
    const headers = new Headers(res.headers);
    headers.set('Content-Type', `${type}; charset=utf-8`);
    headers.delete('Content-Length');
    const vary = headers.get('vary');
    if (!vary?.split(',').some((v) => v.trim().toLowerCase() === 'accept')) headers.set('Vary', vary ? `Accept, ${vary}` : 'Accept');
    let answer: Response;
    if (!res.body || res.status === 204 || res.status === 304) answer = new Response(null, { status: res.status, statusText: res.statusText, headers });
    else {
      const text = await res.text();
      const resource = resourceOf(text);
      if (resource === undefined) {
        // Not a resource after all (no route answers so): the answer as it was.
        c.res = undefined as unknown as Response;
        c.res = new Response(text, res);
        return;
      }
      const pretty = asked ? asked.pretty : url.includes('_pretty=') && new URL(url).searchParams.get('_pretty') === 'true';
      answer = textResponse(toFhirXml(resource, pretty), { status: res.status, statusText: res.statusText, headers });
    }
    // Cleared first: Hono's setter would copy the JSON answer's fields (its Content-Length among them) onto the new one.
    c.res = undefined as unknown as Response;
    c.res = answer;
  };
}

/** The resource a FHIR JSON answer holds, numbers as written; undefined when it holds none. */
function resourceOf(text: string): Record<string, unknown> | undefined {
  try {
    const value = parseExact(text) as Record<string, unknown> | null;
    return value !== null && typeof value === 'object' && !Array.isArray(value) && typeof value.resourceType === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}
