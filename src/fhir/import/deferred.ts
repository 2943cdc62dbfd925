import type { RunReferences } from './run-references.ts';

/** Work put aside until the fullUrls it refers to are written: a Bundle, or one resource. */
interface Deferred {
  /**
   * The `urn:` references nothing written so far answered; none for a transaction whose conditional
   * reference matched nothing (what it waits for cannot be named).
   */
  needs: string[];
  /** Does the work now, deferring nothing any more: what is still unresolved is reported. */
  retry(): Promise<void>;
}

export interface DeferredQueue {
  defer(needs: string[], retry: () => Promise<void>): void;
  readonly size: number;
  /**
   * At the end of the run: retries, in the order they were deferred, the items whose needs have all
   * been written; when none is, those without named needs (they may find their conditional targets
   * now); when there are none of those either, the oldest left (which reports its unresolved
   * references, and may still write entries others need). Ends when every item ran once, so the
   * result does not depend on the order of the files: a Group Bundle before its Patients' Bundles
   * waits for them.
   */
  settle(): Promise<void>;
}

export function createDeferredQueue(run: RunReferences): DeferredQueue {
  let items: Deferred[] = [];
  const ready = (d: Deferred) => d.needs.every((n) => run.has(n));
  return {
    defer: (needs, retry) => void items.push({ needs, retry }),
    get size() {
      return items.length;
    },
    async settle() {
      while (items.length) {
        let next = items.filter((d) => d.needs.length && ready(d));
        if (!next.length) next = items.filter((d) => !d.needs.length);
        if (!next.length) next = [items[0]!];
        const chosen = new Set(next);
        items = items.filter((d) => !chosen.has(d));
        for (const d of next) await d.retry();
      }
    },
  };
}
