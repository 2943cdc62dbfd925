import type { CodeSystem } from '../model/code-system.ts';
import { CodeSystemIndex } from './code-system-index.ts';

/**
 * Indexes CodeSystem resources once per object. Sources that hand out the same object every
 * time (the shared FHIR core) get their index built once for every tenant; a re-read resource
 * is a new object and gets a fresh index, and dropped resources are garbage collected.
 */
export class IndexCache {
  private readonly indexes = new WeakMap<CodeSystem, CodeSystemIndex>();

  /** The index of a CodeSystem; null when it has no canonical URL to be found by. */
  indexOf(cs: CodeSystem): CodeSystemIndex | null {
    const url = cs.url;
    if (url === undefined) return null;
    let index = this.indexes.get(cs);
    if (index === undefined) {
      index = new CodeSystemIndex({ ...cs, url });
      this.indexes.set(cs, index);
    }
    return index;
  }
}
