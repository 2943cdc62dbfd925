/**
 * How ONC's Inferno US Core test kit (inferno-framework/us-core-test-kit, lib/us_core_test_kit/search_test.rb
 * and date_search_validation.rb) chooses search values from a resource and judges what a search returns,
 * written again for test/http/us-core-searches.test.ts; and how its Ruby client writes requests.
 */
import type { Json } from './fhir.ts';

const DAY = 86_400_000;

// ---------------------------------------------------------------------------------------------------
// Parameters: how a parameter's values are read out of a resource (US Core's SearchParameter
// expressions), to choose search values and to check what comes back.

type Kind = 'reference' | 'token' | 'identifier' | 'date' | 'string' | 'name' | 'address' | 'code';
export interface Param { kind: Kind; path: string }
const p = (kind: Kind, path: string): Param => ({ kind, path });
const subject = p('reference', 'subject');

export const PARAMS: Record<string, Record<string, Param>> = {
  Patient: {
    _id: p('code', 'id'), identifier: p('identifier', 'identifier'), name: p('name', 'name'), family: p('string', 'name.family'),
    given: p('string', 'name.given'), gender: p('code', 'gender'), birthdate: p('date', 'birthDate'), 'death-date': p('date', 'deceased'),
  },
  Observation: { patient: subject, category: p('token', 'category'), code: p('token', 'code'), date: p('date', 'effective'), status: p('code', 'status'), _lastUpdated: p('date', 'meta.lastUpdated') },
  Condition: {
    patient: subject, category: p('token', 'category'), 'clinical-status': p('token', 'clinicalStatus'), code: p('token', 'code'),
    'onset-date': p('date', 'onset'), 'abatement-date': p('date', 'abatement'), 'recorded-date': p('date', 'recordedDate'),
    'asserted-date': p('date', 'extension(http://hl7.org/fhir/StructureDefinition/condition-assertedDate).valueDateTime'),
    encounter: p('reference', 'encounter'), _lastUpdated: p('date', 'meta.lastUpdated'),
  },
  Encounter: {
    _id: p('code', 'id'), identifier: p('identifier', 'identifier'), patient: subject, class: p('token', 'class'), date: p('date', 'period'),
    type: p('token', 'type'), status: p('code', 'status'), location: p('reference', 'location.location'),
    'discharge-disposition': p('token', 'hospitalization.dischargeDisposition'), _lastUpdated: p('date', 'meta.lastUpdated'),
  },
  Procedure: { patient: subject, code: p('token', 'code'), date: p('date', 'performed'), status: p('code', 'status') },
  MedicationRequest: { patient: subject, intent: p('code', 'intent'), status: p('code', 'status'), authoredon: p('date', 'authoredOn'), encounter: p('reference', 'encounter') },
  MedicationDispense: { patient: subject, status: p('code', 'status'), type: p('token', 'type') },
  Immunization: { patient: p('reference', 'patient'), date: p('date', 'occurrence'), status: p('code', 'status') },
  AllergyIntolerance: { patient: p('reference', 'patient'), 'clinical-status': p('token', 'clinicalStatus') },
  CarePlan: { patient: subject, category: p('token', 'category'), status: p('code', 'status'), date: p('date', 'period') },
  CareTeam: { patient: subject, status: p('code', 'status'), role: p('token', 'participant.role') },
  DiagnosticReport: { patient: subject, category: p('token', 'category'), code: p('token', 'code'), date: p('date', 'effective'), status: p('code', 'status'), _lastUpdated: p('date', 'meta.lastUpdated') },
  DocumentReference: {
    _id: p('code', 'id'), patient: subject, category: p('token', 'category'), type: p('token', 'type'), date: p('date', 'date'),
    period: p('date', 'context.period'), status: p('code', 'status'),
  },
  Goal: { patient: subject, 'lifecycle-status': p('code', 'lifecycleStatus'), 'target-date': p('date', 'target.due'), description: p('token', 'description') },
  Device: { patient: p('reference', 'patient'), type: p('token', 'type'), status: p('code', 'status') },
  Practitioner: { _id: p('code', 'id'), name: p('name', 'name'), identifier: p('identifier', 'identifier') },
  PractitionerRole: { practitioner: p('reference', 'practitioner'), specialty: p('token', 'specialty') },
  Organization: { name: p('string', 'name'), address: p('address', 'address') },
  Location: {
    name: p('string', 'name'), address: p('address', 'address'), 'address-city': p('string', 'address.city'),
    'address-state': p('string', 'address.state'), 'address-postalcode': p('string', 'address.postalCode'),
  },
  ServiceRequest: { _id: p('code', 'id'), patient: subject, category: p('token', 'category'), code: p('token', 'code'), authored: p('date', 'authoredOn'), status: p('code', 'status') },
  Coverage: { patient: p('reference', 'beneficiary') },
  QuestionnaireResponse: { _id: p('code', 'id'), patient: subject, authored: p('date', 'authored'), status: p('code', 'status'), questionnaire: p('code', 'questionnaire') },
  Specimen: { _id: p('code', 'id'), patient: subject },
  RelatedPerson: { _id: p('code', 'id'), patient: p('reference', 'patient'), name: p('name', 'name') },
};

/** The values at a dotted path; a step names an element, a choice element by its stem, or `extension(url)`. */
export function at(node: unknown, path: string): unknown[] {
  let nodes: unknown[] = [node];
  for (const step of path.match(/extension\([^)]*\)|[^.]+/g)!) {
    const next: unknown[] = [];
    for (const n of nodes) {
      if (!n || typeof n !== 'object') continue;
      const o = n as Json;
      const ext = /^extension\((.*)\)$/.exec(step);
      const found = ext
        ? (o.extension ?? []).filter((e: Json) => e.url === ext[1])
        : step in o ? o[step] : Object.keys(o).filter((k) => k.startsWith(step) && /^[A-Z]/.test(k.slice(step.length))).map((k) => o[k]);
      for (const v of [found].flat()) if (v !== undefined) next.push(v);
    }
    nodes = next;
  }
  return nodes;
}

// Systems the kit prefers when a CodeableConcept has several codings (its WellKnownCodeSystems).
const WELL_KNOWN = ['http://loinc.org', 'http://snomed.info/sct', 'http://www.nlm.nih.gov/research/umls/rxnorm', 'http://hl7.org/fhir/sid/cvx', 'http://hl7.org/fhir/sid/icd-10-cm', 'http://www.ama-assn.org/go/cpt', 'urn:oid:2.16.840.1.113883.6.238'];

// ---------------------------------------------------------------------------------------------------
// Dates: the kit's ranges (inclusive ends, a full dateTime a point) and comparisons.

type Range = { start: number; end: number };
const isDate = (v: string) => /^\d{4}(-\d{2})?(-\d{2})?$/.test(v);

function range(v: string): Range {
  const [y, m, d] = v.split('-').map(Number) as [number, number?, number?];
  if (/^\d{4}$/.test(v)) return { start: Date.UTC(y, 0), end: Date.UTC(y + 1, 0) - 1000 };
  if (/^\d{4}-\d{2}$/.test(v)) return { start: Date.UTC(y, m! - 1), end: Date.UTC(y, m!) - 1000 };
  if (/^\d{4}-\d{2}-\d{2}$/.test(v)) return { start: Date.UTC(y, m! - 1, d!), end: Date.UTC(y, m! - 1, d! + 1) - 1000 };
  const t = Date.parse(v);
  return { start: t, end: t };
}

function compare(s: Range, t: Partial<Range>, op: string, extendStart: boolean, extendEnd: boolean): boolean {
  const eq = t.start !== undefined && t.end !== undefined && s.start <= t.start && s.end >= t.end;
  const gt = t.end === undefined || s.end < t.end || (extendEnd && s.end < t.end + DAY);
  const lt = t.start === undefined || s.start > t.start || (extendStart && s.start > t.start - DAY);
  return { eq, gt, lt, ge: gt || eq, le: lt || eq }[op] ?? false;
}

/** Whether a stored date or Period meets a date search value (`gt2019-...`), as the kit judges it. */
function dateMatches(search: string, target: unknown): boolean {
  const op = /^(eq|ne|gt|ge|lt|le|sa|eb|ap)/.exec(search)?.[1] ?? 'eq';
  const value = search.replace(/^(eq|ne|gt|ge|lt|le|sa|eb|ap)/, '');
  const s = range(value);
  if (typeof target === 'string') {
    const loose = !isDate(value) && isDate(target);
    return compare(s, range(target), op, loose, loose);
  }
  const period = target as { start?: string; end?: string };
  const t = { start: period.start ? Date.parse(period.start) : undefined, end: period.end ? range(period.end).end : undefined };
  return compare(s, t, op, !isDate(value) && isDate(period.start ?? ''), !isDate(value) && isDate(period.end ?? ''));
}

/** `v` moved by `days`, written as Ruby's DateTime#xmlschema writes it: seconds, the value's own offset. */
export function shiftDate(v: string, days: number): string {
  const offset = /([+-]\d{2}):(\d{2})$/.exec(v);
  const minutes = offset ? (offset[1]!.startsWith('-') ? -1 : 1) * (Math.abs(Number(offset[1])) * 60 + Number(offset[2])) : 0;
  const t = Date.parse(isDate(v) ? `${v.padEnd(10, '-01').slice(0, 10)}T00:00:00Z` : v) + days * DAY;
  const local = new Date(t + minutes * 60_000).toISOString().slice(0, 19);
  const sign = minutes < 0 ? '-' : '+';
  const abs = Math.abs(minutes);
  return `${local}${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

// ---------------------------------------------------------------------------------------------------
// Search values and result checks.

/**
 * The kit's search value for `name` from one resource (undefined when it has none). A Period is sent as
 * `gt` a day before its start (or `lt` a day after its end); from US Core 6.1.0 (`v6`), a date with a
 * comparator (`comparable`) and no time is sent as `gt` the day before, but for Goal's day dates.
 */
export function valueOf(type: string, name: string, r: Json, withSystem: boolean, version: 'v3' | 'v6', comparable = false): string | undefined {
  // The kit escapes a comma in a value (`Springfield Hospital\, Inc.`).
  return rawValueOf(type, name, r, withSystem, version, comparable)?.replaceAll(',', '\\,');
}

function rawValueOf(type: string, name: string, r: Json, withSystem: boolean, version: 'v3' | 'v6', comparable: boolean): string | undefined {
  const def = PARAMS[type]![name]!;
  for (const v of at(r, def.path)) {
    const o = v as Json;
    switch (def.kind) {
      case 'reference':
        if (o.reference) return o.reference;
        break;
      case 'token': {
        const codings: Json[] = o.coding ?? (o.code ? [o] : []);
        const usable = codings.filter((c) => c.code && (!withSystem || c.system));
        const c = usable.find((x) => WELL_KNOWN.includes(x.system)) ?? usable[0];
        if (c) return withSystem ? `${c.system}|${c.code}` : c.code;
        break;
      }
      case 'identifier':
        if (o.value && (!withSystem || o.system)) return withSystem ? `${o.system}|${o.value}` : o.value;
        break;
      case 'name': {
        const s = o.family ?? o.given?.[0] ?? o.text;
        if (s) return s;
        break;
      }
      case 'address': {
        const s = o.text ?? o.city ?? o.state ?? o.postalCode ?? o.country;
        if (s) return s;
        break;
      }
      case 'date':
        if (typeof v === 'object') return o.start ? `gt${shiftDate(o.start, -1)}` : `lt${shiftDate(o.end, 1)}`;
        if (version === 'v6' && comparable && (/^\d{4}(-\d{2})?$/.test(String(v)) || (/^\d{4}-\d{2}-\d{2}$/.test(String(v)) && type !== 'Goal'))) return `gt${shiftDate(String(v), -1)}`;
        return String(v);
      default:
        if (v !== '' && v !== undefined) return String(v);
    }
  }
  return undefined;
}

/** Whether `r` meets `name=value`, read as the kit reads it (SearchTest#resource_matches_param?). */
export function meets(type: string, base: string, r: Json, name: string, escaped: string): boolean {
  const def = PARAMS[type]![name]!;
  const found = at(r, def.path) as Json[];
  const value = escaped.replaceAll('\\,', ',');
  /** The values ORed by unescaped commas. */
  const alternatives = escaped.split(/(?<!\\),/).map((v) => v.replaceAll('\\,', ','));
  const lower = value.toLowerCase();
  const starts = (s: unknown) => typeof s === 'string' && s.toLowerCase().startsWith(lower);
  switch (def.kind) {
    case 'date':
      return found.some((v) => dateMatches(value, v));
    case 'name':
      return found.some((n) => [n.text, n.family, ...(n.given ?? []), ...(n.prefix ?? []), ...(n.suffix ?? [])].some(starts));
    case 'address':
      return found.some((a) => [a.text, a.city, a.state, a.postalCode, a.country].some(starts));
    case 'token': {
      const codings = found.flatMap((v) => v.coding ?? (v.code ? [v] : []));
      const [system, code] = value.includes('|') ? value.split('|') : [undefined, value];
      return codings.some((c) => c.code?.toLowerCase() === code!.toLowerCase() && (system === undefined || c.system === system));
    }
    case 'identifier':
      return found.some((i) => (value.includes('|') ? `${i.system}|${i.value}` : i.value) === value);
    case 'string': {
      const wanted = alternatives.map((v) => v.toLowerCase());
      return found.some((s) => wanted.some((w) => String(s).toLowerCase().startsWith(w)));
    }
    case 'reference': {
      if (name === 'patient') {
        const id = value.split('Patient/').pop();
        return found.some((ref) => [id, `Patient/${id}`, `${base}/Patient/${id}`].includes(ref.reference));
      }
      return found.some((ref) => alternatives.includes(ref.reference));
    }
    default:
      return found.some((v) => alternatives.includes(String(v)));
  }
}

// ---------------------------------------------------------------------------------------------------

/** A value encoded as the kit's client (fhir_client, through Addressable) writes it: `|` and `+` encoded, `,` `:` `/` not. */
const encode = (s: string) => encodeURIComponent(s).replace(/%(2C|3A|2F|40|3D|3F|24)/g, (m) => decodeURIComponent(m));
/** A search the way the kit's client sends it. */
export const query = (type: string, params: Record<string, string>) => `${type}?${Object.entries(params).map(([k, v]) => `${encode(k)}=${encode(v)}`).join('&')}`;
/** The headers the kit's client sends with every request. */
export const CLIENT_HEADERS = { Accept: 'application/fhir+json', 'Accept-Charset': 'utf-8', 'User-Agent': 'Ruby FHIR Client' };

/** The literal relative references (`Type/id`) anywhere in a resource. */
export function referencesIn(r: Json): string[] {
  const out: string[] = [];
  const walk = (n: unknown) => {
    if (Array.isArray(n)) n.forEach(walk);
    else if (n && typeof n === 'object') {
      const ref = (n as Json).reference;
      if (typeof ref === 'string' && /^[A-Z][A-Za-z]+\/[A-Za-z0-9\-.]{1,64}$/.test(ref)) out.push(ref);
      Object.values(n).forEach(walk);
    }
  };
  walk(r);
  return out;
}
