import { MAX_JSON_DEPTH } from '../terminology/model/depth.ts';
import { decodedTo, holdsLiterals, literalOf, memberPath, recordLiteral, recordLiterals, scanResult, scanTo, startDecoded, startScan, stringEnd, type JsonScan } from './exact-json.ts';
import { malformedBody, parseJson, repeatedNameAt, tooDeep } from './resource.ts';
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
  /**
   * Read as JSON.parse reads the whole (its value, or its SyntaxError), not as a request body: no 400 for text
   * nested deeper than MAX_JSON_DEPTH or giving a name twice, no literals recorded. For text the server wrote
   * or took before (the audit trail's transaction Bundles: a batch-response holding a resource read back nests
   * three levels deeper than the resource, which a request body may nest to the limit).
   */
  plain?: boolean;
}

/**
 * A request body's JSON as parseJson reads it (the same value, numbers' literals and 400s), read with turns
 * of the event loop every `budgetMs`: a 49 MiB transaction took about 0.9 s of one thread in its scan and
 * JSON.parse, which held every other request of the process. The text is scanned in slices (scanJson's
 * resumable form, with stacks of its own), then the items of the longest array that is a member of the
 * top-level object (a Bundle's `entry`, a CodeSystem's `concept`) are found and parsed a slice's worth at a
 * time, the object around them apart; its value is what JSON.parse of the whole gives (the pieces, joined by
 * the commas between them, are that text). The 400s are the whole text's: a piece that JSON.parse refuses is
 * parsed again with the text before the array in front of it and all the text after it (malformedAt), the
 * whole parse's state and words at that piece, without a parse of the items before it; text nested too
 * deep is parsed so too before its 400; a name given twice is named by its path within its item (or in
 * the text around the array). Text with no such array (a Binary) is read by parseJson whole. Text of one
 * slice or less is parsed at once, without a promise.
 */
export function parseJsonPaced(text: string, pacing: PacedJson = {}): unknown {
  if (text.length > (pacing.slice ?? JSON_SLICE)) return parseSliced(text, pacing);
  return pacing.plain ? JSON.parse(text) : parseJson(text);
}

async function parseSliced(text: string, pacing: PacedJson): Promise<unknown> {
  const { slice = JSON_SLICE, budgetMs = WORK_SLICE_MS, turn = nextTurn, plain = false } = pacing;
  const pace = pacedTurns(budgetMs, turn);
  const state = startScan(true, true);
  while (!scanTo(text, state, state.at + slice)) await pace();
  // Names written with escapes (`"\\u0069d"`): checked again as JSON.parse reads them, in slices too (one pass held a 13 MB body 130 ms).
  let decoded: number | undefined;
  if (state.escaped) {
    const check = startDecoded();
    while (!decodedTo(text, check, check.at + slice)) await pace();
    decoded = check.found;
  }
  const scan = scanResult(text, state, decoded);
  const whole = () => (plain ? JSON.parse(text) : parseJson(text, scan));
  const found = await entrySpans(text, slice, pace);
  // No array as a member of a top-level object (or a string left open), or plain text giving a name twice (JSON.parse keeps the last): parsed whole.
  if (!found || (plain && scan.duplicate >= 0)) return whole();
  // Too deep for recording literals (their walk recurses once per level): parsed only to tell malformed text first, as parseJson.
  const deep = scan.depth > MAX_JSON_DEPTH;
  const parsed = await parsePieces(text, found, deep || plain ? undefined : scan, slice, pace);
  // Pieces that do not add up to the text's value (which the spans rule out): as parseJson reads it.
  if (parsed === undefined) return whole();
  if ('error' in parsed) throw plain ? parsed.error : malformedBody(parsed.error);
  if (plain) return parsed.value;
  if (deep) throw tooDeep('The request body');
  if (scan.duplicate >= 0) {
    const { path, name } = repeatedPath(text, found, scan.duplicate);
    throw repeatedNameAt('The request body', path, name, parsed.value);
  }
  return parsed.value;
}

/** The value of a text read in pieces, or the error JSON.parse gives of the whole. */
type Parsed = { value: unknown } | { error: Error };

/**
 * The path and name of the member name at `at` (memberPath's), read in the item it falls in (`entry[j].` and
 * the path within it) or in the text around the array (the array empty), so that a name given twice far into
 * a large body is not found by a walk of the text before it.
 */
function repeatedPath(text: string, { open, close, spans, nameStart, nameClose }: EntrySpans, at: number): { path: string; name: string } {
  if (at < open) return memberPath(text, at);
  if (at > close) return memberPath(text.slice(0, open + 1) + text.slice(close), at - close + open + 1);
  let lo = 0;
  let hi = spans.length / 2 - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (spans[2 * mid]! <= at) lo = mid;
    else hi = mid - 1;
  }
  const { path, name } = memberPath(text.slice(spans[2 * lo], spans[2 * lo + 1]), at - spans[2 * lo]!);
  const array = memberPath(`{${text.slice(nameStart, nameClose + 1)}:0}`, 1).name;
  return { path: path.startsWith('[') ? `${array}[${lo}]${path}` : `${array}[${lo}].${path}`, name };
}

/** The groups of items parsed as one piece: items k to m (exclusive, as indices into `spans`), their text within about `slice`. */
function* groups(spans: number[], slice: number): Generator<[number, number]> {
  for (let k = 0; k < spans.length; ) {
    let m = k + 2;
    while (m < spans.length && spans[m + 1]! - spans[k]! <= slice) m += 2;
    yield [k, m];
    k = m;
  }
}

/** A group's text as one array: its items with the commas between them. */
const pieceOf = (text: string, spans: number[], k: number, m: number) => `[${text.slice(spans[k], spans[m - 1])}]`;

/**
 * The error JSON.parse gives of the whole text, whose items before the group at `k` (an index into `spans`) are
 * values and whose text before the array parses: the text before the array, an item standing for those before
 * (the whole parse is then after a comma, as it is there), and the text from the group on. JSON.parse reads that
 * as it reads the whole from the group on, so it stops at the same place with the same words, without parsing
 * the entries before; it copies the text after the group once. Undefined should it parse (the spans rule that out).
 */
function malformedAt(text: string, open: number, spans: number[], k: number): Parsed | undefined {
  try {
    JSON.parse(k === 0 ? text : `${text.slice(0, open + 1)}0,${text.slice(spans[k])}`);
  } catch (err) {
    return { error: err as Error };
  }
  return undefined;
}

/**
 * The error JSON.parse gives of the whole text when the text around the array (`outer`, refused with `err`) is
 * malformed: the text before the array's, when that text is malformed (with the array and the object closed
 * after it, it parses otherwise, for the array is a member of the top-level object); else the first group of
 * items JSON.parse refuses (malformedAt), read with turns; else that of the text from the array's end, read
 * after an item standing for the items (`err` itself when there are none, the parse then right after `[`).
 */
async function outerError(text: string, { open, close, spans }: EntrySpans, err: Error, slice: number, pace: () => Promise<void> | undefined): Promise<Parsed | undefined> {
  try {
    JSON.parse(`${text.slice(0, open + 1)}]}`);
  } catch (before) {
    return { error: before as Error };
  }
  if (spans.length === 2 && text.slice(spans[0], spans[1]).trim() === '') return { error: err };
  for (const [k, m] of groups(spans, slice)) {
    let items: unknown;
    try {
      items = JSON.parse(pieceOf(text, spans, k, m));
    } catch {
      return malformedAt(text, open, spans, k);
    }
    if ((items as unknown[]).length !== (m - k) / 2) return malformedAt(text, open, spans, k);
    await pace();
  }
  // Every item a value: the whole parse is after a value when it meets what closed the array (a `}` there is its error).
  try {
    JSON.parse(`${text.slice(0, open + 1)}0${text.slice(close)}`);
  } catch (after) {
    return { error: after as Error };
  }
  return undefined;
}

/**
 * A top-level member's array: where it opens and closes, its items' text (start, end pairs, commas left out),
 * and where its member's name is (the quotes around it).
 */
interface EntrySpans {
  open: number;
  close: number;
  spans: number[];
  nameStart: number;
  nameClose: number;
}

/** How far entrySpans has read a text: its index, depth, the member whose value is read at depth 1, the array read and the longest read. */
interface SpanState {
  at: number;
  depth: number;
  named: boolean;
  nameStart: number;
  nameClose: number;
  current: EntrySpans | undefined;
  longest: EntrySpans | undefined;
  itemStart: number;
  stringStart: number;
  stringClose: number;
}

/**
 * The longest array that is the value of a member of the object `text` holds (a Bundle's `entry`, a CodeSystem's
 * `concept`, a Questionnaire's `item`), found in slices; undefined when there is none (or the text is not JSON).
 */
async function entrySpans(text: string, slice: number, pace: () => Promise<void> | undefined): Promise<EntrySpans | undefined> {
  const s: SpanState = { at: 0, depth: 0, named: false, nameStart: -1, nameClose: -1, current: undefined, longest: undefined, itemStart: -1, stringStart: -1, stringClose: -1 };
  // The loop over characters is a plain function's: locals of an async function live in its frame on the heap.
  while (spansTo(text, s, s.at + slice)) await pace();
  return s.at < 0 ? undefined : s.longest;
}

/** Reads `text` from where `s` is to about `limit`; returns whether there is more to read (`s.at` -1: an unterminated string). */
function spansTo(text: string, s: SpanState, limit: number): boolean {
  let { at: i, depth, named, nameStart, nameClose, current, longest, itemStart, stringStart, stringClose } = s;
  const stop = Math.min(limit, text.length);
  for (; i < stop; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      stringStart = i;
      i = stringClose = stringEnd(text, i);
      if (i < 0) break;
    } else if (c === 58) {
      if (depth === 1) {
        named = true;
        nameStart = stringStart;
        nameClose = stringClose;
      }
    } else if (c === 44) {
      if (depth === 1) named = false;
      else if (depth === 2 && current !== undefined) {
        current.spans.push(itemStart, i);
        itemStart = i + 1;
      }
    } else if (c === 123 || c === 91) {
      if (++depth === 2 && c === 91 && named) {
        current = { open: i, close: -1, spans: [], nameStart, nameClose };
        itemStart = i + 1;
      }
    } else if (c === 125 || c === 93) {
      if (depth === 2 && current !== undefined) {
        current.spans.push(itemStart, (current.close = i));
        if (longest === undefined || current.close - current.open > longest.close - longest.open) longest = current;
        current = undefined;
      }
      depth--;
    }
  }
  Object.assign(s, { at: i, depth, named, nameStart, nameClose, current, longest, itemStart, stringStart, stringClose });
  return i >= 0 && i < text.length;
}

/**
 * The value of `text` from its pieces: the object with the array empty, then its items a group at a time
 * (the items within about `slice` characters, parsed as one array), their literals recorded as parseExact
 * records them (and the holders above them marked) unless `scan` is undefined; should JSON.parse refuse a
 * piece, the error it gives of the whole text (outerError, malformedAt).
 */
async function parsePieces(text: string, found: EntrySpans, scan: JsonScan | undefined, slice: number, pace: () => Promise<void> | undefined): Promise<Parsed | undefined> {
  const { open, close, spans } = found;
  const outer = text.slice(0, open + 1) + text.slice(close);
  let root: unknown;
  try {
    root = JSON.parse(outer);
  } catch (err) {
    return outerError(text, found, err as Error, slice, pace);
  }
  // The array's member, read as memberPath reads names (the name written with escapes too).
  const entry = (root as Record<string, unknown> | null)?.[memberPath(`{${text.slice(found.nameStart, found.nameClose + 1)}:0}`, 1).name];
  if (!Array.isArray(entry)) return undefined;
  if (scan?.literals) recordLiterals(outer, root as object);
  // `[]` (or blanks between the brackets): no items.
  if (spans.length === 2 && text.slice(spans[0], spans[1]).trim() === '') return { value: root };
  for (const [k, m] of groups(spans, slice)) {
    const piece = pieceOf(text, spans, k, m);
    let items: unknown[];
    try {
      items = JSON.parse(piece) as unknown[];
    } catch {
      return malformedAt(text, open, spans, k);
    }
    // A piece is items joined by commas, so JSON.parse gives one value per item (an item that is not one fails above).
    if (items.length !== (m - k) / 2) return malformedAt(text, open, spans, k);
    if (scan?.literals) {
      recordLiterals(piece, items);
      for (let j = 0; j < items.length; j++) {
        const literal = typeof items[j] === 'number' ? literalOf(items, j) : undefined;
        if (literal !== undefined) recordLiteral(entry, entry.length + j, literal);
      }
      if (holdsLiterals(items)) markHolders(entry, root as object);
    }
    for (const item of items) entry.push(item);
    await pace();
  }
  return { value: root };
}

/** Marks the array and the object holding it as holders of literals below them (recordLiterals marks every holder on the way up). */
function markHolders(entry: unknown[], root: object): void {
  if (!holdsLiterals(entry)) recordLiteral(entry);
  if (!holdsLiterals(root)) recordLiteral(root);
}
