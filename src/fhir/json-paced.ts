import { MAX_JSON_DEPTH } from '../terminology/model/depth.ts';
import { holdsLiterals, literalOf, recordLiteral, recordLiterals, scanResult, scanTo, startScan, stringEnd, type JsonScan } from './exact-json.ts';
import { parseJson } from './resource.ts';
import { nextTurn, pacedTurns, WORK_SLICE_MS } from './turns.ts';

/** How much JSON text is read between two looks at the clock (UTF-16 code units); text of one slice or less is parsed in one call. */
export const JSON_SLICE = 256 * 1024;

export interface PacedJson {
  /** Text read per look at the clock (JSON_SLICE). */
  slice?: number;
  /** Time read before a turn (WORK_SLICE_MS). */
  budgetMs?: number;
  /** The turn awaited (a macrotask by default). */
  turn?: () => Promise<void>;
}

/**
 * A request body's JSON as parseJson reads it (the same value, numbers' literals and 400s), read with turns
 * of the event loop every `budgetMs`: a 49 MiB transaction took about 0.9 s of one thread in its scan and
 * JSON.parse, which held every other request of the process. The text is scanned in slices (scanJson's
 * resumable form, with stacks of its own), then a Bundle's `entry` items are found and parsed a slice's
 * worth at a time, the Bundle around them apart; its value is what JSON.parse of the whole gives (the pieces, joined by the
 * commas between them, are that text). Text that is not a Bundle with an `entry` array, text nested too
 * deep or giving a name twice, and a piece that JSON.parse refuses are read by parseJson whole, so that
 * the 400s keep their words: a large malformed body holds the loop for its JSON.parse, as before. Text of
 * one slice or less is parsed at once, without a promise.
 */
export function parseJsonPaced(text: string, pacing: PacedJson = {}): unknown {
  return text.length <= (pacing.slice ?? JSON_SLICE) ? parseJson(text) : parseSliced(text, pacing);
}

async function parseSliced(text: string, pacing: PacedJson): Promise<unknown> {
  const { slice = JSON_SLICE, budgetMs = WORK_SLICE_MS, turn = nextTurn } = pacing;
  const pace = pacedTurns(budgetMs, turn);
  const state = startScan(true, true);
  while (!scanTo(text, state, state.at + slice)) await pace();
  const scan = scanResult(text, state);
  if (scan.depth > MAX_JSON_DEPTH || scan.duplicate >= 0) return parseJson(text, scan);
  const found = await entrySpans(text, slice, pace);
  const value = found && (await parsePieces(text, found, scan, slice, pace));
  return value === undefined ? parseJson(text, scan) : value;
}

/** Where a top-level object's `entry` array opens and closes, and its items' text (start, end pairs, commas left out). */
interface EntrySpans {
  open: number;
  close: number;
  spans: number[];
}

/** How far entrySpans has read a text: its index, depth, and whether the value read at depth 1 is the member `entry`'s. */
interface SpanState extends EntrySpans {
  at: number;
  depth: number;
  named: boolean;
  itemStart: number;
  stringStart: number;
  stringClose: number;
}

/** The `entry` array of the object `text` holds, found in slices; undefined when there is none (or the text is not JSON). */
async function entrySpans(text: string, slice: number, pace: () => Promise<void> | undefined): Promise<EntrySpans | undefined> {
  const s: SpanState = { at: 0, depth: 0, named: false, open: -1, close: -1, spans: [], itemStart: -1, stringStart: -1, stringClose: -1 };
  // The loop over characters is a plain function's: locals of an async function live in its frame on the heap.
  while (spansTo(text, s, s.at + slice)) await pace();
  return s.at < 0 || s.open < 0 || s.close < 0 ? undefined : s;
}

/** Reads `text` from where `s` is to about `limit`; returns whether there is more to read (`s.at` -1: an unterminated string). */
function spansTo(text: string, s: SpanState, limit: number): boolean {
  let { at: i, depth, named, open, close, itemStart, stringStart, stringClose } = s;
  const spans = s.spans;
  const stop = Math.min(limit, text.length);
  for (; i < stop; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      stringStart = i;
      i = stringClose = stringEnd(text, i);
      if (i < 0) break;
    } else if (c === 58) {
      if (depth === 1) named = stringClose - stringStart === 6 && text.startsWith('"entry"', stringStart);
    } else if (c === 44) {
      if (depth === 1) named = false;
      else if (depth === 2 && open >= 0 && close < 0) {
        spans.push(itemStart, i);
        itemStart = i + 1;
      }
    } else if (c === 123 || c === 91) {
      if (++depth === 2 && c === 91 && named && open < 0) itemStart = (open = i) + 1;
    } else if (c === 125 || c === 93) {
      if (depth === 2 && open >= 0 && close < 0) spans.push(itemStart, (close = i));
      depth--;
    }
  }
  Object.assign(s, { at: i, depth, named, open, close, itemStart, stringStart, stringClose });
  return i >= 0 && i < text.length;
}

/**
 * The value of `text` from its pieces: the object with an empty `entry`, then its items a group at a time
 * (the items within about `slice` characters, parsed as one array), their literals recorded as parseExact
 * records them (and the holders above them marked); undefined should JSON.parse refuse a piece.
 */
async function parsePieces(text: string, { open, close, spans }: EntrySpans, scan: JsonScan, slice: number, pace: () => Promise<void> | undefined): Promise<unknown> {
  const outer = text.slice(0, open + 1) + text.slice(close);
  let root: unknown;
  try {
    root = JSON.parse(outer);
  } catch {
    return undefined;
  }
  const entry = (root as { entry?: unknown } | null)?.entry;
  if (!Array.isArray(entry)) return undefined;
  if (scan.literals) recordLiterals(outer, root as object);
  // `[]` (or blanks between the brackets): no items.
  if (spans.length === 2 && text.slice(spans[0], spans[1]).trim() === '') return root;
  for (let k = 0; k < spans.length; ) {
    // Items k to m (exclusive), their text with the commas between them.
    let m = k + 2;
    while (m < spans.length && spans[m + 1]! - spans[k]! <= slice) m += 2;
    const piece = `[${text.slice(spans[k], spans[m - 1])}]`;
    let items: unknown[];
    try {
      items = JSON.parse(piece) as unknown[];
    } catch {
      return undefined;
    }
    // A piece is items joined by commas, so JSON.parse gives one value per item (an item that is not one fails above).
    if (items.length !== (m - k) / 2) return undefined;
    if (scan.literals) {
      recordLiterals(piece, items);
      for (let j = 0; j < items.length; j++) {
        const literal = typeof items[j] === 'number' ? literalOf(items, j) : undefined;
        if (literal !== undefined) recordLiteral(entry, entry.length + j, literal);
      }
      if (holdsLiterals(items)) markHolders(entry, root as object);
    }
    for (const item of items) entry.push(item);
    k = m;
    await pace();
  }
  return root;
}

/** Marks the entry array and the Bundle as holders of literals below them (recordLiterals marks every holder on the way up). */
function markHolders(entry: unknown[], root: object): void {
  if (!holdsLiterals(entry)) recordLiteral(entry);
  if (!holdsLiterals(root)) recordLiteral(root);
}
