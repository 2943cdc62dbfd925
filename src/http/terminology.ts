import { type Context, Hono } from 'hono';
import type { Clock } from '../clock.ts';
import { requireAccess, type Access } from '../fhir/access.ts';
import type { CapabilityContribution } from '../fhir/capability.ts';
import {
  codeSystemValidateCodeParams,
  expandParams,
  lookupParams,
  valueSetValidateCodeParams,
} from '../terminology/input/operations.ts';
import type { OperationInput, OperationParameters, OperationSpec } from '../terminology/input/parameters.ts';
import { expandInput, expandValueSet } from '../terminology/ops/expand.ts';
import { lookupCode, lookupInput } from '../terminology/ops/lookup.ts';
import { codeSystemInstance } from '../terminology/ops/resolve-code-system.ts';
import { codeSystemValidateCodeInput, validateCodeSystemCode } from '../terminology/ops/validate-code-system-code.ts';
import { validateValueSetCode, validateValueSetCodeNow, valueSetValidateCodeInput } from '../terminology/ops/validate-value-set-code.ts';
import { validationParameters } from '../terminology/ops/validation-result.ts';
import type { CodeSystemIndex } from '../terminology/compile/code-system-index.ts';
import type { TerminologyContext } from '../terminology/context.ts';
import type { Terminology } from '../terminology/create.ts';
import { readFhirBody } from './body.ts';
import type { AppEnv } from './env.ts';
import { fhirJson } from './fhir-response.ts';

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
  ],
};

/**
 * FHIR terminology operations (interface "ValueSet validate-code", FHIR R4 ValueSet/CodeSystem
 * operations) at type and instance level, POST with a Parameters body or GET with primitive
 * inputs in the query.
 * Mounted on `{fhir_base}` behind bearer auth, before the generic resource routes.
 */
export function terminologyRoutes(deps: TerminologyRouteDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const inputs = async <S extends OperationSpec>(c: Context<AppEnv>, params: OperationParameters<S>): Promise<OperationInput<S>> =>
    c.req.method === 'GET' ? params.fromQuery(new URL(c.req.url).searchParams) : params.fromBody(await readFhirBody(c.req.raw, deps.maxBodyBytes));
  const context = (c: Context<AppEnv>, type: 'ValueSet' | 'CodeSystem') => {
    requireAccess(c.get('access'), type, 'r');
    return deps.terminology.service.context(c.get('tenant'));
  };

  const validateVs = async (c: Context<AppEnv>) =>
    validateValueSetResponse(deps.terminology, c.get('tenant'), c.get('access'), await inputs(c, valueSetValidateCodeParams), c.req.param('id'), c.req.header('accept-language'));
  const validateCs = async (c: Context<AppEnv>) => {
    const raw = await inputs(c, codeSystemValidateCodeParams);
    const terminology = await context(c, 'CodeSystem');
    const input = codeSystemValidateCodeInput(raw, await instance(c, terminology));
    return fhirJson(validationParameters(await validateCodeSystemCode(input, { terminology })));
  };
  const lookup = async (c: Context<AppEnv>) => {
    const raw = await inputs(c, lookupParams);
    const terminology = await context(c, 'CodeSystem');
    const input = lookupInput(raw, await instance(c, terminology));
    return fhirJson(await lookupCode(input, { terminology }));
  };
  const expand = async (c: Context<AppEnv>) => {
    const input = expandInput(await inputs(c, expandParams), c.req.param('id'));
    const terminology = await context(c, 'ValueSet');
    const now = () => new Date(deps.clock.now());
    return fhirJson(await expandValueSet(input, { terminology, now, newId: () => crypto.randomUUID(), maxExpansionSize: deps.maxExpansionSize }));
  };

  for (const method of ['GET', 'POST'] as const) {
    app.on(method, '/ValueSet/$validate-code', validateVs);
    app.on(method, '/ValueSet/:id/$validate-code', validateVs);
    app.on(method, '/ValueSet/$expand', expand);
    app.on(method, '/ValueSet/:id/$expand', expand);
    app.on(method, '/CodeSystem/$validate-code', validateCs);
    app.on(method, '/CodeSystem/:id/$validate-code', validateCs);
    app.on(method, '/CodeSystem/$lookup', lookup);
    app.on(method, '/CodeSystem/:id/$lookup', lookup);
  }
  return app;
}

/**
 * `ValueSet/$validate-code` (type level, or instance level with `id`) on parsed inputs (also a hot
 * route). Without a `displayLanguage` input, the request's `Accept-Language` stands for it.
 */
export async function validateValueSetResponse(
  terminology: Terminology, tenant: string, access: Access, raw: OperationInput<typeof valueSetValidateCodeParams.spec>, id?: string, acceptLanguage?: string | null,
): Promise<Response> {
  const input = valueSetValidateCodeInput(raw, id, acceptLanguage ?? undefined);
  requireAccess(access, 'ValueSet', 'r');
  const now = terminology.service.contextNow(tenant);
  const result = (now === undefined ? undefined : validateValueSetCodeNow(input, now))
    ?? (await validateValueSetCode(input, { terminology: await terminology.service.context(tenant) }));
  return fhirJson(validationParameters(result));
}

/** The stored CodeSystem at instance level (`CodeSystem/{id}/$...`, 404 when unknown). */
function instance(c: Context<AppEnv>, terminology: TerminologyContext): Promise<CodeSystemIndex> | undefined {
  const id = c.req.param('id');
  return id === undefined ? undefined : codeSystemInstance(terminology, id);
}

