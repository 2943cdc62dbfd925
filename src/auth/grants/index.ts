import { authorizationCode } from './authorization-code.ts';
import { clientCredentials } from './client-credentials.ts';
import { refreshToken } from './refresh-token.ts';
import type { Grant } from './types.ts';

/** Grant types the token endpoint supports, by `grant_type` (the three the README lists). */
export const grants: ReadonlyMap<string, Grant> = new Map([authorizationCode, refreshToken, clientCredentials].map((g) => [g.grantType, g]));
