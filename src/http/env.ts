import type { Access } from '../fhir/access.ts';
import type { VerifiedToken } from '../auth/tokens.ts';

/** Per-request values set by middleware. */
export interface AppEnv {
  Variables: {
    requestId: string;
    /** Route pattern for metrics (e.g. `/tenants/:tenant/fhir/R4/:type/:id`). */
    token: VerifiedToken;
    access: Access;
    tenant: string;
  };
}
