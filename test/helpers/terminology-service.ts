import { FhirError } from '../../src/errors.ts';
import { CoreBundle } from '../../src/terminology/core/core-bundle.ts';
import { CoreTerminology } from '../../src/terminology/core/core-source.ts';
import type { TerminologyContext } from '../../src/terminology/context.ts';
import { TerminologyService } from '../../src/terminology/service.ts';
import type { TerminologySource } from '../../src/terminology/source.ts';
import { fixtureSource, MemoryTerminologySource } from './memory-terminology.ts';

/** One core for every test file and app of a process: it is read-only and costly to load. */
let sharedBundle: CoreBundle | undefined;
export function testCoreBundle(): CoreBundle {
  sharedBundle ??= new CoreBundle();
  return sharedBundle;
}

let sharedCore: CoreTerminology | undefined;
export function testCore(): CoreTerminology {
  sharedCore ??= new CoreTerminology(testCoreBundle());
  return sharedCore;
}

const EMPTY: TerminologySource = new MemoryTerminologySource();

/** A service whose tenant 't' holds the fixtures, over an empty core unless `withCore`. */
export async function fixtureService(options: { withCore?: boolean } = {}): Promise<{
  service: TerminologyService;
  source: MemoryTerminologySource;
  context: () => Promise<TerminologyContext>;
}> {
  const source = await fixtureSource();
  const service = new TerminologyService({ core: options.withCore === true ? testCore() : EMPTY, sourceFor: () => source });
  return { service, source, context: async () => service.context('t') };
}

/** The FhirError a promise rejects with (fails the test when it resolves or throws something else). */
export async function rejected(promise: Promise<unknown> | (() => unknown)): Promise<FhirError> {
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (e) {
    if (e instanceof FhirError) return e;
    throw e;
  }
  throw new Error('expected a FhirError');
}
