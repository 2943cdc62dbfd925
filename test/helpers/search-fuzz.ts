/**
 * Seeded random search queries over the data of search-fuzz-data.ts, each with the answer an in-memory
 * evaluation gives: the parameter's R4 expression by HL7's FHIRPath engine (npm `fhirpath`), then
 * search.html's matching rules (and the README's choices where R4 leaves one to the server: token
 * `:text` within a text, sort keys). Every parameter type, the prefixes, the modifiers, `,` (OR), a
 * repeated parameter (AND), escapes, chains, `_has` and `_sort`.
 */
import fhirpath from 'fhirpath';
import r4model from 'fhirpath/fhir-context/r4';
import { paramsOf, type ParamDefinition } from '../../src/fhir/definitions.ts';
import { normalizeString } from '../../src/fhir/indexer.ts';
import type { Json } from './fhir.ts';
import { prng } from './prng.ts';
import { CODES, DATES, DISPLAYS, FHIR_BASE, NUMBERS, SYS, SYSTEMS, UNITS, URIS, WORDS } from './search-fuzz-data.ts';

/**
 * The `Type/id` a literal reference names on this server (README, reference): relative, this tenant's
 * absolute URL, either version-specific; another server's URL names none.
 */
export function localKey(ref: unknown): string | undefined {
  if (typeof ref !== 'string') return undefined;
  const rel = ref.startsWith(`${FHIR_BASE}/`) ? ref.slice(FHIR_BASE.length + 1) : ref;
  const m = /^([A-Z][A-Za-z]+)\/([^/]+)(?:\/_history\/[^/]+)?$/.exec(rel);
  return m ? `${m[1]}/${m[2]}` : undefined;
}
/** The type a reference names, this server's or another's (`patient` is a subject naming a Patient anywhere). */
const refType = (type: string) => `reference.matches('(^|/)${type}/[^/]+(/_history/[^/]+)?$')`;

export interface FuzzQuery {
  type: string;
  /** The query string after `Type?`, values encoded. */
  query: string;
  /** The ids it must find: in this order when `sorted`, else as a set. */
  expected: string[];
  sorted: boolean;
  count?: number;
}

/** The parameters the generator uses, per type. */
const PARAMS: Record<string, string[]> = {
  Patient: ['name', 'family', 'given', 'address-city', 'address', 'identifier', 'gender', 'birthdate', 'active', 'general-practitioner', 'email', 'telecom', '_id'],
  Practitioner: ['name', 'family', 'identifier', 'active'],
  Encounter: ['status', 'class', 'subject', 'patient', 'date', 'length', 'reason-code', 'part-of', 'participant', 'practitioner'],
  Observation: ['code', 'status', 'subject', 'patient', 'encounter', 'category', 'value-quantity', 'value-string', 'value-concept', 'date', 'identifier', 'performer', 'component-code', 'component-value-quantity', 'combo-code', 'code-value-quantity', 'component-code-value-quantity', 'code-value-string', 'code-value-concept'],
  Condition: ['code', 'clinical-status', 'subject', 'patient', 'onset-date', 'onset-age', 'recorded-date', 'encounter', 'category'],
  MedicationRequest: ['status', 'intent', 'code', 'subject', 'patient', 'authoredon', 'requester', 'encounter', 'identifier'],
  DiagnosticReport: ['code', 'status', 'subject', 'patient', 'result', 'date', 'issued', 'conclusion'],
  RiskAssessment: ['probability', 'subject'],
  Questionnaire: ['url', 'name', 'version'],
};
for (const list of Object.values(PARAMS)) list.push('_tag', '_security', '_profile', '_source');
export const FUZZ_TYPES = Object.keys(PARAMS);
const SORTABLE: Record<string, string[]> = {
  Patient: ['family', 'name', 'birthdate', 'gender', '_id', 'identifier', 'address-city'],
  Practitioner: ['family', '_id'],
  Encounter: ['date', 'status', 'subject', 'length', 'class'],
  Observation: ['date', 'code', 'status', 'value-quantity', 'subject', 'value-string', 'patient'],
  Condition: ['onset-date', 'recorded-date', 'code', 'clinical-status', 'onset-age'],
  MedicationRequest: ['authoredon', 'status', 'code', 'requester'],
  DiagnosticReport: ['date', 'issued', 'status', 'result'],
  RiskAssessment: ['probability', 'subject'],
  Questionnaire: ['url', 'name', 'version'],
};

/** The share of queries sorted (and paged): SEARCH_FUZZ_SORTED=<0..1> while hunting. */
const SORTED_SHARE = Number(process.env.SEARCH_FUZZ_SORTED ?? 0.35);

const PREFIXES = ['eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap'] as const;
type Prefix = (typeof PREFIXES)[number];

/** A test on one resource (one parameter's values, or a chain's targets). */
type Test = (r: Json) => boolean;

export class FuzzOracle {
  private readonly byKey: Map<string, Json>;
  private readonly memo = new WeakMap<Json, Map<string, unknown[]>>();
  private readonly compiledExpr = new Map<string, (r: Json) => unknown[]>();
  constructor(readonly data: Json[], readonly now: number) {
    this.byKey = new Map(data.map((r) => [`${r.resourceType}/${r.id}`, r]));
  }

  def(type: string, code: string): ParamDefinition {
    const d = paramsOf(type).find((x) => x.code === code);
    if (!d) throw new Error(`no ${type}.${code}`);
    return d;
  }

  /** The values of parameter `code` of `r` (the R4 expression, `resolve() is X` read from the literal reference). */
  values(r: Json, code: string): unknown[] {
    if (code === '_id') return [r.id];
    const memo = this.memo.get(r) ?? this.memo.set(r, new Map()).get(r)!;
    let v = memo.get(code);
    if (v === undefined) {
      const def = this.def(r.resourceType, code);
      const expression = def.expression.replace(/\.where\(resolve\(\) is ([A-Za-z]+)\)/g, (_, type: string) => `.where(${refType(type)})`);
      let fn = this.compiledExpr.get(expression);
      if (!fn) this.compiledExpr.set(expression, (fn = fhirpath.compile(expression, r4model) as unknown as (r: Json) => unknown[]));
      memo.set(code, (v = fn(r)));
    }
    return v;
  }

  resolve(ref: unknown): Json | undefined {
    const key = localKey((ref as Json)?.reference);
    return key === undefined ? undefined : this.byKey.get(key);
  }
}

// ---- value forms ------------------------------------------------------------------------------

interface Tok { system?: string; code?: string; texts: string[]; typeCodings?: { system?: string; code?: string }[]; ci?: boolean; cpSystem?: string }

function tokensOf(v: unknown): Tok[] {
  if (typeof v === 'string' || typeof v === 'number') return [{ code: String(v), texts: [] }];
  if (typeof v === 'boolean') return [{ code: String(v), texts: [] }];
  const o = v as Json;
  if (!o || typeof o !== 'object') return [];
  if ('coding' in o || 'text' in o) {
    // README: a Coding of neither code nor system beside a coded one is not indexed (its display is no :text of it)
    const coded = (o.coding ?? []).some((c: Json) => c.code !== undefined);
    const codings: Tok[] = (o.coding ?? []).filter((c: Json) => !coded || c.code !== undefined || c.system !== undefined)
      .map((c: Json) => ({ system: c.system, code: c.code, texts: c.display ? [c.display] : [] }));
    if (o.text) codings.forEach((c) => c.texts.push(o.text));
    return codings.length ? codings : [{ texts: o.text ? [o.text] : [] }];
  }
  if ('value' in o && ('system' in o || 'type' in o) && typeof o.value === 'string' && !('use' in o && 'rank' in o)) {
    if (['phone', 'email', 'fax', 'pager', 'url', 'sms', 'other'].includes(o.system)) return [{ code: o.value.toLowerCase(), ci: true, cpSystem: o.system, texts: [] }];
    return [{ system: o.system, code: o.value, texts: o.type?.text ? [o.type.text] : [], typeCodings: o.type?.coding ?? [] }];
  }
  if ('code' in o || 'system' in o || 'display' in o) return [{ system: o.system, code: o.code, texts: o.display ? [o.display] : [] }];
  return [];
}

function stringsOf(v: unknown): string[] {
  if (typeof v === 'string') return [v];
  const o = v as Json;
  if (!o || typeof o !== 'object') return [];
  return ['text', 'family', 'given', 'prefix', 'suffix', 'line', 'city', 'district', 'state', 'postalCode', 'country'].flatMap((k) =>
    typeof o[k] === 'string' ? [o[k]] : Array.isArray(o[k]) ? o[k].filter((x: unknown) => typeof x === 'string') : []);
}

type Span = [low: number, high: number];
const DATE_FORM = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/;

export function spanOf(value: string): Span | undefined {
  const m = DATE_FORM.exec(value);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, sec, frac, zone] = m;
  const offset = !zone || zone === 'Z' ? 0 : (zone[0] === '-' ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4))) * 60_000;
  const ms = frac ? Number(frac.slice(0, 3).padEnd(3, '0')) : 0;
  const start = Date.UTC(Number(y), mo ? Number(mo) - 1 : 0, d ? Number(d) : 1, h ? Number(h) : 0, mi ? Number(mi) : 0, sec ? Number(sec) : 0, ms) - offset;
  if (!mo) return [start, Date.UTC(Number(y) + 1, 0, 1)];
  if (!d) return [start, Date.UTC(Number(y), Number(mo), 1)];
  if (!h) return [start, start + 86_400_000];
  if (!sec) return [start, start + 60_000];
  return [start, start + (frac ? 10 ** (3 - Math.min(frac.length, 3)) : 1000)];
}

function dateSpan(v: unknown): Span | undefined {
  if (typeof v === 'string') return spanOf(v);
  const o = v as Json;
  if (!o || typeof o !== 'object') return undefined;
  if ('start' in o || 'end' in o) {
    const s = typeof o.start === 'string' ? spanOf(o.start) : undefined;
    const e = typeof o.end === 'string' ? spanOf(o.end) : undefined;
    return s || e ? [s?.[0] ?? -Infinity, e?.[1] ?? Infinity] : undefined;
  }
  return undefined;
}

const overlaps = (a: Span, b: Span) => a[0] < b[1] && b[0] < a[1];
const contains = (outer: Span, inner: Span) => outer[0] <= inner[0] && inner[1] <= outer[1];

function datePrefixHolds(prefix: Prefix, q: Span, t: Span, now: number): boolean {
  const below: Span = [-Infinity, q[0]];
  const above: Span = [q[1], Infinity];
  switch (prefix) {
    case 'eq': return contains(q, t);
    case 'ne': return !contains(q, t);
    case 'gt': return overlaps(above, t);
    case 'lt': return overlaps(below, t);
    case 'ge': return overlaps(above, t) || contains(q, t);
    case 'le': return overlaps(below, t) || contains(q, t);
    case 'sa': return !overlaps(q, t) && contains(above, t);
    case 'eb': return !overlaps(q, t) && contains(below, t);
    case 'ap': {
      const gap = Math.abs((q[0] + q[1]) / 2 - now) / 10;
      return overlaps([q[0] - gap, q[1] + gap], t);
    }
  }
}

/** The decimal places a number's text gives it (`5.40`: 2, `5e-1`: 1, `1e2`: -2). */
const decimalsOf = (n: string) => {
  const [mant, exp] = n.split(/[eE]/) as [string, string | undefined];
  return (mant.split('.')[1]?.length ?? 0) - Number(exp ?? 0);
};

/**
 * A number search on a target range [tl, th] (a number: tl = th), in integers at a scale finer than both:
 * `eq`/`ne` within the value's precision, the others against the value itself, `ap` 10% or the precision.
 */
function numberHolds(prefix: Prefix, value: string, tl: number, th: number): boolean {
  const digits = Math.max(decimalsOf(value), decimalsOf(String(tl)), decimalsOf(String(th)), 0) + 1;
  const scale = 10 ** digits;
  const q = Math.round(Number(value) * scale);
  const half = (5 * 10 ** -decimalsOf(value) * scale) / 10;
  const [l, h] = [tl, th].map((x) => (Number.isFinite(x) ? Math.round(x * scale) : x)) as [number, number];
  const gap = Math.max(Math.abs(q) / 10, half);
  switch (prefix) {
    case 'eq': return l >= q - half && h < q + half;
    case 'ne': return !(l >= q - half && h < q + half);
    case 'gt': return h > q;
    case 'lt': return l < q;
    case 'ge': return h >= q;
    case 'le': return l <= q;
    case 'sa': return l > q;
    case 'eb': return h < q;
    case 'ap': return l < q + gap && h >= q - gap;
  }
}

/** A number's or Range's [low, high]. */
function numberSpan(v: unknown): [number, number] | undefined {
  if (typeof v === 'number') return [v, v];
  const o = v as Json;
  if (o && typeof o === 'object' && ('low' in o || 'high' in o)) return [o.low?.value ?? -Infinity, o.high?.value ?? Infinity];
  return undefined;
}

/** UCUM canonical factors of the data's units (one unit per dimension, so a search never converts across two). */
const CANON: Record<string, number> = { kg: 1000, g: 1, mg: 0.001, cm: 0.01, 'mm[Hg]': 133_322, '/min': 1 / 60, min: 60, a: 31_557_600 };
/** Mass units by their power of ten of grams: a UCUM search converts between them (exactly, in decimal here). */
const MASS: Record<string, number> = { kg: 3, g: 0, mg: -3 };

/** `x` (a number) moved `places` decimal places, exactly, as a decimal's text. */
function shifted(x: number, places: number): string {
  const [mant, exp] = x.toExponential().split('e') as [string, string];
  return `${mant}e${Number(exp) + places}`;
}

/** The elements of `x` holding both parts of composite `code` (a code and the value its name ends with). */
function compositeElements(x: Json, code: string): Json[] {
  const elems: Json[] = code.startsWith('component') ? x.component ?? [] : [x];
  const value = code.endsWith('quantity') ? 'valueQuantity' : code.endsWith('string') ? 'valueString' : 'valueCodeableConcept';
  // a component's code of text (or display) alone is no value of the composite's token part; on the resource root
  // (code-value-quantity, code-value-concept: `code` and the value parameter ANDed) a code of text alone is
  // `code`'s value, and so counts (a disagreement of the engine's own, reported)
  const root = !code.startsWith('component') && !code.endsWith('string');
  return elems.filter((e) => (root ? e.code !== undefined : (e.code?.coding ?? []).some((c: Json) => c.code !== undefined || c.system !== undefined)) && e[value] !== undefined);
}

interface QuantityPart { prefix: Prefix; value: string; form: string; system?: string; unit?: string }

/** A quantity search's value (`bare` a number, `nosys` `n||unit`, `full` `n|system|code`) on a stored Quantity. */
function quantityHolds(p: QuantityPart, q: Json): boolean {
  if (typeof q.value !== 'number') return false;
  if (p.form === 'bare') return numberHolds(p.prefix, p.value, q.value, q.value);
  // `5||` names no unit: any (an empty part is no test)
  if (p.form === 'nosys' && !p.unit) return numberHolds(p.prefix, p.value, q.value, q.value);
  if (p.form === 'nosys') return (q.code === p.unit || q.unit === p.unit) && numberHolds(p.prefix, p.value, q.value, q.value);
  // UCUM mass: the stored amount in the searched unit (search.html: "based on canonical units")
  if (p.system === SYS.ucum && q.system === SYS.ucum && MASS[p.unit!] !== undefined && MASS[q.code] !== undefined) {
    const t = Number(shifted(q.value, MASS[q.code]! - MASS[p.unit!]!));
    return numberHolds(p.prefix, p.value, t, t);
  }
  return q.system === p.system && q.code === p.unit && numberHolds(p.prefix, p.value, q.value, q.value);
}

// ---- the generator ----------------------------------------------------------------------------

/** `\`-escapes a value's `\ , $ |` (search.html, escaping). */
const esc = (s: string) => s.replace(/[\\,$|]/g, (c) => `\\${c}`);
const enc = encodeURIComponent;

interface Clause { key: string; value: string; test: Test }

export function fuzzQueries(seed: number, count: number, oracle: FuzzOracle): FuzzQuery[] {
  const r = prng(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(r() * list.length)]!;
  const maybe = (p: number) => r() < p;
  const out: FuzzQuery[] = [];
  const ofType = (type: string) => oracle.data.filter((x) => x.resourceType === type);

  /** A value present in the data for `code` of `type`, or undefined. */
  const dataValue = (type: string, code: string): unknown => {
    const vals = ofType(type).flatMap((x) => oracle.values(x, code));
    return vals.length ? pick(vals) : undefined;
  };

  const tokenAlt = (type: string, code: string, def: ParamDefinition): { raw: string; test: (t: Tok) => boolean } => {
    const fromData = maybe(0.75) ? dataValue(type, code) : undefined;
    const toks = fromData !== undefined ? tokensOf(fromData) : [];
    const t: Tok = toks.length ? pick(toks) : { system: pick(SYSTEMS), code: pick(CODES), texts: [] };
    const primitive = typeof fromData === 'string' || typeof fromData === 'boolean';
    const codeV = t.code ?? pick(CODES);
    const form = primitive || t.ci ? pick(['code', 'code', 'nosys']) : pick(['code', 'sys|code', 'sys|code', 'nosys', 'sys|']);
    const ci = t.ci === true;
    const same = (a: string | undefined, b: string) => a !== undefined && (ci ? a.toLowerCase() === b.toLowerCase() : a === b);
    switch (form) {
      case 'code': return { raw: esc(codeV), test: (x) => same(x.code, codeV) };
      case 'nosys': return { raw: `|${esc(codeV)}`, test: (x) => (x.system === undefined || x.ci === true) && same(x.code, codeV) };
      case 'sys|': {
        const s = t.system ?? pick(SYSTEMS);
        return { raw: `${esc(s)}|`, test: (x) => x.system === s && !x.ci };
      }
      default: {
        const s = t.system ?? pick(SYSTEMS);
        return { raw: `${esc(s)}|${esc(codeV)}`, test: (x) => x.system === s && !x.ci && same(x.code, codeV) };
      }
    }
  };

  /** One parameter clause (with modifier, comma alternatives) on `type`. */
  const clause = (type: string, code: string, depth: number): Clause | undefined => {
    const def = code === '_id' ? undefined : oracle.def(type, code);
    const kind = def?.type ?? 'id';
    const vals = (x: Json) => oracle.values(x, code);
    const alts = 1 + (maybe(0.3) ? 1 + Math.floor(r() * 2) : 0);
    if (kind !== 'id' && maybe(0.08)) {
      const m = maybe(0.5);
      // a composite's value is an element holding both its parts
      const has = kind === 'composite' ? (x: Json) => compositeElements(x, code).length > 0 : (x: Json) => vals(x).length > 0;
      return { key: `${code}:missing`, value: String(m), test: (x) => !has(x) === m };
    }
    switch (kind) {
      case 'id': {
        const ids = Array.from({ length: alts }, () => (maybe(0.9) ? pick(ofType(type)).id as string : 'nope'));
        return { key: '_id', value: ids.join(','), test: (x) => ids.includes(x.id) };
      }
      case 'string': {
        const mod = pick([undefined, undefined, 'exact', 'contains']);
        const parts = Array.from({ length: alts }, () => {
          const base = maybe(0.7) ? (pick(ofType(type).flatMap((x) => vals(x).flatMap(stringsOf))) ?? pick(WORDS)) : pick(WORDS);
          const s = mod === 'exact' ? base : maybe(0.5) ? base.slice(0, 1 + Math.floor(r() * base.length)) : mod === 'contains' && base.length > 2 ? base.slice(1, -1) : base;
          return s.length ? s : base;
        });
        const test = (x: Json) => vals(x).flatMap(stringsOf).some((s) => parts.some((p) =>
          mod === 'exact' ? s.normalize('NFC') === p.normalize('NFC') : mod === 'contains' ? normalizeString(s).includes(normalizeString(p)) : normalizeString(s).startsWith(normalizeString(p))));
        return { key: mod ? `${code}:${mod}` : code, value: parts.map(esc).join(','), test };
      }
      case 'token': {
        const idents = def!.expression.includes('identifier') && !def!.expression.includes('.type');
        const mod = pick([undefined, undefined, undefined, 'not', 'text', ...(idents ? ['of-type', 'of-type'] : [])]);
        if (mod === 'text') {
          const parts = Array.from({ length: alts }, () => {
            const texts = ofType(type).flatMap((x) => vals(x).flatMap(tokensOf).flatMap((t) => t.texts));
            const base = maybe(0.8) && texts.length ? pick(texts) : pick(DISPLAYS);
            const from = Math.floor(r() * base.length / 2);
            return base.slice(from, from + 1 + Math.floor(r() * (base.length - from))) || base;
          });
          return { key: `${code}:text`, value: parts.map(esc).join(','), test: (x) => vals(x).flatMap(tokensOf).some((t) => t.texts.some((s) => parts.some((p) => normalizeString(s).includes(normalizeString(p))))) };
        }
        if (mod === 'of-type') {
          const parts = Array.from({ length: alts }, () => {
            const ids = ofType(type).flatMap((x) => vals(x)).filter((i) => (i as Json).type?.coding);
            const i = (maybe(0.8) && ids.length ? pick(ids) : { type: { coding: [{ system: SYS.v2, code: 'MR' }] }, value: 'v1' }) as Json;
            const c = i.type.coding[0];
            return { system: c.system as string, code: c.code as string, value: i.value as string };
          });
          return {
            key: `${code}:of-type`,
            value: parts.map((p) => `${esc(p.system)}|${esc(p.code)}|${esc(p.value)}`).join(','),
            test: (x) => vals(x).some((i) => parts.some((p) => (i as Json).value === p.value && ((i as Json).type?.coding ?? []).some((c: Json) => c.system === p.system && c.code === p.code))),
          };
        }
        const parts = Array.from({ length: alts }, () => tokenAlt(type, code, def!));
        const hit = (x: Json) => vals(x).flatMap(tokensOf).some((t) => parts.some((p) => p.test(t)));
        return { key: mod ? `${code}:not` : code, value: parts.map((p) => p.raw).join(','), test: mod ? (x) => !hit(x) : hit };
      }
      case 'date': {
        const parts = Array.from({ length: alts }, () => {
          const dates = ofType(type).flatMap((x) => vals(x)).flatMap((v) => (typeof v === 'string' ? [v] : [(v as Json).start, (v as Json).end].filter(Boolean)));
          let d = maybe(0.7) && dates.length ? pick(dates) as string : pick(DATES);
          if (maybe(0.3)) d = d.slice(0, pick([4, 7, 10]));
          return { prefix: pick(PREFIXES), value: d };
        });
        const test = (x: Json) => vals(x).some((v) => { const t = dateSpan(v); return t !== undefined && parts.some((p) => datePrefixHolds(p.prefix, spanOf(p.value)!, t, oracle.now)); });
        return { key: code, value: parts.map((p) => `${maybe(0.2) && p.prefix === 'eq' ? '' : p.prefix}${p.value}`).join(','), test };
      }
      case 'number': {
        const parts = Array.from({ length: alts }, () => ({ prefix: pick(PREFIXES), value: pick(['0', '0.5', '0.52', '0.55', '0.45', '0.8', '0.75', '1', '0.1', '0.05', '0.6', '0.9', '0.7', '0.2', '0.50', '1.0', '5e-1', '1e0', '0.500', '-0.1']) }));
        const test = (x: Json) => vals(x).some((v) => { const s = numberSpan(v); return s !== undefined && parts.some((p) => numberHolds(p.prefix, p.value, s[0], s[1])); });
        return { key: code, value: parts.map((p) => `${p.prefix}${p.value}`).join(','), test };
      }
      case 'quantity': {
        const parts = Array.from({ length: alts }, () => {
          const qs = ofType(type).flatMap((x) => vals(x)).filter((q) => typeof (q as Json).value === 'number') as Json[];
          const q = maybe(0.8) && qs.length ? pick(qs) : { value: pick(NUMBERS), ...pick(UNITS) };
          let value = maybe(0.3) ? String(pick(NUMBERS)) : String(q.value);
          const form = pick(['bare', 'full', 'full', 'nosys']);
          let unit = form === 'nosys' ? (maybe(0.5) ? q.unit ?? q.code : q.code ?? q.unit) : q.code;
          // the amount in another mass unit
          if (form === 'full' && q.system === SYS.ucum && MASS[q.code] !== undefined && maybe(0.5)) {
            unit = pick(Object.keys(MASS));
            value = shifted(Number(value), MASS[q.code]! - MASS[unit]!);
            if (maybe(0.5)) value = String(Number(value));
          }
          return { prefix: pick(PREFIXES), value, form: form === 'full' && (!q.system || !q.code) ? 'bare' : form, system: q.system as string | undefined, unit: unit as string | undefined };
        });
        const quantityTest = (q: Json) => parts.some((p) => quantityHolds(p, q));
        return {
          key: code,
          value: parts.map((p) => `${p.prefix}${p.value}${p.form === 'bare' ? '' : p.form === 'nosys' ? `||${esc(p.unit ?? '')}` : `|${esc(p.system!)}|${esc(p.unit!)}`}`).join(','),
          test: (x) => vals(x).some((v) => quantityTest(v as Json)),
        };
      }
      case 'uri': {
        const mod = pick([undefined, undefined, 'below', 'above']);
        const pool = [...URIS.filter((u) => !u.includes('|')), 'http://example.org/fhir/StructureDefinition/a', 'http://example.org/src', 'http://example.org/src#abc', 'http://example.org/fhir/StructureDefinition'];
        const parts = Array.from({ length: alts }, () => pick(pool));
        const test = (x: Json) => vals(x).some((u) => parts.some((p) => {
          const s = u as string;
          if (mod === 'below') return s.startsWith(p);
          if (mod === 'above') return s === p || p.startsWith(s.endsWith('/') ? s : `${s}/`);
          return s === p;
        }));
        return { key: mod ? `${code}:${mod}` : code, value: parts.map(esc).join(','), test };
      }
      case 'reference': {
        const targets = def!.targets;
        // a chain: the referenced resource of a type the data holds meets a clause of its own
        if (depth < 2 && maybe(depth === 0 ? 0.25 : 0.3)) {
          const held = targets.filter((t) => PARAMS[t] && ofType(t).length);
          if (held.length) {
            const target = pick(held);
            const innerCode = pick(PARAMS[target]!.filter((c) => c === '_id' || oracle.def(target, c).type !== 'composite'));
            const inner = clause(target, innerCode, depth + 1);
            if (!inner) return undefined;
            const typed = maybe(0.6) || held.length > 1 || targets.some((t) => t !== target && paramsOf(t).some((d) => d.code === innerCode));
            return {
              key: `${code}${typed ? `:${target}` : ''}.${inner.key}`,
              value: inner.value,
              test: (x) => vals(x).some((v) => { const t = oracle.resolve(v); return t !== undefined && t.resourceType === target && inner.test(t); }),
            };
          }
        }
        const mod = pick([undefined, undefined, undefined, 'identifier', 'Type']);
        if (mod === 'identifier') {
          // `patient:identifier` reads `subject`'s identifiers whatever their type (reported: search-compile.ts, `:identifier`)
          const idVals = (x: Json) => oracle.values(x, def!.storedAs?.param ?? code);
          const parts = Array.from({ length: alts }, () => {
            const t = tokenAlt(type, code, def!);
            const refIds = ofType(type).flatMap((x) => vals(x)).map((v) => (v as Json).identifier).filter(Boolean) as Json[];
            if (refIds.length && maybe(0.8)) {
              const i = pick(refIds);
              return { raw: `${esc(i.system)}|${esc(i.value)}`, test: (y: Json) => y.system === i.system && y.value === i.value };
            }
            return { raw: t.raw, test: (y: Json) => tokensOf(y).some(t.test) };
          });
          return { key: `${code}:identifier`, value: parts.map((p) => p.raw).join(','), test: (x) => idVals(x).some((v) => (v as Json).identifier && parts.some((p) => p.test((v as Json).identifier))) };
        }
        const refs = ofType(type).flatMap((x) => vals(x)).map((v) => (v as Json).reference).filter((s): s is string => typeof s === 'string');
        const parts = Array.from({ length: alts }, () => (refs.length && maybe(0.85) ? pick(refs) : `${pick(targets)}/${pick(['pat1', 'pra2', 'enc3', 'obs4', 'zzz'])}`));
        if (mod === 'Type') {
          const locals = parts.map(localKey).filter((k): k is string => k !== undefined);
          if (!locals.length) return undefined;
          const t = locals[0]!.split('/')[0]!;
          const bare = locals.map((p) => p.split('/')[1]!);
          return { key: `${code}:${t}`, value: bare.map(esc).join(','), test: (x) => vals(x).some((v) => bare.some((b) => localKey((v as Json).reference) === `${t}/${b}` || (v as Json).reference === `${t}/${b}`)) };
        }
        // a bare id for a reference of this server (another server's URL has none)
        const bareForm = parts.map((p) => localKey(p) !== undefined && !p.includes('/_history/') && maybe(0.3));
        return {
          key: code,
          value: parts.map((p, i) => esc(bareForm[i] ? p.split('/').pop()! : p)).join(','),
          test: (x) => vals(x).some((v) => parts.some((p, i) => {
            const ref = (v as Json).reference as string | undefined;
            if (!ref) return false;
            const key = localKey(ref);
            const asked = localKey(p);
            // another server's URL is found as written; this server's forms by the `Type/id` they name
            if (!bareForm[i]) return asked === undefined ? ref === p : key === asked;
            const [rt, rid] = (key ?? '').split('/');
            return rid === p.split('/').pop() && targets.includes(rt!);
          })),
        };
      }
      case 'composite': return compositeClause(type, code);
    }
    return undefined;
  };

  const compositeClause = (type: string, code: string): Clause | undefined => {
    const codes = ofType(type).flatMap((x) => (code.startsWith('component') ? (x.component ?? []).map((c: Json) => ({ code: c.code, value: c })) : [{ code: x.code, value: x }]));
    if (!codes.length) return undefined;
    const alts = 1 + (maybe(0.3) ? 1 : 0);
    const parts = Array.from({ length: alts }, () => {
      const el = pick(codes);
      const toks = tokensOf(el.code).filter((t) => t.code);
      const t = toks.length ? pick(toks) : { system: pick(SYSTEMS), code: pick(CODES), texts: [] };
      const withSys = t.system !== undefined && maybe(0.6);
      const tokRaw = withSys ? `${esc(t.system!)}|${esc(t.code!)}` : esc(t.code!);
      const tokTest = (c: unknown) => tokensOf(c).some((x) => x.code === t.code && (!withSys || x.system === t.system));
      if (code.endsWith('quantity')) {
        const q = (el.value.valueQuantity ?? { value: pick(NUMBERS), ...pick(UNITS) }) as Json;
        const prefix = pick(PREFIXES);
        const full = q.system && q.code && maybe(0.6);
        let [value, unit] = [String(q.value), q.code as string];
        if (full && q.system === SYS.ucum && MASS[unit] !== undefined && maybe(0.5)) {
          unit = pick(Object.keys(MASS));
          value = shifted(q.value, MASS[q.code]! - MASS[unit]!);
        }
        const p: QuantityPart = { prefix, value, form: full ? 'full' : 'bare', system: q.system, unit };
        return {
          raw: `${tokRaw}$${prefix}${value}${full ? `|${esc(q.system)}|${esc(unit)}` : ''}`,
          test: (e: Json) => tokTest(e.code) && e.valueQuantity !== undefined && quantityHolds(p, e.valueQuantity),
        };
      }
      if (code.endsWith('string')) {
        const s = (el.value.valueString as string | undefined) ?? pick(WORDS);
        const p = maybe(0.5) ? s.slice(0, 1 + Math.floor(r() * s.length)) : s;
        // the value component's expression is `value.as(string)` (R4), not value-string's CodeableConcept text
        const strs = (e: Json) => [e.valueString].filter((x): x is string => typeof x === 'string');
        return { raw: `${tokRaw}$${esc(p)}`, test: (e: Json) => tokTest(e.code) && strs(e).some((x) => normalizeString(x).startsWith(normalizeString(p))) };
      }
      const vc = el.value.valueCodeableConcept as Json | undefined;
      const vt = vc ? tokensOf(vc).filter((x) => x.code) : [];
      const v = vt.length ? pick(vt) : { code: pick(CODES), system: undefined };
      const vSys = v.system !== undefined && maybe(0.5);
      return {
        raw: `${tokRaw}$${vSys ? `${esc(v.system!)}|` : ''}${esc(v.code!)}`,
        test: (e: Json) => tokTest(e.code) && e.valueCodeableConcept !== undefined && tokensOf(e.valueCodeableConcept).some((x) => x.code === v.code && (!vSys || x.system === v.system)),
      };
    });
    const elems = (x: Json): Json[] => (code.startsWith('component') ? x.component ?? [] : [x]);
    return { key: code, value: parts.map((p) => p.raw).join(','), test: (x) => elems(x).some((e) => parts.some((p) => p.test(e))) };
  };

  /** `_has:Source:param:inner` on `type`, the inner test itself a `_has` at times. */
  const hasClause = (type: string, depth = 0): Clause | undefined => {
    const links: { source: string; param: string }[] = [];
    for (const source of FUZZ_TYPES) for (const param of PARAMS[source]!) {
      if (param === '_id') continue;
      const d = oracle.def(source, param);
      if (d.type === 'reference' && d.targets.includes(type)) links.push({ source, param });
    }
    if (!links.length) return undefined;
    const { source, param } = pick(links);
    const inner = depth === 0 && maybe(0.25) ? hasClause(source, 1) : clause(source, pick(PARAMS[source]!.filter((c) => c === '_id' || oracle.def(source, c).type !== 'reference')), 1);
    if (!inner) return undefined;
    const sources = ofType(source).filter(inner.test);
    return {
      key: `_has:${source}:${param}:${inner.key}`,
      value: inner.value,
      test: (x) => sources.some((s) => oracle.values(s, param).some((v) => localKey((v as Json).reference) === `${type}/${x.id}`)),
    };
  };

  for (let n = 0; n < count; n++) {
    const type = pick(FUZZ_TYPES);
    const clauses: Clause[] = [];
    const k = 1 + Math.floor(r() * 2.4);
    for (let i = 0; i < k; i++) {
      const c = maybe(0.12) ? hasClause(type) : clause(type, pick(PARAMS[type]!), 0);
      if (c) clauses.push(c);
      // a repeated parameter: AND of the same name
      if (c && !c.key.startsWith('_has') && !c.key.includes('.') && maybe(0.15)) {
        const again = clause(type, c.key.split(/[:.]/)[0]!, 0);
        if (again && again.key === c.key) clauses.push(again);
      }
    }
    const matching = oracle.data.filter((x) => x.resourceType === type && clauses.every((c) => c.test(x)));
    const parts = clauses.map((c) => `${c.key}=${enc(c.value)}`);
    let sorted = false;
    let expected = matching.map((x) => x.id as string).sort();
    let count: number | undefined;
    if (maybe(SORTED_SHARE)) {
      const keys = Array.from({ length: 1 + (maybe(0.3) ? 1 : 0) + (maybe(0.15) ? 1 : 0) }, () => ({ code: pick(SORTABLE[type]!), desc: maybe(0.5) }));
      parts.push(`_sort=${keys.map((s) => `${s.desc ? '-' : ''}${s.code}`).join(',')}`);
      expected = sortIds(oracle, matching, keys);
      sorted = true;
      count = 1 + Math.floor(r() * 6);
    }
    out.push({ type, query: parts.join('&'), expected, sorted, ...(count ? { count } : {}) });
  }
  return out;
}

// ---- sorting ----------------------------------------------------------------------------------

type Key = string | number | undefined;

/** A resource's sort key for `code` (README, `_sort`): its lowest value (its highest, descending). */
function sortKey(oracle: FuzzOracle, r: Json, code: string, desc: boolean): Key {
  const type = r.resourceType as string;
  if (code === '_id') return r.id;
  const def = oracle.def(type, code);
  const vals = oracle.values(r, code);
  const keys: (string | number)[] = [];
  for (const v of vals) {
    switch (def.type) {
      case 'string': keys.push(...stringsOf(v).map(normalizeString)); break;
      case 'token': keys.push(...tokensOf(v).filter((t) => t.code !== undefined || t.system !== undefined).map((t) => t.code ?? '')); break;
      case 'reference': {
        const ref = (v as Json).reference as string | undefined;
        // `patient` sorts by this server's Patients alone: another server's sorts with none (README; reported)
        if (ref && (localKey(ref) !== undefined || !def.storedAs?.target)) keys.push(localKey(ref)?.split('/')[1] ?? ref);
        break;
      }
      case 'uri': keys.push(v as string); break;
      case 'date': { const s = dateSpan(v); if (s) keys.push(desc ? s[1] : s[0]); break; }
      case 'number': { const s = numberSpan(v); if (s) keys.push(desc ? s[1] : s[0]); break; }
      case 'quantity': {
        const q = v as Json;
        if (typeof q.value !== 'number') break;
        // its value in its canonical UCUM unit (grams exactly, in decimal)
        if (q.system === SYS.ucum && MASS[q.code] !== undefined) keys.push(Number(shifted(q.value, MASS[q.code]!)));
        else keys.push(q.system === SYS.ucum && CANON[q.code] ? q.value * CANON[q.code]! : q.value);
        break;
      }
    }
  }
  if (!keys.length) return undefined;
  return keys.reduce((a, b) => ((desc ? cmp(b, a) > 0 : cmp(b, a) < 0) ? b : a));
}

function cmp(a: string | number, b: string | number): number {
  if (a === b) return 0;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  const [x, y] = [String(a), String(b)];
  return x < y ? -1 : x > y ? 1 : 0;
}

function sortIds(oracle: FuzzOracle, list: Json[], keys: { code: string; desc: boolean }[]): string[] {
  const rows = list.map((r) => ({ id: r.id as string, ks: keys.map((k) => sortKey(oracle, r, k.code, k.desc)) }));
  rows.sort((a, b) => {
    for (let i = 0; i < keys.length; i++) {
      const [x, y] = [a.ks[i], b.ks[i]];
      if (x === undefined && y === undefined) continue;
      if (x === undefined) return 1;
      if (y === undefined) return -1;
      const c = cmp(x, y);
      if (c !== 0) return keys[i]!.desc ? -c : c;
    }
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
  return rows.map((r) => r.id);
}
