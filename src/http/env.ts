import type { Access } from '../fhir/access.ts';
import type { VerifiedToken } from '../auth/tokens.ts';

/** Per-request values set by middleware. */
export interface AppEnv {
  Variables: {
    requestId: string;
    /** The verified bearer token of a FHIR request (set by the FHIR gate). */
    token: VerifiedToken;
    /** What that token's SMART scopes allow. */
    access: Access;
    /** The tenant named in the path, known to exist. */
    tenant: string;
    /**
     * The `_format` and `_pretty` of a `_search` form (set where the form is read), which ask for the
     * answer's format as the URL's do; where set, they are the request's (the first given, form then URL).
     */
    answerFormat: { format: string | null; pretty: boolean };
  };
}
