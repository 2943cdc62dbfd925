import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import type { Store } from '../store/types.ts';
import type { KeyRing } from './keys.ts';

/** What the authorization server's functions need; built once in createApp. */
export interface AuthDeps {
  store: Store;
  keys: KeyRing;
  clock: Clock;
  config: Config;
  log: Logger;
}

/** The FHIR base URL of a tenant: the audience of its access tokens. */
export function fhirBaseOf(baseUrl: string, tenant: string): string {
  return `${baseUrl}/tenants/${tenant}/fhir/R4`;
}

/** The token endpoint URL. */
export function tokenEndpoint(baseUrl: string): string {
  return `${baseUrl}/oauth2/token`;
}
