import { type Context, Hono } from 'hono';
import type { Clock } from '../clock.ts';
import { FhirError } from '../errors.ts';
import { requireAccess, type Access } from '../fhir/access.ts';
import type { CapabilityContribution } from '../fhir/capability.ts';
import {
  codeSystemValidateCodeParams,
  expandParams,
  findMatchesParams,
  lookupParams,
  subsumesParams,
  translateParams,
  valueSetValidateCodeParams,
} from '../terminology/input/operations.ts';
import type { OperationInput, OperationParameters, OperationSpec } from '../terminology/input/parameters.ts';
import { expandInput, expandValueSet } from '../terminology/ops/expand.ts';
import { lookupCode, lookupInput } from '../terminology/ops/lookup.ts';
import { findMatches, findMatchesInput } from '../terminology/ops/find-matches.ts';
import { subsumes, subsumesInput } from '../terminology/ops/subsumes.ts';
import { translate } from '../terminology/ops/translate.ts';
import { translateInput } from '../terminology/ops/translate-input.ts';
import { codeSystemInstance } from '../terminology/ops/resolve-code-system.ts';
import { codeSystemValidateCodeInput, validateCodeSystemCode } from '../terminology/ops/validate-code-system-code.ts';
import { validateValueSetCode, valueSetValidateCodeInput } from '../terminology/ops/validate-value-set-code.ts';
import { validationParametersJson } from '../terminology/ops/validation-result.ts';
import type { CodeSystemIndex } from '../terminology/compile/code-system-index.ts';
import { withoutTenantCodeSystems } from '../terminology/code-system-reach.ts';
import type { TerminologyContext } from '../terminology/context.ts';
import type { Terminology } from '../terminology/create.ts';
import { then, type SyncOrAsync } from '../sync-or-async.ts';
import { readFhirBody } from './body.ts';
import type { AppEnv } from './env.ts';
import { fhirJson } from './fhir-response.ts';
import { parsePrefer } from './prefer.ts';

export interface TerminologyRouteDeps {
  readonly terminology: Terminology;
  readonly clock: Clock;
  readonly maxBodyBytes: number;
  /** The most codes one $expand response may carry. */
  readonly maxExpansionSize: number;
}

const OPERATION = 'http://hl7.org/fhir/OperationDefinition/';

/**
 * The terminology operations as listed in the CapabilityStatement (R4 lists an operation once per
 * resource type; its OperationDefinition says it runs at type and instance level).
 */
export const terminologyCapabilities: CapabilityContribution = {
  operations: [
    { name: 'validate-code', definition: `${OPERATION}ValueSet-validate-code`, types: ['ValueSet'] },
    { name: 'expand', definition: `${OPERATION}ValueSet-expand`, types: ['ValueSet'] },
    { name: 'validate-code', definition: `${OPERATION}CodeSystem-validate-code`, types: ['CodeSystem'] },
    { name: 'lookup', definition: `${OPERATION}CodeSystem-lookup`, types: ['CodeSystem'] },
    { name: 'subsumes', definition: `${OPERATION}CodeSystem-subsumes`, types: ['CodeSystem'] },
    { name: 'find-matches', definition: `${OPERATION}CodeSystem-find-matches`, types: ['CodeSystem'] },
    { name: 'translate', definition: `${OPERATION}ConceptMap-translate`, types: ['ConceptMap'] },
  ],
};

/** The type-level `ValueSet/$validate-code` below the FHIR base: its Hono route and its hot-route label. */
export const VALUE_SET_VALIDATE_CODE_ROUTE = '/ValueSet/$validate-code';

/**
 * An operation's inputs: from the query (GET) or the Parameters body (POST). Under `Prefer:
 * handling=strict` a parameter the operation does not take is a 400 naming it, as in a search.
 */
function requestInputs<S extends OperationSpec>(req: Request, params: OperationParameters<S>, maxBodyBytes: number): SyncOrAsync<OperationInput<S>> {
  const prefer = req.headers.get('prefer');
  const strict = prefer !== null && parsePrefer(prefer).get('handling') === 'strict';
  // HEAD is GET without the content (RFC 9110 9.3.2): its inputs are in the query too.
  if (req.method === 'GET' || req.method === 'HEAD') return params.fromQuery(new URL(req.url).searchParams, strict);
  if (strict) params.checkPostQuery(new URL(req.url).searchParams, strict);
  return readFhirBody(req, maxBodyBytes).then((body) => params.fromBody(body, strict));
}

/** `ValueSet/$validate-code` of an admitted request, type level or instance level with `id`. */
export type ValueSetValidateCode = (req: Request, tenant: string, access: Access, id?: string) => SyncOrAsync<Response>;

/** The `ValueSet/$validate-code` handler, for its Hono routes and the hot-route dispatcher alike. */
export function valueSetValidateCode(deps: Pick<TerminologyRouteDeps, 'terminology' | 'maxBodyBytes'>): ValueSetValidateCode {
  // No async layer of its own: each one costs the hot route a promise and a turn.
  return (req, tenant, access, id) =>
    then(requestInputs(req, valueSetValidateCodeParams, deps.maxBodyBytes), (raw) =>
      validateValueSetResponse(deps.terminology, tenant, access, raw, id, req.headers.get('accept-language')));
}

/**
 * FHIR terminology operations (FHIR R4 ValueSet, CodeSystem and ConceptMap operations) at type and instance level, POST with a Parameters body or GET with primitive
 * inputs in the query.
 * Mounted on `{fhir_base}` behind bearer auth, before the generic resource routes.
 */
export function terminologyRoutes(deps: TerminologyRouteDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const inputs = <S extends OperationSpec>(c: Context<AppEnv>, params: OperationParameters<S>): SyncOrAsync<OperationInput<S>> =>
    requestInputs(c.req.raw, params, deps.maxBodyBytes);
  const context = (c: Context<AppEnv>, type: TerminologyType) => {
    requireWholeRead(c.get('access'), type);
    return deps.terminology.service.context(c.get('tenant'));
  };

  const validateCode = valueSetValidateCode(deps);
  const validateVs = (c: Context<AppEnv>) => validateCode(c.req.raw, c.get('tenant'), c.get('access'), c.req.param('id'));
  const validateCs = async (c: Context<AppEnv>) => {
    const raw = await inputs(c, codeSystemValidateCodeParams);
    const terminology = await context(c, 'CodeSystem');
    const input = codeSystemValidateCodeInput(raw, await instance(c, terminology), c.req.header('Accept-Language'));
    return varyByLanguage(fhirJson(validationParametersJson(await validateCodeSystemCode(input, { terminology }))), raw.displayLanguage);
  };
  const lookup = async (c: Context<AppEnv>) => {
    const raw = await inputs(c, lookupParams);
    const terminology = await context(c, 'CodeSystem');
    const input = lookupInput(raw, await instance(c, terminology), c.req.header('Accept-Language'));
    return varyByLanguage(fhirJson(await lookupCode(input, { terminology })), raw.displayLanguage);
  };
  const subsumption = async (c: Context<AppEnv>) => {
    const raw = await inputs(c, subsumesParams);
    const terminology = await context(c, 'CodeSystem');
    return fhirJson(await subsumes(subsumesInput(raw, await instance(c, terminology)), { terminology }));
  };
  const matches = async (c: Context<AppEnv>) => {
    const raw = await inputs(c, findMatchesParams);
    const terminology = await context(c, 'CodeSystem');
    return fhirJson(await findMatches(findMatchesInput(raw, await instance(c, terminology)), { terminology }));
  };
  const expand = async (c: Context<AppEnv>) => {
    const raw = await inputs(c, expandParams);
    const input = expandInput(raw, c.req.param('id'), c.req.header('Accept-Language'));
    const terminology = valueSetReach(deps.terminology, c.get('tenant'), c.get('access'), await context(c, 'ValueSet'));
    const now = () => new Date(deps.clock.now());
    const res = fhirJson(await expandValueSet(input, { terminology, now, newId: () => crypto.randomUUID(), maxExpansionSize: deps.maxExpansionSize }));
    return varyByLanguage(res, raw.displayLanguage);
  };

  const translation = async (c: Context<AppEnv>) => {
    const input = translateInput(await inputs(c, translateParams), c.req.param('id'));
    // A concept's display from a code system of the tenant's is left out for a token that does not read CodeSystems.
    const terminology = valueSetReach(deps.terminology, c.get('tenant'), c.get('access'), await context(c, 'ConceptMap'), true);
    return fhirJson(await translate(input, { terminology, maps: deps.terminology.service.conceptMaps(c.get('tenant')) }));
  };

  for (const method of ['GET', 'POST'] as const) {
    app.on(method, VALUE_SET_VALIDATE_CODE_ROUTE, validateVs);
    app.on(method, '/ValueSet/:id/$validate-code', validateVs);
    app.on(method, '/ValueSet/$expand', expand);
    app.on(method, '/ValueSet/:id/$expand', expand);
    app.on(method, '/CodeSystem/$validate-code', validateCs);
    app.on(method, '/CodeSystem/:id/$validate-code', validateCs);
    app.on(method, '/CodeSystem/$lookup', lookup);
    app.on(method, '/CodeSystem/:id/$lookup', lookup);
    app.on(method, '/CodeSystem/$subsumes', subsumption);
    app.on(method, '/CodeSystem/:id/$subsumes', subsumption);
    app.on(method, '/CodeSystem/$find-matches', matches);
    app.on(method, '/CodeSystem/:id/$find-matches', matches);
    app.on(method, '/ConceptMap/$translate', translation);
    app.on(method, '/ConceptMap/:id/$translate', translation);
  }
  return app;
}

/**
 * `ValueSet/$validate-code` (type level, or instance level with `id`) on parsed inputs. Without a
 * `displayLanguage` input, the request's `Accept-Language` stands for it.
 */
function validateValueSetResponse(
  terminology: Terminology, tenant: string, access: Access, raw: OperationInput<typeof valueSetValidateCodeParams.spec>, id?: string, acceptLanguage?: string | null,
): SyncOrAsync<Response> {
  const input = valueSetValidateCodeInput(raw, id, acceptLanguage ?? undefined);
  requireWholeRead(access, 'ValueSet');
  // Awaited only when something must be read: the steady state takes no turn of the event loop here.
  const result = then(terminology.service.context(tenant), (context) =>
    validateValueSetCode(input, { terminology: valueSetReach(terminology, tenant, access, context) }));
  return then(result, (r) => varyByLanguage(fhirJson(validationParametersJson(r)), raw.displayLanguage));
}

/**
 * `res` with `Vary: Accept-Language` when the answer was read in the request's Accept-Language (no
 * `displayLanguage` input), so that a cache keeps the answers in different languages apart (RFC 9110
 * 12.5.5); with it the header played no part.
 */
function varyByLanguage(res: Response, displayLanguage: string | undefined): Response {
  if (displayLanguage === undefined) res.headers.append('Vary', 'Accept-Language');
  return res;
}

/**
 * Throws 403 unless the token reads every resource of `type`: a terminology operation reads the
 * tenant's terminology whole (the ValueSet or CodeSystem by id or url, the ValueSets and code systems
 * it includes, every ConceptMap for $translate), not through the search engine, so a SMART v2 scope filter on the type
 * (`system/ValueSet.rs?publisher=A`) could not narrow it: it is refused rather than ignored (a read of a
 * ValueSet outside the filter is a 403; its `$expand` was answered).
 */
type TerminologyType = 'ValueSet' | 'CodeSystem' | 'ConceptMap';

function requireWholeRead(access: Access, type: TerminologyType): void {
  requireAccess(access, type, 'r');
  if (access.filters?.(type, 'r') !== undefined) {
    throw new FhirError('forbidden', `The access token reads ${type} only through a scope filter, which terminology operations cannot apply: they need read access to every ${type}`);
  }
}

/**
 * The terminology a ValueSet operation reads: the tenant's own CodeSystems only for a token that reads every
 * CodeSystem (withoutTenantCodeSystems); R4 core's for any token that reads ValueSets. The steady state of a token
 * that reads CodeSystems is untouched.
 */
function valueSetReach(terminology: Terminology, tenant: string, access: Access, context: TerminologyContext, absent = false): TerminologyContext {
  if (access.can('CodeSystem', 'r') && access.filters?.('CodeSystem', 'r') === undefined) return context;
  return withoutTenantCodeSystems(context, (url) => terminology.service.ownsCodeSystem(tenant, url), absent);
}

/** The stored CodeSystem at instance level (`CodeSystem/{id}/$...`, 404 when unknown). */
function instance(c: Context<AppEnv>, terminology: TerminologyContext): Promise<CodeSystemIndex> | undefined {
  const id = c.req.param('id');
  return id === undefined ? undefined : codeSystemInstance(terminology, id);
}

