import { clientCredentials } from './client-credentials.ts';
import type { Grant } from './types.ts';

/** Grant types the token endpoint supports, by `grant_type`. */
export const grants: ReadonlyMap<string, Grant> = new Map([clientCredentials].map((g) => [g.grantType, g]));
