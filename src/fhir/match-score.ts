/**
 * The scoring of `Patient/$match` (src/fhir/match.ts): what a candidate Patient shares with the Patient
 * asked about, field by field, as evidence (agreement adds, disagreement subtracts), a grade
 * (extension match-grade: certain, probable, possible) and a score in 0..1 whose bands follow the grades,
 * so that ordering by score orders by grade first. The rules and weights are documented in the README
 * (`Patient/$match`); names compare as Cinder's string search compares them (normalizeString: case- and
 * accent-insensitive).
 */
import { normalizeString, soundex } from './indexer.ts';

type Json = Record<string, unknown>;

export type MatchGrade = 'certain' | 'probable' | 'possible';

/** What the scoring reads of a Patient, normalised once. */
export interface MatchFacts {
  identifiers: { system?: string; value: string }[];
  families: string[];
  givens: string[];
  birthDate?: string;
  gender?: string;
  telecoms: string[];
  postalCodes: string[];
  lines: string[];
}

/** Agreement (+) and disagreement (−) weights, field by field; each field counts once, its best agreement. */
export const WEIGHTS = {
  identifier: 0.45, identifierNoSystem: 0.15, identifierOtherSystem: 0.05, identifierConflict: -0.15,
  family: 0.15, familyPhonetic: 0.08, familyConflict: -0.1,
  given: 0.1, givenInitial: 0.04, givenConflict: -0.05,
  birthDate: 0.15, birthDatePartial: 0.05, birthDateConflict: -0.2,
  gender: 0.03, genderConflict: -0.1,
  telecom: 0.07, postalCode: 0.05, line: 0.05,
} as const;

/** Score bands of the grades: a grade's scores are `low + (high - low) × evidence`. */
export const BANDS: Record<MatchGrade, [number, number]> = { certain: [0.9, 1], probable: [0.7, 0.9], possible: [0.4, 0.7] };

/** Least evidence a `possible` match needs; less is not returned (R4's `certainly-not` is never answered). */
export const POSSIBLE_MIN = 0.2;

const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v : undefined);
/** A name part as the comparison reads it: normalised as string search does, then letters and digits only. */
const namePart = (s: string) => normalizeString(s).replace(/[^\p{L}\p{N}]/gu, '');
const distinct = (xs: (string | undefined)[]) => [...new Set(xs.filter((x): x is string => x !== undefined && x !== ''))];

/** A ContactPoint's value as compared: a phone's digits, anything else trimmed and lower-cased. */
export function telecomKey(cp: Json): string | undefined {
  const value = str(cp.value);
  if (value === undefined) return undefined;
  if (['phone', 'fax', 'pager', 'sms'].includes(cp.system as string) || /^[\d\s()+.-]+$/.test(value)) {
    const digits = value.replace(/\D/g, '');
    return digits.length >= 7 ? `tel:${digits}` : undefined;
  }
  return value.trim().toLowerCase();
}

/** A postal code as compared: letters and digits, upper case; a ZIP+4 as its ZIP. */
const postal = (s: string) => {
  const k = s.replace(/[^A-Za-z0-9]/g, '').toUpperCase();
  return /^\d{9}$/.test(k) ? k.slice(0, 5) : k;
};

/** The facts of a Patient (its JSON), tolerant of anything a lower validation level lets through. */
export function matchFacts(p: Json): MatchFacts {
  const names = arr(p.name).filter((n): n is Json => n !== null && typeof n === 'object');
  const addresses = arr(p.address).filter((a): a is Json => a !== null && typeof a === 'object');
  const birth = str(p.birthDate);
  const gender = str(p.gender);
  return {
    identifiers: arr(p.identifier).flatMap((i) => {
      const id = (i ?? {}) as Json;
      const value = str(id.value);
      const system = str(id.system);
      return value === undefined ? [] : [{ value, ...(system !== undefined && { system }) }];
    }),
    families: distinct(names.map((n) => str(n.family)).map((f) => (f === undefined ? undefined : namePart(f)))),
    givens: distinct(names.flatMap((n) => arr(n.given).map((g) => (str(g) === undefined ? undefined : namePart(g as string))))),
    ...(birth !== undefined && /^\d{4}(-\d{2}(-\d{2})?)?$/.test(birth) && { birthDate: birth }),
    ...(gender !== undefined && { gender }),
    telecoms: distinct(arr(p.telecom).map((t) => (t !== null && typeof t === 'object' ? telecomKey(t as Json) : undefined))),
    postalCodes: distinct(addresses.map((a) => str(a.postalCode)).map((c) => (c === undefined ? undefined : postal(c)))),
    lines: distinct(addresses.flatMap((a) => arr(a.line).map((l) => (str(l) === undefined ? undefined : normalizeString(l as string).replace(/[^\p{L}\p{N}]+/gu, ' ').trim())))),
  };
}

/**
 * Most values of each field of the Patient asked about that the scoring compares (identifiers, family and
 * given names, telecoms, postal codes, lines): each candidate is compared with each of them, so a Patient of
 * 40,000 names and identifiers, scored against a thousand candidates, held a request for over a minute.
 */
export const FACTS_PER_FIELD = 50;

/** `f` with at most FACTS_PER_FIELD values of each field, and the fields that had more. */
export function boundedFacts(f: MatchFacts): { facts: MatchFacts; cut: string[] } {
  const cut: string[] = [];
  const bound = <T>(name: string, xs: T[]): T[] => {
    if (xs.length <= FACTS_PER_FIELD) return xs;
    cut.push(name);
    return xs.slice(0, FACTS_PER_FIELD);
  };
  const facts: MatchFacts = {
    ...f,
    identifiers: bound('identifier', f.identifiers), families: bound('family', f.families), givens: bound('given', f.givens),
    telecoms: bound('telecom', f.telecoms), postalCodes: bound('postalCode', f.postalCodes), lines: bound('line', f.lines),
  };
  return { facts, cut };
}

/** Whether the facts carry anything a match can be found by (an identifier, a name, a telecom). */
export function matchable(f: MatchFacts): boolean {
  return f.identifiers.length > 0 || f.families.length > 0 || f.givens.length > 0 || f.telecoms.length > 0;
}

export interface MatchScore {
  grade: MatchGrade;
  /** 0..1, rounded to four decimals. */
  score: number;
}

const some = <T>(xs: T[], ys: T[], eq: (x: T, y: T) => boolean) => xs.some((x) => ys.some((y) => eq(x, y)));

/**
 * How `c` (a candidate) matches `q` (the Patient asked about): undefined when the evidence is below
 * POSSIBLE_MIN. `certain`: a business identifier of the same system and value, no field disagreeing, and
 * the family name, a given name or the birth date agreeing (or neither names nor birth date given);
 * `probable`: that identifier with one field disagreeing, or family name, given name and full birth date
 * agreeing with no identifier or gender disagreeing; `possible`: that identifier with more fields
 * disagreeing (a client about to use it should see whose it is), or any other with evidence ≥ POSSIBLE_MIN.
 */
export function scoreMatch(q: MatchFacts, c: MatchFacts): MatchScore | undefined {
  let evidence = 0;
  const conflicts: string[] = [];
  // Identifiers: the same system and value; the same value where a system is missing, or in another system;
  // the same system with another value (and none of that system the same) disagrees.
  const idExact = some(q.identifiers, c.identifiers, (a, b) => a.system !== undefined && a.system === b.system && a.value === b.value);
  if (idExact) evidence += WEIGHTS.identifier;
  else if (some(q.identifiers, c.identifiers, (a, b) => a.value === b.value && (a.system === undefined || b.system === undefined))) evidence += WEIGHTS.identifierNoSystem;
  else if (some(q.identifiers, c.identifiers, (a, b) => a.value === b.value)) evidence += WEIGHTS.identifierOtherSystem;
  // A system both have in which no value is the same: the candidate's systems with a value in common
  // found first (one pass over its identifiers, so that its own count is not squared).
  const systems = new Set(q.identifiers.map((i) => i.system).filter((s) => s !== undefined));
  const agreeing = new Set(c.identifiers.filter((b) => b.system !== undefined && q.identifiers.some((a) => a.system === b.system && a.value === b.value)).map((b) => b.system));
  const conflictingSystem = c.identifiers.some((b) => b.system !== undefined && systems.has(b.system) && !agreeing.has(b.system));
  if (conflictingSystem) { evidence += WEIGHTS.identifierConflict; conflicts.push('identifier'); }
  // Names.
  const family = some(q.families, c.families, (a, b) => a === b);
  const phonetic = !family && some(q.families, c.families, (a, b) => soundex(a) !== '' && soundex(a) === soundex(b));
  if (family) evidence += WEIGHTS.family;
  else if (phonetic) evidence += WEIGHTS.familyPhonetic;
  else if (q.families.length > 0 && c.families.length > 0) { evidence += WEIGHTS.familyConflict; conflicts.push('family'); }
  const given = some(q.givens, c.givens, (a, b) => a === b);
  if (given) evidence += WEIGHTS.given;
  else if (some(q.givens, c.givens, (a, b) => (a.length === 1 || b.length === 1) && a[0] === b[0])) evidence += WEIGHTS.givenInitial;
  else if (q.givens.length > 0 && c.givens.length > 0) { evidence += WEIGHTS.givenConflict; conflicts.push('given'); }
  // Birth date: the same date; one a part of the other (1970 and 1970-03-02); else disagreeing.
  const [qb, cb] = [q.birthDate, c.birthDate];
  const birthDate = qb !== undefined && qb === cb && qb.length === 10;
  if (qb !== undefined && cb !== undefined) {
    if (birthDate) evidence += WEIGHTS.birthDate;
    else if (qb.startsWith(cb) || cb.startsWith(qb)) evidence += WEIGHTS.birthDatePartial;
    else { evidence += WEIGHTS.birthDateConflict; conflicts.push('birthDate'); }
  }
  // Gender: male and female disagree; other and unknown neither agree nor disagree.
  if (q.gender !== undefined && q.gender === c.gender && (q.gender === 'male' || q.gender === 'female')) evidence += WEIGHTS.gender;
  else if (q.gender !== c.gender && [q.gender, c.gender].every((g) => g === 'male' || g === 'female')) { evidence += WEIGHTS.genderConflict; conflicts.push('gender'); }
  if (some(q.telecoms, c.telecoms, (a, b) => a === b || (a.startsWith('tel:') && b.startsWith('tel:') && (a.endsWith(b.slice(4)) || b.endsWith(a.slice(4)))))) evidence += WEIGHTS.telecom;
  if (some(q.postalCodes, c.postalCodes, (a, b) => a === b)) evidence += WEIGHTS.postalCode;
  if (some(q.lines, c.lines, (a, b) => a === b && a !== '')) evidence += WEIGHTS.line;

  const demographics = q.families.length > 0 || q.givens.length > 0 || qb !== undefined;
  let grade: MatchGrade | undefined;
  if (idExact && conflicts.length === 0 && (family || given || birthDate || !demographics)) grade = 'certain';
  else if ((idExact && conflicts.length <= 1) || (family && given && birthDate && !conflicts.includes('identifier') && !conflicts.includes('gender'))) grade = 'probable';
  else if (idExact || evidence >= POSSIBLE_MIN) grade = 'possible';
  if (grade === undefined) return undefined;
  const [low, high] = BANDS[grade];
  const clamped = Math.min(1, Math.max(0, evidence));
  return { grade, score: Math.round((low + (high - low) * clamped) * 10_000) / 10_000 };
}
