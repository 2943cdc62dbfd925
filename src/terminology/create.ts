import type { Clock } from '../clock.ts';
import type { Store } from '../store/types.ts';
import { CoreConceptMaps } from './core/core-concept-maps.ts';
import { CoreTerminology } from './core/core-source.ts';
import { TerminologyService } from './service.ts';
import type { TerminologySource } from './source.ts';
import type { ConceptMapSource } from './concept-maps.ts';
import { StoreTerminology } from './store-source.ts';

export interface TerminologyOptions {
  readonly store: Store;
  readonly clock: Clock;
  /** How long another process's CodeSystem/ValueSet change may go unnoticed (ms). */
  readonly checkIntervalMs?: number;
  /** The shared FHIR R4 core terminology; a fresh lazily loaded one by default. */
  readonly core?: TerminologySource;
  /** The FHIR R4 core ConceptMaps; a fresh lazily loaded one by default. */
  readonly coreConceptMaps?: ConceptMapSource;
}

export interface Terminology {
  readonly service: TerminologyService;
  /** Tell the engine about writes made in this process (they are visible at once). */
  readonly markChanged: (tenant: string) => void;
}

/** Default trust period of a change token read from the store, see StoreTerminologyOptions. */
export const DEFAULT_CHECK_INTERVAL_MS = 250;

/** Wires the terminology engine over the store for the composition root (createApp). */
export function createTerminology(options: TerminologyOptions): Terminology {
  const stored = new StoreTerminology({
    store: options.store,
    clock: options.clock,
    checkIntervalMs: options.checkIntervalMs ?? DEFAULT_CHECK_INTERVAL_MS,
  });
  const service = new TerminologyService({
    core: options.core ?? new CoreTerminology(),
    sourceFor: (t) => stored.sourceFor(t),
    coreConceptMaps: options.coreConceptMaps ?? new CoreConceptMaps(),
    conceptMapsFor: (t) => stored.conceptMapsFor(t),
  });
  return { service, markChanged: (tenant) => stored.markChanged(tenant) };
}
