import type { FhirContextItem } from '../../store/types.ts';
import type { AuthDeps } from '../deps.ts';
import type { AuthenticatedClient } from '../client-auth.ts';

/** The JSON body of a successful token response (RFC 6749 5.1, OIDC Core 3.1.3.3). */
export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  id_token?: string;
  refresh_token?: string;
  patient?: string;
  /** SMART App Launch 2.2: the encounter in context of an EHR launch. */
  encounter?: string;
  /** SMART App Launch 2.2: the further resources in context of an EHR launch. */
  fhirContext?: FhirContextItem[];
  /** SMART App Launch 2.2: whether the app should show a patient banner (beside `patient`). */
  need_patient_banner?: boolean;
}

/** A grant type module: its name, the form parameters it reads, and its handler. */
export interface Grant {
  grantType: string;
  /** The only form parameters `handle` is given (client authentication reads the whole form before). */
  parameters: readonly string[];
  handle(deps: AuthDeps, client: AuthenticatedClient, form: URLSearchParams): Promise<TokenResponse>;
}
