import { z } from 'zod';
import { FhirError, OAuthError } from '../errors.ts';
import { readResource, type FhirDeps, type FhirRequest } from '../fhir/crud.ts';
import { parseReference } from '../fhir/references.ts';
import type { FhirContextItem } from '../store/types.ts';
import type { AuthDeps } from './deps.ts';
import { contextReference, FhirContextInput } from './fhir-context.ts';
import { LAUNCH_TTL_S, signLaunch } from './launch.ts';

const FHIR_ID = z.string().regex(/^[A-Za-z0-9\-.]{1,64}$/, 'must be a FHIR resource id');

/**
 * The body of `POST /oauth2/launch`: the patient and, optionally, the encounter, further resources in
 * context (`fhirContext`, src/auth/fhir-context.ts), whether the app needs its own patient banner (true
 * unless the EHR says its UI shows one) and the one app the launch is for.
 */
export const LaunchRequest = z.strictObject({
  patient: FHIR_ID,
  encounter: FHIR_ID.optional(),
  fhirContext: FhirContextInput.optional(),
  need_patient_banner: z.boolean().optional(),
  client_id: z.string().min(1).max(256).optional(),
});
export type LaunchRequest = z.infer<typeof LaunchRequest>;

/** What `POST /oauth2/launch` answers (201). */
export interface MintedLaunch {
  launch: string;
  expires_in: number;
}

async function boundClient(deps: AuthDeps, tenant: string, clientId: string | undefined): Promise<string | null> {
  if (clientId === undefined) return null;
  const client = await deps.store.clients.get(clientId);
  if (!client || client.tenant !== tenant || client.disabled) throw new OAuthError('invalid_request', `client_id '${clientId}' names no application of this tenant`);
  return client.clientId;
}

/** Throws unless the stored Encounter's subject is the Patient `patient` (relative, or absolute under the tenant's base). */
function requireEncounterOf(fhir: FhirDeps, tenant: string, content: string, encounter: string, patient: string): void {
  const subject = (JSON.parse(content) as { subject?: { reference?: unknown } }).subject?.reference;
  const ref = typeof subject === 'string' ? parseReference(subject, fhir.fhirBase?.(tenant)) : null;
  if (ref?.type !== 'Patient' || ref.id !== patient) {
    throw new OAuthError('invalid_request', `Encounter/${encounter} is not an encounter of Patient/${patient} (its subject)`);
  }
}

/**
 * Reads every `fhirContext` reference as the REST read does (so the token must be able to read it, in its
 * tenant, not deleted); a refusal names the item (`fhirContext[1].reference: ...`). A canonical or an
 * identifier is not looked up: SMART 2.2 defines no access rules for them, and they may name another server's.
 */
async function readContext(fhir: FhirDeps, req: FhirRequest, items: FhirContextItem[]): Promise<void> {
  for (const [n, item] of items.entries()) {
    const ref = contextReference(item);
    if (ref === null) continue;
    await readResource(fhir, req, ref.type, ref.id).catch((err: unknown) => {
      if (!(err instanceof FhirError) || err.status >= 500) throw err;
      throw new FhirError(err.category, `fhirContext[${n}].reference: ${err.message}`, { cause: err });
    });
  }
}

/**
 * Mints an EHR launch (SMART App Launch 2.2, EHR launch: the EHR's opaque `launch` handle) for what the
 * request's token may read, as REST reads: the Patient and the Encounter must exist in the token's
 * tenant, not deleted, within its scopes and its patient in context (a FhirError of the read otherwise:
 * 403, 404, 410), and the Encounter's subject must be that Patient; so must the resources its
 * `fhirContext` references (readContext). A `client_id` binds the launch to that application of the tenant.
 */
export async function mintLaunch(deps: AuthDeps, fhir: FhirDeps, req: FhirRequest, input: LaunchRequest): Promise<MintedLaunch> {
  const clientId = await boundClient(deps, req.tenant, input.client_id);
  await readResource(fhir, req, 'Patient', input.patient);
  if (input.encounter !== undefined) {
    const encounter = await readResource(fhir, req, 'Encounter', input.encounter);
    requireEncounterOf(fhir, req.tenant, encounter.content, input.encounter, input.patient);
  }
  const fhirContext = input.fhirContext?.length ? input.fhirContext : null;
  if (fhirContext !== null) await readContext(fhir, req, fhirContext);
  const launch = await signLaunch(deps, {
    tenant: req.tenant, patient: input.patient, encounter: input.encounter ?? null, fhirContext, needPatientBanner: input.need_patient_banner ?? true, clientId,
  });
  return { launch, expires_in: LAUNCH_TTL_S };
}
