/**
 * The scope of a resource's full-text row: one token for its tenant and type, written beside its words
 * (SQLite: the FTS5 column `scope`; PostgreSQL: a lexeme `#<token>` in `content`, which no word can
 * be, words being letters and digits). A search names its tenant and type's token, so the full-text
 * index answers only their rows: a word common in one type does not cost a search of another. The token
 * is a 64-bit hash; a search still checks each resource's tenant and type, so a collision could only
 * cost time, never change an answer.
 */
export function textScope(tenant: string, type: string): string {
  // FNV-1a over the UTF-16 code units, twice with different offsets (two 32-bit halves).
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  const s = `${tenant}\u0000${type}`;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193) >>> 0;
    b = Math.imul(b ^ c, 0x01000193 + 2) >>> 0;
  }
  return `s${a.toString(36).padStart(7, '0')}${b.toString(36).padStart(7, '0')}`;
}
