/**
 * Deterministic pseudo-random numbers for the synthetic data generator.
 *
 * The core is sfc32 (Chris Doty-Humphrey's "small fast counting" generator, 128-bit state,
 * public domain algorithm), seeded through a 32-bit integer mixer so that every
 * (seed, stream) pair gets its own independent sequence. Nothing here reads Math.random
 * or the clock: the same seed always produces the same numbers.
 */

/** Mixes a 32-bit integer (the finaliser of MurmurHash3 with a golden-ratio offset). */
function mix32(value: number): number {
  let h = (value + 0x9e3779b9) | 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Hashes any seed text (or a number's decimal text) to 32 bits (FNV-1a, then mixed). */
export function hashSeed(seed: string | number): number {
  const text = String(seed);
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  }
  return mix32(h);
}

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

function hex32(value: number): string {
  return HEX[(value >>> 24) & 0xff]! + HEX[(value >>> 16) & 0xff]! + HEX[(value >>> 8) & 0xff]! + HEX[value & 0xff]!;
}

/** A seeded sfc32 generator with the helpers the record builders need. */
export class Random {
  private a: number;
  private b: number;
  private c: number;
  private d: number;
  private spareNormal: number | undefined;

  /** `seed` selects the data set, `stream` an independent sequence within it (e.g. a patient). */
  constructor(seed: number, stream: number) {
    this.a = mix32(seed ^ 0x5bd1e995);
    this.b = mix32(stream ^ this.a);
    this.c = mix32(this.b ^ seed);
    this.d = 1;
    for (let i = 0; i < 12; i++) this.next();
  }

  /** Next unsigned 32-bit integer. */
  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform float in [0, 1). */
  float(): number {
    return this.next() / 4294967296;
  }

  /** Uniform integer in [min, max], both inclusive. */
  int(min: number, max: number): number {
    return min + Math.floor(this.float() * (max - min + 1));
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.float() < p;
  }

  /** One element of a non-empty array. */
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.float() * items.length)]!;
  }

  /** One element chosen with the given relative weights (same length as items). */
  weighted<T>(items: readonly T[], weights: readonly number[]): T {
    let total = 0;
    for (const w of weights) total += w;
    let roll = this.float() * total;
    for (let i = 0; i < items.length; i++) {
      roll -= weights[i]!;
      if (roll < 0) return items[i]!;
    }
    return items[items.length - 1]!;
  }

  /** Normally distributed value (Box-Muller; the second value is kept for the next call). */
  normal(mean: number, sd: number): number {
    if (this.spareNormal !== undefined) {
      const z = this.spareNormal;
      this.spareNormal = undefined;
      return mean + sd * z;
    }
    const u = 1 - this.float();
    const v = this.float();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spareNormal = r * Math.sin(2 * Math.PI * v);
    return mean + sd * r * Math.cos(2 * Math.PI * v);
  }

  /** A string of n decimal digits. */
  digits(n: number): string {
    let out = "";
    for (let i = 0; i < n; i++) out += String(this.next() % 10);
    return out;
  }

  /** A random (version 4 layout) UUID: lower-case hex, a valid FHIR id. */
  uuid(): string {
    const w1 = this.next();
    const w2 = ((this.next() & 0xffff0fff) | 0x00004000) >>> 0;
    const w3 = ((this.next() & 0x3fffffff) | 0x80000000) >>> 0;
    const w4 = this.next();
    const h2 = hex32(w2);
    const h3 = hex32(w3);
    return `${hex32(w1)}-${h2.slice(0, 4)}-${h2.slice(4)}-${h3.slice(0, 4)}-${h3.slice(4)}${hex32(w4)}`;
  }
}
