/**
 * The holds behind the safe time (src/store/write-times.ts): the instant before the oldest write in flight,
 * and a write stamped after every safe time already given out.
 */
import { describe, expect, test } from 'bun:test';
import { InFlightWrites } from '../../src/store/write-times.ts';

describe('InFlightWrites', () => {
  test('the safe time is the instant before the oldest write in flight, whatever order they end in', () => {
    const w = new InFlightWrites();
    const a = w.take(100);
    const b = w.take(101);
    const c = w.take(101);
    expect(w.safeTime(200)).toBe(99);
    b.release();
    a.release();
    expect(w.safeTime(200)).toBe(100);
    a.release(); // twice: nothing more
    expect(w.size).toBe(1);
    c.release();
    expect(w.oldest()).toBeUndefined();
    expect(w.safeTime(200)).toBe(200);
  });

  test('a write after a safe time was given out is stamped after it, even in the same millisecond', () => {
    const w = new InFlightWrites();
    expect(w.take(50).at).toBe(50);
    w.take(50).release();
    expect(w.safeTime(60)).toBe(49);
    const later = new InFlightWrites();
    expect(later.safeTime(60)).toBe(60);
    expect(later.take(60).at).toBe(61);
    expect(later.take(70).at).toBe(70);
  });

  test('once a write stamped just after a safe time has committed, the next safe time holds it, whatever the clock says', () => {
    // A clock standing still (or two reads in one millisecond): a kick-off at 100, then a write stamped 101.
    const w = new InFlightWrites();
    expect(w.safeTime(100)).toBe(100);
    const write = w.take(100);
    expect(write.at).toBe(101);
    expect(w.safeTime(100)).toBe(100);
    write.release();
    expect(w.safeTime(100)).toBe(101);
    // In flight again: the instant before it.
    const next = w.take(100);
    expect(next.at).toBe(102);
    expect(w.safeTime(100)).toBe(101);
    next.release();
    expect(w.safeTime(100)).toBe(102);
  });
});
