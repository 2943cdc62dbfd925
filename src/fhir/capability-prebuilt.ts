import type { PrebuiltCapability } from './capability.ts';

/**
 * The CapabilityStatement's static parts (capability.ts prebuildCapability), computed when the executable
 * is built: scripts/build.ts replaces this module with one holding them. Run from source, there are none,
 * and a process's first `metadata` computes them.
 */
export const PREBUILT_CAPABILITY: PrebuiltCapability | undefined = undefined;
