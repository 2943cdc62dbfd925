import type { PrebuiltCapability } from './capability.ts';

/**
 * The CapabilityStatement's static parts (capability.ts prebuildCapability), computed when the executable
 * is built: scripts/build.ts replaces this module with one whose function returns them (their 1.4 MB of
 * text made when first asked for, not when the executable starts). Run from source there are none, and a
 * process's first `metadata` computes them.
 */
export const prebuiltCapability: (() => PrebuiltCapability) | undefined = undefined;
