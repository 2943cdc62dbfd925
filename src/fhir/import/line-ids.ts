/**
 * Ids for the id-less lines of an input that may be read again (an `$import` input whose job is resumed
 * after its process stopped): each is a function of (job, input, line), so a line read twice names the
 * same resource the second time and is found unchanged instead of stored again.
 *
 * The ids are UUIDv7-shaped (RFC 9562), as the random ids of `newId` are, so that they stay ordered in the
 * id indexes: the 48-bit time is the job's creation time, `rand_a` the input's index, and `rand_b` 26 bits
 * of the job id's digest followed by the 36-bit line number. The lines of one input therefore get ascending
 * ids (inserts append to the index as random UUIDv7s do), and two jobs created in the same millisecond
 * differ in their digest bits.
 */

/** What a line's id is made of, besides its number (plain data: it is posted to the preparation thread). */
export interface LineIds {
  /** The first three groups and the separator: `tttttttt-tttt-7iii-`. */
  prefix: string;
  /** 26 bits of the job id's SHA-256. */
  tag: number;
}

/** The most inputs and lines the layout holds. */
const MAX_INPUT = 0xfff;
const LINE_BITS = 2 ** 36;

/** The ids of the lines of input `input` (0-based) of the job `job` created at `createdAt` (ms). */
export function lineIds(job: string, input: number, createdAt: number): LineIds {
  if (!Number.isInteger(input) || input < 0 || input > MAX_INPUT) throw new RangeError(`input index ${input} does not fit a line id`);
  const time = Math.max(0, Math.floor(createdAt)).toString(16).padStart(12, '0').slice(-12);
  const digest = new Bun.CryptoHasher('sha256').update(job).digest();
  const tag = ((digest[0]! << 18) | (digest[1]! << 10) | (digest[2]! << 2) | (digest[3]! >>> 6)) >>> 0;
  return { prefix: `${time.slice(0, 8)}-${time.slice(8)}-7${input.toString(16).padStart(3, '0')}-`, tag };
}

/** The id of 1-based line `line`, or undefined past the 2^36 lines the layout holds (such a line gets a random id). */
export function lineId(ids: LineIds, line: number): string | undefined {
  if (!Number.isInteger(line) || line < 0 || line >= LINE_BITS) return undefined;
  const variant = (0x8000 | (ids.tag >>> 12)).toString(16);
  const rest = ((ids.tag & 0xfff) * LINE_BITS + line).toString(16).padStart(12, '0');
  return `${ids.prefix}${variant}-${rest}`;
}
