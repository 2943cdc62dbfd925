/**
 * Full case folding of accent-free text, shared by string search (indexer.ts normalizeString) and the
 * words of `_text` and `_content` (text-index.ts textWords), so that both fold a letter alike.
 */

const NOT_ASCII = /[^\x00-\x7f]/;
const FINAL_SIGMA = /\u03c2/g;
const SHARP_S = /\u00df/g;
const UNFOLDED = /[\u00df\u03c2]/;
/**
 * The lower-case characters whose upper case, lower-cased again, is not themselves (`ß`, `ı`, `ſ`, `µ`, `ﬁ`, Greek
 * letters with iota subscripts...) but `ß` and a final `ς`, which need only their replacement: lower-cased text holding
 * none of them folds without upper-casing (test/unit/case-fold.test.ts compares the two for every character).
 */
const CASE_UNSTABLE = /[\u00b5\u0131\u0149\u017f\u01f0\u0345\u0390\u03b0\u03d0\u03d1\u03d5\u03d6\u03f0\u03f1\u03f5\u0587\u1c80-\u1c88\u1e96-\u1e9b\u1f50\u1f52\u1f54\u1f56\u1f80-\u1f87\u1f90-\u1f97\u1fa0-\u1fa7\u1fb2-\u1fb4\u1fb6\u1fb7\u1fbe\u1fc2-\u1fc4\u1fc6\u1fc7\u1fd2\u1fd3\u1fd6\u1fd7\u1fe2-\u1fe4\u1fe6\u1fe7\u1ff2-\u1ff4\u1ff6\u1ff7\ufb00-\ufb06\ufb13-\ufb17]/;
/**
 * Latin letters whose mark Unicode does not decompose (a stroke or a bar: `ø`, `ł`, `đ`, `ħ`), and those
 * written as ligatures or kept from runes (`æ`, `œ`, `ĳ`, `ð`, `þ`), in lower case, and the letters they
 * fold to, as Lucene's ASCII folding and ICU's Latin-ASCII transliteration fold them (index model 22;
 * the full-text words since model 23).
 */
const UNDECOMPOSED: Record<string, string> = {
  '\u00e6': 'ae', '\u00f0': 'd', '\u00f8': 'o', '\u00fe': 'th', '\u0111': 'd', '\u0127': 'h', '\u0133': 'ij', '\u0140': 'l',
  '\u0142': 'l', '\u014b': 'n', '\u0153': 'oe', '\u0167': 't', '\u0180': 'b', '\u01b6': 'z', '\u0268': 'i',
};
const UNDECOMPOSED_LETTER = /[\u00e6\u00f0\u00f8\u00fe\u0111\u0127\u0133\u0140\u0142\u014b\u0153\u0167\u0180\u01b6\u0268]/g;

/** Lower-case text with UNDECOMPOSED's letters folded to theirs. */
export function foldUndecomposed(lower: string): string {
  return lower.replace(UNDECOMPOSED_LETTER, (c) => UNDECOMPOSED[c]!);
}

/**
 * Full case folding of accent-free text: upper then lower case (Unicode full case mappings), every sigma
 * `σ`, then UNDECOMPOSED's letters to theirs; text that is ASCII once its accents are gone (`Müller`) is
 * only lower-cased.
 */
export function foldCase(s: string): string {
  if (!NOT_ASCII.test(s)) return s.toLowerCase();
  const lower = s.toLowerCase();
  // Most text needs no upper-casing (which doubled the cost of the words of non-ASCII text).
  const cased = CASE_UNSTABLE.test(lower) ? s.toUpperCase().toLowerCase() : lower;
  // Left by either casing: `ς` (a sigma ending a word), `ß` (lower-cased, or of a capital `ẞ`, which upper-casing keeps).
  const folded = UNFOLDED.test(cased) ? cased.replace(FINAL_SIGMA, '\u03c3').replace(SHARP_S, 'ss') : cased;
  return foldUndecomposed(folded);
}
