/**
 * How many resources a tenant holds of each type, as the search planner needs it (planSearch's wide
 * drivers): an estimate, within a factor of two or so, measured by the adapter at most once per
 * `maxAgeMs` for each tenant and type. Writes change the sizes slowly and an estimate that is a few
 * minutes old chooses the same plans, so no writer keeps it up to date; a bulk change (an import, a reindex)
 * does not, and the statistics refreshed after it (ResourceIndexing.analyze) forget every measurement.
 */
export interface TypeSizes {
  get(tenant: string, type: string): Promise<number>;
  /** The size measured, while it is current; undefined while none is, or while its measurement is under way. */
  measured(tenant: string, type: string): number | undefined;
  /**
   * Drops every measurement (of every tenant and type), and one under way: the next search measures again. Called
   * when what a measurement read changed in bulk (analyze()), so that plans follow at once, not after `maxAgeMs`.
   */
  forget(): void;
}

export const TYPE_SIZE_MAX_AGE_MS = 5 * 60_000;

export function createTypeSizes(
  measure: (tenant: string, type: string) => number | Promise<number>,
  maxAgeMs = TYPE_SIZE_MAX_AGE_MS,
  now: () => number = Date.now,
): TypeSizes {
  const known = new Map<string, { size: Promise<number>; at: number; value?: number }>();
  return {
    get(tenant, type) {
      const key = `${tenant}\u0000${type}`;
      const hit = known.get(key);
      if (hit && now() - hit.at < maxAgeMs) return hit.size;
      // Concurrent searches share one measurement; a failed one is not kept.
      const size = Promise.resolve().then(() => measure(tenant, type));
      const entry: { size: Promise<number>; at: number; value?: number } = { size, at: now() };
      known.set(key, entry);
      size.then((n) => void (entry.value = n), () => {
        if (known.get(key)?.size === size) known.delete(key);
      });
      return size;
    },
    measured(tenant, type) {
      const hit = known.get(`${tenant}\u0000${type}`);
      return hit && now() - hit.at < maxAgeMs ? hit.value : undefined;
    },
    forget() {
      known.clear();
    },
  };
}
