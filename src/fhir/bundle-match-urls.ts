/**
 * fullUrls inside the conditions of a Bundle's entries (`request.ifNoneExist`, a conditional
 * `request.url`): `PUT Observation?subject=urn:uuid:X&code=...` names the resource of the entry whose
 * fullUrl is `urn:uuid:X`, and is searched with that resource's `Type/id` (FHIR R4 http 3.1.0.11.2
 * replaces fullUrls by the ids the transaction assigns; HAPI FHIR substitutes them in match URLs too).
 */
import { FhirError } from '../errors.ts';
import { entryPath, type Entry } from './bundle-entries.ts';
import { isUrnReference } from './references.ts';

/** The element of an entry that holds its condition. */
export function conditionElement(entry: Entry): string {
  return `${entryPath(entry)}.request.${entry.method === 'POST' ? 'ifNoneExist' : 'url'}`;
}

/** A condition's values, each a list of items split at unescaped commas (FHIR R4 search 2.1.1.1.2: `\,` is a comma in a value). */
const items = (value: string) => value.split(/(?<!\\),/);

/**
 * `query` with each value item that `lookup` knows (a fullUrl, or one relative to the FHIR base)
 * replaced by `Type/id`; values are compared decoded, so `urn%3Auuid%3A...` is found too. Undefined when
 * an item names a fullUrl `waiting` says is not resolved yet.
 */
export function withEntryIds(query: URLSearchParams, lookup: (item: string) => string | undefined, waiting: (item: string) => boolean): URLSearchParams | undefined {
  const out = new URLSearchParams();
  for (const [key, value] of query) {
    const mapped = items(value).map((item) => (waiting(item) ? undefined : lookup(item) ?? item));
    if (mapped.includes(undefined)) return undefined;
    out.append(key, mapped.join(','));
  }
  return out;
}

/**
 * The ids of a transaction's entries that are known before any condition is searched: a plain update,
 * patch or delete names its id. Their fullUrls are replaced in the entries' conditions up front, so that
 * conditional writes of one meaning wait for each other whatever fullUrl they name it by (exclusively).
 */
export function withStaticIds(entries: Entry[], base: string): void {
  const ids = new Map<string, string>();
  for (const e of entries) if (e.fullUrl && e.id && !e.condition && (e.method === 'PUT' || e.method === 'PATCH')) ids.set(e.fullUrl, `${e.type}/${e.id}`);
  if (ids.size === 0) return;
  const lookup = (item: string) => ids.get(item) ?? ids.get(`${base}/${item}`);
  for (const e of entries) if (e.condition) e.condition = withEntryIds(e.condition, lookup, () => false)!;
}

/**
 * A batch's entries are processed on their own (FHIR R4 http 3.1.0.11.1) and may not refer to each
 * other: a condition naming another entry's `urn:` fullUrl is refused, as such a reference is.
 */
export function requireNoSiblingUrns(entry: Entry, fullUrls: Set<string>): void {
  if (!entry.condition) return;
  for (const value of entry.condition.values()) {
    const urn = items(value).find((item) => isUrnReference(item) && fullUrls.has(item) && item !== entry.fullUrl);
    if (urn !== undefined) {
      throw new FhirError('invalid', `${entryPath(entry)}: condition names '${urn}', the fullUrl of another entry: the entries of a batch may not refer to each other`, {
        expression: [conditionElement(entry)],
      });
    }
  }
}
