/**
 * The timestamps of the writes a process has in flight, and the safe time they allow: an instant at or
 * before which every version the process writes has committed (ARCHITECTURE.md "Safe time").
 *
 * A write takes its `meta.lastUpdated` (at least its `now`) before its transaction commits: it may wait for
 * SQLite's single writer, overlap other PostgreSQL transactions, or run again after a clash keeping its
 * time. A reader that took "everything up to now" could so miss a version stamped earlier than that read
 * and committed after it. Each write therefore holds its `now` here from when it is taken until its
 * transaction has committed or failed, and readers that promise completeness up to an instant (bulk
 * export's transactionTime, a history or search Bundle's `meta.lastUpdated`) take the safe time instead
 * of the clock's now.
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import type { Clock } from '../clock.ts';

/** Releases a write's timestamp; calling it again does nothing. */
export type Release = () => void;

/** A write's timestamp, held in flight until `release` is called. */
export interface WriteTime {
  at: number;
  release: Release;
}

/** This process's writes in flight, by timestamp: O(1) to take and release one, lock-free. */
export class InFlightWrites implements WriteTimes {
  /** How many writes hold each timestamp. */
  private readonly held = new Map<number, number>();
  /** The smallest key of `held`, or Infinity; recomputed lazily after its last holder left (`stale`). */
  private least = Infinity;
  private stale = false;
  /** The latest safe time given out: a write takes a later timestamp. */
  private given = -Infinity;
  /** The latest timestamp taken (one just after a safe time may be later than the clock). */
  private latest = -Infinity;

  /**
   * A write's timestamp at `now` (the clock's), held until released: `now`, or just after the latest safe
   * time given out when that is not earlier (within one millisecond), so that no read that was promised
   * completeness up to an instant misses a write stamped at it.
   */
  take(now: number): WriteTime {
    const at = now > this.given ? now : this.given + 1;
    if (at > this.latest) this.latest = at;
    return { at, release: this.hold(at) };
  }

  private hold(at: number): Release {
    this.held.set(at, (this.held.get(at) ?? 0) + 1);
    if (at < this.least) this.least = at;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = this.held.get(at)! - 1;
      if (n > 0) {
        this.held.set(at, n);
        return;
      }
      this.held.delete(at);
      if (at === this.least) this.stale = true;
    };
  }

  /** The oldest timestamp held, or undefined when none is in flight. */
  oldest(): number | undefined {
    if (this.stale) {
      this.stale = false;
      this.least = Infinity;
      for (const at of this.held.keys()) if (at < this.least) this.least = at;
    }
    return this.least === Infinity ? undefined : this.least;
  }

  /** The latest timestamp taken by a write of this process (-Infinity before the first). */
  latestTaken(): number {
    return this.latest;
  }

  /**
   * A version of a write in flight stamped at `at`, later than the timestamp it took: taken as that write's latest,
   * so the safe time once it committed holds it (noteRaisedStamp).
   */
  raise(at: number): void {
    if (at > this.latest) this.latest = at;
  }

  /** How many writes are in flight. */
  get size(): number {
    let n = 0;
    for (const c of this.held.values()) n += c;
    return n;
  }

  /**
   * The process's safe time at `now`: one millisecond before the oldest write in flight, else `now`, or the
   * latest timestamp taken where that is later (one taken just after an earlier safe time, within the same
   * millisecond or under a clock that stands still: it has committed, and a read now must hold it). A write
   * that has not yet taken its timestamp will take a later one (take), the clock not going back.
   */
  safeTime(now: number): number {
    const oldest = this.oldest();
    const top = Math.max(now, this.latest);
    const safe = oldest !== undefined ? Math.min(oldest - 1, top) : top;
    if (safe > this.given) this.given = safe;
    return safe;
  }
}

/** What the store offers for write timestamps (Store.writeTimes): this process's writes (an InFlightWrites). */
export interface WriteTimes {
  /**
   * A write's timestamp from `now` (the clock's, read just before this call), held in flight until its
   * release, which the caller calls once its transaction committed or failed.
   */
  take(now: number): WriteTime;
  /**
   * The safe time at `now` (this process's clock): every version this process stamped at or before it has
   * committed, so a read started after this call sees them all (other processes' writes are not held here:
   * ARCHITECTURE.md "Safe time").
   */
  safeTime(now: number): number;
  /**
   * The latest timestamp a write of this process has taken: read after a statement and found at or before a
   * time, every version this process wrote that the statement could see was stamped at or before that time.
   */
  latestTaken(): number;
  /** A version of a write in flight stamped at `at`, later than the timestamp it took (noteRaisedStamp). */
  raise(at: number): void;
}

/**
 * Runs a write `fn` at a timestamp taken from `clock` and held in flight (WriteTimes.take) until `fn` has
 * settled: `fn` gives it to every version it stamps and returns once its transaction committed or failed.
 */
export async function atWriteTime<T>(store: { readonly writeTimes: WriteTimes }, clock: Clock, fn: (now: number) => Promise<T>): Promise<T> {
  const { at, release } = store.writeTimes.take(clock.now());
  try {
    return await writing.run(store.writeTimes, () => fn(at));
  } finally {
    release();
  }
}

/** The write times of the write `atWriteTime` runs (its store's), for noteRaisedStamp. */
const writing = new AsyncLocalStorage<WriteTimes>();

/**
 * Records that the write under way (atWriteTime) stamps a version at `at`, later than the timestamp it took: a version
 * stamped just after its resource's previous one, where the clock stood at or before that one's time (two writes of a
 * resource within a millisecond, a clock that stands still or steps back; src/fhir/crud.ts putPrepared, deleteVersion).
 * The store's safe time once the write committed is then at least `at`, so a read begun after it is promised that
 * version: a later page read as of the first page's time (src/fhir/search-pin.ts) would otherwise take it for one
 * written since and leave it out or show its previous version.
 */
export function noteRaisedStamp(at: number): void {
  writing.getStore()?.raise(at);
}

/**
 * The safe time now: what a read that is about to start may promise to hold everything up to (a history or
 * search Bundle's `meta.lastUpdated`, so that polling `_since` it misses nothing).
 */
export function safeTimeNow(store: { readonly writeTimes: WriteTimes }, clock: Clock): number {
  return store.writeTimes.safeTime(clock.now());
}
