/**
 * The text behind `_text` (the narrative) and `_content` (the whole resource): words, as both
 * databases' full-text indexes store them and as the in-memory matcher compares them. A word is a run
 * of letters and digits, accents removed and case folded as string search folds them (case-fold.ts
 * foldCase: `ß` as `ss`, a final `ς` as `σ`, `ø` as `o`, `æ` as `ae`; index model 23), so `Hémoglobine
 * A1c/Total` holds the words `hemoglobine`, `a1c` and `total`, and `Søren Straße` `soren` and `strasse`.
 * Each side keeps its words in order, joined by spaces.
 */
import type { TextEntry, TextTerm } from '../store/types.ts';
import { foldCase } from './case-fold.ts';

type Json = Record<string, unknown>;

/** Words longer than this are cut (index entries stay small; a cut word still matches as a prefix). */
export const TEXT_WORD_CHARS = 64;
/** Characters of words kept per side (a long narrative is indexed on its first words; PostgreSQL's tsvector holds at most 1 MB). */
export const TEXT_MAX_CHARS = 200_000;
/** Words one `_text` or `_content` value may hold. */
export const TEXT_MAX_QUERY_WORDS = 16;

const SEPARATOR = /[^\p{L}\p{N}]+/u;
const ASCII_SEPARATOR = /[^a-z0-9]+/;
const NOT_ASCII = /[^\x00-\x7f]/;
const MARKS = /\p{M}/gu;

/** The words of `s`, in order, with repeats. */
export function textWords(s: string): string[] {
  // Most text is ASCII: lower case and an ASCII split give the same words as the Unicode path.
  const ascii = !NOT_ASCII.test(s);
  // Every mark goes (not only the Latin accents string search drops): a mark is no letter, so it would split a word.
  const folded = ascii ? s.toLowerCase() : foldCase(s.normalize('NFD').replace(MARKS, ''));
  const out: string[] = [];
  for (const w of folded.split(ascii ? ASCII_SEPARATOR : SEPARATOR)) if (w) out.push(w.length > TEXT_WORD_CHARS ? w.slice(0, TEXT_WORD_CHARS) : w);
  return out;
}

const ASCII_NON_WORD = /[^a-z0-9]+/g;
const ASCII_LONG_WORD = new RegExp(`[a-z0-9]{${TEXT_WORD_CHARS + 1}}`);

/**
 * The words of `s` joined by single spaces, at most TEXT_MAX_CHARS of them (cut at a word's end).
 * Repeats are kept: both databases' indexes keep a word once per row, and matching needs no more.
 */
function wordText(s: string): string {
  return keptWords(allWords(s));
}

/** The words of `s` joined by single spaces, all of them. */
function allWords(s: string): string {
  if (NOT_ASCII.test(s)) return textWords(s).join(' ');
  const out = s.toLowerCase().replace(ASCII_NON_WORD, ' ').trim();
  return ASCII_LONG_WORD.test(out) ? textWords(out).join(' ') : out;
}

/** The first TEXT_MAX_CHARS characters of `words` (words joined by spaces), cut at a word's end. */
function keptWords(words: string): string {
  if (words.length <= TEXT_MAX_CHARS) return words;
  const cut = words.lastIndexOf(' ', TEXT_MAX_CHARS);
  return cut > 0 ? words.slice(0, cut) : '';
}

/** Characters of text values read into the words at a time by partsWordText. */
const PARTS_BATCH = 64 * 1024;

/**
 * wordText of `parts` joined by spaces, reading only the parts the first TEXT_MAX_CHARS characters of its words
 * come from: a batch of parts at a time (a space between two parts is a word break, so the words of two batches
 * are those of their join, a word's characters and the ASCII and Unicode paths alike), until the words pass the
 * cap. The words of a CodeSystem of 100,000 concepts (6 MB of text, 200,000 characters kept) took 100-230 ms.
 */
function partsWordText(parts: string[]): string {
  const words: string[] = [];
  let length = -1;
  for (let from = 0; from < parts.length && length <= TEXT_MAX_CHARS; ) {
    let to = from;
    let chars = 0;
    while (to < parts.length && (to === from || chars < PARTS_BATCH)) chars += parts[to++]!.length + 1;
    const batch = allWords(to === from + 1 ? parts[from]! : parts.slice(from, to).join(' '));
    if (batch) {
      words.push(batch);
      length += batch.length + 1;
    }
    from = to;
  }
  return keptWords(words.join(' '));
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

/** The text of an XHTML narrative: tags dropped (each a word break), character references decoded. */
export function narrativeText(div: string): string {
  return div
    .replace(/<!--[\s\S]*?-->/g, ' ')
    .replace(/<[^>]*>/g, ' ')
    .replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-zA-Z]+);/g, (m, ref: string) => {
      if (ref[0] !== '#') return ENTITIES[ref] ?? ' ';
      const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : ' ';
    });
}

/**
 * Elements whose string values are not text a person searches for: identities and links (`id`,
 * `reference`, `url`, `system`, `profile`, `fullUrl`), the narrative's markup (its text is taken from
 * `div` on its own), attachment bytes (`data`), MIME types and the stamp in `meta`.
 */
const NOT_TEXT = new Set(['resourceType', 'id', 'reference', 'url', 'system', 'profile', 'fullUrl', 'div', 'data', 'contentType', 'meta']);
/** Dates, times and instants are searched as dates, and URIs are not prose: neither is content text. */
const NOT_PROSE = /^(?:\d{4}(?:-\d{2}(?:-\d{2})?)?(?:T[\d:.]+(?:Z|[+-]\d{2}:\d{2})?)?|\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?|[a-z][a-z0-9+.-]*:\/\/\S*|urn:\S*)$/i;

function collect(value: unknown, parts: string[]): void {
  if (typeof value === 'string') {
    if (isProse(value)) parts.push(value);
  } else if (Array.isArray(value)) {
    for (const v of value) collect(v, parts);
  } else if (value !== null && typeof value === 'object') {
    const o = value as Json;
    for (const k in o) {
      const v = o[k];
      if (k === 'text' && v !== null && typeof v === 'object' && typeof (v as Json).div === 'string') parts.push(narrativeText((v as Json).div as string));
      else if (!NOT_TEXT.has(k)) collect(v, parts);
    }
  }
}

/** Whether a string value is prose (not a date, time or URI; NOT_PROSE is tested only on what may be one). */
function isProse(v: string): boolean {
  const c = v.charCodeAt(0);
  return !((c >= 48 && c <= 57) || v.includes(':')) || !NOT_PROSE.test(v);
}

/**
 * The words of `resource` for the full-text index: `narrative` those of its own narrative
 * (`text.div`), `content` those of every text value it holds, its narrative and its contained
 * resources' included. Undefined when it holds none.
 */
export function textIndexOf(resource: Json): TextEntry | undefined {
  const text = resource.text as Json | undefined;
  const narrative = text && typeof text.div === 'string' ? narrativeText(text.div) : '';
  const parts = narrative ? [narrative] : [];
  for (const k in resource) if (k !== 'text' && !NOT_TEXT.has(k)) collect(resource[k], parts);
  // A space keeps values apart; only the values the kept words come from are read.
  const content = partsWordText(parts);
  return content ? { narrative: narrative && wordText(narrative), content } : undefined;
}

/**
 * The words of one space-free part of a `_text` or `_content` value, all of which must occur (in any
 * order, anywhere in the narrative or the resource): punctuation separates words, and a part ending in
 * `*` makes its last word a prefix of every word it starts. The value's operators and grouping are
 * read around the parts by text-query.ts.
 */
export function textPartTerms(part: string): TextTerm[] {
  const prefix = /\*+[')\]]*$/.test(part);
  const words = textWords(part);
  return words.map((word, i) => ({ word, prefix: prefix && i === words.length - 1 }));
}

/** The words of the last text matched, as a set and sorted (textMatches): one resource is often matched against many values. */
let lastWords: { text: string; set: Set<string>; sorted: string[] } | undefined;

/** The words of `text` as a set and sorted, kept for the next call with the same text. */
function wordsOfText(text: string): { set: Set<string>; sorted: string[] } {
  if (lastWords?.text !== text) {
    const set = new Set(text.split(' '));
    lastWords = { text, set, sorted: [...set].sort() };
  }
  return lastWords;
}

/** Whether a word of `sorted` (ascending, by code unit) starts with `prefix`: the first word not below it does, if any. */
function hasPrefix(sorted: string[], prefix: string): boolean {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! < prefix) lo = mid + 1;
    else hi = mid;
  }
  return lo < sorted.length && sorted[lo]!.startsWith(prefix);
}

/**
 * Whether the space-separated `words` hold every term of one value. The words of the last text are
 * kept as a set and sorted, so that matching one resource's text against many values (a write checked
 * against a tenant's Subscriptions) splits it once, and each term costs a lookup.
 */
export function textMatches(words: string, terms: TextTerm[]): boolean {
  if (!words) return false;
  const { set, sorted } = wordsOfText(words);
  return terms.every((t) => (t.prefix ? hasPrefix(sorted, t.word) : set.has(t.word)));
}
